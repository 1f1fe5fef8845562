package genl_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ringsGetByName builds a RINGS_GET request for dev.
func ringsGetByName(eth uint16, seq uint32, flags uint16, dev string) []byte {
	m := newMsg(eth, nlattr.FlagRequest|flags, seq, unix.ETHTOOL_MSG_RINGS_GET, 1)
	header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, dev) })
	return m.done()
}

func TestMultipleMessagesPerDatagram(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	var d []byte
	d = append(d, ringsGetByName(eth, 1, 0, "mana0")...)
	d = append(d, ringsGetByName(eth, 2, nlattr.FlagAck, "nosuch")...)
	d = append(d, ringsGetByName(eth, 3, nlattr.FlagAck, "mana1")...)
	rc.send(d)
	// Each reply and each ACK is its own datagram, in request order.
	want := []struct {
		typ uint16
		seq uint32
	}{{eth, 1}, {nlattr.MsgError, 2}, {eth, 3}, {nlattr.MsgError, 3}}
	for _, w := range want {
		msgs := rc.recv()
		require.Len(t, msgs, 1, "got %+v, want type %d seq %d", msgs[0].h, w.typ, w.seq)
		require.Equal(t, w.typ, msgs[0].h.Type, "got %+v, want type %d seq %d", msgs[0].h, w.typ, w.seq)
		require.Equal(t, w.seq, msgs[0].h.Seq, "got %+v, want type %d seq %d", msgs[0].h, w.typ, w.seq)
	}
}

func TestMalformedDatagrams(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	good := ringsGetByName(eth, 7, 0, "mana0")

	t.Run("shorter than a header", func(t *testing.T) {
		rc.send(good[:10])
		a := decodeAck(t, rc.recv()[0])
		assert.Equal(t, unix.EINVAL, a.errno, "%+v", a)
		assert.Contains(t, a.msg, "truncated netlink message", "%+v", a)
	})
	t.Run("nlmsg_len past the datagram", func(t *testing.T) {
		rc.send(good[:len(good)-4])
		msgs := rc.recv()
		a := decodeAck(t, msgs[0])
		if a.errno != unix.EINVAL || !strings.Contains(a.msg, "truncated netlink message") || msgs[0].h.Seq != 7 ||
			a.flags&nlattr.FlagCapped == 0 || a.echoLen != 16 {
			t.Errorf("%+v (seq %d)", a, msgs[0].h.Seq)
		}
	})
	t.Run("nlmsg_len below a header", func(t *testing.T) {
		b := append([]byte(nil), good...)
		binary.NativeEndian.PutUint32(b, 8)
		rc.send(b)
		a := decodeAck(t, rc.recv()[0])
		assert.Equal(t, unix.EINVAL, a.errno, "%+v", a)
	})
	t.Run("shorter than a genl header", func(t *testing.T) {
		b := make([]byte, 16)
		binary.NativeEndian.PutUint32(b, 16)
		binary.NativeEndian.PutUint16(b[4:], eth)
		binary.NativeEndian.PutUint16(b[6:], nlattr.FlagRequest)
		rc.send(b)
		a := decodeAck(t, rc.recv()[0])
		assert.Equal(t, unix.EINVAL, a.errno, "%+v", a)
	})
	t.Run("unaligned last message is accepted", func(t *testing.T) {
		// An attribute stream ending in 2 bytes of nothing is "bytes
		// leftover"; a message whose nlmsg_len is unaligned but complete is
		// served (the kernel clips the final alignment).
		m := newMsg(eth, nlattr.FlagRequest, 8, unix.ETHTOOL_MSG_RINGS_GET, 1)
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0") })
		b := m.done()
		b = append(b, 0x02, 0x00) // nlmsg_len grows by 2: trailing bytes
		binary.NativeEndian.PutUint32(b, uint32(len(b)))
		rc.send(b)
		a := decodeAck(t, rc.recv()[0])
		assert.Equal(t, unix.EINVAL, a.errno, "%+v", a)
		assert.Equal(t, "bytes leftover after parsing attributes", a.msg, "%+v", a)
		rc.send(good[:len(good)-1]) // datagram ends 1 byte early: truncated
		if a := decodeAck(t, rc.recv()[0]); a.errno != unix.EINVAL {
			t.Errorf("%+v", a)
		}
	})
	t.Run("trailing garbage after a message is ignored", func(t *testing.T) {
		rc.send(append(append([]byte(nil), good...), 1, 2, 3))
		msgs := rc.recv()
		if msgs[0].h.Type != eth || msgs[0].h.Seq != 7 {
			t.Errorf("%+v", msgs[0].h)
		}
	})
	t.Run("control message types and non-requests", func(t *testing.T) {
		m := newMsg(nlattr.MsgNoop, nlattr.FlagRequest|nlattr.FlagAck, 9, 0, 0)
		rc.send(m.done())
		if a := decodeAck(t, rc.recv()[0]); a.errno != 0 {
			t.Errorf("NOOP: %+v", a)
		}
		m = newMsg(eth, nlattr.FlagAck, 10, unix.ETHTOOL_MSG_RINGS_GET, 1)
		rc.send(m.done())
		a := decodeAck(t, rc.recv()[0])
		assert.Equal(t, unix.Errno(0), a.errno, "no NLM_F_REQUEST: %+v", a)
	})
	t.Run("unknown family", func(t *testing.T) {
		rc.send(newMsg(0x3ff, nlattr.FlagRequest, 11, 1, 1).done())
		a := decodeAck(t, rc.recv()[0])
		assert.Equal(t, unix.ENOENT, a.errno, "%+v", a)
	})
	t.Run("the connection still works", func(t *testing.T) {
		rc.send(good)
		msgs := rc.recv()
		assert.Equal(t, eth, msgs[0].h.Type, "%+v", msgs[0].h)
	})
}

