package genl_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// kernelNetNSName is the namespace kernelInNetNS creates, unique to the test process.
func kernelNetNSName() string { return fmt.Sprintf("gnnd%d", os.Getpid()%100000) }

// kernelInNetNS creates a unique network namespace holding an up veth pair with 4 queues
// (deleted at the end), and a kernel generic netlink socket bound in it. It returns the
// socket and the veth's ifindex.
func kernelInNetNS(t *testing.T) (*kernelConn, uint32) {
	t.Helper()
	requireRoot(t)
	ns := kernelNetNSName()
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %v: %s", args, err, out)
	}
	run("netns", "add", ns)
	t.Cleanup(func() {
		out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput()
		assert.NoError(t, err, "ip netns del %s: %v: %s", ns, err, out)
	})
	run("-n", ns, "link", "add", "nd0", "numtxqueues", "4", "numrxqueues", "4", "type", "veth",
		"peer", "name", "nd1", "numtxqueues", "4", "numrxqueues", "4")
	run("-n", ns, "link", "set", "nd0", "up")
	run("-n", ns, "link", "set", "nd1", "up")

	// A netlink socket belongs to the netns of the thread that creates it.
	k := func() *kernelConn {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		require.NoError(t, err)
		defer self.Close()
		target, err := os.Open("/run/netns/" + ns)
		require.NoError(t, err)
		defer target.Close()
		require.NoError(t, unix.Setns(int(target.Fd()), unix.CLONE_NEWNET))
		defer func() {
			if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
				panic(err) // the thread is in the wrong netns: do not let it run anything else
			}
		}()
		return dialKernel(t)
	}()
	out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "nd0").Output()
	require.NoError(t, err)
	var ifi uint32
	_, err = fmt.Sscanf(string(out), "%d:", &ifi)
	require.NoError(t, err, "ifindex of nd0 in %q", out)
	return k, ifi
}

// decodeDone decodes the NLMSG_DONE ending a dump (its error and extack) like decodeAck.
func decodeDone(t *testing.T, m rawMsg) ackInfo {
	t.Helper()
	require.Equal(t, nlattr.MsgDone, m.h.Type, "want NLMSG_DONE, got type %d (% x)", m.h.Type, m.data)
	require.GreaterOrEqual(t, len(m.data), 4, "want NLMSG_DONE, got type %d (% x)", m.h.Type, m.data)
	a := ackInfo{errno: unix.Errno(-int32(binary.NativeEndian.Uint32(m.data))), flags: m.h.Flags}
	it := nlattr.NewIter(m.data, 4, len(m.data)-4)
	for it.Next() {
		switch x := it.Attr(); x.Type() {
		case nlattr.ErrAttrMsg:
			a.msg = x.Str()
		case nlattr.ErrAttrOffs:
			a.off = int(x.U32())
		}
	}
	return a
}

func sameDone(a, b ackInfo) bool {
	return a.errno == b.errno && a.msg == b.msg && a.off == b.off && a.flags == b.flags
}

