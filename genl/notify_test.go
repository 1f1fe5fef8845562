package genl_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
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
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f, err := conn.GetFamily(family)
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next := func() client.Notification {
		t.Helper()
		ns, err := sub.Next(ctx)
		if err != nil || len(ns) != 1 {
			t.Fatalf("Next: %v, %d notifications", err, len(ns))
		}
		return ns[0]
	}

	if err := c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Name: "full-page-rx", On: true}}}); err != nil {
		t.Fatal(err)
	}
	n := next()
	wantIfi := client.Interface{Index: int(ts.mana0.Dev.Index), Name: "mana0"}
	if n.Kind != client.PrivateFlagsChanged || n.Interface != wantIfi ||
		!cmp.Equal(n.PrivateFlags.Flags, []client.Flag{{Name: "full-page-rx", Index: 0, On: true}}) {
		t.Errorf("privflags NTF: %+v %+v", n, n.PrivateFlags)
	}
	seq := n.Sequence

	// A SET that changes nothing sends nothing: the next NTF is the rings
	// one, with the next sequence number and the value re-read after the
	// driver rounded it.
	if err := c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Name: "full-page-rx", On: true}}}); err != nil {
		t.Fatal(err)
	}
	rx := uint32(600)
	if err := c.SetRings(ctx, mana0, client.RingsUpdate{Rx: &rx}); err != nil {
		t.Fatal(err)
	}
	n = next()
	if n.Kind != client.RingsChanged || n.Sequence != seq+1 || n.Rings.Rx != 1024 || n.Rings.RxMax != 8192 {
		t.Errorf("rings NTF: %+v %+v", n, n.Rings)
	}
	comb := uint32(2)
	if err := c.SetChannels(ctx, mana0, client.ChannelsUpdate{Combined: &comb}); err != nil {
		t.Fatal(err)
	}
	n = next()
	if n.Kind != client.ChannelsChanged || n.Sequence != seq+2 || n.Channels.Combined != 2 {
		t.Errorf("channels NTF: %+v %+v", n, n.Channels)
	}

	// A change in another network namespace is not delivered; the daemon's
	// port event (in ours) is.
	other := genl.Device{Index: 5, Name: "mana0", NetNS: genl.NetNS{Dev: 1, Ino: 2}}
	ts.srv.NotifyPrivFlags(other, genl.PrivFlags{Names: []string{"x"}, Flags: 1})
	info, err := c.Port(ctx, mana0)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.NotifyPort(genl.EventNew, *info)
	n = next()
	if n.Kind != client.PortAdded || n.Sequence != 1 || n.Interface != wantIfi {
		t.Fatalf("port NTF: %+v", n)
	}
	if diff := cmp.Diff(info, n.Port); diff != "" {
		t.Errorf("port NTF payload (-want +got):\n%s", diff)
	}
	ts.srv.NotifyPort(genl.Event(99), *info)
	ts.srv.NotifyPort(genl.EventDel, *info)
	if n = next(); n.Kind != client.PortRemoved || n.Sequence != 2 {
		t.Errorf("del NTF: %+v", n)
	}
	if !strings.Contains(ts.logs.String(), "NotifyPort with unknown event") {
		t.Errorf("unknown event not logged")
	}
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
	if len(msgs) != 1 || m.h.Type != eth || m.h.Flags != 0 || m.h.PID != 0 || m.h.Seq != 1 ||
		m.data[0] != unix.ETHTOOL_MSG_PRIVFLAGS_NTF || m.data[1] != 1 {
		t.Fatalf("NTF header %+v % x", m.h, m.data[:4])
	}
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
	if a := joinRaw(t, rc, mf, events, wire.CmdGroupJoin); a.errno != 0 {
		t.Fatalf("join events: %+v", a)
	}
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
	ts := startServer(t, func(c *genl.ServerConfig) { c.SendQueue = 8; c.WriteTimeout = 100 * time.Millisecond })
	mf := manadFamilyID(t, dialRaw(t, ts.path), wire.FamilyName)
	monitor := groupID(t, ts.path, "ethtool", "monitor")

	stalled := dialRaw(t, ts.path)
	if a := joinRaw(t, stalled, mf, monitor, wire.CmdGroupJoin); a.errno != 0 {
		t.Fatal(a)
	}
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	const n = 1500
	for i := range n {
		ts.srv.NotifyChannels(ts.mana0.Dev, genl.Channels{CombinedMax: 64, Combined: uint32(i % 64)})
		ns, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("active subscriber, notification %d: %v", i, err)
		}
		if len(ns) != 1 || ns[0].Sequence != uint32(i+1) || ns[0].Channels.Combined != uint32(i%64) {
			t.Fatalf("notification %d: %+v", i, ns)
		}
	}

	got := 0
	buf := make([]byte, 4096)
	_ = stalled.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, err := stalled.c.Read(buf)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, unix.ECONNRESET) {
				t.Errorf("stalled subscriber: %v, want EOF (dropped)", err)
			}
			break
		}
		got++
	}
	if got >= n {
		t.Errorf("stalled subscriber got all %d notifications; it should have been dropped", got)
	}
	if !strings.Contains(ts.logs.String(), "dropping") {
		t.Errorf("drop not logged:\n%s", ts.logs.String())
	}
	t.Logf("stalled subscriber received %d of %d before being dropped", got, n)
}

// TestGenetlinkConnGroupsAndOptions: mdlayher's Conn.JoinGroup, LeaveGroup
// and SetOption work over the Unix socket (carried as manad requests).
func TestGenetlinkConnGroupsAndOptions(t *testing.T) {
	ts := startServer(t, nil)
	conn, err := client.DialGenetlink(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	eth, err := conn.GetFamily("ethtool")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.JoinGroup(eth.Groups[0].ID); err != nil {
		t.Fatalf("JoinGroup: %v", err)
	}
	err = conn.JoinGroup(999)
	var ce *client.Error
	if !errors.Is(err, unix.EINVAL) || !errors.As(err, &ce) || ce.Message != "unknown multicast group 999" || ce.Offset == 0 {
		t.Errorf("JoinGroup(999): %v", err)
	}
	if err := conn.SetOption(netlink.CapAcknowledge, true); err != nil {
		t.Errorf("SetOption(CapAcknowledge): %v", err)
	}
	if err := conn.SetOption(netlink.PacketInfo, true); !errors.Is(err, unix.ENOPROTOOPT) {
		t.Errorf("SetOption(PacketInfo): %v", err)
	}
	ts.srv.NotifyRings(ts.mana0.Dev, genl.Rings{RxMax: 1, Rx: 1})
	msgs, _, err := conn.Receive()
	if err != nil || len(msgs) != 1 || msgs[0].Header.Command != unix.ETHTOOL_MSG_RINGS_NTF {
		t.Fatalf("Receive: %+v, %v", msgs, err)
	}
	if err := conn.LeaveGroup(eth.Groups[0].ID); err != nil {
		t.Errorf("LeaveGroup: %v", err)
	}
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
	if n.Kind != client.PortAdded || n.Interface.Name != "mana1" || n.Kind.String() != "port-new" {
		t.Errorf("%+v", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Monitor returned %v", err)
	}
}