func TestGenlHeaderChecks(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	mf := manadFamilyID(t, rc, wire.FamilyName)

	portGet := func(flags uint16, reserved byte) []byte {
		m := newMsg(mf, nlattr.FlagRequest|flags, 3, wire.CmdPortGet, 1)
		header(m, wire.AttrHeader, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0") })
		b := m.done()
		b[nlattr.MsgHdrLen+2] = reserved
		return b
	}
	rc.send(portGet(0, 1))
	if a := decodeAck(t, rc.recv()[0]); a.errno != unix.EINVAL || a.msg != "genlmsghdr.reserved field is not 0" {
		t.Errorf("reserved: %+v", a)
	}
	rc.send(portGet(0x20, 0))
	if a := decodeAck(t, rc.recv()[0]); a.errno != unix.EINVAL || a.msg != "ambiguous or reserved bits set in nlmsg_flags" {
		t.Errorf("flags: %+v", a)
	}
	rc.send(portGet(0x100, 0)) // NLM_F_ROOT alone is ambiguous
	a := decodeAck(t, rc.recv()[0])
	assert.Equal(t, unix.EINVAL, a.errno, "half a dump flag: %+v", a)
	assert.Equal(t, "ambiguous or reserved bits set in nlmsg_flags", a.msg, "half a dump flag: %+v", a)
	rc.send(portGet(nlattr.FlagEcho, 0))
	if msgs := rc.recv(); msgs[0].h.Type != mf {
		t.Errorf("ECHO is allowed: %+v", msgs[0].h)
	}
	// ethtool commands below ETHTOOL_MSG_MODULE_GET+1 are not checked.
	b := ringsGetByName(eth, 4, 0, "mana0")
	b[nlattr.MsgHdrLen+2] = 7
	rc.send(b)
	msgs := rc.recv()
	assert.Equal(t, eth, msgs[0].h.Type, "ethtool legacy command with reserved bits: %+v", msgs[0].h)
}

func TestSocketOptions(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	mf := manadFamilyID(t, rc, wire.FamilyName)
	setOpt := func(opt uint32, v uint8) ackInfo {
		m := newMsg(mf, nlattr.FlagRequest|nlattr.FlagAck, 5, wire.CmdSetOption, 1)
		m.PutU32(wire.AttrOption, opt)
		m.PutU8(wire.AttrOptionValue, v)
		rc.send(m.done())
		return decodeAck(t, rc.recv()[0])
	}
	bad := ringsGetByName(eth, 6, 0, "nosuch")

	// Default: extack on, error ACKs echo the request.
	rc.send(bad)
	a := decodeAck(t, rc.recv()[0])
	assert.Equal(t, "no device matches name", a.msg, "default: %+v", a)
	assert.Equal(t, uint16(0), a.flags&nlattr.FlagCapped, "default: %+v", a)
	assert.Equal(t, len(bad)-16, len(a.payload), "default: %+v", a)
	a = setOpt(unix.NETLINK_CAP_ACK, 1)
	require.Equal(t, unix.Errno(0), a.errno, "CAP_ACK: %+v", a)
	rc.send(bad)
	a = decodeAck(t, rc.recv()[0])
	if a.flags&nlattr.FlagCapped == 0 || a.payload != nil || a.echoLen != uint32(len(bad)) {
		t.Errorf("capped: %+v", a)
	}
	a = setOpt(unix.NETLINK_EXT_ACK, 0)
	require.Equal(t, unix.Errno(0), a.errno, "EXT_ACK off: %+v", a)
	rc.send(bad)
	a = decodeAck(t, rc.recv()[0])
	assert.Equal(t, unix.ENODEV, a.errno, "no extack: %+v", a)
	assert.Equal(t, uint16(0), a.flags&nlattr.FlagAckTLVs, "no extack: %+v", a)
	assert.Equal(t, "", a.msg, "no extack: %+v", a)
	a = setOpt(unix.NETLINK_GET_STRICT_CHK, 1)
	assert.Equal(t, unix.Errno(0), a.errno, "STRICT_CHK: %+v", a)
	setOpt(unix.NETLINK_EXT_ACK, 1)
	a = setOpt(99, 1)
	assert.Equal(t, unix.ENOPROTOOPT, a.errno, "unknown option: %+v", a)
	assert.Equal(t, "unsupported socket option 99", a.msg, "unknown option: %+v", a)
	a = setOpt(unix.NETLINK_CAP_ACK, 2)
	assert.Equal(t, unix.ERANGE, a.errno, "value 2: %+v", a)
}

func TestLimits(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.MaxConns = 2; c.Transport.MaxMessage = 512 })
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")

	t.Run("message too large", func(t *testing.T) {
		m := newMsg(eth, nlattr.FlagRequest, 12, unix.ETHTOOL_MSG_RINGS_GET, 1)
		m.Put(99, make([]byte, 1000))
		rc.send(m.done())
		msgs := rc.recv()
		a := decodeAck(t, msgs[0])
		if a.errno != unix.EMSGSIZE || a.msg != "request datagram exceeds the 512-byte limit" || msgs[0].h.Seq != 12 {
			t.Errorf("%+v", a)
		}
		// The connection survives.
		rc.send(ringsGetByName(eth, 13, 0, "mana0"))
		if msgs := rc.recv(); msgs[0].h.Type != eth {
			t.Errorf("after oversize: %+v", msgs[0].h)
		}
	})
	t.Run("too many connections", func(t *testing.T) {
		second := dialRaw(t, ts.path)
		second.send(ringsGetByName(eth, 1, 0, "mana0"))
		second.recv() // now certainly registered
		// Root is never refused: the third peer is another uid.
		third := dialUnprivileged(t, ts.path)
		third.send(ringsGetByName(eth, 14, 0, "mana0"))
		msgs := third.recv()
		a := decodeAck(t, msgs[0])
		if a.errno != unix.EUSERS || a.msg != "manad: too many connections (limit 2)" || msgs[0].h.Seq != 14 {
			t.Errorf("%+v", a)
		}
		buf := make([]byte, 64)
		if _, err := third.c.Read(buf); !errors.Is(err, io.EOF) {
			t.Errorf("rejected connection not closed: %v", err)
		}
		assert.Contains(t, ts.logs.String(), "connection refused", "no log line")
		// The client library shows the errno and message.
		_, err := clientDialUnprivileged(ts.path)
		assert.ErrorIs(t, err, unix.EUSERS, "client.Dial over the limit: %v", err)
		assert.Contains(t, err.Error(), "too many connections", "client.Dial over the limit: %v", err)
	})
}

