package pagepool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rxRingSize is the RX ring the benchmarks model (DEF_RX_BUFFERS_PER_QUEUE).
const rxRingSize = 1024

type benchLayout struct {
	name            string
	page, buf, frag int
}

var (
	fullPage4K  = benchLayout{"full-page", 4096, 4096, 1}
	frag64K     = benchLayout{"64K-31x2112", 65536, 2112, 31} // MTU 1500 after the headroom fix
	frag4K      = benchLayout{"4K-2x1856", 4096, 1856, 2}     // MTU 1500 before it
	fragLayouts = []benchLayout{frag64K, frag4K}
)

func newBenchPool(b *testing.B, l benchLayout) *Pool {
	b.Helper()
	p, err := New(Config{Mem: NewMemory(0), PageBytes: l.page, BufSize: l.buf, FragCount: l.frag, Name: "bench/" + l.name})
	require.NoError(b, err)
	return p
}

// rxRing is a full RX ring of buffers, refilled slot by slot the way
// mana_refill_rx_oob does (allocate the replacement first, then the old
// buffer is freed — here directly, as page_pool_recycle_direct).
type rxRing struct {
	p    *Pool
	bufs []*Buffer
	i    int
}

func newRxRing(b *testing.B, p *Pool) *rxRing {
	r := &rxRing{p: p, bufs: make([]*Buffer, rxRingSize)}
	require.NoError(b, p.AllocBulk(r.bufs))
	r.run(4 * rxRingSize) // warm up: the spare page(s) and the cache capacity
	return r
}

func (r *rxRing) run(n int) {
	p, bufs, i := r.p, r.bufs, r.i
	for range n {
		nb, err := p.Alloc()
		if err != nil {
			panic(err)
		}
		old := bufs[i]
		bufs[i] = nb
		p.Recycle(old)
		if i++; i == len(bufs) {
			i = 0
		}
	}
	r.i = i
}

// BenchmarkAllocRecycle measures one owner Alloc + Recycle pair (the RX
// refill with direct recycling). Target: full-page <= 15 ns/op, fragment
// within 1.3x of full-page (see BenchmarkFragFullRatio for the ratio measured
// side by side).
func BenchmarkAllocRecycle(b *testing.B) {
	b.Run(fullPage4K.name, func(b *testing.B) { benchAllocRecycle(b, fullPage4K) })
	b.Run("fragment", func(b *testing.B) {
		for _, l := range fragLayouts {
			b.Run(l.name, func(b *testing.B) { benchAllocRecycle(b, l) })
		}
	})
}

func benchAllocRecycle(b *testing.B, l benchLayout) {
	p := newBenchPool(b, l)
	r := newRxRing(b, p)
	pagesBefore := p.Stats().PageAllocs
	b.ReportAllocs()
	b.ResetTimer()
	r.run(b.N)
	b.StopTimer()
	got := p.Stats().PageAllocs
	require.Equal(b, pagesBefore, got, "steady state took %d new pages", got-pagesBefore)
}

// chunk is how many operations run between clock reads when two variants are
// interleaved; large enough that time.Now is noise, small enough that both
// variants see the same machine conditions.
const chunk = 4096

// interleave runs a and b for n operations each, alternating chunks, and
// returns their ns/op.
func interleave(n int, a, b func(int)) (nsA, nsB float64) {
	var ta, tb time.Duration
	for done := 0; done < n; {
		k := min(chunk, n-done)
		t0 := time.Now()
		a(k)
		t1 := time.Now()
		b(k)
		t2 := time.Now()
		ta += t1.Sub(t0)
		tb += t2.Sub(t1)
		done += k
	}
	return float64(ta.Nanoseconds()) / float64(n), float64(tb.Nanoseconds()) / float64(n)
}

// BenchmarkFragFullRatio runs full-page and fragment Alloc+Recycle
// interleaved in one benchmark and reports frag/full (target <= 1.3).
func BenchmarkFragFullRatio(b *testing.B) {
	for _, l := range fragLayouts {
		b.Run(l.name, func(b *testing.B) {
			full := newRxRing(b, newBenchPool(b, fullPage4K))
			frag := newRxRing(b, newBenchPool(b, l))
			b.ReportAllocs()
			b.ResetTimer()
			nsFull, nsFrag := interleave(b.N, full.run, frag.run)
			b.StopTimer()
			b.ReportMetric(nsFull, "full-ns/op")
			b.ReportMetric(nsFrag, "frag-ns/op")
			b.ReportMetric(nsFrag/nsFull, "frag/full")
		})
	}
}

// handoffBatch is how many buffers the owner hands to the remote goroutine at
// a time, so that the channel operation is amortised.
const handoffBatch = 64

// runReturnRing allocates n buffers on the owner and frees each of them on
// another goroutine with Put; the owner gets them back from the return ring.
func runReturnRing(p *Pool, n int) {
	work := make(chan []*Buffer, 4)
	free := make(chan []*Buffer, 8)
	for range cap(free) {
		free <- make([]*Buffer, 0, handoffBatch)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for bs := range work {
			for _, x := range bs {
				p.Put(x)
			}
			free <- bs[:0]
		}
	}()
	for left := n; left > 0; {
		bs := <-free
		k := min(handoffBatch, left)
		for range k {
			x, err := p.Alloc()
			if err != nil {
				panic(err)
			}
			bs = append(bs, x)
		}
		work <- bs
		left -= k
	}
	close(work)
	<-done
}

