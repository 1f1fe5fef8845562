package pagepool

import (
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// DefaultReturnRingSize is the return ring capacity when Config leaves it
	// 0; the kernel's ptr_ring default when pool_size is 0 is also 1024.
	DefaultReturnRingSize = 1024
	// MaxReturnRingSize bounds Config.ReturnRingSize.
	MaxReturnRingSize = 1 << 20
	// DefaultReleaseInterval is the deferred-destroy retry period, the
	// kernel's DEFER_TIME.
	DefaultReleaseInterval = time.Second
	// DefaultStallWarn is the stalled-destroy warning period, the kernel's
	// DEFER_WARN_INTERVAL.
	DefaultStallWarn = 60 * time.Second

	// refillBatch is how many returned buffers the owner takes back per
	// empty-cache event (PP_ALLOC_CACHE_REFILL).
	refillBatch = 64
	// publishEvery is how many fast-path operations may pass before the owner
	// publishes its counters for Stats. A power of two.
	publishEvery = 256
)

// Config describes one page pool. The zero values of ReturnRingSize, Logger,
// ReleaseInterval and StallWarn select defaults.
type Config struct {
	Mem       *Memory // required: the port's page allocator
	PageBytes int     // bytes of one pool page (page_size << order); 1..MaxPageBytes
	// BufSize is the stride of one buffer: FragCount*BufSize <= PageBytes, and
	// BufSize == PageBytes when FragCount == 1.
	BufSize   int
	FragCount int // buffers per page, >= 1
	// ReturnRingSize is the capacity of the MPSC return ring, rounded up to a
	// power of two; 0 means DefaultReturnRingSize; at most MaxReturnRingSize.
	ReturnRingSize int
	Name           string       // for logs and errors, e.g. "eth0/rx3"
	Logger         *slog.Logger // nil means slog.Default()
	// ReleaseInterval is the deferred-destroy retry period; 0 means
	// DefaultReleaseInterval (the kernel's DEFER_TIME, 1s).
	ReleaseInterval time.Duration
	// StallWarn is the warning period for a stalled destroy; 0 means
	// DefaultStallWarn (the kernel's 60s).
	StallWarn time.Duration
	// Order is the page order: PageBytes is the system page size << Order.
	// It only decides which counter a new page goes to (AllocSlow for order
	// 0, AllocSlowHighOrder above, as the kernel's slow path splits them);
	// 0..MaxOrder.
	Order int
	// NoRecycle turns recycling off, as drivers did before page_pool
	// recycling (mvneta before 2021): a buffer given back is never handed
	// out again, and a page goes back to Memory as soon as every one of its
	// buffers was handed out and given back (counted in ReleasedRefcnt).
	NoRecycle bool
}

// MaxOrder bounds Config.Order (the kernel's MAX_PAGE_ORDER is 10).
const MaxOrder = 10

// normalize validates c and fills in defaults. Every error wraps unix.EINVAL.
func (c Config) normalize() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("pagepool: invalid config: "+format+": %w", append(args, unix.EINVAL)...)
	}
	switch {
	case c.Mem == nil:
		return bad("Mem is required")
	case c.PageBytes <= 0 || c.PageBytes > MaxPageBytes:
		return bad("PageBytes %d out of range 1..%d", c.PageBytes, MaxPageBytes)
	case c.FragCount < 1:
		return bad("FragCount %d must be at least 1", c.FragCount)
	case c.BufSize <= 0:
		return bad("BufSize %d must be positive", c.BufSize)
	case c.FragCount == 1 && c.BufSize != c.PageBytes:
		return bad("BufSize %d must equal PageBytes %d in full-page mode (FragCount 1)", c.BufSize, c.PageBytes)
	case c.BufSize > c.PageBytes || c.FragCount > c.PageBytes/c.BufSize: // no overflowing product
		return bad("FragCount %d x BufSize %d exceeds PageBytes %d", c.FragCount, c.BufSize, c.PageBytes)
	case c.ReturnRingSize < 0 || c.ReturnRingSize > MaxReturnRingSize:
		return bad("ReturnRingSize %d out of range 0..%d", c.ReturnRingSize, MaxReturnRingSize)
	case c.ReleaseInterval < 0:
		return bad("ReleaseInterval %v must not be negative", c.ReleaseInterval)
	case c.StallWarn < 0:
		return bad("StallWarn %v must not be negative", c.StallWarn)
	case c.Order < 0 || c.Order > MaxOrder:
		return bad("Order %d out of range 0..%d", c.Order, MaxOrder)
	}
	if c.ReturnRingSize == 0 {
		c.ReturnRingSize = DefaultReturnRingSize
	}
	c.ReturnRingSize = 1 << bits.Len(uint(c.ReturnRingSize-1))
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ReleaseInterval == 0 {
		c.ReleaseInterval = DefaultReleaseInterval
	}
	if c.StallWarn == 0 {
		c.StallWarn = DefaultStallWarn
	}
	return c, nil
}

