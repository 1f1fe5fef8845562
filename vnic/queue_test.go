package vnic

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic/privflag"
)

// stat returns the named ETH_SS_STATS value.
func (tp *testPort) stat(name string) uint64 {
	tp.t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	names := StatNames(tp.Settings().Queues)
	vals := tp.Stats()
	for i, n := range names {
		if n == name {
			return vals[i]
		}
	}
	tp.t.Fatalf("no statistic %q", name)
	return 0
}

func TestReceiveDeliver(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	f := udpFrame(1514, 1000, 2000)
	require.Equal(t, RxDelivered, tp.Receive(1, f), "Receive")
	assert.Equal(t, f, tp.host.frames[0], "delivered frame differs from the one received")
	for name, want := range map[string]uint64{
		"rx_1_packets": 1, "rx_1_bytes": 1514, "rx_0_packets": 0, "hc_rx_ucast_pkts": 1,
		"hc_rx_bytes": 1514, "hc_tc0_rx_pkt_phy": 1, "hc_tc0_rx_byte_phy": 1514,
	} {
		assert.Equal(t, want, tp.stat(name), "%s", name)
	}
}

func TestReceiveDrops(t *testing.T) {
	tp := newTestPort(t, nil)
	for name, tc := range map[string]struct {
		frame []byte
		want  RxResult
	}{
		"down": {udpFrame(100, 1, 2), RxDropNotRunning},
	} {
		assert.Equal(t, tc.want, tp.Receive(0, tc.frame), "%s", name)
	}
	tp.open()
	for name, tc := range map[string]struct {
		frame []byte
		want  RxResult
	}{
		"datasize fits": {udpFrame(1514, 1, 2), RxDelivered},
		"oversize":      {udpFrame(1515, 1, 2), RxDropOversize},
		"empty":         {nil, RxDropLen0},
	} {
		assert.Equal(t, tc.want, tp.Receive(0, tc.frame), "%s", name)
	}
	ns := tp.NetdevStats()
	assert.Equal(t, uint64(1), ns.RxOversize, "netdev stats %+v", ns)
	assert.Equal(t, uint64(1), ns.RxMissed, "netdev stats %+v", ns)
	assert.Equal(t, uint64(2), ns.RxDropped, "netdev stats %+v", ns)
	assert.Equal(t, uint64(1), tp.stat("rx_0_pkt_len0_err"), "pkt_len0_err")
	assert.Equal(t, uint64(1), tp.stat("hc_rx_discards_no_wqe"), "hc_rx_discards_no_wqe")
}

// TestRefillFailure: when the refill cannot get a buffer the frame is dropped and the old buffer
// stays posted, so the ring never shrinks; traffic resumes once buffers come back.
func TestRefillFailure(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.host.keep = true
	tp.open()
	tp.locked(func() { tp.SetMemoryBudget(tp.Memory().InUse()) })
	// Queue 0's pool has 19 pages of 7 buffers for a 128-buffer ring: 5 spare buffers.
	var delivered, dropped int
	for i := 0; i < 10; i++ {
		switch tp.Receive(0, udpFrame(200, 1, 2)) {
		case RxDelivered:
			delivered++
		case RxDropNoMemory:
			dropped++
		}
	}
	require.Equal(t, 5, delivered, "delivered %d, dropped %d; want 5 and 5", delivered, dropped)
	require.Equal(t, 5, dropped, "delivered %d, dropped %d; want 5 and 5", delivered, dropped)
	st := tp.state()
	assert.Equal(t, int(4*128), st.BuffersPosted, "posted %d, in flight %d, alloc failures %d", st.BuffersPosted, st.BuffersInFlight, st.Netdev.RxAllocFail)
	assert.Equal(t, 5, st.BuffersInFlight, "posted %d, in flight %d, alloc failures %d", st.BuffersPosted, st.BuffersInFlight, st.Netdev.RxAllocFail)
	assert.Equal(t, uint64(5), st.Netdev.RxAllocFail, "posted %d, in flight %d, alloc failures %d", st.BuffersPosted, st.BuffersInFlight, st.Netdev.RxAllocFail)
	tp.host.release()
	assert.Equal(t, RxDelivered, tp.Receive(0, udpFrame(200, 1, 2)), "after the buffers came back")
	tp.host.keep = false
	tp.host.release()
}

