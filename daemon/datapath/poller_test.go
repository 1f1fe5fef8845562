package datapath

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic"
)

// longPoll is a NAPI setting whose window (1000 s) outlasts every test: a queue that stops being
// polled did so because it stopped, not because its window passed.
var longPoll = vnic.NAPIConfig{DeferHardIRQs: 1000, GROFlushTimeout: time.Second}

// stopSoon stops ep, failing the test if that takes more than a few seconds: far less than
// longPoll's window, so a poller that kept the queue until its window passed fails it.
func stopSoon(t *testing.T, ep *Endpoint) {
	t.Helper()
	done := make(chan struct{})
	go func() { ep.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return: a poller keeps its queue")
	}
}

func TestPollWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    vnic.NAPIConfig
		want time.Duration
	}{
		{"off", vnic.NAPIConfig{}, 0},
		{"defer without timeout", vnic.NAPIConfig{DeferHardIRQs: 2}, 0},
		{"timeout without defer", vnic.NAPIConfig{GROFlushTimeout: time.Millisecond}, 0},
		{"suspend alone", vnic.NAPIConfig{IRQSuspendTimeout: time.Second}, 0},
		{"product", vnic.NAPIConfig{DeferHardIRQs: 100, GROFlushTimeout: 20 * time.Microsecond}, 2 * time.Millisecond},
		{"suspend longer", vnic.NAPIConfig{DeferHardIRQs: 2, GROFlushTimeout: 20 * time.Microsecond, IRQSuspendTimeout: time.Millisecond}, time.Millisecond},
		{"suspend shorter", vnic.NAPIConfig{DeferHardIRQs: 2, GROFlushTimeout: time.Millisecond, IRQSuspendTimeout: time.Microsecond}, 2 * time.Millisecond},
		{"capped", vnic.NAPIConfig{DeferHardIRQs: 1 << 31, GROFlushTimeout: 1 << 62}, maxPollWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, pollWindow(tc.c))
		})
	}
}

// needPollers skips a test that needs a poller on a machine where none may run (one CPU).
// pollingPair makes two ports of queues queues each on one segment, both polling for a long
// window (longPoll), and pings from a to b, so that both have found work.
func pollingPair(t *testing.T, queues int) (*harness, *testPort, *testPort) {
	t.Helper()
	h := newHarness(t)
	a := h.addPort(portOpts{queues: queues, noIPv6: true})
	b := h.addPort(portOpts{queues: queues, noIPv6: true})
	setNAPI(t, a, longPoll)
	setNAPI(t, b, longPoll)
	a.pingOK(t, b)
	return h, a, b
}

func needPollers(t *testing.T) {
	if maxPollersAllowed() == 0 {
		t.Skip("one CPU: no poller may run")
	}
}

// pollerGoroutines counts the running pollers' goroutines.
func pollerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "datapath.(*poller).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// setNAPI gives every queue of tp the setting c.
func setNAPI(t *testing.T, tp *testPort, c vnic.NAPIConfig) {
	t.Helper()
	for q := range tp.dev.NumQueues() {
		require.NoError(t, tp.port.SetNAPIConfig(q, c))
	}
}

// pollTotals sums an endpoint's polling counters.
func pollTotals(ep *Endpoint) PollStats {
	var t PollStats
	for _, s := range ep.PollStats() {
		t.Polls, t.Hits, t.CPUTime = t.Polls+s.Polls, t.Hits+s.Hits, t.CPUTime+s.CPUTime
	}
	return t
}

// polled reports whether a poller serves queue q of ep now.
func polled(ep *Endpoint, q int) bool {
	qs := ep.qs.Load()
	return qs != nil && q < len(qs.q) && qs.q[q].polled.Load()
}

// waitPollersGone waits until no poller runs or holds a slot of h's segment.
func waitPollersGone(t *testing.T, h *harness, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return h.seg.pollers.InUse() == 0 && pollerGoroutines() == 0 },
		within, time.Millisecond, "pollers still running (%d slots in use, %d goroutines)", h.seg.pollers.InUse(), pollerGoroutines())
}

