// Package ethtool holds the parts of the kernel's ethtool generic netlink
// family (net/ethtool/*.c, include/uapi/linux/ethtool_netlink*.h) that both
// manad's server and its client need: the constants that
// golang.org/x/sys/unix lacks, the request policies, and the bitset codec
// (ethnl_put_bitset32, ethnl_update_bitset32 and a decoder).
//
// Message and attribute numbers are taken from golang.org/x/sys/unix
// (ETHTOOL_MSG_*, ETHTOOL_A_*); they are stable kernel ABI.
package ethtool

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/internal/siocethtool"
)

// Family identity (ETHTOOL_GENL_NAME, ETHTOOL_GENL_VERSION,
// ETHTOOL_MCGRP_MONITOR_NAME).
const (
	FamilyName   = unix.ETHTOOL_GENL_NAME
	Version      = unix.ETHTOOL_GENL_VERSION
	MonitorGroup = unix.ETHTOOL_MCGRP_MONITOR_NAME
)

// String set IDs (enum ethtool_stringset) and ETH_GSTRING_LEN, which x/sys/unix does not define:
// internal/siocethtool holds them once, for the ioctl and netlink alike.
const (
	SSTest            = siocethtool.SSTest
	SSStats           = siocethtool.SSStats
	SSPrivFlags       = siocethtool.SSPrivFlags
	SSNtupleFilters   = siocethtool.SSNtupleFilters
	SSFeatures        = siocethtool.SSFeatures
	SSRSSHashFuncs    = siocethtool.SSRSSHashFuncs
	SSTunables        = siocethtool.SSTunables
	SSPhyStats        = siocethtool.SSPhyStats
	SSPhyTunables     = siocethtool.SSPhyTunables
	SSLinkModes       = siocethtool.SSLinkModes
	SSMsgClasses      = siocethtool.SSMsgClasses
	SSWolModes        = siocethtool.SSWolModes
	SSSofTimestamping = siocethtool.SSSofTimestamping
	SSTsTxTypes       = siocethtool.SSTsTxTypes
	SSTsRxFilters     = siocethtool.SSTsRxFilters
	SSUDPTunnelTypes  = siocethtool.SSUDPTunnelTypes
	SSStatsStd        = siocethtool.SSStatsStd
	SSStatsEthPhy     = siocethtool.SSStatsEthPhy
	SSStatsEthMAC     = siocethtool.SSStatsEthMAC
	SSStatsEthCtrl    = siocethtool.SSStatsEthCtrl
	SSStatsRMON       = siocethtool.SSStatsRMON
	SSStatsPhy        = siocethtool.SSStatsPhy
	SSTsFlags         = siocethtool.SSTsFlags
	SSCount           = siocethtool.SSCount    // ETH_SS_COUNT
	GStringLen        = siocethtool.GStringLen // ETH_GSTRING_LEN
)

// Limits and numbers of the netlink family.
const (
	MaxPrivFlags   = 32 // ethnl_get_priv_flags_info caps the count here
	MaxBitsetSize  = 32767
	HeaderPhyIndex = 4   // ETHTOOL_A_HEADER_PHY_INDEX (not in x/sys v0.50.0)
	FlagsBasic     = 0x3 // ETHTOOL_FLAGS_BASIC: COMPACT_BITSETS|OMIT_REPLY
	altIfNameSize  = 128 // ALTIFNAMSIZ
	IfNameSize     = unix.IFNAMSIZ
)

// PerDevStringSet reports whether string set id is filled by the driver
// (info_template[id].per_dev in net/ethtool/strset.c); all others come from
// kernel-wide tables.
func PerDevStringSet(id uint32) bool {
	switch id {
	case SSTest, SSStats, SSPrivFlags, SSPhyStats:
		return true
	}
	return false
}

// headerPolicy is ethnl_header_policy: the request header nest of every
// STRSET, PRIVFLAGS, RINGS and CHANNELS request.
var headerPolicy = nlattr.NewSet(unix.ETHTOOL_A_HEADER_FLAGS, map[uint16]nlattr.Policy{
	unix.ETHTOOL_A_HEADER_DEV_INDEX: {Kind: nlattr.U32},
	unix.ETHTOOL_A_HEADER_DEV_NAME:  {Kind: nlattr.NulString, Len: altIfNameSize - 1},
	unix.ETHTOOL_A_HEADER_FLAGS:     {Kind: nlattr.U32, Check: nlattr.CheckMask, Mask: FlagsBasic},
})

// headerNest is NLA_POLICY_NESTED(ethnl_header_policy).
var headerNest = nlattr.Policy{Kind: nlattr.Nested, Nested: headerPolicy}

// headerPhyPolicy is ethnl_header_policy_phy: the basic header and a PHY
// index (NLA_POLICY_MIN(NLA_U32, 1)), for the messages that can be about one
// of a device's PHYs (STRSET_GET, cable tests, PSE, PLCA).
var headerPhyPolicy = nlattr.NewSet(HeaderPhyIndex, map[uint16]nlattr.Policy{
	unix.ETHTOOL_A_HEADER_DEV_INDEX: headerPolicy.Policy(unix.ETHTOOL_A_HEADER_DEV_INDEX),
	unix.ETHTOOL_A_HEADER_DEV_NAME:  headerPolicy.Policy(unix.ETHTOOL_A_HEADER_DEV_NAME),
	unix.ETHTOOL_A_HEADER_FLAGS:     headerPolicy.Policy(unix.ETHTOOL_A_HEADER_FLAGS),
	HeaderPhyIndex:                  {Kind: nlattr.U32, Check: nlattr.CheckMin, Min: 1},
})

