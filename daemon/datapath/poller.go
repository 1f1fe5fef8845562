package datapath

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic"
)

// pollerQueues is how many queues one poller serves before a new one (if the bound allows it)
// takes the next: enough for the two ends of a round trip (port A's queue and port B's) and a
// few more, few enough that a pass over them stays within a few microseconds.
const pollerQueues = 4

// cpuTick is how often a poller reads its thread's CPU time, to charge it to the queues it
// serves (PollStats.CPUTime).
const cpuTick = time.Millisecond

// maxPollWindow caps a queue's polling window (pollWindow), whatever its settings multiply to.
const maxPollWindow = time.Hour

// pollWindow is how long a queue's reader keeps polling after the last poll that found work,
// by the queue's NAPI settings: defer-hard-irqs × gro-flush-timeout, or irq-suspend-timeout when
// that is longer. It is 0 (no polling: the reader parks at once, as with polling off) unless
// both defer-hard-irqs and gro-flush-timeout are set: the kernel's napi_complete_done defers
// re-arming the IRQ only then (napi_get_gro_flush_timeout, napi_get_defer_hard_irqs), re-polling
// from the gro-flush-timeout hrtimer while fewer than defer-hard-irqs polls in a row came back
// empty, so its device interrupts stay off for about that product after the last work; and a
// busy-polling application's irq-suspend-timeout (napi_suspend_irqs) keeps them off for that
// long instead.
func pollWindow(c vnic.NAPIConfig) time.Duration {
	if c.DeferHardIRQs == 0 || c.GROFlushTimeout <= 0 {
		return 0
	}
	w := maxPollWindow
	if c.GROFlushTimeout < maxPollWindow/time.Duration(c.DeferHardIRQs) {
		w = time.Duration(c.DeferHardIRQs) * c.GROFlushTimeout
	}
	return min(max(w, c.IRQSuspendTimeout), maxPollWindow)
}

// poller is one busy-polling goroutine, holding one of its Pollers' slots: it serves the queues
// handed over to it (handOver), each until its window passes without work, and ends when it
// serves none.
type poller struct {
	ps      *Pollers
	added   []*queue    // handed over, not yet taken in; guarded by ps.mu
	pending atomic.Bool // len(added) > 0
	n       int         // queues served or added; guarded by ps.mu
}

// handOver hands qq's reading (its TAP queue and RX input) to a poller and reports whether it
// did: to one already running that serves fewer than pollerQueues queues, else to a new one if a
// slot is free (TryAcquire), else to the one serving the fewest. false (no slot at all, a bound
// of 0): the caller reads and parks as with polling off. On true the caller must not read qq
// until the poller gives it back (qq.back), or qq stops.
func (ps *Pollers) handOver(qq *queue) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var pl *poller
	for _, c := range ps.running {
		if pl == nil || c.n < pl.n {
			pl = c
		}
	}
	if pl == nil || pl.n >= pollerQueues {
		if ps.TryAcquire() {
			pl = &poller{ps: ps}
			ps.running = append(ps.running, pl)
			go pl.run()
		}
	}
	if pl == nil {
		return false
	}
	pl.n++
	qq.wg.Add(1) // the poller's hold on qq: waitQueues waits for it to give qq back
	qq.polled.Store(true)
	pl.added = append(pl.added, qq)
	pl.pending.Store(true)
	return true
}

// polledQueue is a queue a poller serves, with when its last poll found work.
type polledQueue struct {
	qq      *queue
	lastHit int64 // nanotime
}

