package vnic

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manad/manad/vnic/pagepool"
)

// QueueStats are the counters of one queue index, RX and TX, at one moment: the snapshot the
// counter tables (ManaCounters, ManadCounters) read with their Field and Derive.
type QueueStats struct {
	rx rxStats
	tx txStats
}

// ManaCounters are the mana driver's ETH_SS_STATS counters in mana_get_strings order
// (reference/mana-driver.md §4): the eth group, the hc (vport) group, the phy group, then
// MANA_STATS_RX_COUNT per RX queue and MANA_STATS_TX_COUNT per TX queue. The global eth
// counters and the hc/phy error counters are never counted by the model; the hc traffic counters
// and the tc0 phy counters count the frames the port's vport saw: everything travels in traffic
// class 0, with no drop at the PHY and no pause frame.
var ManaCounters = slices.Concat([]Counter[QueueStats]{
	{Name: "stop_queue", Help: "Times a TX queue was stopped for want of room (never: the model's TX queues do not fill)."},
	{Name: "wake_queue", Help: "Times a stopped TX queue was woken (never, as stop_queue)."},
	{Name: "tx_cq_err", Help: "TX completions with an error (none in the model)."},
	{Name: "tx_cqe_unknown_type", Help: "TX completions of an unknown type (none in the model)."},
	{Name: "tx_linear_pkt_cnt", Help: "TX packets linearized for having more fragments than a work request holds (none in the model)."},
	{Name: "rx_cqe_unknown_type", Help: "RX completions of an unknown type (none in the model)."},

	{Name: "hc_rx_discards_no_wqe", Help: "no posted RX buffer: the queue was not running or its input was full",
		Metric: "rx_dropped_total", Reason: "no_buffer", Field: func(s *QueueStats) *uint64 { return &s.rx.discardNoWQE }},
	{Name: "hc_rx_err_vport_disabled", Help: "Frames the vport dropped while disabled (never counted by the model)."},
	{Name: "hc_rx_bytes", Help: "Bytes the vport received.", Field: func(s *QueueStats) *uint64 { return &s.rx.hcBytes }},
	{Name: "hc_rx_ucast_pkts", Help: "Unicast frames the vport received.", Field: func(s *QueueStats) *uint64 { return &s.rx.ucastPkts }},
	{Name: "hc_rx_ucast_bytes", Help: "Bytes of hc_rx_ucast_pkts.", Field: func(s *QueueStats) *uint64 { return &s.rx.ucastBytes }},
	{Name: "hc_rx_bcast_pkts", Help: "Broadcast frames the vport received.", Field: func(s *QueueStats) *uint64 { return &s.rx.bcastPkts }},
	{Name: "hc_rx_bcast_bytes", Help: "Bytes of hc_rx_bcast_pkts.", Field: func(s *QueueStats) *uint64 { return &s.rx.bcastBytes }},
	{Name: "hc_rx_mcast_pkts", Help: "Multicast frames the vport received.", Field: func(s *QueueStats) *uint64 { return &s.rx.mcastPkts }},
	{Name: "hc_rx_mcast_bytes", Help: "Bytes of hc_rx_mcast_pkts.", Field: func(s *QueueStats) *uint64 { return &s.rx.mcastBytes }},
	{Name: "hc_tx_err_gf_disabled", Help: "TX frames dropped by a disabled GF (never counted by the model)."},
	{Name: "hc_tx_err_vport_disabled", Help: "TX frames dropped by a disabled vport (never counted by the model)."},
	{Name: "hc_tx_err_inval_vportoffset_pkt", Help: "TX frames with an invalid vport offset (never counted by the model)."},
	{Name: "hc_tx_err_vlan_enforcement", Help: "TX frames refused by VLAN enforcement (never counted by the model)."},
	{Name: "hc_tx_err_eth_type_enforcement", Help: "TX frames refused by EtherType enforcement (never counted by the model)."},
	{Name: "hc_tx_err_sa_enforcement", Help: "TX frames refused by source-address enforcement (never counted by the model)."},
	{Name: "hc_tx_err_sqpdid_enforcement", Help: "TX frames refused by SQ protection-domain enforcement (never counted by the model)."},
	{Name: "hc_tx_err_cqpdid_enforcement", Help: "TX frames refused by CQ protection-domain enforcement (never counted by the model)."},
	{Name: "hc_tx_err_mtu_violation", Help: "TX frames beyond the vport's MTU (never counted by the model)."},
	{Name: "hc_tx_err_inval_oob", Help: "TX frames with an invalid out-of-band header (never counted by the model)."},
	{Name: "hc_tx_err_gdma", Help: "TX frames failed by GDMA (never counted by the model)."},
	{Name: "hc_tx_bytes", Help: "Bytes the vport sent.", Field: func(s *QueueStats) *uint64 { return &s.tx.hcBytes }},
	{Name: "hc_tx_ucast_pkts", Help: "Unicast frames the vport sent.", Field: func(s *QueueStats) *uint64 { return &s.tx.ucastPkts }},
	{Name: "hc_tx_ucast_bytes", Help: "Bytes of hc_tx_ucast_pkts.", Field: func(s *QueueStats) *uint64 { return &s.tx.ucastBytes }},
	{Name: "hc_tx_bcast_pkts", Help: "Broadcast frames the vport sent.", Field: func(s *QueueStats) *uint64 { return &s.tx.bcastPkts }},
	{Name: "hc_tx_bcast_bytes", Help: "Bytes of hc_tx_bcast_pkts.", Field: func(s *QueueStats) *uint64 { return &s.tx.bcastBytes }},
	{Name: "hc_tx_mcast_pkts", Help: "Multicast frames the vport sent.", Field: func(s *QueueStats) *uint64 { return &s.tx.mcastPkts }},
	{Name: "hc_tx_mcast_bytes", Help: "Bytes of hc_tx_mcast_pkts.", Field: func(s *QueueStats) *uint64 { return &s.tx.mcastBytes }},

	{Name: "hc_rx_pkt_drop_phy", Help: "RX frames dropped at the PHY (never counted by the model)."},
	{Name: "hc_tx_pkt_drop_phy", Help: "TX frames dropped at the PHY (never counted by the model)."},
}, phyCounters(), []Counter[QueueStats]{
	{Name: "packets", Scope: RxQueueScope, Help: "Frames the RX queue passed on (to the TAP, or back out by XDP_TX).",
		Metric: "rx_packets_total", Field: func(s *QueueStats) *uint64 { return &s.rx.packets }},
	{Name: "bytes", Scope: RxQueueScope, Help: "Bytes of the frames counted in manad_rx_packets_total.",
		Metric: "rx_bytes_total", Field: func(s *QueueStats) *uint64 { return &s.rx.bytes }},
	{Name: "xdp_drop", Scope: RxQueueScope, Help: "XDP_DROP, XDP_ABORTED or a failed program",
		Metric: "rx_dropped_total", Reason: "xdp", Field: func(s *QueueStats) *uint64 { return &s.rx.xdpDrop }},
	{Name: "xdp_tx", Scope: RxQueueScope, Help: "Frames the XDP program sent back out of the port (XDP_TX).",
		Metric: "rx_xdp_tx_total", Field: func(s *QueueStats) *uint64 { return &s.rx.xdpTx }},
	{Name: "xdp_redirect", Scope: RxQueueScope, Help: "Frames the XDP program redirected (XDP_REDIRECT).",
		Field: func(s *QueueStats) *uint64 { return &s.rx.xdpRedirect }},
	{Name: "pkt_len0_err", Scope: RxQueueScope, Help: "a completion of zero length",
		Metric: "rx_dropped_total", Reason: "zero_length", Field: func(s *QueueStats) *uint64 { return &s.rx.pktLen0Err }},
	{Name: "coalesced_cqe_2", Scope: RxQueueScope, Help: "RX completions that coalesced 2 frames.",
		Field: func(s *QueueStats) *uint64 { return &s.rx.coalescedCQE[0] }},
	{Name: "coalesced_cqe_3", Scope: RxQueueScope, Help: "RX completions that coalesced 3 frames.",
		Field: func(s *QueueStats) *uint64 { return &s.rx.coalescedCQE[1] }},
	{Name: "coalesced_cqe_4", Scope: RxQueueScope, Help: "RX completions that coalesced 4 frames.",
		Field: func(s *QueueStats) *uint64 { return &s.rx.coalescedCQE[2] }},

	{Name: "packets", Scope: TxQueueScope, Help: "Frames the TX queue put on the wire segment.",
		Metric: "tx_packets_total", Field: func(s *QueueStats) *uint64 { return &s.tx.packets }},
	{Name: "bytes", Scope: TxQueueScope, Help: "Bytes of the frames counted in manad_tx_packets_total.",
		Metric: "tx_bytes_total", Field: func(s *QueueStats) *uint64 { return &s.tx.bytes }},
	{Name: "xdp_xmit", Scope: TxQueueScope, Help: "Frames sent by XDP (ndo_xdp_xmit).",
		Field: func(s *QueueStats) *uint64 { return &s.tx.xdpXmit }},
	{Name: "tso_packets", Scope: TxQueueScope, Help: "TSO superframes the TX queue was given (as mana_start_xmit counts tso_packets).",
		Metric: "tx_tso_packets_total", Field: func(s *QueueStats) *uint64 { return &s.tx.tsoPackets }},
	{Name: "tso_bytes", Scope: TxQueueScope, Help: "Payload bytes of the superframes counted in manad_tx_tso_packets_total (headers excluded).",
		Metric: "tx_tso_bytes_total", Field: func(s *QueueStats) *uint64 { return &s.tx.tsoBytes }},
	{Name: "tso_inner_packets", Scope: TxQueueScope, Help: "Encapsulated TSO superframes sent.",
		Field: func(s *QueueStats) *uint64 { return &s.tx.tsoInnerPackets }},
	{Name: "tso_inner_bytes", Scope: TxQueueScope, Help: "Bytes of tso_inner_packets, headers excluded.",
		Field: func(s *QueueStats) *uint64 { return &s.tx.tsoInnerBytes }},
	{Name: "long_pkt_fmt", Scope: TxQueueScope, Help: "Frames sent with the long packet format (a VLAN tag or a vport offset).",
		Field: func(s *QueueStats) *uint64 { return &s.tx.longPktFmt }},
	{Name: "short_pkt_fmt", Scope: TxQueueScope, Help: "Frames sent with the short packet format.",
		Field: func(s *QueueStats) *uint64 { return &s.tx.shortPktFmt }},
	{Name: "csum_partial", Scope: TxQueueScope, Help: "Frames sent with a checksum for the NIC to complete (CHECKSUM_PARTIAL).",
		Field: func(s *QueueStats) *uint64 { return &s.tx.csumPartial }},
	{Name: "mana_map_err", Scope: TxQueueScope, Help: "Frames dropped because their buffers could not be DMA-mapped.",
		Field: func(s *QueueStats) *uint64 { return &s.tx.mapErr }},
})

