package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/manad/manad/genl/wire"
)

// Segment is what the segment collector exports about one wire segment and its uplinks: the
// segment's state as SEGMENT_GET reports it, read from the live counters at scrape time.
type Segment = wire.SegmentInfo

// SegmentSource gives the segment collector the current segments at every scrape. Segments
// must be safe to call from any goroutine and return promptly.
type SegmentSource interface {
	Segments() []Segment
}

// SegmentSourceFunc adapts a function to SegmentSource.
type SegmentSourceFunc func() []Segment

// Segments calls f.
func (f SegmentSourceFunc) Segments() []Segment { return f() }

// SegmentCollector is a prometheus.Collector of the wire segments' and their uplinks' counters.
// It keeps none itself: every Collect reads them from its source.
type SegmentCollector struct {
	src SegmentSource

	floods, stormDrops, learnt                *prometheus.Desc
	up, state, mtu, maxPortMTU, changes       *prometheus.Desc
	rxPackets, rxBytes, txPackets, txBytes    *prometheus.Desc
	rxDropped, txDropped, rxSegmented, rxCsum *prometheus.Desc
	attaches, attachment, txAggregates        *prometheus.Desc
	txWhole, rxWhole                          *prometheus.Desc
	polls, pollHits, pollSeconds              *prometheus.Desc
}

var _ prometheus.Collector = (*SegmentCollector)(nil)

// NewSegmentCollector returns a collector reading segments from src.
func NewSegmentCollector(src SegmentSource) *SegmentCollector {
	seg := []string{"segment"}
	up := []string{"segment", "dev", "netns"}
	reason := []string{"segment", "dev", "netns", "reason"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("manad_"+name, help, labels, nil)
	}
	return &SegmentCollector{
		src:        src,
		floods:     d("segment_floods_total", "Frames the segment flooded (broadcast, multicast, unknown unicast) to every other member.", seg),
		stormDrops: d("segment_storm_drops_total", "Frames the segment did not flood because its storm_pps limit was reached.", seg),
		learnt:     d("segment_learnt_addresses", "MAC addresses the segment has learnt and not aged out.", seg),
		up:         d("uplink_up", "1 when the uplink is attached to its device and frames flow.", up),
		state: d("uplink_state", "1 for the uplink's current state (attached, down: the device is not up and running, gone: "+
			"no such device or namespace, reattaching: attaching to the device failed and is retried).", []string{"segment", "dev", "netns", "state"}),
		mtu:        d("uplink_mtu_bytes", "The largest payload the uplink sends out (the device's MTU, capped by the segment's).", up),
		maxPortMTU: d("uplink_max_port_mtu_bytes", "The largest port MTU the uplink carries whole (less the encapsulation overhead).", up),
		changes:    d("uplink_state_changes_total", "State changes of the uplink since it started.", up),
		rxPackets:  d("uplink_rx_packets_total", "Frames received from the uplink's device and switched on the segment.", up),
		rxBytes:    d("uplink_rx_bytes_total", "Bytes of the frames counted in manad_uplink_rx_packets_total.", up),
		txPackets:  d("uplink_tx_packets_total", "Frames the uplink's device took.", up),
		txBytes:    d("uplink_tx_bytes_total", "Bytes of the frames counted in manad_uplink_tx_packets_total.", up),
		txAggregates: d("uplink_tx_aggregates_total", "GSO superframes the uplink wrote, each standing for several of the "+
			"frames counted in manad_uplink_tx_packets_total.", up),
		txWhole: d("uplink_tx_whole_total", "Of manad_uplink_tx_aggregates_total, the superframes a port's TAP handed over that "+
			"the uplink wrote as they came, never cut into frames.", up),
		rxWhole: d("uplink_rx_whole_total", "TCP aggregates received from the uplink's device that a port took whole, each "+
			"several of the frames counted in manad_uplink_rx_packets_total.", up),
		rxDropped: d("uplink_rx_dropped_total", "Frames from the uplink's device that were dropped, by reason: runt (shorter than "+
			"an Ethernet header), oversize (beyond the device's MTU and not a TCP aggregate), truncated (the kernel could not hand the frame over whole: beyond 64 KiB, or its socket queue full).", reason),
		txDropped: d("uplink_tx_dropped_total", "Frames for the uplink's device that were dropped, by reason: device (the device "+
			"refused it), down (the uplink was not attached), mtu (beyond the uplink's MTU; never fragmented).", reason),
		rxSegmented: d("uplink_rx_segmented_total", "TCP aggregates from the uplink's device cut into MTU-sized frames.", up),
		rxCsum:      d("uplink_rx_checksum_filled_total", "Frames from the uplink's device whose checksum manad filled in.", up),
		attaches:    d("uplink_attaches_total", "How often the uplink opened its packet socket on the device.", up),
		polls: d("uplink_busy_polls_total", "Looks at the uplink's socket while it busy-polled (busy_poll), each a window "+
			"it polled instead of parking.", up),
		pollHits:    d("uplink_busy_poll_hits_total", "Of manad_uplink_busy_polls_total, the polls that found frames.", up),
		pollSeconds: d("uplink_busy_poll_cpu_seconds_total", "CPU time the uplink's reader spent busy-polling.", up),
		attachment: d("uplink_attachment_info", "1, labelled with the socket the uplink is attached with (af_packet, af_xdp); "+
			"absent before its first attach.", []string{"segment", "dev", "netns", "attach"}),
	}
}

