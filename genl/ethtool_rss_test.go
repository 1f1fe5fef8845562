package genl_test

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// rssDiffCase is one RSS request sent to the kernel about a veth and to manad about one of its
// devices.
type rssDiffCase struct {
	name  string
	manad func(ts *testServer) uint32 // ifindex asked of manad
	put   func(m *msgBuilder)         // the attributes after the header
	errno unix.Errno                  // manad's answer (and so the kernel's)
}

// rssLo0 and rssMana0 pick the test server's device without RSS and its first port.
func rssLo0(ts *testServer) uint32   { return ts.lo0.Dev.Index }
func rssMana0(ts *testServer) uint32 { return ts.mana0.Dev.Index }

// rssMatchesKernel sends each case's request (cmd) to the kernel about a veth, which has no RSS
// ops, and to manad, and requires the same errno, extack message, offset, missing attribute and
// policy report. The header names the device by index, so the offsets compare as they are.
func rssMatchesKernel(t *testing.T, cmd uint8, cases []rssDiffCase) {
	t.Helper()
	veth := makeVeth(t)
	vi, err := net.InterfaceByName(veth)
	require.NoError(t, err)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kc := dialKernel(t)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			build := func(id uint16, ifindex uint32) []byte {
				m := newMsg(id, nlattr.FlagRequest|nlattr.FlagAck, uint32(200+i), cmd, 1)
				header(m, wire.RSSHeader, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, ifindex) })
				tc.put(m)
				return m.done()
			}
			kc.send(build(kid, uint32(vi.Index)))
			rc.send(build(mid, tc.manad(ts)))
			k, m := decodeAck(t, kc.recv()[0]), decodeAck(t, rc.recv()[0])
			assert.Equal(t, tc.errno, m.errno, "manad")
			assert.Equal(t, m.errno, k.errno, "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, m.msg, k.msg, "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, m.off, k.off, "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, m.missType, k.missType, "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, m.policy, k.policy, "kernel %+v\nmanad  %+v", k, m)
		})
	}
}

// TestRSSGetMatchesKernel sends RSS_GET requests about a veth (no get_rxfh) to the kernel and
// the same requests about manad's devices to manad, and requires identical error reports: a
// device without RSS is EOPNOTSUPP, START_CONTEXT outside a dump is EINVAL pointing at it
// (rss_parse_request runs before the driver is asked), a context other than 0 is EOPNOTSUPP on
// a driver without contexts.
func TestRSSGetMatchesKernel(t *testing.T) {
	rssMatchesKernel(t, unix.ETHTOOL_MSG_RSS_GET, []rssDiffCase{
		{"device without rss", rssLo0, func(*msgBuilder) {}, unix.EOPNOTSUPP},
		{"start context in a do", rssMana0, func(m *msgBuilder) { m.PutU32(wire.RSSStartContext, 0) }, unix.EINVAL},
		{"context 1", rssMana0, func(m *msgBuilder) { m.PutU32(wire.RSSContext, 1) }, unix.EOPNOTSUPP},
	})
}

// TestRSSGetReply reads a port's RSS over the client: rss_fill_reply's attributes (hfunc, a u32
// per table entry, the key; no context, no input_xfrm when zero), and the dump lists the ports
// only.
func TestRSSGetReply(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	r, err := c.RSS(ctx, client.Interface{Name: "mana0"})
	require.NoError(t, err)
	want := wire.RSS{HFunc: 1, Indir: make([]uint32, 64), HKey: make([]byte, 40)}
	for i := range want.Indir {
		want.Indir[i] = uint32(i % 4)
	}
	for i := range want.HKey {
		want.HKey[i] = byte(i)
	}
	assert.Empty(t, cmp.Diff(want, r.RSS), "RSS (-want +got)")
	assert.Equal(t, "mana0", r.Interface.Name, "RSS interface %+v", r.Interface)
	_, err = c.RSS(ctx, client.Interface{Name: "lo0"})
	assert.ErrorIs(t, err, unix.EOPNOTSUPP, "RSS of a device without RSS: %v, want EOPNOTSUPP", err)
	_, err = c.RSS(ctx, client.Interface{Name: "nosuch0"})
	assert.ErrorIs(t, err, unix.ENODEV, "RSS of an unknown device: %v, want ENODEV", err)
}
