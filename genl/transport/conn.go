package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/busypoll"
	"github.com/manad/manad/genl/nlattr"
)

// ErrClosed is what Send and SendWait return once the connection is closed or a write to it
// failed (the connection is then dropped): the protocol stops answering it.
var ErrClosed = errors.New("genl: connection closed")

// Conn is one client connection: its caller, its multicast groups and its writer. Its methods
// are safe for concurrent use.
type Conn struct {
	s      *Server
	uc     *net.UnixConn   // nil for a Detached connection
	rc     syscall.RawConn // uc's; nil without uc
	caller Caller
	ctx    context.Context
	cancel context.CancelFunc
	// write writes one datagram: writeSocket, or a Detached connection's function.
	write func([]byte) error
	sess  Session // set once admitted, before the request loop starts

	groups atomic.Uint64 // bit i: member of multicast group i
	sendq  chan []byte   // notification datagrams
	wmu    sync.Mutex    // one deadline+write at a time
	once   sync.Once
	done   chan struct{}

	// maxReply is the largest datagram this connection can send (Config.MaxReply).
	maxReply int
	// lastDone is when the last request was answered (UnixNano): it tells an idle
	// connection (IdleTimeout).
	lastDone atomic.Int64
}

func newConn(s *Server, parent context.Context, uc *net.UnixConn, caller Caller) *Conn {
	ctx, cancel := context.WithCancel(parent)
	c := &Conn{
		s: s, uc: uc, caller: caller, ctx: ctx, cancel: cancel,
		sendq: make(chan []byte, s.cfg.SendQueue),
		done:  make(chan struct{}),
	}
	c.write = c.writeSocket
	if uc != nil {
		c.rc, _ = uc.SyscallConn()
	}
	c.maxReply = replyLimit(uc, s.cfg.MaxReply)
	c.lastDone.Store(time.Now().UnixNano())
	// Closing on cancellation covers the server stopping, whatever the
	// connection's goroutines are blocked on.
	context.AfterFunc(ctx, c.Close)
	return c
}

// Detached returns a connection of caller that has no socket and belongs to no Server: what
// is sent on it goes to write, whose error makes Send fail with ErrClosed. It is for driving
// a Handler's Session in-process, datagram by datagram (fuzzing, tests); it has the default
// limits, and Broadcast never reaches it.
func Detached(ctx context.Context, caller Caller, write func([]byte) error) *Conn {
	c := newConn(newServer(Config{}), ctx, nil, caller)
	c.write = write
	return c
}

// Caller returns the peer's credentials and network namespace, read when it connected.
func (c *Conn) Caller() Caller { return c.caller }

// Context returns the connection's context: cancelled when the connection closes or the
// server stops.
func (c *Conn) Context() context.Context { return c.ctx }

// Done returns a channel closed when the connection is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// MaxReply returns the largest datagram the connection can send: its SO_SNDBUF less the
// kernel's 32-byte reserve, lowered to Config.MaxReply when that is set. A longer one would
// fail with EMSGSIZE, so the protocol splits or refuses replies to fit.
func (c *Conn) MaxReply() int { return c.maxReply }

// SetGroup makes the connection a member of multicast group, or no longer one; Broadcast
// reaches the members. A connection that is a member of a group is never idle. Groups of 64
// and more do not exist: the caller checks group against the families it serves.
func (c *Conn) SetGroup(group uint32, member bool) {
	if group >= 64 {
		return
	}
	bit := uint64(1) << group
	for {
		old := c.groups.Load()
		nw := old &^ bit
		if member {
			nw = old | bit
		}
		if c.groups.CompareAndSwap(old, nw) {
			return
		}
	}
}

// replyLimit is the largest datagram uc can send: its SO_SNDBUF less the kernel's reserve,
// lowered to max when that is set.
func replyLimit(uc *net.UnixConn, max int) int {
	limit := defaultMaxReply
	if uc != nil {
		if rc, err := uc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil && v > sndbufReserve {
					limit = v - sndbufReserve
				}
			})
		}
	}
	if max > 0 && max < limit {
		limit = max
	}
	return limit
}

// Send writes one datagram synchronously, within the write deadline (WriteTimeout). It fails
// with ErrClosed when the connection is closed or the write failed; the connection is then
// dropped (and logged, unless the client had gone).
func (c *Conn) Send(b []byte) error {
	if err := c.write(b); err != nil {
		return ErrClosed
	}
	return nil
}

func (c *Conn) writeSocket(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// First without waiting: a datagram that fits in the socket's buffer (every reply to a
	// client that reads) is sent without arming the write deadline, whose timer would wake
	// another thread per reply. A SOCK_SEQPACKET send is all or nothing.
	if c.rc != nil {
		var werr error
		sent := false
		if err := c.rc.Write(func(fd uintptr) bool {
			_, werr = unix.Write(int(fd), b)
			sent = werr != unix.EAGAIN && werr != unix.EINTR
			return true
		}); err == nil && sent {
			if werr != nil {
				c.logDrop("genl: write to client failed, dropping connection", werr)
				c.Close()
			}
			return werr
		}
	}
	if err := c.uc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout)); err != nil {
		c.Close()
		return err
	}
	if _, err := c.uc.Write(b); err != nil {
		c.logDrop("genl: write to client failed, dropping connection", err)
		c.Close()
		return err
	}
	return nil
}

