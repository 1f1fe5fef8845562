package pagepool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// poolMachine is a rapid state machine over one Pool and its Memory. The
// model is the set of buffers the test holds; buffers given to background
// putters are tracked separately until joined, because until then the pool
// may or may not have taken them back.
type poolMachine struct {
	cfg  Config
	mem  *Memory
	pool *Pool
	rel  *Release

	out     []*Buffer          // held by the test, in allocation order
	stamps  map[*Buffer]uint64 // stamp written into each held buffer
	next    uint64
	budget  int64
	pending sync.WaitGroup // background putters
	pendN   int            // buffers handed to background putters since the last join
	peakOut int            // max buffers out from the pool's point of view
	inUse   int64          // Memory.InUse at the last check
	// everOut is every (page, offset) handed out, for NoRecycle: none may come twice.
	everOut map[[2]uint64]bool
}

func newPoolMachine(t *rapid.T) *poolMachine {
	pageBytes := rapid.SampledFrom([]int{4096, 16384, 65536}).Draw(t, "pageBytes")
	frag := rapid.IntRange(1, 9).Draw(t, "fragCount")
	buf := pageBytes
	if frag > 1 {
		// Any stride that fits, not only 64-byte multiples.
		buf = rapid.IntRange(64, pageBytes/frag).Draw(t, "bufSize")
	}
	ring := rapid.SampledFrom([]int{0, 1, 2, 4, 16}).Draw(t, "ringSize")
	m := &poolMachine{stamps: map[*Buffer]uint64{}, everOut: map[[2]uint64]bool{}}
	m.budget = m.drawBudget(t, pageBytes)
	m.mem = NewMemory(m.budget)
	m.cfg = Config{Mem: m.mem, PageBytes: pageBytes, BufSize: buf, FragCount: frag, ReturnRingSize: ring,
		Name: "prop/rx0", ReleaseInterval: time.Hour, StallWarn: time.Hour,
		NoRecycle: rapid.IntRange(0, 3).Draw(t, "noRecycle") == 0}
	p, err := New(m.cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", m.cfg, err)
	}
	m.pool = p
	return m
}

func (m *poolMachine) drawBudget(t *rapid.T, pageBytes int) int64 {
	pages := rapid.IntRange(0, 12).Draw(t, "budgetPages")
	if pages == 0 {
		return 0 // unlimited
	}
	return int64(pages*pageBytes + rapid.IntRange(0, pageBytes-1).Draw(t, "budgetSlack"))
}

func (m *poolMachine) destroyed() bool { return m.rel != nil }

// take records a freshly handed-out buffer.
func (m *poolMachine) take(t *rapid.T, b *Buffer) {
	if b == nil {
		t.Fatalf("nil buffer without an error")
	}
	if _, dup := m.stamps[b]; dup {
		t.Fatalf("buffer page %d offset %d handed out twice while out", b.PageID(), b.Offset())
	}
	if b.Pool() != m.pool {
		t.Fatalf("buffer from another pool")
	}
	if k := [2]uint64{b.PageID(), uint64(b.Offset())}; m.cfg.NoRecycle && m.everOut[k] {
		t.Fatalf("recycling is off, but page %d offset %d was handed out again", k[0], k[1])
	} else {
		m.everOut[k] = true
	}
	m.next++
	stamp(b, m.next)
	m.stamps[b] = m.next
	m.out = append(m.out, b)
	m.peakOut = max(m.peakOut, len(m.out)+m.pendN)
}

// give removes a held buffer from the model after checking its memory was
// not touched by anyone else while it was out.
func (m *poolMachine) give(t *rapid.T, i int) *Buffer {
	b := m.out[i]
	if !stampOK(b, m.stamps[b]) {
		t.Fatalf("buffer page %d offset %d clobbered while out", b.PageID(), b.Offset())
	}
	delete(m.stamps, b)
	m.out = append(m.out[:i], m.out[i+1:]...)
	return b
}

