package genl_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// asThread runs f on a thread of its own with the credentials uid, gid and groups. Linux
// credentials are per thread and SO_PEERCRED/SO_PEERGROUPS take the connecting thread's, so a
// socket connected by f is the peer it pretends to be. The raw setres*id calls change only
// that thread (the libc wrappers would change every thread), which then exits with f's
// goroutine.
func asThread(uid, gid uint32, groups []uint32, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		gs := make([]uint32, len(groups)+1)
		copy(gs, groups)
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&gs[0])), 0); e != 0 {
			errc <- fmt.Errorf("setgroups: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			errc <- fmt.Errorf("setresgid: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			errc <- fmt.Errorf("setresuid: %w", e)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// dialRawAs connects to path as uid/gid with groups.
func dialRawAs(t testing.TB, path string, uid, gid uint32, groups []uint32) (*rawConn, error) {
	t.Helper()
	var c *net.UnixConn
	err := asThread(uid, gid, groups, func() (err error) {
		c, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
		return err
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}, nil
}

// dialUnprivileged connects as a peer the connection limits apply to: uid 65534 when the
// test runs as root (root is never refused), else the test's own uid.
func dialUnprivileged(t testing.TB, path string) *rawConn {
	t.Helper()
	if os.Geteuid() != 0 {
		return dialRaw(t, path)
	}
	return mustDialAs(t, path, 65534)
}

// clientDialUnprivileged is client.Dial as dialUnprivileged's peer.
func clientDialUnprivileged(path string) (*client.Client, error) {
	if os.Geteuid() != 0 {
		return client.Dial(path)
	}
	var c *client.Client
	err := asThread(65534, 65534, nil, func() (err error) {
		c, err = client.Dial(path)
		return err
	})
	return c, err
}

func mustDialAs(t testing.TB, path string, uid uint32, groups ...uint32) *rawConn {
	t.Helper()
	rc, err := dialRawAs(t, path, uid, uid, groups)
	require.NoError(t, err)
	return rc
}

// served reports whether rc is admitted: a RINGS_GET gets a reply (true) or EUSERS (false).
func served(t testing.TB, rc *rawConn, eth uint16, seq uint32) (bool, ackInfo) {
	t.Helper()
	rc.send(ringsGetByName(eth, seq, 0, "mana0"))
	msgs := rc.recv()
	if msgs[0].h.Type == eth {
		return true, ackInfo{}
	}
	a := decodeAck(t, msgs[0])
	require.Equal(t, unix.EUSERS, a.errno, "want a reply or EUSERS, got %+v", a)
	assert.Equal(t, seq, msgs[0].h.Seq, "EUSERS seq")
	return false, a
}

// expectClosed checks that the server closed rc.
func expectClosed(t testing.TB, rc *rawConn, what string) {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64)
	n, err := rc.c.Read(buf)
	assert.ErrorIs(t, err, io.EOF, "%s: connection not closed: read %d bytes", what, n)
}

// TestRejectLyingLengths: at the connection limit, the refused connection's first datagram
// may claim any nlmsg_len; the answer is EUSERS echoing a 16-byte header, and the server
// keeps serving. (It used to slice the datagram by its nlmsg_len and panic on 0xffffffff.)
func TestRejectLyingLengths(t *testing.T) {
	requireRoot(t)
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.MaxConns = 1 })
	holder := dialRaw(t, ts.path)
	eth := manadFamilyID(t, holder, "ethtool")
	req := ringsGetByName(eth, 77, 0, "mana0")
	for _, tc := range []struct {
		name string
		d    []byte
	}{
		{"len 0xffffffff", withLen(req, 0xffffffff)},
		{"len past the datagram", withLen(req, uint32(len(req)+1))},
		{"len 1<<20", withLen(req, 1<<20)},
		{"len 0", withLen(req, 0)},
		{"len 15", withLen(req, 15)},
		{"len 16", withLen(req, 16)},
		{"header only, len 0xffffffff", withLen(req[:16], 0xffffffff)},
		{"valid", req},
		{"64 KiB datagram claiming 4 GiB", withLen(append(append([]byte(nil), req...), make([]byte, 64<<10)...), 0xffffffff)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := mustDialAs(t, ts.path, 65534)
			rc.send(tc.d)
			msgs := rc.recv()
			require.Len(t, msgs, 1, "%d messages", len(msgs))
			a := decodeAck(t, msgs[0])
			if a.errno != unix.EUSERS || !strings.Contains(a.msg, "too many connections") || msgs[0].h.Seq != 77 {
				t.Errorf("answer %+v seq %d", a, msgs[0].h.Seq)
			}
			assert.NotEqual(t, uint16(0), a.flags&nlattr.FlagCapped, "echo not capped to the header: flags %#x, echoed nlmsg_len %d", a.flags, a.echoLen)
			assert.Equal(t, uint32(nlattr.MsgHdrLen), a.echoLen, "echo not capped to the header: flags %#x, echoed nlmsg_len %d", a.flags, a.echoLen)
			expectClosed(t, rc, "refused")
			ok, _ := served(t, holder, eth, 78)
			require.True(t, ok, "the admitted connection is no longer served")
		})
	}
}

