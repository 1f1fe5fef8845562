package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
)

// Port is what the collector exports about one port, read from the live counters at scrape
// time.
type Port struct {
	Name  string
	NetNS string // the namespace's name; "" for manad's own
	// State gives the administrative and running state and the memory figures.
	State vnic.State
	// Queues are vnic's counters of queues 0..n-1; Datapath the data path's, by TAP queue.
	Queues   []vnic.QueueCounters
	Datapath []datapath.QueueStats
	// Polls are the data path's busy-polling counters, by TAP queue (Endpoint.PollStats).
	Polls []datapath.PollStats
	// Reconfigs are the port's reconfigurations by kind; ResetsOK and ResetsFailed count the
	// reset work's attempts.
	Reconfigs              []vnic.ReconfigStats
	ResetsOK, ResetsFailed uint64
}

// Source gives the collector the current ports at every scrape. Ports must be safe to call from
// any goroutine and return promptly.
type Source interface {
	Ports() []Port
}

// SourceFunc adapts a function to Source.
type SourceFunc func() []Port

// Ports calls f.
func (f SourceFunc) Ports() []Port { return f() }

// Collector is a prometheus.Collector of manad's counters. It keeps none itself: every Collect
// reads them from its Source and Control.
type Collector struct {
	src Source
	ctl *Control

	// families are the per-queue families of the counter tables' rows (queueFamilies); the
	// series are the rows' of vnic's, the data path's and the page pools' tables.
	families       []*prometheus.Desc
	vnicSeries     []series[vnic.QueueStats]
	datapathSeries []series[datapath.QueueStats]
	poolSeries     []series[pagepool.Stats]
	ringSeries     []series[vnic.QueueCounters]
	pollSeries     []series[datapath.PollStats]

	up, adminUp                                       *prometheus.Desc
	memPinned, memPages, memInUse, memPeak, memBudget *prometheus.Desc
	buffersInFlight                                   *prometheus.Desc

	reconfigs, reconfigDuration, resets     *prometheus.Desc
	requests, subscribersDropped, busyPolls *prometheus.Desc
	stateSaveFailures, stateUnsaved         *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector reading ports from src and control traffic from ctl (nil: no
// control-request families).
func NewCollector(src Source, ctl *Control) *Collector {
	port := []string{"port", "netns"}
	queue := []string{"port", "netns", "queue"}
	reason := []string{"port", "netns", "queue", "reason"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("manad_"+name, help, labels, nil)
	}
	c := &Collector{
		src: src, ctl: ctl,

		up:              d("port_running", "1 when the port's queues run and pass traffic.", port),
		adminUp:         d("port_admin_up", "1 when the administrator wants the port up.", port),
		memPinned:       d("memory_pinned_bytes", "Bytes of RX pages the port's running pools hold.", port),
		memPages:        d("memory_pinned_pages", "RX pages the port's running pools hold.", port),
		memInUse:        d("memory_in_use_bytes", "Bytes charged to the port's RX memory budget, draining pools and pre-allocations included.", port),
		memPeak:         d("memory_peak_bytes", "Highest manad_memory_in_use_bytes so far.", port),
		memBudget:       d("memory_budget_bytes", "The port's RX memory budget (absent when unlimited).", port),
		buffersInFlight: d("rx_buffers_in_flight", "RX buffers handed out and not posted: held by the host or waiting in draining pools.", port),

		reconfigs: d("reconfigurations_total", "Reconfigurations by op (priv-flags, mtu, xdp, rings, channels) and outcome (applied, "+
			"stored, unchanged, prealloc_failed, detach_failed, attach_failed, refused).", []string{"port", "netns", "op", "outcome"}),
		reconfigDuration: d("reconfiguration_duration_seconds", "Duration of the reconfigurations that rebuilt the queues or tried to.",
			[]string{"port", "netns", "op"}),
		resets: d("resets_total", "Reset-work attempts to restore a detached port, by outcome (ok, failed).", []string{"port", "netns", "outcome"}),

		requests: d("control_requests_total", "Netlink control requests by family, command and the errno they were answered with (0: success).",
			[]string{"family", "command", "errno"}),
		subscribersDropped: d("subscribers_dropped_total", "Notification subscribers dropped because they did not read.", nil),
		busyPolls: d("control_busy_polls_total", "Busy polls of the control socket's request loops (busy_poll) by outcome: hit (found the "+
			"next request or the hang-up), miss (nothing within the window: up to busy_poll of CPU spent), skipped (every polling slot taken).",
			[]string{"outcome"}),
		stateSaveFailures: d("state_save_failures_total", "Writes of the state file that failed (read-only or full state directory, I/O "+
			"error): each a change refused, or a change made from outside (ip link) whose save is retried.", nil),
		stateUnsaved: d("state_unsaved", "1 while manad holds changes its state file does not (a failed save being retried): "+
			"they are lost if manad stops before the retry succeeds.", nil),
	}
	fams := queueFamilies(reason, queue, d)
	c.vnicSeries = seriesOf(fams, vnic.ManaCounters, vnic.ManadCounters)
	c.datapathSeries = seriesOf(fams, datapath.Counters)
	c.poolSeries = seriesOf(fams, poolCounters)
	c.ringSeries = seriesOf(fams, ringCounters)
	c.pollSeries = seriesOf(fams, pollCounters)
	for _, f := range fams.order {
		c.families = append(c.families, fams.byName[f].desc)
	}
	return c
}

// Describe sends every family's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.families {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{
		c.up, c.adminUp, c.memPinned, c.memPages, c.memInUse, c.memPeak, c.memBudget,
		c.buffersInFlight, c.reconfigs, c.reconfigDuration, c.resets,
	} {
		ch <- d
	}
	if c.ctl != nil {
		ch <- c.requests
		ch <- c.subscribersDropped
		ch <- c.busyPolls
		ch <- c.stateSaveFailures
		ch <- c.stateUnsaved
	}
}

