package datapath

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// Pollers bounds how many queue readers of one Segments may busy-poll at the same time (the CPU
// that a port's NAPI settings, vnic.NAPIConfig, may take): a reader that would poll and finds
// every poller taken parks as it would without polling. Never more than the processors but one,
// so that polling never takes the only CPU the kernel side of a round trip has.
type Pollers struct {
	max   atomic.Int32
	inUse atomic.Int32
	pollersState
}

// DefaultMaxPollers is the bound a new Segments starts with: one poller where there are at least
// two CPUs, none on a single CPU.
func DefaultMaxPollers() int { return min(1, maxPollersAllowed()) }

// maxPollersAllowed is the most pollers the processors allow: all of them but one.
func maxPollersAllowed() int { return max(0, min(runtime.NumCPU(), runtime.GOMAXPROCS(0))-1) }

func newPollers() *Pollers {
	p := &Pollers{}
	p.max.Store(int32(DefaultMaxPollers()))
	return p
}

// SetMax sets the bound. Errors: EINVAL with a message when n is negative or more than the
// processors but one allow (which on a single CPU is none); the bound is unchanged then.
func (p *Pollers) SetMax(n int) error {
	if n < 0 || n > maxPollersAllowed() {
		return nlerr.New(unix.EINVAL, "max pollers %d out of range 0..%d (the CPUs manad may use, %d, but one)",
			n, maxPollersAllowed(), min(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	}
	p.max.Store(int32(n))
	return nil
}

// Max returns the bound.
func (p *Pollers) Max() int { return int(p.max.Load()) }

// TryAcquire takes a poller slot if one is free, without waiting: a reader that gets none parks
// as it would with polling off. A lowered bound (SetMax) takes effect as slots are released.
func (p *Pollers) TryAcquire() bool {
	for {
		n := p.inUse.Load()
		if n >= p.max.Load() {
			return false
		}
		if p.inUse.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release gives back a slot TryAcquire took.
func (p *Pollers) Release() { p.inUse.Add(-1) }

// InUse returns how many slots are taken now.
func (p *Pollers) InUse() int { return int(p.inUse.Load()) }

// PollStats is what one queue's reader did while busy-polling: the polls it made, the polls that
// found work, and the CPU time it spent polling.
type PollStats struct {
	Polls, Hits uint64
	CPUTime     time.Duration
}

// PollStats returns each running queue's polling counters, by queue index, carried across
// SetChannels as the other queue counters are (nil when not started).
func (e *Endpoint) PollStats() []PollStats {
	qs := e.qs.Load()
	if qs == nil {
		return nil
	}
	out := make([]PollStats, len(qs.q))
	for i, qq := range qs.q {
		s := &qq.stats
		out[i] = PollStats{Polls: s.polls.Load(), Hits: s.pollHits.Load(), CPUTime: time.Duration(s.pollNanos.Load())}
	}
	return out
}