func withLen(b []byte, n uint32) []byte {
	b = append([]byte(nil), b...)
	binary.NativeEndian.PutUint32(b, n)
	return b
}

// TestFairAdmission: uid 65534 holds as many connections as it may; root, and a member of the
// admin group, are still served; the refusal names the per-user limit.
func TestFairAdmission(t *testing.T) {
	requireRoot(t)
	const adminGID = 4243
	ts := startServer(t, func(c *genl.ServerConfig) {
		c.Transport.MaxConns, c.Transport.MaxConnsPerUID, c.Transport.AdminGroup = 16, 4, adminGID
	})
	eth := manadFamilyID(t, dialRaw(t, ts.path), "ethtool")
	t.Run("per uid", func(t *testing.T) {
		var held []*rawConn
		for i := range 4 {
			rc := mustDialAs(t, ts.path, 65534)
			ok, a := served(t, rc, eth, uint32(i+1))
			require.True(t, ok, "connection %d of uid 65534 refused: %+v", i+1, a)
			held = append(held, rc)
		}
		rc := mustDialAs(t, ts.path, 65534)
		ok, a := served(t, rc, eth, 5)
		if ok || a.msg != "manad: too many connections for uid 65534 (limit 4 per user)" {
			t.Errorf("fifth connection of uid 65534: served %v, %+v", ok, a)
		}
		// Other users and root are unaffected.
		if ok, a := served(t, mustDialAs(t, ts.path, 65533), eth, 6); !ok {
			t.Errorf("uid 65533 refused: %+v", a)
		}
		if ok, a := served(t, dialRaw(t, ts.path), eth, 7); !ok {
			t.Errorf("root refused: %+v", a)
		}
		c, err := client.Dial(ts.path)
		require.NoError(t, err, "root client.Dial while uid 65534 holds its maximum")
		if _, err := c.Ports(ctxT(t)); err != nil {
			t.Errorf("root request: %v", err)
		}
		c.Close()
		// Closing one frees one slot for the uid.
		held[0].c.Close()
		eventually(t, "a slot of uid 65534 is free again", func() bool {
			ok, _ := served(t, mustDialAs(t, ts.path, 65534), eth, 8)
			return ok
		})
	})
	t.Run("reserved for root and admin group", func(t *testing.T) {
		defer func() {
			if t.Failed() {
				t.Log(ts.logs.String())
			}
		}()
		// Fill what unprivileged users may hold together (16 - 16/8 = 14) with many uids.
		ts := startServer(t, func(c *genl.ServerConfig) {
			c.Transport.MaxConns, c.Transport.MaxConnsPerUID, c.Transport.AdminGroup = 16, 4, adminGID
		})
		for i := range 14 {
			rc := mustDialAs(t, ts.path, 30000+uint32(i/4))
			ok, a := served(t, rc, eth, 9)
			require.True(t, ok, "unprivileged connection %d of 14 refused: %+v", i+1, a)
		}
		ok, a := served(t, mustDialAs(t, ts.path, 40000), eth, 10)
		if ok || !strings.Contains(a.msg, "reserved for root and the admin group") {
			t.Errorf("unprivileged user past the shared limit: served %v, %+v", ok, a)
		}
		if ok, a := served(t, mustDialAs(t, ts.path, 40001, adminGID), eth, 11); !ok {
			t.Errorf("admin group member refused: %+v", a)
		}
		// Root is never refused, even past MaxConns.
		for i := range 20 {
			ok, a := served(t, dialRaw(t, ts.path), eth, uint32(100+i))
			require.True(t, ok, "root connection %d refused: %+v", i, a)
		}
	})
}

