// Package pagepool models the kernel's page_pool (net/core/page_pool.c) for one
// RX queue of a software MANA port: pages of the port's page size (times 2^order
// for jumbo single-buffer mode), sliced into FragCount buffers of BufSize bytes
// (fragment mode) or handed out one buffer per page (full-page mode, FragCount 1).
//
// # Ownership
//
// A Pool has one owner at a time: the RX queue goroutine holding the queue lock,
// or the control path while the queue is stopped. Alloc, AllocBulk, Recycle,
// Shrink, FlushStats and Destroy are owner-only; Put, Stats, PinnedBytes and
// Config are safe from any goroutine.
//
// # Instead of the bias trick
//
// Upstream page_pool_alloc_frag_netmem takes BIAS_MAX references on a new
// fragment page with one atomic store and gives the unused ones back with one
// atomic when the page is retired, but every fragment free still does an atomic
// decrement of the shared pp_ref_count (napi_pp_put_page: the ldaddal stall in
// the full-page-rx thread). This pool keeps all reference accounting on the
// owner instead, in plain memory:
//
//   - the owner allocates from and recycles into an owner-only LIFO cache of
//     buffer descriptors (the alloc.cache analogue, but unbounded so that it can
//     hold every free buffer of every page the pool holds);
//   - frees from any other goroutine push the descriptor onto a bounded MPSC
//     return ring (Vyukov-style sequence-numbered slots; the ptr_ring analogue),
//     falling back to a mutex-protected overflow list when the ring is full, so
//     a buffer is never lost;
//   - the owner drains the ring in batches of up to 64 when its cache is empty
//     (page_pool_refill_alloc_cache) and only then takes a new page from Memory;
//   - fragments are recycled individually, so a freed fragment is reused before
//     its siblings come back. The pool is per layout, so slot geometry never
//     changes and this is safe. Whether a page is idle (no buffer out) is
//     derived from its descriptors' states on the slow path (Shrink), and
//     counted per page only after Destroy, so no per-page counter is touched
//     on the fast path.
//
// The owner fast path therefore has no atomic instruction in either mode, and
// fragment mode costs the same as full-page mode. A side effect is that the
// pool never holds more pages than ceil(peak buffers out / FragCount): a new
// page is taken only when every buffer of every held page is out.
//
// The price is a descriptor per buffer (state and generation for the checks
// below) and two atomic read-modify-writes per Put (the ring's CAS and the
// slot's sequence store), against one per fragment free in the kernel. Which
// wins depends on how costly a contended refcount line is on the machine; see
// BenchmarkBiasBaseline.
//
// Pages go back to Memory only when all their buffers are back and the pool is
// shrinking (Shrink) or destroyed (Destroy, which mirrors page_pool_destroy and
// its deferred page_pool_release_retry).
//
// # Counters
//
// Stats keeps one set of counters; Stats.Kernel maps them to the kernel's
// page_pool_stats (alloc fast/slow/slow-high-order/empty/refill/waive,
// recycle cached/cache-full/ring/ring-full/released-refcnt), with the
// equivalence of each documented on KernelStats. Only Allocs and Recycles
// move on the owner fast path, in plain memory; the others change on slow
// paths.
//
// # Without recycling
//
// Config.NoRecycle models a driver that does not recycle (the pre-page_pool
// or pre-recycling baseline): buffers given back are retired, never handed out
// again, and a page returns to Memory when all its buffers were.
//
// # Programming errors
//
// Double frees, foreign buffers and use after Destroy are bugs inside manad,
// never reachable from user input. They are detected where it is cheap (a
// per-descriptor state byte and generation number checked on the owner side)
// and cause a panic with a message naming the pool, page and offset.
package pagepool