func TestDialNotRunning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.sock")
	_, err := client.Dial(path)
	assert.ErrorIs(t, err, unix.ENOENT, "absent: %v", err)
	assert.True(t, strings.HasPrefix(err.Error(), "cannot connect to manad at "+path+": "), "absent: %v", err)
	// A socket nobody listens on.
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(false)
	l.Close()
	_, err = client.Dial(path)
	assert.ErrorIs(t, err, unix.ECONNREFUSED, "stale")
}

func TestDumpsOverManyPorts(t *testing.T) {
	ts := startServer(t, nil)
	const extra = 400
	for i := range extra {
		ts.be.AddPort(ts.ns, fmt.Sprintf("p%d", i))
	}
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	ports, err := c.Ports(ctx)
	require.NoError(t, err)
	require.Len(t, ports, extra+2, "%d ports, want %d", len(ports), extra+2)
	for i := 1; i < len(ports); i++ {
		require.Greater(t, ports[i].Device.Index, ports[i-1].Device.Index, "ports not in ifindex order at %d", i)
	}
	pf, err := c.AllPrivateFlags(ctx)
	require.NoError(t, err, "AllPrivateFlags: %d, %v", len(pf), err)
	require.Len(t, pf, extra+2, "AllPrivateFlags: %d, %v", len(pf), err)
	st, err := c.AllStats(ctx)
	require.NoError(t, err, "AllStats: %d, %v", len(st), err)
	require.Len(t, st, extra+2, "AllStats: %d, %v", len(st), err)

	// On the wire: several datagrams of NLM_F_MULTI messages, then DONE,
	// last in its datagram.
	rc := dialRaw(t, ts.path)
	mf := manadFamilyID(t, rc, wire.FamilyName)
	rc.send(newMsg(mf, nlattr.FlagRequest|nlattr.FlagDump|nlattr.FlagAck, 21, wire.CmdPortGet, 1).done())
	datagrams, n := 0, 0
	for done := false; !done; {
		msgs := rc.recv()
		datagrams++
		for i, m := range msgs {
			require.Equal(t, uint32(21), m.h.Seq, "dump message %+v", m.h)
			require.Equal(t, uint32(4242), m.h.PID, "dump message %+v", m.h)
			require.NotEqual(t, uint16(0), m.h.Flags&nlattr.FlagMulti, "dump message %+v", m.h)
			if m.h.Type == nlattr.MsgDone {
				require.Equal(t, len(msgs)-1, i, "DONE not last or with error")
				require.Equal(t, uint32(0), binary.NativeEndian.Uint32(m.data), "DONE not last or with error")
				done = true
				continue
			}
			n++
		}
	}
	assert.Equal(t, extra+2, n, "%d messages in %d datagrams", n, datagrams)
	assert.GreaterOrEqual(t, datagrams, 2, "%d messages in %d datagrams", n, datagrams)
	// No ACK after a dump, even with NLM_F_ACK: the next datagram answers
	// the next request.
	rc.send(ringsGetByName(manadFamilyID(t, rc, "ethtool"), 22, 0, "mana0"))
}

