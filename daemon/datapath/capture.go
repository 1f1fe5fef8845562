package datapath

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// Directions of a captured frame, as the member it passed sees it (tcpdump -Q): CaptureIn is a
// frame the segment delivered to the member, CaptureOut one the member put on the segment.
const (
	CaptureIn  CaptureDirection = 1 << iota // delivered to the member (a port's RX, an uplink's TX)
	CaptureOut                              // sent by the member (a port's TX, an uplink's RX)
)

// CaptureDirection is a set of directions.
type CaptureDirection uint8

// Defaults and bounds of a capture.
const (
	// DefaultCaptureQueue is how many frames a capture holds for a reader that is behind: a
	// burst of a few milliseconds at line rate; past it frames are dropped and counted.
	DefaultCaptureQueue = 1024
	// MaxCaptureQueue bounds CaptureConfig.Queue.
	MaxCaptureQueue = 1 << 16
	// CaptureQueueBytes bounds the bytes of frame data a capture holds, whatever its queue
	// length: 1,024 jumbo frames would otherwise hold 9 MiB.
	CaptureQueueBytes = 4 << 20
)

// CaptureConfig selects what a capture records.
type CaptureConfig struct {
	// Dirs are the directions recorded at a port (0: both). A segment capture records every
	// frame once, as it enters the segment (the sender's CaptureOut), and takes only 0.
	Dirs CaptureDirection
	// Snaplen is how many bytes of each frame are kept (<= 0: all).
	Snaplen int
	// Queue bounds the frames held for the reader (0: DefaultCaptureQueue).
	Queue int
}

// CapturedFrame is one frame a capture recorded.
type CapturedFrame struct {
	Time    time.Time
	Dir     CaptureDirection // CaptureIn or CaptureOut
	Member  string           // the port's name, or "uplink:DEV"
	OrigLen int              // the frame's length; Data holds at most Snaplen bytes of it
	Data    []byte
}

// CaptureStats are a capture's counters.
type CaptureStats struct {
	Matched uint64 // frames the capture saw
	Dropped uint64 // of those, not queued because the reader was behind (the queue was full)
}

// Capture records the frames a segment, or one member of it, carries into a bounded queue that
// a reader drains (Recv, Poll). Recording never waits: a frame that finds the queue full is
// dropped and counted, so a slow reader costs the wire the copy of the frames it does get and
// nothing else.
type Capture struct {
	set     *captureSet
	member  member // nil: the whole segment
	dirs    CaptureDirection
	snaplen int
	q       chan CapturedFrame
	queued  atomic.Int64 // bytes of frame data in q (CaptureQueueBytes)

	matched, dropped atomic.Uint64
	stopped          atomic.Bool
	end              chan struct{} // closed when the member is gone (endMember)
	endOnce          sync.Once
}

// captureSet is a segment's captures, an immutable snapshot behind an atomic pointer so that the
// per-frame check is one load when there are none.
type captureSet struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*Capture]
}

// record offers a frame that member m sent (CaptureOut) or received (CaptureIn) to the
// captures that want it. frame is only valid during the call. It is the hook the delivery path
// calls; with no capture it costs one atomic load.
func (cs *captureSet) record(m member, dir CaptureDirection, frame []byte) {
	l := cs.list.Load()
	if l == nil {
		return
	}
	for _, c := range *l {
		if c.member == nil && dir == CaptureOut || c.member == m && c.dirs&dir != 0 {
			c.offer(m, dir, frame)
		}
	}
}

func (cs *captureSet) add(c *Capture) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var l []*Capture
	if old := cs.list.Load(); old != nil {
		l = slices.Clone(*old)
	}
	l = append(l, c)
	cs.list.Store(&l)
}

// endMember ends the captures of member m, which is leaving for good (an endpoint that stops:
// its port is deleted, or the daemon stops). Their readers get what is queued, then Recv
// reports false and Ended true.
func (cs *captureSet) endMember(m member) {
	cs.mu.Lock()
	var ended []*Capture
	if old := cs.list.Load(); old != nil {
		for _, c := range *old {
			if c.member == m {
				ended = append(ended, c)
			}
		}
	}
	cs.mu.Unlock()
	for _, c := range ended {
		c.Stop()
		c.endOnce.Do(func() { close(c.end) })
	}
}

func (cs *captureSet) remove(c *Capture) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	old := cs.list.Load()
	if old == nil {
		return
	}
	l := slices.DeleteFunc(slices.Clone(*old), func(x *Capture) bool { return x == c })
	if len(l) == 0 {
		cs.list.Store(nil) // back to the one-load fast path
		return
	}
	cs.list.Store(&l)
}

