package genl_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// joinRaw subscribes a raw connection to group with a manad GROUP_JOIN.
func joinRaw(t *testing.T, rc *rawConn, mf uint16, group uint32, cmd uint8) ackInfo {
	t.Helper()
	m := newMsg(mf, nlattr.FlagRequest|nlattr.FlagAck, 50, cmd, 1)
	m.PutU32(wire.AttrGroup, group)
	rc.send(m.done())
	return decodeAck(t, rc.recv()[0])
}

// groupID looks up a group id with the client's family view.
func groupID(t *testing.T, path, family, group string) uint32 {
	t.Helper()
	conn, err := client.DialGenetlink(path)
	require.NoError(t, err)
	defer conn.Close()
	f, err := conn.GetFamily(family)
	require.NoError(t, err)
	for _, g := range f.Groups {
		if g.Name == group {
			return g.ID
		}
	}
	t.Fatalf("no group %s/%s", family, group)
	return 0
}

func TestNotifications(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	sub, err := c.Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()
	next := func() client.Notification {
		t.Helper()
		ns, err := sub.Next(ctx)
		require.NoError(t, err, "Next: %v, %d notifications", err, len(ns))
		require.Len(t, ns, 1, "Next: %v, %d notifications", err, len(ns))
		return ns[0]
	}

	require.NoError(t, c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Name: "full-page-rx", On: true}}}))
	n := next()
	wantIfi := client.Interface{Index: int(ts.mana0.Dev.Index), Name: "mana0"}
	assert.Equal(t, client.PrivateFlagsChanged, n.Kind, "privflags NTF: %+v %+v", n, n.PrivateFlags)
	assert.Equal(t, wantIfi, n.Interface, "privflags NTF: %+v %+v", n, n.PrivateFlags)
	assert.True(t, cmp.Equal(n.PrivateFlags.Flags, []client.Flag{{Name: "full-page-rx", Index: 0, On: true}}), "privflags NTF: %+v %+v", n, n.PrivateFlags)
	seq := n.Sequence

	// A SET that changes nothing sends nothing: the next NTF is the rings
	// one, with the next sequence number and the value re-read after the
	// driver rounded it.
	require.NoError(t, c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Name: "full-page-rx", On: true}}}))
	rx := uint32(600)
	require.NoError(t, c.SetRings(ctx, mana0, client.RingsUpdate{Rx: &rx}))
	n = next()
	assert.Equal(t, client.RingsChanged, n.Kind, "rings NTF: %+v %+v", n, n.Rings)
	assert.Equal(t, seq+1, n.Sequence, "rings NTF: %+v %+v", n, n.Rings)
	assert.Equal(t, uint32(1024), n.Rings.Rx, "rings NTF: %+v %+v", n, n.Rings)
	assert.Equal(t, uint32(8192), n.Rings.RxMax, "rings NTF: %+v %+v", n, n.Rings)
	comb := uint32(2)
	require.NoError(t, c.SetChannels(ctx, mana0, client.ChannelsUpdate{Combined: &comb}))
	n = next()
	assert.Equal(t, client.ChannelsChanged, n.Kind, "channels NTF: %+v %+v", n, n.Channels)
	assert.Equal(t, seq+2, n.Sequence, "channels NTF: %+v %+v", n, n.Channels)
	assert.Equal(t, uint32(2), n.Channels.Combined, "channels NTF: %+v %+v", n, n.Channels)

	// A change in another network namespace is not delivered; the daemon's
	// port event (in ours) is.
	other := genl.Device{Index: 5, Name: "mana0", NetNS: genl.NetNS{Dev: 1, Ino: 2}}
	ts.srv.NotifyPrivFlags(other, genl.PrivFlags{Names: []string{"x"}, Flags: 1})
	info, err := c.Port(ctx, mana0)
	require.NoError(t, err)
	ts.srv.NotifyPort(genl.EventNew, *info)
	n = next()
	require.Equal(t, client.PortAdded, n.Kind, "port NTF: %+v", n)
	require.Equal(t, uint32(1), n.Sequence, "port NTF: %+v", n)
	require.Equal(t, wantIfi, n.Interface, "port NTF: %+v", n)
	assert.Empty(t, cmp.Diff(info, n.Port), "port NTF payload (-want +got)")
	ts.srv.NotifyPort(genl.Event(99), *info)
	ts.srv.NotifyPort(genl.EventDel, *info)
	if n = next(); n.Kind != client.PortRemoved || n.Sequence != 2 {
		t.Errorf("del NTF: %+v", n)
	}
	assert.Contains(t, ts.logs.String(), "NotifyPort with unknown event", "unknown event not logged")
}

