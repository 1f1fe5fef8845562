package genl_test

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// TestGetFamilyOverUnixSocket: genetlink.Conn.GetFamily and ListFamilies,
// unmodified, against manad's nlctrl.
func TestGetFamilyOverUnixSocket(t *testing.T) {
	ts := startServer(t, nil)
	conn, err := client.DialGenetlink(ts.path)
	require.NoError(t, err)
	defer conn.Close()

	eth, err := conn.GetFamily("ethtool")
	require.NoError(t, err, "GetFamily(ethtool)")
	assert.Equal(t, "ethtool", eth.Name, "ethtool family = %+v", eth)
	assert.Equal(t, uint8(1), eth.Version, "ethtool family = %+v", eth)
	assert.NotEqual(t, uint16(0), eth.ID, "ethtool family = %+v", eth)
	if assert.Len(t, eth.Groups, 1, "ethtool groups = %+v, want one (mdlayher/ethtool requires it)", eth.Groups) {
		assert.Equal(t, "monitor", eth.Groups[0].Name, "ethtool group (mdlayher/ethtool requires it)")
		assert.NotZero(t, eth.Groups[0].ID, "ethtool group id")
	}
	m, err := conn.GetFamily(wire.FamilyName)
	require.NoError(t, err, "GetFamily(manad)")
	assert.EqualValues(t, wire.FamilyVersion, m.Version, "manad family = %+v", m)
	if assert.Len(t, m.Groups, 1, "manad family = %+v", m) {
		assert.Equal(t, wire.EventsGroup, m.Groups[0].Name, "manad family = %+v", m)
	}
	ctrl, err := conn.GetFamily("nlctrl")
	if assert.NoError(t, err, "GetFamily(nlctrl)") {
		assert.EqualValues(t, unix.GENL_ID_CTRL, ctrl.ID, "GetFamily(nlctrl) = %+v", ctrl)
		assert.Equal(t, uint8(2), ctrl.Version, "GetFamily(nlctrl) = %+v", ctrl)
	}

	_, err = conn.GetFamily("nl80211")
	assert.ErrorIs(t, err, os.ErrNotExist, "GetFamily(unknown) error = %v, want ENOENT / os.ErrNotExist", err)
	assert.ErrorIs(t, err, unix.ENOENT, "GetFamily(unknown) error = %v, want ENOENT / os.ErrNotExist", err)

	all, err := conn.ListFamilies()
	require.NoError(t, err)
	var names []string
	for _, f := range all {
		names = append(names, f.Name)
	}
	assert.Empty(t, cmp.Diff([]string{"nlctrl", "ethtool", "manad", "netdev"}, names), "ListFamilies names (-want +got)")
}

// familyOps decodes CTRL_ATTR_OPS of a raw GETFAMILY reply.
func familyOps(t *testing.T, b []byte) (ops map[uint32]uint32, order []uint16) {
	t.Helper()
	ops = map[uint32]uint32{}
	it := nlattr.NewIter(b, 0, len(b))
	for it.Next() {
		a := it.Attr()
		order = append(order, a.Raw)
		if a.Type() != unix.CTRL_ATTR_OPS {
			continue
		}
		assert.False(t, a.IsNested(), "CTRL_ATTR_OPS has NLA_F_NESTED; the kernel sends it without")
		ops2 := nlattr.NewIter(a.Data, 0, len(a.Data))
		for ops2.Next() {
			var id, fl uint32
			in := nlattr.NewIter(ops2.Attr().Data, 0, len(ops2.Attr().Data))
			for in.Next() {
				switch in.Attr().Type() {
				case unix.CTRL_ATTR_OP_ID:
					id = in.Attr().U32()
				case unix.CTRL_ATTR_OP_FLAGS:
					fl = in.Attr().U32()
				}
			}
			ops[id] = fl
		}
	}
	return ops, order
}

// TestEthtoolFamilyMatchesKernel compares manad's CTRL_CMD_GETFAMILY answer
// for "ethtool" with the running kernel's: same attribute order, version,
// group name, and the same CTRL_ATTR_OP_FLAGS for every op both serve.
func TestEthtoolFamilyMatchesKernel(t *testing.T) {
	ts := startServer(t, nil)
	get := func(conn *genetlink.Conn) genetlink.Message {
		t.Helper()
		ae := netlink.NewAttributeEncoder()
		ae.String(unix.CTRL_ATTR_FAMILY_NAME, "ethtool")
		b, _ := ae.Encode()
		msgs, err := conn.Execute(genetlink.Message{Header: genetlink.Header{Command: unix.CTRL_CMD_GETFAMILY, Version: 1}, Data: b},
			unix.GENL_ID_CTRL, netlink.Request)
		require.NoError(t, err, "GETFAMILY: %v (%d msgs)", err, len(msgs))
		require.Len(t, msgs, 1, "GETFAMILY: %v (%d msgs)", err, len(msgs))
		return msgs[0]
	}
	kconn, err := genetlink.Dial(nil)
	if err != nil {
		t.Skipf("no kernel generic netlink: %v", err)
	}
	defer kconn.Close()
	mconn, err := client.DialGenetlink(ts.path)
	require.NoError(t, err)
	defer mconn.Close()

	km, mm := get(kconn), get(mconn)
	assert.Equal(t, mm.Header, km.Header, "genl header: kernel %+v, manad %+v", km.Header, mm.Header)
	kops, korder := familyOps(t, km.Data)
	mops, morder := familyOps(t, mm.Data)
	assert.Empty(t, cmp.Diff(korder, morder), "attribute order (-kernel +manad)")
	// The whole list is TestEthtoolOpList's; an older kernel lacks the newer ops.
	for id, fl := range mops {
		if kfl, ok := kops[id]; !ok {
			t.Logf("op %d: not in this kernel", id)
		} else if kfl != fl {
			t.Errorf("op %d: manad flags %#x, kernel %#x", id, fl, kfl)
		}
	}
	kf, _ := kconn.GetFamily("ethtool")
	mf, _ := mconn.GetFamily("ethtool")
	if kf.Version != mf.Version || kf.Groups[0].Name != mf.Groups[0].Name {
		t.Errorf("kernel %+v vs manad %+v", kf, mf)
	}
}

