package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/daemon/datapath"
)

// TestCollectorNAPIPolls: each queue's busy-polling counters (Endpoint.PollStats) are exported
// per port and queue as manad_napi_polls_total, _poll_hits_total and _poll_cpu_seconds_total,
// and pass promlint.
func TestCollectorNAPIPolls(t *testing.T) {
	ports := func() []Port {
		p := testPorts()
		p[0].Polls = []datapath.PollStats{{Polls: 1000, Hits: 40, CPUTime: 1500 * time.Millisecond}, {}}
		return p
	}
	c := NewCollector(SourceFunc(ports), nil)
	fams := gather(t, c)
	q0 := map[string]string{"port": "mana0", "netns": "nsA", "queue": "0"}
	q1 := map[string]string{"port": "mana0", "netns": "nsA", "queue": "1"}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"manad_napi_polls_total", q0, 1000},
		{"manad_napi_poll_hits_total", q0, 40},
		{"manad_napi_poll_cpu_seconds_total", q0, 1.5},
		{"manad_napi_polls_total", q1, 0},
	} {
		got, ok := value(t, fams, tc.name, tc.labels)
		assert.True(t, ok, "%s%v missing", tc.name, tc.labels)
		assert.Equal(t, tc.want, got, "%s%v", tc.name, tc.labels)
	}
	_, ok := value(t, fams, "manad_napi_polls_total", map[string]string{"port": "mana1"})
	assert.False(t, ok, "a port whose data path has no queues exports no poll counters")

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	all, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(all).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
}