// adjustHead is an XDP program that grows the frame at the front by 4 bytes and tags them, like
// a program calling bpf_xdp_adjust_head(ctx, -4).
type adjustHead struct{ verdict XDPAction }

func (a *adjustHead) Name() string { return "adjust-head" }
func (a *adjustHead) Run(q int, buf []byte, data, end int) (XDPAction, int, int, error) {
	if a.verdict == 99 {
		return XDPPass, end, data, nil // bounds reversed: invalid
	}
	copy(buf[data-4:], "TAG!")
	return a.verdict, data - 4, end, nil
}

func TestXDPVerdicts(t *testing.T) {
	for _, tc := range []struct {
		prog      XDPProgram
		result    RxResult
		counter   string
		delivered bool
		wired     bool
	}{
		{XDPProgPass, RxDelivered, "rx_0_packets", true, false},
		{XDPProgDrop, RxXDPDrop, "rx_0_xdp_drop", false, false},
		{XDPProgAborted, RxXDPDrop, "rx_0_xdp_drop", false, false},
		{XDPProgTx, RxXDPTx, "rx_0_xdp_tx", false, true},
		{&adjustHead{XDPPass}, RxDelivered, "rx_0_packets", true, false},
		{&adjustHead{XDPRedirect}, RxXDPDrop, "rx_0_xdp_drop", false, false},
		{&adjustHead{99}, RxXDPDrop, "rx_0_xdp_drop", false, false},
	} {
		t.Run(tc.prog.Name()+"/"+tc.result.String(), func(t *testing.T) {
			tp := newTestPort(t, func(c *Config, s *Settings) { s.XDP = tc.prog })
			tp.open()
			f := udpFrame(300, 5, 6)
			require.Equal(t, tc.result, tp.Receive(0, f), "Receive")
			assert.Equal(t, uint64(1), tp.stat(tc.counter), "%s", tc.counter)
			assert.Equal(t, tc.delivered, tp.host.count() == 1, "delivered %d, on the wire %d", tp.host.count(), tp.wire.count())
			assert.Equal(t, tc.wired, tp.wire.count() == 1, "delivered %d, on the wire %d", tp.host.count(), tp.wire.count())
			if tc.wired {
				assert.Equal(t, uint64(1), tp.stat("tx_0_packets"), "XDP_TX not counted on the TX queue")
			}
			if a, ok := tc.prog.(*adjustHead); ok && a.verdict == XDPPass {
				if got := tp.host.frames[0]; !bytes.Equal(got[:4], []byte("TAG!")) || !bytes.Equal(got[4:], f) {
					t.Error("the program's head adjustment did not reach the host")
				}
			}
		})
	}
}

