package genl_test

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/testenv"
)

// napiShape renders a napi-get message's attributes in order, as type and length, with the
// values of all but the id and ifindex (which differ between the kernel's veth and manad's
// port).
func napiShape(m rawMsg) string {
	var s string
	for it := nlattr.NewIter(m.data, 4, len(m.data)-4); it.Next(); {
		a := it.Attr()
		switch a.Type() {
		case wire.NetdevANAPIID, wire.NetdevANAPIIfindex:
			s += fmt.Sprintf("%d/%d ", a.Type(), len(a.Data))
		default:
			s += fmt.Sprintf("%d/%d=% x ", a.Type(), len(a.Data), a.Data)
		}
	}
	return s
}

// TestNetdevNAPIMatchesKernel: a napi-get dump of a manad port carries what the kernel's
// carries for a default NAPI of a veth with GRO on (one that has NAPIs): the same attributes in
// the same order and sizes, threaded, defer-hard-irqs, irq-suspend-timeout and
// gro-flush-timeout all 0; and the client decodes them.
func TestNetdevNAPIMatchesKernel(t *testing.T) {
	if major, minor := kernelRelease(t); major < 6 || major == 6 && minor < 17 {
		t.Skipf("kernel %d.%d: napi-get has all four settings since 6.17", major, minor)
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "needs ethtool: %v", err)
	}
	kc, vethIdx := kernelInNetNS(t)
	// A veth has NAPIs only with GRO (or XDP).
	out, err := exec.Command("ip", "netns", "exec", kernelNetNSName(), "ethtool", "-K", "nd0", "gro", "on").CombinedOutput()
	require.NoError(t, err, "ethtool -K nd0 gro on: %s", out)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kid, mid := kc.family(wire.NetdevFamilyName), manadFamilyID(t, rc, wire.NetdevFamilyName)
	dump := func(fam uint16, ifi uint32) []byte {
		return netdevReq(fam, nlattr.FlagDump, wire.NetdevCmdNAPIGet, func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIIfindex, ifi) })
	}
	kn, kdone := dumpAll(t, kc.send, kc.recv, dump(kid, vethIdx))
	mn, mdone := dumpAll(t, rc.send, rc.recv, dump(mid, ts.mana0.Dev.Index))
	require.Zero(t, decodeDone(t, kdone).errno)
	require.Zero(t, decodeDone(t, mdone).errno)
	require.NotEmpty(t, kn, "the veth with GRO on has no NAPI")
	require.NotEmpty(t, mn, "mana0 has no NAPI")
	want := napiShape(kn[0])
	assert.Contains(t, want, fmt.Sprintf("%d/4=00 00 00 00", wire.NetdevANAPIThreaded), "the kernel's shape: %s", want)
	for _, m := range mn {
		assert.Equal(t, want, napiShape(m), "napi-get shape (kernel, manad)")
	}

	c, err := client.Dial(ts.path)
	require.NoError(t, err)
	defer c.Close()
	napis, err := c.NAPIs(ctxT(t), ts.mana0.Dev.Index)
	require.NoError(t, err)
	require.Len(t, napis, len(mn))
	for _, n := range napis {
		assert.Equal(t, wire.NetdevNAPI{ID: n.ID, Ifindex: ts.mana0.Dev.Index}, n, "a default NAPI")
		assert.NotZero(t, n.ID)
	}
}
