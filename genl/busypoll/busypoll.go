// Package busypoll polls a non-blocking socket for a bounded time before its reader parks on the
// Go runtime's network poller, as the kernel's busy_read (sk_busy_loop, SO_BUSY_POLL) spins on a
// device queue before a blocking read sleeps.
//
// A request/response round trip between two processes costs two wake-ups when both sides park:
// the server's, when the request arrives, and the client's, when the answer does. On a virtual
// machine a wake-up of an idle vCPU costs more than the kernel's own ethtool GET, which answers
// inside the sender's system call. A reader that polls for a few tens of microseconds instead
// finds the datagram without being woken. manad's request loop polls after each answer
// (genl/transport.Config.BusyPoll) and genl/client polls for its reply.
package busypoll

import (
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultServerWindow is the busy-poll window manad's configuration gives its control server
// (the [daemon] key busy_poll, genl/transport.Config.BusyPoll): a little longer than a client's turn
// between two requests of a loop on a loaded 2-core machine (about 30-60 µs), as the kernel's
// busy_read is sized to the device's latency.
const DefaultServerWindow = 200 * time.Microsecond

// Pollers is how many pollers a process may keep spinning at once: half its processors
// (GOMAXPROCS), so that the rest stay for the peers they wait for, and none on one processor,
// where a poll holds off the very peer it waits for, which needs that CPU to answer (a loop of
// CHANNELS_GET, manad and the client both pinned to one CPU, ran 6× slower with the polls than
// without). GOMAXPROCS(0) takes a runtime lock: call Pollers when a poller is set up, not per
// poll.
func Pollers() int { return runtime.GOMAXPROCS(0) / 2 }

// Yield is what a poller gives way to between two attempts.
type Yield int

const (
	// Goroutines: the runtime's other goroutines (runtime.Gosched); the thread keeps its CPU.
	// manad's request loop polls so: with sched_yield(2) there too, its round trips measured
	// 2-3× slower (tests/integration BenchmarkGetRoundTrip).
	Goroutines Yield = iota
	// Threads: the other goroutines, then the other threads of the CPU (sched_yield(2)). A
	// client polls so: the server it waits for may have been woken onto the client's CPU, and
	// would otherwise wait for the poll to end (a GET polled for so without yielding, to a
	// server that did not poll, measured 1.5× slower than not polling at all).
	Threads
)

// Poll calls try with rc's descriptor until try reports done or d has passed, and reports
// whether try finished. try must not block: it reads with MSG_DONTWAIT (or from the
// descriptor, which the runtime keeps non-blocking) and reports false on EAGAIN. Between
// attempts the poller gives way to what y says. Poll returns false without calling try when
// rc's connection is closed, and at once when d <= 0.
func Poll(rc syscall.RawConn, d time.Duration, y Yield, try func(fd int) (done bool)) bool {
	if d <= 0 {
		return false
	}
	deadline := time.Now().Add(d)
	for {
		done := false
		if err := rc.Read(func(fd uintptr) bool {
			done = try(int(fd))
			return true // never wait on the poller here
		}); err != nil {
			return false
		}
		if done {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		runtime.Gosched()
		if y == Threads {
			_, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}