func TestTransmit(t *testing.T) {
	tp := newTestPort(t, nil)
	bcast := udpFrame(100, 1, 2)
	copy(bcast, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	assert.False(t, tp.Transmit(0, bcast), "a down port transmitted")
	tp.open()
	require.True(t, tp.Transmit(2, bcast), "frame did not reach the wire")
	require.Equal(t, 1, tp.wire.count(), "frame did not reach the wire")
	for name, want := range map[string]uint64{"tx_2_packets": 1, "tx_2_bytes": 100, "tx_2_short_pkt_fmt": 1,
		"hc_tx_bcast_pkts": 1, "hc_tx_bcast_bytes": 100, "hc_tc0_tx_pkt_phy": 1} {
		assert.Equal(t, want, tp.stat(name), "%s", name)
	}
	ns := tp.NetdevStats()
	assert.Equal(t, uint64(1), ns.TxDropped, "netdev %+v", ns)
	assert.Equal(t, uint64(1), ns.TxPackets, "netdev %+v", ns)
}

func TestStatNames(t *testing.T) {
	names := StatNames(16)
	require.Len(t, names, 6+27+50+16*20, "%d names", len(names))
	require.Len(t, names, StatCount(16), "%d names", len(names))
	for i, want := range map[int]string{
		0: "stop_queue", 5: "rx_cqe_unknown_type", 6: "hc_rx_discards_no_wqe", 32: "hc_tx_mcast_bytes",
		33: "hc_rx_pkt_drop_phy", 35: "hc_tc0_rx_pkt_phy", 66: "hc_tc7_tx_byte_phy", 67: "hc_tc0_rx_pause_phy",
		82: "hc_tc7_tx_pause_phy", 83: "rx_0_packets", 91: "rx_0_coalesced_cqe_4", 92: "rx_1_packets",
		83 + 16*9: "tx_0_packets", 83 + 16*9 + 10: "tx_0_mana_map_err", len(names) - 1: "tx_15_mana_map_err",
	} {
		assert.Equal(t, want, names[i], "name %d", i)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] || len(n) > 32 {
			t.Errorf("duplicate or over-long (ETH_GSTRING_LEN) name %q", n)
		}
		seen[n] = true
	}
}

// TestStatsZeroWhenDown mirrors mana_get_ethtool_stats returning nothing while the port is down.
func TestStatsZeroWhenDown(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	tp.Receive(0, udpFrame(100, 1, 2))
	require.Equal(t, uint64(1), tp.stat("rx_0_packets"), "not counted")
	tp.locked(tp.Close)
	tp.locked(func() {
		for i, v := range tp.Stats() {
			assert.Equal(t, uint64(0), v, "stat %d = %d while down", i, v)
		}
	})
	tp.open()
	assert.Equal(t, uint64(1), tp.stat("rx_0_packets"), "counters were lost across down/up")
}

// TestInFlightAcrossReconfigure: buffers the host holds when the queues are rebuilt keep their
// old pool alive; the memory comes back only when they do.
func TestInFlightAcrossReconfigure(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.host.keep = true
	tp.open()
	for i := 0; i < 3; i++ {
		tp.Receive(i, udpFrame(100, uint16(i), 2))
	}
	tp.locked(func() {
		require.NoError(t, tp.SetPrivFlags(privflag.FullPageRx))
	})
	st := tp.state()
	require.Equal(t, 3, st.BuffersInFlight, "in flight %d, releases pending %d; want 3 and 3", st.BuffersInFlight, st.ReleasesPending)
	require.Equal(t, 3, st.ReleasesPending, "in flight %d, releases pending %d; want 3 and 3", st.BuffersInFlight, st.ReleasesPending)
	assert.Greater(t, st.MemoryInUse, st.BytesPinned, "the draining pools' pages are not charged")
	tp.host.keep = false
	tp.host.release()
	settled(t, tp.waitFor("old pools to drain", func(s State) bool { return s.ReleasesPending == 0 }))
}

