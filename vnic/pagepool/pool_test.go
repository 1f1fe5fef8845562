package pagepool

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// geometries are the layouts the port uses (reference/mana-driver.md §2).
var geometries = []struct {
	name            string
	page, buf, frag int
}{
	{"full-page 4K", 4096, 4096, 1},
	{"jumbo 16K order 2", 16384, 16384, 1},
	{"fragment 4K 2x1856", 4096, 1856, 2},
	{"fragment 16K 7x2112", 16384, 2112, 7},
	{"fragment 64K 31x2112", 65536, 2112, 31},
	{"fragment 64K 6x9600", 65536, 9600, 6},
}

// checkNoOverlap verifies, on the real memory, that every buffer lies at
// Offset() inside its page and that no two buffers share a byte.
func checkNoOverlap(t fataler, bufs []*Buffer) {
	t.Helper()
	type span struct{ lo, hi uintptr }
	spans := make([]span, 0, len(bufs))
	for _, b := range bufs {
		d := b.Bytes()
		pageBytes := b.Pool().Config().PageBytes
		bufSize := b.Pool().Config().BufSize
		if len(d) != bufSize || cap(d) != bufSize {
			t.Fatalf("buffer len %d cap %d, want %d", len(d), cap(d), bufSize)
		}
		if b.Offset()%bufSize != 0 || b.Offset()+bufSize > pageBytes {
			t.Fatalf("offset %d is not a slot of a %d-byte page with %d-byte buffers", b.Offset(), pageBytes, bufSize)
		}
		base := unsafe.SliceData(b.page.mem)
		if unsafe.SliceData(d) != (*byte)(unsafe.Add(unsafe.Pointer(base), b.Offset())) {
			t.Fatalf("buffer memory is not at page base + Offset()")
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
		spans = append(spans, span{lo, lo + uintptr(len(d))})
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			t.Fatalf("buffers overlap: [%#x,%#x) and [%#x,%#x)", spans[i-1].lo, spans[i-1].hi, spans[i].lo, spans[i].hi)
		}
	}
}

func TestAllocGeometry(t *testing.T) {
	for _, g := range geometries {
		t.Run(g.name, func(t *testing.T) {
			p, mem := newTestPool(t, 0, g.page, g.buf, g.frag)
			const pages = 3
			var bufs []*Buffer
			offsets := map[uint64][]int{}
			for i := range pages * g.frag {
				b, err := p.Alloc()
				require.NoError(t, err)
				stamp(b, uint64(i))
				bufs = append(bufs, b)
				offsets[b.PageID()] = append(offsets[b.PageID()], b.Offset())
				require.Same(t, p, b.Pool(), "Pool() is not the allocating pool")
			}
			require.Len(t, offsets, pages, "%d distinct pages, want %d", len(offsets), pages)
			for id, offs := range offsets {
				want := make([]int, g.frag)
				for i := range want {
					want[i] = i * g.buf // buffer i at offset i*BufSize, handed out in order
				}
				require.True(t, slices.Equal(offs, want), "page %d offsets %v, want %v", id, offs, want)
			}
			checkNoOverlap(t, bufs)
			for i, b := range bufs {
				require.True(t, stampOK(b, uint64(i)), "buffer %d clobbered", i)
			}
			p.FlushStats()
			s := p.Stats()
			require.Equal(t, pages, s.Pages, "stats %+v", s)
			require.Equal(t, uint64(pages), s.PageAllocs, "stats %+v", s)
			require.Equal(t, pages*g.frag, s.InFlight, "stats %+v", s)
			require.Equal(t, uint64(pages*g.frag), s.Allocs, "stats %+v", s)
			want := int64(pages * g.page)
			require.Equal(t, want, mem.InUse(), "InUse %d PinnedBytes %d/%d, want %d", mem.InUse(), p.PinnedBytes(), s.PinnedBytes, want)
			require.Equal(t, want, p.PinnedBytes(), "InUse %d PinnedBytes %d/%d, want %d", mem.InUse(), p.PinnedBytes(), s.PinnedBytes, want)
			require.Equal(t, want, s.PinnedBytes, "InUse %d PinnedBytes %d/%d, want %d", mem.InUse(), p.PinnedBytes(), s.PinnedBytes, want)
			for _, b := range bufs {
				p.Recycle(b)
			}
			p.Destroy()
			require.Equal(t, int64(0), mem.InUse(), "InUse %d after destroy", mem.InUse())
		})
	}
}