func TestRequestContext(t *testing.T) {
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		pre.be.Hook = func(ctx context.Context, op string) error {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- ctx.Err()
			return ctx.Err()
		}
	})
	c := dialClient(t, ts.path)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Rings(ctx, client.Interface{Name: "mana0"})
	assert.ErrorIs(t, err, context.DeadlineExceeded, "client error %v, want DeadlineExceeded", err)
	<-started
	// The client abandoned the connection: the server's request context
	// is cancelled.
	assert.ErrorIs(t, <-cancelled, context.Canceled, "backend saw")
	// The client reconnects for the next request.
	_, err = c.PrivateFlags(ctxT(t), client.Interface{Name: "mana0"})
	assert.NoError(t, err, "after abandon")
}

func TestKernelClientRefusesManadRequests(t *testing.T) {
	kc, err := client.DialKernel()
	if err != nil {
		t.Skipf("no kernel ethtool netlink: %v", err)
	}
	defer kc.Close()
	_, err = kc.Ports(ctxT(t))
	assert.ErrorIs(t, err, unix.EOPNOTSUPP, "Ports on the kernel")
	assert.ErrorIs(t, kc.SetMTU(ctxT(t), client.Interface{Name: "lo"}, 1500), unix.EOPNOTSUPP, "SetMTU on the kernel")
}

// TestClientNotReadingReplies: a client that sends requests but never reads
// is dropped once a reply write exceeds WriteTimeout; other clients keep
// being served meanwhile.
func TestClientNotReadingReplies(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.WriteTimeout = 100 * time.Millisecond })
	for i := range 50 {
		ts.be.AddPort(ts.ns, fmt.Sprintf("q%d", i))
	}
	lazy := dialRaw(t, ts.path)
	mf := manadFamilyID(t, lazy, wire.FamilyName)
	dump := newMsg(mf, nlattr.FlagRequest|nlattr.FlagDump, 1, wire.CmdPortGet, 1).done()
	for range 100 {
		if _, err := lazy.c.Write(dump); err != nil {
			break // the server already dropped us
		}
	}
	other := dialClient(t, ts.path)
	if _, err := other.Ports(ctxT(t)); err != nil {
		t.Fatalf("another client while one is stuck: %v", err)
	}
	// Wait for the drop before reading: reading earlier would unblock the
	// server's writes.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(ts.logs.String(), "write to client failed, dropping connection"); {
		if time.Now().After(deadline) {
			t.Fatalf("client never dropped:\n%s", ts.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = lazy.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 1<<20)
	for {
		if _, err := lazy.c.Read(buf); err != nil {
			if !errors.Is(err, io.EOF) {
				assert.ErrorIs(t, err, unix.ECONNRESET, "lazy client: %v, want EOF or ECONNRESET", err)
			}
			break
		}
	}
}
