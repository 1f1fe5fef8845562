package genl

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/admission"
	"github.com/manad/manad/genl/busypoll"
	"github.com/manad/manad/genl/nlattr"
)

// Defaults for ServerConfig zero values: MaxConns, MaxConnsPerUID and IdleTimeout take package
// admission's (which daemon/config shares without linking the server), the others these.
const (
	defaultMaxMessage   = 64 << 10
	defaultWriteTimeout = 2 * time.Second
	defaultSendQueue    = 64
	defaultDumpBudget   = 16 << 10 // bytes of dump messages per datagram
	rejectReadTimeout   = time.Second
	// minRejecting is how many refusals may be answered at once at least (MaxConns if more).
	minRejecting = 16
	// sndbufReserve is what unix_dgram_sendmsg keeps back from SO_SNDBUF: a datagram longer
	// than sk_sndbuf-32 fails with EMSGSIZE.
	sndbufReserve = 32
	// defaultMaxReply is the reply limit of a connection without a socket (tests): the
	// default net.core.wmem_default less sndbufReserve.
	defaultMaxReply = 212992 - sndbufReserve
	// refusalLogEvery is how often refused connections are logged at most; the ones in
	// between are counted in the next line.
	refusalLogEvery = 10 * time.Second
)

// Server serves nlctrl, ethtool, manad and netdev generic netlink families over Unix
// SOCK_SEQPACKET connections. Each connection is served by its own
// goroutines; a Server is safe for concurrent use.
type Server struct {
	cfg        ServerConfig
	noOps      map[string]bool // the Backend's nil ops, by field name (nilOps)
	log        *slog.Logger
	families   map[uint16]*family
	ethtoolSeq atomic.Uint32 // ethnl_bcast_seq
	manadSeq   atomic.Uint32
	dumpBudget int
	global     globalStrings
	strsets    strsetCache
	featIdx    featureIndex // the kernel's feature names' bits (ethtool_features.go)

	mu        sync.Mutex
	conns     map[*conn]struct{}
	perUID    map[uint32]int // admitted connections by uid
	others    int            // admitted connections of users neither root nor admin
	rejecting int

	refusals logLimiter
	drops    logLimiter // clients dropped for not reading

	captures captureAdmission // running captures by uid (manad_capture.go)

	busy busyPollers
}

// busyPollers bounds the connections that busy-poll at once and counts what polling found.
type busyPollers struct {
	limit                 int32
	active, peak          atomic.Int32
	hits, misses, skipped atomic.Uint64
}

// acquire takes a polling slot, if one is free.
func (b *busyPollers) acquire() bool {
	for {
		n := b.active.Load()
		if n >= b.limit {
			b.skipped.Add(1)
			return false
		}
		if b.active.CompareAndSwap(n, n+1) {
			for p := b.peak.Load(); n+1 > p && !b.peak.CompareAndSwap(p, n+1); p = b.peak.Load() {
			}
			return true
		}
	}
}

func (b *busyPollers) release() { b.active.Add(-1) }

// BusyPollStats counts the request loops' busy polls (ServerConfig.BusyPoll).
type BusyPollStats struct {
	Hits    uint64 // polls that found the next request datagram, or the client's hang-up
	Misses  uint64 // polls that found nothing within the window, after which the loop parked
	Skipped uint64 // polls not started because every polling slot was taken
	Peak    int    // the most connections that polled at once
	Limit   int    // how many may poll at once
}

// BusyPolls returns the counts of the request loops' busy polls since the server started.
func (s *Server) BusyPolls() BusyPollStats {
	return BusyPollStats{Hits: s.busy.hits.Load(), Misses: s.busy.misses.Load(), Skipped: s.busy.skipped.Load(),
		Peak: int(s.busy.peak.Load()), Limit: int(s.busy.limit)}
}

// logLimiter lets one log line through per interval and counts the ones it holds back.
type logLimiter struct {
	mu         sync.Mutex
	every      time.Duration
	last       time.Time
	suppressed int
}