func TestFragmentsRecycledIndividually(t *testing.T) {
	p, _ := newTestPool(t, 0, 65536, 2112, 31)
	var bufs []*Buffer
	for range 31 {
		b, _ := p.Alloc()
		bufs = append(bufs, b)
	}
	// One fragment back while its 30 siblings are still out: it is reused at
	// once, with no new page.
	p.Recycle(bufs[7])
	b, err := p.Alloc()
	require.NoError(t, err)
	require.Same(t, bufs[7], b, "got offset %d, want the recycled fragment at %d", b.Offset(), 7*2112)
	require.Equal(t, 7*2112, b.Offset(), "got offset %d, want the recycled fragment at %d", b.Offset(), 7*2112)
	s := p.Stats()
	require.Equal(t, uint64(1), s.PageAllocs, "PageAllocs %d, want 1", s.PageAllocs)
	for _, b := range bufs {
		p.Recycle(b)
	}
	p.Destroy()
}

func TestAllocDrainsReturnRingBeforeNewPage(t *testing.T) {
	p, _ := newTestPool(t, 0, 4096, 1856, 2)
	a, _ := p.Alloc()
	b, _ := p.Alloc()
	done := make(chan struct{})
	go func() { p.Put(a); close(done) }()
	<-done
	c, err := p.Alloc()
	require.NoError(t, err)
	require.Same(t, a, c, "Alloc did not reuse the buffer from the return ring")
	p.FlushStats()
	s := p.Stats()
	require.Equal(t, uint64(1), s.PageAllocs, "stats %+v", s)
	require.Equal(t, uint64(1), s.RingDrained, "stats %+v", s)
	require.Equal(t, uint64(1), s.Puts, "stats %+v", s)
	require.Equal(t, 2, s.InFlight, "stats %+v", s)
	p.Recycle(b)
	p.Recycle(c)
	p.Destroy()
}

func TestAllocENOMEMLeavesPoolConsistent(t *testing.T) {
	for _, g := range geometries {
		t.Run(g.name, func(t *testing.T) {
			p, mem := newTestPool(t, int64(2*g.page), g.page, g.buf, g.frag)
			var bufs []*Buffer
			for range 2 * g.frag {
				b, err := p.Alloc()
				require.NoError(t, err)
				bufs = append(bufs, b)
			}
			_, err := p.Alloc()
			require.ErrorIs(t, err, unix.ENOMEM, "Alloc over budget = %v, want ENOMEM", err)
			assert.Contains(t, err.Error(), "test/rx0", "error %q does not name the pool", err)
			p.FlushStats()
			s := p.Stats()
			require.Equal(t, uint64(1), s.AllocFails, "after ENOMEM: stats %+v InUse %d", s, mem.InUse())
			require.Equal(t, 2, s.Pages, "after ENOMEM: stats %+v InUse %d", s, mem.InUse())
			require.Equal(t, 2*g.frag, s.InFlight, "after ENOMEM: stats %+v InUse %d", s, mem.InUse())
			require.Equal(t, int64(2*g.page), mem.InUse(), "after ENOMEM: stats %+v InUse %d", s, mem.InUse())
			// A returned buffer is enough to allocate again.
			p.Recycle(bufs[3%len(bufs)])
			b, err := p.Alloc()
			require.NoError(t, err, "Alloc after a recycle: %v", err)
			require.Same(t, bufs[3%len(bufs)], b, "Alloc after a recycle: %v", err)
			for _, b := range bufs {
				p.Recycle(b)
			}
			p.Destroy()
			require.Equal(t, int64(0), mem.InUse(), "InUse")
		})
	}
}