// phyCounters are the phy group's per traffic class counters: frames and bytes by class, then
// pause frames by class. The model puts everything in class 0 and sends no pause frame.
func phyCounters() []Counter[QueueStats] {
	var cs []Counter[QueueStats]
	for tc := 0; tc < 8; tc++ {
		t := "hc_tc" + strconv.Itoa(tc)
		c := []Counter[QueueStats]{
			{Name: t + "_rx_pkt_phy", Help: "RX frames of traffic class " + strconv.Itoa(tc) + " at the PHY."},
			{Name: t + "_rx_byte_phy", Help: "Bytes of " + t + "_rx_pkt_phy."},
			{Name: t + "_tx_pkt_phy", Help: "TX frames of traffic class " + strconv.Itoa(tc) + " at the PHY."},
			{Name: t + "_tx_byte_phy", Help: "Bytes of " + t + "_tx_pkt_phy."},
		}
		if tc == 0 {
			c[0].Derive = func(s *QueueStats) uint64 { return s.rx.ucastPkts + s.rx.bcastPkts + s.rx.mcastPkts }
			c[1].Field = func(s *QueueStats) *uint64 { return &s.rx.hcBytes }
			c[2].Derive = func(s *QueueStats) uint64 { return s.tx.ucastPkts + s.tx.bcastPkts + s.tx.mcastPkts }
			c[3].Field = func(s *QueueStats) *uint64 { return &s.tx.hcBytes }
		}
		cs = append(cs, c...)
	}
	for tc := 0; tc < 8; tc++ {
		t := "hc_tc" + strconv.Itoa(tc)
		cs = append(cs,
			Counter[QueueStats]{Name: t + "_rx_pause_phy", Help: "Pause frames of traffic class " + strconv.Itoa(tc) + " received (never in the model)."},
			Counter[QueueStats]{Name: t + "_tx_pause_phy", Help: "Pause frames of traffic class " + strconv.Itoa(tc) + " sent (never in the model)."})
	}
	return cs
}