// TestPollingDelivers checks that polling changes how frames are read, not which: the same UDP
// datagrams (each once, intact), TCP streams (checksummed) and pings cross two ports with polling
// off and on, with and without virtio headers; with polling on the pollers found the work.
func TestPollingDelivers(t *testing.T) {
	needPollers(t)
	for _, tc := range []struct {
		name    string
		poll    bool
		offload bool
	}{{"off", false, false}, {"on", true, false}, {"on offload", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.addPort(portOpts{queues: 2, noIPv6: true, offload: tc.offload})
			b := h.addPort(portOpts{queues: 2, noIPv6: true, offload: tc.offload})
			if tc.poll {
				setNAPI(t, a, longPoll)
				setNAPI(t, b, longPoll)
			}
			a.pingOK(t, b)
			udpBurst(t, a, b, 2000, 64, 4)
			udpBurst(t, b, a, 500, 1400, 4)
			tcpTransfer(t, a, b, 2, 1<<20)
			for seq := range 50 {
				require.NoError(t, a.ping(b.ip, 100+seq, 2*time.Second))
			}
			st := pollTotals(a.ep)
			sb := pollTotals(b.ep)
			if !tc.poll {
				assert.Zero(t, st, "polling off: no polls")
				assert.Zero(t, sb, "polling off: no polls")
				assert.Zero(t, h.seg.pollers.InUse())
				return
			}
			for _, s := range []PollStats{st, sb} {
				assert.NotZero(t, s.Hits, "polling on: polls found work")
				assert.Greater(t, s.Polls, s.Hits, "polling on: a queue is polled past its last work")
			}
			assert.NotZero(t, st.CPUTime+sb.CPUTime, "polling on: the pollers' CPU time is charged to the queues")
			stopSoon(t, a.ep)
			stopSoon(t, b.ep)
			waitPollersGone(t, h, time.Second)
		})
	}
}

