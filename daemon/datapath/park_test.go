package datapath

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/internal/epollinfo"
	"github.com/manad/manad/vnic"
)

// epollEntries lists the entries of every epoll instance this process has open (the runtime's
// netpoller and the parkers among them).
func epollEntries(t *testing.T) []epollinfo.Entry {
	t.Helper()
	es, err := epollinfo.Entries()
	require.NoError(t, err)
	return es
}

// queueFD returns the descriptor of TAP queue q.
func queueFD(t *testing.T, q *tap.Queue) int {
	fd := -1
	require.NoError(t, q.Control(func(d int) { fd = d }))
	return fd
}

// tapRegistrations returns the epoll entries of queue q of tp's TAP: in which epoll instances
// its descriptor is, with which events.
func tapRegistrations(t *testing.T, tp *testPort, q int) []epollinfo.Entry {
	fd := queueFD(t, tp.dev.Queue(q))
	var out []epollinfo.Entry
	for _, e := range epollEntries(t) {
		if e.TFD == fd {
			out = append(out, e)
		}
	}
	return out
}

// armed reports whether queue q of tp waits for frames in its parker's epoll (EPOLLIN, armed, or
// disarmed), and which other epoll instance holds it, waiting for frames: a poller's pollSet, or
// -1 for none. why says what else was found: the descriptor missing from its parker's epoll, in
// it twice, or in any other instance (the runtime's netpoller among them).
func armed(t *testing.T, tp *testPort, q int) (on bool, poller int, why string) {
	regs := tapRegistrations(t, tp, q)
	pfd := -1
	if qs := tp.ep.qs.Load(); qs != nil {
		pfd = qs.q[q].pk.epfd
	}
	poller, parked := -1, 0
	for _, r := range regs {
		switch {
		case r.EPFD == pfd:
			parked++
			on = r.Events&unix.EPOLLIN != 0
		case poller < 0 && r.Events&unix.EPOLLIN != 0 && slices.Contains(pollerEpolls(tp.ep.seg.pollers), r.EPFD):
			poller = r.EPFD
		default:
			return false, -1, fmt.Sprintf("TAP queue in %+v, want in its parker's epoll %d and at most one poller's", regs, pfd)
		}
	}
	if parked != 1 {
		return false, -1, fmt.Sprintf("TAP queue in %+v, want once in its parker's epoll %d", regs, pfd)
	}
	return on, poller, ""
}

// pollerEpolls returns the epoll descriptors of ps's running pollers (their pollSets).
func pollerEpolls(ps *Pollers) []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []int
	for _, pl := range ps.running {
		out = append(out, pl.set.epfd)
	}
	return out
}

