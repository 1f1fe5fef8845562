package daemon

import (
	"reflect"
	"sync"
	"testing"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNetdevViews: netdevPort builds exactly the views asked for, each as the full conversion
// has it, and leaves the others empty (Dev is always there: it costs nothing).
func TestNetdevViews(t *testing.T) {
	var mu sync.Mutex
	vp, _ := newModelPort(t, &mu, vnic.Config{Name: "pv0", Hardware: vnic.Hardware{PageSize: 16384}}, vnic.Settings{MTU: 1500, Queues: 2, RxRing: 128, TxRing: 128})
	vp.SetIfindex(7)
	mu.Lock()
	err := vp.Open()
	mu.Unlock()
	require.NoError(t, err)
	require.Equal(t, vnic.RxDelivered, vp.Receive(0, frame()), "Receive")

	full := netdevPort(7, vp, genl.NetdevViewAll)
	require.Len(t, full.Queues, 4, "full views: %+v", full)
	require.Len(t, full.NAPIs, 2, "full views: %+v", full)
	require.Len(t, full.QueueStats, 4, "full views: %+v", full)
	require.Len(t, full.Pools, 2, "full views: %+v", full)
	require.Equal(t, uint64(1), full.Device.RxPackets, "full views: %+v", full)
	// dev-get is mana's (mana_probe_port's xdp_features, no RX metadata, no XSK features), and a
	// NAPI has the kernel's defaults: not threaded, no deferral, no timeouts.
	assert.Equal(t, (wire.NetdevDev{Ifindex: 7, XDPFeatures: 7}), full.Dev, "dev-get")
	assert.Equal(t, []string{"basic", "redirect", "ndo-xmit"}, wire.NetdevXDPActList(full.Dev.XDPFeatures), "xdp-features, want mana's")
	for _, n := range full.NAPIs {
		want := (wire.NetdevNAPI{ID: n.ID, Ifindex: 7})
		assert.Equal(t, want, n, "NAPI %+v, want %+v", n, want)
		assert.NotEqual(t, uint32(0), n.ID, "NAPI %+v, want %+v", n, want)
	}
	for _, tc := range []struct {
		name string
		want genl.NetdevView
		part genl.NetdevPort
	}{
		{"dev", genl.NetdevViewDev, genl.NetdevPort{Dev: full.Dev}},
		{"queues", genl.NetdevViewQueues, genl.NetdevPort{Dev: full.Dev, Queues: full.Queues}},
		{"napis", genl.NetdevViewNAPIs, genl.NetdevPort{Dev: full.Dev, NAPIs: full.NAPIs}},
		{"qstats", genl.NetdevViewQStats, genl.NetdevPort{Dev: full.Dev, Device: full.Device, QueueStats: full.QueueStats}},
		// The device scope: the same totals (QStatsTotal, not the per-queue walk), no queues.
		{"qstats device", genl.NetdevViewQStats | genl.NetdevViewQStatsDevice, genl.NetdevPort{Dev: full.Dev, Device: full.Device}},
		{"device hint alone", genl.NetdevViewQStatsDevice, genl.NetdevPort{Dev: full.Dev}},
		{"pools", genl.NetdevViewPools, genl.NetdevPort{Dev: full.Dev, Pools: full.Pools}},
		{"queues and pools", genl.NetdevViewQueues | genl.NetdevViewPools, genl.NetdevPort{Dev: full.Dev, Queues: full.Queues, Pools: full.Pools}},
		{"all", genl.NetdevViewAll, full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := netdevPort(7, vp, tc.want)
			assert.True(t, reflect.DeepEqual(got, tc.part), "views %b:\n got %+v\nwant %+v", tc.want, got, tc.part)
		})
	}
}