// Describe sends every family's description.
func (c *SegmentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.floods, c.stormDrops, c.learnt, c.up, c.state, c.mtu, c.maxPortMTU, c.changes, c.rxPackets, c.rxBytes,
		c.txPackets, c.txBytes, c.rxDropped, c.txDropped, c.rxSegmented, c.rxCsum, c.attaches, c.attachment,
		c.txAggregates, c.txWhole, c.rxWhole, c.polls, c.pollHits, c.pollSeconds,
	} {
		ch <- d
	}
}

// uplinkStates are the states manad_uplink_state has a series for.
var uplinkStates = []string{wire.UplinkAttached, wire.UplinkDown, wire.UplinkGone, wire.UplinkReattaching}

// Collect reads the counters and sends them as constant metrics.
func (c *SegmentCollector) Collect(ch chan<- prometheus.Metric) {
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
	for _, s := range c.src.Segments() {
		counter(c.floods, s.Floods, s.Name)
		counter(c.stormDrops, s.StormDrops, s.Name)
		gauge(c.learnt, float64(s.Learnt), s.Name)
		for _, u := range s.Uplinks {
			l := []string{s.Name, u.Dev, u.NetNS}
			gauge(c.up, b2f(u.State == wire.UplinkAttached), l...)
			for _, st := range uplinkStates {
				gauge(c.state, b2f(u.State == st), append(l, st)...)
			}
			gauge(c.mtu, float64(u.MTU), l...)
			gauge(c.maxPortMTU, float64(u.MaxPortMTU), l...)
			counter(c.changes, u.Changes, l...)
			counter(c.rxPackets, u.RxPackets, l...)
			counter(c.rxBytes, u.RxBytes, l...)
			counter(c.txPackets, u.TxPackets, l...)
			counter(c.txBytes, u.TxBytes, l...)
			counter(c.txAggregates, u.TxAggregates, l...)
			counter(c.txWhole, u.TxWhole, l...)
			counter(c.rxWhole, u.RxWhole, l...)
			counter(c.rxDropped, u.RxRunts, append(l, "runt")...)
			counter(c.rxDropped, u.RxOversize, append(l, "oversize")...)
			counter(c.rxDropped, u.RxTruncated, append(l, "truncated")...)
			counter(c.txDropped, u.TxErrors, append(l, "device")...)
			counter(c.txDropped, u.TxDown, append(l, "down")...)
			counter(c.txDropped, u.TxMTUDrops, append(l, "mtu")...)
			counter(c.rxSegmented, u.RxSegmented, l...)
			counter(c.rxCsum, u.RxCsumFilled, l...)
			counter(c.attaches, u.Attaches, l...)
			counter(c.polls, u.Polls, l...)
			counter(c.pollHits, u.PollHits, l...)
			ch <- prometheus.MustNewConstMetric(c.pollSeconds, prometheus.CounterValue, float64(u.PollNanos)/1e9, l...)
			if u.Attach != "" {
				gauge(c.attachment, 1, append(l, u.Attach)...)
			}
		}
	}
}