// allow reports whether to log now and how many lines were held back since the last one.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return false, 0
	}
	l.last, suppressed, l.suppressed = now, l.suppressed, 0
	return true, suppressed
}

// NewServer checks cfg and returns a Server. It fails with EINVAL when
// cfg.Backend lacks a device lookup (Devices, DeviceByIndex, DeviceByName)
// or a limit is negative.
func NewServer(cfg ServerConfig) (*Server, error) {
	noOps := nilOps(&cfg.Backend)
	for _, op := range []string{"Devices", "DeviceByIndex", "DeviceByName"} {
		if noOps[op] {
			return nil, fmt.Errorf("genl: ServerConfig.Backend.%s is nil: %w", op, unix.EINVAL)
		}
	}
	if cfg.MaxConns < 0 || cfg.MaxConnsPerUID < 0 || cfg.IdleTimeout < 0 || cfg.MaxMessage < 0 ||
		cfg.MaxReply < 0 || cfg.SendQueue < 0 || cfg.WriteTimeout < 0 || cfg.BusyPoll < 0 {
		return nil, fmt.Errorf("genl: negative limit in ServerConfig: %w", unix.EINVAL)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = admission.DefaultMaxConns
	}
	if cfg.MaxConnsPerUID == 0 {
		cfg.MaxConnsPerUID = admission.DefaultMaxConnsPerUID
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = admission.DefaultIdleTimeout
	}
	if cfg.MaxReply != 0 && cfg.MaxReply < minReply {
		return nil, fmt.Errorf("genl: MaxReply %d is smaller than %d bytes: %w", cfg.MaxReply, minReply, unix.EINVAL)
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = defaultMaxMessage
	}
	if cfg.MaxMessage < nlattr.MsgHdrLen+nlattr.GenlHdrLen {
		return nil, fmt.Errorf("genl: MaxMessage %d is smaller than a genl header: %w", cfg.MaxMessage, unix.EINVAL)
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = defaultWriteTimeout
	}
	if cfg.SendQueue == 0 {
		cfg.SendQueue = defaultSendQueue
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:        cfg,
		noOps:      noOps,
		log:        cfg.Logger,
		dumpBudget: defaultDumpBudget,
		conns:      make(map[*conn]struct{}),
		perUID:     make(map[uint32]int),
		refusals:   logLimiter{every: refusalLogEvery},
		drops:      logLimiter{every: refusalLogEvery},
	}
	// Half the processors poll at most (one on 2 cores, none on one): the rest stay for the
	// data path and for the clients, whatever any number of clients in request loops do.
	s.busy.limit = int32(busypoll.Pollers())
	s.families = map[uint16]*family{}
	for _, f := range []*family{nlctrlFamily(), ethtoolFamily(), manadFamily(), netdevFamily()} {
		s.families[f.id] = f
	}
	return s, nil
}

// nilOps returns the names of b's nil ops. The ops a message calls are named
// in its op (op.driver); the manad family's commands check them here, once,
// rather than each handler comparing its func with nil.
func nilOps(b *Backend) map[string]bool {
	v := reflect.ValueOf(b).Elem()
	out := map[string]bool{}
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Func && f.IsNil() {
			out[v.Type().Field(i).Name] = true
		}
	}
	return out
}

// Listen creates the SOCK_SEQPACKET socket at path: the parent directory is
// created 0755 if missing, a stale socket is replaced, the socket gets mode
// (documented default 0666: anyone may connect and GET; rights come from
// credentials) and, when gid >= 0, group gid. It fails with EADDRINUSE when
// a server already answers on path (see checkLiveness: a server being killed
// is waited for), and with EEXIST when path is not a socket.
func Listen(path string, mode os.FileMode, gid int) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("genl: create socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("genl: %s exists and is not a socket: %w", path, unix.EEXIST)
		}
		if err := checkLiveness(path); err != nil {
			return nil, err
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("genl: remove stale socket: %w", err)
		}
	}
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("genl: listen: %w", err)
	}
	if err := os.Chmod(path, mode.Perm()); err != nil {
		l.Close()
		return nil, fmt.Errorf("genl: chmod socket: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("genl: chown socket: %w", err)
		}
	}
	return l, nil
}

