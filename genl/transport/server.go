// Package transport carries manad's generic netlink protocol over Unix SOCK_SEQPACKET
// connections: it listens (Listen, ActivationListener), reads each peer's credentials and
// network namespace, admits or refuses connections (MaxConns, MaxConnsPerUID), runs each
// connection's request loop with its busy polling, writes replies within a deadline, and fans
// notifications out to the members of a multicast group through bounded queues.
//
// It knows datagrams, not messages: a Handler (package genl's Server) opens a Session for each
// admitted connection and answers the datagrams the loop reads, as mdlayher/netlink's Conn
// carries the families that genetlink and the kernel define. Only the refusal of a connection
// (EUSERS) is answered here, from the request's header alone.
package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/admission"
	"github.com/manad/manad/genl/busypoll"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// Defaults for Config zero values: MaxConns, MaxConnsPerUID and IdleTimeout take package
// admission's (which daemon/config shares without linking the server), the others these.
const (
	defaultMaxMessage   = 64 << 10
	defaultWriteTimeout = 2 * time.Second
	defaultSendQueue    = 64
	rejectReadTimeout   = time.Second
	// minRejecting is how many refusals may be answered at once at least (MaxConns if more).
	minRejecting = 16
	// sndbufReserve is what unix_dgram_sendmsg keeps back from SO_SNDBUF: a datagram longer
	// than sk_sndbuf-32 fails with EMSGSIZE.
	sndbufReserve = 32
	// defaultMaxReply is the reply limit of a connection without a socket (Detached): the
	// default net.core.wmem_default less sndbufReserve.
	defaultMaxReply = 212992 - sndbufReserve
	// refusalLogEvery is how often refused connections are logged at most; the ones in
	// between are counted in the next line.
	refusalLogEvery = 10 * time.Second
	// MinReply is the smallest Config.MaxReply accepted: room for an NLMSG_ERROR with a
	// capped echo and an extack message.
	MinReply = 512
)

// Handler is the protocol a Server carries. Open is called once for each admitted connection,
// before its first datagram is read, and returns the Session that answers its datagrams.
type Handler interface {
	Open(c *Conn) Session
}

// Session is the protocol's side of one connection. Its methods are called from the
// connection's request loop, one at a time, except Busy, which the loop calls between
// requests too.
type Session interface {
	// Datagram answers request datagram d, which the session may keep (it is a copy). ctx is
	// the request's: cancelled when the client hangs up while it waits or the server stops.
	// The loop reads the next datagram only after Datagram returns, so that answers keep the
	// order of the requests.
	Datagram(ctx context.Context, d []byte)
	// Oversize answers a datagram longer than limit (Config.MaxMessage), whose excess the
	// socket discarded; hdr holds its first nlattr.MsgHdrLen bytes.
	Oversize(ctx context.Context, hdr []byte, limit int)
	// Busy reports whether the session sends without being asked (a capture): the connection
	// is then not idle.
	Busy() bool
	// Close is called once the connection is closed and its loops have ended; it returns when
	// the goroutines the session started have.
	Close()
}

// Observer is told about connections dropped for not reading their notifications, for
// metrics. It is called from the goroutine that queues the notification and must not block.
type Observer interface {
	SubscriberDropped()
}

// Config configures a Server.
type Config struct {
	// Handler answers the connections' datagrams; it is required.
	Handler    Handler
	AdminGroup int // -1 = none (only uid 0 is admin)
	// MaxConns bounds the connections served at once (0 → admission.DefaultMaxConns). Connections of
	// uid 0 are never refused (they count towards it); the last MaxConns/8 slots are reserved
	// for uid 0 and the admin group, so other users together hold at most MaxConns−MaxConns/8.
	// A refused connection gets EUSERS with an extack message on its first request.
	MaxConns int
	// MaxConnsPerUID bounds the connections of one uid other than 0 (0 → admission.DefaultMaxConnsPerUID).
	MaxConnsPerUID int
	// IdleTimeout closes a connection that has sent no request for that long, belongs to no
	// multicast group and whose Session is not Busy (0 → admission.DefaultIdleTimeout). A
	// request in progress is not idle.
	IdleTimeout time.Duration
	// BusyPoll is how long a connection's request loop polls its socket for the next request
	// after answering one, before it parks on the runtime's poller (0: it parks at once), as
	// the kernel's busy_read polls a device queue (genl/busypoll). A loop polls after its
	// first answer and after a request that came within BusyPoll of the answer before it;
	// half the processors' worth of connections (GOMAXPROCS/2, none on one processor) poll
	// at once, the others park.
	BusyPoll   time.Duration
	MaxMessage int // max request datagram; 0 → 64 KiB
	// MaxReply bounds one reply datagram (0, or more than the socket can carry: the
	// connection's SO_SNDBUF less the kernel's 32-byte reserve); see Conn.MaxReply.
	MaxReply int
	// WriteTimeout is the per-datagram write deadline of Send (0 → 2s); a client exceeding
	// it is dropped and logged.
	WriteTimeout time.Duration
	// SendQueue is the per-connection bounded queue of notification datagrams (0 → 64); a
	// subscriber whose queue is full is dropped and logged.
	SendQueue int
	Logger    *slog.Logger // nil → slog.Default()
	// Observer, when set, is told about dropped subscribers.
	Observer Observer
}

