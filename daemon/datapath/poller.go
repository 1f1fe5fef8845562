package datapath

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/vnic"
)

// pollerQueues is how many queues one poller serves before a new one (if the bound allows it)
// takes the next: enough for the two ends of a round trip (port A's queue and port B's) and a
// few more, few enough that a pass over them stays within a few microseconds.
const pollerQueues = 4

// cpuTick is how often a poller reads its thread's CPU time, to charge it to the queues it
// serves (PollStats.CPUTime).
const cpuTick = time.Millisecond

// YieldAfter is how long a poller finds nothing before it yields its CPU (sched_yield), and how
// often it yields while it still finds nothing. A yield is a system call, as dear as the pass's
// epoll_pwait on a VM (about 3.5 µs here), so yielding after every empty pass doubles its cost;
// never yielding lets a task the scheduler did not switch to at its wake-up (a round trip's other
// end, on this CPU) wait for the poller's whole slice: BenchmarkRoundTripBinary's ping p99 went
// from 3× veth to 36×. Between the two, it bounds that wait to a few passes. (Yielding after
// every empty pass or after 20 µs could not be told apart there at a load of 10–15: ping p50
// 3.8–4.3× veth either way, with a little less CPU for UDP RR after 20 µs.)
const YieldAfter = 20 * time.Microsecond // exported for the models of this poller (bench/taprelay -poll, bench/uringfloor)

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
	set     *pollSet    // the TAP queues it serves, for one epoll_pwait per pass
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
			pl = &poller{ps: ps, set: newPollSet()}
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
	id      int32 // its entry's data in the poller's pollSet
	watched bool  // in the pollSet: read only when it reports the queue readable
	ready   bool  // the pass's epoll_pwait reported it readable
	streak  bool  // it was readable in the pass before too: a whole batch waits, not one frame
}

