package daemon

import (
	"context"
	"net"
	"slices"
	"strings"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/metrics"
	"github.com/manad/manad/vnic"
)

// metricsPorts is the metrics.Source of the daemon: every ready port's live counters, read under
// the configuration lock (as ethtool -S reads them), sorted by name.
func (d *Daemon) metricsPorts() []metrics.Port {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]metrics.Port, 0, len(d.ports))
	for _, p := range d.ports {
		if !p.isReady() {
			continue
		}
		ok, failed := p.vp.Resets()
		out = append(out, metrics.Port{
			Name: p.spec.Name, NetNS: p.spec.NetNS, State: p.vp.State(),
			Queues: p.vp.QueueCounters(), Datapath: p.ep.Stats(), Polls: p.ep.PollStats(),
			Reconfigs: p.vp.ReconfigStats(), ResetsOK: ok, ResetsFailed: failed,
		})
	}
	slices.SortFunc(out, func(a, b metrics.Port) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// statNames is the port's ETH_SS_STATS set: the driver's counters (vnic.ManaCounters), then
// manad's own under vnic.ManadStatPrefix, the model's (vnic.ManadCounters) and the data path's
// (datapath.Counters). Caller holds the configuration lock.
func (p *port) statNames() []string {
	// They depend on the queue count only: built once per count, as STRSET_GET asks for them
	// on every `ethtool -S` (418 names for 16 queues).
	if q := p.vp.Settings().Queues; q != p.statNamesQueues || p.statNamesCache == nil {
		p.statNamesQueues = q
		p.statNamesCache = slices.Concat(vnic.StatNames(q), vnic.ExtraStatNames(),
			vnic.CounterNames(datapath.Counters, q))
	}
	return p.statNamesCache
}

// statValues are the values of statNames. Caller holds the configuration lock.
func (p *port) statValues() []uint64 {
	return slices.Concat(p.vp.Stats(), p.vp.ExtraStats(), vnic.CounterValues(datapath.Counters, p.ep.Stats()))
}

// serveMetrics binds the metrics_listen address and serves /metrics there until the returned
// stop is called. Errors: the address cannot be bound (EADDRINUSE, EADDRNOTAVAIL, EACCES).
func (d *Daemon) serveMetrics() (stop func(), err error) {
	reg, err := metrics.NewRegistry(metrics.NewCollector(metrics.SourceFunc(d.metricsPorts), d.control),
		metrics.NewSegmentCollector(metrics.SegmentSourceFunc(d.metricsSegments)))
	if err != nil {
		return nil, err
	}
	l, err := metrics.Listen(d.cfg.Daemon.MetricsListen)
	if err != nil {
		return nil, err
	}
	// The bound address, not the configured one: with port 0 this is how to find it.
	d.log.Info("metrics listening", "addr", l.Addr().String(), "path", "/metrics")
	if from := metricsExposure(l.Addr()); from != "" {
		d.log.Warn("metrics served beyond loopback", "addr", l.Addr().String(), "reachable_from", from,
			"exposes", "port names, namespaces, segments, uplinks and their counters, without authentication",
			"restrict", `metrics_listen = "127.0.0.1:PORT" (or "[::1]:PORT"), or a firewall rule for the port`)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := metrics.Serve(ctx, l, reg, d.log); err != nil {
			d.log.Error("metrics server stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// metricsExposure says from where beyond the host the metrics server bound to addr can be
// reached: "" for a loopback address (the host alone), else every interface (an unspecified
// address: ":PORT", "0.0.0.0:PORT", "[::]:PORT") or the one address it is bound to.
func metricsExposure(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	switch {
	case !ok || ta.IP.IsLoopback():
		return ""
	case ta.IP.IsUnspecified():
		return "every network the host is on (all interfaces)"
	}
	return "the networks of address " + ta.IP.String()
}
