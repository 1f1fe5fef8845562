package daemon

import (
	"reflect"
	"sync"
	"testing"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
)

// TestNetdevViews: netdevPort builds exactly the views asked for, each as the full conversion
// has it, and leaves the others empty (Dev is always there: it costs nothing).
func TestNetdevViews(t *testing.T) {
	var mu sync.Mutex
	vp, _ := newModelPort(t, &mu, vnic.Config{Name: "pv0", PageSize: 16384}, vnic.Settings{MTU: 1500, Queues: 2, RxRing: 128, TxRing: 128})
	vp.SetIfindex(7)
	mu.Lock()
	err := vp.Open()
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if r := vp.Receive(0, frame()); r != vnic.RxDelivered {
		t.Fatalf("Receive: %v", r)
	}

	full := netdevPort(7, vp, genl.NetdevViewAll)
	if len(full.Queues) != 4 || len(full.NAPIs) != 2 || len(full.QueueStats) != 4 || len(full.Pools) != 2 || full.Device.RxPackets != 1 {
		t.Fatalf("full views: %+v", full)
	}
	// dev-get is mana's (mana_probe_port's xdp_features, no RX metadata, no XSK features), and a
	// NAPI has the kernel's defaults: not threaded, no deferral, no timeouts.
	if want := (wire.NetdevDev{Ifindex: 7, XDPFeatures: 7}); full.Dev != want {
		t.Errorf("dev-get %+v, want %+v", full.Dev, want)
	}
	if got := wire.NetdevXDPActList(full.Dev.XDPFeatures); !reflect.DeepEqual(got, []string{"basic", "redirect", "ndo-xmit"}) {
		t.Errorf("xdp-features %v, want mana's basic, redirect, ndo-xmit", got)
	}
	for _, n := range full.NAPIs {
		if want := (wire.NetdevNAPI{ID: n.ID, Ifindex: 7}); n != want || n.ID == 0 {
			t.Errorf("NAPI %+v, want %+v", n, want)
		}
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
			if got := netdevPort(7, vp, tc.want); !reflect.DeepEqual(got, tc.part) {
				t.Errorf("views %b:\n got %+v\nwant %+v", tc.want, got, tc.part)
			}
		})
	}
}
