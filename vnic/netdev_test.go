package vnic

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (tp *testPort) mustLocked(what string, f func() error) {
	tp.t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if err := f(); err != nil {
		tp.t.Fatalf("%s: %v", what, err)
	}
}

// TestPagePoolLifetime: every queue's pool is listed with its id, ifindex and NAPI; after a
// reconfiguration the new pools have new ids, and an old pool with a buffer still out stays
// listed, detached (detach time, no NAPI, its inflight), until that buffer comes back.
func TestPagePoolLifetime(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.SetIfindex(7)
	tp.open()
	tp.host.keep = true
	require.Equal(t, RxDelivered, tp.Receive(0, udpFrame(100, 1, 2)), "Receive")
	before := tp.PagePools()
	require.Len(t, before, 4, "%d pools, want 4: %+v", len(before), before)
	napis := tp.NAPIs()
	for i, pp := range before {
		if pp.Queue != i || pp.Ifindex != 7 || pp.NAPIID != napis[i].ID || pp.Detached() || pp.ID == 0 {
			t.Errorf("pool %d: %+v (napis %+v)", i, pp, napis)
		}
		want := 128 + b2i(i == 0)
		assert.Equal(t, want, pp.BuffersOut, "pool %d: %d buffers out, want %d (ring + kept)", i, pp.BuffersOut, want)
		// 7 buffers per 16K page: 19 pages hold the ring, and the kept buffer's successor.
		assert.Equal(t, 19, pp.Inflight, "pool %d: inflight %d pages, %d bytes; want 19 pages", i, pp.Inflight, pp.InflightMem)
		assert.Equal(t, int64(19*16384), pp.InflightMem, "pool %d: inflight %d pages, %d bytes; want 19 pages", i, pp.Inflight, pp.InflightMem)
	}
	start, startBoot := time.Now(), boottime()
	tp.mustLocked("SetMTU", func() error { return tp.SetMTU(1400) })
	after := tp.PagePools()
	require.Len(t, after, 5, "%d pools after the rebuild, want 4 new + 1 detached: %+v", len(after), after)
	old := after[4]
	if old.ID != before[0].ID || !old.Detached() || old.DetachTime.Before(start.Add(-time.Second)) ||
		old.NAPIID != 0 || old.BuffersOut != 1 || old.Inflight != 1 || old.InflightMem != 16384 || old.Queue != 0 {
		t.Errorf("detached pool %+v, want queue 0's old pool with its one kept buffer", old)
	}
	assert.GreaterOrEqual(t, old.DetachBoottime, startBoot, "detach boottime %v, before the reconfiguration at %v", old.DetachBoottime, startBoot)
	assert.NotEqual(t, time.Duration(0), startBoot, "detach boottime %v, before the reconfiguration at %v", old.DetachBoottime, startBoot)
	ids := map[uint32]bool{}
	for _, pp := range append(before, after[:4]...) {
		if ids[pp.ID] {
			t.Errorf("pool id %d reused", pp.ID)
		}
		ids[pp.ID] = true
	}
	tp.host.release()
	deadline := time.Now().Add(10 * time.Second)
	for len(tp.PagePools()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("detached pool still listed after its last buffer returned: %+v", tp.PagePools())
		}
		time.Sleep(time.Millisecond)
	}
	tp.locked(tp.Close)
	assert.Empty(t, tp.PagePools(), "pools listed after Close with nothing in flight")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestNAPIIDs: each RX queue has a NAPI id and TX queues none (mana's TX NAPIs are
// NO_BUSY_POLL); ids are unique across the ports sharing an IDs, a rebuild gives new ones, and a
// stopped port lists no queues.
func TestNAPIIDs(t *testing.T) {
	ids := &IDs{}
	a := newTestPort(t, func(c *Config, _ *Settings) { c.IDs = ids })
	b := newTestPort(t, func(c *Config, _ *Settings) { c.Name, c.IDs = "eth1", ids })
	a.open()
	b.open()
	seen := map[uint32]bool{}
	check := func(p *testPort) {
		t.Helper()
		qs := p.Queues()
		require.Len(t, qs, 8, "%d queues, want 4 RX + 4 TX: %+v", len(qs), qs)
		for i := range 4 {
			rx, tx := qs[i], qs[4+i]
			assert.Equal(t, QueueRX, rx.Type, "queue pair %d: %+v %+v", i, rx, tx)
			assert.Equal(t, QueueTX, tx.Type, "queue pair %d: %+v %+v", i, rx, tx)
			assert.Equal(t, i, rx.ID, "queue pair %d: %+v %+v", i, rx, tx)
			assert.Equal(t, i, tx.ID, "queue pair %d: %+v %+v", i, rx, tx)
			assert.Equal(t, uint32(0), tx.NAPIID, "queue pair %d: %+v %+v", i, rx, tx)
			if rx.NAPIID < MinNAPIID || seen[rx.NAPIID] {
				t.Errorf("queue %d NAPI id %d reused or below %d", i, rx.NAPIID, MinNAPIID)
			}
			seen[rx.NAPIID] = true
		}
		ns := p.NAPIs()
		require.Len(t, ns, 4, "%d NAPIs, want one per RX queue: %+v", len(ns), ns)
		for i, n := range ns {
			assert.Equal(t, qs[i].NAPIID, n.ID, "NAPI %+v does not poll RX queue %+v", n, qs[i])
			assert.Equal(t, i, n.Queue, "NAPI %+v does not poll RX queue %+v", n, qs[i])
		}
	}
	check(a)
	check(b)
	a.mustLocked("SetRings", func() error { return a.SetRings(256, 128) })
	check(a)
	stable := a.Queues()
	assert.True(t, slices.Equal(stable, a.Queues()), "NAPI ids changed without a rebuild")
	a.locked(a.Close)
	if qs, ns := a.Queues(), a.NAPIs(); len(qs) != 0 || len(ns) != 0 {
		t.Errorf("a stopped port lists queues %+v, NAPIs %+v", qs, ns)
	}
}

// TestQStatsAcrossRebuild: per-queue qstats count since the queue was created and restart with
// a rebuild; Base takes over what the old queues counted (and frames that found no queue), so
// the totals never go backwards.
func TestQStatsAcrossRebuild(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	for q := range 4 {
		for range q + 1 {
			tp.Receive(q, udpFrame(100, 1, 2))
		}
		tp.Transmit(q, udpFrame(60, 1, 2))
	}
	tp.Receive(1, udpFrame(1600, 1, 2)) // oversize: a hardware drop
	s := tp.QStats()
	require.Len(t, s.Queues, 8, "before the rebuild: %+v", s)
	require.Equal(t, QStats{}, s.Base, "before the rebuild: %+v", s)
	for q := range 4 {
		rx, tx := s.Queues[q], s.Queues[4+q]
		assert.Equal(t, uint64(q+1), rx.RxPackets, "queue %d: rx %+v tx %+v", q, rx, tx)
		assert.Equal(t, uint64(100*(q+1)), rx.RxBytes, "queue %d: rx %+v tx %+v", q, rx, tx)
		assert.Equal(t, uint64(1), tx.TxPackets, "queue %d: rx %+v tx %+v", q, rx, tx)
		assert.Equal(t, uint64(60), tx.TxBytes, "queue %d: rx %+v tx %+v", q, rx, tx)
	}
	if s.Queues[1].RxHwDrops != 1 || s.Queues[1].RxHwDropOverruns != 0 {
		t.Errorf("queue 1 hw drops %+v, want the oversize frame", s.Queues[1])
	}
	want := QStats{RxPackets: 10, RxBytes: 1000, RxHwDrops: 1, TxPackets: 4, TxBytes: 240}
	assert.Equal(t, want, s.Total, "total")
	tp.mustLocked("SetChannels", func() error { return tp.SetChannels(2) })
	tp.locked(tp.Close)
	tp.Receive(3, udpFrame(100, 1, 2)) // no queue: an overrun, counted in the base
	tp.open()
	tp.Receive(0, udpFrame(100, 1, 2))
	s = tp.QStats()
	if len(s.Queues) != 4 || s.Queues[0].RxPackets != 1 || s.Queues[1].RxPackets != 0 {
		t.Errorf("after the rebuild the queues do not start from 0: %+v", s.Queues)
	}
	want.RxPackets, want.RxBytes = 11, 1100
	want.RxHwDrops, want.RxHwDropOverruns = 2, 1
	assert.Equal(t, want, s.Total, "total")
	assert.Equal(t, want, tp.QStatsTotal(), "QStatsTotal")
	wantBase := want
	wantBase.RxPackets, wantBase.RxBytes = 10, 1000
	assert.Equal(t, wantBase, s.Base, "base")
}

// TestRxAllocModes: the allocation knobs change what the pools do, and the page-pool counters
// show it.
func TestRxAllocModes(t *testing.T) {
	const frames = 300
	tests := []struct {
		alloc     rxbuf.Alloc
		noRecycle bool
		check     func(t *testing.T, qc QueueCounters, pools []PagePool)
	}{
		{rxbuf.AllocPagePoolFrag, false, func(t *testing.T, qc QueueCounters, pools []PagePool) {
			k := pools[0].Stats
			// 16K pages, 7 buffers each: 19 pages for the ring, then every refill is recycled.
			assert.Equal(t, uint64(19), qc.Pool.PageAllocs, "pages %d, %+v", qc.Pool.PageAllocs, k)
			assert.Equal(t, uint64(frames), k.RecycleCached, "pages %d, %+v", qc.Pool.PageAllocs, k)
			assert.Equal(t, uint64(0), k.RecycleReleasedRefcnt, "pages %d, %+v", qc.Pool.PageAllocs, k)
			assert.GreaterOrEqual(t, k.AllocFast, uint64(frames), "pages %d, %+v", qc.Pool.PageAllocs, k)
		}},
		{rxbuf.AllocPagePoolPage, false, func(t *testing.T, qc QueueCounters, pools []PagePool) {
			k := pools[0].Stats
			if qc.Pool.PageAllocs != 129 || k.RecycleCached != frames || pools[0].InflightMem != 129*16384 {
				t.Errorf("pages %d, %+v", qc.Pool.PageAllocs, pools[0])
			}
		}},
		{rxbuf.AllocPagePoolFrag, true, func(t *testing.T, qc QueueCounters, pools []PagePool) {
			k := pools[0].Stats
			assert.Equal(t, uint64(0), k.RecycleCached, "recycling off: %+v, page releases %d", k, qc.Pool.PageReleases)
			assert.Equal(t, uint64(0), k.RecycleRing, "recycling off: %+v, page releases %d", k, qc.Pool.PageReleases)
			assert.NotEqual(t, uint64(0), k.RecycleReleasedRefcnt, "recycling off: %+v, page releases %d", k, qc.Pool.PageReleases)
			assert.Equal(t, k.RecycleReleasedRefcnt, qc.Pool.PageReleases, "recycling off: %+v, page releases %d", k, qc.Pool.PageReleases)
		}},
		{rxbuf.AllocNoPool, false, func(t *testing.T, qc QueueCounters, pools []PagePool) {
			assert.Empty(t, pools, "no-pool queues list page pools")
			st := qc.Pool
			assert.Equal(t, st.Allocs, st.PageAllocs, "no-pool: every buffer should be its own allocation, freed on return: %+v", st)
			assert.Equal(t, uint64(128+frames), st.Allocs, "no-pool: every buffer should be its own allocation, freed on return: %+v", st)
			assert.Equal(t, uint64(0), st.Recycles, "no-pool: every buffer should be its own allocation, freed on return: %+v", st)
			assert.Equal(t, uint64(frames), st.ReleasedRefcnt, "no-pool: every buffer should be its own allocation, freed on return: %+v", st)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.alloc.String()+map[bool]string{true: "/no-recycle", false: ""}[tt.noRecycle], func(t *testing.T) {
			tp := newTestPort(t, func(c *Config, _ *Settings) { c.RxAlloc, c.RxRecycle = tt.alloc, RecycleIf(!tt.noRecycle) })
			tp.open()
			for range frames {
				require.Equal(t, RxDelivered, tp.Receive(0, udpFrame(100, 1, 2)), "Receive")
			}
			var qc []QueueCounters
			tp.locked(func() { qc = tp.QueueCounters() })
			pools := tp.PagePools()
			if tt.alloc != rxbuf.AllocNoPool {
				require.Len(t, pools, 4, "%d pools", len(pools))
			}
			tt.check(t, qc[0], pools)
		})
	}
}

// TestShortHeadroom: frames delivered with less than LL_RESERVED_SPACE of headroom are counted,
// on exactly the layouts that give less (the pre-headroom rule without XDP, in both of its
// modes; the pre-frag rule above the XDP MTU limit), and on no other.
func TestShortHeadroom(t *testing.T) {
	tests := []struct {
		rule     rxbuf.Rule
		page     int
		mtu      int
		xdp      bool
		fullPage bool
		short    bool
	}{
		{rxbuf.RuleUpstream, 4096, 1500, false, false, false},
		{rxbuf.RuleUpstream, 4096, 1000, false, false, false}, // fragments, still with headroom
		{rxbuf.RuleUpstream, 16384, 1500, true, false, false},
		{rxbuf.RulePreHeadroom, 4096, 1500, false, false, true},
		{rxbuf.RulePreHeadroom, 4096, 1500, false, true, true}, // full-page-rx: headroom 0 too
		{rxbuf.RulePreHeadroom, 4096, 3000, false, false, true},
		{rxbuf.RulePreHeadroom, 4096, 1500, true, false, false}, // XDP reserves 256
		{rxbuf.RulePreFrag, 4096, 1500, false, false, false},
		{rxbuf.RulePreFrag, 4096, 9000, false, false, true}, // above MANA_XDP_MTU_MAX: no headroom
	}
	for _, tt := range tests {
		l := rxbuf.MustCompute(rxbuf.Params{Rule: tt.rule, PageSize: tt.page, MTU: tt.mtu, XDP: tt.xdp, FullPageRx: tt.fullPage})
		require.Equal(t, tt.short, l.Headroom < rxbuf.LLReservedSpace, "%+v: layout headroom %d; the table is wrong", tt, l.Headroom)
		tp := newTestPort(t, func(c *Config, s *Settings) {
			c.Rule, c.PageSize, s.MTU = tt.rule, tt.page, tt.mtu
			if tt.xdp {
				s.XDP = BuiltinXDPByName("pass")
			}
			if tt.fullPage {
				s.PrivFlags = privflag.FullPageRx
			}
		})
		tp.open()
		for range 5 {
			require.Equal(t, RxDelivered, tp.Receive(2, udpFrame(200, 1, 2)), "Receive")
		}
		tp.Receive(2, nil) // a zero-length completion is not delivered, so not counted
		var qc []QueueCounters
		tp.locked(func() { qc = tp.QueueCounters() })
		want := uint64(5 * b2i(tt.short))
		// manactl stats shows it as manad_rx_short_headroom, after the driver's counters.
		extra := tp.ExtraStats()[slices.Index(ExtraStatNames(), "manad_rx_short_headroom")]
		assert.Equal(t, want, qcount(t, qc[2], "manad_rx_short_headroom"), "%+v (headroom %d): short-headroom %d / %d, want %d", tt, l.Headroom, qcount(t, qc[2], "manad_rx_short_headroom"), extra, want)
		assert.Equal(t, want, extra, "%+v (headroom %d): short-headroom %d / %d, want %d", tt, l.Headroom, qcount(t, qc[2], "manad_rx_short_headroom"), extra, want)
	}
}

// TestNetdevViewsConcurrent: the netdev views may be read while every queue passes traffic and
// the control path rebuilds the queues (run with -race); a pool is never listed twice.
func TestNetdevViewsConcurrent(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for q := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					tp.Receive(q, udpFrame(100, 1, 2))
					tp.Transmit(q, udpFrame(60, 1, 2))
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			seen := map[uint32]bool{}
			for _, pp := range tp.PagePools() {
				if seen[pp.ID] {
					t.Errorf("pool %d listed twice", pp.ID)
				}
				seen[pp.ID] = true
			}
			tp.Queues()
			tp.NAPIs()
			tp.QStats()
		}
	}()
	var last QStats
	for i := range 20 {
		tp.mustLocked("SetRings", func() error { return tp.SetRings(128<<(i%2), 128) })
		tot := tp.QStats().Total
		assert.GreaterOrEqual(t, tot.RxPackets, last.RxPackets, "totals went backwards: %+v after %+v", tot, last)
		assert.GreaterOrEqual(t, tot.TxPackets, last.TxPackets, "totals went backwards: %+v after %+v", tot, last)
		last = tot
	}
	close(stop)
	wg.Wait()
}