// run is the poller's goroutine. It keeps its thread (LockOSThread), so that the thread's CPU
// time is what polling cost, and never yields on its own: there is always a processor it does
// not take (Pollers' bound), and the runtime preempts it like any goroutine.
func (pl *poller) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer pl.ps.Release()
	var qs []polledQueue
	cpu0 := threadCPU()
	lastTick := nanotime()
	charge := func(now int64) {
		c := threadCPU()
		if len(qs) > 0 {
			share := uint64(c-cpu0) / uint64(len(qs))
			for _, q := range qs {
				q.qq.stats.pollNanos.Add(share)
			}
		}
		cpu0, lastTick = c, now
	}
	for {
		if pl.pending.Load() {
			pl.ps.mu.Lock()
			now := nanotime()
			for _, qq := range pl.added {
				qs = append(qs, polledQueue{qq: qq, lastHit: now})
			}
			clear(pl.added)
			pl.added = pl.added[:0]
			pl.pending.Store(false)
			pl.ps.mu.Unlock()
		}
		now := nanotime()
		found := false
		for i := 0; i < len(qs); i++ {
			q := &qs[i]
			qq := q.qq
			p := qq.txPort
			if qq.stopping() || p.NumRxQueues() == 0 || now-q.lastHit > int64(pollWindow(p.NAPIConfig(qq.idx))) {
				charge(now) // its share of the time since the last tick, while it is still served
				pl.giveBack(qq)
				qs[i] = qs[len(qs)-1]
				qs[len(qs)-1] = polledQueue{}
				qs = qs[:len(qs)-1]
				i--
				continue
			}
			hit, ok := qq.pollOnce(p)
			qq.stats.polls.Add(1)
			if hit {
				found = true
				qq.stats.pollHits.Add(1)
				q.lastHit = nanotime()
			}
			if !ok {
				q.lastHit = math.MinInt64 / 2 // an error or a detached queue: give it back next pass
			}
		}
		if !found {
			// Nothing this pass: let a task waiting for this CPU run first (a round trip's
			// other end, often), as the kernel's napi_busy_loop stops on need_resched.
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
		if now-lastTick >= int64(cpuTick) {
			charge(now)
		}
		if len(qs) == 0 {
			pl.ps.mu.Lock()
			if !pl.pending.Load() {
				charge(nanotime())
				pl.ps.remove(pl)
				pl.ps.mu.Unlock()
				return
			}
			pl.ps.mu.Unlock()
		}
	}
}

// giveBack ends the poller's hold on qq: its RX goroutine takes kicks again (and gets one for a
// frame queued meanwhile), and its TX goroutine reads it again.
func (pl *poller) giveBack(qq *queue) {
	qq.polled.Store(false)
	// A sender that saw polled pushed its frame before this store: kick for it. One that
	// pushes after it sees polled false and kicks itself.
	if !qq.in.empty() || qq.drops.Load() > 0 {
		qq.kick()
	}
	pl.ps.mu.Lock()
	pl.n--
	pl.ps.mu.Unlock()
	select {
	case qq.back <- struct{}{}:
	default:
	}
	qq.wg.Done()
}

// remove forgets a poller that ends. Caller holds ps.mu.
func (ps *Pollers) remove(pl *poller) {
	for i, c := range ps.running {
		if c == pl {
			ps.running = append(ps.running[:i], ps.running[i+1:]...)
			return
		}
	}
}

// pollOnce is one poll of a queue handed to a poller: one batch of what the kernel transmitted
// on the TAP queue (read without waiting) and one budget of the RX input. hit reports whether
// either found work; ok false means the TAP queue failed or was detached (its TX goroutine
// finds out and reports it when it reads again).
func (qq *queue) pollOnce(p *vnic.Port) (hit, ok bool) {
	if err := qq.tq.Control(qq.pollFn); err != nil {
		return false, false
	}
	hit = qq.nread > 0
	if qq.rerr != nil {
		return hit, false
	}
	if !qq.in.empty() || qq.drops.Load() > 0 {
		qq.busy.Lock()
		qq.poll(p)
		qq.flushRun()
		qq.busy.Unlock()
		hit = true
	}
	return hit, true
}

// threadCPU is the CPU time the calling thread has used, in nanoseconds.
func threadCPU() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// nanotime is a monotonic clock reading in nanoseconds.
func nanotime() int64 { return int64(time.Since(clockBase)) }

// clockBase is nanotime's origin; it is never written after initialisation.
var clockBase = time.Now()

// pollersState is the part of Pollers the pollers themselves use.
type pollersState struct {
	mu      sync.Mutex
	running []*poller
}
