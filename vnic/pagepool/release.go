package pagepool

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Release tracks the completion of a Destroy: the analogue of the kernel's
// deferred page_pool_release_retry work.
type Release struct {
	prefix   string
	done     chan struct{}
	inflight atomic.Int64

	mu       sync.Mutex
	finished bool   // done is closed (or about to be, under mu)
	onDone   func() // OnDone's callback, run once when the release completes
}

// OnDone registers f to run once, when the release completes (the moment Done is closed: the
// kernel's page_pool_free, whose page_pool_unlist announces the pool's end). It is how an
// owner that lists destroyed pools learns, without polling, that one is gone. f runs on the
// goroutine that took the last buffer back (the releaser), after Done is closed, and must not
// block; it is never called from inside OnDone. OnDone returns false, without registering f,
// when the release had already completed (Destroy found nothing in flight, or the last buffer
// came back meanwhile): the caller then knows the pool is gone. A second OnDone replaces the
// first's callback. Any goroutine.
func (r *Release) OnDone(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return false
	}
	r.onDone = f
	return true
}

// complete closes done and runs the OnDone callback, once.
func (r *Release) complete() {
	r.mu.Lock()
	r.finished = true
	f := r.onDone
	r.onDone = nil
	close(r.done)
	r.inflight.Store(0) // after Done: InFlight() == 0 implies Done is closed
	r.mu.Unlock()
	if f != nil {
		f()
	}
}

// Done returns a channel closed when every buffer is back and every page has
// been released to Memory.
func (r *Release) Done() <-chan struct{} { return r.done }

// InFlight returns the number of buffers still out, as of the last release
// pass (Destroy itself, then every Put, every ReleaseInterval). It is 0 if and
// only if Done is closed. Any goroutine.
func (r *Release) InFlight() int {
	select {
	case <-r.done:
		return 0
	default:
		return int(r.inflight.Load())
	}
}

// Wait blocks until Done is closed (returning nil) or ctx ends. When ctx ends
// first it returns the leak report: an error wrapping unix.EBUSY and the
// context's cause, naming the pool and the number of buffers still out. The
// release keeps going in the background either way.
func (r *Release) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-r.done: // finished at the same moment: not a leak
		return nil
	default:
	}
	n := r.InFlight()
	return fmt.Errorf("%s: destroy incomplete: %d buffer(s) still in flight (leaked?), release continues in background: %w (%w)",
		r.prefix, n, unix.EBUSY, context.Cause(ctx))
}

// Destroy stops the pool (page_pool_destroy analogue). Owner only; no Alloc,
// AllocBulk, Recycle or Shrink after it (they panic). It drops the owner
// cache, takes back everything on the return ring and releases every page
// whose buffers are all back. If buffers are still in flight the pool stays
// alive: a background goroutine (the page_pool_release_retry analogue) takes
// back buffers as they are Put, retries every ReleaseInterval, logs a
// "stalled pool shutdown" warning every StallWarn, and completes when the last
// buffer returns, with all memory refunded to Memory. Memory still in flight
// is never freed. Idempotent: later calls return the same Release.
func (p *Pool) Destroy() *Release {
	if p.rel != nil {
		return p.rel
	}
	r := &Release{prefix: p.prefix, done: make(chan struct{})}
	p.rel = r
	// From here on the releaser keeps per-page counts of buffers out.
	for _, pg := range p.pages {
		pg.countRefs()
	}
	p.dead = true
	p.wake = make(chan struct{}, 1)
	p.phase.Store(phaseDestroying)
	clear(p.cache)
	p.cache = nil
	p.refill(math.MaxInt)
	for i := 0; i < len(p.pages); {
		if pg := p.pages[i]; pg.refs == 0 {
			p.releasePage(pg) // moves the last page to i
			continue
		}
		i++
	}
	if p.finishIfIdle(nil) {
		return r
	}
	go p.releaseLoop(time.Now())
	return r
}

// finishIfIdle publishes progress and, when no buffer is out, completes the
// release; beforeDone runs just before Done is closed. Owner or releaser only.
func (p *Pool) finishIfIdle(beforeDone func()) bool {
	n := p.inflight()
	p.publish() // before inflight: whoever sees the count sees the stats behind it
	if n > 0 {
		p.rel.inflight.Store(int64(n))
		return false
	}
	if len(p.pages) != 0 {
		panic(fmt.Sprintf("%s: internal error: no buffer in flight but %d pages still held", p.prefix, len(p.pages)))
	}
	p.phase.Store(phaseReleased)
	if beforeDone != nil {
		beforeDone()
	}
	p.rel.complete()
	return true
}

// releaseLoop is the deferred part of Destroy; it owns the pool's state.
func (p *Pool) releaseLoop(start time.Time) {
	retry := time.NewTicker(p.cfg.ReleaseInterval)
	defer retry.Stop()
	warn := time.NewTicker(p.cfg.StallWarn)
	defer warn.Stop()
	stalled := false
	for {
		warnNow := false
		select {
		case <-p.wake:
		case <-retry.C:
		case <-warn.C:
			warnNow = true
		}
		p.refill(math.MaxInt)
		if p.finishIfIdle(func() {
			if stalled {
				p.log.Info("stalled pool shutdown completed", "pool", p.cfg.Name,
					"seconds", int64(time.Since(start)/time.Second))
			}
		}) {
			return
		}
		if warnNow {
			stalled = true
			// Mirrors page_pool_release_retry's
			// "%s() stalled pool shutdown: id %u, %d inflight %d sec".
			p.log.Warn("stalled pool shutdown", "pool", p.cfg.Name, "inflight", p.inflight(),
				"seconds", int64(time.Since(start)/time.Second))
		}
	}
}
