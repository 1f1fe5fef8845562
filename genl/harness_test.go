package genl_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/transport"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireRoot skips a test that needs root (peers with other uids, veth,
// netns), or fails it when CI=true.
func requireRoot(t testing.TB) { t.Helper(); testenv.RequireRoot(t) }

// selfNetNS is the test process's network namespace.
func selfNetNS(t testing.TB) genl.NetNS {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat("/proc/self/ns/net", &st))
	return genl.NetNS{Dev: uint64(st.Dev), Ino: st.Ino}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testServer struct {
	path string
	srv  *genl.Server
	be   *genl.MemBackend
	logs *syncBuffer
	ns   genl.NetNS
	// mana0 and mana1 are ports, lo0 a plain device, all in the test netns.
	mana0, mana1, lo0 *genl.MemDev
}

// startServer runs a Server with a MemBackend on a fresh socket (directory
// 0755, socket 0666, so that other uids can connect) and stops it at the end
// of the test. mod, when not nil, changes the configuration first.
func startServer(t testing.TB, mod func(*genl.ServerConfig)) *testServer {
	t.Helper()
	return startServerWith(t, func(_ *testServer, c *genl.ServerConfig) {
		if mod != nil {
			mod(c)
		}
	})
}

// startServerWith is startServer with a mod that also gets the test server
// (its MemBackend and devices) before the Server starts.
func startServerWith(t testing.TB, mod func(*testServer, *genl.ServerConfig)) *testServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "genl")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	ts := &testServer{path: filepath.Join(dir, "run", "manad.sock"), be: genl.NewMemBackend(), logs: &syncBuffer{}, ns: selfNetNS(t)}
	ts.lo0 = ts.be.AddPlain(ts.ns, "lo0")
	ts.mana0 = ts.be.AddPort(ts.ns, "mana0")
	ts.mana1 = ts.be.AddPort(ts.ns, "mana1")
	cfg := genl.ServerConfig{
		Backend:   ts.be.Ops(),
		Transport: transport.Config{AdminGroup: -1},
		Logger:    slog.New(slog.NewTextHandler(ts.logs, nil)),
	}
	mod(ts, &cfg)
	ts.srv, err = genl.NewServer(cfg)
	require.NoError(t, err)
	l, err := transport.Listen(ts.path, 0o666, -1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "Serve")
	})
	return ts
}

// rawConn speaks raw bytes to the server, for byte-level checks.
type rawConn struct {
	t testing.TB
	c *net.UnixConn
}

