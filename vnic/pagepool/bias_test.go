package pagepool

import (
	"math"
	"sync"
	"sync/atomic"
)

// This file models the kernel's fragment allocator for the baseline
// benchmarks: page_pool_alloc_frag_netmem with the BIAS_MAX trick, and the
// free path napi_pp_put_page -> page_pool_put_netmem ->
// page_pool_unref_and_test, which costs one atomic per fragment free on the
// page's shared pp_ref_count (reference/mana-driver.md §6).

// biasMax is BIAS_MAX (LONG_MAX >> 1).
const biasMax = math.MaxInt64 >> 1

// ppSignature stands for PP_SIGNATURE, the pp_magic value of page_pool pages.
const ppSignature = 0x40

type biasPage struct {
	magic uintptr // pp_magic
	pp    *biasPool
	ref   atomic.Int64 // pp_ref_count
	mem   []byte
}

type biasFrag struct {
	pg  *biasPage
	off int
}

// biasRing models the page_pool ptr_ring: a producer lock, a consumer lock,
// and slots that are empty when nil.
type biasRing struct {
	prodMu sync.Mutex
	prod   int
	_      [cacheLine]byte
	consMu sync.Mutex
	cons   int
	_      [cacheLine]byte
	slots  []atomic.Pointer[biasPage]
}

// produce is ptr_ring_produce; false when full (the kernel then returns the
// page to the buddy allocator: page_pool_return_netmem).
func (r *biasRing) produce(pg *biasPage) bool {
	r.prodMu.Lock()
	defer r.prodMu.Unlock()
	s := &r.slots[r.prod]
	if s.Load() != nil {
		return false
	}
	s.Store(pg)
	if r.prod++; r.prod == len(r.slots) {
		r.prod = 0
	}
	return true
}

// biasPool is the owner side: alloc.cache plus the current frag page.
type biasPool struct {
	pageBytes, size int
	cache           []*biasPage // alloc.cache (the kernel's holds 128)
	frag            *biasPage
	fragUsers       int64
	fragOffset      int
	ring            biasRing
	newPages        int
}

func newBiasPool(pageBytes, size, ringSize int) *biasPool {
	bp := &biasPool{pageBytes: pageBytes, size: size}
	bp.ring.slots = make([]atomic.Pointer[biasPage], ringSize)
	return bp
}

// unref is page_pool_unref_netmem: the "sole owner" read, else an atomic
// subtraction.
func unref(pg *biasPage, nr int64) int64 {
	if pg.ref.Load() == nr {
		if nr != 1 {
			pg.ref.Store(1)
		}
		return 0
	}
	ret := pg.ref.Add(-nr)
	if ret == 0 {
		pg.ref.Store(1)
	}
	return ret
}

// getPage is page_pool_alloc_netmems: the cache, then a refill of up to 64
// from the ring under the consumer lock, then a new page.
func (bp *biasPool) getPage() *biasPage {
	if len(bp.cache) == 0 {
		bp.ring.consMu.Lock()
		for range refillBatch {
			s := &bp.ring.slots[bp.ring.cons]
			pg := s.Load()
			if pg == nil {
				break
			}
			s.Store(nil)
			if bp.ring.cons++; bp.ring.cons == len(bp.ring.slots) {
				bp.ring.cons = 0
			}
			bp.cache = append(bp.cache, pg)
		}
		bp.ring.consMu.Unlock()
	}
	if n := len(bp.cache); n > 0 {
		pg := bp.cache[n-1]
		bp.cache = bp.cache[:n-1]
		return pg
	}
	bp.newPages++
	pg := &biasPage{magic: ppSignature, pp: bp, mem: make([]byte, bp.pageBytes)}
	pg.ref.Store(1)
	return pg
}

// The model's entry points are kept out of line: in the kernel they are calls
// into net/core, and this pool's Alloc/Recycle/Put are not inlined either, so
// the comparison does not hinge on the inliner's budget.

// alloc is page_pool_alloc_frag_netmem.
//
//go:noinline
func (bp *biasPool) alloc() biasFrag {
	pg := bp.frag
	if pg != nil && bp.fragOffset+bp.size > bp.pageBytes {
		// page_pool_drain_frag: give back the unused bias in one atomic.
		if unref(pg, biasMax-bp.fragUsers) != 0 {
			pg = nil // other holders remain; they will free the page
		}
		// else we were the last user: reuse the page at once (frag_reset)
	} else if pg != nil {
		off := bp.fragOffset
		bp.fragUsers++
		bp.fragOffset += bp.size
		return biasFrag{pg, off}
	}
	if pg == nil {
		pg = bp.getPage()
		bp.frag = pg
	}
	bp.fragUsers = 1
	bp.fragOffset = bp.size
	pg.ref.Store(biasMax) // page_pool_fragment_netmem
	return biasFrag{pg, 0}
}

// allocFull is page_pool_dev_alloc_pages: full-page mode, no fragments;
// pp_ref_count stays 1.
//
//go:noinline
func (bp *biasPool) allocFull() biasFrag {
	return biasFrag{bp.getPage(), 0}
}

// checkPP is the page_pool test napi_pp_put_page makes on every free
// (is_pp_netmem and netmem_get_pp).
func (bp *biasPool) checkPP(pg *biasPage) {
	if pg.magic != ppSignature || pg.pp != bp {
		panic("bias model: not a page_pool page")
	}
}

// freeLocal is a NAPI-local free: the last user recycles into the cache. In
// full-page mode pp_ref_count is 1, so unref needs no atomic write.
//
//go:noinline
func (bp *biasPool) freeLocal(f biasFrag) {
	bp.checkPP(f.pg)
	if unref(f.pg, 1) == 0 {
		bp.cache = append(bp.cache, f.pg)
	}
}

// freeRemote is a free on another CPU: the last user goes to the ptr_ring.
//
//go:noinline
func (bp *biasPool) freeRemote(f biasFrag) {
	bp.checkPP(f.pg)
	if unref(f.pg, 1) == 0 {
		bp.ring.produce(f.pg)
	}
}