// bufState is the owner-side state of a buffer descriptor.
type bufState uint8

const (
	stateInvalid  bufState = iota // zero value: never handed out by a pool
	stateFree                     // in the owner cache (or on a page of a destroyed pool)
	stateOut                      // handed out by Alloc/AllocBulk
	stateReleased                 // its page went back to Memory
)

// page is one pool page and the descriptors of its FragCount slots.
type page struct {
	// refs counts this page's buffers that are out. It is maintained only
	// after Destroy (by the releaser); while the pool is live, Shrink derives
	// it from the descriptor states instead, which keeps a dependent
	// read-modify-write of the page off every Alloc and Recycle.
	refs int
	// retired counts the buffers given back while recycling is off
	// (Config.NoRecycle); the page is released when all were.
	retired int
	idx     int    // position in Pool.pages
	id      uint64 // unique per Memory
	mem     []byte
	bufs    []Buffer
}

// Buffer is one RX buffer: BufSize bytes at Offset() inside a page. The
// descriptor is owned by the pool (pre-allocated per page slot), so Alloc
// allocates nothing. A Buffer is valid from Alloc until it is given back with
// Recycle or Put; using it afterwards is a programming error.
type Buffer struct {
	data  []byte
	page  *page
	pool  *Pool
	off   int
	gen   uint32 // bumped on every hand-out; lets the owner spot stale returns
	state bufState
}

// Bytes returns the buffer's memory; len == cap == BufSize, so appends and
// writes can never spill into a neighbouring fragment.
func (b *Buffer) Bytes() []byte { return b.data }

// Pool returns the pool the buffer belongs to.
func (b *Buffer) Pool() *Pool { return b.pool }

// Offset returns the buffer's offset within its page (slot index * BufSize).
func (b *Buffer) Offset() int { return b.off }

// PageID returns the identifier of the buffer's page, unique among all pages
// of the pool's Memory for the Memory's lifetime.
func (b *Buffer) PageID() uint64 { return b.page.id }

// counters are the owner's plain statistics. Only allocs and recycles move
// on the fast path; the rest change on slow-path events.
type counters struct {
	allocs, recycles, drained uint64
	allocFails                uint64
	pageAllocs, pageReleases  uint64
	// Slow-path allocation events, each serving one Alloc (or one buffer of
	// an AllocBulk): a new page of order 0 or above, a refill from the
	// return ring; and refills that found the ring empty.
	allocSlow, allocSlowHO, allocRefill, allocEmpty uint64
	// With NoRecycle: buffers given back with Recycle (and so neither
	// recycled nor drained), and pages released because all their buffers
	// were given back.
	retired, releasedRefcnt uint64
}

// published is the copy of counters other goroutines read, under a sequence
// lock written only by the owner.
type published struct {
	seq                                             atomic.Uint64
	allocs, recycles, drained, allocFails           atomic.Uint64
	pageAllocs, pageReleases                        atomic.Uint64
	allocSlow, allocSlowHO, allocRefill, allocEmpty atomic.Uint64
	retired, releasedRefcnt                         atomic.Uint64
	pages                                           atomic.Int64
}

