package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
)

// testPorts is a source of two ports with distinct values in every counter.
func testPorts() []Port {
	var outcomes [vnic.NumReconfigOutcomes]uint64
	outcomes[vnic.ReconfigApplied] = 3
	outcomes[vnic.ReconfigAttachFailed] = 1
	return []Port{{
		Name: "mana0", NetNS: "nsA",
		State: vnic.State{Running: true, AdminUp: true, BytesPinned: 4096 * 10, PagesPinned: 10,
			MemoryInUse: 50000, MemoryPeak: 60000, MemoryBudget: 1 << 20, BuffersInFlight: 7},
		Queues: []vnic.QueueCounters{
			{Stats: queueStats(map[string]uint64{"rx_packets_total": 10, "rx_bytes_total": 1000, "rx_dropped_total/no_buffer": 1,
				"rx_dropped_total/oversize": 2, "rx_dropped_total/alloc_failure": 3, "rx_dropped_total/xdp": 4,
				"rx_dropped_total/zero_length": 5, "tx_packets_total": 20, "tx_bytes_total": 2000,
				"tx_dropped_total/queue_stopped": 6, "rx_short_headroom_total": 13}),
				RingPosted: 128, RingSize: 128,
				Pool: &pagepool.Stats{Allocs: 200, Recycles: 50, Pages: 9, InFlight: 128, AllocFails: 8}},
			{Stats: queueStats(map[string]uint64{"rx_packets_total": 11})},
		},
		Datapath: []datapath.QueueStats{{RxWriteErrors: 9, TxRunts: 10, TxOversize: 11, RxDeferred: 12, RxBacklog: 3,
			TxSuperframes: 13, TxBadVnetHdr: 14, RxCoalesced: 15, RxWaited: 16, RxWhole: 17}, {}},
		Reconfigs: []vnic.ReconfigStats{{Op: "mtu", Outcomes: outcomes, Count: 4, Sum: 0.5, Buckets: map[float64]uint64{0.1: 2, 1: 4}}},
		ResetsOK:  1,
	}, {
		Name: "mana1", State: vnic.State{}, Queues: []vnic.QueueCounters{{}},
	}}
}

// queueStats returns a queue's counters with the values of v, keyed by the metric, and
// "/reason" for a family with reasons, of a row of vnic's counter tables.
func queueStats(v map[string]uint64) vnic.QueueStats {
	var s vnic.QueueStats
	for _, cs := range [][]vnic.Counter[vnic.QueueStats]{vnic.ManaCounters, vnic.ManadCounters} {
		for _, c := range cs {
			k := c.Metric
			if c.Reason != "" {
				k += "/" + c.Reason
			}
			if n, ok := v[k]; ok && c.Field != nil {
				*c.Field(&s) = n
				delete(v, k)
			}
		}
	}
	if len(v) != 0 {
		panic(fmt.Sprintf("no counter rows for %v", v))
	}
	return s
}

