package genl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// Defaults for ServerConfig zero values.
const (
	defaultMaxConns     = 256
	defaultMaxMessage   = 64 << 10
	defaultWriteTimeout = 2 * time.Second
	defaultSendQueue    = 64
	defaultDumpBudget   = 16 << 10 // bytes of dump messages per datagram
	rejectReadTimeout   = time.Second
)

// Server serves nlctrl, ethtool and manad generic netlink families over Unix
// SOCK_SEQPACKET connections. Each connection is served by its own
// goroutines; a Server is safe for concurrent use.
type Server struct {
	cfg        ServerConfig
	log        *slog.Logger
	families   map[uint16]*family
	ethtoolSeq atomic.Uint32 // ethnl_bcast_seq
	manadSeq   atomic.Uint32
	dumpBudget int
	global     globalStrings

	mu        sync.Mutex
	conns     map[*conn]struct{}
	rejecting int
}

// NewServer checks cfg and returns a Server. It fails with EINVAL when
// cfg.Backend is nil or a limit is negative.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Backend == nil {
		return nil, fmt.Errorf("genl: ServerConfig.Backend is nil: %w", unix.EINVAL)
	}
	if cfg.MaxConns < 0 || cfg.MaxMessage < 0 || cfg.SendQueue < 0 || cfg.WriteTimeout < 0 {
		return nil, fmt.Errorf("genl: negative limit in ServerConfig: %w", unix.EINVAL)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = defaultMaxConns
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
		log:        cfg.Logger,
		dumpBudget: defaultDumpBudget,
		conns:      make(map[*conn]struct{}),
	}
	s.families = map[uint16]*family{}
	for _, f := range []*family{s.nlctrlFamily(), s.ethtoolFamily(), s.manadFamily()} {
		s.families[f.id] = f
	}
	return s, nil
}

// Listen creates the SOCK_SEQPACKET socket at path: the parent directory is
// created 0755 if missing, a stale socket is replaced, the socket gets mode
// (documented default 0666: anyone may connect and GET; rights come from
// credentials) and, when gid >= 0, group gid. It fails with EADDRINUSE when
// a server already answers on path, and with EEXIST when path is not a
// socket.
func Listen(path string, mode os.FileMode, gid int) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("genl: create socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("genl: %s exists and is not a socket: %w", path, unix.EEXIST)
		}
		if c, err := net.DialTimeout("unixpacket", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("genl: a server is already listening on %s: %w", path, unix.EADDRINUSE)
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

// serveConn admits or rejects one accepted connection and serves it.
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
	c := newConn(s, ctx, uc, caller)
	s.mu.Lock()
	switch {
	case len(s.conns) < s.cfg.MaxConns:
		s.conns[c] = struct{}{}
		s.mu.Unlock()
	case s.rejecting < s.cfg.MaxConns:
		s.rejecting++
		s.mu.Unlock()
		s.reject(c)
		s.mu.Lock()
		s.rejecting--
		s.mu.Unlock()
		return
	default:
		s.mu.Unlock()
		s.log.Warn("genl: too many connections, closing without reply", "pid", caller.PID, "uid", caller.UID)
		c.close()
		return
	}
	c.serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// reject answers the first request of a connection over the MaxConns limit
// with EUSERS and a clear message, then closes it.
func (s *Server) reject(c *conn) {
	defer c.close()
	s.log.Warn("genl: connection limit reached, rejecting", "limit", s.cfg.MaxConns, "pid", c.caller.PID, "uid", c.caller.UID)
	buf := make([]byte, s.cfg.MaxMessage)
	_ = c.uc.SetReadDeadline(time.Now().Add(rejectReadTimeout))
	n, err := c.uc.Read(buf)
	if err != nil || n < nlattr.MsgHdrLen {
		return
	}
	h, _ := nlattr.ReadHeader(buf)
	req := buf[:h.Len]
	if int(h.Len) < nlattr.MsgHdrLen || int(h.Len) > n {
		// Echo only the header, with an nlmsg_len that says so.
		req = buf[:nlattr.MsgHdrLen]
		req[0], req[1], req[2], req[3] = nlattr.MsgHdrLen, 0, 0, 0
	}
	e := nlattr.Errorf(unix.EUSERS, "manad: too many connections (limit %d)", s.cfg.MaxConns)
	_ = c.send(nlattr.AppendAck(nil, req, h.PID, e.Errno, e, c.ackOptions()))
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

	groups atomic.Uint64 // bit i: member of multicast group i
	sendq  chan []byte   // notification datagrams
	wmu    sync.Mutex    // one deadline+write at a time
	once   sync.Once
	done   chan struct{}

	// Owned by the request goroutine.
	extAck, capAck bool
	scratch        nlattr.Builder
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
	// Closing on cancellation covers the server stopping, whatever the
	// connection's goroutines are blocked on.
	context.AfterFunc(ctx, c.close)
	return c
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
	if err := c.uc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout)); err != nil {
		c.close()
		return err
	}
	if _, err := c.uc.Write(b); err != nil {
		c.s.log.Warn("genl: write to client failed, dropping connection", "pid", c.caller.PID, "uid", c.caller.UID, "err", err)
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
	e := &nlattr.Error{Errno: unix.EINVAL, Msg: msg}
	_ = c.send(nlattr.AppendAck(nil, hdr, h.PID, e.Errno, e, c.ackOptions()))
}

// notify queues a notification datagram without blocking; a subscriber
// whose queue is full is dropped.
func (c *conn) notify(b []byte) {
	select {
	case <-c.done:
	case c.sendq <- b:
	default:
		c.s.log.Warn("genl: subscriber is not reading notifications, dropping it",
			"pid", c.caller.PID, "uid", c.caller.UID, "queue", cap(c.sendq))
		c.s.observer().SubscriberDropped()
		c.close()
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

// serve runs the connection: a reader goroutine (which also notices a
// client that went away while a request is in progress and cancels its
// context), the request loop, and the notification writer.
func (c *conn) serve() {
	defer c.close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.writer()
	}()
	in := make(chan datagram)
	go func() {
		defer wg.Done()
		defer close(in)
		c.reader(in)
	}()
	// Datagrams are answered here, in the order they came, so that replies keep the order of
	// the requests as on a kernel netlink socket.
	for d := range in {
		if d.oversize {
			c.oversize(d.b)
			continue
		}
		c.s.handleDatagram(c.ctx, c, d.b)
	}
	c.close()
	wg.Wait()
}

// datagram is one request datagram as the reader hands it on: its bytes, or, for one longer
// than MaxMessage, the leading bytes that hold its header.
type datagram struct {
	b        []byte
	oversize bool
}

func (c *conn) reader(in chan<- datagram) {
	limit := c.s.cfg.MaxMessage
	buf := make([]byte, limit+1)
	for {
		n, err := c.uc.Read(buf)
		if err != nil {
			c.cancel() // the client is gone: abandon its request in progress
			return
		}
		d := datagram{oversize: n > limit}
		if d.oversize {
			d.b = append([]byte(nil), buf[:nlattr.MsgHdrLen]...) // the header is all an answer needs
		} else {
			d.b = append([]byte(nil), buf[:n]...)
		}
		select {
		case in <- d:
		case <-c.done:
			return
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
