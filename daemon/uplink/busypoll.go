package uplink

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/genl/nlerr"
)

// MaxBusyPoll bounds Config.BusyPoll: the kernel's net.core.busy_poll is advised at 50 µs, and a
// window beyond a millisecond spins through gaps a request-response peer no longer fills (a
// poller then only burns its CPU).
const MaxBusyPoll = time.Millisecond

// CheckBusyPoll checks a busy-poll window for an uplink. Errors: EINVAL with the bounds, for a
// negative window, one beyond MaxBusyPoll, or one that is not whole microseconds (SO_BUSY_POLL
// takes microseconds).
func CheckBusyPoll(d time.Duration) error {
	switch {
	case d < 0 || d > MaxBusyPoll:
		return nlerr.New(unix.EINVAL, "busy_poll %v out of range 0..%v (0: off)", d, MaxBusyPoll)
	case d%time.Microsecond != 0:
		return nlerr.New(unix.EINVAL, "busy_poll %v is not whole microseconds (the kernel's SO_BUSY_POLL unit)", d)
	}
	return nil
}

// busyPoller keeps an RX loop polling its ring for a window after it found work, before it
// parks: the uplink's side of the kernel's busy polling (sk_busy_loop; a socket's SO_BUSY_POLL,
// net.core.busy_poll). The loop polls only while it holds a slot of the daemon's Pollers, and
// stops as soon as its socket is closed. While it polls, its socket's entry in its parker is
// disarmed, so the frames it takes from the ring wake no thread. A nil *busyPoller never polls.
//
// A transmission does not start a poll. An earlier version woke the parked loop through its
// socket's read deadline at every frame sent out (the answer would come back that way), so that
// it polled for the answer: that is a wake-up per transmission, paid even when no Pollers slot
// was free and the loop parked again at once, which is the rule when the ports' readers poll
// too (one slot on two CPUs; bench/fabric's busy-polling paths measured 22 polls for 7,000
// transactions, and twice the daemons' sleeps of polling off).
//
// Polls that keep finding nothing stop costing: after missStreak polls in a row spent their
// whole window in vain (the gaps between frames are longer than the window, as a request-response
// peer's round trip through two daemons on two CPUs is: bench/fabric's UDP RR with the uplinks
// alone polling found a frame in 1 of 10,700 windows of 200 µs, each a CPU's time the round trip
// needed), the loop parks at once for the next missSkip chances to poll, then tries again. A
// poll that finds a frame ends the streak.
type busyPoller struct {
	window  time.Duration
	pollers *datapath.Pollers
	closed  *atomic.Bool // the socket's: set before it is closed
	c       *pollCounters
	// misses is the current streak of polls that found nothing, skip how many chances to poll
	// are left out before the next try; both the RX loop's.
	misses, skip int
}

// missStreak and missSkip: see busyPoller.
const (
	missStreak = 8
	missSkip   = 64
)

// pollCounters are an uplink's polling counters, shared by its RX loops (datapath.PollStats).
type pollCounters struct {
	polls, hits, nanos atomic.Uint64
}

func (c *pollCounters) stats() datapath.PollStats {
	return datapath.PollStats{Polls: c.polls.Load(), Hits: c.hits.Load(), CPUTime: time.Duration(c.nanos.Load())}
}

// newBusyPoller returns the poller of an RX loop whose socket sets closed when it closes; nil
// when the window is 0 or there is no Pollers to take a slot of (polling off).
func newBusyPoller(window time.Duration, pollers *datapath.Pollers, closed *atomic.Bool, c *pollCounters) *busyPoller {
	if window <= 0 || pollers == nil || c == nil {
		return nil
	}
	return &busyPoller{window: window, pollers: pollers, closed: closed, c: c}
}

// poll spins on ready for the window, calling kick (when not nil) between looks to let the
// kernel run its own busy poll, and reports whether ready said there is work. It returns false
// at once, so that the loop parks, when no Pollers slot is free, the socket is closed or a
// streak of misses skips this chance (busyPoller). Otherwise one call is one poll (counted) and
// a hit when it found work; the time it spins, spent on a CPU (the goroutine does not block), is
// its CPU time. Once it holds a slot it disarms pk, the RX loop's parker, which the loop arms
// again when it parks (an episode of polls that keep finding frames costs two epoll_ctl in all).
//
// Between looks the thread yields its CPU to the CPU's other threads (sched_yield).
func (b *busyPoller) poll(ready func() bool, kick func(), pk *parker) bool {
	if b == nil || b.closed.Load() {
		return false
	}
	if b.skip > 0 {
		b.skip--
		return false
	}
	if !b.pollers.TryAcquire() {
		return false
	}
	defer b.pollers.Release()
	pk.arm(false)
	start := time.Now()
	b.c.polls.Add(1)
	hit := false
	for {
		if ready() {
			hit = true
			break
		}
		if b.closed.Load() || time.Since(start) >= b.window {
			break
		}
		if kick != nil {
			kick()
		}
		// The frame polled for comes from a peer (a local stack's softirq, the other
		// side's process) that may have been woken onto this CPU: let it run now rather
		// than after the window. No runtime.Gosched: the daemon's other goroutines run on
		// its other processors (a poller leaves one free, datapath.Pollers), and a
		// Gosched per look measured more than half again as many thread sleeps per
		// round trip (bench/fabric RR: 6.4-7.7 against 4.0) for no more transactions.
		_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	b.c.nanos.Add(uint64(time.Since(start)))
	if hit {
		b.c.hits.Add(1)
		b.misses = 0
	} else if b.misses++; b.misses >= missStreak {
		b.misses, b.skip = 0, missSkip
	}
	return hit
}

// setKernelBusyPoll asks the kernel to busy-poll the device queue behind socket fd for window
// when the socket is read (SO_BUSY_POLL in µs), with up to budget frames a poll
// (SO_BUSY_POLL_BUDGET), preferring busy polling to the device's interrupts
// (SO_PREFER_BUSY_POLL): Documentation/networking/af_xdp.rst's "XDP_USE_NEED_WAKEUP" and
// napi.rst's "Busy polling" for an AF_XDP socket. Values above net.core.busy_poll and
// busy_poll_budget need CAP_NET_ADMIN, which attaching an XDP program took anyway. Errors: the
// option's errno, wrapped with its name.
func setKernelBusyPoll(fd int, window time.Duration, budget int) error {
	for _, o := range []struct {
		name string
		opt  int
		val  int
	}{
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1},
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, int(window / time.Microsecond)},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, budget},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.opt, o.val); err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
	}
	return nil
}

// recvKick is one non-blocking recvfrom on an AF_XDP socket: with SO_BUSY_POLL set, xsk_recvmsg
// busy-polls the device queue the socket is bound to (sk_busy_loop) before it returns, which is
// how an application drives the NAPI of a queue whose interrupts are deferred.
func recvKick(fd int) {
	_, _, _ = unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
}
