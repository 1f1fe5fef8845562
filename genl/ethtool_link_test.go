package genl_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// TestLinkMessagesManaRules: the link messages report what the backend's
// port reports, with mana's fixed parts: PORT_OTHER, full duplex, autoneg
// off, no link modes; the link follows the carrier; time stamping is the
// ethtool core's software bits only, without a PHC.
func TestLinkMessagesManaRules(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	ifi := client.Interface{Index: int(ts.mana0.Dev.Index), Name: "mana0"}

	for _, tc := range []struct {
		name string
		link genl.LinkSettings
	}{
		{"known speed", genl.LinkSettings{Speed: 200000, Duplex: wire.DuplexFull, Port: wire.PortOther}},
		{"unknown speed", genl.LinkSettings{Speed: wire.SpeedUnknown, Duplex: wire.DuplexFull, Port: wire.PortOther}},
		{"lanes reported", genl.LinkSettings{Speed: 100000, Duplex: wire.DuplexFull, Port: wire.PortOther, Lanes: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) { d.Link = tc.link })
			got, err := c.LinkSettings(ctx, mana0)
			require.NoError(t, err)
			want := &client.LinkSettings{Interface: ifi, LinkSettings: tc.link}
			assert.Empty(t, cmp.Diff(want, got), "LinkSettings (-want +got)")
		})
	}

	for _, carrier := range []bool{true, false, true} {
		ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) { d.Carrier = carrier })
		got, err := c.LinkState(ctx, mana0)
		require.NoError(t, err)
		assert.Equal(t, carrier, got.Link, "carrier %v: LinkState %+v", carrier, got)
		assert.Equal(t, ifi, got.Interface, "carrier %v: LinkState %+v", carrier, got)
	}

	tsi, err := c.TSInfo(ctx, mana0)
	require.NoError(t, err)
	// The names are the running kernel's table; without one the bits have no names.
	want := &client.TSInfo{Interface: ifi, Timestamping: []string{"software-receive", "software-system-clock"}, PHCIndex: -1}
	assert.Empty(t, cmp.Diff(want, tsi), "TSInfo (-want +got)")

	// A plain device (no such ops) has none of them.
	for name, get := range map[string]func() error{
		"LinkSettings": func() error { _, err := c.LinkSettings(ctx, client.Interface{Name: "lo0"}); return err },
		"LinkState":    func() error { _, err := c.LinkState(ctx, client.Interface{Name: "lo0"}); return err },
		"TSInfo":       func() error { _, err := c.TSInfo(ctx, client.Interface{Name: "lo0"}); return err },
	} {
		assert.Error(t, get(), "%s of a plain device: no error", name)
	}
}

// TestLinkModesDumpManyPorts: a LINKMODES dump answers for every port, in
// ifindex order, across several reply datagrams, and skips plain devices.
func TestLinkModesDumpManyPorts(t *testing.T) {
	ts := startServer(t, nil)
	var want []string
	for _, d := range []*genl.MemDev{ts.mana0, ts.mana1} {
		want = append(want, d.Dev.Name)
	}
	for i := range 300 {
		d := ts.be.AddPort(ts.ns, "m"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		want = append(want, d.Dev.Name)
	}
	c := dialClient(t, ts.path)
	all, err := c.AllLinkModes(ctxT(t))
	require.NoError(t, err)
	var got []string
	for i, ls := range all {
		got = append(got, ls.Interface.Name)
		if i > 0 {
			assert.Greater(t, ls.Interface.Index, all[i-1].Interface.Index, "dump not in ifindex order at %d", i)
		}
		assert.Equal(t, uint32(200000), ls.Speed, "%s: %+v", ls.Interface.Name, ls.LinkSettings)
		assert.Equal(t, uint8(wire.DuplexFull), ls.Duplex, "%s: %+v", ls.Interface.Name, ls.LinkSettings)
	}
	assert.True(t, slices.Equal(got, want), "dumped %d devices, want %d (%v...)", len(got), len(want), got[:min(len(got), 5)])
}
