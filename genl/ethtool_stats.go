package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// STATS_GET, as net/ethtool/stats.c for mana: the driver implements none of
// the standard groups (no get_eth_phy_stats, get_eth_mac_stats,
// get_eth_ctrl_stats, get_rmon_stats, no PHY) and no MAC merge layer, so a
// reply carries the source and, per requested group, only its id and string
// set, as the kernel's for any such device. Its driver counters are
// ETH_SS_STATS (`ethtool -S` without groups), served by the ioctl only.

// The attribute numbers are genl/wire's Stats*; these short names keep the policy readable.
const (
	statsAHeader = wire.StatsHeader
	statsAGroups = wire.StatsGroups
	statsASrc    = wire.StatsSrc
)

// statsGetPolicy is ethnl_stats_get_policy.
var statsGetPolicy = nlattr.NewSet(statsASrc, map[uint16]nlattr.Policy{
	statsAHeader: {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
	statsAGroups: {Kind: nlattr.Nested},
	statsASrc:    {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: wire.MACStatsSrcMax},
})

// statsReq is struct stats_req_info: the requested groups (bit i is
// ETHTOOL_STATS_* i, named by ETH_SS_STATS_STD) and the MAC stats source.
type statsReq struct {
	groups []uint32
	nbits  int
	src    uint32
}

// StatsGet is STATS_GET (ethnl_stats_request_ops).
func (ethtoolMsgs) StatsGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_STATS_GET, "stats-get", statsGetPolicy, &ethGet{
		replyCmd: unix.ETHTOOL_MSG_STATS_GET_REPLY,
		hdr:      statsAHeader,
		parse:    func(r *request) (any, error) { return r.s.ethStatsParse(r) },
		prepare: func(r *request, d *Device, req any) (any, error) {
			// stats_prepare_data: EMAC and PMAC need the MAC merge layer mana lacks.
			if req.(*statsReq).src != 0 {
				return nil, nlattr.Errorf(unix.EOPNOTSUPP, "ethtool_nl: Device does not support MAC merge layer")
			}
			return nil, nil
		},
		fill: func(r *request, b *nlattr.Builder, req, _ any, _ bool) error {
			q := req.(*statsReq)
			b.PutU32(statsASrc, q.src)
			for i := 0; i < q.nbits; i++ {
				if q.groups[i/32]&(1<<(i%32)) == 0 {
					continue
				}
				// ETH_SS_STATS_ETH_PHY + i: the groups' string sets follow in the same order.
				// No counters: mana reports none (ETHTOOL_STAT_NOT_SET, left out by stat_put).
				wire.PutStatsGroup(b, &wire.StatsGroup{ID: uint32(i), SSID: uint32(ethtool.SSStatsEthPhy + i)})
			}
			return nil
		},
	})
}

// ethStatsParse mirrors stats_parse_request: the groups bitset over the
// kernel's ETH_SS_STATS_STD names must select something.
func (s *Server) ethStatsParse(r *request) (any, error) {
	names, _ := s.globalSet(ethtool.SSStatsStd)
	q := &statsReq{nbits: len(names), groups: make([]uint32, ethtool.Words(len(names)))}
	mod, err := ethtool.UpdateBitset32(r.msg, r.attr(statsAGroups), q.groups, q.nbits, names)
	if err != nil {
		return nil, err
	}
	if !mod {
		return nil, nlattr.Errorf(unix.EINVAL, "no stats requested")
	}
	q.src = r.attr(statsASrc).U32()
	return q, nil
}
