package transport_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/transport"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo is the smallest protocol: each datagram is sent back as it came; "join N" also makes
// the connection a member of group N first. What the transport did is recorded.
type echo struct {
	busy   atomic.Bool  // what every session's Busy reports
	closed atomic.Int32 // sessions closed
	mu     sync.Mutex
	opened []transport.Caller
}

func (h *echo) Open(c *transport.Conn) transport.Session {
	h.mu.Lock()
	h.opened = append(h.opened, c.Caller())
	h.mu.Unlock()
	return &echoSession{h: h, c: c}
}

type echoSession struct {
	h *echo
	c *transport.Conn
}

func (e *echoSession) Datagram(_ context.Context, d []byte) {
	if g, ok := strings.CutPrefix(string(d), "join "); ok {
		n, err := strconv.Atoi(g)
		if err == nil {
			e.c.SetGroup(uint32(n), true)
		}
	}
	_ = e.c.Send(d)
}

func (e *echoSession) Oversize(_ context.Context, hdr []byte, limit int) {
	_ = e.c.Send(fmt.Appendf(nil, "oversize %d %d", len(hdr), limit))
}

func (e *echoSession) Busy() bool { return e.h.busy.Load() }
func (e *echoSession) Close()     { e.h.closed.Add(1) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newServer returns a Server for h with cfg's limits and a logger that writes nowhere.
func newServer(t testing.TB, h transport.Handler, cfg transport.Config) *transport.Server {
	t.Helper()
	cfg.Handler, cfg.AdminGroup, cfg.Logger = h, -1, quiet()
	s, err := transport.New(cfg)
	require.NoError(t, err)
	return s
}

// serveListener serves s on a fresh socket until the end of the test and returns its path.
func serveListener(t testing.TB, s *transport.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.sock")
	l, err := transport.Listen(path, 0o600, -1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-served)
	})
	return path
}

// serveConn serves one end of a socketpair as a connection of caller (ServeConn) until the end
// of the test and returns the peer's end.
func serveConn(t testing.TB, s *transport.Server, caller transport.Caller) *net.UnixConn {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	ends := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "seqpacket")
		c, err := net.FileConn(f)
		f.Close()
		require.NoError(t, err)
		ends[i] = c.(*net.UnixConn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeConn(ctx, ends[1], caller)
	}()
	t.Cleanup(func() {
		cancel()
		ends[0].Close()
		<-done
	})
	return ends[0]
}

// roundTrip sends d and returns the next datagram that comes back.
func roundTrip(t testing.TB, c *net.UnixConn, d []byte) []byte {
	t.Helper()
	_, err := c.Write(d)
	require.NoError(t, err)
	return read(t, c)
}

func read(t testing.TB, c *net.UnixConn) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	buf := make([]byte, 1<<16)
	n, err := c.Read(buf)
	require.NoError(t, err)
	return buf[:n]
}

// header is a netlink request header (16 bytes) with seq.
func header(seq uint32) []byte {
	b := make([]byte, nlattr.MsgHdrLen)
	binary.NativeEndian.PutUint32(b[0:], nlattr.MsgHdrLen)
	binary.NativeEndian.PutUint16(b[4:], 0x13)
	binary.NativeEndian.PutUint16(b[6:], nlattr.FlagRequest)
	binary.NativeEndian.PutUint32(b[8:], seq)
	return b
}

// TestServeCredentials: a connection accepted from the listener is opened with the peer's
// credentials and the network namespace its socket was created in, and its datagrams reach
// the session in order.
func TestServeCredentials(t *testing.T) {
	h := &echo{}
	path := serveListener(t, newServer(t, h, transport.Config{}))
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	defer c.Close()
	for i := range 3 {
		d := fmt.Appendf(nil, "request %d", i)
		assert.Equal(t, d, roundTrip(t, c, d))
	}
	var st unix.Stat_t
	require.NoError(t, unix.Stat("/proc/self/ns/net", &st))
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.opened, 1)
	got := h.opened[0]
	assert.Equal(t, int32(os.Getpid()), got.PID)
	assert.Equal(t, uint32(os.Getuid()), got.UID)
	assert.Equal(t, uint32(os.Getgid()), got.GID)
	assert.Equal(t, os.Getuid() == 0, got.Admin, "only uid 0 is admin without an admin group")
	assert.Equal(t, wire.NetNS{Dev: uint64(st.Dev), Ino: st.Ino}, got.NetNS)
}

