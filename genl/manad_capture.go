package genl

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// Capture (`manactl capture`): CAPTURE_START, CAPTURE_STOP and the CAPTURE_FRAME stream (see
// genl/wire/capture.go for the protocol).

// The capture structs, under the names the Backend uses.
type (
	CaptureRequest = wire.CaptureRequest
	CaptureFrame   = wire.CaptureFrame
	CaptureStats   = wire.CaptureStats
)

// MaxCapturesPerUID bounds the captures one uid runs at once, root's included: each copies
// frames out of the data path and holds a queue of them. A connection runs at most one capture.
const MaxCapturesPerUID = 4

// captureBatch is how many bytes of CAPTURE_FRAME messages one datagram carries at most (less
// when the connection's reply limit is lower): a reader that is behind catches up in few reads.
const captureBatch = 64 << 10

// CaptureSource is a running capture as the server drains it. Recording must never wait for
// the server: frames it is too slow for are the source's to drop and count.
type CaptureSource interface {
	// Info says what the target resolved to.
	Info() wire.CaptureInfo
	// Recv waits for the next frame; false when ctx ends first.
	Recv(ctx context.Context) (CaptureFrame, bool)
	// Poll returns a queued frame without waiting; false when none is queued.
	Poll() (CaptureFrame, bool)
	// Stop ends the recording (idempotent); queued frames stay for Poll.
	Stop()
	// Stats returns the counters: Matched and Dropped (Sent is the server's).
	Stats() CaptureStats
	// Ended says why the recording ended by itself (its port is gone), "" while it has not:
	// Recv then reports false once the queue is empty.
	Ended() string
}

// Policies of the capture requests. Both commands are admin only (GENL_UNS_ADMIN_PERM: EPERM
// before any parsing): another user's traffic is a privilege, as tcpdump needs CAP_NET_RAW.
var (
	captureStartPolicy = nlattr.NewSet(wire.AttrCaptureMax, map[uint16]nlattr.Policy{
		wire.AttrCaptureTarget:    nameStr,
		wire.AttrCaptureDirection: {Kind: nlattr.U8, Check: nlattr.CheckMax, Max: uint64(wire.CaptureOut)},
		wire.AttrCaptureSnaplen:   {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: wire.MaxSnaplen},
	})
	// CAPTURE_STOP takes no attributes: no policy (maxattr 0), as the kernel has none for such
	// an op.
	captureStopPolicy *nlattr.Set
)

// captureAdmission counts the captures running per uid (MaxCapturesPerUID).
type captureAdmission struct {
	mu    sync.Mutex
	byUID map[uint32]int
}

func (a *captureAdmission) acquire(uid uint32) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byUID == nil {
		a.byUID = map[uint32]int{}
	}
	if a.byUID[uid] >= MaxCapturesPerUID {
		return false
	}
	a.byUID[uid]++
	return true
}

func (a *captureAdmission) release(uid uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byUID[uid]--; a.byUID[uid] <= 0 {
		delete(a.byUID, uid)
	}
}

// connCapture is a connection's running capture and its writer goroutine.
type connCapture struct {
	src    CaptureSource
	cancel context.CancelFunc // ends the writer; it drains first unless the connection is gone
	done   chan struct{}      // closed when the writer has returned
	sent   uint64             // frames sent, read after done
	unsent uint64             // frames too long for one of the connection's datagrams, counted as dropped
}

// stats are the source's counters with the writer's.
func (cc *connCapture) stats() CaptureStats {
	st := cc.src.Stats()
	st.Sent = cc.sent
	st.Dropped += cc.unsent
	return st
}

// captureSlot is a connection's capture state: at most one capture. The request goroutine
// starts and stops it; the connection's end stops it.
type captureSlot struct {
	mu  sync.Mutex
	cur *connCapture
	wg  sync.WaitGroup
}

// active reports whether a capture runs: the connection is then not idle, though the client
// sends nothing.
func (cs *captureSlot) active() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.cur != nil
}

// wait waits for the writer goroutine of the connection's capture, if any.
func (cs *captureSlot) wait() { cs.wg.Wait() }