// eventually polls cond (the server releases a slot when its goroutines end).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 300 {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// TestIdleTimeout: a connection that sends nothing, or nothing more, is closed after the idle
// timeout; one that joined a multicast group is not.
func TestIdleTimeout(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.IdleTimeout = 300 * time.Millisecond })
	sub := dialRaw(t, ts.path)
	manad := manadFamilyID(t, sub, "manad")
	eth := manadFamilyID(t, sub, "ethtool")
	m := newMsg(manad, nlattr.FlagRequest|nlattr.FlagAck, 3, wire.CmdGroupJoin, wire.FamilyVersion)
	m.PutU32(wire.AttrGroup, groupID(t, ts.path, "manad", "events"))
	sub.send(m.done())
	a := decodeAck(t, sub.recv()[0])
	require.Equal(t, unix.Errno(0), a.errno, "join: %+v", a)

	silent := dialRaw(t, ts.path)
	expectClosed(t, silent, "connection that never sent a request")
	talked := dialRaw(t, ts.path)
	if ok, _ := served(t, talked, eth, 4); !ok {
		t.Fatal("not served")
	}
	expectClosed(t, talked, "connection idle after a request")
	// The subscriber has been idle longer than the timeout by now (it was set up first).
	ok, _ := served(t, sub, eth, 5)
	assert.True(t, ok, "subscriber not served after the idle timeout")
}

// TestRefusalLogRateLimited: a flood of refused connections writes a bounded number of log
// lines (one per 10 s at most), each counting the refusals not logged.
func TestRefusalLogRateLimited(t *testing.T) {
	requireRoot(t)
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.MaxConns = 1 })
	holder := dialRaw(t, ts.path)
	eth := manadFamilyID(t, holder, "ethtool")
	start := time.Now()
	const n = 300
	for i := range n {
		rc := mustDialAs(t, ts.path, 65534)
		if i%2 == 0 {
			ok, _ := served(t, rc, eth, uint32(i))
			require.False(t, ok, "admitted past the limit")
		}
		rc.c.Close() // half of them close before the answer
	}
	elapsed := time.Since(start)
	var warns int
	for _, l := range strings.Split(ts.logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warns++
		}
	}
	// One line at the first refusal, then at most one per 10 s; one more for slack.
	limit := 2 + int(elapsed/(10*time.Second))
	assert.LessOrEqual(t, warns, limit, "%d refusals in %v wrote %d WARN lines, want 1..%d:\n%s", n, elapsed, warns, limit, ts.logs.String())
	assert.NotEqual(t, 0, warns, "%d refusals in %v wrote %d WARN lines, want 1..%d:\n%s", n, elapsed, warns, limit, ts.logs.String())
	assert.Contains(t, ts.logs.String(), "genl: connection refused", "no refusal logged")
}