const (
	phaseLive       int32 = iota
	phaseDestroying       // Destroy ran, buffers still in flight
	phaseReleased         // every buffer back, every page released
)

// Pool is a page pool for one RX queue (page_pool analogue). See the package
// documentation for the ownership rules and the recycling design.
type Pool struct {
	cfg    Config
	prefix string // "pagepool <name>" for messages
	mem    *Memory
	log    *slog.Logger

	// Owner-only state.
	cache []*Buffer // LIFO of free descriptors (alloc.cache analogue)
	ctr   counters
	// pubCtr and pubPages are what the last publish stored, so that FlushStats can skip a
	// publish that would store the same (owner only, as ctr).
	pubCtr   counters
	pubPages int
	pages    []*page
	dead     bool     // Destroy was called
	rel      *Release // set by Destroy
	ovSpare  []retEntry

	_ [cacheLine]byte

	ring returnRing

	ovMu     sync.Mutex
	overflow []retEntry   // puts that found the ring full
	ovLen    atomic.Int64 // len(overflow), readable without ovMu
	ovTotal  atomic.Uint64

	phase atomic.Int32
	wake  chan struct{} // set by Destroy; Put pokes the releaser through it

	pinned atomic.Int64
	pub    published
}

// New validates cfg and returns an empty pool (no pages yet). An invalid cfg
// returns an error wrapping unix.EINVAL that names the offending field.
func New(cfg Config) (*Pool, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	p := &Pool{cfg: c, prefix: "pagepool", mem: c.Mem, log: c.Logger}
	if c.Name != "" {
		p.prefix = "pagepool " + c.Name
	}
	p.ring.init(c.ReturnRingSize)
	return p, nil
}

// Config returns the pool's configuration with defaults filled in
// (ReturnRingSize rounded up, Logger, ReleaseInterval and StallWarn set). Any
// goroutine.
func (p *Pool) Config() Config { return p.cfg }

// Alloc hands out one buffer. Owner only. It takes from the owner cache; when
// the cache is empty it drains up to 64 returned buffers from the return ring
// (page_pool_refill_alloc_cache), and only when that finds nothing it takes a
// new page from Memory, which in fragment mode yields FragCount buffers: one
// returned, the rest cached. When Memory refuses the page it returns an error
// wrapping unix.ENOMEM and the pool is unchanged. Alloc after Destroy panics.
func (p *Pool) Alloc() (*Buffer, error) {
	n := len(p.cache) - 1
	if n < 0 {
		return p.allocSlow()
	}
	b := p.cache[n]
	p.cache = p.cache[:n]
	b.state = stateOut
	b.gen++
	p.ctr.allocs++
	if p.ctr.allocs%publishEvery == 0 {
		p.publish()
	}
	return b, nil
}

func (p *Pool) allocSlow() (*Buffer, error) {
	k, err := p.fill()
	if err != nil {
		p.ctr.allocFails++
		p.publish()
		return nil, err
	}
	p.countFill(k, 1)
	p.publish()
	return p.Alloc() // the cache is not empty now, so this is the fast path
}

// fillKind is how fill made the cache non-empty.
type fillKind uint8

const (
	fillRefill fillKind = iota // buffers taken back from the return ring
	fillPage                   // a new page from Memory
	numFillKinds
)

// fill makes the cache non-empty: returned buffers first, a new page last.
// The caller counts the event with countFill once it handed a buffer out.
func (p *Pool) fill() (fillKind, error) {
	if p.dead {
		panic(p.prefix + ": Alloc after Destroy")
	}
	if p.refill(refillBatch) == 0 {
		p.ctr.allocEmpty++ // page_pool_refill_alloc_cache: __ptr_ring_empty
	}
	if len(p.cache) > 0 { // without recycling, what came back was released instead
		return fillRefill, nil
	}
	return fillPage, p.addPage()
}

// countFill counts n allocations served by fill events of kind k.
func (p *Pool) countFill(k fillKind, n uint64) {
	switch {
	case k == fillRefill:
		p.ctr.allocRefill += n
	case p.cfg.Order > 0:
		p.ctr.allocSlowHO += n
	default:
		p.ctr.allocSlow += n
	}
}