// run is the poller's goroutine. It keeps its thread (LockOSThread), so that the thread's CPU
// time is what polling cost, and yields the CPU only after passes that found nothing (see
// YieldAfter): there is always a processor it does not take (Pollers' bound), and the runtime
// preempts it like any goroutine.
//
// A pass asks the pollSet which TAP queues the kernel queued frames on (one epoll_pwait that
// never waits, whatever the number of queues) and reads only those, and the queues a frame was
// written to since the pass began (queue.wrote): a TAP write hands the frame to the stack in the
// writer's context, so a reply the kernel makes at once (an ICMP echo, an ARP reply, a TCP ACK)
// is queued before the write returns, and is read in the same pass rather than after the next
// epoll_pwait. A queue that was not readable in the pass before is read for one frame, not until
// EAGAIN: a request-response flow has one frame at a time, and the read that would find EAGAIN
// after it is a system call on the round trip's path; a queue readable pass after pass is read a
// whole batch. A pass after one that asked the set, if a queue was written to since it was last
// read, reads those queues without asking: a client on the poller's CPU, woken by the write of its
// reply, has sent its next request by the time the poller runs again. Each pass also drains the
// queues' RX inputs, which cost no system call to look at.
func (pl *poller) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer pl.ps.Release()
	set := pl.set
	defer set.close()
	var qs []polledQueue
	var nextID int32
	cpu0 := threadCPU()
	lastTick := nanotime()
	lastYield := lastTick
	skipped := false // the pass before did not ask the set
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
				nextID++
				q := polledQueue{qq: qq, lastHit: now, id: nextID, ready: true}
				q.watched = set.add(qq.tq, q.id)
				qs = append(qs, q)
			}
			clear(pl.added)
			pl.added = pl.added[:0]
			pl.pending.Store(false)
			pl.ps.mu.Unlock()
		}
		// A pass after one that asked the set starts with the queues written to since they
		// were last read, if any, without asking it: the frame they wait for is most often
		// there already (the next request of a client that ran on this CPU while the poller
		// wrote its reply), and a read that finds it costs what the epoll_pwait would have.
		// Every other pass asks, so no queue waits more than one pass behind them.
		marked := skipped || !anyWritten(qs)
		if marked {
			set.mark(qs)
		}
		skipped = !marked
		now := nanotime()
		found := false
		for i := 0; i < len(qs); i++ {
			q := &qs[i]
			qq := q.qq
			p := qq.txPort
			if qq.stopping() || p.NumRxQueues() == 0 || now-q.lastHit > int64(pollWindow(p.NAPIConfig(qq.idx))) {
				charge(now) // its share of the time since the last tick, while it is still served
				if q.watched {
					set.remove(qq.tq)
				}
				pl.giveBack(qq)
				qs[i] = qs[len(qs)-1]
				qs[len(qs)-1] = polledQueue{}
				qs = qs[:len(qs)-1]
				i--
				continue
			}
			reads := 0
			switch {
			case q.ready || !q.watched:
				reads = 1
				if q.streak || !q.watched {
					reads = budget
				}
			case qq.wrote.Load():
				reads = 1
				if q.streak && !marked {
					reads = budget // a busy queue, in a pass that did not ask the set
				}
			}
			if marked {
				q.streak = q.ready
			}
			q.ready = false
			if pl.poll(q, p, reads) {
				found = true
			}
		}
		// The queues written to after their turn in this pass (a reply to what a later queue
		// carried): one frame each, now rather than a pass later.
		for i := range qs {
			q := &qs[i]
			if q.watched && q.qq.wrote.Load() && pl.poll(q, q.qq.txPort, 1) {
				found = true
			}
		}
		if found {
			lastYield = now
		} else if now-lastYield >= int64(YieldAfter) {
			// Nothing for a while: let a task waiting for this CPU run (a round trip's
			// other end, often), as the kernel's napi_busy_loop stops on need_resched.
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			lastYield = now
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

// anyWritten reports whether a frame was written to a queue of qs in the set since its last read.
func anyWritten(qs []polledQueue) bool {
	for i := range qs {
		if qs[i].watched && qs[i].qq.wrote.Load() {
			return true
		}
	}
	return false
}

// poll is one poll of q: up to reads frames from its TAP queue (none: only its RX input), and
// one budget of its RX input. It reports whether that found work, and counts the poll.
func (pl *poller) poll(q *polledQueue, p *vnic.Port, reads int) bool {
	qq := q.qq
	if reads > 0 {
		qq.wrote.Store(false) // read from here on: a frame written after this is read later
	}
	hit, ok := qq.pollOnce(p, reads)
	qq.stats.polls.Add(1)
	if hit {
		qq.stats.pollHits.Add(1)
		q.lastHit = nanotime()
	}
	if !ok {
		q.lastHit = math.MinInt64 / 2 // an error or a detached queue: give it back next pass
	}
	return hit
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

// pollOnce is one poll of a queue handed to a poller: up to reads frames of what the kernel
// transmitted on the TAP queue (read without waiting; none when reads is 0) and one budget of the
// RX input. hit reports whether either found work; ok false means the TAP queue failed or was
// detached (its TX goroutine finds out and reports it when it reads again).
func (qq *queue) pollOnce(p *vnic.Port, reads int) (hit, ok bool) {
	if reads > 0 {
		qq.pollMax = reads
		if err := qq.tq.Control(qq.pollFn); err != nil {
			return false, false
		}
		hit = qq.nread > 0
		if qq.rerr != nil {
			return hit, false
		}
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

// pollEvents is how many readable queues one epoll_pwait of a pollSet reports; a poller serving
// more finds the others at the next pass (level-triggered: the kernel moves the entries it
// reported behind the others, ep_send_events).
const pollEvents = 16

// pollSet is a poller's epoll instance: the TAP queues it serves, level-triggered for EPOLLIN,
// so that one epoll_pwait with a zero timeout per pass says which of them the kernel queued
// frames on, where a read of each would cost a system call per queue. Nothing ever waits on it
// and it is in no netpoller: the kernel's ep_poll_callback only links the entry on the ready
// list. A TAP queue is in it from the hand-over until the poller gives it back (besides its
// parker's epoll, disarmed meanwhile); closing the TAP queue's descriptor removes it too. Only
// its poller uses it.
type pollSet struct {
	epfd int // -1 when epoll_create1 failed: the poller reads every queue every pass
	evs  [pollEvents]unix.EpollEvent
}

// newPollSet makes the epoll instance. It does not fail: without one (EMFILE, ENOMEM), add
// reports false and the poller reads every queue every pass, as it would without the set.
func newPollSet() *pollSet {
	s := &pollSet{epfd: -1}
	if fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC); err == nil {
		s.epfd = fd
	}
	return s
}

// add registers tq's descriptor with data id, and reports whether it did (false: no set, a
// closed queue, or epoll_ctl's error; the poller then reads tq at every pass).
func (s *pollSet) add(tq *tap.Queue, id int32) bool {
	if s.epfd < 0 {
		return false
	}
	var err error
	if cerr := tq.Control(func(fd int) {
		err = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: id})
	}); cerr != nil {
		return false
	}
	return err == nil
}

// remove deletes tq's entry. A closed queue's entry went with its descriptor.
func (s *pollSet) remove(tq *tap.Queue) {
	tq.Control(func(fd int) { unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, fd, nil) })
}

// mark sets ready on the queues of qs the kernel has queued frames on: one epoll_pwait that
// never waits (a raw system call, as rawRead: it cannot block). If it fails, every queue is
// marked.
func (s *pollSet) mark(qs []polledQueue) {
	if s.epfd < 0 || len(qs) == 0 {
		return
	}
	n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(s.epfd), uintptr(unsafe.Pointer(&s.evs[0])),
		uintptr(len(s.evs)), 0, 0, 0)
	if errno != 0 {
		for i := range qs {
			qs[i].ready = true
		}
		return
	}
	for _, ev := range s.evs[:n] {
		for i := range qs {
			if qs[i].id == ev.Fd {
				qs[i].ready = true
				break
			}
		}
	}
}

// close closes the epoll instance, with the entries left in it. The set is not used after.
func (s *pollSet) close() {
	if s.epfd >= 0 {
		unix.Close(s.epfd)
	}
}