// ManadStatPrefix begins the name of every ETH_SS_STATS counter manad adds after the driver's
// own (ManaCounters), so that tools comparing against the mana driver's ethtool -S list can tell
// them apart.
const ManadStatPrefix = "manad_"

// ManadCounters are the model's own counters, which follow the driver's in manad's ETH_SS_STATS
// set, summed over every queue slot: every RX drop (rx_dropped of rtnl_link_stats64), the
// oversize and allocation-failure reasons behind some of them (the others have driver counters:
// hc_rx_discards_no_wqe, rx_N_xdp_drop, rx_N_pkt_len0_err), TX drops on a stopped queue, and RX
// frames delivered with less headroom than LL_RESERVED_SPACE.
var ManadCounters = []Counter[QueueStats]{
	{Name: ManadStatPrefix + "rx_dropped", Help: "Every RX frame lost (rx_dropped of rtnl_link_stats64), whatever the reason.",
		Field: func(s *QueueStats) *uint64 { return &s.rx.dropped }},
	{Name: ManadStatPrefix + "rx_drop_oversize", Help: "longer than the RX buffer",
		Metric: "rx_dropped_total", Reason: "oversize", Field: func(s *QueueStats) *uint64 { return &s.rx.oversize }},
	{Name: ManadStatPrefix + "rx_drop_alloc_fail", Help: "the refill failed",
		Metric: "rx_dropped_total", Reason: "alloc_failure", Field: func(s *QueueStats) *uint64 { return &s.rx.allocFail }},
	{Name: ManadStatPrefix + "tx_dropped", Help: "the port was down or being reconfigured",
		Metric: "tx_dropped_total", Reason: "queue_stopped", Field: func(s *QueueStats) *uint64 { return &s.tx.dropped }},
	{Name: ManadStatPrefix + "rx_short_headroom", Help: "Frames delivered with less headroom than LL_RESERVED_SPACE (256 bytes): " +
		"those the kernel would copy with pskb_expand_head to forward them out of a MANA port.",
		Metric: "rx_short_headroom_total", Field: func(s *QueueStats) *uint64 { return &s.rx.shortHeadroom }},
}