// CaptureStart is CAPTURE_START, for admins.
func (manadMsgs) CaptureStart() op {
	return manadDo(wire.CmdCaptureStart, "capture-start", true, captureStartPolicy, "StartCapture", (*Server).captureStart)
}

// CaptureStop is CAPTURE_STOP, for admins.
func (manadMsgs) CaptureStop() op {
	return manadDo(wire.CmdCaptureStop, "capture-stop", true, captureStopPolicy, "", (*Server).captureStop)
}

func (s *Server) captureStart(r *request) error {
	target, err := r.required(wire.AttrCaptureTarget, "capture target (a port or segment name)")
	if err != nil {
		return err
	}
	var req CaptureRequest
	off := nlattr.MsgHdrLen + nlattr.GenlHdrLen
	if err := wire.CaptureRequestTable.Decode(r.msg[off:], &req); err != nil {
		return err
	}
	if req.Target == "" {
		return nlattr.AttrError(unix.EINVAL, target, "empty capture target")
	}
	if s.cfg.Backend.StartCapture == nil {
		return nlattr.Errorf(unix.EOPNOTSUPP, "this server cannot capture")
	}
	c := r.c
	c.cap.mu.Lock()
	busy := c.cap.cur != nil
	c.cap.mu.Unlock()
	if busy {
		return nlattr.Errorf(unix.EBUSY, "this connection is capturing already: one capture per connection")
	}
	if !s.captures.acquire(c.caller.UID) {
		return nlattr.Errorf(unix.EUSERS, "too many captures for uid %d (limit %d)", c.caller.UID, MaxCapturesPerUID)
	}
	src, err := s.cfg.Backend.StartCapture(r.ctx, c.caller, req)
	if err != nil {
		s.captures.release(c.caller.UID)
		return err
	}
	info := src.Info()
	if err := r.reply(wire.CmdCaptureStart, func(b *nlattr.Builder) error {
		wire.CaptureInfoTable.Put(b, &info)
		return nil
	}); err != nil {
		src.Stop()
		s.captures.release(c.caller.UID)
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	cc := &connCapture{src: src, cancel: cancel, done: make(chan struct{})}
	c.cap.mu.Lock()
	c.cap.cur = cc
	c.cap.wg.Add(1)
	c.cap.mu.Unlock()
	s.log.Info("capture started", "target", info.Target, "kind", info.Kind, "snaplen", info.Snaplen,
		"direction", req.Direction, "uid", c.caller.UID, "pid", c.caller.PID)
	// The writer ends with the connection (ctx is the connection's) or at CAPTURE_STOP, and
	// then ends the capture.
	go func() {
		defer c.cap.wg.Done()
		defer s.endCapture(c, cc)
		defer close(cc.done)
		s.captureWriter(ctx, c, cc)
	}()
	return nil
}

// endCapture detaches cc from its connection once its writer is done: the recording stops and
// the uid's slot is free again. Idempotent.
func (s *Server) endCapture(c *conn, cc *connCapture) {
	c.cap.mu.Lock()
	defer c.cap.mu.Unlock()
	if c.cap.cur != cc {
		return
	}
	c.cap.cur = nil
	cc.cancel()
	cc.src.Stop()
	s.captures.release(c.caller.UID)
	st := cc.stats()
	s.log.Info("capture ended", "target", cc.src.Info().Target, "matched", st.Matched, "dropped", st.Dropped,
		"sent", st.Sent, "uid", c.caller.UID, "pid", c.caller.PID)
}

// captureStop ends the connection's capture: the recording stops, the frames still queued are
// sent, then the reply with the counters (then the ACK). ENOENT when no capture runs.
func (s *Server) captureStop(r *request) error {
	c := r.c
	c.cap.mu.Lock()
	cc := c.cap.cur
	c.cap.mu.Unlock()
	if cc == nil {
		return nlattr.Errorf(unix.ENOENT, "this connection runs no capture")
	}
	cc.src.Stop() // nothing more is queued: the writer's drain ends
	cc.cancel()
	select {
	case <-cc.done:
	case <-c.done():
		return errConnGone
	}
	st := cc.stats()
	s.endCapture(c, cc)
	return r.reply(wire.CmdCaptureStop, func(b *nlattr.Builder) error {
		wire.CaptureStatsTable.PutNest(b, wire.AttrCaptureStats, &st)
		return nil
	})
}

// captureWriter sends the capture's frames, as many as are queued per datagram, until ctx
// ends; then, unless the connection is gone, what is still queued. A datagram waits for the
// client as long as it takes (sendFrames); meanwhile frames queue in the source, which drops
// and counts them when its queue is full: the data path never waits for a client.
func (s *Server) captureWriter(ctx context.Context, c *conn, cc *connCapture) {
	var b nlattr.Builder
	limit := min(captureBatch, c.maxReply)
	pending := uint64(0)
	flush := func() bool {
		if b.Len() == 0 {
			return true
		}
		err := c.sendFrames(b.B)
		b.Reset()
		if err == nil {
			cc.sent += pending
		}
		pending = 0
		return err == nil
	}
	// add appends f's message, after sending the batch first when f would not fit in it.
	add := func(f *CaptureFrame) bool {
		if b.Len() > 0 && b.Len()+frameMsgLen(f) > limit && !flush() {
			return false
		}
		mark := b.Len()
		start := b.BeginMsg(manadID, 0, 0, 0)
		b.Genl(wire.CmdCaptureFrame, wire.FamilyVersion)
		wire.CaptureFrameTable.PutNest(&b, wire.AttrCaptureFrame, f)
		b.EndMsg(start)
		if b.Overflow || b.Len()-mark > c.maxReply {
			// Longer than the connection's reply limit (a tiny SO_SNDBUF): dropped and
			// counted, never sent broken.
			b.Truncate(mark)
			b.Overflow = false
			cc.unsent++
			return true
		}
		pending++
		return true
	}
	for {
		f, ok := cc.src.Recv(ctx)
		if !ok {
			if ctx.Err() == nil {
				s.captureEnded(c, cc, &b, flush)
				return
			}
			break
		}
		if !add(&f) {
			return
		}
		for b.Len() < limit {
			if f, ok = cc.src.Poll(); !ok || !add(&f) {
				break
			}
		}
		if !flush() {
			return
		}
	}
	select {
	case <-c.done():
		return
	default:
	}
	// CAPTURE_STOP: the recording has stopped; send what it queued before.
	for {
		f, ok := cc.src.Poll()
		if !ok {
			break
		}
		if !add(&f) {
			return
		}
	}
	flush()
}

// captureEnded sends the end notice of a capture whose source ended by itself, after the frames
// still batched: CAPTURE_STOP with sequence number 0, the counters and the reason.
func (s *Server) captureEnded(c *conn, cc *connCapture, b *nlattr.Builder, flush func() bool) {
	if !flush() {
		return
	}
	st := cc.stats()
	reason := cc.src.Ended()
	start := b.BeginMsg(manadID, 0, 0, 0)
	b.Genl(wire.CmdCaptureStop, wire.FamilyVersion)
	wire.CaptureStatsTable.PutNest(b, wire.AttrCaptureStats, &st)
	b.PutString(wire.AttrCaptureEnd, reason)
	b.EndMsg(start)
	_ = c.sendFrames(b.B)
	b.Reset()
	s.log.Info("capture ended by itself", "target", cc.src.Info().Target, "reason", reason)
}

// frameMsgLen bounds the length of f's CAPTURE_FRAME message: headers, the nest and its five
// attributes with their padding.
func frameMsgLen(f *CaptureFrame) int {
	return nlattr.MsgHdrLen + nlattr.GenlHdrLen + 4 + 12 + 8 + nlattr.Align(4+len(f.Member)+1) + 8 + nlattr.Align(4+len(f.Data))
}

// sendFrames writes a datagram of frames, waiting for the client without a deadline
// (transport.Conn.SendWait): a capture reader that is behind (a slow disk, a paused tcpdump)
// loses frames, which the source counts, not its connection, as a notification subscriber
// would.
func (c *conn) sendFrames(b []byte) error { return c.t.SendWait(b) }
