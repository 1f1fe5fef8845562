package rxbuf

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// want is one rule's columns of the worked table in reference/mana-driver.md §2.
type want struct {
	hr, alloc, frag, order, pool int
	rejected                     bool
}

func TestWorkedTable(t *testing.T) {
	rejected := want{rejected: true}
	// The worked examples of reference/mana-driver.md §2 (rx_queue_size 1024), row by row. The
	// pre-frag rule has no flag, so its "on" rows are the "off" values.
	rows := []struct {
		page, mtu   int
		xdp, fp     bool
		a, b, c     want
		datasize    int
		description string
	}{
		{4096, 1500, false, false, want{256, 4096, 1, 0, 1024, false}, want{0, 1856, 2, 0, 513, false}, want{256, 4096, 1, 0, 1025, false}, 1514, "4K default MTU"},
		{4096, 1500, false, true, want{256, 4096, 1, 0, 1024, false}, want{0, 4096, 1, 0, 1025, false}, want{256, 4096, 1, 0, 1025, false}, 1514, "4K full-page-rx"},
		{4096, 1500, true, false, want{256, 4096, 1, 0, 1024, false}, want{256, 4096, 1, 0, 1025, false}, want{256, 4096, 1, 0, 1025, false}, 1514, "4K XDP"},
		{4096, 1500, true, true, want{256, 4096, 1, 0, 1024, false}, want{256, 4096, 1, 0, 1025, false}, want{256, 4096, 1, 0, 1025, false}, 1514, "4K XDP + flag"},
		{4096, 9000, false, false, want{0, 9344, 1, 2, 1024, false}, want{0, 16384, 1, 2, 1025, false}, want{256, 16384, 1, 2, 1025, false}, 9014, "4K jumbo"},
		{4096, 9000, false, true, want{0, 9344, 1, 2, 1024, false}, want{0, 16384, 1, 2, 1025, false}, want{256, 16384, 1, 2, 1025, false}, 9014, "4K jumbo + flag"},
		{4096, 9000, true, false, rejected, rejected, rejected, 0, "4K jumbo XDP: mtu too large"},
		{16384, 1500, false, false, want{256, 16384, 1, 0, 1024, false}, want{0, 1856, 8, 0, 129, false}, want{256, 2112, 7, 0, 147, false}, 1514, "16K default MTU"},
		{16384, 1500, false, true, want{256, 16384, 1, 0, 1024, false}, want{0, 16384, 1, 0, 1025, false}, want{256, 16384, 1, 0, 1025, false}, 1514, "16K full-page-rx"},
		{16384, 1500, true, false, want{256, 16384, 1, 0, 1024, false}, want{256, 16384, 1, 0, 1025, false}, want{256, 16384, 1, 0, 1025, false}, 1514, "16K XDP"},
		{16384, 9000, true, true, want{256, 16384, 1, 0, 1024, false}, want{256, 16384, 1, 0, 1025, false}, want{256, 16384, 1, 0, 1025, false}, 9014, "16K jumbo XDP"},
		{16384, 9000, false, false, want{256, 16384, 1, 0, 1024, false}, want{0, 16384, 1, 0, 1025, false}, want{256, 16384, 1, 0, 1025, false}, 9014, "16K jumbo"},
		{16384, 9000, false, true, want{256, 16384, 1, 0, 1024, false}, want{0, 16384, 1, 0, 1025, false}, want{256, 16384, 1, 0, 1025, false}, 9014, "16K jumbo + flag"},
		{65536, 1500, false, false, want{256, 65536, 1, 0, 1024, false}, want{0, 1856, 35, 0, 30, false}, want{256, 2112, 31, 0, 34, false}, 1514, "64K default MTU: 35 then 31 per page"},
		{65536, 1500, false, true, want{256, 65536, 1, 0, 1024, false}, want{0, 65536, 1, 0, 1025, false}, want{256, 65536, 1, 0, 1025, false}, 1514, "64K full-page-rx"},
		{65536, 9000, false, false, want{256, 65536, 1, 0, 1024, false}, want{0, 9344, 7, 0, 147, false}, want{256, 9600, 6, 0, 171, false}, 9014, "64K jumbo"},
		{65536, 9000, false, true, want{256, 65536, 1, 0, 1024, false}, want{0, 65536, 1, 0, 1025, false}, want{256, 65536, 1, 0, 1025, false}, 9014, "64K jumbo + flag"},
		{65536, 1500, true, false, want{256, 65536, 1, 0, 1024, false}, want{256, 65536, 1, 0, 1025, false}, want{256, 65536, 1, 0, 1025, false}, 1514, "64K XDP"},
		{65536, 9000, true, true, want{256, 65536, 1, 0, 1024, false}, want{256, 65536, 1, 0, 1025, false}, want{256, 65536, 1, 0, 1025, false}, 9014, "64K jumbo XDP"},
	}
	for _, r := range rows {
		for _, rc := range []struct {
			rule Rule
			w    want
		}{{RulePreFrag, r.a}, {RulePreHeadroom, r.b}, {RuleUpstream, r.c}} {
			name := fmt.Sprintf("%s/%s", r.description, rc.rule)
			t.Run(name, func(t *testing.T) {
				l, err := Compute(Params{Rule: rc.rule, PageSize: r.page, MTU: r.mtu, XDP: r.xdp, FullPageRx: r.fp})
				if rc.w.rejected {
					require.ErrorIs(t, err, unix.EOPNOTSUPP, "err = %v, want EOPNOTSUPP (XDP: mtu too large)", err)
					return
				}
				require.NoError(t, err)
				got := want{l.Headroom, l.AllocSize, l.FragCount, l.Order, l.PoolSize, false}
				assert.Equal(t, rc.w, got, "hr/alloc/frag/order/pool = %v, want %v (reason %q)", got, rc.w, l.Reason)
				assert.Equal(t, r.datasize, l.DataSize, "datasize")
				assert.Equal(t, l.FragCount == 1, l.Single, "single = %v with frag count %d", l.Single, l.FragCount)
			})
		}
	}
}