func TestShutdownReportsLeak(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.host.keep = true
	tp.open()
	tp.Receive(0, udpFrame(100, 1, 2))
	var td *Teardown
	tp.locked(func() { td = tp.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := td.Wait(ctx)
	require.ErrorIs(t, err, unix.EBUSY, "Wait = %v, want the leak report", err)
	require.Contains(t, err.Error(), "1 RX buffers still in flight", "Wait = %v, want the leak report", err)
	tp.locked(func() {
		assert.ErrorIs(t, tp.Open(), unix.ENODEV, "Open after Shutdown")
	})
	tp.host.release()
	assert.NoError(t, td.Wait(context.Background()), "after the buffer came back")
}

// TestFlipUnderTraffic flips full-page-rx 100 times while every queue receives: no race, no
// buffer lost, counters never go backwards.
func TestFlipUnderTraffic(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var delivered atomic.Uint64
	for q := 0; q < 4; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := udpFrame(1200, uint16(q), 9)
			for !stop.Load() {
				if tp.Receive(q, f) == RxDelivered {
					delivered.Add(1)
				}
				runtime.Gosched() // as a queue goroutine blocking on its fd would
			}
		}()
	}
	var last uint64
	for i := 0; i < 100; i++ {
		tp.locked(func() {
			require.NoError(t, tp.SetPrivFlags(uint32(i+1)&1))
		})
		if v := tp.stat("rx_0_packets"); v < last {
			t.Fatalf("rx_0_packets went from %d to %d", last, v)
		} else {
			last = v
		}
	}
	stop.Store(true)
	wg.Wait()
	var total uint64
	for q := 0; q < 4; q++ {
		total += tp.stat("rx_" + string(rune('0'+q)) + "_packets")
	}
	assert.Equal(t, delivered.Load(), total, "counted %d, delivered %d", total, delivered.Load())
	assert.NotEqual(t, uint64(0), total, "counted %d, delivered %d", total, delivered.Load())
	settled(t, tp.waitFor("drain", func(s State) bool { return s.ReleasesPending == 0 }))
}

func TestToeplitzVectors(t *testing.T) {
	// Microsoft's RSS verification suite (IPv4, and IPv4 with TCP ports).
	for _, v := range []struct {
		dst, src         string
		dport, sport     uint16
		ipOnly, withPort uint32
	}{
		{"161.142.100.80", "66.9.149.187", 1766, 2794, 0x323e8fc2, 0x51ccc178},
		{"65.69.140.83", "199.92.111.2", 4739, 14230, 0xd718262a, 0xc626b0ea},
		{"12.22.207.184", "24.19.198.95", 38024, 12898, 0xd2d0a5de, 0x5c2b394a},
		{"209.142.163.6", "38.27.205.30", 2217, 48228, 0x82989176, 0xafc7327f},
		{"202.188.127.2", "153.39.163.191", 1303, 44251, 0x5d1809c5, 0x10e828a2},
	} {
		s, d := netip.MustParseAddr(v.src).As4(), netip.MustParseAddr(v.dst).As4()
		in := append(append([]byte{}, s[:]...), d[:]...)
		assert.Equal(t, v.ipOnly, Toeplitz(&DefaultRSSKey, in), "%s→%s", v.src, v.dst)
		in = append(in, byte(v.sport>>8), byte(v.sport), byte(v.dport>>8), byte(v.dport))
		assert.Equal(t, v.withPort, Toeplitz(&DefaultRSSKey, in), "%s:%d→%s:%d", v.src, v.sport, v.dst, v.dport)
	}
}

// TestToeplitzTable checks the lookup-table hash the data path uses against the bit-serial
// definition.
func TestToeplitzTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= maxHashInput; n++ {
		for range 50 {
			in := make([]byte, n)
			for i := range in {
				in[i] = byte(rng.Uint32())
			}
			got, want := defaultToeplitz.sum(in), Toeplitz(&DefaultRSSKey, in)
			require.Equal(t, want, got, "%x: table %#x, bitwise %#x", in, got, want)
		}
	}
}

func TestSteering(t *testing.T) {
	tp := newTestPort(t, func(c *Config, s *Settings) { s.Queues = 8 })
	assert.Equal(t, -1, tp.SteerRx(udpFrame(100, 1, 2)), "a down port steered a frame")
	tp.open()
	hits := make([]int, 8)
	for sport := uint16(1000); sport < 1256; sport++ {
		f := udpFrame(100, sport, 5201)
		q := tp.SteerRx(f)
		require.Equal(t, q, tp.SteerRx(f), "a flow moved between queues")
		hits[q]++
	}
	for q, n := range hits {
		assert.GreaterOrEqual(t, n, 10, "queue %d got %d of 256 flows: %v", q, n, hits)
	}
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	assert.Equal(t, 0, tp.SteerRx(arp), "a non-IP frame not on queue 0")
}

