package vnic

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic/faultpoint"
)

// TestExtraStatNames: manad's own counters follow the driver's under a prefix of their own, fit
// ETH_GSTRING_LEN and name no driver counter.
func TestExtraStatNames(t *testing.T) {
	driver := map[string]bool{}
	for _, n := range StatNames(DefaultMaxQueues) {
		driver[n] = true
	}
	extra := ExtraStatNames()
	tp := newTestPort(t, nil)
	require.Len(t, extra, len(tp.ExtraStats()), "%d names for %d values", len(extra), len(tp.ExtraStats()))
	for _, n := range extra {
		if !strings.HasPrefix(n, ManadStatPrefix) || len(n) >= 32 || driver[n] {
			t.Errorf("extra statistic %q: want prefix %q, at most 31 bytes, no driver name", n, ManadStatPrefix)
		}
	}
}

// TestQueueCounters checks each drop reason lands in its own per-queue counter, and the ring and
// page-pool view of a running queue.
func TestQueueCounters(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.Receive(2, udpFrame(100, 1, 2)) // down: no posted WQE
	tp.Transmit(3, udpFrame(100, 1, 2))
	tp.open()
	tp.Receive(1, udpFrame(1515, 1, 2)) // oversize
	tp.Receive(1, nil)                  // zero length
	tp.Receive(1, udpFrame(200, 1, 2))
	tp.Transmit(0, udpFrame(300, 1, 2))
	var qc []QueueCounters
	tp.locked(func() { qc = tp.QueueCounters() })
	require.Len(t, qc, 4, "%d queues, want 4", len(qc))
	for name, c := range map[string]struct{ got, want uint64 }{
		"q2 no wqe":    {qcount(t, qc[2], "hc_rx_discards_no_wqe"), 1},
		"q3 tx drop":   {qcount(t, qc[3], "manad_tx_dropped"), 1},
		"q1 oversize":  {qcount(t, qc[1], "manad_rx_drop_oversize"), 1},
		"q1 len0":      {qcount(t, qc[1], "rx_pkt_len0_err"), 1},
		"q1 packets":   {qcount(t, qc[1], "rx_packets"), 1},
		"q1 bytes":     {qcount(t, qc[1], "rx_bytes"), 200},
		"q0 tx pkts":   {qcount(t, qc[0], "tx_packets"), 1},
		"q0 tx bytes":  {qcount(t, qc[0], "tx_bytes"), 300},
		"q0 oversize":  {qcount(t, qc[0], "manad_rx_drop_oversize"), 0},
		"q1 xdp drops": {qcount(t, qc[1], "rx_xdp_drop"), 0},
	} {
		assert.Equal(t, c.want, c.got, "%s", name)
	}
	for q, c := range qc {
		if c.RingSize != 128 || c.RingPosted != 128 || c.Pool == nil || c.Pool.Pages == 0 {
			t.Errorf("queue %d: ring %d/%d, pool %+v", q, c.RingPosted, c.RingSize, c.Pool)
		}
	}
	assert.Equal(t, uint64(128+1), qc[1].Pool.Allocs, "queue 1 pool allocs = %d, want the ring plus one refill", qc[1].Pool.Allocs)
	tp.locked(tp.Close)
	tp.locked(func() { qc = tp.QueueCounters() })
	if qcount(t, qc[1], "manad_rx_drop_oversize") != 1 || qc[1].RingSize != 0 || qc[1].Pool != nil {
		t.Errorf("after close: %+v; want the counters kept and no ring", qc[1])
	}
}