// ActivationListener returns the SOCK_SEQPACKET listener that systemd
// passed to the process (a socket unit with ListenSequentialPacket=), for
// Serve. It fails with an error wrapping ENOENT when there is none.
func ActivationListener() (*net.UnixListener, error) {
	ls, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("genl: socket activation: %w", err)
	}
	for _, l := range ls {
		if ul, ok := l.(*net.UnixListener); ok && ul.Addr().Network() == "unixpacket" {
			return ul, nil
		}
	}
	return nil, fmt.Errorf("genl: no SOCK_SEQPACKET listener passed by systemd: %w", unix.ENOENT)
}

// Serve accepts connections on l until ctx ends or l is closed, then closes
// every connection, waits for their goroutines and returns nil. Other accept
// failures are returned. Serve closes l when ctx ends.
func (s *Server) Serve(ctx context.Context, l *net.UnixListener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	var wg sync.WaitGroup
	defer func() {
		cancel()
		s.closeAll()
		wg.Wait()
	}()
	// Read the kernel's global string tables now rather than on the first
	// STRSET_GET (see globalStrings).
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.globalSet(0)
	}()
	backoff := 5 * time.Millisecond
	for {
		uc, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ECONNABORTED) || errors.Is(err, unix.ENOBUFS) {
				s.log.Warn("genl: accept failed, retrying", "err", err, "backoff", backoff)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			return fmt.Errorf("genl: accept: %w", err)
		}
		backoff = 5 * time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, uc)
		}()
	}
}

// serveConn admits or refuses one accepted connection and serves it.
func (s *Server) serveConn(ctx context.Context, uc *net.UnixConn) {
	caller, err := peerCaller(uc, s.cfg.AdminGroup)
	if err != nil {
		s.log.Warn("genl: cannot read peer credentials, closing connection", "err", err)
		uc.Close()
		return
	}
	if caller.NetNS == (NetNS{}) {
		s.log.Warn("genl: peer's network namespace is unknown (pid not visible here); it will see no devices",
			"pid", caller.PID, "uid", caller.UID)
	}
	s.serveCaller(ctx, uc, caller)
}

// serveCaller admits the connection of caller, or refuses it (reject), and serves it.
func (s *Server) serveCaller(ctx context.Context, uc *net.UnixConn, caller Caller) {
	c := newConn(s, ctx, uc, caller)
	refusal := s.admit(c)
	if refusal == nil {
		c.serve()
		s.release(c)
		return
	}
	s.mu.Lock()
	answer := s.rejecting < max(s.cfg.MaxConns, minRejecting)
	if answer {
		s.rejecting++
	}
	s.mu.Unlock()
	s.logRefusal(c, refusal, answer)
	if !answer {
		// Even refusals are bounded: past max(MaxConns, minRejecting) of them in
		// progress, close at once.
		c.close()
		return
	}
	s.reject(c, refusal)
	s.mu.Lock()
	s.rejecting--
	s.mu.Unlock()
}

// admit registers c, or returns why it is refused (EUSERS). uid 0 is always admitted; any
// other uid has at most MaxConnsPerUID connections; users outside the admin group together
// hold at most MaxConns less the slots reserved (MaxConns/8) for root and the admin group.
func (s *Server) admit(c *conn) *nlattr.Error {
	uid := c.caller.UID
	s.mu.Lock()
	defer s.mu.Unlock()
	reserved := s.cfg.MaxConns / 8
	switch {
	case uid == 0:
	case s.perUID[uid] >= s.cfg.MaxConnsPerUID:
		return nlattr.Errorf(unix.EUSERS, "manad: too many connections for uid %d (limit %d per user)", uid, s.cfg.MaxConnsPerUID)
	case c.caller.Admin && len(s.conns) >= s.cfg.MaxConns:
		return nlattr.Errorf(unix.EUSERS, "manad: too many connections (limit %d)", s.cfg.MaxConns)
	case !c.caller.Admin && (s.others >= s.cfg.MaxConns-reserved || len(s.conns) >= s.cfg.MaxConns):
		if reserved == 0 {
			return nlattr.Errorf(unix.EUSERS, "manad: too many connections (limit %d)", s.cfg.MaxConns)
		}
		return nlattr.Errorf(unix.EUSERS, "manad: too many connections (limit %d, of which %d reserved for root and the admin group)",
			s.cfg.MaxConns, reserved)
	}
	s.conns[c] = struct{}{}
	s.perUID[uid]++
	if !c.caller.Admin {
		s.others++
	}
	return nil
}