// StatCount returns mana_get_sset_count(ETH_SS_STATS) for a port with the given queue count.
func StatCount(queues int) int { return CounterCount(ManaCounters, queues) }

// StatNames returns the ETH_SS_STATS strings of a port with the given queue count, in driver
// order: eth, hc, phy, then every RX queue's counters, then every TX queue's.
func StatNames(queues int) []string { return CounterNames(ManaCounters, queues) }

// ExtraStatNames are the names of ManadCounters, which follow the driver's in manad's
// ETH_SS_STATS set, in Port.ExtraStats order.
func ExtraStatNames() []string { return CounterNames(ManadCounters, 0) }

// rxStats are one RX queue's counters. They live in the port, not in the queue, so they survive
// the detach/attach of every reconfiguration (the driver's reset with each new rxq; the model keeps
// them so a counter never goes backwards while a port is being reconfigured under traffic).
// Guarded by the queue's lock.
type rxStats struct {
	packets, bytes, xdpDrop, xdpTx, xdpRedirect, pktLen0Err uint64
	coalescedCQE                                            [3]uint64
	// hc (vport) counters, kept per queue to avoid a shared cache line, summed on read.
	hcBytes, ucastPkts, ucastBytes, bcastPkts, bcastBytes, mcastPkts, mcastBytes uint64
	discardNoWQE                                                                 uint64
	// netdev-level counters (ndev->stats), not part of ethtool -S.
	dropped, oversize, allocFail uint64
	// Frames delivered with less headroom than rxbuf.LLReservedSpace.
	shortHeadroom uint64
}

// txStats are one TX queue's counters, guarded by the TX queue lock (netif_tx_lock).
type txStats struct {
	packets, bytes, xdpXmit, tsoPackets, tsoBytes, tsoInnerPackets, tsoInnerBytes uint64
	longPktFmt, shortPktFmt, csumPartial, mapErr                                  uint64
	hcBytes, ucastPkts, ucastBytes, bcastPkts, bcastBytes, mcastPkts, mcastBytes  uint64
	dropped                                                                       uint64
}

// classify adds a frame to the unicast, broadcast or multicast counters by its destination MAC,
// as the vport's hardware counters do.
func classify(frame []byte, n uint64, ucastPkts, ucastBytes, bcastPkts, bcastBytes, mcastPkts, mcastBytes *uint64) {
	classifyN(frame, 1, n, ucastPkts, ucastBytes, bcastPkts, bcastBytes, mcastPkts, mcastBytes)
}