// TestNetdevErrorsMatchKernel sends requests whose answer does not depend on which devices
// exist to the kernel's netdev family and to manad's, and requires identical error reports.
func TestNetdevErrorsMatchKernel(t *testing.T) {
	kc, _ := kernelInNetNS(t)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kid, mid := kc.family(wire.NetdevFamilyName), manadFamilyID(t, rc, wire.NetdevFamilyName)
	u32 := func(typ uint16, v uint32) func(m *msgBuilder) { return func(m *msgBuilder) { m.PutU32(typ, v) } }
	info := func(f func(m *msgBuilder)) func(m *msgBuilder) {
		return func(m *msgBuilder) { n := m.Nest(wire.NetdevAPagePoolStatsInfo); f(m); m.EndNest(n) }
	}
	for _, tc := range []struct {
		name  string
		cmd   uint8
		build func(m *msgBuilder)
		errno unix.Errno
		flags uint16
	}{
		{"dev-get no ifindex", wire.NetdevCmdDevGet, nil, unix.EINVAL, 0},
		{"dev-get unknown ifindex", wire.NetdevCmdDevGet, u32(wire.NetdevADevIfindex, noSuchIfindex), unix.ENODEV, 0},
		{"dev-get ifindex 0", wire.NetdevCmdDevGet, u32(wire.NetdevADevIfindex, 0), unix.ERANGE, 0},
		{"dev-get unknown attribute", wire.NetdevCmdDevGet, u32(wire.NetdevADevXDPFeatures, 1), unix.EINVAL, 0},
		{"queue-get no id", wire.NetdevCmdQueueGet, u32(wire.NetdevAQueueIfindex, noSuchIfindex), unix.EINVAL, 0},
		{"queue-get unknown ifindex", wire.NetdevCmdQueueGet, func(m *msgBuilder) {
			m.PutU32(wire.NetdevAQueueID, 0)
			m.PutU32(wire.NetdevAQueueType, 0)
			m.PutU32(wire.NetdevAQueueIfindex, noSuchIfindex)
		}, unix.ENODEV, 0},
		{"queue-get dump with a type", wire.NetdevCmdQueueGet, u32(wire.NetdevAQueueType, 0), unix.EINVAL, nlattr.FlagDump},
		{"napi-get dump with an id", wire.NetdevCmdNAPIGet, u32(wire.NetdevANAPIID, 1), unix.EINVAL, nlattr.FlagDump},
		{"napi-get with an ifindex", wire.NetdevCmdNAPIGet, u32(wire.NetdevANAPIIfindex, 1), unix.EINVAL, 0},
		{"napi-get no id", wire.NetdevCmdNAPIGet, nil, unix.EINVAL, 0},
		{"napi-get unknown id", wire.NetdevCmdNAPIGet, u32(wire.NetdevANAPIID, noSuchIfindex), unix.ENOENT, 0},
		{"page-pool-get no id", wire.NetdevCmdPagePoolGet, nil, unix.EINVAL, 0},
		{"page-pool-get unknown id", wire.NetdevCmdPagePoolGet, u32(wire.NetdevAPagePoolID, noSuchIfindex), unix.ENOENT, 0},
		{"page-pool-stats-get no info", wire.NetdevCmdPagePoolStatsGet, nil, unix.EINVAL, 0},
		{"page-pool-stats-get no id", wire.NetdevCmdPagePoolStatsGet, info(func(*msgBuilder) {}), unix.EINVAL, 0},
		{"page-pool-stats-get by ifindex", wire.NetdevCmdPagePoolStatsGet, info(func(m *msgBuilder) {
			m.PutU32(wire.NetdevAPagePoolID, 1)
			m.PutU32(wire.NetdevAPagePoolIfindex, 1)
		}), unix.EINVAL, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc.send(netdevReq(mid, tc.flags, tc.cmd, tc.build))
			kc.send(netdevReq(kid, tc.flags, tc.cmd, tc.build))
			k, m := decodeAck(t, kc.recv()[0]), decodeAck(t, rc.recv()[0])
			if k.errno == unix.EOPNOTSUPP && tc.cmd == wire.NetdevCmdPagePoolStatsGet {
				t.Skip("the kernel was built without CONFIG_PAGE_POOL_STATS: nothing to compare with")
			}
			assert.Equal(t, tc.errno, m.errno, "manad")
			assertSameAck(t, k, m)
		})
	}
	t.Run("qstats-get unknown ifindex", func(t *testing.T) {
		b := func(m *msgBuilder) { m.PutU32(wire.NetdevAQStatsIfindex, noSuchIfindex) }
		rc.send(netdevReq(mid, nlattr.FlagDump, wire.NetdevCmdQStatsGet, b))
		kc.send(netdevReq(kid, nlattr.FlagDump, wire.NetdevCmdQStatsGet, b))
		k, m := decodeDone(t, kc.recv()[0]), decodeDone(t, rc.recv()[0])
		assert.Equal(t, unix.ENODEV, m.errno, "kernel %+v\nmanad  %+v", k, m)
		assert.True(t, sameDone(k, m), "kernel %+v\nmanad  %+v", k, m)
	})
}

// attrTypes lists the top-level attribute types of a reply, in order.
func attrTypes(m rawMsg) []uint16 {
	var out []uint16
	for it := nlattr.NewIter(m.data, 4, len(m.data)-4); it.Next(); {
		out = append(out, it.Attr().Type())
	}
	return out
}