// SendWait writes a datagram waiting for the client without a deadline, for a stream the
// client asked for whose loss the protocol counts itself (captured frames): a stuck reader
// holds nothing but its own connection, and closing it (the client, or the server stopping)
// ends the wait. It fails with ErrClosed as Send does.
func (c *Conn) SendWait(b []byte) error {
	if c.uc == nil {
		return c.Send(b)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.uc.SetWriteDeadline(time.Time{}); err != nil {
		c.Close()
		return ErrClosed
	}
	if _, err := c.uc.Write(b); err != nil {
		c.logDrop("genl: write of captured frames failed, dropping connection", err)
		c.Close()
		return ErrClosed
	}
	return nil
}

// queue queues a notification datagram without blocking; a subscriber whose queue is full is
// dropped.
func (c *Conn) queue(b []byte) {
	select {
	case <-c.done:
	case c.sendq <- b:
	default:
		c.logDrop("genl: subscriber is not reading notifications, dropping it", nil, "queue", cap(c.sendq))
		c.s.subscriberDropped()
		c.Close()
	}
}

// logDrop logs that the connection is dropped: at debug level when the client is gone
// already (it closed first: nothing to see), else as a warning, at most once per
// refusalLogEvery (any user can make clients that stop reading).
func (c *Conn) logDrop(msg string, err error, args ...any) {
	args = append(args, "pid", c.caller.PID, "uid", c.caller.UID)
	if err != nil {
		args = append(args, "err", err)
	}
	if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
		c.s.log.Debug(msg, args...)
		return
	}
	ok, suppressed := c.s.drops.allow(time.Now())
	if ok {
		c.s.log.Warn(msg, append(args, "drops_not_logged", suppressed)...)
	}
}

// Close closes the connection: its context is cancelled, its socket closed, Done's channel
// closed. Idempotent.
func (c *Conn) Close() {
	c.once.Do(func() {
		close(c.done)
		c.cancel()
		if c.uc != nil {
			c.uc.Close()
		}
	})
}

// serve runs the connection: the notification writer, and the request loop, which reads each
// datagram and answers it on the same goroutine, in the order they came, so that replies keep the
// order of the requests as on a kernel netlink socket. Answering where the datagram was read
// saves a goroutine hand-off per request: with a reader goroutine handing datagrams to the
// request loop, the runtime woke a second thread for every request, and a GET's round trip to
// the manad binary cost 2.3× the kernel's. The client going away still cancels a request that
// waits for something (see reqCtx).
func (c *Conn) serve() {
	defer c.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.writer()
	}()
	c.readLoop()
	c.Close()
	wg.Wait()
	c.sess.Close()
}

// readLoop reads request datagrams until the connection ends or is idle for IdleTimeout, and
// answers each before reading the next. Each datagram is copied out of the read buffer: a
// session may keep slices of its request (a SET's values) past the answer.
func (c *Conn) readLoop() {
	limit := c.s.cfg.MaxMessage
	buf := make([]byte, limit+1)
	idle := c.s.cfg.IdleTimeout
	_ = c.uc.SetReadDeadline(time.Now().Add(idle))
	answered := 0
	hot := false // busy-poll before parking for the next request
	for {
		n, polled, err := 0, false, error(nil)
		if hot {
			n, polled, err = c.busyPoll(buf)
		}
		if !polled {
			n, err = c.uc.Read(buf)
		}
		arrived := time.Now()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Idle only when no group is joined, the session sends nothing by itself and
			// the last answer is IdleTimeout old; otherwise wait until it would be.
			wait := time.Until(time.Unix(0, c.lastDone.Load()).Add(idle))
			if c.groups.Load() != 0 || c.sess.Busy() {
				wait = idle
			}
			if wait > 0 {
				_ = c.uc.SetReadDeadline(time.Now().Add(wait))
				continue
			}
			c.Close() // before the log line, so that the line means the client sees EOF
			c.s.log.Debug("genl: closed idle connection", "idle_timeout", idle, "pid", c.caller.PID, "uid", c.caller.UID)
			return
		}
		if err != nil {
			c.cancel() // the client is gone
			return
		}
		rctx := &reqCtx{Context: c.ctx, c: c}
		if n > limit {
			c.s.log.Warn("genl: request datagram exceeds MaxMessage", "limit", limit, "pid", c.caller.PID)
			c.sess.Oversize(rctx, buf[:nlattr.MsgHdrLen], limit) // the header is all an answer needs
		} else {
			c.sess.Datagram(rctx, append([]byte(nil), buf[:n]...))
		}
		watched, ok := rctx.end()
		if !ok {
			return // the client went away meanwhile
		}
		prev := c.lastDone.Swap(time.Now().UnixNano())
		// Poll after the first answer (a client resolves the family, then asks) and after a
		// request that came within the window of the answer before it (the client is in a
		// loop); a connection used now and then parks at once.
		answered++
		hot = c.s.cfg.BusyPoll > 0 && c.s.busy.limit > 0 &&
			(answered == 1 || arrived.Sub(time.Unix(0, prev)) <= c.s.cfg.BusyPoll)
		// The idle deadline is not moved after every request: when it fires, the loop
		// above re-arms it from lastDone. Moving it would modify a runtime timer per
		// request, and that wakes another thread. A watcher used the deadline, though.
		if watched {
			_ = c.uc.SetReadDeadline(time.Now().Add(idle))
		}
	}
}