func dialRaw(t testing.TB, path string) *rawConn {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

func (r *rawConn) send(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one datagram and splits it into messages.
func (r *rawConn) recv() []rawMsg {
	r.t.Helper()
	buf := make([]byte, 1<<20)
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := r.c.Read(buf)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return splitMsgs(r.t, buf[:n])
}

type rawMsg struct {
	h    nlattr.Header
	data []byte // payload after the nlmsghdr
	raw  []byte
}

func splitMsgs(t testing.TB, b []byte) []rawMsg {
	t.Helper()
	var out []rawMsg
	for len(b) > 0 {
		h, ok := nlattr.ReadHeader(b)
		require.True(t, ok, "malformed reply datagram: % x", b)
		require.GreaterOrEqual(t, int(h.Len), nlattr.MsgHdrLen, "malformed reply datagram: % x", b)
		require.LessOrEqual(t, int(h.Len), len(b), "malformed reply datagram: % x", b)
		out = append(out, rawMsg{h: h, data: b[nlattr.MsgHdrLen:h.Len], raw: b[:h.Len]})
		b = b[min(nlattr.Align(int(h.Len)), len(b)):]
	}
	return out
}

// ackInfo is a decoded NLMSG_ERROR.
type ackInfo struct {
	errno    unix.Errno
	flags    uint16
	echoLen  uint32 // nlmsg_len of the echoed header
	payload  []byte // echoed payload (uncapped errors)
	msg      string
	off      int
	missType uint32
	missNest int
	policy   bool
}

// assertSameAck checks that manad's answer m is the kernel's k: errno, extack (message,
// offset, missing attribute, policy), flags and the echoed payload. echoLen is left out, as the
// field-by-field checks this replaces left it out; an empty payload equals a missing one.
func assertSameAck(t testing.TB, k, m ackInfo) {
	t.Helper()
	norm := func(a ackInfo) ackInfo {
		a.echoLen = 0
		if len(a.payload) == 0 {
			a.payload = nil
		}
		return a
	}
	assert.Equal(t, norm(m), norm(k), "kernel %+v\nmanad  %+v", k, m)
}

func decodeAck(t testing.TB, m rawMsg) ackInfo {
	t.Helper()
	require.Equal(t, nlattr.MsgError, m.h.Type, "want NLMSG_ERROR, got type")
	require.GreaterOrEqual(t, len(m.data), 20, "short NLMSG_ERROR: % x", m.data)
	a := ackInfo{errno: unix.Errno(-int32(binary.NativeEndian.Uint32(m.data))), flags: m.h.Flags}
	a.echoLen = binary.NativeEndian.Uint32(m.data[4:])
	off := 20
	if m.h.Flags&nlattr.FlagCapped == 0 {
		off = 4 + int(a.echoLen)
		a.payload = m.data[20:min(off, len(m.data))]
	}
	if m.h.Flags&nlattr.FlagAckTLVs != 0 {
		it := nlattr.NewIter(m.data, nlattr.Align(off), len(m.data)-nlattr.Align(off))
		for it.Next() {
			x := it.Attr()
			switch x.Type() {
			case nlattr.ErrAttrMsg:
				a.msg = x.Str()
			case nlattr.ErrAttrOffs:
				a.off = int(x.U32())
			case nlattr.ErrAttrMissType:
				a.missType = x.U32()
			case nlattr.ErrAttrMissNest:
				a.missNest = int(x.U32())
			case nlattr.ErrAttrPolicy:
				a.policy = true
			}
		}
	}
	return a
}

// msgBuilder builds a raw generic netlink request.
type msgBuilder struct {
	nlattr.Builder
	start int
}

func newMsg(typ, flags uint16, seq uint32, cmd, version uint8) *msgBuilder {
	m := &msgBuilder{}
	m.start = m.BeginMsg(typ, flags, seq, 4242)
	m.Genl(cmd, version)
	return m
}

func (m *msgBuilder) done() []byte {
	m.EndMsg(m.start)
	return m.B
}

// kernelConn is a raw AF_NETLINK generic netlink socket with
// NETLINK_EXT_ACK, for differential tests against the kernel.
type kernelConn struct {
	t  testing.TB
	fd int
}

func dialKernel(t testing.TB) *kernelConn {
	t.Helper()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		t.Skipf("no generic netlink: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}))
	require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1))
	tv := unix.Timeval{Sec: 10}
	require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv))
	return &kernelConn{t: t, fd: fd}
}

func (k *kernelConn) send(b []byte) {
	k.t.Helper()
	if err := unix.Sendto(k.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		k.t.Fatal(err)
	}
}

func (k *kernelConn) recv() []rawMsg {
	k.t.Helper()
	buf := make([]byte, 1<<20)
	n, _, err := unix.Recvfrom(k.fd, buf, 0)
	if err != nil {
		k.t.Fatalf("kernel recv: %v", err)
	}
	return splitMsgs(k.t, buf[:n])
}

// family resolves a kernel family id.
func (k *kernelConn) family(name string) uint16 {
	k.t.Helper()
	m := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest, 1, unix.CTRL_CMD_GETFAMILY, 1)
	m.PutString(unix.CTRL_ATTR_FAMILY_NAME, name)
	k.send(m.done())
	msgs := k.recv()
	if msgs[0].h.Type != unix.GENL_ID_CTRL {
		k.t.Skipf("kernel has no %q family", name)
	}
	it := nlattr.NewIter(msgs[0].data, 4, len(msgs[0].data)-4)
	for it.Next() {
		if it.Attr().Type() == unix.CTRL_ATTR_FAMILY_ID {
			return it.Attr().U16()
		}
	}
	k.t.Fatal("no family id")
	return 0
}
