package pagepool

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelStats causes each page_pool_stats event on its own and checks that exactly the
// counters with that meaning move (every field of KernelStats is compared in every case, so the
// counters manad never has, AllocWaive and RecycleCacheFull, are checked to stay 0 too).
func TestKernelStats(t *testing.T) {
	type pool struct {
		frag, order int
		ring        int
		noRecycle   bool
	}
	tests := []struct {
		name string
		pool pool
		run  func(t *testing.T, p *Pool)
		want KernelStats
	}{
		{
			name: "first alloc: ring empty, slow path takes an order-0 page",
			pool: pool{frag: 2},
			run:  func(t *testing.T, p *Pool) { mustAlloc(t, p) },
			want: KernelStats{AllocEmpty: 1, AllocSlow: 1},
		},
		{
			name: "second fragment of the page comes from the cache",
			pool: pool{frag: 2},
			run:  func(t *testing.T, p *Pool) { mustAlloc(t, p); mustAlloc(t, p) },
			want: KernelStats{AllocEmpty: 1, AllocSlow: 1, AllocFast: 1},
		},
		{
			name: "high-order page",
			pool: pool{frag: 1, order: 2},
			run:  func(t *testing.T, p *Pool) { mustAlloc(t, p) },
			want: KernelStats{AllocEmpty: 1, AllocSlowHighOrder: 1},
		},
		{
			name: "owner recycle goes to the cache, the next alloc is fast",
			pool: pool{frag: 1},
			run: func(t *testing.T, p *Pool) {
				p.Recycle(mustAlloc(t, p))
				mustAlloc(t, p)
			},
			want: KernelStats{AllocEmpty: 1, AllocSlow: 1, RecycleCached: 1, AllocFast: 1},
		},
		{
			name: "put goes to the ring, the next alloc refills from it",
			pool: pool{frag: 1},
			run: func(t *testing.T, p *Pool) {
				putFromOtherGoroutine(p, mustAlloc(t, p))
				mustAlloc(t, p)
			},
			want: KernelStats{AllocEmpty: 1, AllocSlow: 1, RecycleRing: 1, AllocRefill: 1},
		},
		{
			name: "put into a full ring",
			pool: pool{frag: 1, ring: 1},
			run: func(t *testing.T, p *Pool) {
				a, b := mustAlloc(t, p), mustAlloc(t, p)
				putFromOtherGoroutine(p, a)
				putFromOtherGoroutine(p, b)
			},
			want: KernelStats{AllocEmpty: 2, AllocSlow: 2, RecycleRing: 1, RecycleRingFull: 1},
		},
		{
			name: "bulk allocation counts every buffer, slow or fast",
			pool: pool{frag: 4},
			run: func(t *testing.T, p *Pool) {
				require.NoError(t, p.AllocBulk(make([]*Buffer, 6)))
			},
			want: KernelStats{AllocEmpty: 2, AllocSlow: 2, AllocFast: 4},
		},
		{
			name: "recycling off: the page is released once all its buffers came back",
			pool: pool{frag: 2, noRecycle: true},
			run: func(t *testing.T, p *Pool) {
				a, b := mustAlloc(t, p), mustAlloc(t, p)
				p.Recycle(a)
				require.Equal(t, uint64(0), p.Stats().ReleasedRefcnt, "page released while one of its buffers is out")
				putFromOtherGoroutine(p, b)
				mustAlloc(t, p) // drains b: the page goes, a new one comes
				st := p.Stats()
				require.Equal(t, 1, st.Pages, "pages %d, released %d; want 1 and 1", st.Pages, st.PageReleases)
				require.Equal(t, uint64(1), st.PageReleases, "pages %d, released %d; want 1 and 1", st.Pages, st.PageReleases)
			},
			// The third alloc found b on the ring (not empty) but nothing reusable: slow path.
			want: KernelStats{AllocEmpty: 1, AllocSlow: 2, AllocFast: 1, RecycleReleasedRefcnt: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := NewMemory(0)
			p, err := New(Config{Mem: mem, PageBytes: 4096 << tt.pool.order, BufSize: (4096 << tt.pool.order) / tt.pool.frag,
				FragCount: tt.pool.frag, Order: tt.pool.order, ReturnRingSize: tt.pool.ring, NoRecycle: tt.pool.noRecycle, Name: "t/rx0"})
			require.NoError(t, err)
			tt.run(t, p)
			p.FlushStats()
			assert.Equal(t, tt.want, p.Stats().Kernel())
			drain(t, p)
		})
	}
}