// TestSeedNumbers checks every figure the seed threads state in prose.
func TestSeedNumbers(t *testing.T) {
	up := func(page, mtu int) Layout {
		return MustCompute(Params{Rule: RuleUpstream, PageSize: page, MTU: mtu})
	}
	pre := func(page, mtu int) Layout {
		return MustCompute(Params{Rule: RulePreHeadroom, PageSize: page, MTU: mtu})
	}
	cases := []struct {
		name      string
		got, want int
	}{
		// 001 (frag patch): "35 rx buffers in a single 64kb page for MTU size of 1500".
		{"frag patch: 1856-byte buffers", pre(65536, 1500).AllocSize, 1856},
		{"frag patch: 35 per 64K page", pre(65536, 1500).FragCount, 35},
		// 002 (headroom fix): SKB_DATA_ALIGN(1500 + MANA_RXBUF_PAD + 256) = 2112.
		{"headroom fix: 2112-byte buffers", up(65536, 1500).AllocSize, 2112},
		{"headroom fix: 31 per 64K page", up(65536, 1500).FragCount, 31},
		{"headroom fix: 4K MTU 1500 is single again", up(4096, 1500).FragCount, 1},
		{"MANA_XDP_MTU_MAX 4K", XDPMTUMax(4096), 3506},
		{"MANA_XDP_MTU_MAX 16K", XDPMTUMax(16384), 15794},
		{"MANA_XDP_MTU_MAX 64K", XDPMTUMax(65536), 64946},
		{"jumbo 9000 datasize", up(4096, 9000).DataSize, 9014},
		{"jumbo 9000 alloc 4K", up(4096, 9000).AllocSize, 16384},
		{"jumbo 9000 order 4K", up(4096, 9000).Order, 2},
		{"jumbo 9000 64K frags (headroom)", up(65536, 9000).FragCount, 6},
		{"jumbo 9000 64K frags (pre-headroom)", pre(65536, 9000).FragCount, 7},
		{"MANA_RXBUF_PAD", RxBufPad, 334},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.got, "%s", c.name)
	}
}