// TestAdmission: uid 0 is never refused; another uid has MaxConnsPerUID connections; users
// outside the admin group leave MaxConns/8 slots to root and the group. A refused connection
// gets EUSERS with the reason on its first request, no session, and is closed; a released
// slot is free again.
func TestAdmission(t *testing.T) {
	h := &echo{}
	s := newServer(t, h, transport.Config{MaxConns: 8, MaxConnsPerUID: 2})
	ok := func(caller transport.Caller) *net.UnixConn {
		t.Helper()
		c := serveConn(t, s, caller)
		assert.Equal(t, []byte("hello"), roundTrip(t, c, []byte("hello")), "uid %d admin=%v refused", caller.UID, caller.Admin)
		return c
	}
	refused := func(caller transport.Caller, want string) {
		t.Helper()
		c := serveConn(t, s, caller)
		ack := roundTrip(t, c, header(7))
		require.GreaterOrEqual(t, len(ack), 36)
		assert.Equal(t, uint16(nlattr.MsgError), binary.NativeEndian.Uint16(ack[4:]))
		assert.Equal(t, uint32(7), binary.NativeEndian.Uint32(ack[8:]), "seq echoed")
		assert.Equal(t, unix.EUSERS, unix.Errno(-int32(binary.NativeEndian.Uint32(ack[16:]))))
		assert.Contains(t, string(ack), want)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err := c.Read(make([]byte, 64))
		assert.ErrorIs(t, err, io.EOF, "a refused connection is closed")
	}
	first := ok(transport.Caller{UID: 1000})
	ok(transport.Caller{UID: 1000})
	refused(transport.Caller{UID: 1000}, "too many connections for uid 1000 (limit 2 per user)")
	// A connection that ends has its session closed and frees its slot.
	closed := h.closed.Load()
	first.Close()
	require.Eventually(t, func() bool {
		c := serveConn(t, s, transport.Caller{UID: 1000})
		_, err := c.Write([]byte("hello"))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, err := c.Read(make([]byte, 64))
		return err == nil && n == 5 // a refused connection is closed: EOF
	}, 10*time.Second, 5*time.Millisecond, "the slot of a closed connection is not free again")
	assert.Equal(t, closed+1, h.closed.Load())
	for uid := uint32(1001); uid < 1006; uid++ {
		ok(transport.Caller{UID: uid})
	}
	// 7 of 8 held by users outside the admin group: the last slot is reserved.
	refused(transport.Caller{UID: 2000}, "of which 1 reserved for root and the admin group")
	ok(transport.Caller{UID: 3000, Admin: true})
	refused(transport.Caller{UID: 3001, Admin: true}, "too many connections (limit 8)")
	for range 3 {
		ok(transport.Caller{UID: 0, Admin: true})
	}
	h.mu.Lock()
	opened := len(h.opened)
	h.mu.Unlock()
	assert.Equal(t, 12, opened, "sessions opened for admitted connections only")
}