// BenchmarkReturnRing measures the cross-goroutine path: owner Alloc, Put on
// another goroutine, owner drains the return ring. Target <= 60 ns/op.
func BenchmarkReturnRing(b *testing.B) {
	for _, l := range []benchLayout{fullPage4K, frag64K} {
		b.Run(l.name, func(b *testing.B) {
			p := newBenchPool(b, l)
			runReturnRing(p, 64*rxRingSize) // warm up: grow to the pipeline's working set
			p.FlushStats()
			before := p.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			runReturnRing(p, b.N)
			b.StopTimer()
			p.FlushStats()
			after := p.Stats()
			b.ReportMetric(float64(after.RingDrained-before.RingDrained)/float64(b.N), "drained/op")
			b.ReportMetric(float64(after.RingOverflow-before.RingOverflow)/float64(b.N), "overflow/op")
			b.ReportMetric(float64(after.PageAllocs-before.PageAllocs), "new-pages")
		})
	}
}

// biasRxRing is rxRing over the kernel model.
type biasRxRing struct {
	bp   *biasPool
	full bool // page_pool_dev_alloc_pages instead of the fragment API
	bufs []biasFrag
	i    int
}

func newBiasRxRing(l benchLayout) *biasRxRing {
	r := &biasRxRing{bp: newBiasPool(l.page, l.buf, rxRingSize/l.frag+1), full: l.frag == 1, bufs: make([]biasFrag, rxRingSize)}
	for i := range r.bufs {
		r.bufs[i] = r.alloc()
	}
	r.run(4 * rxRingSize)
	return r
}

func (r *biasRxRing) alloc() biasFrag {
	if r.full {
		return r.bp.allocFull()
	}
	return r.bp.alloc()
}

func (r *biasRxRing) run(n int) {
	bp, bufs, i := r.bp, r.bufs, r.i
	if r.full {
		for range n {
			nb := bp.allocFull()
			old := bufs[i]
			bufs[i] = nb
			bp.freeLocal(old)
			if i++; i == len(bufs) {
				i = 0
			}
		}
	} else {
		for range n {
			nb := bp.alloc()
			old := bufs[i]
			bufs[i] = nb
			bp.freeLocal(old)
			if i++; i == len(bufs) {
				i = 0
			}
		}
	}
	r.i = i
}

// runBiasRemote is runReturnRing over the kernel model: fragments are freed
// on another goroutine with one atomic each; the last free of a page puts it
// on the ptr_ring.
func runBiasRemote(bp *biasPool, n int) {
	work := make(chan []biasFrag, 4)
	free := make(chan []biasFrag, 8)
	for range cap(free) {
		free <- make([]biasFrag, 0, handoffBatch)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for fs := range work {
			for _, f := range fs {
				bp.freeRemote(f)
			}
			free <- fs[:0]
		}
	}()
	for left := n; left > 0; {
		fs := <-free
		k := min(handoffBatch, left)
		for range k {
			fs = append(fs, bp.alloc())
		}
		work <- fs
		left -= k
	}
	close(work)
	<-done
}

// runMixed splits every batch of fragments between the owner and another
// goroutine: half are freed on the owner one batch later (drops, XDP_DROP,
// packets consumed in NAPI context), half on the other goroutine (sockets
// read on another CPU). So fragments of one page are freed on both CPUs at
// the same time, which is where a shared per-page refcount bounces.
func runMixed[H any](n int, alloc func() H, freeLocal, freeRemote func(H)) {
	const half = handoffBatch / 2
	work := make(chan []H, 4)
	free := make(chan []H, 8)
	for range cap(free) {
		free <- make([]H, 0, half)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for hs := range work {
			for _, h := range hs {
				freeRemote(h)
			}
			free <- hs[:0]
		}
	}()
	local := make([]H, 0, half)
	for left := n; left > 0; {
		remote := <-free
		k := min(handoffBatch, left)
		for _, h := range local {
			freeLocal(h)
		}
		local = local[:0]
		for i := range k {
			if i%2 == 0 {
				local = append(local, alloc())
			} else {
				remote = append(remote, alloc())
			}
		}
		work <- remote
		left -= k
	}
	close(work)
	<-done
	for _, h := range local {
		freeLocal(h)
	}
}