// TestMTUWindow4K checks the 4K-page window where the rules disagree: MTU 1459..1714 is fragment
// mode (2 per page) before the headroom fix and single-buffer after it.
func TestMTUWindow4K(t *testing.T) {
	for mtu := 1400; mtu <= 1800; mtu++ {
		b := MustCompute(Params{Rule: RulePreHeadroom, PageSize: 4096, MTU: mtu})
		c := MustCompute(Params{Rule: RuleUpstream, PageSize: 4096, MTU: mtu})
		inWindow := mtu >= 1459 && mtu <= 1714
		differ := b.Single != c.Single
		assert.Equal(t, inWindow, differ, "MTU %d: pre-headroom single=%v, upstream single=%v; window says differ", mtu, b.Single, c.Single)
		if inWindow {
			assert.Equal(t, 2, b.FragCount, "MTU %d: frag counts %d/%d, want 2/1", mtu, b.FragCount, c.FragCount)
			assert.Equal(t, 1, c.FragCount, "MTU %d: frag counts %d/%d, want 2/1", mtu, b.FragCount, c.FragCount)
		}
	}
}

// TestFragThresholds checks the largest MTU that still gets two buffers per page (§2 table).
func TestFragThresholds(t *testing.T) {
	for _, tc := range []struct {
		rule       Rule
		page, last int
	}{
		{RulePreHeadroom, 4096, 1714}, {RulePreHeadroom, 16384, 7858}, {RulePreHeadroom, 65536, 32434},
		{RuleUpstream, 4096, 1458}, {RuleUpstream, 16384, 7602}, {RuleUpstream, 65536, 32178},
	} {
		at := MustCompute(Params{Rule: tc.rule, PageSize: tc.page, MTU: tc.last})
		past := MustCompute(Params{Rule: tc.rule, PageSize: tc.page, MTU: tc.last + 1})
		if at.Single || at.FragCount < 2 || !past.Single {
			t.Errorf("%s %d: MTU %d single=%v frags=%d, MTU %d single=%v", tc.rule, tc.page,
				tc.last, at.Single, at.FragCount, tc.last+1, past.Single)
		}
	}
}

