package vnic

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manad/manad/vnic/pagepool"
)

// Driver statistics names, in the order mana_get_strings emits them (reference/mana-driver.md §4).
var (
	ethStatNames = []string{
		"stop_queue", "wake_queue", "tx_cq_err", "tx_cqe_unknown_type", "tx_linear_pkt_cnt",
		"rx_cqe_unknown_type",
	}
	hcStatNames = []string{
		"hc_rx_discards_no_wqe", "hc_rx_err_vport_disabled", "hc_rx_bytes", "hc_rx_ucast_pkts",
		"hc_rx_ucast_bytes", "hc_rx_bcast_pkts", "hc_rx_bcast_bytes", "hc_rx_mcast_pkts",
		"hc_rx_mcast_bytes", "hc_tx_err_gf_disabled", "hc_tx_err_vport_disabled",
		"hc_tx_err_inval_vportoffset_pkt", "hc_tx_err_vlan_enforcement",
		"hc_tx_err_eth_type_enforcement", "hc_tx_err_sa_enforcement", "hc_tx_err_sqpdid_enforcement",
		"hc_tx_err_cqpdid_enforcement", "hc_tx_err_mtu_violation", "hc_tx_err_inval_oob",
		"hc_tx_err_gdma", "hc_tx_bytes", "hc_tx_ucast_pkts", "hc_tx_ucast_bytes", "hc_tx_bcast_pkts",
		"hc_tx_bcast_bytes", "hc_tx_mcast_pkts", "hc_tx_mcast_bytes",
	}
	phyStatNames = func() []string {
		names := []string{"hc_rx_pkt_drop_phy", "hc_tx_pkt_drop_phy"}
		for tc := 0; tc < 8; tc++ {
			t := strconv.Itoa(tc)
			names = append(names, "hc_tc"+t+"_rx_pkt_phy", "hc_tc"+t+"_rx_byte_phy",
				"hc_tc"+t+"_tx_pkt_phy", "hc_tc"+t+"_tx_byte_phy")
		}
		for tc := 0; tc < 8; tc++ {
			t := strconv.Itoa(tc)
			names = append(names, "hc_tc"+t+"_rx_pause_phy", "hc_tc"+t+"_tx_pause_phy")
		}
		return names
	}()
	rxQueueStatNames = []string{
		"packets", "bytes", "xdp_drop", "xdp_tx", "xdp_redirect", "pkt_len0_err",
		"coalesced_cqe_2", "coalesced_cqe_3", "coalesced_cqe_4",
	}
	txQueueStatNames = []string{
		"packets", "bytes", "xdp_xmit", "tso_packets", "tso_bytes", "tso_inner_packets",
		"tso_inner_bytes", "long_pkt_fmt", "short_pkt_fmt", "csum_partial", "mana_map_err",
	}
)

// Numbers of statistics: MANA_STATS_RX_COUNT and MANA_STATS_TX_COUNT per queue, plus the fixed
// eth, hc and phy groups.
const (
	StatsRxPerQueue = 9
	StatsTxPerQueue = 11
	statsFixed      = 6 + 27 + 50
)

// StatCount returns mana_get_sset_count(ETH_SS_STATS) for a port with the given queue count.
func StatCount(queues int) int { return statsFixed + queues*(StatsRxPerQueue+StatsTxPerQueue) }

// StatNames returns the ETH_SS_STATS strings of a port with the given queue count, in driver
// order: eth, hc, phy, then every RX queue's counters, then every TX queue's.
func StatNames(queues int) []string {
	names := make([]string, 0, StatCount(queues))
	names = append(names, ethStatNames...)
	names = append(names, hcStatNames...)
	names = append(names, phyStatNames...)
	for q := 0; q < queues; q++ {
		p := "rx_" + strconv.Itoa(q) + "_"
		for _, n := range rxQueueStatNames {
			names = append(names, p+n)
		}
	}
	for q := 0; q < queues; q++ {
		p := "tx_" + strconv.Itoa(q) + "_"
		for _, n := range txQueueStatNames {
			names = append(names, p+n)
		}
	}
	return names
}

// PrivFlagNames are the ETH_SS_PRIV_FLAGS strings (mana_priv_flags).
var PrivFlagNames = [PrivFlagMax]string{"full-page-rx"}

// PrivFlagFullPageRx is MANA_PRIV_FLAG_USE_FULL_PAGE_RXBUF.
const PrivFlagFullPageRx uint32 = 1 << 0

// PrivFlagMax is MANA_PRIV_FLAG_MAX, the number of private flags.
const PrivFlagMax = 1

// privFlagsMask covers every defined private flag (GENMASK(MANA_PRIV_FLAG_MAX - 1, 0)).
const privFlagsMask = 1<<PrivFlagMax - 1

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