// TestNotificationWireFormat checks an NTF byte-level: pid 0, flags 0,
// family-global seq, compact bitset; and group membership requests.
func TestNotificationWireFormat(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	mf := manadFamilyID(t, rc, wire.FamilyName)
	eth := manadFamilyID(t, rc, "ethtool")
	monitor := groupID(t, ts.path, "ethtool", "monitor")
	events := groupID(t, ts.path, wire.FamilyName, wire.EventsGroup)

	if a := joinRaw(t, rc, mf, 42, wire.CmdGroupJoin); a.errno != unix.EINVAL || a.msg != "unknown multicast group 42" || a.off == 0 {
		t.Errorf("unknown group: %+v", a)
	}
	if a := joinRaw(t, rc, mf, monitor, wire.CmdGroupJoin); a.errno != 0 {
		t.Fatalf("join: %+v", a)
	}
	ts.srv.NotifyPrivFlags(ts.mana0.Dev, genl.PrivFlags{Names: []string{"full-page-rx", "b"}, Flags: 0b10})
	msgs := rc.recv()
	m := msgs[0]
	require.Len(t, msgs, 1, "NTF header %+v % x", m.h, m.data[:4])
	require.Equal(t, eth, m.h.Type, "NTF header %+v % x", m.h, m.data[:4])
	require.Equal(t, uint16(0), m.h.Flags, "NTF header %+v % x", m.h, m.data[:4])
	require.Equal(t, uint32(0), m.h.PID, "NTF header %+v % x", m.h, m.data[:4])
	require.Equal(t, uint32(1), m.h.Seq, "NTF header %+v % x", m.h, m.data[:4])
	require.Equal(t, byte(unix.ETHTOOL_MSG_PRIVFLAGS_NTF), m.data[0], "NTF header %+v % x", m.h, m.data[:4])
	require.Equal(t, byte(1), m.data[1], "NTF header %+v % x", m.h, m.data[:4])
	var bs ethtool.Bitset
	var hdr []byte
	it := nlattr.NewIter(m.data, 4, len(m.data)-4)
	for it.Next() {
		switch it.Attr().Type() {
		case unix.ETHTOOL_A_PRIVFLAGS_HEADER:
			hdr = it.Attr().Data
		case unix.ETHTOOL_A_PRIVFLAGS_FLAGS:
			bs, _ = ethtool.DecodeBitset(it.Attr().Data)
		}
	}
	if hdr == nil || !cmp.Equal(bs, ethtool.Bitset{Size: 2, Compact: true, Value: []uint32{0b10}, Mask: []uint32{0b11}}) {
		t.Errorf("NTF body: header %v bitset %+v", hdr != nil, bs)
	}

	// Leave monitor, join events: only the port event arrives.
	if a := joinRaw(t, rc, mf, monitor, wire.CmdGroupLeave); a.errno != 0 {
		t.Fatalf("leave: %+v", a)
	}
	a := joinRaw(t, rc, mf, events, wire.CmdGroupJoin)
	require.Equal(t, unix.Errno(0), a.errno, "join events: %+v", a)
	ts.srv.NotifyRings(ts.mana0.Dev, genl.Rings{})
	ts.srv.NotifyPort(genl.EventChange, genl.PortInfo{Device: ts.mana0.Dev})
	m = rc.recv()[0]
	if m.h.Type != mf || m.data[0] != wire.CmdPortChangeNtf || m.h.PID != 0 {
		t.Errorf("after leave: %+v % x", m.h, m.data[:4])
	}
}

