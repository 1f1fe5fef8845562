package genl_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeTap creates a TAP device (the tun driver) and removes it at the end.
func makeTap(t testing.TB) string {
	t.Helper()
	requireRoot(t)
	name := fmt.Sprintf("gnlk%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "tuntap", "add", "dev", name, "mode", "tap").CombinedOutput(); err != nil {
		t.Fatalf("ip tuntap add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		out, err := exec.Command("ip", "link", "del", name).CombinedOutput()
		assert.NoError(t, err, "ip link del: %v: %s", err, out)
	})
	return name
}

// shape is the set of attribute type paths of an attribute stream ("2/3/1"
// is type 1 in type 3 in type 2), descending into NLA_F_NESTED attributes:
// what a reply carries and how it nests, whatever the values.
func shape(data []byte) []string {
	var out []string
	var walk func(b []byte, prefix string)
	walk = func(b []byte, prefix string) {
		for it := nlattr.NewIter(b, 0, len(b)); it.Next(); {
			a := it.Attr()
			p := fmt.Sprintf("%s%d", prefix, a.Type())
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
			if a.IsNested() {
				walk(a.Data, p+"/")
			}
		}
	}
	walk(data, "")
	slices.Sort(out)
	return out
}

// TestLinkRepliesMatchKernelShape asks the kernel about a veth and a TAP and
// manad about a port, for each link message in both bitset forms, and
// requires replies of the same shape (attribute set and nesting).
func TestLinkRepliesMatchKernelShape(t *testing.T) {
	veth, tap := makeVeth(t), makeTap(t)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kc := dialKernel(t)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")
	for _, cmd := range []struct {
		name string
		cmd  uint8
	}{
		{"LINKINFO", unix.ETHTOOL_MSG_LINKINFO_GET},
		{"LINKMODES", unix.ETHTOOL_MSG_LINKMODES_GET},
		{"LINKSTATE", unix.ETHTOOL_MSG_LINKSTATE_GET},
		{"TSINFO", unix.ETHTOOL_MSG_TSINFO_GET},
	} {
		// ETHTOOL_FLAG_STATS: accepted by LINKSTATE and TSINFO, "reserved bit set" for the others.
		for _, flags := range []uint32{0, unix.ETHTOOL_FLAG_COMPACT_BITSETS, unix.ETHTOOL_FLAG_STATS} {
			compact := flags
			build := func(id uint16, dev string) []byte {
				m := newMsg(id, nlattr.FlagRequest, 9, cmd.cmd, 1)
				header(m, 1, func(m *msgBuilder) {
					m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, dev)
					if flags != 0 {
						m.PutU32(unix.ETHTOOL_A_HEADER_FLAGS, flags)
					}
				})
				return m.done()
			}
			rc.send(build(mid, "mana0"))
			mm := rc.recv()[0]
			want := shape(mm.data[4:])
			for _, kdev := range []string{veth, tap} {
				t.Run(fmt.Sprintf("%s/%s/flags=%d", cmd.name, kdev, compact), func(t *testing.T) {
					kc.send(build(kid, kdev))
					km := kc.recv()[0]
					if km.h.Type == nlattr.MsgError || mm.h.Type == nlattr.MsgError {
						// The device names differ in length: the offsets are compared from
						// the end of the request, where the flags attribute is.
						k, m := decodeAck(t, km), decodeAck(t, mm)
						assert.Equal(t, m.errno, k.errno, "kernel %+v\nmanad  %+v", k, m)
						assert.Equal(t, m.msg, k.msg, "kernel %+v\nmanad  %+v", k, m)
						assert.Equal(t, int(m.echoLen)-m.off, int(k.echoLen)-k.off, "kernel %+v\nmanad  %+v", k, m)
						return
					}
					require.Equal(t, kid, km.h.Type, "not replies: kernel type %d, manad type %d", km.h.Type, mm.h.Type)
					require.Equal(t, mid, mm.h.Type, "not replies: kernel type %d, manad type %d", km.h.Type, mm.h.Type)
					assert.Equal(t, mm.data[0], km.data[0], "reply command: kernel %d, manad %d", km.data[0], mm.data[0])
					got := shape(km.data[4:])
					assert.True(t, slices.Equal(got, want), "shape differs:\nkernel %v\nmanad  %v", got, want)
				})
			}
		}
	}
}