// AllocBulk fills dst with len(dst) buffers, all or nothing: on error every
// buffer taken so far goes back to the cache (not counted as allocated or
// recycled), dst is cleared and the error (wrapping unix.ENOMEM) is returned.
// Pages taken from Memory before the failure stay in the pool. Owner only;
// used to pre-allocate a whole RX ring.
func (p *Pool) AllocBulk(dst []*Buffer) error { return p.allocBulk(dst, true) }

// TryAllocBulk is AllocBulk for a caller that, when it fails, allocates the buffers one by
// one instead (Port.ReceiveWhole falls back to receiving a superframe's segments frame by
// frame): the failure is not counted in AllocFails, as the Alloc that then fails counts it, and
// counting both would count one event twice. Owner only.
func (p *Pool) TryAllocBulk(dst []*Buffer) error { return p.allocBulk(dst, false) }

func (p *Pool) allocBulk(dst []*Buffer, countFail bool) error {
	var fills [numFillKinds]uint64
	for i := range dst {
		if len(p.cache) == 0 {
			k, err := p.fill()
			if err != nil {
				p.unwind(dst[:i])
				if countFail {
					p.ctr.allocFails++
				}
				p.publish()
				return fmt.Errorf("%s: bulk allocation of %d buffers failed after %d: %w", p.prefix, len(dst), i, err)
			}
			fills[k]++
		}
		n := len(p.cache) - 1
		b := p.cache[n]
		p.cache = p.cache[:n]
		b.state = stateOut
		b.gen++
		dst[i] = b
	}
	p.ctr.allocs += uint64(len(dst))
	for k, n := range fills {
		p.countFill(fillKind(k), n)
	}
	p.publish()
	return nil
}

// unwind gives back buffers taken by a failed AllocBulk, newest first so the
// cache ends up as it was.
func (p *Pool) unwind(taken []*Buffer) {
	for i := len(taken) - 1; i >= 0; i-- {
		b := taken[i]
		b.state = stateFree
		p.cache = append(p.cache, b)
		taken[i] = nil
	}
}

// Recycle gives a buffer back on the owner, straight into the cache
// (page_pool_recycle_direct analogue); with NoRecycle it retires the buffer
// instead. Owner only. A nil or foreign buffer, a buffer that is not out
// (double free) and Recycle after Destroy panic.
func (p *Pool) Recycle(b *Buffer) {
	if b == nil || b.pool != p || b.state != stateOut || p.dead {
		p.badReturn(b, "Recycle")
	}
	if p.cfg.NoRecycle {
		p.ctr.retired++
		p.retire(b)
		if p.ctr.retired%publishEvery == 0 {
			p.publish()
		}
		return
	}
	b.state = stateFree
	p.cache = append(p.cache, b)
	p.ctr.recycles++
	if p.ctr.recycles%publishEvery == 0 {
		p.publish()
	}
}