func (m *poolMachine) pick(t *rapid.T) int {
	if len(m.out) == 0 {
		t.Skip("nothing out")
	}
	return rapid.IntRange(0, len(m.out)-1).Draw(t, "index")
}

// checkENOMEM verifies an allocation failure was honest: Memory really could
// not give a page and, when nothing is in flux, the pool had no free buffer.
func (m *poolMachine) checkENOMEM(t *rapid.T, err error, wanted int) {
	if !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("allocation error %v is not ENOMEM", err)
	}
	if m.budget == 0 || m.mem.InUse()+int64(m.cfg.PageBytes) <= m.budget {
		t.Fatalf("ENOMEM with InUse %d, page %d, budget %d", m.mem.InUse(), m.cfg.PageBytes, m.budget)
	}
	if m.pendN == 0 && !m.cfg.NoRecycle { // without recycling, given-back buffers are not free
		m.pool.FlushStats()
		s := m.pool.Stats()
		if free := s.Pages*m.cfg.FragCount - len(m.out); free >= wanted {
			t.Fatalf("ENOMEM for %d buffers with %d free in the pool (%+v)", wanted, free, s)
		}
	}
}

func (m *poolMachine) Alloc(t *rapid.T) {
	if m.destroyed() {
		t.Skip("destroyed")
	}
	b, err := m.pool.Alloc()
	if err != nil {
		m.checkENOMEM(t, err, 1)
		return
	}
	m.take(t, b)
}

func (m *poolMachine) AllocBulk(t *rapid.T) {
	if m.destroyed() {
		t.Skip("destroyed")
	}
	n := rapid.IntRange(0, 3*m.cfg.FragCount+2).Draw(t, "n")
	try := rapid.Bool().Draw(t, "try") // TryAllocBulk: the same, a failure not counted
	dst := make([]*Buffer, n)
	m.peakOut = max(m.peakOut, len(m.out)+m.pendN+n) // a failed bulk holds them briefly
	m.pool.FlushStats()
	before := m.pool.Stats()
	alloc, fails := m.pool.AllocBulk, uint64(1)
	if try {
		alloc, fails = m.pool.TryAllocBulk, 0
	}
	if err := alloc(dst); err != nil {
		m.checkENOMEM(t, err, n)
		for i, b := range dst {
			if b != nil {
				t.Fatalf("dst[%d] set after a failed AllocBulk", i)
			}
		}
		m.pool.FlushStats()
		if after := m.pool.Stats(); after.Allocs != before.Allocs || after.Recycles != before.Recycles {
			t.Fatalf("failed AllocBulk counted buffers: %+v -> %+v", before, after)
		} else if after.AllocFails != before.AllocFails+fails {
			t.Fatalf("failed AllocBulk (try %v) counted %d alloc failures, want %d", try, after.AllocFails-before.AllocFails, fails)
		}
		return
	}
	for _, b := range dst {
		m.take(t, b)
	}
}

func (m *poolMachine) Recycle(t *rapid.T) {
	if m.destroyed() {
		t.Skip("destroyed: only Put is allowed")
	}
	m.pool.Recycle(m.give(t, m.pick(t)))
}

// PutOwner returns a buffer through the ring from the owner goroutine.
func (m *poolMachine) PutOwner(t *rapid.T) {
	m.pool.Put(m.give(t, m.pick(t)))
	m.pendN++ // the pool has not necessarily taken it back yet
}

// PutOther returns a buffer from another goroutine and waits for it.
func (m *poolMachine) PutOther(t *rapid.T) {
	b := m.give(t, m.pick(t))
	done := make(chan struct{})
	go func() { m.pool.Put(b); close(done) }()
	<-done
	m.pendN++
}