// Request policies of the supported messages (ethnl_*_get/set_policy),
// exposed read-only through Policies.
var (
	strsetGetPolicy = nlattr.NewSet(unix.ETHTOOL_A_STRSET_COUNTS_ONLY, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_STRSET_HEADER:      {Kind: nlattr.Nested, Nested: headerPhyPolicy},
		unix.ETHTOOL_A_STRSET_STRINGSETS:  {Kind: nlattr.Nested},
		unix.ETHTOOL_A_STRSET_COUNTS_ONLY: {Kind: nlattr.Flag},
	})
	// stringSetsPolicy is strset_stringsets_policy.
	stringSetsPolicy = nlattr.NewSet(unix.ETHTOOL_A_STRINGSETS_STRINGSET, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_STRINGSETS_STRINGSET: {Kind: nlattr.Nested},
	})
	// stringSetPolicy is get_stringset_policy.
	stringSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_STRINGSET_ID, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_STRINGSET_ID: {Kind: nlattr.U32},
	})
	privFlagsGetPolicy = nlattr.NewSet(unix.ETHTOOL_A_PRIVFLAGS_HEADER, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_PRIVFLAGS_HEADER: headerNest,
	})
	privFlagsSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_PRIVFLAGS_FLAGS, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_PRIVFLAGS_HEADER: headerNest,
		unix.ETHTOOL_A_PRIVFLAGS_FLAGS:  {Kind: nlattr.Nested},
	})
	ringsGetPolicy = nlattr.NewSet(unix.ETHTOOL_A_RINGS_HEADER, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_RINGS_HEADER: headerNest,
	})
	// ringsSetPolicy is ethnl_rings_set_policy; the *_MAX attributes have no
	// entry, so strict validation answers "Unsupported attribute".
	ringsSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_RINGS_HDS_THRESH, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_RINGS_HEADER:          headerNest,
		unix.ETHTOOL_A_RINGS_RX:              {Kind: nlattr.U32},
		unix.ETHTOOL_A_RINGS_RX_MINI:         {Kind: nlattr.U32},
		unix.ETHTOOL_A_RINGS_RX_JUMBO:        {Kind: nlattr.U32},
		unix.ETHTOOL_A_RINGS_TX:              {Kind: nlattr.U32},
		unix.ETHTOOL_A_RINGS_RX_BUF_LEN:      {Kind: nlattr.U32, Check: nlattr.CheckMin, Min: 1},
		unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT:  {Kind: nlattr.U8, Check: nlattr.CheckMax, Max: 2},
		unix.ETHTOOL_A_RINGS_CQE_SIZE:        {Kind: nlattr.U32, Check: nlattr.CheckMin, Min: 1},
		unix.ETHTOOL_A_RINGS_TX_PUSH:         {Kind: nlattr.U8, Check: nlattr.CheckMax, Max: 1},
		unix.ETHTOOL_A_RINGS_RX_PUSH:         {Kind: nlattr.U8, Check: nlattr.CheckMax, Max: 1},
		unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN: {Kind: nlattr.U32},
		unix.ETHTOOL_A_RINGS_HDS_THRESH:      {Kind: nlattr.U32},
	})
	channelsGetPolicy = nlattr.NewSet(unix.ETHTOOL_A_CHANNELS_HEADER, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_CHANNELS_HEADER: headerNest,
	})
	channelsSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_CHANNELS_HEADER:         headerNest,
		unix.ETHTOOL_A_CHANNELS_RX_COUNT:       {Kind: nlattr.U32},
		unix.ETHTOOL_A_CHANNELS_TX_COUNT:       {Kind: nlattr.U32},
		unix.ETHTOOL_A_CHANNELS_OTHER_COUNT:    {Kind: nlattr.U32},
		unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT: {Kind: nlattr.U32},
	})
)

// Policies are the kernel's request policies of the supported ethtool
// messages. A *nlattr.Set cannot be modified through its methods.
type Policies struct {
	Header, HeaderPhy, StrsetGet, StringSets     *nlattr.Set
	StringSet                                    *nlattr.Set
	PrivFlagsGet, PrivFlagsSet                   *nlattr.Set
	RingsGet, RingsSet, ChannelsGet, ChannelsSet *nlattr.Set
}

// Policy returns the request policies.
func Policy() Policies {
	return Policies{
		Header: headerPolicy, HeaderPhy: headerPhyPolicy, StrsetGet: strsetGetPolicy, StringSets: stringSetsPolicy, StringSet: stringSetPolicy,
		PrivFlagsGet: privFlagsGetPolicy, PrivFlagsSet: privFlagsSetPolicy,
		RingsGet: ringsGetPolicy, RingsSet: ringsSetPolicy, ChannelsGet: channelsGetPolicy, ChannelsSet: channelsSetPolicy,
	}
}

// PutStrz appends a string attribute cut to ETH_GSTRING_LEN characters plus
// the NUL, as ethnl_put_strz does for device, bit and string-set names.
func PutStrz(b *nlattr.Builder, t uint16, s string) {
	if len(s) > GStringLen {
		s = s[:GStringLen]
	}
	b.PutString(t, s)
}