// TestDetachedPoolsBounded: without anyone listing them, the detached pools the port remembers
// are only those still draining, however many rebuilds there were.
func TestDetachedPoolsBounded(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	for i := range 50 {
		tp.mustLocked("SetRings", func() error { return tp.SetRings(128<<(i%2), 128) })
	}
	tp.pools.mu.Lock()
	n := len(tp.pools.detached)
	tp.pools.mu.Unlock()
	assert.Equal(t, 0, n, "%d detached pools remembered after 50 rebuilds with nothing in flight", n)
}

// poolEvents records a port's page-pool events.
type poolEvents struct {
	mu  sync.Mutex
	evs []PagePoolEvent
	got chan struct{} // poked on every event
}

func (r *poolEvents) record(_ *Port, ev PagePoolEvent) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
}

// take returns the events so far and forgets them.
func (r *poolEvents) take() []PagePoolEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}

// TestPagePoolEvents: the events follow the kernel's page_pool_user.c: one add per new pool (no
// NAPI, nothing in flight yet, as mana_create_rxq creates the pool), at a rebuild a change for
// the old pool whose buffer the host holds (detach time, no NAPI, its page) and a del without
// detach time for each old pool with nothing out, then a del for the held one when its buffer
// returns; nothing for a no-op.
func TestPagePoolEvents(t *testing.T) {
	rec := &poolEvents{got: make(chan struct{}, 1)}
	tp := newTestPort(t, func(c *Config, _ *Settings) { c.OnPagePool = rec.record })
	tp.SetIfindex(7)
	tp.open()
	added := rec.take()
	pools := tp.PagePools()
	require.Len(t, added, 4, "events %+v for pools %+v, want 4 adds", added, pools)
	require.Len(t, pools, 4, "events %+v for pools %+v, want 4 adds", added, pools)
	for i, ev := range added {
		if want := (PagePool{ID: pools[i].ID, Ifindex: 7, Queue: i}); ev.Kind != PagePoolAdded || ev.Pool != want {
			t.Errorf("event %d %v %+v, want add %+v", i, ev.Kind, ev.Pool, want)
		}
	}
	tp.host.keep = true
	require.Equal(t, RxDelivered, tp.Receive(0, udpFrame(100, 1, 2)), "Receive")
	tp.mustLocked("SetMTU 1500 (no-op)", func() error { return tp.SetMTU(1500) })
	require.Empty(t, rec.take(), "events for a no-op")
	tp.mustLocked("SetMTU", func() error { return tp.SetMTU(1400) })
	evs := rec.take()
	after := tp.PagePools()
	require.Len(t, evs, 8, "%d events after the rebuild, want 1 change + 3 del + 4 add: %+v (pools %+v)", len(evs), evs, after)
	require.Len(t, after, 5, "%d events after the rebuild, want 1 change + 3 del + 4 add: %+v (pools %+v)", len(evs), evs, after)
	ch := evs[0]
	if ch.Kind != PagePoolDetached || ch.Pool != after[4] || ch.Pool.ID != pools[0].ID || ch.Pool.Inflight != 1 || !ch.Pool.Detached() {
		t.Errorf("first event %v %+v, want queue 0's old pool detached as listed: %+v", ch.Kind, ch.Pool, after[4])
	}
	for i, ev := range evs[1:4] {
		if ev.Kind != PagePoolRemoved || ev.Pool.ID != pools[i+1].ID || ev.Pool.Detached() || ev.Pool.DetachBoottime != 0 ||
			ev.Pool.Inflight != 0 || ev.Pool.InflightMem != 0 || ev.Pool.NAPIID != 0 {
			t.Errorf("event %d %v %+v, want del of idle pool %d without detach time", i+1, ev.Kind, ev.Pool, pools[i+1].ID)
		}
	}
	for i, ev := range evs[4:] {
		if ev.Kind != PagePoolAdded || ev.Pool.ID != after[i].ID || ev.Pool.Queue != i {
			t.Errorf("event %d %v %+v, want add of %+v", i+4, ev.Kind, ev.Pool, after[i])
		}
	}
	tp.host.release()
	for {
		if evs := rec.take(); len(evs) != 0 {
			if len(evs) != 1 || evs[0].Kind != PagePoolRemoved || evs[0].Pool.ID != ch.Pool.ID ||
				evs[0].Pool.DetachTime != ch.Pool.DetachTime || evs[0].Pool.Inflight != 0 || evs[0].Pool.InflightMem != 0 {
				t.Fatalf("after the buffer returned: %+v, want one del of %d with its detach time", evs, ch.Pool.ID)
			}
			break
		}
		<-rec.got
	}
	assert.Len(t, tp.PagePools(), 4, "the drained pool is still listed after its del")
	tp.locked(tp.Close)
	if evs := rec.take(); len(evs) != 4 || evs[0].Kind != PagePoolRemoved || evs[3].Pool.ID != after[3].ID {
		t.Errorf("Close: %+v, want 4 dels", evs)
	}
}