// TestBroadcast: a datagram reaches the members of its group in its namespace, and no one
// else; a member that does not read is dropped once its queue is full, and told to the
// Observer.
func TestBroadcast(t *testing.T) {
	obs := &drops{}
	s := newServer(t, &echo{}, transport.Config{SendQueue: 2, Observer: obs})
	ns1, ns2 := wire.NetNS{Dev: 1, Ino: 1}, wire.NetNS{Dev: 1, Ino: 2}
	member := serveConn(t, s, transport.Caller{UID: 1, NetNS: ns1})
	other := serveConn(t, s, transport.Caller{UID: 2, NetNS: ns1})
	elsewhere := serveConn(t, s, transport.Caller{UID: 3, NetNS: ns2})
	roundTrip(t, member, []byte("join 3"))
	roundTrip(t, other, []byte("join 4"))
	roundTrip(t, elsewhere, []byte("join 3"))

	s.Broadcast(3, ns1, []byte("to 3 in ns1"))
	s.Broadcast(4, ns2, []byte("to 4 in ns2"))
	s.Broadcast(3, ns1, []byte("again"))
	assert.Equal(t, []byte("to 3 in ns1"), read(t, member))
	assert.Equal(t, []byte("again"), read(t, member), "in the order of the calls")
	for _, c := range []*net.UnixConn{other, elsewhere} {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
		_, err := c.Read(make([]byte, 64))
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a datagram reached a connection outside the group or namespace")
	}

	// member stops reading: its socket buffer fills, then its queue of 2, then it is dropped.
	big := make([]byte, 32<<10)
	require.Eventually(t, func() bool {
		s.Broadcast(3, ns1, big)
		return obs.n.Load() > 0
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, int64(1), obs.n.Load())
}

type drops struct{ n atomic.Int64 }

func (d *drops) SubscriberDropped() { d.n.Add(1) }

// TestIdle: a connection with no request for IdleTimeout is closed, unless it is a member of a
// group or its session is Busy.
func TestIdle(t *testing.T) {
	h := &echo{}
	s := newServer(t, h, transport.Config{IdleTimeout: 50 * time.Millisecond})
	idle := serveConn(t, s, transport.Caller{UID: 1})
	joined := serveConn(t, s, transport.Caller{UID: 2})
	roundTrip(t, joined, []byte("join 2"))
	require.NoError(t, idle.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := idle.Read(make([]byte, 64))
	assert.ErrorIs(t, err, io.EOF, "idle connection not closed")
	assert.Equal(t, []byte("still here"), roundTrip(t, joined, []byte("still here")))

	h.busy.Store(true)
	busy := serveConn(t, s, transport.Caller{UID: 3})
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, []byte("busy"), roundTrip(t, busy, []byte("busy")), "a Busy session's connection was closed")
}

// TestOversize: a datagram longer than MaxMessage goes to Session.Oversize with its header and
// the limit, and the connection goes on.
func TestOversize(t *testing.T) {
	s := newServer(t, &echo{}, transport.Config{MaxMessage: 64})
	c := serveConn(t, s, transport.Caller{UID: 1})
	assert.Equal(t, "oversize 16 64", string(roundTrip(t, c, make([]byte, 65))))
	d := make([]byte, 64)
	assert.Equal(t, d, roundTrip(t, c, d), "a datagram of exactly MaxMessage is a request")
}

// TestDetached: a Detached connection sends to its function; once that fails, Send is
// ErrClosed.
func TestDetached(t *testing.T) {
	var got [][]byte
	fail := false
	c := transport.Detached(t.Context(), transport.Caller{UID: 5}, func(b []byte) error {
		if fail {
			return unix.EPIPE
		}
		got = append(got, b)
		return nil
	})
	require.NoError(t, c.Send([]byte("a")))
	require.NoError(t, c.SendWait([]byte("b")))
	fail = true
	assert.ErrorIs(t, c.Send([]byte("c")), transport.ErrClosed)
	assert.Equal(t, [][]byte{[]byte("a"), []byte("b")}, got)
	assert.Equal(t, uint32(5), c.Caller().UID)
	assert.Positive(t, c.MaxReply())
}

// TestNewChecks: New refuses a configuration it cannot serve with EINVAL.
func TestNewChecks(t *testing.T) {
	for name, cfg := range map[string]transport.Config{
		"no handler":      {AdminGroup: -1},
		"negative":        {Handler: &echo{}, MaxConns: -1},
		"tiny MaxReply":   {Handler: &echo{}, MaxReply: transport.MinReply - 1},
		"tiny MaxMessage": {Handler: &echo{}, MaxMessage: nlattr.MsgHdrLen},
	} {
		_, err := transport.New(cfg)
		assert.ErrorIs(t, err, unix.EINVAL, name)
	}
}

// TestListen: the socket gets its mode and directory; a live one is refused, a stale one
// replaced, a file that is no socket refused and left.
func TestListen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "m.sock")
	l, err := transport.Listen(path, 0o660, -1)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o660 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode %v, %v", fi.Mode(), err)
	}
	di, _ := os.Stat(filepath.Dir(path))
	if di.Mode().Perm() != 0o755 {
		t.Errorf("dir mode %v", di.Mode())
	}
	// Live: refused.
	_, err = transport.Listen(path, 0o666, -1)
	assert.ErrorIs(t, err, unix.EADDRINUSE, "second Listen")
	// Stale (closed without unlinking): replaced.
	l.SetUnlinkOnClose(false)
	l.Close()
	l2, err := transport.Listen(path, 0o666, os.Getgid())
	require.NoError(t, err, "stale socket not replaced")
	l2.Close()
	// Not a socket: refused, untouched.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	_, err = transport.Listen(file, 0o666, -1)
	assert.ErrorIs(t, err, unix.EEXIST, "regular file")
}