// TestStalledSubscriber: a subscriber that stops reading is dropped and
// logged; another subscriber receives every notification meanwhile, and
// Notify never blocks.
func TestStalledSubscriber(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) {
		c.Transport.SendQueue = 8
		c.Transport.WriteTimeout = 100 * time.Millisecond
	})
	mf := manadFamilyID(t, dialRaw(t, ts.path), wire.FamilyName)
	monitor := groupID(t, ts.path, "ethtool", "monitor")

	stalled := dialRaw(t, ts.path)
	a := joinRaw(t, stalled, mf, monitor, wire.CmdGroupJoin)
	require.Equal(t, unix.Errno(0), a.errno, "%v", a)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()

	const n = 1500
	for i := range n {
		ts.srv.NotifyChannels(ts.mana0.Dev, genl.Channels{CombinedMax: 64, Combined: uint32(i % 64)})
		ns, err := sub.Next(ctx)
		require.NoError(t, err, "active subscriber, notification %d", i)
		require.Len(t, ns, 1, "notification %d: %+v", i, ns)
		require.Equal(t, uint32(i+1), ns[0].Sequence, "notification %d: %+v", i, ns)
		require.Equal(t, uint32(i%64), ns[0].Channels.Combined, "notification %d: %+v", i, ns)
	}

	got := 0
	buf := make([]byte, 4096)
	_ = stalled.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, err := stalled.c.Read(buf)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				assert.ErrorIs(t, err, unix.ECONNRESET, "stalled subscriber: %v, want EOF (dropped)", err)
			}
			break
		}
		got++
	}
	assert.Less(t, got, n, "stalled subscriber got all %d notifications; it should have been dropped", got)
	assert.Contains(t, ts.logs.String(), "dropping", "drop not logged")
	t.Logf("stalled subscriber received %d of %d before being dropped", got, n)
}

// TestGenetlinkConnGroupsAndOptions: mdlayher's Conn.JoinGroup, LeaveGroup
// and SetOption work over the Unix socket (carried as manad requests).
func TestGenetlinkConnGroupsAndOptions(t *testing.T) {
	ts := startServer(t, nil)
	conn, err := client.DialGenetlink(ts.path)
	require.NoError(t, err)
	defer conn.Close()
	eth, err := conn.GetFamily("ethtool")
	require.NoError(t, err)
	require.NoError(t, conn.JoinGroup(eth.Groups[0].ID), "JoinGroup")
	err = conn.JoinGroup(999)
	var ce *client.Error
	if !errors.Is(err, unix.EINVAL) || !errors.As(err, &ce) || ce.Message != "unknown multicast group 999" || ce.Offset == 0 {
		t.Errorf("JoinGroup(999): %v", err)
	}
	assert.NoError(t, conn.SetOption(netlink.CapAcknowledge, true), "SetOption(CapAcknowledge)")
	assert.ErrorIs(t, conn.SetOption(netlink.PacketInfo, true), unix.ENOPROTOOPT, "SetOption(PacketInfo)")
	ts.srv.NotifyRings(ts.mana0.Dev, genl.Rings{RxMax: 1, Rx: 1})
	msgs, _, err := conn.Receive()
	require.NoError(t, err, "Receive: %+v, %v", msgs, err)
	require.Len(t, msgs, 1, "Receive: %+v, %v", msgs, err)
	require.Equal(t, uint8(unix.ETHTOOL_MSG_RINGS_NTF), msgs[0].Header.Command, "Receive: %+v, %v", msgs, err)
	assert.NoError(t, conn.LeaveGroup(eth.Groups[0].ID), "LeaveGroup")
}

// TestMonitor runs Client.Monitor until its context ends.
func TestMonitor(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan client.Notification, 4)
	done := make(chan error, 1)
	go func() { done <- c.Monitor(ctx, func(n client.Notification) { got <- n }) }()
	// Monitor joins asynchronously: repeat the notification until it lands.
	var n client.Notification
	for n.Kind == 0 {
		ts.srv.NotifyPort(genl.EventNew, genl.PortInfo{Device: ts.mana1.Dev})
		select {
		case n = <-got:
		case <-time.After(50 * time.Millisecond):
		}
	}
	assert.Equal(t, client.PortAdded, n.Kind, "%+v", n)
	assert.Equal(t, "mana1", n.Interface.Name, "%+v", n)
	assert.Equal(t, "port-new", n.Kind.String(), "%+v", n)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled, "Monitor returned")
}