func TestAllocBulkAllOrNothing(t *testing.T) {
	p, mem := newTestPool(t, 2*16384, 16384, 2112, 7)
	keep, _ := p.Alloc()
	dst := make([]*Buffer, 14)
	err := p.AllocBulk(dst)
	require.ErrorIs(t, err, unix.ENOMEM, "AllocBulk(14) with 13 available = %v, want ENOMEM", err)
	for i, b := range dst {
		require.Nil(t, b, "dst[%d] set after a failed AllocBulk", i)
	}
	p.FlushStats()
	s := p.Stats()
	require.Equal(t, 1, s.InFlight, "after failed bulk: %+v", s)
	require.Equal(t, uint64(1), s.Allocs, "after failed bulk: %+v", s)
	require.Equal(t, uint64(0), s.Recycles, "after failed bulk: %+v", s)
	require.Equal(t, uint64(1), s.AllocFails, "after failed bulk: %+v", s)
	require.Equal(t, 2, s.Pages, "after failed bulk: %+v", s)
	// The 13 free buffers are all still there, and keep is still out.
	dst = dst[:13]
	require.NoError(t, p.AllocBulk(dst))
	all := append(slices.Clone(dst), keep)
	checkNoOverlap(t, all)
	seen := map[*Buffer]bool{}
	for _, b := range all {
		if seen[b] {
			t.Fatalf("buffer handed out twice")
		}
		seen[b] = true
	}
	require.NoError(t, p.AllocBulk(nil), "empty AllocBulk")
	for _, b := range all {
		p.Recycle(b)
	}
	p.Destroy()
	require.Equal(t, int64(0), mem.InUse(), "InUse")
}

func TestReturnRingOverflowLosesNothing(t *testing.T) {
	mem := NewMemory(0)
	p, err := New(Config{Mem: mem, PageBytes: 4096, BufSize: 1024, FragCount: 4, ReturnRingSize: 4, Name: "ovf"})
	require.NoError(t, err)
	bufs := make([]*Buffer, 40)
	require.NoError(t, p.AllocBulk(bufs))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range bufs[g*10 : g*10+10] {
				p.Put(b)
			}
		}()
	}
	wg.Wait()
	if s := p.Stats(); s.Puts != 40 || s.RingOverflow != 36 {
		t.Fatalf("Puts %d RingOverflow %d, want 40 and 36", s.Puts, s.RingOverflow)
	}
	// The owner gets all 40 back (ring first, then the overflow list) before
	// it would take a new page.
	again := make([]*Buffer, 40)
	require.NoError(t, p.AllocBulk(again))
	p.FlushStats()
	s := p.Stats()
	require.Equal(t, uint64(10), s.PageAllocs, "stats %+v", s)
	require.Equal(t, uint64(40), s.RingDrained, "stats %+v", s)
	require.Equal(t, 40, s.InFlight, "stats %+v", s)
	for _, b := range again {
		p.Recycle(b)
	}
	p.Destroy()
	require.Equal(t, int64(0), mem.InUse(), "InUse")
}

func TestShrinkReleasesIdlePages(t *testing.T) {
	p, mem := newTestPool(t, 0, 16384, 2112, 7)
	bufs := make([]*Buffer, 21)
	require.NoError(t, p.AllocBulk(bufs))
	ids := map[uint64]bool{}
	for _, b := range bufs {
		ids[b.PageID()] = true
	}
	// Return all of the first two pages (one via the ring), one of the third.
	for _, b := range bufs[:13] {
		p.Recycle(b)
	}
	p.Put(bufs[13])
	p.Recycle(bufs[14])
	if n := p.Shrink(); n != 2 {
		t.Fatalf("Shrink released %d pages, want 2", n)
	}
	p.FlushStats()
	s := p.Stats()
	require.Equal(t, 1, s.Pages, "after Shrink: %+v InUse %d", s, mem.InUse())
	require.Equal(t, uint64(2), s.PageReleases, "after Shrink: %+v InUse %d", s, mem.InUse())
	require.Equal(t, int64(16384), mem.InUse(), "after Shrink: %+v InUse %d", s, mem.InUse())
	require.Equal(t, 6, s.InFlight, "after Shrink: %+v InUse %d", s, mem.InUse())
	// Descriptors of released pages are poisoned.
	require.Nil(t, bufs[0].Bytes(), "released buffer still exposes memory")
	msg := mustPanic(t, func() { p.Recycle(bufs[0]) })
	require.Contains(t, msg, "use after free", "panic")
	// The cache keeps only live descriptors: the next buffer is bufs[14].
	b, _ := p.Alloc()
	require.Same(t, bufs[14], b, "Alloc after Shrink returned a buffer of a released page")
	// New pages get new IDs.
	more := make([]*Buffer, 7)
	require.NoError(t, p.AllocBulk(more))
	for _, m := range more {
		if ids[m.PageID()] {
			t.Fatalf("page ID %d reused", m.PageID())
		}
	}
	for _, x := range append(append(more, b), bufs[15:]...) {
		p.Recycle(x)
	}
	n := p.Shrink()
	require.Equal(t, 2, n, "second Shrink released %d, want 2", n)
	require.Equal(t, int64(0), mem.InUse(), "InUse")
	p.Destroy()
}