// Stats returns the port's ETH_SS_STATS values, in StatNames(queues) order for the current queue
// count. Like mana_get_ethtool_stats, it fills nothing while the port is not up: every value is
// then 0. The global eth counters and the hc/phy error counters are always 0 in the model; hc
// traffic counters and the tc0 phy counters count the frames the port's vport saw. Caller holds
// the configuration lock.
func (p *Port) Stats() []uint64 {
	p.assertLocked()
	n := p.set.Queues
	out := make([]uint64, StatCount(n))
	if !p.running {
		return out
	}
	var rx rxStats
	var tx txStats
	rxq := make([]rxStats, n)
	txq := make([]txStats, n)
	for q := 0; q < n; q++ {
		s := &p.rx[q]
		s.mu.Lock()
		rxq[q] = s.stats
		s.mu.Unlock()
		t := &p.tx[q]
		t.mu.Lock()
		txq[q] = t.stats
		t.mu.Unlock()
	}
	for q := range rxq {
		r := &rxq[q]
		rx.packets += r.packets
		rx.hcBytes += r.hcBytes
		rx.ucastPkts += r.ucastPkts
		rx.ucastBytes += r.ucastBytes
		rx.bcastPkts += r.bcastPkts
		rx.bcastBytes += r.bcastBytes
		rx.mcastPkts += r.mcastPkts
		rx.mcastBytes += r.mcastBytes
		rx.discardNoWQE += r.discardNoWQE
		t := &txq[q]
		tx.hcBytes += t.hcBytes
		tx.ucastPkts += t.ucastPkts
		tx.ucastBytes += t.ucastBytes
		tx.bcastPkts += t.bcastPkts
		tx.bcastBytes += t.bcastBytes
		tx.mcastPkts += t.mcastPkts
		tx.mcastBytes += t.mcastBytes
	}
	i := len(ethStatNames)
	// hc group, in hcStatNames order.
	hc := []uint64{
		rx.discardNoWQE, 0, rx.hcBytes, rx.ucastPkts, rx.ucastBytes, rx.bcastPkts, rx.bcastBytes,
		rx.mcastPkts, rx.mcastBytes, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		tx.hcBytes, tx.ucastPkts, tx.ucastBytes, tx.bcastPkts, tx.bcastBytes, tx.mcastPkts, tx.mcastBytes,
	}
	i += copy(out[i:], hc)
	// phy group: no drops at the PHY; everything travels in traffic class 0; no pause frames.
	out[i+2] = rx.ucastPkts + rx.bcastPkts + rx.mcastPkts
	out[i+3] = rx.hcBytes
	out[i+4] = tx.ucastPkts + tx.bcastPkts + tx.mcastPkts
	out[i+5] = tx.hcBytes
	i += len(phyStatNames)
	for q := range rxq {
		r := &rxq[q]
		i += copy(out[i:], []uint64{r.packets, r.bytes, r.xdpDrop, r.xdpTx, r.xdpRedirect, r.pktLen0Err,
			r.coalescedCQE[0], r.coalescedCQE[1], r.coalescedCQE[2]})
	}
	for q := range txq {
		t := &txq[q]
		i += copy(out[i:], []uint64{t.packets, t.bytes, t.xdpXmit, t.tsoPackets, t.tsoBytes,
			t.tsoInnerPackets, t.tsoInnerBytes, t.longPktFmt, t.shortPktFmt, t.csumPartial, t.mapErr})
	}
	return out
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

// ManadStatPrefix begins the name of every ETH_SS_STATS counter manad adds after the driver's
// own (StatNames), so that tools comparing against the mana driver's ethtool -S list can tell
// them apart.
const ManadStatPrefix = "manad_"

// ExtraStatNames are the model's own counters, summed over the queues, that follow the driver's
// in manad's ETH_SS_STATS set, in NetdevStats.ExtraStats order: every RX drop (rx_dropped of
// rtnl_link_stats64), the oversize and allocation-failure reasons behind some of them (the
// others have driver counters: hc_rx_discards_no_wqe, rx_N_xdp_drop, rx_N_pkt_len0_err), TX
// drops on a stopped queue, and RX frames delivered with less headroom than LL_RESERVED_SPACE
// (NetdevStats.RxShortHeadroom).
func ExtraStatNames() []string {
	return []string{
		ManadStatPrefix + "rx_dropped", ManadStatPrefix + "rx_drop_oversize",
		ManadStatPrefix + "rx_drop_alloc_fail", ManadStatPrefix + "tx_dropped",
		ManadStatPrefix + "rx_short_headroom",
	}
}

// ExtraStats returns the values of ExtraStatNames.
func (s NetdevStats) ExtraStats() []uint64 {
	return []uint64{s.RxDropped, s.RxOversize, s.RxAllocFail, s.TxDropped, s.RxShortHeadroom}
}

// QueueCounters are one queue index's counters, RX and TX, as metrics export them. Like the
// driver's, they survive reconfigurations; the page-pool counters are those of the queue's
// current pool, which every rebuild of the queues replaces (they start again from 0).
type QueueCounters struct {
	RxPackets, RxBytes uint64
	// RX drops by reason: no posted buffer (hc_rx_discards_no_wqe: the queue was not running
	// or the daemon's input for it was full), longer than the buffer, refill failed, XDP
	// verdict, zero-length completion.
	RxNoWQE, RxOversize, RxAllocFail, RxXDPDrop, RxLen0 uint64
	RxXDPTx                                             uint64
	RxShortHeadroom                                     uint64 // see NetdevStats.RxShortHeadroom
	TxPackets, TxBytes                                  uint64
	TxDropped                                           uint64 // transmitted while the TX queue was stopped
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
		r := &s.stats
		c.RxPackets, c.RxBytes = r.packets, r.bytes
		c.RxNoWQE, c.RxOversize, c.RxAllocFail, c.RxXDPDrop, c.RxLen0 = r.discardNoWQE, r.oversize, r.allocFail, r.xdpDrop, r.pktLen0Err
		c.RxXDPTx, c.RxShortHeadroom = r.xdpTx, r.shortHeadroom
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
		c.TxPackets, c.TxBytes, c.TxDropped = t.stats.packets, t.stats.bytes, t.stats.dropped
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