// TestLayoutPlanMultiPart: a LAYOUT_PLAN answer of over 1 MiB arrives in full, multi-part,
// every datagram within the reply limit, and NLM_F_ACK gets no ACK after the NLMSG_DONE.
func TestLayoutPlanMultiPart(t *testing.T) {
	ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		c.Transport.MaxMessage = 256 << 10
		c.Backend.PlanLayout = wordyLayouts{pre.be}.PlanLayout
	})
	// As many rules as the request's LAYOUT_REQUEST nest holds (64 KiB).
	const rules = 4000
	req := genl.LayoutRequest{PageSize: 4096, MTU: 1500, RingSize: 1024, Queues: 4}
	for i := range rules {
		req.Rules = append(req.Rules, []string{"upstream", "pre-frag"}[i%2])
	}
	c, err := client.Dial(ts.path)
	require.NoError(t, err)
	defer c.Close()
	got, err := c.PlanLayout(ctxT(t), req)
	require.NoError(t, err, "PlanLayout with %d rules", rules)
	require.Len(t, got, rules, "%d layouts, want %d", len(got), rules)
	for i, l := range got {
		require.Equal(t, req.Rules[i], l.Rule, "layout %d is for rule", i)
	}
	// The same, raw: parts, sizes and the end.
	rc := dialRaw(t, ts.path)
	manad := manadFamilyID(t, rc, "manad")
	m := newMsg(manad, nlattr.FlagRequest|nlattr.FlagAck, 9, wire.CmdLayoutPlan, wire.FamilyVersion)
	n := m.Nest(wire.AttrLayoutRequest)
	m.PutU32(wire.LayoutAttrPageSize, 4096)
	m.PutU32(wire.LayoutAttrMTU, 1500)
	for _, r := range req.Rules {
		m.PutString(wire.LayoutAttrRule, r)
	}
	m.EndNest(n)
	rc.send(m.done())
	var total, layouts, datagrams int
	limit := sndbuf(t, rc) - 32
	for done := false; !done; {
		buf := make([]byte, 4<<20)
		_ = rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
		k, err := rc.c.Read(buf)
		require.NoError(t, err)
		datagrams++
		total += k
		assert.LessOrEqual(t, k, limit, "datagram of %d bytes, over the %d-byte limit", k, limit)
		for _, msg := range splitMsgs(t, buf[:k]) {
			require.Equal(t, uint32(9), msg.h.Seq, "seq")
			switch msg.h.Type {
			case nlattr.MsgDone:
				require.Equal(t, int32(0), int32(binary.NativeEndian.Uint32(msg.data)), "NLMSG_DONE error")
				done = true
			case manad:
				require.NotEqual(t, uint16(0), msg.h.Flags&nlattr.FlagMulti, "part without NLM_F_MULTI: %+v", msg.h)
				layouts++
			default:
				t.Fatalf("unexpected message %+v", msg.h)
			}
		}
	}
	assert.Equal(t, rules, layouts, "%d layouts, %d bytes, %d datagrams", layouts, total, datagrams)
	assert.GreaterOrEqual(t, total, int(1<<20), "%d layouts, %d bytes, %d datagrams", layouts, total, datagrams)
	assert.GreaterOrEqual(t, datagrams, 2, "%d layouts, %d bytes, %d datagrams", layouts, total, datagrams)
	// Nothing follows NLMSG_DONE: the next request's answer is next.
	ok, _ := served(t, rc, manadFamilyID(t, rc, "ethtool"), 10)
	assert.True(t, ok, "not served after the multi-part reply")
}

// wordyLayouts gives every planned layout a long reason, for replies of over 1 MiB.
type wordyLayouts struct{ *genl.MemBackend }

func (w wordyLayouts) PlanLayout(ctx context.Context, c genl.Caller, r genl.LayoutRequest) ([]genl.RxBufLayout, error) {
	ls, err := w.MemBackend.PlanLayout(ctx, c, r)
	for i := range ls {
		ls[i].Reason += strings.Repeat(" and a detailed explanation", 3)
	}
	return ls, err
}