func TestPinnedMemory(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      Params
		pages  int
		bytes  int64
		total  int64
		reason string
	}{
		{"64K MTU 1500: 1024/31 rounded up", Params{PageSize: 65536, MTU: 1500, Queues: 16}, 34, 34 * 65536, 16 * 34 * 65536, "31 buffers of 2112 bytes fit in a 65536-byte page"},
		{"64K full page", Params{PageSize: 65536, MTU: 1500, FullPageRx: true, Queues: 2}, 1024, 1024 * 65536, 2 * 1024 * 65536, "full-page-rx private flag is on"},
		{"4K MTU 1500 single", Params{PageSize: 4096, MTU: 1500, Queues: 16}, 1024, 1024 * 4096, 16 * 1024 * 4096, "fewer than 2 buffers of 2112 bytes (MTU 1500 + pad 334 + headroom 256) fit in a 4096-byte page"},
		{"4K jumbo order 2", Params{PageSize: 4096, MTU: 9000, RingSize: 128}, 128, 128 * 16384, 128 * 16384, "fewer than 2 buffers of 9600 bytes (MTU 9000 + pad 334 + headroom 256) fit in a 4096-byte page"},
		{"16K MTU 1500 ring 128", Params{PageSize: 16384, MTU: 1500, RingSize: 128}, 19, 19 * 16384, 19 * 16384, "7 buffers of 2112 bytes fit in a 16384-byte page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := MustCompute(tc.p)
			assert.Equal(t, tc.pages, l.PagesPerQueue, "pages/bytes/total = %d/%d/%d, want %d/%d/%d", l.PagesPerQueue, l.BytesPerQueue, l.BytesTotal, tc.pages, tc.bytes, tc.total)
			assert.Equal(t, tc.bytes, l.BytesPerQueue, "pages/bytes/total = %d/%d/%d, want %d/%d/%d", l.PagesPerQueue, l.BytesPerQueue, l.BytesTotal, tc.pages, tc.bytes, tc.total)
			assert.Equal(t, tc.total, l.BytesTotal, "pages/bytes/total = %d/%d/%d, want %d/%d/%d", l.PagesPerQueue, l.BytesPerQueue, l.BytesTotal, tc.pages, tc.bytes, tc.total)
			assert.Equal(t, tc.reason, l.Reason, "reason")
			assert.LessOrEqual(t, l.FragCount*l.BufSize, l.PageBytes, "%d buffers of %d overflow a %d-byte page", l.FragCount, l.BufSize, l.PageBytes)
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     Params
		errno unix.Errno
		msg   string
	}{
		{"page size", Params{PageSize: 8192, MTU: 1500}, unix.EINVAL, "page size 8192 not supported (want 4096, 16384 or 65536)"},
		{"mtu low", Params{PageSize: 4096, MTU: 67}, unix.EINVAL, "MTU 67 less than device minimum 68"},
		{"mtu high", Params{PageSize: 4096, MTU: 65536}, unix.EINVAL, "MTU 65536 greater than device maximum 65535"},
		{"xdp mtu", Params{PageSize: 4096, MTU: 3507, XDP: true}, unix.EOPNOTSUPP, "XDP: mtu too large"},
		{"negative ring", Params{PageSize: 4096, MTU: 1500, RingSize: -1}, unix.EINVAL, "ring size -1 is negative"},
		{"bad rule", Params{Rule: 9, PageSize: 4096, MTU: 1500}, unix.EINVAL, "unknown RX buffer rule 9"},
		{"xdp at the limit", Params{PageSize: 4096, MTU: 3506, XDP: true}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compute(tc.p)
			if tc.errno == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.errno, "err")
			assert.Equal(t, tc.msg, err.(interface{ ExtackMessage() string }).ExtackMessage(), "message")
		})
	}
}

func TestParseRule(t *testing.T) {
	for _, r := range Rules {
		got, err := ParseRule(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRule(%q) = %v, %v", r, got, err)
		}
	}
	_, err := ParseRule("newest")
	assert.ErrorIs(t, err, unix.EINVAL, "ParseRule(newest) err = %v, want EINVAL", err)
}

// TestInvariants sweeps every MTU on every page size under every rule and checks the properties
// the ring and page pool rely on.
func TestInvariants(t *testing.T) {
	for _, rule := range Rules {
		for _, page := range []int{4096, 16384, 65536} {
			for mtu := MinMTU; mtu <= 16000; mtu += 7 {
				for _, fp := range []bool{false, true} {
					for _, xdp := range []bool{false, true} {
						p := Params{Rule: rule, PageSize: page, MTU: mtu, FullPageRx: fp, XDP: xdp}
						l, err := Compute(p)
						if xdp && mtu > XDPMTUMax(page) {
							require.Error(t, err, "%+v: want XDP rejection", p)
							continue
						}
						require.NoError(t, err, "%+v", p)
						require.LessOrEqual(t, l.Headroom+l.DataSize, l.BufSize, "%+v: headroom %d + datasize %d > buffer", p, l.Headroom, l.DataSize)
						require.GreaterOrEqual(t, l.FragCount, 1, "%+v: %d x %d in a %d-byte page", p, l.FragCount, l.BufSize, l.PageBytes)
						require.LessOrEqual(t, l.FragCount*l.BufSize, l.PageBytes, "%+v: %d x %d in a %d-byte page", p, l.FragCount, l.BufSize, l.PageBytes)
						if l.FragCount > 1 {
							require.Equal(t, 0, l.BufSize%FragAlignment, "%+v: bad fragment layout %+v", p, l)
							require.False(t, fp, "%+v: bad fragment layout %+v", p, l)
							require.False(t, xdp, "%+v: bad fragment layout %+v", p, l)
						}
						if xdp {
							require.GreaterOrEqual(t, l.Headroom, XDPPacketHeadroom, "%+v: XDP needs a single buffer with 256 bytes of headroom", p)
							require.True(t, l.Single, "%+v: XDP needs a single buffer with 256 bytes of headroom", p)
						}
					}
				}
			}
		}
	}
}