// PutAsync hands several buffers to a goroutine that returns them while the
// owner carries on.
func (m *poolMachine) PutAsync(t *rapid.T) {
	k := rapid.IntRange(1, max(1, len(m.out))).Draw(t, "k")
	var bs []*Buffer
	for range min(k, len(m.out)) {
		bs = append(bs, m.give(t, m.pick(t)))
	}
	if len(bs) == 0 {
		t.Skip("nothing out")
	}
	m.pendN += len(bs)
	m.pending.Add(1)
	go func() {
		defer m.pending.Done()
		for _, b := range bs {
			m.pool.Put(b)
		}
	}()
}

// Join waits for background putters and lets the owner take everything back.
func (m *poolMachine) Join(t *rapid.T) {
	m.join(t)
}

func (m *poolMachine) join(t *rapid.T) {
	m.pending.Wait()
	if !m.destroyed() {
		m.pool.refill(1 << 30) // as the next empty-cache Alloc would
		m.pool.FlushStats()
	} else {
		want := len(m.out)
		eventually(t, "the releaser to take back joined puts", func() bool { return m.rel.InFlight() == want })
	}
	m.pendN = 0
}

func (m *poolMachine) Shrink(t *rapid.T) {
	if m.destroyed() {
		t.Skip("destroyed")
	}
	m.pending.Wait()
	m.pendN = 0
	m.pool.Shrink()
	// Every page with no buffer out went back to Memory.
	pages := map[uint64]bool{}
	for _, b := range m.out {
		pages[b.PageID()] = true
	}
	if s := m.pool.Stats(); s.Pages != len(pages) || s.InFlight != len(m.out) {
		t.Fatalf("after Shrink: %d pages, %d in flight; the test holds %d buffers on %d pages", s.Pages, s.InFlight, len(m.out), len(pages))
	}
}

func (m *poolMachine) SetBudget(t *rapid.T) {
	m.budget = m.drawBudget(t, m.cfg.PageBytes)
	m.mem.SetBudget(m.budget)
}

// MaybeDestroy destroys the pool early, now and then.
func (m *poolMachine) MaybeDestroy(t *rapid.T) {
	if rapid.IntRange(0, 19).Draw(t, "destroyNow") == 0 {
		m.Destroy(t)
	}
}

func (m *poolMachine) Destroy(t *rapid.T) {
	if m.destroyed() {
		if m.pool.Destroy() != m.rel {
			t.Fatalf("second Destroy returned another Release")
		}
		return
	}
	m.rel = m.pool.Destroy()
	if len(m.out) == 0 && m.pendN == 0 && !isClosed(m.rel.Done()) {
		t.Fatalf("Done not closed with nothing in flight")
	}
}