func sndbuf(t testing.TB, rc *rawConn) int {
	t.Helper()
	// Both ends of a connection start with net.core.wmem_default; the server's is what counts.
	raw, err := rc.c.SyscallConn()
	require.NoError(t, err)
	v := 0
	_ = raw.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
	require.NoError(t, err)
	return v
}

// TestReplyTooBig: a do reply that does not fit in one reply datagram is EMSGSIZE with an
// extack message, not a closed connection; a dump is split to fit.
func TestReplyTooBig(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.MaxReply = 512 })
	rc := dialRaw(t, ts.path)
	manad := manadFamilyID(t, rc, "manad")
	m := newMsg(manad, nlattr.FlagRequest, 21, wire.CmdPortGet, wire.FamilyVersion)
	n := m.Nest(wire.AttrHeader)
	m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
	m.EndNest(n)
	rc.send(m.done())
	msgs := rc.recv()
	a := decodeAck(t, msgs[0])
	assert.Equal(t, unix.EMSGSIZE, a.errno, "PORT_GET over the reply limit: %+v", a)
	assert.Contains(t, a.msg, "does not fit in one reply datagram (limit 512 bytes)", "PORT_GET over the reply limit")
	assert.Equal(t, uint32(21), msgs[0].h.Seq, "PORT_GET over the reply limit: seq")
	// A dump of the same ports: each datagram within the limit; the dump of messages that
	// are themselves too big ends with EMSGSIZE in NLMSG_DONE.
	rc.send(newMsg(manad, nlattr.FlagRequest|nlattr.FlagDump, 22, wire.CmdPortGet, wire.FamilyVersion).done())
	msgs = rc.recv()
	last := msgs[len(msgs)-1]
	assert.Equal(t, nlattr.MsgDone, last.h.Type, "dump of too-big messages: %+v", last.h)
	assert.Equal(t, int32(-int32(unix.EMSGSIZE)), int32(binary.NativeEndian.Uint32(last.data)), "dump of too-big messages: %+v", last.h)
	// The ethtool family's description (the kernel's 50 ops) is itself over 512 bytes: it
	// fails alike, and the family id is resolved on a server without the limit.
	rc.send(getFamilyReq("ethtool"))
	a = decodeAck(t, rc.recv()[0])
	assert.Equal(t, unix.EMSGSIZE, a.errno, "GETFAMILY ethtool over the reply limit: %+v", a)
	eth := manadFamilyID(t, dialRaw(t, startServer(t, nil).path), "ethtool")
	rc.send(newMsg(eth, nlattr.FlagRequest|nlattr.FlagDump, 23, unix.ETHTOOL_MSG_RINGS_GET, 1).done())
	var parts int
	for done := false; !done; {
		buf := make([]byte, 1<<16)
		_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		k, err := rc.c.Read(buf)
		require.NoError(t, err)
		assert.LessOrEqual(t, k, 512, "dump datagram of %d bytes, limit 512", k)
		for _, msg := range splitMsgs(t, buf[:k]) {
			done = done || msg.h.Type == nlattr.MsgDone
			parts++
		}
	}
	assert.GreaterOrEqual(t, parts, 3, "RINGS_GET dump: %d messages", parts)
}

