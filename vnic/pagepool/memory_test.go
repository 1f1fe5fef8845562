package pagepool

import (
	"errors"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestMemoryBudgetBoundary(t *testing.T) {
	tests := []struct {
		name   string
		budget int64
		page   int
		wantOK int // allocations that must succeed before the first ENOMEM
		maxTry int
	}{
		{"exact multiple", 3 * 4096, 4096, 3, 10},
		{"one byte short of the next page", 4*4096 - 1, 4096, 3, 10},
		{"one byte over a multiple", 2*4096 + 1, 4096, 2, 10},
		{"budget smaller than one page", 4095, 4096, 0, 10},
		{"single 64K page", 65536, 65536, 1, 10},
		{"jumbo order-2 pages", 5 * 16384, 16384, 5, 10},
		{"unlimited", 0, 4096, 64, 64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory(tc.budget)
			var pages [][]byte
			var failed error
			for range tc.maxTry {
				p, err := m.AllocPage(tc.page)
				if err != nil {
					failed = err
					break
				}
				require.Equal(t, tc.page, len(p), "page len %d cap %d, want %d", len(p), cap(p), tc.page)
				require.Equal(t, tc.page, cap(p), "page len %d cap %d, want %d", len(p), cap(p), tc.page)
				pages = append(pages, p)
			}
			require.Len(t, pages, tc.wantOK, "%d allocations succeeded, want %d (last error %v)", len(pages), tc.wantOK, failed)
			if tc.budget == 0 {
				require.NoError(t, failed, "unlimited budget failed")
			} else {
				require.ErrorIs(t, failed, unix.ENOMEM, "error %v does not wrap ENOMEM", failed)
				assert.Contains(t, failed.Error(), "budget", "error %q does not explain the budget", failed)
			}
			want := int64(len(pages) * tc.page)
			got := m.InUse()
			require.Equal(t, want, got, "InUse %d after the failure, want %d (the failure must charge nothing)", got, want)
			require.Equal(t, want, m.Peak(), "Peak")
			if tc.budget > 0 {
				require.LessOrEqual(t, m.InUse(), tc.budget, "InUse %d over budget %d", m.InUse(), tc.budget)
			}
			// Nothing lost: freeing one page makes exactly one allocation possible again.
			if len(pages) > 0 {
				m.FreePage(pages[0])
				p, err := m.AllocPage(tc.page)
				require.NoError(t, err, "allocation after a free failed")
				pages[0] = p
				if tc.budget > 0 {
					_, err := m.AllocPage(tc.page)
					require.ErrorIs(t, err, unix.ENOMEM, "second allocation after one free: %v, want ENOMEM", err)
				}
			}
			for _, p := range pages {
				m.FreePage(p)
			}
			require.Equal(t, int64(0), m.InUse(), "InUse %d after freeing everything", m.InUse())
			require.Equal(t, want, m.Peak(), "Peak %d changed by frees, want %d", m.Peak(), want)
			m.ResetPeak()
			require.Equal(t, int64(0), m.Peak(), "Peak %d after ResetPeak with nothing in use", m.Peak())
		})
	}
}

func TestMemoryAllocPageInvalidSize(t *testing.T) {
	m := NewMemory(0)
	for _, n := range []int{0, -1, -4096, MaxPageBytes + 1} {
		_, err := m.AllocPage(n)
		assert.ErrorIs(t, err, unix.EINVAL, "AllocPage(%d) = %v, want EINVAL", n, err)
	}
	require.Equal(t, int64(0), m.InUse(), "invalid sizes charged memory: InUse %d Peak %d", m.InUse(), m.Peak())
	require.Equal(t, int64(0), m.Peak(), "invalid sizes charged memory: InUse %d Peak %d", m.InUse(), m.Peak())
}

func TestMemorySetBudget(t *testing.T) {
	m := NewMemory(8 * 4096)
	require.Equal(t, int64(8*4096), m.Budget(), "Budget")
	var pages [][]byte
	for range 4 {
		p, err := m.AllocPage(4096)
		require.NoError(t, err)
		pages = append(pages, p)
	}
	// Lowering below InUse keeps what is charged; only new allocations fail.
	m.SetBudget(2 * 4096)
	require.Equal(t, int64(4*4096), m.InUse(), "InUse %d changed by SetBudget", m.InUse())
	if _, err := m.AllocPage(4096); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("alloc over a lowered budget: %v, want ENOMEM", err)
	}
	m.FreePage(pages[3])
	m.FreePage(pages[2])
	if _, err := m.AllocPage(4096); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("alloc at exactly the lowered budget: %v, want ENOMEM", err)
	}
	m.FreePage(pages[1])
	p, err := m.AllocPage(4096)
	require.NoError(t, err, "alloc under the lowered budget")
	m.FreePage(p)
	m.FreePage(pages[0])
	m.SetBudget(0)
	require.Equal(t, int64(0), m.Budget(), "Budget %d after SetBudget(0)", m.Budget())
	m.SetBudget(-5)
	require.Equal(t, int64(0), m.Budget(), "negative budget not treated as unlimited")
	require.Equal(t, int64(0), NewMemory(-1).Budget(), "NewMemory(-1) not unlimited")
}

