package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/wire"
)

func testSegments() []Segment {
	return []Segment{{
		Name: "wire0", Floods: 12, StormDrops: 3, Learnt: 4,
		Uplinks: []wire.UplinkInfo{
			{Dev: "vx0", NetNS: "hostA", State: wire.UplinkAttached, MTU: 1450, MaxPortMTU: 1400, Changes: 1, RxPackets: 10,
				RxBytes: 1000, TxPackets: 20, TxBytes: 2000, RxRunts: 1, RxOversize: 2, RxTruncated: 3, TxErrors: 4,
				TxDown: 5, TxMTUDrops: 6, RxSegmented: 7, RxCsumFilled: 8, Attaches: 9, Attach: wire.UplinkAttachXDP, TxAggregates: 11,
				TxWhole: 12, RxWhole: 13},
			{Dev: "upl", State: wire.UplinkGone},
		},
	}, {Name: "empty"}}
}

func gatherSegments(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry() // checks Collect against Describe
	reg.MustRegister(NewSegmentCollector(SegmentSourceFunc(testSegments)))
	fams, err := reg.Gather()
	require.NoError(t, err)
	return fams
}

// TestSegmentCollector: every counter lands in its family with its labels.
func TestSegmentCollector(t *testing.T) {
	fams := map[string]*dto.MetricFamily{}
	for _, f := range gatherSegments(t) {
		fams[f.GetName()] = f
	}
	vx := map[string]string{"segment": "wire0", "dev": "vx0", "netns": "hostA"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range vx {
			m[a] = b
		}
		return m
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"manad_segment_floods_total", map[string]string{"segment": "wire0"}, 12},
		{"manad_segment_storm_drops_total", map[string]string{"segment": "wire0"}, 3},
		{"manad_segment_learnt_addresses", map[string]string{"segment": "wire0"}, 4},
		{"manad_segment_learnt_addresses", map[string]string{"segment": "empty"}, 0},
		{"manad_uplink_up", vx, 1},
		{"manad_uplink_up", map[string]string{"segment": "wire0", "dev": "upl", "netns": ""}, 0},
		{"manad_uplink_state", with("state", "attached"), 1},
		{"manad_uplink_state", with("state", "gone"), 0},
		{"manad_uplink_state", map[string]string{"dev": "upl", "state": "gone"}, 1},
		{"manad_uplink_mtu_bytes", vx, 1450},
		{"manad_uplink_max_port_mtu_bytes", vx, 1400},
		{"manad_uplink_state_changes_total", vx, 1},
		{"manad_uplink_rx_packets_total", vx, 10},
		{"manad_uplink_rx_bytes_total", vx, 1000},
		{"manad_uplink_tx_packets_total", vx, 20},
		{"manad_uplink_tx_bytes_total", vx, 2000},
		{"manad_uplink_rx_dropped_total", with("reason", "runt"), 1},
		{"manad_uplink_rx_dropped_total", with("reason", "oversize"), 2},
		{"manad_uplink_rx_dropped_total", with("reason", "truncated"), 3},
		{"manad_uplink_tx_dropped_total", with("reason", "device"), 4},
		{"manad_uplink_tx_dropped_total", with("reason", "down"), 5},
		{"manad_uplink_tx_dropped_total", with("reason", "mtu"), 6},
		{"manad_uplink_rx_segmented_total", vx, 7},
		{"manad_uplink_rx_checksum_filled_total", vx, 8},
		{"manad_uplink_attaches_total", vx, 9},
		{"manad_uplink_tx_aggregates_total", vx, 11},
		{"manad_uplink_tx_whole_total", vx, 12},
		{"manad_uplink_rx_whole_total", vx, 13},
		{"manad_uplink_attachment_info", with("attach", "af_xdp"), 1},
	} {
		got, ok := value(t, fams, tt.name, tt.labels)
		if !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	// An uplink not attached yet has no attachment series.
	_, ok := value(t, fams, "manad_uplink_attachment_info", map[string]string{"dev": "upl"})
	assert.False(t, ok, "manad_uplink_attachment_info for an uplink never attached")
}

// TestSegmentCollectorLint runs promlint over the segment families.
func TestSegmentCollectorLint(t *testing.T) {
	problems, err := promlint.NewWithMetricFamilies(gatherSegments(t)).Lint()
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