// TestReconfigStats counts reconfigurations by kind and outcome, with durations for those that
// rebuilt the queues (or tried to), and resets by outcome.
func TestReconfigStats(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.locked(func() {
		must(t, tp.SetMTU(2000)) // down: stored
	})
	tp.open()
	tp.locked(func() {
		must(t, tp.SetMTU(2000)) // unchanged
		must(t, tp.SetMTU(3000)) // applied
		must(t, tp.SetFault(Fault{Point: faultpoint.Prealloc, Mode: FaultOnce}))
		assert.Error(t, tp.SetRings(256, 256), "SetRings with a prealloc fault succeeded")
		must(t, tp.SetFault(Fault{Point: faultpoint.Attach, Mode: FaultOnce}))
		assert.Error(t, tp.SetChannels(2), "SetChannels with an attach fault succeeded")
	})
	tp.waitFor("the reset work", func(s State) bool { return s.Running && !s.ResetPending })
	var rs []ReconfigStats
	var ok, failed uint64
	tp.locked(func() {
		rs = tp.ReconfigStats()
		ok, failed = tp.Resets()
	})
	byOp := map[string]ReconfigStats{}
	for _, r := range rs {
		byOp[r.Op] = r
	}
	require.Len(t, rs, 3, "ops %+v, want channels, mtu, rings in order", rs)
	require.Equal(t, "channels", rs[0].Op, "ops %+v, want channels, mtu, rings in order", rs)
	require.Equal(t, "rings", rs[2].Op, "ops %+v, want channels, mtu, rings in order", rs)
	mtu := byOp["mtu"]
	if mtu.Outcomes[ReconfigStored] != 1 || mtu.Outcomes[ReconfigUnchanged] != 1 || mtu.Outcomes[ReconfigApplied] != 1 || mtu.Count != 1 {
		t.Errorf("mtu: %+v; want one each of stored, unchanged, applied, and one duration", mtu)
	}
	r := byOp["rings"]
	assert.Equal(t, uint64(1), r.Outcomes[ReconfigPreallocFailed], "rings: %+v", r)
	assert.Equal(t, uint64(1), r.Count, "rings: %+v", r)
	c := byOp["channels"]
	assert.Equal(t, uint64(1), c.Outcomes[ReconfigAttachFailed], "channels: %+v", c)
	assert.Equal(t, uint64(1), c.Count, "channels: %+v", c)
	// The buckets are cumulative and the last holds every observation under its bound.
	last := uint64(0)
	for _, b := range reconfigBuckets {
		assert.GreaterOrEqual(t, mtu.Buckets[b], last, "bucket %v = %d, below the previous %d", b, mtu.Buckets[b], last)
		last = mtu.Buckets[b]
	}
	if mtu.Sum <= 0 || (mtu.Sum <= reconfigBuckets[len(reconfigBuckets)-1] && last != 1) {
		t.Errorf("mtu duration sum %v, last bucket %d", mtu.Sum, last)
	}
	assert.Equal(t, uint64(1), ok, "resets ok=%d failed=%d, want 1 and 0", ok, failed)
	assert.Equal(t, uint64(0), failed, "resets ok=%d failed=%d, want 1 and 0", ok, failed)
}

func must(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err)
}

// qcount reads the counter of one queue's counters c that ethtool -S names key for queue 0
// without its queue number (rx_packets for rx_0_packets), or as it is for a port counter.
func qcount(t *testing.T, c QueueCounters, key string) uint64 {
	t.Helper()
	for _, cs := range [][]Counter[QueueStats]{ManaCounters, ManadCounters} {
		for i := range cs {
			k := cs[i].Name
			switch cs[i].Scope {
			case RxQueueScope:
				k = "rx_" + k
			case TxQueueScope:
				k = "tx_" + k
			}
			if k == key {
				return cs[i].Read(&c.Stats)
			}
		}
	}
	t.Fatalf("no counter %q", key)
	return 0
}

// TestEveryCounterDeclared: each counter a queue keeps is read by a row of ManaCounters or
// ManadCounters, so a counter added to rxStats or txStats without its declaration fails here
// rather than counting unseen.
func TestEveryCounterDeclared(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[rxStats](), reflect.TypeFor[txStats]()} {
		for f := range typ.Fields() {
			k := f.Type.Kind()
			if k == reflect.Array {
				k = f.Type.Elem().Kind()
			}
			require.Equal(t, reflect.Uint64, k, "%s.%s: a counter is a uint64", typ.Name(), f.Name)
		}
	}
	const words = unsafe.Sizeof(QueueStats{}) / 8
	for w := range words {
		var s QueueStats
		(*[words]uint64)(unsafe.Pointer(&s))[w] = 1
		read := false
		for _, cs := range [][]Counter[QueueStats]{ManaCounters, ManadCounters} {
			for i := range cs {
				read = read || cs[i].Read(&s) != 0
			}
		}
		assert.True(t, read, "word %d of QueueStats is read by no counter row", w)
	}
}