// Put gives a buffer back from any goroutine, through the return ring (or the
// overflow list when the ring is full; a buffer is never lost). It is safe
// after Destroy: that is how in-flight buffers come home. A nil or foreign
// buffer, a buffer that is visibly not out, and a Put after the release
// completed (which can only be a double free) panic; other double frees are
// caught by the owner when it drains the ring.
func (p *Pool) Put(b *Buffer) {
	if b == nil || b.pool != p || b.state != stateOut {
		p.badReturn(b, "Put")
	}
	if p.phase.Load() == phaseReleased {
		panic(fmt.Sprintf("%s: Put of page %d offset %d after the pool was released (double free)", p.prefix, b.page.id, b.off))
	}
	e := retEntry{b: b, gen: b.gen}
	if !p.ring.push(e) {
		p.overflowPush(e)
	}
	// A Destroy that ran before this point either drains the entry itself
	// (it stores phase before draining, and both are sequentially consistent
	// atomics) or we see its phase here and wake the releaser.
	if p.phase.Load() != phaseLive {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func (p *Pool) overflowPush(e retEntry) {
	p.ovMu.Lock()
	p.overflow = append(p.overflow, e)
	p.ovLen.Store(int64(len(p.overflow)))
	// Counted before the owner can drain it (under ovMu), so that Stats never sees more
	// buffers drained than put.
	p.ovTotal.Add(1)
	p.ovMu.Unlock()
}

func (p *Pool) badReturn(b *Buffer, op string) {
	switch {
	case b == nil:
		panic(fmt.Sprintf("%s: %s(nil)", p.prefix, op))
	case b.pool != p:
		owner := "no pool"
		if b.pool != nil {
			owner = b.pool.prefix
		}
		panic(fmt.Sprintf("%s: %s of a foreign buffer (it belongs to %s)", p.prefix, op, owner))
	case p.dead && op == "Recycle":
		panic(fmt.Sprintf("%s: Recycle after Destroy (use Put for buffers returned after Destroy)", p.prefix))
	case b.state == stateFree:
		panic(fmt.Sprintf("%s: %s of page %d offset %d, which is already back in the pool (double free)", p.prefix, op, b.page.id, b.off))
	case b.state == stateReleased:
		panic(fmt.Sprintf("%s: %s of page %d offset %d, whose page was already released (use after free)", p.prefix, op, b.page.id, b.off))
	default:
		panic(fmt.Sprintf("%s: %s of a buffer in state %d", p.prefix, op, b.state))
	}
}

// refill takes back up to max buffers from the return ring, then from the
// overflow list when the ring had fewer. Owner only (or the releaser after
// Destroy). It returns how many it took.
func (p *Pool) refill(max int) int {
	n := 0
	for n < max {
		e, ok := p.ring.pop()
		if !ok {
			break
		}
		p.takeBack(e)
		n++
	}
	if n > 0 {
		p.ring.release()
	}
	if n < max && p.ovLen.Load() > 0 {
		p.ovMu.Lock()
		list := p.overflow
		p.overflow = p.ovSpare[:0]
		p.ovLen.Store(0)
		p.ovMu.Unlock()
		for i, e := range list {
			p.takeBack(e)
			list[i] = retEntry{}
		}
		n += len(list)
		p.ovSpare = list[:0]
	}
	p.ctr.drained += uint64(n)
	return n
}

// takeBack accounts one buffer returned through the ring.
func (p *Pool) takeBack(e retEntry) {
	b := e.b
	if b.state != stateOut || b.gen != e.gen {
		panic(fmt.Sprintf("%s: Put of page %d offset %d, which was already back in the pool (double free, or Put after Recycle)",
			p.prefix, b.page.id, b.off))
	}
	if p.dead {
		b.state = stateFree
		if pg := b.page; pg.decRef() == 0 {
			p.releasePage(pg)
		}
		return
	}
	if p.cfg.NoRecycle {
		p.retire(b)
		return
	}
	b.state = stateFree
	p.cache = append(p.cache, b)
}

// retire takes a buffer back without recycling it (Config.NoRecycle): it is
// not cached, and its page goes back to Memory once every buffer of the page
// was handed out and given back. Owner only, pool live.
func (p *Pool) retire(b *Buffer) {
	b.state = stateFree
	pg := b.page
	if pg.retired++; pg.retired == len(pg.bufs) {
		p.releasePage(pg)
		p.ctr.releasedRefcnt++
		p.publish()
	}
}

// countRefs sets refs from the descriptor states: the buffers that are out.
func (pg *page) countRefs() int {
	pg.refs = 0
	for i := range pg.bufs {
		if pg.bufs[i].state == stateOut {
			pg.refs++
		}
	}
	return pg.refs
}

func (pg *page) decRef() int {
	pg.refs--
	return pg.refs
}

// addPage takes one page from Memory and caches its FragCount buffers, lowest
// offset on top. On error nothing changes.
func (p *Pool) addPage() error {
	mem, err := p.mem.AllocPage(p.cfg.PageBytes)
	if err != nil {
		return fmt.Errorf("%s: %w", p.prefix, err)
	}
	fc, bs := p.cfg.FragCount, p.cfg.BufSize
	pg := &page{id: p.mem.newPageID(), mem: mem, idx: len(p.pages), bufs: make([]Buffer, fc)}
	for i := range pg.bufs {
		off := i * bs
		pg.bufs[i] = Buffer{data: mem[off : off+bs : off+bs], page: pg, pool: p, off: off, state: stateFree}
	}
	p.pages = append(p.pages, pg)
	// Size the cache for every buffer the pool holds, so Recycle never grows it.
	if need := len(p.pages) * fc; cap(p.cache) < need {
		c := make([]*Buffer, len(p.cache), max(need, 2*cap(p.cache)))
		copy(c, p.cache)
		p.cache = c
	}
	for i := fc - 1; i >= 0; i-- {
		p.cache = append(p.cache, &pg.bufs[i])
	}
	p.ctr.pageAllocs++
	p.pinned.Add(int64(p.cfg.PageBytes))
	p.publish()
	return nil
}

// releasePage gives an idle page (refs == 0) back to Memory. Its descriptors
// are poisoned so that a stale Recycle/Put is reported as use after free and
// a stale Bytes() returns nil rather than another pool's memory.
func (p *Pool) releasePage(pg *page) {
	for i := range pg.bufs {
		pg.bufs[i].state = stateReleased
		pg.bufs[i].data = nil
	}
	last := len(p.pages) - 1
	p.pages[pg.idx] = p.pages[last]
	p.pages[pg.idx].idx = pg.idx
	p.pages[last] = nil
	p.pages = p.pages[:last]
	p.mem.FreePage(pg.mem)
	pg.mem = nil
	p.ctr.pageReleases++
	p.pinned.Add(-int64(p.cfg.PageBytes))
	p.publish()
}

// Shrink takes back everything on the return ring and releases every page
// whose buffers are all back to Memory; it returns the number of pages
// released. Owner only; Shrink after Destroy panics. The pool grows again on
// demand.
func (p *Pool) Shrink() int {
	if p.dead {
		panic(p.prefix + ": Shrink after Destroy")
	}
	p.refill(math.MaxInt)
	released := 0
	for i := 0; i < len(p.pages); {
		if pg := p.pages[i]; pg.countRefs() == 0 {
			p.releasePage(pg) // moves the last page to i
			released++
			continue
		}
		i++
	}
	if released > 0 {
		kept := p.cache[:0]
		for _, b := range p.cache {
			if b.state != stateReleased {
				kept = append(kept, b)
			}
		}
		clear(p.cache[len(kept):])
		p.cache = kept
	}
	p.publish()
	return released
}

// inflight is the owner's count of buffers out (including those sitting in
// the return ring, not yet taken back).
func (p *Pool) inflight() int {
	return int(p.ctr.allocs - p.ctr.recycles - p.ctr.retired - p.ctr.drained)
}

// publish copies the owner's counters for Stats.
func (p *Pool) publish() {
	s := &p.pub
	s.seq.Add(1)
	s.allocs.Store(p.ctr.allocs)
	s.recycles.Store(p.ctr.recycles)
	s.drained.Store(p.ctr.drained)
	s.allocFails.Store(p.ctr.allocFails)
	s.pageAllocs.Store(p.ctr.pageAllocs)
	s.pageReleases.Store(p.ctr.pageReleases)
	s.allocSlow.Store(p.ctr.allocSlow)
	s.allocSlowHO.Store(p.ctr.allocSlowHO)
	s.allocRefill.Store(p.ctr.allocRefill)
	s.allocEmpty.Store(p.ctr.allocEmpty)
	s.retired.Store(p.ctr.retired)
	s.releasedRefcnt.Store(p.ctr.releasedRefcnt)
	s.pages.Store(int64(len(p.pages)))
	s.seq.Add(1)
	p.pubCtr, p.pubPages = p.ctr, len(p.pages)
}

// FlushStats publishes the owner's counters so that Stats, from any
// goroutine, is exact until the owner's next operation. Owner only; a no-op
// after Destroy (the releaser publishes then), and when nothing changed since
// the last publish: an idle queue's pool costs a comparison, not the 16
// atomic stores of a publish (a page-pool dump or a port's State flushes
// every pool of the port).
func (p *Pool) FlushStats() {
	if !p.dead && (p.ctr != p.pubCtr || len(p.pages) != p.pubPages) {
		p.publish()
	}
}

// Stats is a snapshot of a pool's counters.
type Stats struct {
	Allocs       uint64 // buffers handed out (Alloc, and each buffer of a successful AllocBulk)
	Recycles     uint64 // buffers given back with Recycle
	Puts         uint64 // buffers given back with Put (ring and overflow)
	RingDrained  uint64 // buffers the owner took back from the ring and overflow list
	RingOverflow uint64 // puts that found the ring full and used the overflow list
	PageAllocs   uint64 // pages taken from Memory
	PageReleases uint64 // pages given back to Memory
	AllocFails   uint64 // Alloc/AllocBulk calls that failed with ENOMEM
	// Allocations served by the slow path (the rest came from the owner
	// cache): by a new page of order 0 (AllocSlow) or above
	// (AllocSlowHighOrder), or by buffers taken back from the return ring
	// (AllocRefill). AllocEmpty counts refills that found the ring empty.
	AllocSlow, AllocSlowHighOrder, AllocRefill, AllocEmpty uint64
	// With NoRecycle: buffers given back with Recycle that were retired
	// instead of recycled (Recycles stays 0), and pages released because all
	// their buffers had been given back.
	Retired, ReleasedRefcnt uint64
	NoRecycle               bool  // Config.NoRecycle
	Pages                   int   // pages held now, including those with buffers in flight
	InFlight                int   // buffers out, as the owner sees it (Allocs - Recycles - Retired - RingDrained)
	PinnedBytes             int64 // Pages * PageBytes
}

// KernelStats are a pool's counters with the meaning of the kernel's
// struct page_pool_stats (include/net/page_pool/types.h), as the netdev
// family's page-pool-stats-get reports them. The kernel's alloc cache is the
// owner cache here and its ptr_ring the return ring (with its overflow list).
type KernelStats struct {
	// AllocFast: allocations from the alloc cache. Here: from the owner
	// cache (Allocs less the slow-path ones).
	AllocFast uint64
	// AllocSlow: slow-path order-0 allocations (a page from the page
	// allocator). Here: allocations that took a new page from Memory, of a
	// pool of Order 0. The kernel counts one per bulk refill of its cache;
	// manad takes one page at a time, so it is one per page.
	AllocSlow uint64
	// AllocSlowHighOrder: the same for pools of order > 0.
	AllocSlowHighOrder uint64
	// AllocEmpty: the ptr_ring was empty when the cache needed a refill,
	// forcing the slow path. Here: the return ring and overflow list were.
	AllocEmpty uint64
	// AllocRefill: allocations served by refilling the cache from the
	// ptr_ring. Here: from the return ring.
	AllocRefill uint64
	// AllocWaive: pages taken from the ptr_ring that could not be reused
	// (another NUMA node, or pfmemalloc) and were released. Always 0: Memory
	// has one node and no emergency reserves.
	AllocWaive uint64
	// RecycleCached: pages recycled into the alloc cache
	// (page_pool_recycle_in_cache, the NAPI-local direct path). Here:
	// Recycle by the owner.
	RecycleCached uint64
	// RecycleCacheFull: direct recycling that found the alloc cache full
	// (PP_ALLOC_CACHE_SIZE) and went to the ptr_ring instead. Always 0: the
	// owner cache is sized for every buffer the pool holds.
	RecycleCacheFull uint64
	// RecycleRing: pages put into the ptr_ring by other contexts. Here: Put
	// into the return ring. 0 with NoRecycle, where the ring only carries
	// buffers back to be released (the kernel frees them where they are
	// dropped, without a ring).
	RecycleRing uint64
	// RecycleRingFull: puts that found the ptr_ring full; the kernel then
	// frees the page. Here: puts that went to the overflow list (the buffer
	// is kept, not freed). 0 with NoRecycle, as RecycleRing.
	RecycleRingFull uint64
	// RecycleReleasedRefcnt: pages released to the page allocator instead of
	// being recycled because they could not be (an elevated refcount).
	// Here: pages released because recycling is off (NoRecycle) once every
	// buffer of the page was given back.
	RecycleReleasedRefcnt uint64
}

// Kernel maps the pool's counters to the kernel's page_pool_stats (see
// KernelStats for each counter's equivalent).
func (s Stats) Kernel() KernelStats {
	k := KernelStats{
		AllocFast:             s.Allocs - s.AllocSlow - s.AllocSlowHighOrder - s.AllocRefill,
		AllocSlow:             s.AllocSlow,
		AllocSlowHighOrder:    s.AllocSlowHighOrder,
		AllocEmpty:            s.AllocEmpty,
		AllocRefill:           s.AllocRefill,
		RecycleCached:         s.Recycles,
		RecycleRing:           s.Puts - s.RingOverflow,
		RecycleRingFull:       s.RingOverflow,
		RecycleReleasedRefcnt: s.ReleasedRefcnt,
	}
	if s.NoRecycle {
		k.RecycleRing, k.RecycleRingFull = 0, 0
	}
	return k
}

// Stats returns a snapshot; any goroutine. Pages, PinnedBytes, PageAllocs,
// PageReleases, AllocFails, Puts, RingOverflow and the slow-path counters
// (AllocSlow, AllocSlowHighOrder, AllocRefill, AllocEmpty, ReleasedRefcnt)
// are exact at any time (they change on the slow path, which publishes at
// once). Allocs, Recycles, Retired, RingDrained and InFlight are published by the owner on every slow-path
// event, at least every 256 fast-path operations, by FlushStats and by
// Destroy; so they are exact when the owner called FlushStats before (or the
// pool is destroyed), and otherwise lag by fewer than 256 operations. This
// keeps atomics off the owner's fast path.
func (p *Pool) Stats() Stats {
	s := &p.pub
	var c counters
	var pages int64
	for {
		seq := s.seq.Load()
		if seq&1 != 0 {
			runtime.Gosched()
			continue
		}
		c = counters{
			allocs:       s.allocs.Load(),
			recycles:     s.recycles.Load(),
			drained:      s.drained.Load(),
			allocFails:   s.allocFails.Load(),
			pageAllocs:   s.pageAllocs.Load(),
			pageReleases: s.pageReleases.Load(),

			allocSlow:      s.allocSlow.Load(),
			allocSlowHO:    s.allocSlowHO.Load(),
			allocRefill:    s.allocRefill.Load(),
			allocEmpty:     s.allocEmpty.Load(),
			retired:        s.retired.Load(),
			releasedRefcnt: s.releasedRefcnt.Load(),
		}
		pages = s.pages.Load()
		if s.seq.Load() == seq {
			break
		}
	}
	ov := p.ovTotal.Load()
	return Stats{
		Allocs:       c.allocs,
		Recycles:     c.recycles,
		Puts:         p.ring.puts() + ov,
		RingDrained:  c.drained,
		RingOverflow: ov,
		PageAllocs:   c.pageAllocs,
		PageReleases: c.pageReleases,
		AllocFails:   c.allocFails,

		AllocSlow:          c.allocSlow,
		AllocSlowHighOrder: c.allocSlowHO,
		AllocRefill:        c.allocRefill,
		AllocEmpty:         c.allocEmpty,
		Retired:            c.retired,
		ReleasedRefcnt:     c.releasedRefcnt,
		NoRecycle:          p.cfg.NoRecycle,

		Pages:       int(pages),
		InFlight:    int(c.allocs - c.recycles - c.retired - c.drained),
		PinnedBytes: pages * int64(p.cfg.PageBytes),
	}
}

// PinnedBytes returns the bytes of Memory held by the pool (pages with
// buffers in flight included); any goroutine, exact.
func (p *Pool) PinnedBytes() int64 { return p.pinned.Load() }