// classifyN is classify for pkts frames of n bytes in all, addressed alike.
func classifyN(frame []byte, pkts, n uint64, ucastPkts, ucastBytes, bcastPkts, bcastBytes, mcastPkts, mcastBytes *uint64) {
	switch {
	case len(frame) >= 6 && frame[0]&frame[1]&frame[2]&frame[3]&frame[4]&frame[5] == 0xff:
		*bcastPkts += pkts
		*bcastBytes += n
	case len(frame) >= 1 && frame[0]&1 != 0:
		*mcastPkts += pkts
		*mcastBytes += n
	default:
		*ucastPkts += pkts
		*ucastBytes += n
	}
}

// snapshot copies the counters of queue slots 0..n-1, each under its queue's lock.
func (p *Port) snapshot(n int) []QueueStats {
	out := make([]QueueStats, n)
	for q := range out {
		s := &p.rx[q]
		s.mu.Lock()
		out[q].rx = s.stats
		s.mu.Unlock()
		t := &p.tx[q]
		t.mu.Lock()
		out[q].tx = t.stats
		t.mu.Unlock()
	}
	return out
}

// Stats returns the port's ETH_SS_STATS values, in StatNames(queues) order for the current queue
// count (ManaCounters). Like mana_get_ethtool_stats, it fills nothing while the port is not up:
// every value is then 0. Caller holds the configuration lock.
func (p *Port) Stats() []uint64 {
	p.assertLocked()
	n := p.set.Queues
	if !p.running {
		return make([]uint64, StatCount(n))
	}
	return CounterValues(ManaCounters, p.snapshot(n))
}

// ExtraStats returns the values of ExtraStatNames (ManadCounters), summed over every queue slot,
// up or down: queues beyond the current count keep what they counted. Safe to call without the
// configuration lock.
func (p *Port) ExtraStats() []uint64 {
	return CounterValues(ManadCounters, p.snapshot(len(p.rx)))
}

// NetdevStats are the port's netdev counters (rtnl_link_stats64 drops), which the kernel keeps
// outside ethtool -S, plus the model's own reasons for RX drops.
type NetdevStats struct {
	RxPackets, RxBytes, TxPackets, TxBytes uint64
	RxDropped, TxDropped                   uint64
	RxOversize, RxAllocFail                uint64 // why RX frames were dropped
	RxMissed                               uint64 // hc_rx_discards_no_wqe: no posted buffer
	// RxShortHeadroom counts frames delivered with less headroom than LL_RESERVED_SPACE (256):
	// those the kernel would reallocate with pskb_expand_head to forward them out of a MANA port.
	RxShortHeadroom uint64
}

// NetdevStats sums the netdev counters over every queue slot (mana_get_stats64). Safe to call
// without the configuration lock.
func (p *Port) NetdevStats() NetdevStats {
	var s NetdevStats
	for q := range p.rx {
		r := &p.rx[q]
		r.mu.Lock()
		s.RxPackets += r.stats.packets
		s.RxBytes += r.stats.bytes
		s.RxDropped += r.stats.dropped
		s.RxOversize += r.stats.oversize
		s.RxAllocFail += r.stats.allocFail
		s.RxMissed += r.stats.discardNoWQE
		s.RxShortHeadroom += r.stats.shortHeadroom
		r.mu.Unlock()
		t := &p.tx[q]
		t.mu.Lock()
		s.TxPackets += t.stats.packets
		s.TxBytes += t.stats.bytes
		s.TxDropped += t.stats.dropped
		t.mu.Unlock()
	}
	return s
}

// QueueCounters are one queue index's counters, RX and TX, as metrics export them. Like the
// driver's, they survive reconfigurations; the page-pool counters are those of the queue's
// current pool, which every rebuild of the queues replaces (they start again from 0).
type QueueCounters struct {
	// Stats are every counter of the queue index, read with the rows of ManaCounters and
	// ManadCounters.
	Stats QueueStats
	// RingPosted and RingSize are the buffers posted in the RX ring and the ring's size; both 0
	// without a running queue.
	RingPosted, RingSize int
	Pool                 *pagepool.Stats // the running queue's page pool; nil without one
}

