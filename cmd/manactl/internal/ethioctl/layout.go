package ethioctl

import (
	"encoding/binary"
	"fmt"
)

// The uAPI structures of include/uapi/linux/ethtool.h and linux/if.h as they lie in the
// supervised process's memory on a 64-bit little- or big-endian host: Go structs whose fields
// are the C fields in order, with no padding (none of these C structures has any), encoded in
// the host's byte order by encoding/binary. Structures with a union or a flexible array keep
// only their fixed head here; the rest is read and written at its C offset.

// Sizes and offsets of the C structures (amd64 and arm64 alike).
const (
	ifNameSize = 16 // IFNAMSIZ
	ifreqSize  = 40 // sizeof(struct ifreq)
	ifrDataOff = 16 // offsetof(struct ifreq, ifr_data)

	rxnfcSize          = 192 // sizeof(struct ethtool_rxnfc)
	rxnfcLegacySize    = 16  // offsetof(struct ethtool_rxnfc, data) + sizeof(data): the GRXFH form
	rxnfcRSSContextOff = 184 // offsetof(struct ethtool_rxnfc, rss_context)

	rxfhConfigOff      = 24 // offsetof(struct ethtool_rxfh, rss_config)
	rxfhRSSContextOff  = 4  // offsetof(struct ethtool_rxfh, rss_context)
	rxfhIndirSizeOff   = 4  // offsetof(struct ethtool_rxfh_indir, size)
	rxfhIndirRingOff   = 8  // offsetof(struct ethtool_rxfh_indir, ring_index)
	linkModeMasksOff   = 48 // offsetof(struct ethtool_link_settings, link_mode_masks)
	ssetInfoDataOff    = 16 // offsetof(struct ethtool_sset_info, data)
	perQueueOpSize     = 520
	perQueueSubCmdOff  = 4
	modinfoSize        = 44 // sizeof(struct ethtool_modinfo)
	legacyCmdSize      = 44 // sizeof(struct ethtool_cmd)
	featuresGetBlkSize = 16 // sizeof(struct ethtool_get_features_block)
	featuresSetBlkSize = 8  // sizeof(struct ethtool_set_features_block)
)

// drvinfo is struct ethtool_drvinfo (196 bytes).
type drvinfo struct {
	Cmd                                              uint32
	Driver, Version, FwVersion, BusInfo, EromVersion [32]byte
	Reserved2                                        [12]byte
	NPrivFlags, NStats, TestinfoLen                  uint32
	EedumpLen, RegdumpLen                            uint32
}

// ringparam is struct ethtool_ringparam (36 bytes).
type ringparam struct {
	Cmd                                                             uint32
	RxMaxPending, RxMiniMaxPending, RxJumboMaxPending, TxMaxPending uint32
	RxPending, RxMiniPending, RxJumboPending, TxPending             uint32
}

// channelsC is struct ethtool_channels (36 bytes).
type channelsC struct {
	Cmd                                 uint32
	MaxRx, MaxTx, MaxOther, MaxCombined uint32
	Rx, Tx, Other, Combined             uint32
}

// coalesceC is struct ethtool_coalesce (92 bytes). Its 22 fields after cmd are, in order, the
// ETHTOOL_A_COALESCE_* attributes RX_USECS (2) to RATE_SAMPLE_INTERVAL (23): F[i] is attribute
// i+coalesceFirstAttr, which is how coalesce_fill_reply and ethnl_set_coalesce map them.
type coalesceC struct {
	Cmd uint32
	F   [coalesceFields]uint32
}

const (
	coalesceFields    = 22
	coalesceFirstAttr = 2 // ETHTOOL_A_COALESCE_RX_USECS
)

// legacyCmd is struct ethtool_cmd (44 bytes), ETHTOOL_GSET's.
type legacyCmd struct {
	Cmd, Supported, Advertising                                 uint32
	Speed                                                       uint16
	Duplex, Port, PhyAddress, Transceiver, Autoneg, MdioSupport uint8
	MaxTxPkt, MaxRxPkt                                          uint32
	SpeedHi                                                     uint16
	EthTpMdix, EthTpMdixCtrl                                    uint8
	LpAdvertising                                               uint32
	Reserved                                                    [2]uint32
}

// linkSettings is struct ethtool_link_settings without its link_mode_masks (48 bytes).
type linkSettings struct {
	Cmd, Speed                                                               uint32
	Duplex, Port, PhyAddress, Autoneg, MdioSupport, EthTpMdix, EthTpMdixCtrl uint8
	LinkModeMasksNwords                                                      int8
	Transceiver, MasterSlaveCfg, MasterSlaveState, RateMatching              uint8
	Reserved                                                                 [7]uint32
}

// tsInfo is struct ethtool_ts_info (44 bytes).
type tsInfo struct {
	Cmd, SoTimestamping uint32
	PhcIndex            int32
	TxTypes             uint32
	TxReserved          [3]uint32
	RxFilters           uint32
	RxReserved          [3]uint32
}

// value is struct ethtool_value (8 bytes).
type value struct{ Cmd, Data uint32 }

// ssetInfo is struct ethtool_sset_info without its data (16 bytes).
type ssetInfo struct {
	Cmd, Reserved uint32
	SsetMask      uint64
}

// gstrings is struct ethtool_gstrings without its data (12 bytes).
type gstrings struct{ Cmd, StringSet, Len uint32 }

// statsHead is struct ethtool_stats without its data (8 bytes).
type statsHead struct{ Cmd, NStats uint32 }

// permAddr is struct ethtool_perm_addr without its data (8 bytes).
type permAddr struct{ Cmd, Size uint32 }

// featuresHead is struct ethtool_gfeatures and ethtool_sfeatures without their blocks (8 bytes).
type featuresHead struct{ Cmd, Size uint32 }

// getFeaturesBlock is struct ethtool_get_features_block (16 bytes).
type getFeaturesBlock struct{ Available, Requested, Active, NeverChanged uint32 }

// setFeaturesBlock is struct ethtool_set_features_block (8 bytes).
type setFeaturesBlock struct{ Valid, Requested uint32 }

// rxfh is struct ethtool_rxfh without its rss_config (24 bytes).
type rxfh struct {
	Cmd, RSSContext, IndirSize, KeySize uint32
	HFunc, InputXfrm                    uint8
	Rsvd8                               [2]uint8
	Rsvd32                              uint32
}

// rxnfcHead is the head of struct ethtool_rxnfc: cmd, flow_type and data (16 bytes), the whole
// structure as ETHTOOL_GRXFH was first defined.
type rxnfcHead struct {
	Cmd, FlowType uint32
	Data          uint64
}

// encode returns v in the host's byte order. v is one of this file's structures: an error
// would be a programming error, so it panics.
func encode(v any) []byte {
	b, err := binary.Append(nil, binary.NativeEndian, v)
	if err != nil {
		panic(fmt.Sprintf("ethioctl: encode %T: %v", v, err))
	}
	return b
}

// decode fills v from b, which holds at least binary.Size(v) bytes.
func decode(b []byte, v any) {
	if _, err := binary.Decode(b, binary.NativeEndian, v); err != nil {
		panic(fmt.Sprintf("ethioctl: decode %T from %d bytes: %v", v, len(b), err))
	}
}

// cString copies s into a NUL-terminated C char array, cut as strscpy cuts it.
func cString(dst []byte, s string) {
	clear(dst)
	if len(dst) == 0 {
		return
	}
	copy(dst[:len(dst)-1], s)
}

// goString returns the C string in b up to its first NUL.
func goString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