// Check runs after every action.
func (m *poolMachine) Check(t *rapid.T) {
	for _, b := range m.out {
		if !stampOK(b, m.stamps[b]) {
			t.Fatalf("held buffer page %d offset %d clobbered", b.PageID(), b.Offset())
		}
	}
	checkNoOverlap(t, m.out)
	seen := map[[2]uint64]bool{}
	for _, b := range m.out {
		k := [2]uint64{b.PageID(), uint64(b.Offset())}
		if seen[k] {
			t.Fatalf("two held buffers share page %d offset %d", k[0], k[1])
		}
		seen[k] = true
	}
	if !m.destroyed() {
		m.pool.FlushStats()
	}
	s := m.pool.Stats()
	inUse := m.mem.InUse()
	if inUse > m.inUse && m.budget > 0 && inUse > m.budget {
		t.Fatalf("InUse grew to %d, over the budget %d", inUse, m.budget)
	}
	m.inUse = inUse
	// After Destroy, with puts on their way, the releaser may be between
	// refunding a page and publishing it; compare only when it is idle.
	quiet := !m.destroyed() || m.pendN == 0
	if quiet && (inUse != s.PinnedBytes || inUse != m.pool.PinnedBytes()) {
		t.Fatalf("Memory.InUse %d, pool pins %d / %d", inUse, s.PinnedBytes, m.pool.PinnedBytes())
	}
	if s.Pages != int(s.PageAllocs-s.PageReleases) {
		t.Fatalf("Pages %d != PageAllocs %d - PageReleases %d", s.Pages, s.PageAllocs, s.PageReleases)
	}
	// Pages are taken only when every buffer of every held page is out.
	// (Without recycling a page is not refilled, so the bound does not apply.)
	if maxPages := (m.peakOut + m.cfg.FragCount - 1) / m.cfg.FragCount; s.Pages > maxPages && !m.cfg.NoRecycle {
		t.Fatalf("%d pages held, but at most %d buffers were ever out (%d per page)", s.Pages, m.peakOut, m.cfg.FragCount)
	}
	if s.Pages*m.cfg.FragCount < len(m.out) {
		t.Fatalf("%d pages cannot hold the %d buffers out", s.Pages, len(m.out))
	}
	if s.InFlight < len(m.out) || s.InFlight > len(m.out)+m.pendN {
		t.Fatalf("InFlight %d, the test holds %d and %d are on their way back", s.InFlight, len(m.out), m.pendN)
	}
	if s.Allocs != s.Recycles+s.Retired+s.RingDrained+uint64(s.InFlight) || s.RingDrained > s.Puts ||
		(m.cfg.NoRecycle && s.Recycles != 0) || (!m.cfg.NoRecycle && (s.Retired != 0 || s.ReleasedRefcnt != 0)) {
		t.Fatalf("counters do not add up: %+v", s)
	}
	if m.destroyed() && m.pendN == 0 {
		if r := m.rel.InFlight(); r != len(m.out) {
			t.Fatalf("Release.InFlight %d, want %d", r, len(m.out))
		}
		if isClosed(m.rel.Done()) != (len(m.out) == 0) {
			t.Fatalf("Done closed = %v with %d buffers out", isClosed(m.rel.Done()), len(m.out))
		}
	}
}

// finish returns everything, destroys the pool and checks that all memory
// came back.
func (m *poolMachine) finish(t *rapid.T) {
	m.pending.Wait()
	if !m.destroyed() {
		m.rel = m.pool.Destroy()
	}
	bs := m.out
	for _, b := range bs {
		if !stampOK(b, m.stamps[b]) {
			t.Fatalf("held buffer clobbered")
		}
	}
	m.out = nil
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range bs {
			m.pool.Put(b)
		}
	}()
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.rel.Wait(ctx); err != nil {
		t.Fatalf("release did not complete: %v", err)
	}
	s := m.pool.Stats()
	if m.mem.InUse() != 0 || m.pool.PinnedBytes() != 0 || m.rel.InFlight() != 0 || s.InFlight != 0 || s.Pages != 0 {
		t.Fatalf("after release: InUse %d, stats %+v", m.mem.InUse(), s)
	}
	// Every buffer handed out came back exactly once.
	if s.Allocs != s.Recycles+s.Retired+s.RingDrained || s.Puts != s.RingDrained || s.PageReleases != s.PageAllocs {
		t.Fatalf("not every buffer came back exactly once: %+v", s)
	}
	if peak := m.mem.Peak(); m.budget > 0 && peak > 0 {
		_ = peak // budget changes over time; growth past the budget is checked step by step
	}
}

