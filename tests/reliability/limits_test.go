package reliability

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The control socket's connection limits against the real daemon (issue 13): the refusal path
// at the limit, the per-uid cap with root still served, the idle timeout, rate-limited refusal
// logs, and answers larger than one datagram.

// limitsDaemon starts manad without ports, with extra [daemon] keys, on a socket every user
// may reach.
func limitsDaemon(t *testing.T, extra string) *harness.Daemon {
	t.Helper()
	return harness.Start(t, openDir(t), extra, "")
}

// dialUser connects a raw client to d as uid (gid = uid, no supplementary groups).
func dialUser(t *testing.T, d *harness.Daemon, uid uint32) *rawConn {
	t.Helper()
	var c *rawConn
	require.NoError(t, asUser("", uid, uid, nil, func() (err error) {
		c, err = dialRaw(d.Socket)
		return err
	}))
	t.Cleanup(c.Close)
	return c
}

// getFamily is a request any connection may send: CTRL_CMD_GETFAMILY "manad".
func getFamily(seq uint32) []byte {
	return genlmsg(nlctrlID, fRequest, seq, unix.CTRL_CMD_GETFAMILY, 1, strA(unix.CTRL_ATTR_FAMILY_NAME, "manad"))
}

// admitted sends getFamily and reports whether c was served (true) or refused with EUSERS;
// anything else fails the test. The refusal's message is returned.
func admitted(t *testing.T, c *rawConn, seq uint32) (bool, string) {
	t.Helper()
	msgs, err := c.roundTrip(getFamily(seq))
	require.NoError(t, err, "request %d", seq)
	if len(msgs) == 1 && msgs[0].Type == nlctrlID {
		return true, ""
	}
	require.Len(t, msgs, 1, "request %d: unexpected answer %+v", seq, msgs)
	require.Equal(t, uint16(nlmError), msgs[0].Type, "request %d: unexpected answer %+v", seq, msgs)
	require.Equal(t, seq, msgs[0].Seq, "request %d: unexpected answer %+v", seq, msgs)
	a, err := parseAck(msgs[0])
	require.NoError(t, err, "request %d: want a reply or EUSERS, got %v %q (%v)", seq, a.Errno, a.Msg, err)
	require.Equal(t, unix.EUSERS, a.Errno, "request %d: want a reply or EUSERS, got %v %q (%v)", seq, a.Errno, a.Msg, err)
	return false, a.Msg
}

// fillOthers admits n connections of unprivileged uids (per of each) and keeps them open.
func fillOthers(t *testing.T, d *harness.Daemon, n, per int) {
	t.Helper()
	for i := range n {
		c := dialUser(t, d, 30000+uint32(i/per))
		ok, msg := admitted(t, c, uint32(i+1))
		require.True(t, ok, "unprivileged connection %d of %d refused: %s", i+1, n, msg)
	}
}

// rootServed checks that root's manactl and client still work.
func rootServed(t *testing.T, d *harness.Daemon) {
	t.Helper()
	c, err := client.Dial(d.Socket)
	require.NoError(t, err, "root client.Dial")
	defer c.Close()
	_, err = c.Ports(bg(t))
	require.NoError(t, err, "root request")
	harness.Run(t, "", manactlFor(t), "--socket", d.Socket, "list") // fails the test unless it exits 0
}