// QueueCounters returns the counters of queues 0..Settings().Queues-1. Caller holds the
// configuration lock.
func (p *Port) QueueCounters() []QueueCounters {
	p.assertLocked()
	out := make([]QueueCounters, p.set.Queues)
	for q := range out {
		c := &out[q]
		s := &p.rx[q]
		s.mu.Lock()
		c.Stats.rx = s.stats
		if rq := s.q; rq != nil {
			c.RingSize = len(rq.ring)
			for _, b := range rq.ring {
				if b != nil {
					c.RingPosted++
				}
			}
			rq.pool.FlushStats() // the queue lock makes this goroutine the pool's owner
			ps := rq.pool.Stats()
			c.Pool = &ps
		}
		s.mu.Unlock()
		t := &p.tx[q]
		t.mu.Lock()
		c.Stats.tx = t.stats
		t.mu.Unlock()
	}
	return out
}

// ReconfigOutcome is how one reconfiguration (SetPrivFlags, SetMTU, SetXDP, SetRings,
// SetChannels past validation) ended.
type ReconfigOutcome uint8

// The outcomes of a reconfiguration.
const (
	ReconfigApplied        ReconfigOutcome = iota // the queues were rebuilt with the new settings
	ReconfigStored                                // stored only: port down or detached, or the RX layout cannot change
	ReconfigUnchanged                             // the settings asked for were the current ones
	ReconfigPreallocFailed                        // reverted, port untouched
	ReconfigDetachFailed                          // reverted, port still running
	ReconfigAttachFailed                          // reverted, port detached until the reset work restores it
	ReconfigRefused                               // the port is being removed, or no RX layout fits
	NumReconfigOutcomes
)

// String returns the outcome's metric label.
func (o ReconfigOutcome) String() string {
	return [...]string{"applied", "stored", "unchanged", "prealloc_failed", "detach_failed",
		"attach_failed", "refused"}[o]
}

// reconfigBuckets are the upper bounds, in seconds, of the reconfiguration duration histogram.
var reconfigBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// opStats count one kind of reconfiguration. Guarded by the configuration lock.
type opStats struct {
	outcomes [NumReconfigOutcomes]uint64
	count    uint64 // durations observed: the reconfigurations that rebuilt or tried to
	sum      time.Duration
	buckets  [len(reconfigBuckets)]uint64 // not cumulative
}

// observe counts a reconfiguration of op with outcome o; took >= 0 also records its duration.
// Caller holds the configuration lock.
func (p *Port) observe(op string, o ReconfigOutcome, took time.Duration) {
	st := p.reconfigs[op]
	if st == nil {
		st = &opStats{}
		p.reconfigs[op] = st
	}
	st.outcomes[o]++
	if took < 0 {
		return
	}
	st.count++
	st.sum += took
	for i, b := range reconfigBuckets {
		if took.Seconds() <= b {
			st.buckets[i]++
			break
		}
	}
}

// ReconfigStats are the counts of one kind of reconfiguration.
type ReconfigStats struct {
	Op       string                      // "priv-flags", "mtu", "xdp", "rings" or "channels"
	Outcomes [NumReconfigOutcomes]uint64 // by ReconfigOutcome
	Count    uint64                      // reconfigurations that rebuilt the queues or tried to
	Sum      float64                     // their total duration, seconds
	Buckets  map[float64]uint64          // cumulative counts by upper bound (seconds), as Prometheus wants them
}

// ReconfigStats returns the reconfiguration counts by kind, sorted by Op. Only kinds that
// happened appear. Caller holds the configuration lock.
func (p *Port) ReconfigStats() []ReconfigStats {
	p.assertLocked()
	out := make([]ReconfigStats, 0, len(p.reconfigs))
	for op, st := range p.reconfigs {
		rs := ReconfigStats{Op: op, Outcomes: st.outcomes, Count: st.count, Sum: st.sum.Seconds(),
			Buckets: make(map[float64]uint64, len(reconfigBuckets))}
		var cum uint64
		for i, b := range reconfigBuckets {
			cum += st.buckets[i]
			rs.Buckets[b] = cum
		}
		out = append(out, rs)
	}
	slices.SortFunc(out, func(a, b ReconfigStats) int { return strings.Compare(a.Op, b.Op) })
	return out
}

// Resets returns how many reset-work attempts restored the port and how many failed. Caller
// holds the configuration lock.
func (p *Port) Resets() (ok, failed uint64) {
	p.assertLocked()
	return p.resetsOK, p.resetsFailed
}