// dumpAll sends a dump request and collects its messages up to NLMSG_DONE, which it returns
// separately.
func dumpAll(t *testing.T, send func([]byte), recv func() []rawMsg, req []byte) (msgs []rawMsg, done rawMsg) {
	t.Helper()
	send(req)
	for {
		for _, m := range recv() {
			if m.h.Type == nlattr.MsgDone || m.h.Type == nlattr.MsgError {
				return msgs, m
			}
			msgs = append(msgs, m)
		}
	}
}

// TestNetdevShapesMatchKernel: dev-get and queue-get dumps of a manad port have the kernel's
// message shapes for a veth (the same attributes in the same order; manad's RX queues add the
// napi-id a veth without NAPI lacks), and qstats-get of a device without qstats fails alike.
func TestNetdevShapesMatchKernel(t *testing.T) {
	kc, vethIdx := kernelInNetNS(t)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kid, mid := kc.family(wire.NetdevFamilyName), manadFamilyID(t, rc, wire.NetdevFamilyName)

	kDev, _ := dumpAll(t, kc.send, kc.recv, netdevReq(kid, 0, wire.NetdevCmdDevGet, func(m *msgBuilder) { m.PutU32(wire.NetdevADevIfindex, vethIdx) }))
	mDev, _ := dumpAll(t, rc.send, rc.recv, netdevReq(mid, 0, wire.NetdevCmdDevGet, func(m *msgBuilder) { m.PutU32(wire.NetdevADevIfindex, ts.mana0.Dev.Index) }))
	require.Len(t, kDev, 1, "dev-get: kernel %d replies, manad %d", len(kDev), len(mDev))
	require.Len(t, mDev, 1, "dev-get: kernel %d replies, manad %d", len(kDev), len(mDev))
	// ZC_MAX_SEGS comes only with XSK zero-copy, which neither has.
	if k, m := attrTypes(kDev[0]), attrTypes(mDev[0]); !slices.Equal(k, m) {
		t.Errorf("dev-get attributes: kernel %v, manad %v", k, m)
	}

	q := func(fam uint16, ifi uint32) []byte {
		return netdevReq(fam, nlattr.FlagDump, wire.NetdevCmdQueueGet, func(m *msgBuilder) { m.PutU32(wire.NetdevAQueueIfindex, ifi) })
	}
	kq, kdone := dumpAll(t, kc.send, kc.recv, q(kid, vethIdx))
	mq, mdone := dumpAll(t, rc.send, rc.recv, q(mid, ts.mana0.Dev.Index))
	a, b := decodeDone(t, kdone), decodeDone(t, mdone)
	require.Equal(t, unix.Errno(0), a.errno, "queue-get dump: kernel %v, manad %v", a.errno, b.errno)
	require.Equal(t, unix.Errno(0), b.errno, "queue-get dump: kernel %v, manad %v", a.errno, b.errno)
	shape := func(msgs []rawMsg) (out []string) {
		for _, m := range msgs {
			ts := attrTypes(m)
			ts = slices.DeleteFunc(ts, func(t uint16) bool { return t == wire.NetdevAQueueNAPIID })
			var typ uint32
			for it := nlattr.NewIter(m.data, 4, len(m.data)-4); it.Next(); {
				if it.Attr().Type() == wire.NetdevAQueueType {
					typ = it.Attr().U32()
				}
			}
			out = append(out, fmt.Sprint(typ, ts))
		}
		return slices.Compact(out)
	}
	if k, m := shape(kq), shape(mq); !slices.Equal(k, m) {
		t.Errorf("queue-get dump shapes: kernel %v, manad %v", k, m)
	}
	if len(kq) != 8 || len(mq) != 8 {
		t.Errorf("queue-get dump: kernel %d queues, manad %d (want 4 RX + 4 TX each)", len(kq), len(mq))
	}

	// veth has no queue stats ops: a named device fails with EOPNOTSUPP on the ifindex, as
	// manad's plain device (no netdev views).
	qs := func(fam uint16, ifi uint32) []byte {
		return netdevReq(fam, nlattr.FlagDump, wire.NetdevCmdQStatsGet, func(m *msgBuilder) { m.PutU32(wire.NetdevAQStatsIfindex, ifi) })
	}
	_, kd := dumpAll(t, kc.send, kc.recv, qs(kid, vethIdx))
	_, md := dumpAll(t, rc.send, rc.recv, qs(mid, ts.lo0.Dev.Index))
	k, m := decodeDone(t, kd), decodeDone(t, md)
	assert.Equal(t, unix.EOPNOTSUPP, k.errno, "qstats-get of a device without qstats: kernel %+v, manad %+v", k, m)
	assert.True(t, sameDone(k, m), "qstats-get of a device without qstats: kernel %+v, manad %+v", k, m)
}

