package pagepool

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

const (
	// MaxPageBytes bounds one page (and so PageBytes and AllocPage's n). The
	// kernel's largest page_pool page is PAGE_SIZE << MAX_PAGE_ORDER (64 MiB on
	// 64K-page arm64); 1 GiB leaves room and still catches nonsense sizes.
	MaxPageBytes = 1 << 30

	// defaultCacheFloor is the free-list size Memory may always keep, whatever
	// InUse is.
	defaultCacheFloor = 64 << 20
)

// Memory is a per-port page allocator with a byte budget (0 = unlimited). It
// makes ENOMEM real for the port model: pools charge every page they hold to
// it, including pages whose buffers are still in flight. Safe for concurrent
// use.
type Memory struct {
	nextPageID atomic.Uint64

	mu     sync.Mutex
	budget int64
	inUse  int64
	peak   int64
	// free caches pages given back, by size, so that a reconfiguration does
	// not turn every page into garbage. Cached bytes are not charged.
	free       map[int][][]byte
	cached     int64
	cacheFloor int64 // cached may always reach this much; tests lower it
}

// NewMemory returns a Memory with the given budget in bytes; 0 (or a negative
// value) means unlimited.
func NewMemory(budget int64) *Memory {
	return &Memory{
		budget:     max(budget, 0),
		free:       make(map[int][][]byte),
		cacheFloor: defaultCacheFloor,
	}
}

// Budget returns the byte budget; 0 means unlimited.
func (m *Memory) Budget() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.budget
}

// SetBudget changes the byte budget; 0 (or a negative value) means unlimited.
// Lowering it below InUse is allowed: nothing already charged is taken back,
// only new allocations fail.
func (m *Memory) SetBudget(b int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.budget = max(b, 0)
}

// InUse returns the bytes currently charged: every page held by a pool,
// including pages whose buffers are still in flight after Destroy.
func (m *Memory) InUse() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inUse
}

// Peak returns the high-water mark of InUse since NewMemory or ResetPeak.
func (m *Memory) Peak() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// ResetPeak sets Peak to the current InUse.
func (m *Memory) ResetPeak() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peak = m.inUse
}

// CachedBytes returns the bytes of freed pages kept for reuse. They are not
// charged; the free list is trimmed so that CachedBytes never exceeds
// max(64 MiB, InUse).
func (m *Memory) CachedBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cached
}

// AllocPage charges n bytes and returns a page of exactly n bytes (len == cap
// == n). The page is not zeroed when it comes from the free list, as
// alloc_pages without __GFP_ZERO. If the charge would take InUse over a
// non-zero budget, it returns an error wrapping unix.ENOMEM and charges
// nothing; n <= 0 or n > MaxPageBytes returns an error wrapping unix.EINVAL.
func (m *Memory) AllocPage(n int) ([]byte, error) {
	if n <= 0 || n > MaxPageBytes {
		return nil, fmt.Errorf("pagepool: page size %d out of range 1..%d: %w", n, MaxPageBytes, unix.EINVAL)
	}
	size := int64(n)
	m.mu.Lock()
	if m.budget > 0 && m.inUse+size > m.budget {
		inUse, budget := m.inUse, m.budget
		m.mu.Unlock()
		return nil, fmt.Errorf("pagepool: a %d-byte page does not fit the memory budget (%d of %d bytes in use): %w",
			n, inUse, budget, unix.ENOMEM)
	}
	m.inUse += size
	m.peak = max(m.peak, m.inUse)
	var p []byte
	if list := m.free[n]; len(list) > 0 {
		p = list[len(list)-1]
		list[len(list)-1] = nil
		m.free[n] = list[:len(list)-1]
		m.cached -= size
	}
	m.mu.Unlock()
	if p == nil {
		// Allocated outside the lock: a fresh page may be large and zeroing it
		// must not stall other ports' pools.
		p = make([]byte, n)
	}
	return p, nil
}

// FreePage refunds len(p) bytes and keeps p for reuse by a later AllocPage of
// the same size. p must come from AllocPage on this Memory and must not be used
// afterwards. Refunding more than InUse is a programming error and panics.
func (m *Memory) FreePage(p []byte) {
	n := len(p)
	if n == 0 {
		return
	}
	size := int64(n)
	m.mu.Lock()
	defer m.mu.Unlock()
	if size > m.inUse {
		panic(fmt.Sprintf("pagepool: Memory.FreePage refunds %d bytes but only %d are in use (double free?)", n, m.inUse))
	}
	m.inUse -= size
	m.free[n] = append(m.free[n], p[:n:n])
	m.cached += size
	m.trimLocked(n)
}

// trimLocked drops cached pages until cached <= max(cacheFloor, inUse),
// preferring size classes other than keep (the one just freed, most likely to
// be asked for again).
func (m *Memory) trimLocked(keep int) {
	limit := max(m.cacheFloor, m.inUse)
	for m.cached > limit {
		victim, victimBytes := keep, int64(-1)
		for size, list := range m.free {
			if size == keep || len(list) == 0 {
				continue
			}
			if b := int64(size) * int64(len(list)); b > victimBytes {
				victim, victimBytes = size, b
			}
		}
		list := m.free[victim]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if len(list) == 0 {
			delete(m.free, victim)
		} else {
			m.free[victim] = list
		}
		m.cached -= int64(victim)
	}
}

// newPageID returns an identifier unique for this Memory's lifetime.
func (m *Memory) newPageID() uint64 {
	return m.nextPageID.Add(1)
}