// xdpWire is a testWire that keeps XDP_TX frames apart.
type xdpWire struct {
	testWire
	xdp testWire
}

func (w *xdpWire) SendXDP(q int, frame []byte) { w.xdp.Send(q, frame) }

// TestXDPTxUsesSendXDP checks that a wire implementing XDPWire is told which frames XDP_TX
// sent, and that the host's own transmissions still come through Send.
func TestXDPTxUsesSendXDP(t *testing.T) {
	w := new(xdpWire)
	tp := newTestPort(t, func(c *Config, s *Settings) { c.Wire = w; s.XDP = XDPProgTx })
	tp.open()
	require.Equal(t, RxXDPTx, tp.Receive(1, udpFrame(300, 5, 6)), "Receive")
	require.True(t, tp.Transmit(1, udpFrame(200, 6, 5)), "Transmit refused")
	assert.Equal(t, 1, w.xdp.count(), "SendXDP got %d frames, Send %d: want 1 each", w.xdp.count(), w.count())
	assert.Equal(t, 1, w.count(), "SendXDP got %d frames, Send %d: want 1 each", w.xdp.count(), w.count())
	got := tp.stat("tx_1_packets")
	assert.Equal(t, uint64(2), got, "tx_1_packets = %d, want 2", got)
}

// TestPostAndPutWire: a superframe is one work item (one packet, tso_packets, tso_bytes of its
// payload) however many frames it becomes on the wire, which the adapter's counters count one by
// one; a frame with a partial checksum counts csum_partial; a stopped queue takes nothing.
func TestPostAndPutWire(t *testing.T) {
	tp := newTestPort(t, nil)
	require.False(t, tp.Post(1, TxWork{Len: 3000, GSO: true, HeaderLen: 66}), "a down port took a work item")
	tp.open()
	require.True(t, tp.Post(1, TxWork{Len: 3000, GSO: true, HeaderLen: 66}), "Post refused")
	for range 3 {
		tp.PutWire(1, udpFrame(1000, 1, 2))
	}
	require.True(t, tp.Post(1, TxWork{Len: 400, CsumPartial: true}), "Post refused")
	tp.PutWire(1, udpFrame(400, 1, 2))
	for name, want := range map[string]uint64{"tx_1_packets": 2, "tx_1_bytes": 3400, "tx_1_tso_packets": 1,
		"tx_1_tso_bytes": 3000 - 66, "tx_1_csum_partial": 1, "tx_1_short_pkt_fmt": 2, "tx_1_tso_inner_packets": 0,
		"hc_tx_bytes": 3400, "hc_tx_ucast_pkts": 4} {
		assert.Equal(t, want, tp.stat(name), "%s", name)
	}
	assert.Equal(t, 4, tp.wire.count(), "%d frames on the wire, want 4", tp.wire.count())
}

// statVector returns every ETH_SS_STATS value of the port, by name.
func (tp *testPort) statVector() map[string]uint64 {
	tp.t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	names := StatNames(tp.Settings().Queues)
	vals := tp.Stats()
	out := make(map[string]uint64, len(names))
	for i, n := range names {
		out[n] = vals[i]
	}
	return out
}

// poolAllocFails is the AllocFails of RX queue qi's page pool, 0 without one.
func (tp *testPort) poolAllocFails(qi int) (n uint64) {
	tp.t.Helper()
	tp.locked(func() {
		if ps := tp.QueueCounters()[qi].Pool; ps != nil {
			n = ps.AllocFails
		}
	})
	return n
}

// statDiff lists the statistics whose values differ between a and b.
func statDiff(a, b map[string]uint64) []string {
	var out []string
	for n, v := range a {
		if b[n] != v {
			out = append(out, fmt.Sprintf("%s %d≠%d", n, v, b[n]))
		}
	}
	slices.Sort(out)
	return out
}