func TestPoolStateMachine(t *testing.T) {
	// ran counts completed actions, so the log shows the machine is not
	// skipping its way through.
	ran := map[string]int{}
	counted := func(name string, f func(*rapid.T)) func(*rapid.T) {
		return func(t *rapid.T) { f(t); ran[name]++ }
	}
	var enomem, overflow, deferred, early int
	rapid.Check(t, func(t *rapid.T) {
		m := newPoolMachine(t)
		defer m.pending.Wait() // never leak a putter, even on failure
		// Live phase. Frequent actions appear twice to weight them; three
		// rounds because rapid's Repeat averages only 30 steps.
		live := map[string]func(*rapid.T){
			"Alloc":     counted("Alloc", m.Alloc),
			"Alloc2":    counted("Alloc", m.Alloc),
			"AllocBulk": counted("AllocBulk", m.AllocBulk),
			"Recycle":   counted("Recycle", m.Recycle),
			"Recycle2":  counted("Recycle", m.Recycle),
			"PutOwner":  counted("PutOwner", m.PutOwner),
			"PutOther":  counted("PutOther", m.PutOther),
			"PutAsync":  counted("PutAsync", m.PutAsync),
			"Join":      counted("Join", m.Join),
			"Shrink":    counted("Shrink", m.Shrink),
			"SetBudget": counted("SetBudget", m.SetBudget),
			"Destroy":   counted("MaybeDestroy", m.MaybeDestroy),
			"":          m.Check,
		}
		for range 3 {
			if !m.destroyed() {
				t.Repeat(live)
			}
		}
		if m.destroyed() {
			early++
		}
		// Destroyed phase: buffers come home through Put only.
		m.Destroy(t)
		m.Check(t)
		if len(m.out) > 0 {
			deferred++
		}
		t.Repeat(map[string]func(*rapid.T){
			"PutOwner": counted("PutOwner", m.PutOwner),
			"PutOther": counted("PutOther", m.PutOther),
			"PutAsync": counted("PutAsync", m.PutAsync),
			"Join":     counted("Join", m.Join),
			"Destroy":  counted("Destroy", m.Destroy),
			"":         m.Check,
		})
		m.finish(t)
		s := m.pool.Stats()
		if s.AllocFails > 0 {
			enomem++
		}
		if s.RingOverflow > 0 {
			overflow++
		}
	})
	t.Logf("actions run: %v; runs with ENOMEM %d, ring overflow %d, early Destroy %d, deferred release %d",
		ran, enomem, overflow, early, deferred)
}

// TestMemorySharedByPoolsProperty runs several pools of different layouts on
// one Memory (as the queues of one port do) and checks that the budget holds
// across them and that everything is refunded.
func TestMemorySharedByPoolsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		budget := int64(rapid.IntRange(1, 40).Draw(t, "budget4K")) * 4096
		mem := NewMemory(budget)
		layouts := []Config{
			{PageBytes: 4096, BufSize: 4096, FragCount: 1},
			{PageBytes: 4096, BufSize: 1856, FragCount: 2},
			{PageBytes: 16384, BufSize: 2112, FragCount: 7},
		}
		pools := make([]*Pool, len(layouts))
		held := make([][]*Buffer, len(layouts))
		for i, c := range layouts {
			c.Mem, c.Name = mem, fmt.Sprintf("prop/rx%d", i)
			p, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			pools[i] = p
		}
		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for range steps {
			i := rapid.IntRange(0, len(pools)-1).Draw(t, "pool")
			if rapid.Bool().Draw(t, "alloc") {
				b, err := pools[i].Alloc()
				if err != nil {
					if !errors.Is(err, unix.ENOMEM) || mem.InUse()+int64(layouts[i].PageBytes) <= budget {
						t.Fatalf("Alloc: %v with InUse %d budget %d", err, mem.InUse(), budget)
					}
					continue
				}
				held[i] = append(held[i], b)
			} else if n := len(held[i]); n > 0 {
				j := rapid.IntRange(0, n-1).Draw(t, "which")
				pools[i].Recycle(held[i][j])
				held[i] = append(held[i][:j], held[i][j+1:]...)
			}
			var pinned int64
			for _, p := range pools {
				pinned += p.PinnedBytes()
			}
			if mem.InUse() != pinned || mem.InUse() > budget || mem.Peak() > budget {
				t.Fatalf("InUse %d Peak %d pinned %d budget %d", mem.InUse(), mem.Peak(), pinned, budget)
			}
		}
		for i, p := range pools {
			r := p.Destroy()
			for _, b := range held[i] {
				p.Put(b)
			}
			if err := r.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if mem.InUse() != 0 {
			t.Fatalf("InUse %d after destroying every pool", mem.InUse())
		}
	})
}