// TestNoRecycleEveryBufferFresh: with recycling off and one buffer per page (manad's no-pool
// mode), every allocation takes a new page and every return releases one; the recycle counters
// stay 0.
func TestNoRecycleEveryBufferFresh(t *testing.T) {
	mem := NewMemory(0)
	p, err := New(Config{Mem: mem, PageBytes: 2048, BufSize: 2048, FragCount: 1, NoRecycle: true, Name: "t/rx0"})
	require.NoError(t, err)
	const n = 100
	for i := range n {
		b := mustAlloc(t, p)
		if i%2 == 0 {
			p.Recycle(b)
		} else {
			putFromOtherGoroutine(p, b)
		}
	}
	p.FlushStats()
	st := p.Stats()
	k := st.Kernel()
	assert.Equal(t, uint64(n), st.PageAllocs, "page allocs %d, kernel %+v; want every one of %d allocations slow", st.PageAllocs, k, n)
	assert.Equal(t, uint64(n), k.AllocSlow, "page allocs %d, kernel %+v; want every one of %d allocations slow", st.PageAllocs, k, n)
	assert.Equal(t, uint64(0), k.AllocFast, "page allocs %d, kernel %+v; want every one of %d allocations slow", st.PageAllocs, k, n)
	assert.Equal(t, uint64(0), k.AllocRefill, "page allocs %d, kernel %+v; want every one of %d allocations slow", st.PageAllocs, k, n)
	assert.Equal(t, uint64(0), k.RecycleCached, "recycle counters moved with recycling off: %+v", k)
	assert.Equal(t, uint64(0), k.RecycleRing, "recycle counters moved with recycling off: %+v", k)
	assert.Equal(t, uint64(0), k.RecycleRingFull, "recycle counters moved with recycling off: %+v", k)
	assert.Equal(t, uint64(0), st.Recycles, "recycle counters moved with recycling off: %+v", k)
	// The last buffer may still sit on the ring; Destroy takes it back.
	want := uint64(n - 1)
	assert.GreaterOrEqual(t, k.RecycleReleasedRefcnt, want, "released %d pages, want at least %d", k.RecycleReleasedRefcnt, want)
	drain(t, p)
	assert.Equal(t, int64(0), mem.InUse(), "memory in use %d after destroy", mem.InUse())
}

func mustAlloc(t *testing.T, p *Pool) *Buffer {
	t.Helper()
	b, err := p.Alloc()
	require.NoError(t, err)
	return b
}

// putFromOtherGoroutine returns b the way a holder outside the queue does.
func putFromOtherGoroutine(p *Pool, b *Buffer) {
	done := make(chan struct{})
	go func() { p.Put(b); close(done) }()
	<-done
}

// drain gives back every buffer a case kept (white box: after taking back the ring, whatever
// is still out), destroys p and waits for the release, so no releaser outlives the test.
func drain(t *testing.T, p *Pool) {
	t.Helper()
	p.refill(math.MaxInt)
	for _, pg := range append([]*page(nil), p.pages...) {
		for i := range pg.bufs {
			if b := &pg.bufs[i]; b.state == stateOut {
				p.Recycle(b)
			}
		}
	}
	select {
	case <-p.Destroy().Done():
	default:
		t.Fatal("release incomplete with every buffer back")
	}
}