// ntfShape is what a differential test compares of a notification: header, command, version,
// and each attribute's type and length, in order.
func ntfShape(m rawMsg) string {
	out := fmt.Sprintf("pid %d seq %d flags %#x cmd %d version %d:", m.h.PID, m.h.Seq, m.h.Flags, m.data[0], m.data[1])
	for it := nlattr.NewIter(m.data, 4, len(m.data)-4); it.Next(); {
		out += fmt.Sprintf(" %d/%d", it.Attr().Type(), len(it.Attr().Data))
	}
	return out
}

// TestNetdevNotificationsMatchKernel: manad's dev add/del notifications have the kernel's shape
// for a veth (pid 0, seq 0 as genl_info_init_ntf, the same attributes and lengths). The
// kernel's page-pool notifications cannot be compared here: veth's pools carry no netdev
// (veth_create_page_pool), so page_pool_user.c never announces them, and netdevsim, whose pools
// it does, is not available.
func TestNetdevNotificationsMatchKernel(t *testing.T) {
	kc, _ := kernelInNetNS(t)
	ns := kernelNetNSName()
	kid := kc.family(wire.NetdevFamilyName)
	gc, err := genetlink.Dial(nil)
	require.NoError(t, err)
	f, err := gc.GetFamily(wire.NetdevFamilyName)
	gc.Close()
	require.NoError(t, err)
	var kmgmt uint32
	for _, g := range f.Groups {
		if g.Name == wire.NetdevGroupMgmt {
			kmgmt = g.ID
		}
	}
	require.NoError(t, unix.SetsockoptInt(kc.fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(kmgmt)))
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		require.NoError(t, err, "ip %v: %v: %s", args, err, out)
	}
	// kernelNext returns the kernel's next notification of command cmd (a veth pair brings
	// one per end, and changes as it comes up).
	kernelNext := func(cmd uint8) rawMsg {
		t.Helper()
		for {
			for _, m := range kc.recv() {
				if m.h.Type == kid && m.data[0] == cmd {
					return m
				}
			}
		}
	}

	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	mf := manadFamilyID(t, rc, wire.FamilyName)
	a := joinRaw(t, rc, mf, groupID(t, ts.path, wire.NetdevFamilyName, wire.NetdevGroupMgmt), wire.CmdGroupJoin)
	require.Equal(t, unix.Errno(0), a.errno, "join mgmt: %+v", a)
	dev := wire.NetdevDev{Ifindex: ts.mana0.Dev.Index, XDPFeatures: 1}

	ip("link", "add", "nn0", "type", "veth", "peer", "name", "nn1")
	k := kernelNext(wire.NetdevCmdDevAddNtf)
	ts.srv.NotifyNetdevDev(genl.EventNew, ts.mana0.Dev, dev)
	if ks, ms := ntfShape(k), ntfShape(rc.recv()[0]); ks != ms {
		t.Errorf("dev-add-ntf: kernel %s\nmanad %s", ks, ms)
	}
	ip("link", "del", "nn0")
	k = kernelNext(wire.NetdevCmdDevDelNtf)
	ts.srv.NotifyNetdevDev(genl.EventDel, ts.mana0.Dev, dev)
	ks, ms := ntfShape(k), ntfShape(rc.recv()[0])
	assert.Equal(t, ms, ks, "dev-del-ntf: kernel %s\nmanad %s", ks, ms)
}
