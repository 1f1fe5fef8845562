package wire

import "golang.org/x/sys/unix"

// The link messages of the ethtool family (net/ethtool/linkinfo.c,
// linkmodes.c, linkstate.c, tsinfo.c).

// Values of struct ethtool_link_settings fields (uapi/linux/ethtool.h).
const (
	SpeedUnknown  = 0xffffffff // SPEED_UNKNOWN
	DuplexHalf    = 0x00
	DuplexFull    = 0x01
	DuplexUnknown = 0xff // DUPLEX_UNKNOWN
	PortTP        = 0x00
	PortOther     = 0xff // PORT_OTHER
	AutonegOff    = 0x00
	AutonegOn     = 0x01

	// LinkModeBits is __ETHTOOL_LINK_MODE_MASK_NBITS of Linux 6.18, the size
	// of the LINKMODES_OURS bitset when the running kernel's link-mode table
	// cannot be read (the server otherwise uses that table's length).
	LinkModeBits = 121
	// SOFTimestampingBits is __SOF_TIMESTAMPING_CNT of Linux 6.18, the size
	// of the TSINFO_TIMESTAMPING bitset, likewise.
	SOFTimestampingBits = 19
	// TsTxTypeBits and TsRxFilterBits are __HWTSTAMP_TX_CNT and
	// __HWTSTAMP_FILTER_CNT of Linux 6.18, likewise.
	TsTxTypeBits   = 4
	TsRxFilterBits = 16
)

// LinkSettings are the struct ethtool_link_settings fields a driver's
// get_link_ksettings fills and manad models; link-mode masks are empty (a
// MANA vport reports none).
type LinkSettings struct {
	Speed                     uint32 // Mb/s, SpeedUnknown when unknown
	Duplex, Port, Autoneg     uint8
	PhyAddr, MDIX, MDIXCtrl   uint8
	Transceiver, RateMatching uint8
	Lanes                     uint32 // 0: not reported
}

// LinkInfoTable is LINKINFO_GET_REPLY after the header, as
// linkinfo_fill_reply writes it: every attribute, always.
var LinkInfoTable = NewTable(
	U8(unix.ETHTOOL_A_LINKINFO_PORT, func(l *LinkSettings) *uint8 { return &l.Port }),
	U8(unix.ETHTOOL_A_LINKINFO_PHYADDR, func(l *LinkSettings) *uint8 { return &l.PhyAddr }),
	U8(unix.ETHTOOL_A_LINKINFO_TP_MDIX, func(l *LinkSettings) *uint8 { return &l.MDIX }),
	U8(unix.ETHTOOL_A_LINKINFO_TP_MDIX_CTRL, func(l *LinkSettings) *uint8 { return &l.MDIXCtrl }),
	U8(unix.ETHTOOL_A_LINKINFO_TRANSCEIVER, func(l *LinkSettings) *uint8 { return &l.Transceiver }),
)

// LinkModesHead and LinkModesTail are LINKMODES_GET_REPLY after the header,
// around the OURS (and PEER) bitsets, as linkmodes_fill_reply writes them;
// a reader decodes both from the same attributes. Lanes are written only
// when reported.
var (
	LinkModesHead = NewTable(
		U8(unix.ETHTOOL_A_LINKMODES_AUTONEG, func(l *LinkSettings) *uint8 { return &l.Autoneg }),
	)
	LinkModesTail = NewTable(
		U32(unix.ETHTOOL_A_LINKMODES_SPEED, func(l *LinkSettings) *uint32 { return &l.Speed }),
		U8(unix.ETHTOOL_A_LINKMODES_DUPLEX, func(l *LinkSettings) *uint8 { return &l.Duplex }),
		U32(unix.ETHTOOL_A_LINKMODES_LANES, func(l *LinkSettings) *uint32 { return &l.Lanes }).OmitZero(),
		U8(unix.ETHTOOL_A_LINKMODES_RATE_MATCHING, func(l *LinkSettings) *uint8 { return &l.RateMatching }),
	)
)

// LinkState is LINKSTATE_GET_REPLY after the header (the parts manad
// models: no SQI, no extended state, as a device without a PHY).
type LinkState struct {
	Link bool // netif_carrier_ok
}

// LinkStateTable is LINKSTATE_GET_REPLY after the header.
var LinkStateTable = NewTable(
	Bool(unix.ETHTOOL_A_LINKSTATE_LINK, func(l *LinkState) *bool { return &l.Link }),
)

// TSInfo is what a driver's get_ts_info reports (struct
// kernel_ethtool_ts_info): SOF_TIMESTAMPING_* capabilities, HWTSTAMP_TX_*
// and HWTSTAMP_FILTER_* bits, and its PHC (-1: none).
type TSInfo struct {
	Timestamping, TxTypes, RxFilters uint32
	PHCIndex                         int32
}