// TestGetFamilyErrors covers nlctrl's own error paths.
func TestGetFamilyErrors(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	tests := []struct {
		name  string
		build func(m *msgBuilder)
		errno unix.Errno
	}{
		{"neither id nor name", func(m *msgBuilder) {}, unix.EINVAL},
		{"unknown id", func(m *msgBuilder) { m.PutU16(unix.CTRL_ATTR_FAMILY_ID, 0x99) }, unix.ENOENT},
		{"unknown name", func(m *msgBuilder) { m.PutString(unix.CTRL_ATTR_FAMILY_NAME, "nope") }, unix.ENOENT},
		{"name wins over id", func(m *msgBuilder) {
			m.PutU16(unix.CTRL_ATTR_FAMILY_ID, unix.GENL_ID_CTRL)
			m.PutString(unix.CTRL_ATTR_FAMILY_NAME, "nope")
		}, unix.ENOENT},
		// No NUL within GENL_NAMSIZ: EINVAL, as the kernel's NLA_NUL_STRING check.
		{"name too long", func(m *msgBuilder) { m.PutString(unix.CTRL_ATTR_FAMILY_NAME, "a-very-long-family-name") }, unix.EINVAL},
		{"id too short", func(m *msgBuilder) { m.PutU8(unix.CTRL_ATTR_FAMILY_ID, 1) }, unix.ERANGE},
	}
	kc := dialKernel(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest, uint32(i+1), unix.CTRL_CMD_GETFAMILY, 1)
			tt.build(m)
			rc.send(m.done())
			kc.send(m.B)
			msgs := rc.recv()
			a := decodeAck(t, msgs[0])
			assert.Equal(t, tt.errno, a.errno, "errno")
			if msgs[0].h.Seq != uint32(i+1) || msgs[0].h.PID != 4242 {
				t.Errorf("seq/pid not echoed: %+v", msgs[0].h)
			}
			k := decodeAck(t, kc.recv()[0])
			assert.Equal(t, a.errno, k.errno, "kernel answered %+v, manad %+v", k, a)
			assert.Equal(t, a.msg, k.msg, "kernel answered %+v, manad %+v", k, a)
			assert.Equal(t, a.off, k.off, "kernel answered %+v, manad %+v", k, a)
		})
	}
	// A dump validates its attributes strictly (no GENL_DONT_VALIDATE_DUMP_STRICT).
	m0 := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest|nlattr.FlagDump, 60, unix.CTRL_CMD_GETFAMILY, 1)
	m0.PutU32(9, 1)
	rc.send(m0.done())
	kc.send(m0.B)
	if a, k := decodeAck(t, rc.recv()[0]), decodeAck(t, kc.recv()[0]); a.errno != unix.EINVAL || a.msg != k.msg || a.errno != k.errno || a.off != k.off {
		t.Errorf("dump with unknown attribute: manad %+v, kernel %+v", a, k)
	}

	// By id, with NLM_F_ACK: the reply, then a capped ACK in its own datagram.
	m := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest|nlattr.FlagAck, 77, unix.CTRL_CMD_GETFAMILY, 1)
	m.PutU16(unix.CTRL_ATTR_FAMILY_ID, unix.GENL_ID_CTRL)
	req := m.done()
	rc.send(req)
	reply := rc.recv()
	require.Len(t, reply, 1, "reply = %+v", reply)
	require.Equal(t, uint16(unix.GENL_ID_CTRL), reply[0].h.Type, "reply = %+v", reply)
	require.Equal(t, byte(unix.CTRL_CMD_NEWFAMILY), reply[0].data[0], "reply = %+v", reply)
	require.Equal(t, byte(2), reply[0].data[1], "reply = %+v", reply)
	ack := rc.recv()
	a := decodeAck(t, ack[0])
	if a.errno != 0 || a.flags != nlattr.FlagCapped || a.echoLen != uint32(len(req)) || len(ack[0].raw) != 36 {
		t.Errorf("ACK = %+v (%d bytes), want a 36-byte capped ACK echoing nlmsg_len %d", a, len(ack[0].raw), len(req))
	}
}