// offer copies the frame into the queue, or drops and counts it when the queue is full (in
// frames or in bytes). The fullness checks come before the copy, so that a reader that is
// behind costs no allocation.
func (c *Capture) offer(m member, dir CaptureDirection, frame []byte) {
	c.matched.Add(1)
	n := len(frame)
	if c.snaplen > 0 && n > c.snaplen {
		n = c.snaplen
	}
	if len(c.q) == cap(c.q) || c.queued.Load()+int64(n) > CaptureQueueBytes {
		c.dropped.Add(1)
		return
	}
	f := CapturedFrame{Time: time.Now(), Dir: dir, Member: m.label(), OrigLen: len(frame), Data: slices.Clone(frame[:n])}
	c.queued.Add(int64(n))
	select {
	case c.q <- f:
	default:
		c.queued.Add(-int64(n))
		c.dropped.Add(1) // another sender filled it meanwhile
	}
}

// took accounts for a frame the reader took from the queue.
func (c *Capture) took(f CapturedFrame) CapturedFrame {
	c.queued.Add(-int64(len(f.Data)))
	return f
}

// Capture starts recording every frame that enters the segment, once each, from whichever port
// or uplink sent it. Errors: EINVAL for directions (a segment capture has one point of view) or
// an invalid queue size.
func (s *Segment) Capture(cfg CaptureConfig) (*Capture, error) {
	if cfg.Dirs != 0 {
		return nil, nlerr.New(unix.EINVAL, "a segment capture records each frame once, as it enters segment %s: a direction applies to a port", s.name)
	}
	return s.startCapture(nil, cfg)
}

// Capture starts recording the frames of the endpoint's port: those it sends (CaptureOut) and
// those the segment delivers to it (CaptureIn), before its RX ring, XDP or TAP see them. The
// capture ends (Ended) when the endpoint stops. Errors: EINVAL for an invalid direction or
// queue size.
func (e *Endpoint) Capture(cfg CaptureConfig) (*Capture, error) {
	if cfg.Dirs&^(CaptureIn|CaptureOut) != 0 {
		return nil, nlerr.New(unix.EINVAL, "unknown capture direction %#x", uint8(cfg.Dirs))
	}
	if cfg.Dirs == 0 {
		cfg.Dirs = CaptureIn | CaptureOut
	}
	return e.seg.startCapture(e, cfg)
}

func (s *Segment) startCapture(m member, cfg CaptureConfig) (*Capture, error) {
	if cfg.Queue < 0 || cfg.Queue > MaxCaptureQueue {
		return nil, nlerr.New(unix.EINVAL, "capture queue %d out of range 0..%d", cfg.Queue, MaxCaptureQueue)
	}
	if cfg.Queue == 0 {
		cfg.Queue = DefaultCaptureQueue
	}
	c := &Capture{set: &s.captures, member: m, dirs: cfg.Dirs, snaplen: cfg.Snaplen, q: make(chan CapturedFrame, cfg.Queue),
		end: make(chan struct{})}
	s.captures.add(c)
	return c, nil
}

// Stop ends the recording; frames already queued stay for Poll. Stopping twice is a no-op. A
// sender that was recording at the moment of Stop may still queue its frame.
func (c *Capture) Stop() {
	if c.stopped.Swap(true) {
		return
	}
	c.set.remove(c)
}

// Recv waits for the next queued frame. It reports false when ctx ends first, or when the
// capture has ended (Ended) and nothing is left in its queue.
func (c *Capture) Recv(ctx context.Context) (CapturedFrame, bool) {
	select {
	case f := <-c.q:
		return c.took(f), true
	case <-ctx.Done():
		return CapturedFrame{}, false
	case <-c.end:
		return c.Poll()
	}
}

// Ended reports whether the capture ended by itself: its port's endpoint stopped (the port was
// deleted, or the daemon is stopping).
func (c *Capture) Ended() bool {
	select {
	case <-c.end:
		return true
	default:
		return false
	}
}

// Poll returns a queued frame without waiting; false when none is queued.
func (c *Capture) Poll() (CapturedFrame, bool) {
	select {
	case f := <-c.q:
		return c.took(f), true
	default:
		return CapturedFrame{}, false
	}
}

// Stats returns the capture's counters.
func (c *Capture) Stats() CaptureStats {
	return CaptureStats{Matched: c.matched.Load(), Dropped: c.dropped.Load()}
}