// TestRefusalAtLimit: with the shared room of unprivileged users full, a refused uid-65534
// connection sends datagrams whose nlmsg_len lies; each gets EUSERS echoing a 16-byte header,
// and manad keeps running (it used to slice by nlmsg_len and panic on 0xffffffff).
func TestRefusalAtLimit(t *testing.T) {
	d := limitsDaemon(t, "max_connections = 16\nmax_connections_per_uid = 4\n")
	fillOthers(t, d, 14, 4) // 16 less the 16/8 kept for root and admin_group
	req := getFamily(77)
	lie := func(n uint32) []byte {
		b := append([]byte(nil), req...)
		ne.PutUint32(b, n)
		return b
	}
	for _, tc := range []struct {
		name string
		d    []byte
	}{
		{"nlmsg_len 0xffffffff", lie(0xffffffff)},
		{"nlmsg_len past the datagram", lie(uint32(len(req) + 4))},
		{"nlmsg_len 0", lie(0)},
		{"nlmsg_len 15", lie(15)},
		{"header only claiming 4 GiB", lie(0xffffffff)[:16]},
		{"64 KiB claiming 1 MiB", append(lie(1<<20), make([]byte, 64<<10)...)},
		{"valid", req},
	} {
		c := dialUser(t, d, nobody)
		msgs, err := c.roundTrip(tc.d)
		require.NoError(t, err, "%s: %v\n%s", tc.name, err, lastLines(d.Log(), 20))
		require.Len(t, msgs, 1, "%s: answer %+v", tc.name, msgs)
		require.Equal(t, uint16(nlmError), msgs[0].Type, "%s: answer %+v", tc.name, msgs)
		require.Equal(t, uint32(77), msgs[0].Seq, "%s: answer %+v", tc.name, msgs)
		a, err := parseAck(msgs[0])
		if err != nil || a.Errno != unix.EUSERS || !a.Capped || a.Echo.Len != nlHdrLen ||
			a.Msg != "manad: too many connections (limit 16, of which 2 reserved for root and the admin group)" {
			t.Errorf("%s: %+v (%v)", tc.name, a, err)
		}
		_, err = c.recvDatagram()
		assert.ErrorIs(t, err, errClosed, "%s: refused connection not closed", tc.name)
	}
	rootServed(t, d)
}