// BenchmarkBiasBaseline compares this pool's fragment path with a model of
// the kernel's bias-trick fragment path (one atomic per fragment free on the
// page's shared refcount), on the 64K-page MTU-1500 layout:
//
//   - full-page: this pool's full-page Alloc + direct recycle against the model's, interleaved;
//
//   - local: Alloc + direct recycle on the owner, interleaved in one run;
//
//   - remote: frees on another goroutine (pool: return ring; kernel model:
//     atomic unref, last free of a page through a locked ptr_ring).
//
//   - mixed: half of the fragments freed on the owner, half on another
//     goroutine, concurrently (runMixed).
//
// It reports bias/pool: how many times more the bias path costs (below 1:
// the bias model is cheaper).
func BenchmarkBiasBaseline(b *testing.B) {
	l := frag64K
	// The kernel model's own fragment penalty, to set against
	// BenchmarkFragFullRatio: full-page (pp_ref_count 1, no atomic) and
	// fragment mode interleaved.
	b.Run("kernel-frag-vs-full", func(b *testing.B) {
		full := newBiasRxRing(fullPage4K)
		frag := newBiasRxRing(l)
		b.ReportAllocs()
		b.ResetTimer()
		nsFull, nsFrag := interleave(b.N, full.run, frag.run)
		b.StopTimer()
		b.ReportMetric(nsFull, "full-ns/op")
		b.ReportMetric(nsFrag, "frag-ns/op")
		b.ReportMetric(nsFrag/nsFull, "frag/full")
	})
	// This pool's full-page path against the kernel model's (page_pool_dev_alloc_pages and
	// page_pool_recycle_direct), interleaved: the same-run baseline of full-page mode.
	b.Run("full-page", func(b *testing.B) {
		pool := newRxRing(b, newBenchPool(b, fullPage4K))
		bias := newBiasRxRing(fullPage4K)
		b.ReportAllocs()
		b.ResetTimer()
		nsBias, nsPool := interleave(b.N, bias.run, pool.run)
		b.StopTimer()
		b.ReportMetric(nsBias, "bias-ns/op")
		b.ReportMetric(nsPool, "pool-ns/op")
		b.ReportMetric(nsBias/nsPool, "bias/pool")
	})
	b.Run("local", func(b *testing.B) {
		pool := newRxRing(b, newBenchPool(b, l))
		bias := newBiasRxRing(l)
		b.ReportAllocs()
		b.ResetTimer()
		nsBias, nsPool := interleave(b.N, bias.run, pool.run)
		b.StopTimer()
		b.ReportMetric(nsBias, "bias-ns/op")
		b.ReportMetric(nsPool, "pool-ns/op")
		b.ReportMetric(nsBias/nsPool, "bias/pool")
	})
	b.Run("remote", func(b *testing.B) {
		p := newBenchPool(b, l)
		runReturnRing(p, 64*rxRingSize)
		bp := newBiasPool(l.page, l.buf, rxRingSize/l.frag+1)
		runBiasRemote(bp, 64*rxRingSize)
		pagesBefore := bp.newPages
		b.ReportAllocs()
		b.ResetTimer()
		// Alternate in slices of the run so both see the same conditions.
		var tBias, tPool time.Duration
		for done := 0; done < b.N; {
			k := min(64*chunk, b.N-done)
			t0 := time.Now()
			runBiasRemote(bp, k)
			t1 := time.Now()
			runReturnRing(p, k)
			t2 := time.Now()
			tBias += t1.Sub(t0)
			tPool += t2.Sub(t1)
			done += k
		}
		b.StopTimer()
		nsBias := float64(tBias.Nanoseconds()) / float64(b.N)
		nsPool := float64(tPool.Nanoseconds()) / float64(b.N)
		b.ReportMetric(nsBias, "bias-ns/op")
		b.ReportMetric(nsPool, "pool-ns/op")
		b.ReportMetric(nsBias/nsPool, "bias/pool")
		// Pages the model had to allocate because its ptr_ring was full
		// (the kernel's ring_full: the page goes back to the buddy allocator).
		b.ReportMetric(float64(bp.newPages-pagesBefore), "bias-new-pages")
	})
	b.Run("mixed", func(b *testing.B) {
		p := newBenchPool(b, l)
		bp := newBiasPool(l.page, l.buf, rxRingSize/l.frag+1)
		poolAlloc := func() *Buffer {
			x, err := p.Alloc()
			if err != nil {
				panic(err)
			}
			return x
		}
		runPool := func(n int) { runMixed(n, poolAlloc, p.Recycle, p.Put) }
		runBias := func(n int) { runMixed(n, bp.alloc, bp.freeLocal, bp.freeRemote) }
		runPool(64 * rxRingSize)
		runBias(64 * rxRingSize)
		b.ReportAllocs()
		b.ResetTimer()
		var tBias, tPool time.Duration
		for done := 0; done < b.N; {
			k := min(64*chunk, b.N-done)
			t0 := time.Now()
			runBias(k)
			t1 := time.Now()
			runPool(k)
			t2 := time.Now()
			tBias += t1.Sub(t0)
			tPool += t2.Sub(t1)
			done += k
		}
		b.StopTimer()
		nsBias := float64(tBias.Nanoseconds()) / float64(b.N)
		nsPool := float64(tPool.Nanoseconds()) / float64(b.N)
		b.ReportMetric(nsBias, "bias-ns/op")
		b.ReportMetric(nsPool, "pool-ns/op")
		b.ReportMetric(nsBias/nsPool, "bias/pool")
	})
}