// TestAlloc: the allocation mode changes how buffers map to memory, never what the NIC sees
// (DataSize, Headroom, AllocSize).
func TestAlloc(t *testing.T) {
	tests := []struct {
		name                     string
		p                        Params
		bufSize, frag, pageBytes int
		pagesPerQueue            int
	}{
		{"16K frag", Params{PageSize: 16384, MTU: 1500}, 2112, 7, 16384, 147},
		{"16K page-pool-page", Params{PageSize: 16384, MTU: 1500, Alloc: AllocPagePoolPage}, 16384, 1, 16384, 1024},
		{"16K no-pool", Params{PageSize: 16384, MTU: 1500, Alloc: AllocNoPool}, 2112, 1, 2112, 1024},
		{"4K single no-pool", Params{PageSize: 4096, MTU: 1500, Alloc: AllocNoPool}, 4096, 1, 4096, 1024},
		{"4K single page-pool-page", Params{PageSize: 4096, MTU: 1500, Alloc: AllocPagePoolPage}, 4096, 1, 4096, 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.p
			base.Alloc = AllocPagePoolFrag
			l, ref := MustCompute(tt.p), MustCompute(base)
			assert.Equal(t, tt.bufSize, l.BufSize, "buf %d frag %d page %d pages/queue %d; want %d %d %d %d (%s)", l.BufSize, l.FragCount, l.PageBytes, l.PagesPerQueue, tt.bufSize, tt.frag, tt.pageBytes, tt.pagesPerQueue, l.Reason)
			assert.Equal(t, tt.frag, l.FragCount, "buf %d frag %d page %d pages/queue %d; want %d %d %d %d (%s)", l.BufSize, l.FragCount, l.PageBytes, l.PagesPerQueue, tt.bufSize, tt.frag, tt.pageBytes, tt.pagesPerQueue, l.Reason)
			assert.Equal(t, tt.pageBytes, l.PageBytes, "buf %d frag %d page %d pages/queue %d; want %d %d %d %d (%s)", l.BufSize, l.FragCount, l.PageBytes, l.PagesPerQueue, tt.bufSize, tt.frag, tt.pageBytes, tt.pagesPerQueue, l.Reason)
			assert.Equal(t, tt.pagesPerQueue, l.PagesPerQueue, "buf %d frag %d page %d pages/queue %d; want %d %d %d %d (%s)", l.BufSize, l.FragCount, l.PageBytes, l.PagesPerQueue, tt.bufSize, tt.frag, tt.pageBytes, tt.pagesPerQueue, l.Reason)
			assert.Equal(t, ref.DataSize, l.DataSize, "the NIC's view changed: %+v vs %+v", l, ref)
			assert.Equal(t, ref.Headroom, l.Headroom, "the NIC's view changed: %+v vs %+v", l, ref)
			assert.Equal(t, ref.AllocSize, l.AllocSize, "the NIC's view changed: %+v vs %+v", l, ref)
		})
	}
	for _, a := range Allocs {
		if got, err := ParseAlloc(a.String()); err != nil || got != a {
			t.Errorf("ParseAlloc(%q) = %v, %v", a, got, err)
		}
	}
	if _, err := ParseAlloc("slab"); err == nil {
		t.Error("ParseAlloc accepted an unknown mode")
	}
	_, err := Compute(Params{PageSize: 4096, MTU: 1500, Alloc: AllocNoPool + 1})
	assert.Error(t, err, "Compute accepted an unknown mode")
}