// release unregisters a connection admit registered.
func (s *Server) release(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if !c.caller.Admin {
		s.others--
	}
	if s.perUID[c.caller.UID]--; s.perUID[c.caller.UID] <= 0 {
		delete(s.perUID, c.caller.UID)
	}
}

// logRefusal logs a refused connection, at most once per refusalLogEvery, so that a flood of
// connection attempts cannot flood the log.
func (s *Server) logRefusal(c *conn, e *nlattr.Error, answered bool) {
	ok, suppressed := s.refusals.allow(time.Now())
	if !ok {
		return
	}
	s.log.Warn("genl: connection refused", "reason", e.Message, "answered", answered,
		"pid", c.caller.PID, "uid", c.caller.UID, "refusals_not_logged", suppressed)
}

// reject answers the first request of a refused connection with e (EUSERS and a message),
// then closes it. Only the request's header is read and echoed (NLM_F_CAPPED): a refused
// connection gets no more memory than that, whatever its datagram claims, and a header whose
// nlmsg_len is not 16 gets 16 so that clients find the TLVs.
func (s *Server) reject(c *conn, e *nlattr.Error) {
	defer c.close()
	var buf [nlattr.MsgHdrLen]byte
	_ = c.uc.SetReadDeadline(time.Now().Add(rejectReadTimeout))
	// On SOCK_SEQPACKET a short read takes the datagram's first bytes and discards the rest.
	n, err := c.uc.Read(buf[:])
	if err != nil || n < nlattr.MsgHdrLen {
		return
	}
	h, _ := nlattr.ReadHeader(buf[:])
	binary.NativeEndian.PutUint32(buf[:], nlattr.MsgHdrLen)
	ack := nlattr.AppendAck(nil, buf[:], h.PID, e.Errno, e, nlattr.AckOptions{ExtAck: true, CapAck: true})
	// Written directly: a refused client that went away is not worth a log line.
	_ = c.uc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_, _ = c.uc.Write(ack)
}

func (s *Server) closeAll() {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// conn is one client connection.
type conn struct {
	s      *Server
	uc     *net.UnixConn // nil in tests that drive the dispatcher directly
	caller Caller
	ctx    context.Context
	cancel context.CancelFunc
	// sink writes one datagram; tests replace it.
	sink func([]byte) error
	rc   syscall.RawConn // uc's; nil without uc

	groups atomic.Uint64 // bit i: member of multicast group i
	sendq  chan []byte   // notification datagrams
	wmu    sync.Mutex    // one deadline+write at a time
	once   sync.Once
	done   chan struct{}

	// maxReply is the largest datagram this connection can send (ServerConfig.MaxReply).
	maxReply int
	// lastDone is when the last request was answered (UnixNano): it tells an idle
	// connection (IdleTimeout).
	lastDone atomic.Int64

	// Owned by the request loop.
	extAck, capAck bool
	scratch        nlattr.Builder

	cap captureSlot // the connection's capture (manad_capture.go)
}

func newConn(s *Server, parent context.Context, uc *net.UnixConn, caller Caller) *conn {
	ctx, cancel := context.WithCancel(parent)
	c := &conn{
		s: s, uc: uc, caller: caller, ctx: ctx, cancel: cancel,
		sendq:  make(chan []byte, s.cfg.SendQueue),
		done:   make(chan struct{}),
		extAck: true,
	}
	c.sink = c.writeSocket
	if uc != nil {
		c.rc, _ = uc.SyscallConn()
	}
	c.maxReply = replyLimit(uc, s.cfg.MaxReply)
	c.lastDone.Store(time.Now().UnixNano())
	// Closing on cancellation covers the server stopping, whatever the
	// connection's goroutines are blocked on.
	context.AfterFunc(ctx, c.close)
	return c
}

// minReply is the smallest MaxReply accepted: room for an NLMSG_ERROR with a capped echo
// and an extack message.
const minReply = 512

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

func (c *conn) ackOptions() nlattr.AckOptions {
	return nlattr.AckOptions{ExtAck: c.extAck, CapAck: c.capAck}
}

// send writes one datagram synchronously, within the write deadline.
func (c *conn) send(b []byte) error {
	if err := c.sink(b); err != nil {
		return errConnGone
	}
	return nil
}

func (c *conn) writeSocket(b []byte) error {
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
				c.close()
			}
			return werr
		}
	}
	if err := c.uc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout)); err != nil {
		c.close()
		return err
	}
	if _, err := c.uc.Write(b); err != nil {
		c.logDrop("genl: write to client failed, dropping connection", err)
		c.close()
		return err
	}
	return nil
}