// TestLinkSetRefusedAsKernel: LINKINFO_SET and LINKMODES_SET on a device
// without set_link_ksettings (a veth; a MANA port) are refused alike.
func TestLinkSetRefusedAsKernel(t *testing.T) {
	veth := makeVeth(t)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kc := dialKernel(t)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")
	for _, tc := range []struct {
		name string
		cmd  uint8
		put  func(m *msgBuilder)
	}{
		{"LINKINFO_SET port", unix.ETHTOOL_MSG_LINKINFO_SET, func(m *msgBuilder) { m.PutU8(unix.ETHTOOL_A_LINKINFO_PORT, 0) }},
		{"LINKINFO_SET nothing", unix.ETHTOOL_MSG_LINKINFO_SET, func(*msgBuilder) {}},
		{"LINKMODES_SET speed", unix.ETHTOOL_MSG_LINKMODES_SET, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_LINKMODES_SPEED, 1000) }},
		{"LINKMODES_SET autoneg", unix.ETHTOOL_MSG_LINKMODES_SET, func(m *msgBuilder) { m.PutU8(unix.ETHTOOL_A_LINKMODES_AUTONEG, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func(id uint16, dev string) []byte {
				m := newMsg(id, nlattr.FlagRequest|nlattr.FlagAck, 9, tc.cmd, 1)
				header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, dev) })
				tc.put(m)
				return m.done()
			}
			kc.send(build(kid, veth))
			rc.send(build(mid, "mana0"))
			k, m := decodeAck(t, kc.recv()[0]), decodeAck(t, rc.recv()[0])
			assert.Equal(t, unix.EOPNOTSUPP, m.errno, "manad: %v %q, want EOPNOTSUPP", m.errno, m.msg)
			assert.Equal(t, m.errno, k.errno, "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, m.msg, k.msg, "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, m.off, k.off, "kernel %+v\nmanad  %+v", k, m)
		})
	}
}

// TestLinkClientOnKernel: the client decodes the kernel's link replies for a
// veth (veth_get_link_ksettings: 10000 Mb/s, full duplex, twisted pair; its
// carrier is off until the peer is up; ethtool_op_get_ts_info's bits).
func TestLinkClientOnKernel(t *testing.T) {
	veth := makeVeth(t)
	kc, err := client.DialKernel()
	require.NoError(t, err)
	defer kc.Close()
	ctx := ctxT(t)
	ifi := client.Interface{Name: veth}
	ls, err := kc.LinkSettings(ctx, ifi)
	require.NoError(t, err)
	assert.Equal(t, uint32(10000), ls.Speed, "veth link settings: %+v", ls)
	assert.Equal(t, uint8(wire.DuplexFull), ls.Duplex, "veth link settings: %+v", ls)
	assert.Equal(t, uint8(wire.PortTP), ls.Port, "veth link settings: %+v", ls)
	assert.Equal(t, uint8(wire.AutonegOff), ls.Autoneg, "veth link settings: %+v", ls)
	assert.Equal(t, veth, ls.Interface.Name, "veth link settings: %+v", ls)
	st, err := kc.LinkState(ctx, ifi)
	if assert.NoError(t, err, "veth link state") {
		assert.False(t, st.Link, "veth link state: %+v; want link down", st)
	}
	tsi, err := kc.TSInfo(ctx, ifi)
	require.NoError(t, err)
	assert.True(t, slices.Equal(tsi.Timestamping, []string{"software-transmit", "software-receive", "software-system-clock"}), "veth tsinfo: %+v", tsi)
	assert.EqualValues(t, -1, tsi.PHCIndex, "veth tsinfo: want no PHC")
}
