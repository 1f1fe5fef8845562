// Package rxbuf computes how a MANA port lays out its RX buffers: how many bytes the NIC may write,
// where the frame starts inside the buffer, how big each buffer is, how many buffers share one
// page, and how much memory a ring of them pins.
//
// Compute mirrors mana_get_rxbuf_cfg (drivers/net/ethernet/microsoft/mana/mana_en.c). Three
// upstream versions are selectable so a user can ask "what would this port do on another kernel":
//
//   - RuleUpstream: 259c4a519100 "reserve RX buffer headroom to fix forwarding performance"
//     (LL_RESERVED_SPACE headroom in both modes; fragments only where two buffers really fit).
//   - RulePreHeadroom: 730ff06d3f5c page-pool fragments, with the full-page-rx private flag
//     (5b5cb75fb86a) and the truesize fix (f73896b4197e); no headroom outside XDP.
//   - RulePreFrag: one buffer per page, headroom reserved whenever XDP could run.
//
// The numbers are the x86-64 ones (CONFIG_MAX_SKB_FRAGS=17, 64-byte cache lines); see
// reference/mana-driver.md §1–§2 for their derivation.
package rxbuf

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// Constants of the model, named after the kernel macros they stand for.
const (
	// EthHLen is ETH_HLEN.
	EthHLen = 14
	// SkbSharedInfo is SKB_DATA_ALIGN(sizeof(struct skb_shared_info)) on x86-64.
	SkbSharedInfo = 320
	// RxBufPad is MANA_RXBUF_PAD = SKB_DATA_ALIGN(sizeof(struct skb_shared_info)) + ETH_HLEN.
	RxBufPad = SkbSharedInfo + EthHLen
	// XDPPacketHeadroom is XDP_PACKET_HEADROOM.
	XDPPacketHeadroom = 256
	// LLReservedSpace is LL_RESERVED_SPACE(mana ndev) = ((14 + MANA_HEADROOM 232) & ~15) + 16.
	LLReservedSpace = 256
	// FragAlignment is MANA_RX_FRAG_ALIGNMENT.
	FragAlignment = 64
	// CacheLine is SMP_CACHE_BYTES, the unit of SKB_DATA_ALIGN.
	CacheLine = 64
	// MinMTU is the netdev min_mtu (ETH_MIN_MTU).
	MinMTU = 68
	// MaxMTU is ETH_MAX_MTU, the largest MTU any netdev can have.
	MaxMTU = 65535
	// DefaultRingSize is DEF_RX_BUFFERS_PER_QUEUE.
	DefaultRingSize = 1024
)

// Rule selects the upstream version of mana_get_rxbuf_cfg a layout follows.
type Rule uint8

// The selectable rules, newest first. The zero value is the current upstream rule.
const (
	RuleUpstream Rule = iota
	RulePreHeadroom
	RulePreFrag
)

// Rules lists every rule, newest first.
var Rules = [...]Rule{RuleUpstream, RulePreHeadroom, RulePreFrag}

// String returns the rule's name as manactl and the manad family spell it.
func (r Rule) String() string {
	switch r {
	case RuleUpstream:
		return "upstream"
	case RulePreHeadroom:
		return "pre-headroom"
	case RulePreFrag:
		return "pre-frag"
	}
	return fmt.Sprintf("rule(%d)", uint8(r))
}