// busyPoll reads the next request datagram into buf without parking for up to BusyPoll, if a
// polling slot is free: the client in a request loop then finds this loop awake, and its round
// trip costs one wake-up (its own) instead of two. polled is false when nothing came (or no
// slot was free): the caller then reads as usual. An end of file is io.EOF, as from Read.
func (c *Conn) busyPoll(buf []byte) (n int, polled bool, err error) {
	if c.rc == nil || !c.s.busy.acquire() {
		return 0, false, nil
	}
	defer c.s.busy.release()
	polled = busypoll.Poll(c.rc, c.s.cfg.BusyPoll, busypoll.Goroutines, func(fd int) bool {
		n, err = unix.Read(fd, buf)
		return err != unix.EAGAIN && err != unix.EINTR
	})
	if !polled {
		c.s.busy.misses.Add(1)
		return 0, false, nil
	}
	c.s.busy.hits.Add(1)
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err != nil {
		n = 0
	}
	return n, true, err
}

// States of a reqCtx's watcher.
const (
	watchNone    = iota // not started
	watchRunning        // watchPeer runs
	watchEnded          // the request was answered: no watcher may start
)

// reqCtx is the context of one request: the connection's, whose Done channel also closes when
// the client hangs up while the request is in progress. The request loop reads nothing while it
// serves a request, so it cannot see the hang-up itself; the first call of Done — made only by
// code about to wait — starts watchPeer for the rest of the request. A request that waits for
// nothing (every GET of a ready port) so costs no goroutine and no wake-up. The channel Done
// returns is the connection context's own, so contexts derived from a reqCtx are cancelled
// through it without a goroutine of their own (context.propagateCancel).
type reqCtx struct {
	context.Context // the connection's
	c               *Conn
	mu              sync.Mutex // serializes starting the watcher with end
	state           atomic.Int32
	stop            atomic.Bool   // set by end: the watcher must return
	exited          chan struct{} // closed when the watcher has returned; set with state watchRunning
}

// Done starts the watcher on its first call and returns the connection context's Done channel.
func (r *reqCtx) Done() <-chan struct{} {
	if r.state.Load() == watchNone {
		r.mu.Lock()
		if r.state.Load() == watchNone {
			r.exited = make(chan struct{})
			r.state.Store(watchRunning)
			go func() {
				defer close(r.exited)
				r.c.watchPeer(&r.stop)
			}()
		}
		r.mu.Unlock()
	}
	return r.Context.Done()
}

// end is called by the request loop once the request is answered: it stops the watcher, if one
// ran, and reports whether one did (it changed the read deadline) and whether the connection goes
// on (false: the client went away).
func (r *reqCtx) end() (watched, ok bool) {
	r.mu.Lock()
	prev := r.state.Swap(watchEnded)
	r.mu.Unlock()
	if prev == watchRunning {
		r.stop.Store(true)
		// A read deadline in the past wakes the watcher from its wait for the socket.
		_ = r.c.uc.SetReadDeadline(time.Unix(1, 0))
		<-r.exited
	}
	return prev == watchRunning, r.Context.Err() == nil
}

// watchPeer waits, while the request loop is busy with a request and so not reading, for the
// client to hang up, and then cancels the connection's context, so that the backend abandons
// the request (as the kernel aborts a dump when the socket is released). It returns when stop
// is set (after a read deadline in the past wakes it) or the connection ends.
//
// A hang-up is seen with poll(POLLRDHUP), not by reading: requests the client sent meanwhile
// must stay queued for the loop, and a peek would find them before the end of file. The wait
// itself is the runtime poller's (RawConn.Read), so a watcher holds no thread.
func (c *Conn) watchPeer(stop *atomic.Bool) {
	rc, err := c.uc.SyscallConn()
	if err != nil {
		return
	}
	_ = c.uc.SetReadDeadline(time.Time{}) // the loop sets its own deadline again afterwards
	for !stop.Load() {
		gone := false
		err := rc.Read(func(fd uintptr) bool {
			if stop.Load() {
				return true
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			if n, err := unix.Poll(fds, 0); err == nil && n > 0 &&
				fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
				gone = true
				return true
			}
			return false
		})
		if gone {
			c.cancel()
			return
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return // closed
		}
	}
}

func (c *Conn) writer() {
	for {
		select {
		case <-c.done:
			return
		case b := <-c.sendq:
			if c.write(b) != nil {
				return
			}
		}
	}
}