func gather(t *testing.T, c *Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry() // checks Collect against Describe
	reg.MustRegister(c)
	fams, err := reg.Gather()
	require.NoError(t, err)
	m := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		m[f.GetName()] = f
	}
	return m
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestCollector(t *testing.T) {
	ctl := NewControl()
	ctl.Request("ethtool", "rings-get", 0)
	ctl.Request("ethtool", "rings-get", 0)
	ctl.Request("ethtool", "rings-set", unix.EINVAL)
	ctl.SubscriberDropped()
	ctl.StateSaveFailed()
	ctl.StateSaveFailed()
	ctl.SetStateUnsaved(true)
	ctl.SetBusyPolls(func() BusyPolls { return BusyPolls{Hits: 7, Misses: 2} })
	fams := gather(t, NewCollector(SourceFunc(testPorts), ctl))
	q0 := map[string]string{"port": "mana0", "netns": "nsA", "queue": "0"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"manad_rx_packets_total", q0, 10},
		{"manad_rx_packets_total", map[string]string{"port": "mana0", "queue": "1"}, 11},
		{"manad_rx_bytes_total", q0, 1000},
		{"manad_tx_packets_total", q0, 20},
		{"manad_tx_bytes_total", q0, 2000},
		{"manad_rx_dropped_total", with(q0, "reason", "no_buffer"), 1},
		{"manad_rx_dropped_total", with(q0, "reason", "oversize"), 2},
		{"manad_rx_dropped_total", with(q0, "reason", "alloc_failure"), 3},
		{"manad_rx_dropped_total", with(q0, "reason", "xdp"), 4},
		{"manad_rx_dropped_total", with(q0, "reason", "zero_length"), 5},
		{"manad_rx_dropped_total", with(q0, "reason", "tap_write"), 9},
		{"manad_tx_dropped_total", with(q0, "reason", "queue_stopped"), 6},
		{"manad_tx_dropped_total", with(q0, "reason", "runt"), 10},
		{"manad_tx_dropped_total", with(q0, "reason", "oversize"), 11},
		{"manad_tx_dropped_total", with(q0, "reason", "bad_vnet_hdr"), 14},
		{"manad_tx_superframes_total", q0, 13},
		{"manad_rx_coalesced_total", q0, 15},
		{"manad_rx_waited_total", q0, 16},
		{"manad_rx_whole_total", q0, 17},
		{"manad_rx_deferred_total", q0, 12},
		{"manad_rx_short_headroom_total", q0, 13},
		{"manad_rx_input_backlog_frames", q0, 3},
		{"manad_rx_ring_posted_buffers", q0, 128},
		{"manad_rx_ring_size_buffers", q0, 128},
		{"manad_page_pool_buffer_allocs_total", q0, 200},
		{"manad_page_pool_alloc_failures_total", q0, 8},
		{"manad_page_pool_pages", q0, 9},
		{"manad_port_running", map[string]string{"port": "mana0"}, 1},
		{"manad_port_running", map[string]string{"port": "mana1", "netns": ""}, 0},
		{"manad_memory_pinned_bytes", map[string]string{"port": "mana0"}, 40960},
		{"manad_memory_in_use_bytes", map[string]string{"port": "mana0"}, 50000},
		{"manad_memory_budget_bytes", map[string]string{"port": "mana0"}, 1 << 20},
		{"manad_rx_buffers_in_flight", map[string]string{"port": "mana0"}, 7},
		{"manad_reconfigurations_total", map[string]string{"port": "mana0", "op": "mtu", "outcome": "applied"}, 3},
		{"manad_reconfigurations_total", map[string]string{"port": "mana0", "op": "mtu", "outcome": "attach_failed"}, 1},
		{"manad_reconfiguration_duration_seconds", map[string]string{"port": "mana0", "op": "mtu"}, 4},
		{"manad_resets_total", map[string]string{"port": "mana0", "outcome": "ok"}, 1},
		{"manad_resets_total", map[string]string{"port": "mana0", "outcome": "failed"}, 0},
		{"manad_control_requests_total", map[string]string{"family": "ethtool", "command": "rings-get", "errno": "0"}, 2},
		{"manad_control_requests_total", map[string]string{"family": "ethtool", "command": "rings-set", "errno": "EINVAL"}, 1},
		{"manad_subscribers_dropped_total", nil, 1},
		{"manad_state_save_failures_total", nil, 2},
		{"manad_state_unsaved", nil, 1},
		{"manad_control_busy_polls_total", map[string]string{"outcome": "hit"}, 7},
		{"manad_control_busy_polls_total", map[string]string{"outcome": "miss"}, 2},
		{"manad_control_busy_polls_total", map[string]string{"outcome": "skipped"}, 0},
	} {
		got, ok := value(t, fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	// An unlimited budget, an unused outcome and a port without a running pool export nothing.
	if _, ok := value(t, fams, "manad_memory_budget_bytes", map[string]string{"port": "mana1"}); ok {
		t.Error("mana1 has a budget sample; its budget is unlimited")
	}
	if _, ok := value(t, fams, "manad_reconfigurations_total", map[string]string{"outcome": "stored"}); ok {
		t.Error("a zero outcome was exported")
	}
	_, ok := value(t, fams, "manad_page_pool_pages", map[string]string{"port": "mana1"})
	assert.False(t, ok, "page-pool sample for a queue without a pool")
	for name, f := range fams {
		if !strings.HasPrefix(name, "manad_") || (f.GetType() == dto.MetricType_COUNTER) != strings.HasSuffix(name, "_total") {
			t.Errorf("family %s (%v): want the manad_ prefix and _total exactly on counters", name, f.GetType())
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				n := lp.GetName()
				assert.NotEqual(t, "uid", n, "%s has a %s label", name, n)
				assert.NotEqual(t, "pid", n, "%s has a %s label", name, n)
			}
		}
	}
}