// TestListenLiveness: Listen refuses a socket a server answers on at once, naming its pid; a
// socket that accepts connections but does not answer (a server being killed, whose socket
// stays open until its last thread exits) is probed again until it lets go, then replaced; one
// that never lets go is refused after the wait, saying that nothing answers.
func TestListenLiveness(t *testing.T) {
	t.Run("answering", func(t *testing.T) {
		path := serveListener(t, newServer(t, &echo{}, transport.Config{}))
		_, err := transport.Listen(path, 0o666, -1)
		assert.ErrorIs(t, err, unix.EADDRINUSE, "Listen on a live server's socket = %v; want EADDRINUSE naming pid %d", err, os.Getpid())
		assert.Contains(t, err.Error(), "already listening", "Listen on a live server's socket = %v; want EADDRINUSE naming pid %d", err, os.Getpid())
		assert.Contains(t, err.Error(), "(pid "+strconv.Itoa(os.Getpid())+")", "Listen on a live server's socket = %v; want EADDRINUSE naming pid %d", err, os.Getpid())
	})

	// mute listens on a fresh path without serving: connections succeed, nothing answers.
	mute := func(t *testing.T) (string, *net.UnixListener) {
		path := filepath.Join(t.TempDir(), "m.sock")
		l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
		require.NoError(t, err)
		l.SetUnlinkOnClose(false) // as a killed process leaves it
		t.Cleanup(func() { l.Close() })
		return path, l
	}

	t.Run("dying", func(t *testing.T) {
		path, old := mute(t)
		go func() {
			time.Sleep(time.Second)
			old.Close() // the dying server's last thread exits
		}()
		l, err := transport.Listen(path, 0o666, -1)
		require.NoError(t, err, "Listen after the old server let go")
		l.Close()
	})

	t.Run("stuck", func(t *testing.T) {
		path, _ := mute(t)
		start := time.Now()
		_, err := transport.Listen(path, 0o666, -1)
		assert.ErrorIs(t, err, unix.EADDRINUSE, "Listen on a socket nothing answers = %v; want EADDRINUSE saying nothing answers", err)
		assert.Contains(t, err.Error(), "does not answer", "Listen on a socket nothing answers = %v; want EADDRINUSE saying nothing answers", err)
		assert.Contains(t, err.Error(), "remove "+path, "Listen on a socket nothing answers = %v; want EADDRINUSE saying nothing answers", err)
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, 4*time.Second, "gave up after %v: a dying server must get its time", took)
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("the socket of a server that may live was removed: %v", err)
		}
	})
}
