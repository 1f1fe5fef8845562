package wire

import (
	"fmt"

	"github.com/manad/manad/genl/nlattr"
)

// STATS message attributes (enum ETHTOOL_A_STATS_* and ETHTOOL_A_STATS_GRP_*, uapi
// ethtool_netlink.h; x/sys/unix v0.50.0 does not have them).
const (
	StatsHeader = 2 // nest (1 is ETHTOOL_A_STATS_PAD)
	StatsGroups = 3 // bitset over ETH_SS_STATS_STD
	StatsGrp    = 4 // nest: StatsGrp*; one per group the request selected
	StatsSrc    = 5 // u32: enum ethtool_mac_stats_src
	StatsMax    = StatsSrc

	StatsGrpID        = 2 // u32: ETHTOOL_STATS_* (1 is ETHTOOL_A_STATS_GRP_PAD)
	StatsGrpSSID      = 3 // u32: the string set naming the group's counters (ETH_SS_STATS_ETH_PHY + ID)
	StatsGrpStat      = 4 // nest holding one u64 whose type is the counter's index in that set
	StatsGrpHistRx    = 5 // nest: StatsGrpHistBkt*, one RMON RX histogram bucket
	StatsGrpHistTx    = 6 // nest: likewise for TX
	StatsGrpHistBktLo = 7 // u32: lowest frame size of the bucket (0 = none)
	StatsGrpHistBktHi = 8 // u32: highest frame size of the bucket (0 = no limit)
	StatsGrpHistVal   = 9 // u64

	// MACStatsSrcMax is ETHTOOL_MAC_STATS_SRC_PMAC, the largest ETHTOOL_A_STATS_SRC.
	MACStatsSrcMax = 2
)

// StatsGroup is one ETHTOOL_A_STATS_GRP of a STATS_GET reply: the group, the string set that
// names its counters, the counters the driver reported (stat_put leaves out the others) and, for
// RMON, the frame-size histograms.
type StatsGroup struct {
	ID, SSID       uint32
	Stats          []GroupStat
	HistRx, HistTx []HistBucket
}

// GroupStat is one counter of a group: its index in the group's string set and its value.
type GroupStat struct {
	Index uint16
	Value uint64
}

// HistBucket is one bucket of an RMON histogram (struct ethtool_rmon_hist_range plus its count).
type HistBucket struct {
	Low, High uint32
	Value     uint64
}

// PutStatsGroup writes g as one ETHTOOL_A_STATS_GRP nest, as stats_put_stats and
// stats_put_rmon_hist do: each counter in a nest of its own.
func PutStatsGroup(b *nlattr.Builder, g *StatsGroup) {
	n := b.Nest(StatsGrp)
	b.PutU32(StatsGrpID, g.ID)
	b.PutU32(StatsGrpSSID, g.SSID)
	for _, s := range g.Stats {
		sn := b.Nest(StatsGrpStat)
		b.PutU64(s.Index, s.Value)
		b.EndNest(sn)
	}
	for _, h := range []struct {
		typ uint16
		bkt []HistBucket
	}{{StatsGrpHistRx, g.HistRx}, {StatsGrpHistTx, g.HistTx}} {
		for _, bk := range h.bkt {
			hn := b.Nest(h.typ)
			if bk.Low != 0 {
				b.PutU32(StatsGrpHistBktLo, bk.Low)
			}
			if bk.High != 0 {
				b.PutU32(StatsGrpHistBktHi, bk.High)
			}
			b.PutU64(StatsGrpHistVal, bk.Value)
			b.EndNest(hn)
		}
	}
	b.EndNest(n)
}

// DecodeStatsGroup reads the payload of one ETHTOOL_A_STATS_GRP. Unknown attributes are skipped.
// Errors: a counter or bucket value that is not 8 bytes, a group id or string set that is not 4,
// a counter nest without exactly one counter, or trailing bytes; each names what is malformed.
func DecodeStatsGroup(data []byte) (StatsGroup, error) {
	var g StatsGroup
	it := nlattr.NewIter(data, 0, len(data))
	for it.Next() {
		a := it.Attr()
		switch a.Type() {
		case StatsGrpID, StatsGrpSSID:
			if len(a.Data) != 4 {
				return g, fmt.Errorf("stats group attribute %d: %d bytes, want 4", a.Type(), len(a.Data))
			}
			if a.Type() == StatsGrpID {
				g.ID = a.U32()
			} else {
				g.SSID = a.U32()
			}
		case StatsGrpStat:
			in := nlattr.NewIter(a.Data, 0, len(a.Data))
			if !in.Next() {
				return g, fmt.Errorf("stats group %d: an empty counter nest", g.ID)
			}
			s := in.Attr()
			if len(s.Data) != 8 || in.Next() || in.Rem() > 0 {
				return g, fmt.Errorf("stats group %d: counter %d: malformed (want one u64)", g.ID, s.Type())
			}
			g.Stats = append(g.Stats, GroupStat{Index: s.Type(), Value: s.U64()})
		case StatsGrpHistRx, StatsGrpHistTx:
			var bk HistBucket
			hv := false
			in := nlattr.NewIter(a.Data, 0, len(a.Data))
			for in.Next() {
				h := in.Attr()
				switch h.Type() {
				case StatsGrpHistBktLo:
					bk.Low = h.U32()
				case StatsGrpHistBktHi:
					bk.High = h.U32()
				case StatsGrpHistVal:
					if len(h.Data) != 8 {
						return g, fmt.Errorf("stats group %d: histogram value: %d bytes, want 8", g.ID, len(h.Data))
					}
					bk.Value, hv = h.U64(), true
				}
			}
			if !hv || in.Rem() > 0 {
				return g, fmt.Errorf("stats group %d: malformed histogram bucket", g.ID)
			}
			if a.Type() == StatsGrpHistRx {
				g.HistRx = append(g.HistRx, bk)
			} else {
				g.HistTx = append(g.HistTx, bk)
			}
		}
	}
	if it.Rem() > 0 {
		return g, fmt.Errorf("stats group: %d bytes of trailing data", it.Rem())
	}
	return g, nil
}