// TestErrorEchoCapped: the error answering a request too big to echo within a reply datagram
// echoes only its header (NLM_F_CAPPED), keeps its extack, and is delivered.
func TestErrorEchoCapped(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.MaxMessage = 256 << 10 })
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	raw, err := rc.c.SyscallConn()
	require.NoError(t, err)
	_ = raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 1<<20) })
	require.NoError(t, err)
	if sndbuf(t, rc)-32 < 224<<10+64 {
		t.Skipf("cannot send a 224 KiB datagram here (SO_SNDBUF %d; net.core.wmem_max too low)", sndbuf(t, rc))
	}
	// RINGS_GET with a valid header and 224 KiB of unknown attributes: strict validation
	// blames the first of them.
	m := newMsg(eth, nlattr.FlagRequest, 31, unix.ETHTOOL_MSG_RINGS_GET, 1)
	n := m.Nest(unix.ETHTOOL_A_RINGS_HEADER)
	m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
	m.EndNest(n)
	for m.Len() < 224<<10 {
		m.Put(99, make([]byte, 60000))
	}
	req := m.done()
	rc.send(req)
	msgs := rc.recv()
	a := decodeAck(t, msgs[0])
	require.NotEqual(t, unix.Errno(0), a.errno, "want an error, got %+v", a)
	require.Equal(t, uint32(31), msgs[0].h.Seq, "want an error, got %+v", a)
	assert.NotZero(t, a.flags&nlattr.FlagCapped, "echo not capped: flags %#x", a.flags)
	assert.Equal(t, uint32(len(req)), a.echoLen, "echoed nlmsg_len")
	assert.LessOrEqual(t, len(msgs[0].raw), 4096, "echo not capped: answer of %d bytes", len(msgs[0].raw))
	if a.msg == "" {
		assert.NotEqual(t, 0, a.off, "extack lost: %+v", a)
	}
	// A small bad request still gets its full echo.
	small := newMsg(eth, nlattr.FlagRequest, 32, unix.ETHTOOL_MSG_RINGS_GET, 1)
	small.Put(99, make([]byte, 8))
	rc.send(small.done())
	a = decodeAck(t, rc.recv()[0])
	assert.Equal(t, uint16(0), a.flags&nlattr.FlagCapped, "small error capped: %+v", a)
}

// TestGoneClientsLogQuietly: clients that no longer read (here: shut down their reading
// side, so that every answer fails with EPIPE) are dropped without a warning each (any user
// can make thousands).
func TestGoneClientsLogQuietly(t *testing.T) {
	ts := startServer(t, nil)
	eth := manadFamilyID(t, dialRaw(t, ts.path), "ethtool")
	start := time.Now()
	const n = 300
	for i := range n {
		rc := dialRaw(t, ts.path)
		require.NoError(t, unix.Shutdown(fdOf(t, rc), unix.SHUT_RD))
		rc.send(ringsGetByName(eth, uint32(i), 0, "mana0"))
		// The server drops the connection when its answer fails.
		_ = rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, err := rc.c.Write(ringsGetByName(eth, uint32(i), 0, "mana0")); err != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		rc.c.Close()
	}
	elapsed := time.Since(start)
	warns := strings.Count(ts.logs.String(), "level=WARN")
	limit := 2 + int(elapsed/(10*time.Second))
	assert.LessOrEqual(t, warns, limit, "%d clients that stopped reading wrote %d WARN lines in %v, want at most %d:\n%s", n, warns, elapsed, limit, ts.logs.String())
}

func fdOf(t testing.TB, rc *rawConn) int {
	t.Helper()
	raw, err := rc.c.SyscallConn()
	require.NoError(t, err)
	var fd int
	_ = raw.Control(func(p uintptr) { fd = int(p) })
	return fd
}

// TestClientAfterIdleClose: a client.Client whose connection manad closed for idleness
// reconnects for its next request instead of failing it.
func TestClientAfterIdleClose(t *testing.T) {
	logs := &syncBuffer{}
	ts := startServer(t, func(c *genl.ServerConfig) {
		c.Transport.IdleTimeout = 200 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	c, err := client.Dial(ts.path)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Ports(ctxT(t))
	require.NoError(t, err)
	eventually(t, "manad closed the idle connection", func() bool {
		return strings.Contains(logs.String(), "closed idle connection")
	})
	for i := range 3 {
		_, err := c.Ports(ctxT(t))
		require.NoError(t, err, "request %d after the idle close", i+1)
	}
}