func TestMisusePanics(t *testing.T) {
	newPool := func(t *testing.T) *Pool {
		p, _ := newTestPool(t, 0, 4096, 2048, 2)
		return p
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
		want string
	}{
		{"Recycle twice", func(t *testing.T) {
			p := newPool(t)
			b, _ := p.Alloc()
			p.Recycle(b)
			p.Recycle(b)
		}, "double free"},
		{"Recycle nil", func(t *testing.T) { newPool(t).Recycle(nil) }, "Recycle(nil)"},
		{"Put nil", func(t *testing.T) { newPool(t).Put(nil) }, "Put(nil)"},
		{"Recycle foreign", func(t *testing.T) {
			a, b := newPool(t), newPool(t)
			x, _ := a.Alloc()
			b.Recycle(x)
		}, "foreign buffer"},
		{"Put foreign", func(t *testing.T) {
			a, b := newPool(t), newPool(t)
			x, _ := a.Alloc()
			b.Put(x)
		}, "foreign buffer"},
		{"zero Buffer", func(t *testing.T) { newPool(t).Recycle(&Buffer{}) }, "foreign buffer"},
		{"Put after Recycle", func(t *testing.T) {
			p := newPool(t)
			b, _ := p.Alloc()
			p.Recycle(b)
			p.Put(b)
		}, "double free"},
		{"Put twice, caught on drain", func(t *testing.T) {
			p := newPool(t)
			b, _ := p.Alloc()
			p.Put(b)
			p.Put(b) // still out as far as the owner knows
			p.Destroy()
		}, "double free"},
		{"Put then Recycle, caught on drain", func(t *testing.T) {
			p := newPool(t)
			b, _ := p.Alloc()
			p.Put(b)
			p.Recycle(b)
			x, _ := p.Alloc() // b again, a new generation
			_ = x
			y, _ := p.Alloc()
			p.Recycle(y)
			p.Shrink()
		}, "double free"},
		{"Alloc after Destroy", func(t *testing.T) {
			p := newPool(t)
			p.Destroy()
			_, _ = p.Alloc()
		}, "Alloc after Destroy"},
		{"AllocBulk after Destroy", func(t *testing.T) {
			p := newPool(t)
			p.Destroy()
			_ = p.AllocBulk(make([]*Buffer, 2))
		}, "Alloc after Destroy"},
		{"Recycle after Destroy", func(t *testing.T) {
			p := newPool(t)
			b, _ := p.Alloc()
			r := p.Destroy()
			defer func() { p.Put(b); <-r.Done() }()
			p.Recycle(b)
		}, "Recycle after Destroy"},
		{"Shrink after Destroy", func(t *testing.T) {
			p := newPool(t)
			p.Destroy()
			p.Shrink()
		}, "Shrink after Destroy"},
		{"Put after release", func(t *testing.T) {
			p := newPool(t)
			b, _ := p.Alloc()
			r := p.Destroy()
			p.Put(b)
			<-r.Done()
			p.Put(b)
		}, "use after free"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := mustPanic(t, func() { tc.run(t) })
			require.Contains(t, msg, tc.want, "panic %q does not contain %q", msg, tc.want)
			require.True(t, strings.HasPrefix(msg, "pagepool"), "panic %q does not start with the package name", msg)
		})
	}
}

