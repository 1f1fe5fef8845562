package datapath

import "github.com/manad/manad/vnic"

// Counters declare the data path's counters (QueueStats), in the order they
// follow vnic.ManadCounters in manad's ETH_SS_STATS set, each summed over the port's queues
// (vnic.PortScope), and their Prometheus series by queue.
var Counters = []vnic.Counter[QueueStats]{
	{Name: vnic.ManadStatPrefix + "rx_inline", Help: "Frames processed to completion by the goroutine that forwarded them.",
		Metric: "rx_inline_total", Field: func(s *QueueStats) *uint64 { return &s.RxInline }},
	{Name: vnic.ManadStatPrefix + "rx_deferred", Help: "Frames queued for the RX queue's goroutine because the queue was busy.",
		Metric: "rx_deferred_total", Field: func(s *QueueStats) *uint64 { return &s.RxDeferred }},
	{Name: vnic.ManadStatPrefix + "rx_drop_input_full", Help: "Frames dropped because the RX queue's input was full (also in hc_rx_discards_no_wqe).",
		Field: func(s *QueueStats) *uint64 { return &s.RxInputDrops }},
	{Name: vnic.ManadStatPrefix + "rx_tap_write_err", Help: "passed RX but the TAP refused it",
		Metric: "rx_dropped_total", Reason: "tap_write", Field: func(s *QueueStats) *uint64 { return &s.RxWriteErrors }},
	{Name: vnic.ManadStatPrefix + "tx_drop_runt", Help: "shorter than an Ethernet header",
		Metric: "tx_dropped_total", Reason: "runt", Field: func(s *QueueStats) *uint64 { return &s.TxRunts }},
	{Name: vnic.ManadStatPrefix + "tx_drop_oversize", Help: "longer than the port's largest MTU",
		Metric: "tx_dropped_total", Reason: "oversize", Field: func(s *QueueStats) *uint64 { return &s.TxOversize }},
	{Name: vnic.ManadStatPrefix + "tx_superframes", Help: "GSO superframes read from a TAP with offloads, each standing for frames counted in " +
		"manad_tx_packets_total: cut into them, or passed on whole (manad_rx_whole_total, manad_uplink_tx_whole_total).",
		Metric: "tx_superframes_total", Field: func(s *QueueStats) *uint64 { return &s.TxSuperframes }},
	{Name: vnic.ManadStatPrefix + "tx_drop_bad_vnet_hdr", Help: "on a TAP with offloads: a virtio header that did not fit its frame",
		Metric: "tx_dropped_total", Reason: "bad_vnet_hdr", Field: func(s *QueueStats) *uint64 { return &s.TxBadVnetHdr }},
	{Name: vnic.ManadStatPrefix + "rx_coalesced", Help: "Frames written to a TAP with offloads merged into an earlier one (GRO: TCP; UDP while the TAP has " +
		"rx-udp-gro-forwarding or rx-gro-list on).",
		Metric: "rx_coalesced_total", Field: func(s *QueueStats) *uint64 { return &s.RxCoalesced }},
	{Name: vnic.ManadStatPrefix + "rx_waited", Help: "Frames whose sender waited for the RX queue while another context held it.",
		Metric: "rx_waited_total", Field: func(s *QueueStats) *uint64 { return &s.RxWaited }},
	{Name: vnic.ManadStatPrefix + "rx_whole", Help: "Superframes written to a TAP with offloads as they came (a port's TSO superframe, an uplink's GRO " +
		"aggregate), never cut into frames; their frames count in manad_rx_inline_total and, but one each, manad_rx_coalesced_total.",
		Metric: "rx_whole_total", Field: func(s *QueueStats) *uint64 { return &s.RxWhole }},
	{Help: "Frames waiting in the RX queue's input for its goroutine.", Metric: "rx_input_backlog_frames", Gauge: true,
		Derive: func(s *QueueStats) uint64 { return uint64(max(s.RxBacklog, 0)) }},
}