// TestPollingStops checks that a queue stops being polled at once, whatever its window, when its
// endpoint stops, when a channel change removes it, and when its port goes down, and that the
// poller then ends and gives its slot back (no goroutine left behind).
func TestPollingStops(t *testing.T) {
	needPollers(t)
	t.Run("stop", func(t *testing.T) {
		h, a, b := pollingPair(t, 1)
		require.Eventually(t, func() bool { return polled(a.ep, 0) && polled(b.ep, 0) }, 2*time.Second, time.Millisecond)
		qa := a.ep.qs.Load().q[0]
		stopSoon(t, a.ep)
		assert.False(t, qa.polled.Load(), "Stop returned with its queue still polled")
		assert.True(t, polled(b.ep, 0), "the other port's queue is still in its window")
		stopSoon(t, b.ep)
		waitPollersGone(t, h, time.Second)
	})
	t.Run("channels", func(t *testing.T) {
		h, a, b := pollingPair(t, 4)
		// Flows from several sockets leave on several TX queues (the TAP hashes them): send
		// until one beyond queue 0, which SetChannels(1) removes, is polled.
		for deadline := time.Now().Add(10 * time.Second); !polled(a.ep, 1) && !polled(a.ep, 2) && !polled(a.ep, 3); {
			require.True(t, time.Now().Before(deadline), "traffic never reached a polled queue beyond 0")
			udpBurst(t, a, b, 64, 64, 8)
		}
		old := a.ep.qs.Load().q
		h.locked(func() {
			require.NoError(t, a.ep.SetChannels(1, func() error { return a.port.SetChannels(1) }))
		})
		for _, qq := range old[1:] {
			assert.False(t, qq.polled.Load(), "queue %d removed by SetChannels still polled", qq.idx)
		}
		a.pingOK(t, b) // the queue left still works
		stopSoon(t, a.ep)
		stopSoon(t, b.ep)
		waitPollersGone(t, h, time.Second)
	})
	t.Run("down", func(t *testing.T) {
		h, a, b := pollingPair(t, 1)
		require.Eventually(t, func() bool { return polled(a.ep, 0) && polled(b.ep, 0) }, 2*time.Second, time.Millisecond)
		h.locked(a.port.Close)
		require.Eventually(t, func() bool { return !polled(a.ep, 0) }, time.Second, time.Millisecond, "port down, queue still polled")
		h.locked(b.port.Close)
		waitPollersGone(t, h, time.Second)
		// Up again, the ports poll again when traffic comes.
		h.locked(func() {
			require.NoError(t, a.port.Open())
			require.NoError(t, b.port.Open())
		})
		a.pingOK(t, b)
		require.Eventually(t, func() bool { return polled(a.ep, 0) }, 2*time.Second, time.Millisecond)
		stopSoon(t, a.ep)
		stopSoon(t, b.ep)
		waitPollersGone(t, h, time.Second)
	})
	t.Run("window", func(t *testing.T) {
		// 10 × 1 ms: the poller gives the queues back and ends 10 ms after the last frame.
		h := newHarness(t)
		a := h.addPort(portOpts{queues: 1, noIPv6: true})
		b := h.addPort(portOpts{queues: 1, noIPv6: true})
		short := vnic.NAPIConfig{DeferHardIRQs: 10, GROFlushTimeout: time.Millisecond}
		setNAPI(t, a, short)
		setNAPI(t, b, short)
		a.pingOK(t, b)
		udpBurst(t, a, b, 200, 64, 1)
		require.NotZero(t, pollTotals(a.ep).Hits, "never polled")
		waitPollersGone(t, h, 2*time.Second)
		assert.False(t, polled(a.ep, 0) || polled(b.ep, 0), "a queue still polled after its window")
		a.pingOK(t, b) // parked readers take the traffic again
	})
	t.Run("setting off", func(t *testing.T) {
		h, a, b := pollingPair(t, 1)
		require.Eventually(t, func() bool { return polled(a.ep, 0) && polled(b.ep, 0) }, 2*time.Second, time.Millisecond)
		setNAPI(t, a, vnic.NAPIConfig{})
		setNAPI(t, b, vnic.NAPIConfig{})
		waitPollersGone(t, h, time.Second)
		a.pingOK(t, b) // back to parking readers
		assert.Zero(t, h.seg.pollers.InUse())
	})
}

// TestPollersBoundRespected runs two pairs of ports on one segment, busy in turn: with a bound of 1 their
// queues share one poller (never two slots or two pollers at once) and both are polled; with a
// bound of 0 nothing polls.
func TestPollersBoundRespected(t *testing.T) {
	needPollers(t)
	for _, bound := range []int{1, 0} {
		h := newHarness(t)
		require.NoError(t, h.seg.pollers.SetMax(bound))
		var ports []*testPort
		for range 4 {
			tp := h.addPort(portOpts{queues: 1, noIPv6: true})
			setNAPI(t, tp, longPoll)
			ports = append(ports, tp)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var maxSlots, maxGoroutines int
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Microsecond):
				}
				maxSlots = max(maxSlots, h.seg.pollers.InUse())
				maxGoroutines = max(maxGoroutines, pollerGoroutines())
			}
		}()
		// One pair after the other: the first pair's queues are still in their window
		// while the second's are busy.
		udpBurst(t, ports[0], ports[1], 2000, 64, 2)
		udpBurst(t, ports[2], ports[3], 2000, 64, 2)
		close(stop)
		wg.Wait()
		assert.LessOrEqual(t, maxSlots, bound, "bound %d: slots in use", bound)
		assert.LessOrEqual(t, maxGoroutines, bound, "bound %d: pollers running", bound)
		for _, tp := range ports {
			s := pollTotals(tp.ep)
			if bound == 0 {
				assert.Zero(t, s, "bound 0: %s polled", tp.name)
			} else if tp == ports[0] || tp == ports[2] {
				assert.NotZero(t, s.Hits, "bound 1: sender %s never polled", tp.name)
			}
		}
		for _, tp := range ports {
			stopSoon(t, tp.ep)
		}
		waitPollersGone(t, h, time.Second)
	}
}