// ParseRule parses a rule name. Unknown names give EINVAL.
func ParseRule(s string) (Rule, error) {
	for _, r := range Rules {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, nlerr.New(unix.EINVAL, "unknown RX buffer rule %q (want upstream, pre-headroom or pre-frag)", s)
}

// Alloc is how RX buffers are allocated: a what-if knob beside the rule, to compare the page
// pool's fragment and full-page paths with the allocate-and-free baseline that predates it.
type Alloc uint8

// The allocation modes. The zero value is what the driver does.
const (
	// AllocPagePoolFrag is the rule's own choice: page-pool fragments where it uses them, whole
	// pages where it does not.
	AllocPagePoolFrag Alloc = iota
	// AllocPagePoolPage takes one page-pool page per buffer even where the rule would carve
	// fragments (DataSize, Headroom and AllocSize stay the rule's).
	AllocPagePoolPage
	// AllocNoPool allocates every buffer by itself (BufSize bytes) and frees it when it comes
	// back: no page pool and no recycling, the pre-page-pool baseline.
	AllocNoPool
)

// Allocs lists every allocation mode.
var Allocs = [...]Alloc{AllocPagePoolFrag, AllocPagePoolPage, AllocNoPool}

// String returns the mode's name as the configuration file and manactl spell it.
func (a Alloc) String() string {
	switch a {
	case AllocPagePoolFrag:
		return "page-pool-frag"
	case AllocPagePoolPage:
		return "page-pool-page"
	case AllocNoPool:
		return "no-pool"
	}
	return fmt.Sprintf("alloc(%d)", uint8(a))
}

// ParseAlloc parses an allocation mode's name. Unknown names give EINVAL.
func ParseAlloc(s string) (Alloc, error) {
	for _, a := range Allocs {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, nlerr.New(unix.EINVAL, "unknown RX allocation mode %q (want page-pool-frag, page-pool-page or no-pool)", s)
}

// ValidPageSize reports whether n is a page size the model supports: 4K (x86), 16K and 64K
// (ARM64 kernels).
func ValidPageSize(n int) bool { return n == 4096 || n == 16384 || n == 65536 }

// ParsePageSize reads a page size as people write it: 4096, 16384, 65536, or 4K, 16K, 64K
// (also "4KB", "4KiB", any case). It is the one parser the configuration file and manactl
// share; ok is false when s is not a positive size, and ValidPageSize says whether a parsed
// size is one the model supports.
func ParsePageSize(s string) (n int, ok bool) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	for _, suffix := range []string{"KIB", "KB", "K"} {
		if rest, found := strings.CutSuffix(t, suffix); found {
			t, mult = strings.TrimSpace(rest), 1024
			break
		}
	}
	v, err := strconv.Atoi(t)
	if err != nil || v <= 0 || v > math.MaxInt32/mult {
		return 0, false
	}
	return v * mult, true
}

// XDPMTUMax is MANA_XDP_MTU_MAX: the largest MTU with which an XDP program may be attached,
// PAGE_SIZE - MANA_RXBUF_PAD - XDP_PACKET_HEADROOM (3506 / 15794 / 64946 for 4K / 16K / 64K
// pages). The headroom rule's MANA_XDP_MTU_MAX(ndev) uses max(LL_RESERVED_SPACE, 256), which is
// the same 256 for MANA, so every rule shares it.
func XDPMTUMax(pageSize int) int {
	return pageSize - RxBufPad - max(XDPPacketHeadroom, LLReservedSpace)
}

// Params are the inputs of a layout.
type Params struct {
	Rule       Rule
	PageSize   int  // PAGE_SIZE: 4096, 16384 or 65536
	MTU        int  // 68..65535
	XDP        bool // an XDP program is attached
	FullPageRx bool // private flag bit 0 (ignored by RulePreFrag, which predates it)
	RingSize   int  // rx_queue_size, buffers per RX queue; 0 means DefaultRingSize
	Queues     int  // RX queues; 0 means 1
	Alloc      Alloc
}

// Layout is the RX buffer configuration of one port (or one hypothetical port) and the memory it
// pins. Sizes are in bytes.
type Layout struct {
	Params

	// DataSize is the DMA length the NIC may write: MTU + ETH_HLEN.
	DataSize int
	// Headroom is where the frame starts inside the buffer.
	Headroom int
	// AllocSize is mana's alloc_size: the fragment size in fragment mode, PAGE_SIZE << Order in
	// single-buffer mode (after the truesize fix); it is what truesize is built from.
	AllocSize int
	// BufSize is the stride of one buffer inside a pool page: AllocSize in fragment mode,
	// PageBytes in single-buffer mode.
	BufSize int
	// FragCount is the number of buffers carved from one page (1 in single-buffer mode).
	FragCount int
	// Order is the page_pool order, get_order(alloc).
	Order int
	// PageBytes is the size of one page-pool page, PAGE_SIZE << Order (for RulePreFrag jumbo
	// frames, which came from napi_alloc_frag, the 64-byte aligned buffer size).
	PageBytes int
	// PoolSize is page_pool_params.pool_size: rx_queue_size / frag_count + 1 (rx_queue_size for
	// RulePreFrag).
	PoolSize int
	// Single is true when each buffer has a page to itself.
	Single bool
	// Reason says why the port is in single-buffer or fragment mode.
	Reason string

	// PagesPerQueue is the number of pool pages a full ring of RingSize posted buffers pins.
	PagesPerQueue int
	// BytesPerQueue is PagesPerQueue * PageBytes.
	BytesPerQueue int64
	// BytesTotal is BytesPerQueue * Queues.
	BytesTotal int64
}

// skbDataAlign is SKB_DATA_ALIGN.
func skbDataAlign(n int) int { return alignUp(n, CacheLine) }

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// getOrder is the kernel's get_order(size) for pages of pageSize bytes: the smallest order with
// pageSize << order >= size.
func getOrder(size, pageSize int) int {
	if size <= pageSize {
		return 0
	}
	return bits.Len(uint((size - 1) / pageSize))
}

// Validate checks p without computing a layout. The errors are those the port would give for the
// same values: EINVAL for an unsupported page size, MTU or ring size; EOPNOTSUPP with the driver's
// "XDP: mtu too large" when an XDP program could not run at this MTU.
func (p Params) Validate() error {
	switch {
	case !ValidPageSize(p.PageSize):
		return nlerr.New(unix.EINVAL, "page size %d not supported (want 4096, 16384 or 65536)", p.PageSize)
	case p.MTU < MinMTU:
		return nlerr.New(unix.EINVAL, "MTU %d less than device minimum %d", p.MTU, MinMTU)
	case p.MTU > MaxMTU:
		return nlerr.New(unix.EINVAL, "MTU %d greater than device maximum %d", p.MTU, MaxMTU)
	case p.RingSize < 0:
		return nlerr.New(unix.EINVAL, "ring size %d is negative", p.RingSize)
	case p.Queues < 0:
		return nlerr.New(unix.EINVAL, "queue count %d is negative", p.Queues)
	case p.Rule > RulePreFrag:
		return nlerr.New(unix.EINVAL, "unknown RX buffer rule %d", p.Rule)
	case p.Alloc > AllocNoPool:
		return nlerr.New(unix.EINVAL, "unknown RX allocation mode %d", p.Alloc)
	case p.XDP && p.MTU > XDPMTUMax(p.PageSize):
		// mana_xdp_set: netdev_err "XDP: mtu:%u too large, mtu_max:%lu", extack "XDP: mtu too large".
		return nlerr.New(unix.EOPNOTSUPP, "XDP: mtu too large")
	}
	return nil
}

// Compute returns the layout for p, or the error Validate gives.
func Compute(p Params) (Layout, error) {
	if err := p.Validate(); err != nil {
		return Layout{}, err
	}
	if p.RingSize == 0 {
		p.RingSize = DefaultRingSize
	}
	if p.Queues == 0 {
		p.Queues = 1
	}
	l := Layout{Params: p, DataSize: p.MTU + EthHLen}
	switch p.Rule {
	case RuleUpstream:
		l.upstream()
	case RulePreHeadroom:
		l.preHeadroom()
	case RulePreFrag:
		l.preFrag()
	}
	switch {
	case p.Alloc == AllocNoPool:
		// One allocation of the buffer's stride per buffer, no pool.
		if !l.Single {
			l.PageBytes = l.AllocSize
		}
		l.BufSize, l.FragCount, l.PoolSize = l.PageBytes, 1, 0
		l.PagesPerQueue = p.RingSize
		l.Reason += "; rx_alloc no-pool: every buffer allocated and freed by itself"
	case p.Alloc == AllocPagePoolPage && !l.Single:
		l.BufSize, l.FragCount, l.PoolSize = l.PageBytes, 1, p.RingSize+1
		l.PagesPerQueue = p.RingSize
		l.Reason += "; rx_alloc page-pool-page: one page per buffer"
	case l.Single:
		l.BufSize = l.PageBytes
		l.PagesPerQueue = p.RingSize
	default:
		l.BufSize = l.AllocSize
		l.PagesPerQueue = (p.RingSize + l.FragCount - 1) / l.FragCount
	}
	l.BytesPerQueue = int64(l.PagesPerQueue) * int64(l.PageBytes)
	l.BytesTotal = l.BytesPerQueue * int64(p.Queues)
	return l, nil
}

// MustCompute is Compute for parameters known to be valid; it panics otherwise.
func MustCompute(p Params) Layout {
	l, err := Compute(p)
	if err != nil {
		panic(err)
	}
	return l
}

// upstream mirrors mana_get_rxbuf_cfg after 259c4a519100 (mana_get_rxbuf_headroom,
// mana_get_rxbuf_size, mana_use_single_rxbuf_per_page).
func (l *Layout) upstream() {
	p := l.Params
	l.Headroom = LLReservedSpace
	if p.XDP {
		l.Headroom = max(LLReservedSpace, XDPPacketHeadroom)
	}
	bufSize := alignUp(skbDataAlign(p.MTU+RxBufPad+l.Headroom), FragAlignment)
	switch {
	case p.FullPageRx:
		l.Reason = "full-page-rx private flag is on"
	case p.XDP:
		l.Reason = "an XDP program is attached"
	case p.PageSize/bufSize < 2:
		l.Reason = fmt.Sprintf("fewer than 2 buffers of %d bytes (MTU %d + pad %d + headroom %d) fit in a %d-byte page",
			bufSize, p.MTU, RxBufPad, l.Headroom, p.PageSize)
	default:
		l.fragments(bufSize)
		return
	}
	alloc := skbDataAlign(p.MTU + RxBufPad + l.Headroom)
	if p.XDP {
		alloc = p.PageSize
	}
	l.single(alloc)
}

// preHeadroom mirrors mana_get_rxbuf_cfg of 730ff06d3f5c with mana_use_single_rxbuf_per_page
// (full-page-rx) and the truesize fix f73896b4197e.
func (l *Layout) preHeadroom() {
	p := l.Params
	switch {
	case p.FullPageRx:
		l.Reason = "full-page-rx private flag is on"
	case p.XDP:
		l.Reason = "an XDP program is attached"
	case p.MTU+RxBufPad > p.PageSize/2:
		l.Reason = fmt.Sprintf("MTU %d + pad %d = %d exceeds half a %d-byte page", p.MTU, RxBufPad, p.MTU+RxBufPad, p.PageSize)
	default:
		l.Headroom = 0
		l.fragments(alignUp(skbDataAlign(p.MTU+RxBufPad), FragAlignment))
		return
	}
	alloc := skbDataAlign(p.MTU + RxBufPad)
	if p.XDP {
		l.Headroom = XDPPacketHeadroom
		alloc = p.PageSize
	}
	l.single(alloc)
}

// preFrag mirrors mana_get_rxbuf_cfg before 730ff06d3f5c: always one buffer per page, with
// XDP_PACKET_HEADROOM reserved whenever an XDP program could run at this MTU.
func (l *Layout) preFrag() {
	p := l.Params
	l.Headroom = XDPPacketHeadroom
	if p.MTU > XDPMTUMax(p.PageSize) {
		l.Headroom = 0
	}
	alloc := skbDataAlign(p.MTU + RxBufPad + l.Headroom)
	l.Single, l.FragCount = true, 1
	l.Reason = "the pre-frag rule always uses one buffer per page"
	l.PoolSize = p.RingSize
	if alloc <= p.PageSize {
		l.AllocSize, l.PageBytes = p.PageSize, p.PageSize
		return
	}
	// Larger buffers came from napi_alloc_frag/netdev_alloc_frag, not the page pool; the model
	// charges the buffer itself.
	l.AllocSize, l.PageBytes = alloc, alloc
	l.Order = getOrder(alloc, p.PageSize)
}

func (l *Layout) single(alloc int) {
	l.Single, l.FragCount = true, 1
	l.Order = getOrder(alloc, l.PageSize)
	l.AllocSize = l.PageSize << l.Order
	l.PageBytes = l.AllocSize
	l.PoolSize = l.RingSize + 1
}

func (l *Layout) fragments(bufSize int) {
	l.FragCount = l.PageSize / bufSize
	l.AllocSize = bufSize
	l.PageBytes = l.PageSize
	l.PoolSize = l.RingSize/l.FragCount + 1
	l.Reason = fmt.Sprintf("%d buffers of %d bytes fit in a %d-byte page", l.FragCount, bufSize, l.PageSize)
}

// SameBuffers reports whether two layouts produce interchangeable RX buffers (what
// mana_get_rxbuf_pre checks before handing a pre-allocated buffer to a queue).
func (l Layout) SameBuffers(o Layout) bool {
	return l.DataSize == o.DataSize && l.AllocSize == o.AllocSize && l.Headroom == o.Headroom &&
		l.FragCount == o.FragCount && l.PageBytes == o.PageBytes
}