func TestStatsFromOtherGoroutines(t *testing.T) {
	p, _ := newTestPool(t, 0, 16384, 2112, 7)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last Stats
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := p.Stats()
				if s.Allocs < last.Allocs || s.Recycles < last.Recycles || s.PageAllocs < last.PageAllocs {
					t.Errorf("counters went backwards: %+v after %+v", s, last)
					return
				}
				if s.InFlight < 0 || s.InFlight > s.Pages*7 || s.PinnedBytes != int64(s.Pages)*16384 ||
					s.Pages != int(s.PageAllocs-s.PageReleases) {
					t.Errorf("inconsistent snapshot %+v", s)
					return
				}
				_ = p.PinnedBytes()
				last = s
			}
		}()
	}
	ring := make([]*Buffer, 100)
	require.NoError(t, p.AllocBulk(ring))
	for i := range 20000 {
		nb, err := p.Alloc()
		require.NoError(t, err)
		p.Recycle(ring[i%len(ring)])
		ring[i%len(ring)] = nb
	}
	close(stop)
	wg.Wait()
	// Lag is bounded without FlushStats, and exact with it.
	if s := p.Stats(); s.Allocs+publishEvery <= 20100 || s.Recycles+publishEvery <= 20000 {
		t.Fatalf("published counters lag too far: %+v", s)
	}
	p.FlushStats()
	s := p.Stats()
	require.Equal(t, uint64(20100), s.Allocs, "stats after FlushStats %+v", s)
	require.Equal(t, uint64(20000), s.Recycles, "stats after FlushStats %+v", s)
	require.Equal(t, 100, s.InFlight, "stats after FlushStats %+v", s)
	for _, b := range ring {
		p.Recycle(b)
	}
	p.Destroy()
}

// TestConcurrentPutStress runs the owner against several goroutines that
// free buffers through Put while it keeps allocating, and checks that no
// buffer is handed out while someone else holds it.
func TestConcurrentPutStress(t *testing.T) {
	for _, ring := range []int{2, 64, 1024} {
		for _, g := range []struct{ page, buf, frag int }{{4096, 4096, 1}, {65536, 2112, 31}} {
			mem := NewMemory(0)
			p, err := New(Config{Mem: mem, PageBytes: g.page, BufSize: g.buf, FragCount: g.frag, ReturnRingSize: ring, Name: "stress"})
			require.NoError(t, err)
			const workers, rounds, batch = 3, 300, 16
			type item struct {
				b *Buffer
				v uint64
			}
			work := make(chan []item, workers)
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for items := range work {
						for _, it := range items {
							assert.True(t, stampOK(it.b, it.v), "buffer page %d offset %d clobbered while out", it.b.PageID(), it.b.Offset())
							p.Put(it.b)
						}
					}
				}()
			}
			var v uint64
			held := map[*Buffer]bool{}
			for r := range rounds {
				items := make([]item, batch)
				for i := range items {
					b, err := p.Alloc()
					require.NoError(t, err)
					if held[b] {
						t.Fatalf("buffer handed out twice")
					}
					v++
					stamp(b, v)
					items[i] = item{b, v}
				}
				// Keep a few on the owner and recycle them directly.
				if r%3 == 0 {
					for _, it := range items[:4] {
						held[it.b] = true
					}
					for _, it := range items[:4] {
						delete(held, it.b)
						p.Recycle(it.b)
					}
					items = items[4:]
				}
				work <- items
			}
			close(work)
			wg.Wait()
			rel := p.Destroy()
			<-rel.Done()
			s := p.Stats()
			require.Equal(t, int64(0), mem.InUse(), "ring %d frag %d: InUse %d stats %+v", ring, g.frag, mem.InUse(), s)
			require.Equal(t, 0, s.InFlight, "ring %d frag %d: InUse %d stats %+v", ring, g.frag, mem.InUse(), s)
			require.Equal(t, s.Recycles+s.RingDrained, s.Allocs, "ring %d frag %d: InUse %d stats %+v", ring, g.frag, mem.InUse(), s)
			require.Equal(t, s.RingDrained, s.Puts, "ring %d frag %d: InUse %d stats %+v", ring, g.frag, mem.InUse(), s)
			if ring == 2 && s.RingOverflow == 0 {
				t.Logf("ring 2: no overflow happened this run")
			}
		}
	}
}