// TestPerUIDCap: uid 65534 holds the connections it may; its next is refused with a message
// naming the per-user limit, while another user, root's manactl and root's client are served.
// A flood of refused connections writes a bounded number of log lines.
func TestPerUIDCap(t *testing.T) {
	d := limitsDaemon(t, "max_connections = 64\nmax_connections_per_uid = 4\n")
	for i := range 4 {
		ok, msg := admitted(t, dialUser(t, d, nobody), uint32(i+1))
		require.True(t, ok, "connection %d of uid 65534 refused: %s", i+1, msg)
	}
	ok, msg := admitted(t, dialUser(t, d, nobody), 5)
	if ok || msg != "manad: too many connections for uid 65534 (limit 4 per user)" {
		t.Errorf("fifth connection of uid 65534: served %v, %q", ok, msg)
	}
	ok, msg = admitted(t, dialUser(t, d, nobody-1), 6)
	assert.True(t, ok, "uid 65533 refused: %s", msg)
	rootServed(t, d)

	// The flood: 1000 refused connections, half closed before their answer.
	before := len(d.Log())
	start := time.Now()
	const n = 1000
	for i := range n {
		c := dialUser(t, d, nobody)
		if i%2 == 0 {
			ok, _ := admitted(t, c, uint32(100+i))
			require.False(t, ok, "uid 65534 admitted past its cap")
		}
		c.Close()
		c.fd = -1 // the cleanup's Close must not close a reused descriptor
	}
	elapsed := time.Since(start)
	var warns []string
	for _, l := range strings.Split(d.Log()[before:], "\n") {
		if strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	// The first refusal is logged, then at most one per 10 s; one more for slack.
	limit := 2 + int(elapsed/(10*time.Second))
	assert.LessOrEqual(t, len(warns), limit, "%d refusals in %v wrote %d WARN lines, want at most %d:\n%s", n, elapsed, len(warns), limit, strings.Join(warns, "\n"))
	rootServed(t, d)
}

// TestIdleTimeout: connections that send nothing, or nothing more, are closed after
// idle_timeout; a subscriber to the events group is not.
func TestIdleTimeout(t *testing.T) {
	d := limitsDaemon(t, "idle_timeout = \"1s\"\n")
	gc, err := client.DialGenetlink(d.Socket)
	require.NoError(t, err)
	fam, err := gc.GetFamily(wire.FamilyName)
	gc.Close()
	require.NoError(t, err)
	var events uint32
	for _, g := range fam.Groups {
		if g.Name == "events" {
			events = g.ID
		}
	}
	sub := dialUser(t, d, nobody)
	msgs, err := sub.roundTrip(genlmsg(fam.ID, fRequest|fAck, 1, wire.CmdGroupJoin, wire.FamilyVersion, u32a(wire.AttrGroup, events)))
	require.NoError(t, err)
	a, err := parseAck(msgs[0])
	require.NoError(t, err, "join: %+v %v", a, err)
	require.Equal(t, unix.Errno(0), a.Errno, "join: %+v %v", a, err)
	silent := dialUser(t, d, nobody)
	_, err = silent.recvDatagram()
	assert.ErrorIs(t, err, errClosed, "silent connection: %v, want closed by manad", err)
	talked := dialUser(t, d, 0)
	if ok, _ := admitted(t, talked, 2); !ok {
		t.Fatal("not served")
	}
	_, err = talked.recvDatagram()
	assert.ErrorIs(t, err, errClosed, "connection idle after a request: %v, want closed by manad", err)
	// The subscriber, set up first, has now been idle for over two timeouts.
	ok, _ := admitted(t, sub, 3)
	assert.True(t, ok, "subscriber not served")
	assert.Contains(t, d.Log(), "closed idle connection", "no debug line for the idle close:\n%s", lastLines(d.Log(), 20))
}

// TestLargeAnswers: a LAYOUT_PLAN answer of some 1 MiB arrives in full; an error answering a
// 224 KiB request echoes only the header and is delivered.
func TestLargeAnswers(t *testing.T) {
	d := limitsDaemon(t, "")
	t.Run("layout plan", func(t *testing.T) {
		c, err := client.Dial(d.Socket)
		require.NoError(t, err)
		defer c.Close()
		req := genl.LayoutRequest{PageSize: 4096, MTU: 1500, RingSize: 1024, Queues: 16}
		for range 4000 { // what a LAYOUT_REQUEST nest holds
			req.Rules = append(req.Rules, "upstream")
		}
		ls, err := c.PlanLayout(bg(t), req)
		require.NoError(t, err, "PlanLayout with %d rules", len(req.Rules))
		require.Len(t, ls, len(req.Rules), "%d layouts for %d rules", len(ls), len(req.Rules))
		for i := range ls {
			require.Equal(t, ls[0], ls[i], "layout %d differs from layout 0", i)
		}
	})
	t.Run("error echo", func(t *testing.T) {
		c := dialUser(t, d, 0)
		require.NoError(t, c.forceSendBuffer(4<<20))
		eth, err := c.resolveFamily("ethtool", 1)
		require.NoError(t, err)
		hdr := nest(unix.ETHTOOL_A_RINGS_HEADER, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, "nope0"))
		var junk [][]byte
		for range 4 {
			junk = append(junk, attr(99, bytes.Repeat([]byte{0xee}, 56<<10)))
		}
		big := genlmsg(eth.ID, fRequest, 40, unix.ETHTOOL_MSG_RINGS_GET, 1, hdr, cat(junk...))
		require.GreaterOrEqual(t, len(big), int(224<<10), "request of %d bytes", len(big))
		msgs, err := c.roundTrip(big)
		require.NoError(t, err, "answer to a %d-byte request", len(big))
		require.Len(t, msgs, 1, "answer: %+v", msgs)
		require.Equal(t, uint16(nlmError), msgs[0].Type, "answer: %+v", msgs)
		require.Equal(t, uint32(40), msgs[0].Seq, "answer: %+v", msgs)
		a, err := parseAck(msgs[0])
		if err != nil || a.Errno == 0 || !a.Capped || a.Echo.Len != uint32(len(big)) || len(msgs[0].Body) > 4096 {
			t.Errorf("answer: %+v, %d bytes (%v)", a, len(msgs[0].Body), err)
		}
		if a.Msg == "" {
			assert.NotEqual(t, uint32(0), a.Offs, "extack lost: %+v", a)
		}
	})
}
