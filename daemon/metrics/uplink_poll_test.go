package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/wire"
)

// TestUplinkBusyPollMetrics: an uplink's busy-poll counters (SEGMENT_GET's POLLS, POLL_HITS,
// POLL_NANOS) land in their families, the CPU time in seconds.
func TestUplinkBusyPollMetrics(t *testing.T) {
	src := SegmentSourceFunc(func() []Segment {
		return []Segment{{Name: "wire0", Uplinks: []wire.UplinkInfo{{Dev: "vx0", NetNS: "hostA",
			State: wire.UplinkAttached, BusyPollUs: 50, Polls: 7, PollHits: 3, PollNanos: 2_500_000_000}}}}
	})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(NewSegmentCollector(src)))
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"manad_uplink_busy_polls_total", 7},
		{"manad_uplink_busy_poll_hits_total", 3},
		{"manad_uplink_busy_poll_cpu_seconds_total", 2.5},
	} {
		fams, err := reg.Gather()
		require.NoError(t, err)
		var got []float64
		for _, f := range fams {
			if f.GetName() == tc.name {
				for _, m := range f.GetMetric() {
					got = append(got, m.GetCounter().GetValue())
				}
			}
		}
		assert.Equal(t, []float64{tc.want}, got, tc.name)
	}
}