// Server accepts Unix SOCK_SEQPACKET connections and serves each with its own goroutines; a
// Server is safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	conns     map[*Conn]struct{}
	perUID    map[uint32]int // admitted connections by uid
	others    int            // admitted connections of users neither root nor admin
	rejecting int

	refusals logLimiter
	drops    logLimiter // clients dropped for not reading

	busy busyPollers
}

// New checks cfg and returns a Server. It fails with EINVAL when cfg.Handler is nil, a limit
// is negative, MaxReply is below MinReply or MaxMessage cannot hold a genl header.
func New(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, fmt.Errorf("genl: transport.Config.Handler is nil: %w", unix.EINVAL)
	}
	if cfg.MaxConns < 0 || cfg.MaxConnsPerUID < 0 || cfg.IdleTimeout < 0 || cfg.MaxMessage < 0 ||
		cfg.MaxReply < 0 || cfg.SendQueue < 0 || cfg.WriteTimeout < 0 || cfg.BusyPoll < 0 {
		return nil, fmt.Errorf("genl: negative limit in the server configuration: %w", unix.EINVAL)
	}
	if cfg.MaxReply != 0 && cfg.MaxReply < MinReply {
		return nil, fmt.Errorf("genl: MaxReply %d is smaller than %d bytes: %w", cfg.MaxReply, MinReply, unix.EINVAL)
	}
	if cfg.MaxMessage != 0 && cfg.MaxMessage < nlattr.MsgHdrLen+nlattr.GenlHdrLen {
		return nil, fmt.Errorf("genl: MaxMessage %d is smaller than a genl header: %w", cfg.MaxMessage, unix.EINVAL)
	}
	return newServer(cfg), nil
}

// newServer returns a Server for cfg with its zero values defaulted.
func newServer(cfg Config) *Server {
	if cfg.MaxConns == 0 {
		cfg.MaxConns = admission.DefaultMaxConns
	}
	if cfg.MaxConnsPerUID == 0 {
		cfg.MaxConnsPerUID = admission.DefaultMaxConnsPerUID
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = admission.DefaultIdleTimeout
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = defaultMaxMessage
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
		cfg:      cfg,
		log:      cfg.Logger,
		conns:    make(map[*Conn]struct{}),
		perUID:   make(map[uint32]int),
		refusals: logLimiter{every: refusalLogEvery},
		drops:    logLimiter{every: refusalLogEvery},
	}
	// Half the processors poll at most (one on 2 cores, none on one): the rest stay for the
	// data path and for the clients, whatever any number of clients in request loops do.
	s.busy.limit = int32(busypoll.Pollers())
	return s
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
			s.serveAccepted(ctx, uc)
		}()
	}
}

// serveAccepted reads the peer's credentials of one accepted connection and serves it.
func (s *Server) serveAccepted(ctx context.Context, uc *net.UnixConn) {
	caller, err := peerCaller(uc, s.cfg.AdminGroup)
	if err != nil {
		s.log.Warn("genl: cannot read peer credentials, closing connection", "err", err)
		uc.Close()
		return
	}
	if caller.NetNS == (wire.NetNS{}) {
		s.log.Warn("genl: peer's network namespace is unknown (pid not visible here); it will see no devices",
			"pid", caller.PID, "uid", caller.UID)
	}
	s.ServeConn(ctx, uc, caller)
}

// ServeConn admits the connection uc of caller, or refuses it, and serves it until it ends,
// the client hangs up or ctx ends; it closes uc. It is what Serve does with each connection
// after reading its peer's credentials, for a connection that comes from elsewhere (a
// socketpair whose peer is known). A refused connection gets EUSERS with an extack message
// on its first request and is closed; past max(MaxConns, 16) refusals in progress, it is
// closed at once.
func (s *Server) ServeConn(ctx context.Context, uc *net.UnixConn, caller Caller) {
	c := newConn(s, ctx, uc, caller)
	refusal := s.admit(c)
	if refusal == nil {
		c.sess = s.cfg.Handler.Open(c)
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
		c.Close()
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
func (s *Server) admit(c *Conn) *nlattr.Error {
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
func (s *Server) release(c *Conn) {
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
func (s *Server) logRefusal(c *Conn, e *nlattr.Error, answered bool) {
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
func (s *Server) reject(c *Conn, e *nlattr.Error) {
	defer c.Close()
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
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Broadcast queues datagram b, without blocking, to every admitted connection that is a
// member of multicast group (Conn.SetGroup) and whose caller's network namespace is ns, as
// the kernel delivers a netlink multicast to the group's sockets in the namespace. A member
// whose queue (SendQueue) is full is dropped and logged. b must not be changed afterwards.
// Calls are serialized: datagrams reach each connection in the order of the calls.
func (s *Server) Broadcast(group uint32, ns wire.NetNS, b []byte) {
	if group >= 64 {
		return
	}
	bit := uint64(1) << group
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.groups.Load()&bit != 0 && c.caller.NetNS == ns {
			c.queue(b)
		}
	}
}

// subscriberDropped tells the Observer, if one is configured, that a subscriber was dropped.
func (s *Server) subscriberDropped() {
	if s.cfg.Observer != nil {
		s.cfg.Observer.SubscriberDropped()
	}
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

// BusyPollStats counts the request loops' busy polls (Config.BusyPoll).
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
