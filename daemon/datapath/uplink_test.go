package datapath

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// uplinkRecorder is the device side of an uplink in tests: it records what the uplink sends.
type uplinkRecorder struct {
	recorder
	fail error
}

func (r *uplinkRecorder) tx(f []byte) error {
	if r.fail != nil {
		return r.fail
	}
	r.input(f, false)
	return nil
}

func TestUplinkSplitHorizonAndLearning(t *testing.T) {
	s, clk, recs, ports := testSegment("a", "b")
	dev := &uplinkRecorder{recorder: recorder{name: "vx0"}}
	u := s.AttachUplink("vx0", dev.tx)
	u.SetMTU(1500)
	u.SetUp(true)
	remote := mac(9)

	// A broadcast from the uplink floods to the ports, never back out of the uplink.
	u.Receive(frame(broadcast, remote, 1))
	if got := receivers(t, recs, 1); len(got) != 2 {
		t.Fatalf("broadcast from uplink reached %v, want a and b", got)
	}
	if n := len(dev.take()); n != 0 {
		t.Fatalf("broadcast from the uplink went back out of it (%d frames)", n)
	}
	// The remote address is now behind the uplink: unicast to it goes only there.
	s.forward(ports["a"], frame(remote, mac(1), 2), false)
	f := dev.take()
	require.Len(t, f, 1, "unicast to the remote station: uplink got %d frames, want 1", len(f))
	require.Equal(t, byte(2), f[0][14], "unicast to the remote station: uplink got %d frames, want 1", len(f))
	require.Empty(t, receivers(t, recs, 2), "unicast to a station behind the uplink also reached")
	// A frame from the uplink to an address learned on the uplink is not reflected.
	u.Receive(frame(remote, mac(8), 3))
	require.Equal(t, 0, len(dev.take()), "frame to a station behind the uplink was sent back out of it")
	// Ageing applies to uplink addresses as to ports'.
	clk.advance(DefaultAgeingTime + time.Second)
	s.forward(ports["a"], frame(remote, mac(1), 4), false)
	got := receivers(t, recs, 4)
	require.Len(t, got, 1, "after ageing, frame to the remote station reached ports %v, want [b] (flooded)", got)
	require.Equal(t, "b", got[0], "after ageing, frame to the remote station reached ports %v, want [b] (flooded)", got)
	if n := len(dev.take()); n != 1 {
		t.Fatalf("after ageing, uplink got %d frames, want 1 (flooded)", n)
	}
	// Down: the uplink's addresses are forgotten and frames to it are counted, not sent.
	u.Receive(frame(broadcast, remote, 5))
	recs["a"].take()
	recs["b"].take()
	u.SetUp(false)
	for _, e := range s.FDB() {
		require.NotEqual(t, "uplink:vx0", e.Port, "address %s still learned on the uplink after it went down", e.MAC)
	}
	s.forward(ports["a"], frame(remote, mac(1), 6), false)
	require.Equal(t, 0, len(dev.take()), "a down uplink transmitted")
	st := u.Stats()
	require.Equal(t, uint64(1), st.TxDown, "stats %+v, want TxDown 1, RxFrames 3, TxFrames 2", st)
	require.Equal(t, uint64(3), st.RxFrames, "stats %+v, want TxDown 1, RxFrames 3, TxFrames 2", st)
	require.Equal(t, uint64(2), st.TxFrames, "stats %+v, want TxDown 1, RxFrames 3, TxFrames 2", st)
}

func TestUplinkMTU(t *testing.T) {
	tagged := func(n int, tpid uint16) []byte {
		f := make([]byte, n)
		copy(f, broadcast)
		copy(f[6:], mac(1))
		f[12], f[13] = byte(tpid>>8), byte(tpid)
		return f
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		sent  bool
	}{
		{"payload at the MTU", tagged(14+1400, 0x0800), true},
		{"payload one byte over", tagged(14+1401, 0x0800), false},
		{"802.1Q tag does not count", tagged(18+1400, 0x8100), true},
		{"802.1Q tagged, over", tagged(18+1401, 0x8100), false},
		{"802.1ad tag does not count", tagged(18+1400, 0x88a8), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _, ports := testSegment("a")
			dev := &uplinkRecorder{recorder: recorder{name: "vx0"}}
			u := s.AttachUplink("vx0", dev.tx)
			u.SetMTU(1400)
			u.SetUp(true)
			s.forward(ports["a"], tc.frame, false)
			sent := len(dev.take()) == 1
			st := u.Stats()
			require.Equal(t, tc.sent, sent, "sent %v (stats %+v), want sent %v", sent, st, tc.sent)
			require.NotEqual(t, tc.sent, st.TxMTUDrops == 1, "sent %v (stats %+v), want sent %v", sent, st, tc.sent)
		})
	}
}

func TestUplinkTxErrorCounted(t *testing.T) {
	s, _, _, ports := testSegment("a")
	dev := &uplinkRecorder{recorder: recorder{name: "vx0"}, fail: errors.New("ENOBUFS")}
	u := s.AttachUplink("vx0", dev.tx)
	u.SetMTU(1500)
	u.SetUp(true)
	s.forward(ports["a"], frame(broadcast, mac(1), 1), false)
	if st := u.Stats(); st.TxErrors != 1 || st.TxFrames != 0 {
		t.Fatalf("stats %+v, want one TX error", st)
	}
	u.Receive(make([]byte, 13))
	st := u.Stats()
	require.Equal(t, uint64(1), st.RxRunts, "stats %+v, want one runt", st)
	require.Equal(t, uint64(0), st.RxFrames, "stats %+v, want one runt", st)
	u.Detach()
	require.Equal(t, 1, s.Ports(), "%d members after detach, want 1", s.Ports())
}