// TestCollectorLint runs promlint, Prometheus's own naming checks, over every family.
func TestCollectorLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(SourceFunc(testPorts), NewControl()))
	fams, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestServe serves the registry over real HTTP on a free port, parses what it serves with the
// Prometheus text parser, and stops when the context ends.
func TestServe(t *testing.T) {
	ctl := NewControl()
	ctl.Request("nlctrl", "getfamily", 0)
	reg, err := NewRegistry(NewCollector(SourceFunc(testPorts), ctl))
	require.NoError(t, err)
	l, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, reg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	resp, err := http.Get("http://" + l.Addr().String() + "/metrics")
	require.NoError(t, err)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, name := range []string{"manad_rx_dropped_total", "manad_control_requests_total", "go_goroutines", "process_open_fds"} {
		assert.NotNil(t, fams[name], "no family %s", name)
	}
	// A second listener on the same address fails with EADDRINUSE, naming the address.
	_, err = Listen(l.Addr().String())
	assert.ErrorIs(t, err, unix.EADDRINUSE, "second Listen: %v, want EADDRINUSE naming the address", err)
	assert.Contains(t, err.Error(), l.Addr().String(), "second Listen: %v, want EADDRINUSE naming the address", err)
	cancel()
	assert.NoError(t, <-done, "Serve")
	_, err = net.Dial("tcp", l.Addr().String())
	assert.Error(t, err, "still accepting after the context ended")
}

// TestEveryCounterExported gives every counter row with a Metric and a Field, in vnic's tables,
// the data path's, the page pools' and the pollers', a value of its own and finds it in its family's series for the queue, with its reason.
func TestEveryCounterExported(t *testing.T) {
	type want struct {
		metric, reason string
		v              float64
	}
	var wants []want
	var vq vnic.QueueStats
	var dq datapath.QueueStats
	v := uint64(100)
	for _, cs := range [][]vnic.Counter[vnic.QueueStats]{vnic.ManaCounters, vnic.ManadCounters} {
		for _, c := range cs {
			if c.Metric != "" && c.Field != nil {
				v++
				*c.Field(&vq) = v
				wants = append(wants, want{c.Metric, c.Reason, float64(v)})
			}
		}
	}
	for _, c := range datapath.Counters {
		if c.Metric != "" && c.Field != nil {
			v++
			*c.Field(&dq) = v
			wants = append(wants, want{c.Metric, c.Reason, float64(v)})
		}
	}
	var pq pagepool.Stats
	for _, c := range poolCounters {
		if c.Field != nil {
			v++
			*c.Field(&pq) = v
			wants = append(wants, want{c.Metric, c.Reason, float64(v)})
		}
	}
	var polls datapath.PollStats
	for _, c := range pollCounters {
		if c.Field != nil {
			v++
			*c.Field(&polls) = v
			wants = append(wants, want{c.Metric, c.Reason, float64(v)})
		}
	}
	require.Greater(t, len(wants), 20, "counter rows with a metric")
	port := Port{Name: "mana0", Queues: []vnic.QueueCounters{{Pool: &pagepool.Stats{}}, {Stats: vq, Pool: &pq}},
		Datapath: []datapath.QueueStats{{}, dq}, Polls: []datapath.PollStats{{}, polls}}
	fams := gather(t, NewCollector(SourceFunc(func() []Port { return []Port{port} }), nil))
	for _, w := range wants {
		labels := map[string]string{"port": "mana0", "queue": "1"}
		if w.reason != "" {
			labels["reason"] = w.reason
		}
		got, ok := value(t, fams, "manad_"+w.metric, labels)
		assert.True(t, ok, "no series manad_%s%v", w.metric, labels)
		assert.Equal(t, w.v, got, "manad_%s%v", w.metric, labels)
		labels["queue"] = "0"
		got, _ = value(t, fams, "manad_"+w.metric, labels)
		assert.Zero(t, got, "manad_%s%v", w.metric, labels)
	}
	for name := range reasonHelp {
		assert.Contains(t, fams, "manad_"+name, "reasonHelp names a family no counter has")
	}
	for _, f := range fams {
		assert.False(t, strings.HasPrefix(f.GetHelp(), ", by reason"), "%s: a family with reasons needs its reasonHelp", f.GetName())
	}
}