// TestReceiveWhole: a superframe accounted whole leaves every statistic of the port as the
// frames it stands for would, received one by one, on the same queue (unicast, broadcast and
// multicast alike; 4K pages, whose short headroom is counted too); the ring stays as it was. A
// superframe ReceiveWhole refuses (the port not running, an XDP program, frames beyond the RX
// buffers, no frames, no memory for the buffers) changes no statistic, and its caller passes
// the frames one by one.
func TestReceiveWhole(t *testing.T) {
	const n, l = 10, 1000
	for _, dst := range []struct {
		name string
		mac  []byte
	}{{"unicast", []byte{2, 0, 0, 0, 0, 2}}, {"broadcast", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}, {"multicast", []byte{1, 0, 0x5e, 0, 0, 1}}} {
		for _, page := range []int{4096, 16384} {
			t.Run(fmt.Sprintf("%s/%d", dst.name, page), func(t *testing.T) {
				mod := func(c *Config, _ *Settings) { c.PageSize = page }
				byFrame, whole := newTestPort(t, mod), newTestPort(t, mod)
				byFrame.open()
				whole.open()
				f := udpFrame(l, 1, 2)
				copy(f, dst.mac)
				for range n {
					require.Equal(t, RxDelivered, byFrame.Receive(2, f), "Receive")
				}
				before := whole.state()
				require.True(t, whole.ReceiveWhole(2, f, n, n*l, l), "ReceiveWhole refused")
				assert.Empty(t, statDiff(byFrame.statVector(), whole.statVector()), "statistics frame by frame ≠ whole")
				after := whole.state()
				assert.Equal(t, before.BuffersPosted, after.BuffersPosted, "ring: %d posted (was %d), %d in flight", after.BuffersPosted, before.BuffersPosted, after.BuffersInFlight)
				assert.Equal(t, 0, after.BuffersInFlight, "ring: %d posted (was %d), %d in flight", after.BuffersPosted, before.BuffersPosted, after.BuffersInFlight)
			})
		}
	}

	f := udpFrame(l, 1, 2)
	for _, tc := range []struct {
		name          string
		mod           func(*Config, *Settings)
		open          bool
		prep          func(tp *testPort)
		frames, frame int
		thenOK        int // frames ReceiveWhole takes after the refusal (0: none tried)
	}{
		{"not running", nil, false, nil, n, l, 0},
		{"XDP program", func(_ *Config, s *Settings) { s.XDP = XDPProgPass }, true, nil, n, l, 0},
		{"frames beyond the buffers", nil, true, nil, n, 1515, n},
		{"no frames", nil, true, nil, 0, l, n},
		{"no memory", nil, true, func(tp *testPort) {
			tp.locked(func() { tp.SetMemoryBudget(tp.Memory().InUse()) })
		}, 200, l, 5}, // more buffers than queue 2's pool has spare; 5 it has
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			tp := newTestPort(t, tc.mod)
			if tc.open {
				tp.open()
			}
			if tc.prep != nil {
				tc.prep(tp)
			}
			before, fails := tp.statVector(), tp.poolAllocFails(2)
			require.False(t, tp.ReceiveWhole(2, f, tc.frames, uint64(tc.frames*l), tc.frame), "taken whole")
			assert.Empty(t, statDiff(before, tp.statVector()), "a refusal changed statistics")
			// The caller's frame-by-frame fallback counts the allocation that fails.
			got := tp.poolAllocFails(2)
			assert.Equal(t, fails, got, "page pool alloc failures %d after the refusal, were %d", got, fails)
			if tc.thenOK > 0 {
				assert.True(t, tp.ReceiveWhole(2, f, tc.thenOK, uint64(tc.thenOK*l), l), "%d frames refused after the refusal", tc.thenOK)
			}
		})
	}
}
