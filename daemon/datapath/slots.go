package datapath

import "runtime"

// pollSlots bounds how many goroutines do a segment's deferred work at once: replicating a flood
// into the members' inputs, and draining an RX queue's input (one budget per slot taken). It is
// what a host's NAPI has in its CPUs: however many queues have work, only as many poll at a time
// as there are processors, the others wait their turn (parked, not runnable). Without it, a
// shared segment whose every member has a backlog makes a thousand goroutines runnable at once,
// and anything else the daemon runs (a control request, a link change under the configuration
// lock, the signal handler) waits behind all of their turns, each time it blocks.
//
// The segments of one Segments share their slots; a segment made alone has its own.
type pollSlots chan struct{}

// newPollSlots returns as many slots as the process may run goroutines in parallel.
func newPollSlots() pollSlots { return make(pollSlots, max(1, runtime.GOMAXPROCS(0))) }

// acquire takes a slot, waiting for one; it gives up, returning false, once stop is closed (nil:
// never). Holders keep a slot for bounded work only (one flood, one budget), so the wait ends.
func (s pollSlots) acquire(stop <-chan struct{}) bool {
	select {
	case s <- struct{}{}:
		return true
	default:
	}
	select {
	case s <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

// release gives a slot back.
func (s pollSlots) release() { <-s }