// sendMalformed answers a datagram that holds no complete message.
func (c *conn) sendMalformed(d []byte, msg string) {
	c.s.observer().Request("unknown", "unknown", unix.EINVAL)
	hdr := make([]byte, nlattr.MsgHdrLen)
	copy(hdr, d)
	h, _ := nlattr.ReadHeader(hdr)
	// Echo only what was understood: a 16-byte header.
	hdr[0], hdr[1], hdr[2], hdr[3] = nlattr.MsgHdrLen, 0, 0, 0
	e := &nlattr.Error{Errno: unix.EINVAL, Message: msg}
	_ = c.send(nlattr.AppendAck(nil, hdr, h.PID, e.Errno, e, c.ackOptions()))
}

// notify queues a notification datagram without blocking; a subscriber
// whose queue is full is dropped.
func (c *conn) notify(b []byte) {
	select {
	case <-c.done:
	case c.sendq <- b:
	default:
		c.logDrop("genl: subscriber is not reading notifications, dropping it", nil, "queue", cap(c.sendq))
		c.s.observer().SubscriberDropped()
		c.close()
	}
}

// logDrop logs that the connection is dropped: at debug level when the client is gone
// already (it closed first: nothing to see), else as a warning, at most once per
// refusalLogEvery (any user can make clients that stop reading).
func (c *conn) logDrop(msg string, err error, args ...any) {
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

func (c *conn) close() {
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
func (c *conn) serve() {
	defer c.close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.writer()
	}()
	c.readLoop()
	c.close()
	wg.Wait()
	c.cap.wait()
}

// readLoop reads request datagrams until the connection ends or is idle for IdleTimeout, and
// answers each before reading the next. Each datagram is copied out of the read buffer: a
// backend may keep slices of its request (a SET's values) past the answer.
func (c *conn) readLoop() {
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
			// Idle only when no group is joined and the last answer is IdleTimeout old;
			// otherwise wait until it would be.
			wait := time.Until(time.Unix(0, c.lastDone.Load()).Add(idle))
			if c.groups.Load() != 0 || c.cap.active() {
				wait = idle
			}
			if wait > 0 {
				_ = c.uc.SetReadDeadline(time.Now().Add(wait))
				continue
			}
			c.close() // before the log line, so that the line means the client sees EOF
			c.s.log.Debug("genl: closed idle connection", "idle_timeout", idle, "pid", c.caller.PID, "uid", c.caller.UID)
			return
		}
		if err != nil {
			c.cancel() // the client is gone
			return
		}
		rctx := &reqCtx{Context: c.ctx, c: c}
		if n > limit {
			c.oversize(buf[:nlattr.MsgHdrLen]) // the header is all an answer needs
		} else {
			c.s.handleDatagram(rctx, c, append([]byte(nil), buf[:n]...))
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
func (c *conn) busyPoll(buf []byte) (n int, polled bool, err error) {
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
	c               *conn
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
func (c *conn) watchPeer(stop *atomic.Bool) {
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

// oversize answers a datagram longer than MaxMessage (the excess was already discarded by the
// socket) with EMSGSIZE, honouring the connection's ACK options like any other reply.
func (c *conn) oversize(d []byte) {
	c.s.observer().Request("unknown", "unknown", unix.EMSGSIZE)
	c.s.log.Warn("genl: request datagram exceeds MaxMessage", "limit", c.s.cfg.MaxMessage, "pid", c.caller.PID)
	hdr := make([]byte, nlattr.MsgHdrLen)
	copy(hdr, d)
	h, _ := nlattr.ReadHeader(hdr)
	hdr[0], hdr[1], hdr[2], hdr[3] = nlattr.MsgHdrLen, 0, 0, 0
	e := nlattr.Errorf(unix.EMSGSIZE, "request datagram exceeds the %d-byte limit", c.s.cfg.MaxMessage)
	_ = c.send(nlattr.AppendAck(nil, hdr, h.PID, e.Errno, e, c.ackOptions()))
}

func (c *conn) writer() {
	for {
		select {
		case <-c.done:
			return
		case b := <-c.sendq:
			if c.sink(b) != nil {
				return
			}
		}
	}
}

// peerCaller reads the peer's credentials (SO_PEERCRED, SO_PEERGROUPS) and
// network namespace.
func peerCaller(uc *net.UnixConn, adminGroup int) (Caller, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *unix.Ucred
	var groups []uint32
	var credErr, groupsErr, nsErr error
	var ns NetNS
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil {
			groups, groupsErr = peerGroups(int(fd))
		}
		ns, nsErr = socketNetNS(int(fd))
	}); err != nil {
		return Caller{}, err
	}
	if credErr != nil {
		return Caller{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	if groupsErr != nil {
		groups, groupsErr = procGroups(cred.Pid)
		if groupsErr != nil {
			groups = nil
		}
	}
	c := Caller{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}
	c.Admin = cred.Uid == 0 || (adminGroup >= 0 &&
		(cred.Gid == uint32(adminGroup) || slices.Contains(groups, uint32(adminGroup))))
	switch {
	case nsErr == nil:
		c.NetNS = ns
	case cred.Pid > 0:
		// SIOCGSKNS needs CAP_NET_ADMIN over the namespace; without it fall back to the
		// namespace of the peer process's main thread.
		var st unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", cred.Pid), &st); err == nil {
			c.NetNS = NetNS{Dev: uint64(st.Dev), Ino: st.Ino}
		}
	}
	return c, nil
}

// socketNetNS returns the network namespace of the accepted socket fd. unix_stream_connect
// creates the server end of a connection in the namespace of the connecting socket, so this is
// the namespace the client's socket was created in — what the kernel scopes an ethtool request
// by (sock_net of the netlink socket) — even when the client is a thread that entered another
// namespace than its process's (SIOCGSKNS, Linux 4.9+).
func socketNetNS(fd int) (NetNS, error) {
	nsfd, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err != nil {
		return NetNS{}, err
	}
	defer unix.Close(nsfd)
	var st unix.Stat_t
	if err := unix.Fstat(nsfd, &st); err != nil {
		return NetNS{}, err
	}
	return NetNS{Dev: uint64(st.Dev), Ino: st.Ino}, nil
}

// peerGroups reads SO_PEERGROUPS: the supplementary groups of the task that
// connected, captured at connect time.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 32)
	for range 4 {
		l := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
		switch e {
		case 0:
			return buf[:l/4], nil
		case unix.ERANGE:
			buf = make([]uint32, l/4+1)
		default:
			return nil, e
		}
	}
	return nil, unix.ERANGE
}

// procGroups reads the Groups: line of /proc/<pid>/status.
func procGroups(pid int32) ([]uint32, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Groups:")
		if !ok {
			continue
		}
		var gs []uint32
		for _, g := range strings.Fields(rest) {
			v, err := strconv.ParseUint(g, 10, 32)
			if err == nil {
				gs = append(gs, uint32(v))
			}
		}
		return gs, nil
	}
	return nil, sc.Err()
}
