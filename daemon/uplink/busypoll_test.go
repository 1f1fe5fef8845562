package uplink

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
)

func TestCheckBusyPoll(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		fail string
	}{
		{0, ""},
		{time.Microsecond, ""},
		{50 * time.Microsecond, ""},
		{MaxBusyPoll, ""},
		{-time.Microsecond, "out of range"},
		{MaxBusyPoll + time.Microsecond, "out of range"},
		{1500 * time.Nanosecond, "whole microseconds"},
	} {
		err := CheckBusyPoll(tc.d)
		if tc.fail == "" {
			assert.NoError(t, err, "%v", tc.d)
			continue
		}
		require.Error(t, err, "%v", tc.d)
		assert.True(t, errors.Is(err, unix.EINVAL), "%v: %v is not EINVAL", tc.d, err)
		assert.Contains(t, err.Error(), tc.fail)
	}
}

func TestUplinkStartRefusesABadBusyPoll(t *testing.T) {
	_, err := Start(context.Background(), Config{Dev: "a0", Segment: datapath.NewSegment("t"), Logger: quiet(), BusyPoll: 2 * MaxBusyPoll})
	require.ErrorIs(t, err, unix.EINVAL)
}

// TestUplinkBusyPolls sends frames through two busy-polling uplinks in turn, with one poller
// slot and with none: frames flow either way; with the slot the RX loops poll after the frames
// they found (counted, with the time), without it they park as with polling off. Closing
// the uplinks gives the slot back and leaves no goroutine behind (TestMain's check).
func TestUplinkBusyPolls(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("busy polling needs two CPUs (datapath.Pollers allows none on one)")
	}
	for _, mode := range []string{AttachPacket, AttachXDP} {
		for _, slots := range []int{1, 0} {
			t.Run(mode+map[int]string{0: "NoSlot", 1: "Slot"}[slots], func(t *testing.T) { testBusyPolls(t, mode, slots) })
		}
	}
}

func testBusyPolls(t *testing.T, mode string, slots int) {
	ns := testNS(t)
	pollers := datapath.NewSegments().Pollers()
	require.NoError(t, pollers.SetMax(slots))
	seg := datapath.NewSegment("t")
	start := func(dev string) *Uplink {
		u, err := Start(context.Background(), Config{Dev: dev, NetNS: ns, Segment: seg, Logger: quiet(), Attach: mode,
			BusyPoll: 200 * time.Microsecond, Pollers: pollers})
		require.NoError(t, err)
		t.Cleanup(u.Close)
		eventually(t, dev+" up", func() bool { return u.Status().State == Up })
		require.Equal(t, mode, u.Status().Attach, u.Status().Err)
		return u
	}
	ua, ub := start("a0"), start("b0")
	if a := ua.sock.Load(); mode == AttachXDP && a != nil {
		for i, q := range a.xsk.queues {
			assert.True(t, q.kernelPoll, "queue %d: the kernel refused SO_BUSY_POLL", i)
		}
	}
	a1, b1 := rawSocket(t, ns, "a1"), rawSocket(t, ns, "b1")
	for i := range 20 {
		tag := byte(10 + i)
		from, to := a1, b1
		if i%2 == 1 {
			from, to = b1, a1
		}
		send(t, from, testFrame(tag, 100))
		require.True(t, sees(t, to, tag), "frame %d did not cross the segment", tag)
	}
	p := ua.Stats().Polling
	q := ub.Stats().Polling
	if slots == 0 {
		assert.Zero(t, p, "a0 polled without a slot")
		assert.Zero(t, q, "b0 polled without a slot")
	} else {
		// One slot for two uplinks: a loop that finds the other polling parks instead.
		assert.NotZero(t, p.Polls+q.Polls, "no uplink polled after the frames it received")
		for _, st := range []datapath.PollStats{p, q} {
			assert.LessOrEqual(t, st.Hits, st.Polls)
			if st.Polls == 0 {
				continue
			}
			assert.Greater(t, st.CPUTime, time.Duration(0))
			// A window that found nothing lasted 200 µs: the time is the polls' at most.
			assert.Less(t, st.CPUTime, time.Duration(st.Polls)*50*time.Millisecond)
		}
	}
	ua.Close()
	ub.Close()
	assert.Zero(t, pollers.InUse(), "a closed uplink holds a poller slot")
}

// TestUplinkStopsPollingWhenDetached keeps frames coming into a busy-polling uplink while its
// device goes down: the RX loop stops at once, gives its slot back, and polls again once the
// device is back.
func TestUplinkStopsPollingWhenDetached(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("busy polling needs two CPUs")
	}
	ns := testNS(t)
	pollers := datapath.NewSegments().Pollers()
	require.NoError(t, pollers.SetMax(1))
	seg := datapath.NewSegment("t")
	u, err := Start(context.Background(), Config{Dev: "a0", NetNS: ns, Segment: seg, Logger: quiet(),
		BusyPoll: MaxBusyPoll, Pollers: pollers})
	require.NoError(t, err)
	defer u.Close()
	eventually(t, "a0 up", func() bool { return u.Status().State == Up })
	a1 := rawSocket(t, ns, "a1")
	send(t, a1, testFrame(1, 100))
	eventually(t, "a poll", func() bool { return u.Stats().Polling.Polls > 0 })

	run(t, "ip", "-n", ns, "link", "set", "a0", "down")
	eventually(t, "a0 down", func() bool { return u.Status().State == Down })
	assert.Zero(t, pollers.InUse(), "the detached uplink still holds its poller slot")
	before := u.Stats().Polling
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, before, u.Stats().Polling, "the detached uplink went on polling")

	run(t, "ip", "-n", ns, "link", "set", "a0", "up")
	eventually(t, "a0 up again", func() bool { return u.Status().State == Up })
	send(t, a1, testFrame(2, 100))
	eventually(t, "a poll after re-attaching", func() bool { return u.Stats().Polling.Polls > before.Polls })
}

// TestBusyPollerBacksOff: polls that keep finding nothing stop after missStreak of them, the
// loop parks at once for missSkip chances (not counted as polls, no slot taken), then polls
// again; a poll that finds work ends the streak.
func TestBusyPollerBacksOff(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("busy polling needs two CPUs (datapath.Pollers allows none on one)")
	}
	pollers := datapath.NewSegments().Pollers()
	require.NoError(t, pollers.SetMax(1))
	var closed atomic.Bool
	var c pollCounters
	b := newBusyPoller(time.Microsecond, pollers, &closed, &c)
	nothing := func() bool { return false }
	for i := range missStreak {
		require.False(t, b.poll(nothing, nil, nil), "poll %d", i)
	}
	require.Equal(t, uint64(missStreak), c.stats().Polls)
	for range missSkip {
		require.False(t, b.poll(func() bool { t.Fatal("looked at the ring while backing off"); return true }, nil, nil))
	}
	assert.Equal(t, uint64(missStreak), c.stats().Polls, "skipped chances counted as polls")
	assert.Zero(t, pollers.InUse())
	// Polling again: a hit ends the streak, so missStreak-1 misses after it do not back off.
	require.True(t, b.poll(func() bool { return true }, nil, nil))
	for range missStreak - 1 {
		require.False(t, b.poll(nothing, nil, nil))
	}
	require.True(t, b.poll(func() bool { return true }, nil, nil), "backed off after fewer than missStreak misses")
	assert.Equal(t, uint64(2*missStreak+1), c.stats().Polls)
	assert.Equal(t, uint64(2), c.stats().Hits)
}