// TestParkerDisarmedWhilePolled checks what makes a polled queue cost no wake-up per frame: a
// TAP queue's descriptor is never in the runtime's netpoller, and its entry in its parker's epoll
// waits for frames (EPOLLIN, armed) only while its TX goroutine reads it: disarmed while a
// poller does, through the frames that come meanwhile, armed again once the poller gives the
// queue back. Meanwhile the queue is in its poller's pollSet (the one epoll_pwait per pass), the
// same one for both ports' queues, and leaves it when given back. With polling off it stays armed
// and in no pollSet.
func TestParkerDisarmedWhilePolled(t *testing.T) {
	needPollers(t)
	h, a, b := pollingPair(t, 1)
	require.Eventually(t, func() bool { return polled(a.ep, 0) && polled(b.ep, 0) }, 2*time.Second, time.Millisecond)
	check := func(when string) {
		t.Helper()
		var sets []int
		for _, tp := range []*testPort{a, b} {
			on, set, why := armed(t, tp, 0)
			require.Empty(t, why, "%s %s", tp.name, when)
			assert.False(t, on, "%s: queue armed %s", tp.name, when)
			assert.GreaterOrEqual(t, set, 0, "%s: queue in no poller's set %s", tp.name, when)
			sets = append(sets, set)
		}
		assert.Equal(t, sets[0], sets[1], "one poller serves both queues")
	}
	check("while a poller reads it")
	udpBurst(t, a, b, 200, 64, 1)
	check("after frames came while a poller read it")
	// Polling off: the pollers give the queues back, and the TX goroutines arm them again.
	setNAPI(t, a, vnic.NAPIConfig{})
	setNAPI(t, b, vnic.NAPIConfig{})
	waitPollersGone(t, h, time.Second)
	for _, tp := range []*testPort{a, b} {
		require.Eventually(t, func() bool { on, set, why := armed(t, tp, 0); return on && set < 0 && why == "" }, time.Second, time.Millisecond,
			"%s: queue not armed, or still in a pollSet, after polling ended", tp.name)
	}
	a.pingOK(t, b) // a parked queue wakes for a frame
	udpBurst(t, a, b, 200, 64, 1)
	for _, tp := range []*testPort{a, b} {
		on, set, why := armed(t, tp, 0)
		require.Empty(t, why, "%s", tp.name)
		assert.True(t, on, "%s: polling off, queue disarmed", tp.name)
		assert.Negative(t, set, "%s: polling off, queue in a pollSet", tp.name)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	des, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(des)
}

// TestQueuesLeaveNoDescriptor checks that every parker's epoll is closed with its queue: a
// channel change up and back, an offload change on and off, and Stop then Start leave the
// process with the descriptors it had (two per queue: the TAP's and the parker's); the port still
// forwards after each.
func TestQueuesLeaveNoDescriptor(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 2, noIPv6: true})
	b := h.addPort(portOpts{queues: 2, noIPv6: true})
	a.pingOK(t, b)
	before := openFDs(t)
	for _, step := range []struct {
		name string
		do   func()
	}{
		{"channels 4", func() { require.NoError(t, a.ep.SetChannels(4, func() error { return a.port.SetChannels(4) })) }},
		{"channels 2", func() { require.NoError(t, a.ep.SetChannels(2, func() error { return a.port.SetChannels(2) })) }},
		{"offload on", func() { require.NoError(t, a.ep.SetOffload(true)) }},
		{"offload off", func() { require.NoError(t, a.ep.SetOffload(false)) }},
	} {
		h.locked(step.do)
		// The kernel turns the carrier on after an offload change; the port's link state
		// is not at stake here.
		a.pingOK(t, b)
		// Each queue beyond the two is a TAP descriptor and its parker's epoll.
		assert.Equal(t, before+2*(a.dev.NumQueues()-2), openFDs(t), "descriptors after %s", step.name)
	}
	a.ep.Stop()
	assert.Equal(t, before-2, openFDs(t), "descriptors after Stop: the two parkers' epolls close, the TAP's queues stay")
	require.NoError(t, a.ep.Start(a.port, a.dev))
	a.pingOK(t, b)
	assert.Equal(t, before, openFDs(t), "descriptors after Start")
}

// txGoroutines counts the running TX goroutines.
func txGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "datapath.(*queue).txLoop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestTAPDeletedUnderReader deletes a port's TAP netdev behind manad's back (ip link del) while
// its TX goroutine is parked on the queue's epoll, and while a poller reads the queue (its entry
// disarmed): either way the TX goroutine learns of it (EBADFD) and exits, as it did when the TAP
// file was in the netpoller, and the endpoint still stops; a polled queue leaves its poller's
// epoll set.
func TestTAPDeletedUnderReader(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run(map[bool]string{false: "parked", true: "polled"}[poll], func(t *testing.T) {
			if poll {
				needPollers(t)
			}
			h := newHarness(t)
			a := h.addPort(portOpts{queues: 1, noIPv6: true})
			b := h.addPort(portOpts{queues: 1, noIPv6: true})
			if poll {
				setNAPI(t, a, longPoll)
				setNAPI(t, b, longPoll)
			}
			a.pingOK(t, b)
			if poll {
				require.Eventually(t, func() bool { return polled(a.ep, 0) }, 2*time.Second, time.Millisecond)
			} else {
				require.Eventually(t, func() bool { on, _, why := armed(t, a, 0); return on && why == "" }, time.Second, time.Millisecond)
			}
			before := txGoroutines()
			taptest.IP(t, a.ns, "link", "del", "eth0")
			require.Eventually(t, func() bool { return txGoroutines() == before-1 }, 5*time.Second, time.Millisecond,
				"the deleted TAP's TX goroutine did not exit (%d TX goroutines, %d before)", txGoroutines(), before)
			if poll {
				assert.False(t, polled(a.ep, 0), "the deleted TAP's queue is still polled")
				ok, why := pollSetMatches(t, h, a, b)
				assert.True(t, ok, "the deleted TAP's queue left its poller's set: %s", why)
			}
			stopSoon(t, a.ep)
			stopSoon(t, b.ep)
			waitPollersGone(t, h, time.Second)
		})
	}
}
