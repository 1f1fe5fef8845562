package genl_test

import (
	"context"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// without returns b with the named ops nil.
func without(b genl.Backend, ops ...string) genl.Backend {
	v := reflect.ValueOf(&b).Elem()
	for _, name := range ops {
		v.FieldByName(name).SetZero()
	}
	return b
}

// TestNilOps: a Backend without an op answers as the kernel answers for a driver without that
// callback (most: EOPNOTSUPP once the device is resolved; a dump skips the device), or as the
// message does without it (no link state, the core's timestamping bits, empty string sets),
// and calls nothing: the device is left as it was. The same requests with every op succeed
// (TestPrivateFlags, TestRings, TestManadPorts, … on the full MemBackend).
func TestNilOps(t *testing.T) {
	mana0 := client.Interface{Name: "mana0"}
	u32 := func(v uint32) *uint32 { return &v }
	for _, tc := range []struct {
		name string
		nil  []string // the Backend ops left nil
		call func(ctx context.Context, c *client.Client) error
		want unix.Errno
		msg  string // part of the extack message, when there is one
	}{
		{"privflags-get", []string{"PrivFlags"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.PrivateFlags(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, ""},
		{"privflags-set without set", []string{"SetPrivFlags"}, func(ctx context.Context, c *client.Client) error {
			return c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Index: 0, On: true}}})
		}, unix.EOPNOTSUPP, ""},
		{"privflags-set without get", []string{"PrivFlags"}, func(ctx context.Context, c *client.Client) error {
			return c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Index: 0, On: true}}})
		}, unix.EOPNOTSUPP, ""},
		{"rings-get", []string{"Rings"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.Rings(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, ""},
		// ethnl_set_rings_validate checks the ops before the parameters it cannot set.
		{"rings-set", []string{"SetRings"}, func(ctx context.Context, c *client.Client) error {
			return c.SetRings(ctx, mana0, client.RingsUpdate{Rx: u32(512), CQESize: u32(128)})
		}, unix.EOPNOTSUPP, ""},
		{"channels-get", []string{"Channels"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.Channels(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, ""},
		// Refused before the counts are checked (100 is over the maximum).
		{"channels-set", []string{"SetChannels"}, func(ctx context.Context, c *client.Client) error {
			return c.SetChannels(ctx, mana0, client.ChannelsUpdate{Combined: u32(100)})
		}, unix.EOPNOTSUPP, ""},
		{"coalesce-get", []string{"Coalesce"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.Coalesce(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, ""},
		{"coalesce-set", []string{"SetCoalesce"}, func(ctx context.Context, c *client.Client) error {
			return c.SetCoalesce(ctx, mana0, client.CoalesceUpdate{U32: map[uint16]uint32{wire.CoalesceRxCQEFrames: 4}})
		}, unix.EOPNOTSUPP, ""},
		{"rss-get", []string{"RSS"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.RSS(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, ""},
		// ethnl_rss_set without get_rxfh and set_rxfh: a change is EOPNOTSUPP.
		{"rss-set", []string{"RSS", "SetRSS"}, func(ctx context.Context, c *client.Client) error {
			return c.SetRSS(ctx, mana0, wire.RSSSet{Indir: []uint32{0, 1}})
		}, unix.EOPNOTSUPP, ""},
		{"linkinfo-get", []string{"LinkSettings"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.LinkSettings(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, "failed to retrieve link settings"},
		{"port-get", []string{"Port"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.Port(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, "port-get is not supported by this backend (it has no Port)"},
		{"port-get dump", []string{"Ports"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.Ports(ctx)
			return err
		}, unix.EOPNOTSUPP, "no Ports"},
		{"port-set-mtu", []string{"SetMTU"}, func(ctx context.Context, c *client.Client) error {
			return c.SetMTU(ctx, mana0, 4000)
		}, unix.EOPNOTSUPP, "port-set-mtu"},
		{"port-del with its netns", []string{"DeletePortNetNS"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.DeletePortNetNS(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, "cannot delete namespaces"},
		{"stats-get", []string{"Stats"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.Stats(ctx, mana0)
			return err
		}, unix.EOPNOTSUPP, "stats-get"},
		{"fault-set", []string{"SetFault"}, func(ctx context.Context, c *client.Client) error {
			return c.SetFault(ctx, mana0, wire.Fault{Point: "rx", Mode: "fail"})
		}, unix.EOPNOTSUPP, "fault-set"},
		{"segment-new", []string{"CreateSegment"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateSegment(ctx, wire.SegmentSpec{Name: "wire0"})
			return err
		}, unix.EOPNOTSUPP, "segment-new"},
		{"dev-get", []string{"NetdevPort"}, func(ctx context.Context, c *client.Client) error {
			_, err := c.NetdevDevs(ctx)
			return err
		}, unix.EOPNOTSUPP, "no netdev views"},
		// No NAPI the server could change: the id is unknown.
		{"napi-set", []string{"SetNAPI"}, func(ctx context.Context, c *client.Client) error {
			return c.NAPISet(ctx, 1, wire.NetdevNAPISet{})
		}, unix.ENOENT, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) { c.Backend = without(c.Backend, tc.nil...) })
			c := dialClient(t, ts.path)
			err := tc.call(ctxT(t), c)
			assert.ErrorIs(t, err, tc.want)
			if tc.msg != "" {
				assert.ErrorContains(t, err, tc.msg)
			}
			assert.Empty(t, ts.be.Calls(), "backend changed")
		})
	}
}

// TestNilOpsAnswers: the messages that answer without their op, as the kernel's do without the
// driver callback.
func TestNilOpsAnswers(t *testing.T) {
	ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		c.Backend = without(c.Backend, "LinkState", "TSInfo", "StringSet", "Rings")
	})
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}

	// linkstate_fill_reply leaves the link out when get_link is missing: the carrier the
	// MemBackend has (true) is not reported.
	ls, err := c.LinkState(ctx, mana0)
	require.NoError(t, err)
	assert.False(t, ls.Link, "link state without LinkState")

	// __ethtool_get_ts_info without get_ts_info: the core's software bits, no PHC.
	ts0, err := c.TSInfo(ctx, mana0)
	require.NoError(t, err)
	assert.Equal(t, int32(-1), ts0.PHCIndex)
	assert.Empty(t, ts0.TxTypes)
	assert.Empty(t, ts0.RxFilters)
	assert.NotEmpty(t, ts0.Timestamping, "the core's software timestamping bits")

	// strset_prepare_set: no get_sset_count is count 0.
	names, err := c.StringSet(ctx, mana0, ethtool.SSPrivFlags)
	require.NoError(t, err)
	assert.Empty(t, names)

	// ethnl_default_dumpit skips a device whose prepare_data is EOPNOTSUPP: an empty dump.
	all, err := c.AllRings(ctx)
	require.NoError(t, err)
	assert.Empty(t, all)
}

// TestClientGet: a GET described by a wire table is read with client.Get and client.GetAll,
// without client code of its own: the same answers as the client's own methods.
func TestClientGet(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}

	want, err := c.Coalesce(ctx, mana0)
	require.NoError(t, err)
	got, err := client.Get(ctx, c, unix.ETHTOOL_MSG_COALESCE_GET, unix.ETHTOOL_A_COALESCE_HEADER, mana0, wire.CoalesceTable)
	require.NoError(t, err)
	assert.Equal(t, want.Interface, got.Interface)
	assert.Equal(t, want.Coalesce, got.Value)

	all, err := client.GetAll(ctx, c, unix.ETHTOOL_MSG_RINGS_GET, unix.ETHTOOL_A_RINGS_HEADER, wire.RingsTable)
	require.NoError(t, err)
	rings, err := c.AllRings(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2, "mana0 and mana1 (lo0 has no rings)")
	require.Len(t, rings, len(all))
	for i := range all {
		assert.Equal(t, rings[i].Interface, all[i].Interface)
		assert.Equal(t, rings[i].Rings, all[i].Value)
	}

	_, err = client.Get(ctx, c, unix.ETHTOOL_MSG_RINGS_GET, unix.ETHTOOL_A_RINGS_HEADER, client.Interface{Name: "nosuch0"}, wire.RingsTable)
	assert.ErrorIs(t, err, unix.ENODEV)
}