func TestSegmentStormControl(t *testing.T) {
	s, clk, recs, ports := testSegment("a", "b")
	s.SetStormLimit(3)
	for i := range 5 {
		s.forward(ports["a"], frame(broadcast, mac(1), byte(i)), false)
	}
	if n := len(recs["b"].take()); n != 3 {
		t.Fatalf("%d broadcasts flooded within a second, want the limit 3", n)
	}
	// Known unicast is never limited.
	s.forward(ports["b"], frame(broadcast, mac(2), 9), false) // learn b (and a storm drop)
	for range 5 {
		s.forward(ports["a"], frame(mac(2), mac(1), 7), false)
	}
	if n := len(recs["b"].take()); n != 5 {
		t.Fatalf("%d of 5 unicast frames to a learned address delivered", n)
	}
	st := s.Stats()
	require.Equal(t, uint64(3), st.Floods, "stats %+v, want 3 floods and 3 storm drops", st)
	require.Equal(t, uint64(3), st.StormDrops, "stats %+v, want 3 floods and 3 storm drops", st)
	// The next second has a fresh budget.
	clk.advance(time.Second)
	s.forward(ports["a"], frame(broadcast, mac(1), 8), false)
	require.Equal(t, 1, len(recs["b"].take()), "broadcast not flooded in the next second")
	s.SetStormLimit(0)
	for range 10 {
		s.forward(ports["a"], frame(broadcast, mac(1), 8), false)
	}
	n := len(recs["b"].take())
	require.Equal(t, 10, n, "without a limit %d of 10 broadcasts flooded", n)
}

// TestSegmentStormControlStaleClock: a frame stamped with the second before the window's (a TX
// batch's clock, read before another sender's frame moved the window on) counts against the
// current window and does not move it back, so stamps that alternate between the two seconds
// flood no more than the limit.
func TestSegmentStormControlStaleClock(t *testing.T) {
	s, clk, recs, ports := testSegment("a", "b")
	s.SetStormLimit(3)
	now := clk.ns.Load()
	for i := range 10 {
		at := now
		if i%2 == 1 {
			at = now - int64(time.Second)
		}
		s.forwardAt(ports["a"], frame(broadcast, mac(1), byte(i)), false, at, nil)
	}
	n := len(recs["b"].take())
	st := s.Stats()
	require.Equal(t, 3, n, "%d of 10 broadcasts flooded with stale stamps among them (stats %+v), want the limit 3", n, st)
	require.Equal(t, uint64(7), st.StormDrops, "stats %+v, want 3 floods and 7 storm drops", st)
	// The next second still has a fresh budget.
	s.forwardAt(ports["a"], frame(broadcast, mac(1), 10), false, now+int64(time.Second), nil)
	require.Len(t, recs["b"].take(), 1, "broadcast not flooded in the next second")
}

// TestSegmentStormControlConcurrent: senders flooding at once, each through the same seconds of
// the segment clock at its own pace (so that some stamp frames with a second the window has
// left), flood at most the limit per second in all.
func TestSegmentStormControlConcurrent(t *testing.T) {
	const limit, senders, seconds, perSecond = 20, 4, 50, 40
	s, clk, _, ports := testSegment("a", "b")
	s.SetStormLimit(limit)
	start := clk.ns.Load()
	f := frame(broadcast, mac(1), 1)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for sec := range seconds {
				at := start + int64(sec)*int64(time.Second)
				for range perSecond {
					s.forwardAt(ports["a"], f, false, at, nil)
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	require.Equal(t, uint64(senders*seconds*perSecond), st.Floods+st.StormDrops, "stats %+v: every frame is a flood or a storm drop", st)
	require.LessOrEqual(t, st.Floods, uint64(limit*seconds), "stats %+v: more floods than %d pps allows in %d s", st, limit, seconds)
	require.GreaterOrEqual(t, st.Floods, uint64(limit), "stats %+v: not even one second's limit flooded", st)
}

// TestUplinkConcurrent: frames from the uplink and from ports, the uplink flapping and the storm
// limit changing, all at once (run with -race).
func TestUplinkConcurrent(t *testing.T) {
	s, _, _, ports := testSegment("a", "b")
	var sent atomic.Int64
	u := s.AttachUplink("vx0", func([]byte) error { sent.Add(1); return nil })
	u.SetMTU(1500)
	u.SetUp(true)
	var wg sync.WaitGroup
	const frames = 2000
	wg.Add(4)
	go func() {
		defer wg.Done()
		for i := range frames {
			u.Receive(frame(broadcast, net.HardwareAddr{0x06, 0, 0, 0, byte(i >> 8), byte(i)}, 1))
		}
	}()
	go func() {
		defer wg.Done()
		for i := range frames {
			s.forward(ports["a"], frame(mac(9), mac(1), byte(i)), true)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range frames / 10 {
			u.SetUp(i%2 == 0)
			s.SetStormLimit(int64(i % 3 * 1000))
		}
		u.SetUp(true)
	}()
	go func() {
		defer wg.Done()
		for range frames / 10 {
			_ = s.FDB()
			_ = u.Stats()
			_ = s.Stats()
		}
	}()
	wg.Wait()
	st := u.Stats()
	require.Equal(t, uint64(frames), st.RxFrames, "uplink %+v, segment %+v, sent %d: frames unaccounted for", st, s.Stats(), sent.Load())
	require.Equal(t, st.TxFrames, uint64(sent.Load()), "uplink %+v, segment %+v, sent %d: frames unaccounted for", st, s.Stats(), sent.Load())
	require.GreaterOrEqual(t, st.TxFrames+st.TxDown+s.Stats().StormDrops, uint64(frames), "uplink %+v, segment %+v, sent %d: frames unaccounted for", st, s.Stats(), sent.Load())
	u.Detach()
}