// Collect reads the counters and sends them as constant metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ports := c.src.Ports()
	for i := range ports {
		c.collectPort(ch, &ports[i])
	}
	if c.ctl == nil {
		return
	}
	for k, v := range c.ctl.snapshot() {
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(v), k.family, k.cmd, errnoLabel(k.errno))
	}
	ch <- prometheus.MustNewConstMetric(c.subscribersDropped, prometheus.CounterValue, float64(c.ctl.dropped.Load()))
	ch <- prometheus.MustNewConstMetric(c.stateSaveFailures, prometheus.CounterValue, float64(c.ctl.saveFailures.Load()))
	unsaved := 0.0
	if c.ctl.unsaved.Load() {
		unsaved = 1
	}
	ch <- prometheus.MustNewConstMetric(c.stateUnsaved, prometheus.GaugeValue, unsaved)
	if f := c.ctl.busyPolls.Load(); f != nil {
		b := (*f)()
		for _, o := range []struct {
			outcome string
			n       uint64
		}{{"hit", b.Hits}, {"miss", b.Misses}, {"skipped", b.Skipped}} {
			ch <- prometheus.MustNewConstMetric(c.busyPolls, prometheus.CounterValue, float64(o.n), o.outcome)
		}
	}
}

func (c *Collector) collectPort(ch chan<- prometheus.Metric, p *Port) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	st := &p.State
	gauge(c.up, b2f(st.Running), p.Name, p.NetNS)
	gauge(c.adminUp, b2f(st.AdminUp), p.Name, p.NetNS)
	gauge(c.memPinned, float64(st.BytesPinned), p.Name, p.NetNS)
	gauge(c.memPages, float64(st.PagesPinned), p.Name, p.NetNS)
	gauge(c.memInUse, float64(st.MemoryInUse), p.Name, p.NetNS)
	gauge(c.memPeak, float64(st.MemoryPeak), p.Name, p.NetNS)
	if st.MemoryBudget > 0 {
		gauge(c.memBudget, float64(st.MemoryBudget), p.Name, p.NetNS)
	}
	gauge(c.buffersInFlight, float64(st.BuffersInFlight), p.Name, p.NetNS)

	for qi := range p.Queues {
		q := &p.Queues[qi]
		l := []string{p.Name, p.NetNS, strconv.Itoa(qi)}
		collectSeries(ch, c.vnicSeries, &q.Stats, l)
		collectSeries(ch, c.ringSeries, q, l)
		if ps := q.Pool; ps != nil {
			collectSeries(ch, c.poolSeries, ps, l)
		}
	}
	for qi := range p.Datapath {
		q := &p.Datapath[qi]
		l := []string{p.Name, p.NetNS, strconv.Itoa(qi)}
		collectSeries(ch, c.datapathSeries, q, l)
	}
	for qi, ps := range p.Polls {
		l := []string{p.Name, p.NetNS, strconv.Itoa(qi)}
		collectSeries(ch, c.pollSeries, &ps, l)
	}

	for _, r := range p.Reconfigs {
		for o, v := range r.Outcomes {
			if v != 0 {
				counter(c.reconfigs, v, p.Name, p.NetNS, r.Op, vnic.ReconfigOutcome(o).String())
			}
		}
		if r.Count != 0 {
			ch <- prometheus.MustNewConstHistogram(c.reconfigDuration, r.Count, r.Sum, r.Buckets, p.Name, p.NetNS, r.Op)
		}
	}
	counter(c.resets, p.ResetsOK, p.Name, p.NetNS, "ok")
	counter(c.resets, p.ResetsFailed, p.Name, p.NetNS, "failed")
}
