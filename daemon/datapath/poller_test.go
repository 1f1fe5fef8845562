package datapath

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
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

// TestPollSet checks a poller's epoll set on pipes standing in for TAP queues: mark reports the
// queues with something to read and only those, again until it is read (level-triggered), and
// all of them across two passes when more are readable than one epoll_pwait reports; remove
// takes a queue out, closing a queue's descriptor takes it out too, a closed queue is not added,
// and close leaves no descriptor behind.
func TestPollSet(t *testing.T) {
	fds := openFDs(t)
	s := newPollSet()
	require.GreaterOrEqual(t, s.epfd, 0, "epoll_create1")
	n := pollEvents + 4
	qs := make([]polledQueue, n)
	w := make([]int, n) // the pipes' write ends
	for i := range qs {
		var p [2]int
		require.NoError(t, unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC))
		tq := tap.NewQueue(p[0], fmt.Sprint("pipe", i))
		w[i] = p[1]
		t.Cleanup(func() { tq.Close(); unix.Close(p[1]) })
		qs[i] = polledQueue{qq: &queue{tq: tq}, id: int32(100 + i)}
		require.True(t, s.add(tq, qs[i].id), "add %d", i)
	}
	mark := func() []int {
		for i := range qs {
			qs[i].ready = false
		}
		s.mark(qs)
		var r []int
		for i, q := range qs {
			if q.ready {
				r = append(r, i)
			}
		}
		return r
	}
	put := func(i int) { _, err := unix.Write(w[i], []byte{1}); require.NoError(t, err) }
	take := func(i int) {
		_, err := qs[i].qq.tq.Read(make([]byte, 8))
		require.NoError(t, err)
	}

	assert.Empty(t, mark(), "nothing written")
	put(3)
	assert.Equal(t, []int{3}, mark())
	assert.Equal(t, []int{3}, mark(), "level-triggered: still readable")
	take(3)
	assert.Empty(t, mark(), "read")

	for i := range qs {
		put(i)
	}
	first := mark()
	assert.Len(t, first, pollEvents, "one epoll_pwait reports at most pollEvents")
	seen := map[int]bool{}
	for _, i := range append(first, mark()...) {
		seen[i] = true
	}
	assert.Len(t, seen, n, "the queues one pass left out come in the next")
	for i := range qs {
		take(i)
	}

	put(0)
	put(1)
	s.remove(qs[0].qq.tq)
	assert.Equal(t, []int{1}, mark(), "removed queue 0")
	require.NoError(t, qs[1].qq.tq.Close())
	assert.Empty(t, mark(), "queue 1's descriptor closed")
	entries := 0
	for _, e := range epollEntries(t) {
		if e.EPFD == s.epfd {
			entries++
		}
	}
	assert.Equal(t, n-2, entries, "entries left in the set")
	assert.False(t, s.add(qs[1].qq.tq, 1), "a closed queue is not added")

	s.close()
	for i := range qs {
		qs[i].qq.tq.Close()
		unix.Close(w[i])
	}
	assert.Equal(t, fds, openFDs(t), "descriptors after close")
}

// pollSetMatches reports whether the running pollers' epoll sets of h hold exactly the TAP
// queues of ports that are polled now, and says what they hold otherwise.
func pollSetMatches(t *testing.T, h *harness, ports ...*testPort) (bool, string) {
	sets := pollerEpolls(h.seg.pollers)
	want, got := map[int]bool{}, map[int]bool{}
	for _, tp := range ports {
		if qs := tp.ep.qs.Load(); qs != nil {
			for _, qq := range qs.q {
				if qq.polled.Load() {
					want[queueFD(t, qq.tq)] = true
				}
			}
		}
	}
	for _, e := range epollEntries(t) {
		if slices.Contains(sets, e.EPFD) {
			got[e.TFD] = true
		}
	}
	return maps.Equal(want, got), fmt.Sprintf("pollers' epolls %v hold %v, polled TAP queues %v", sets, got, want)
}

// eventpolls counts this process's epoll instances.
func eventpolls(t *testing.T) int {
	n := map[int]bool{}
	for _, e := range epollEntries(t) {
		n[e.EPFD] = true
	}
	return len(n)
}

// TestPollSetFollowsQueues checks that a poller's epoll set holds the TAP queues it serves and
// no other, as queues are handed over (traffic on more queues), removed (a channel change), left
// behind by a port going down and given back when the setting goes off; and that the set goes
// with its poller (no epoll instance or goroutine left).
func TestPollSetFollowsQueues(t *testing.T) {
	needPollers(t)
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 4, noIPv6: true})
	b := h.addPort(portOpts{queues: 4, noIPv6: true})
	a.pingOK(t, b)
	epolls := eventpolls(t)
	setNAPI(t, a, longPoll)
	setNAPI(t, b, longPoll)
	matches := func(what string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			ok, why := pollSetMatches(t, h, a, b)
			assert.True(c, ok, "%s: %s", what, why)
		}, 2*time.Second, time.Millisecond)
	}
	// Flows from several sockets leave on several TX queues: send until a queue beyond 0 is
	// polled, which the channel change below removes.
	for deadline := time.Now().Add(10 * time.Second); !polled(a.ep, 1) && !polled(a.ep, 2) && !polled(a.ep, 3); {
		require.True(t, time.Now().Before(deadline), "traffic never reached a polled queue beyond 0")
		udpBurst(t, a, b, 64, 64, 8)
	}
	matches("traffic on several queues")
	assert.Equal(t, 1, len(pollerEpolls(h.seg.pollers)), "one poller (the default bound)")

	h.locked(func() {
		require.NoError(t, a.ep.SetChannels(1, func() error { return a.port.SetChannels(1) }))
	})
	matches("after SetChannels(1)")
	a.pingOK(t, b) // b's replies: one of b's queues polled too, and kept by the poller below
	require.Eventually(t, func() bool {
		return polled(a.ep, 0) && (polled(b.ep, 0) || polled(b.ep, 1) || polled(b.ep, 2) || polled(b.ep, 3))
	}, 2*time.Second, time.Millisecond)
	matches("traffic after SetChannels(1)")

	h.locked(a.port.Close)
	require.Eventually(t, func() bool { return !polled(a.ep, 0) }, time.Second, time.Millisecond, "port down, queue still polled")
	require.Len(t, pollerEpolls(h.seg.pollers), 1, "the poller serves b's queue still")
	matches("port a down")

	setNAPI(t, b, vnic.NAPIConfig{})
	waitPollersGone(t, h, time.Second)
	matches("setting off")
	assert.Equal(t, epolls-3, eventpolls(t), "epoll instances: the parkers' left, no poller's (3 queues removed)")
}