func TestMemoryReusesFreedPages(t *testing.T) {
	m := NewMemory(0)
	a, _ := m.AllocPage(4096)
	a[0] = 0xAB
	m.FreePage(a)
	require.Equal(t, int64(4096), m.CachedBytes(), "CachedBytes %d, want 4096", m.CachedBytes())
	if _, err := m.AllocPage(8192); err != nil { // another size does not take it
		t.Fatal(err)
	}
	require.Equal(t, int64(4096), m.CachedBytes(), "a different size consumed the cached page")
	b, _ := m.AllocPage(4096)
	require.Same(t, unsafe.SliceData(b), unsafe.SliceData(a), "freed page not reused")
	require.Equal(t, int64(0), m.CachedBytes(), "CachedBytes %d InUse %d", m.CachedBytes(), m.InUse())
	require.Equal(t, int64(4096+8192), m.InUse(), "CachedBytes %d InUse %d", m.CachedBytes(), m.InUse())
}

func TestMemoryFreeListTrim(t *testing.T) {
	m := NewMemory(0)
	m.cacheFloor = 4 * 4096 // the 64 MiB floor, scaled down
	var small, big [][]byte
	for range 10 {
		p, _ := m.AllocPage(4096)
		small = append(small, p)
	}
	for range 3 {
		p, _ := m.AllocPage(16384)
		big = append(big, p)
	}
	check := func() {
		t.Helper()
		limit := max(m.cacheFloor, m.InUse())
		require.LessOrEqual(t, m.CachedBytes(), limit, "CachedBytes %d > max(floor, InUse) = %d", m.CachedBytes(), limit)
	}
	for _, p := range big {
		m.FreePage(p)
		check()
	}
	for _, p := range small {
		m.FreePage(p)
		check()
	}
	require.Equal(t, int64(0), m.InUse(), "InUse %d CachedBytes %d, want 0 and %d", m.InUse(), m.CachedBytes(), m.cacheFloor)
	require.Equal(t, m.cacheFloor, m.CachedBytes(), "InUse %d CachedBytes %d, want 0 and %d", m.InUse(), m.CachedBytes(), m.cacheFloor)
	// The trim evicted the other size class first: the 4K pages (freed last) remain.
	m.mu.Lock()
	n4, n16 := len(m.free[4096]), len(m.free[16384])
	m.mu.Unlock()
	require.Equal(t, 4, n4, "cached 4K pages %d, 16K pages %d; want 4 and 0", n4, n16)
	require.Equal(t, 0, n16, "cached 4K pages %d, 16K pages %d; want 4 and 0", n4, n16)
	require.Equal(t, int64(64<<20), NewMemory(0).cacheFloor, "default cache floor is not 64 MiB")
}

func TestMemoryFreePageOverRefundPanics(t *testing.T) {
	m := NewMemory(0)
	p, _ := m.AllocPage(4096)
	m.FreePage(p)
	msg := mustPanic(t, func() { m.FreePage(p) })
	require.Contains(t, msg, "double free", "panic %q does not say double free", msg)
	m.FreePage(nil) // empty: nothing to refund, no panic
}

func TestMemoryConcurrentBudget(t *testing.T) {
	const budget = 16 * 4096
	m := NewMemory(budget)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held [][]byte
			for i := range 500 {
				if (i+g)%3 != 2 {
					if p, err := m.AllocPage(4096); err == nil {
						held = append(held, p)
					} else if !errors.Is(err, unix.ENOMEM) {
						t.Error(err)
						return
					}
				} else if len(held) > 0 {
					m.FreePage(held[len(held)-1])
					held = held[:len(held)-1]
				}
			}
			for _, p := range held {
				m.FreePage(p)
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, m.Peak(), int64(budget), "Peak %d exceeded budget %d", m.Peak(), budget)
	require.Equal(t, int64(0), m.InUse(), "InUse %d after all frees", m.InUse())
}
