package wire

import "golang.org/x/sys/unix"

// The ethtool family's messages as manad implements them (net/ethtool/):
// the attribute numbers are the kernel's (ETHTOOL_A_*, from x/sys/unix).

// Rings are ethtool ring parameters (struct ethtool_ringparam plus the
// kernel_ethtool_ringparam fields manad models).
type Rings struct {
	RxMax, RxMiniMax, RxJumboMax, TxMax uint32
	Rx, RxMini, RxJumbo, Tx             uint32
	RxBufLen, CQESize                   uint32
	TCPDataSplit                        uint8 // 0 unknown, 1 disabled, 2 enabled
	TxPush, RxPush                      bool
	// Sent by drivers with ETHTOOL_RING_USE_TX_PUSH_BUF_LEN / _HDS_THRS only (none of manad's
	// ports); a client reads them from kernel NICs.
	TxPushBufLen, TxPushBufLenMax uint32
	HDSThresh, HDSThreshMax       uint32
}

// Channels are ethtool channel counts (struct ethtool_channels).
type Channels struct {
	RxMax, TxMax, OtherMax, CombinedMax uint32
	Rx, Tx, Other, Combined             uint32
}

// pair is a maximum and its current value, written only when the driver
// reports a maximum: the rule rings_fill_reply and channels_fill_reply share.
func pair[T any](maxType, curType uint16, maxV, cur func(*T) *uint32) [2]Field[T] {
	has := func(v *T) bool { return *maxV(v) != 0 }
	return [2]Field[T]{U32(maxType, maxV).When(has), U32(curType, cur).When(has)}
}

func pairs[T any](ps ...[2]Field[T]) []Field[T] {
	var out []Field[T]
	for _, p := range ps {
		out = append(out, p[0], p[1])
	}
	return out
}

// RingsTable is RINGS_GET_REPLY and RINGS_NTF after the header, as
// rings_fill_reply writes them. The TX-push buffer length and header-split
// threshold are written only when set (drivers with
// ETHTOOL_RING_USE_TX_PUSH_BUF_LEN / _HDS_THRS; none of manad's ports).
var RingsTable = NewTable(append(pairs(
	pair(unix.ETHTOOL_A_RINGS_RX_MAX, unix.ETHTOOL_A_RINGS_RX,
		func(r *Rings) *uint32 { return &r.RxMax }, func(r *Rings) *uint32 { return &r.Rx }),
	pair(unix.ETHTOOL_A_RINGS_RX_MINI_MAX, unix.ETHTOOL_A_RINGS_RX_MINI,
		func(r *Rings) *uint32 { return &r.RxMiniMax }, func(r *Rings) *uint32 { return &r.RxMini }),
	pair(unix.ETHTOOL_A_RINGS_RX_JUMBO_MAX, unix.ETHTOOL_A_RINGS_RX_JUMBO,
		func(r *Rings) *uint32 { return &r.RxJumboMax }, func(r *Rings) *uint32 { return &r.RxJumbo }),
	pair(unix.ETHTOOL_A_RINGS_TX_MAX, unix.ETHTOOL_A_RINGS_TX,
		func(r *Rings) *uint32 { return &r.TxMax }, func(r *Rings) *uint32 { return &r.Tx }),
),
	U32(unix.ETHTOOL_A_RINGS_RX_BUF_LEN, func(r *Rings) *uint32 { return &r.RxBufLen }).OmitZero(),
	U8(unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT, func(r *Rings) *uint8 { return &r.TCPDataSplit }).OmitZero(),
	U32(unix.ETHTOOL_A_RINGS_CQE_SIZE, func(r *Rings) *uint32 { return &r.CQESize }).OmitZero(),
	Bool(unix.ETHTOOL_A_RINGS_TX_PUSH, func(r *Rings) *bool { return &r.TxPush }),
	Bool(unix.ETHTOOL_A_RINGS_RX_PUSH, func(r *Rings) *bool { return &r.RxPush }),
	U32(unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN, func(r *Rings) *uint32 { return &r.TxPushBufLen }).OmitZero(),
	U32(unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN_MAX, func(r *Rings) *uint32 { return &r.TxPushBufLenMax }).OmitZero(),
	U32(unix.ETHTOOL_A_RINGS_HDS_THRESH, func(r *Rings) *uint32 { return &r.HDSThresh }).OmitZero(),
	U32(unix.ETHTOOL_A_RINGS_HDS_THRESH_MAX, func(r *Rings) *uint32 { return &r.HDSThreshMax }).OmitZero(),
)...)

// ChannelsTable is CHANNELS_GET_REPLY and CHANNELS_NTF after the header, as
// channels_fill_reply writes them.
var ChannelsTable = NewTable(pairs(
	pair(unix.ETHTOOL_A_CHANNELS_RX_MAX, unix.ETHTOOL_A_CHANNELS_RX_COUNT,
		func(c *Channels) *uint32 { return &c.RxMax }, func(c *Channels) *uint32 { return &c.Rx }),
	pair(unix.ETHTOOL_A_CHANNELS_TX_MAX, unix.ETHTOOL_A_CHANNELS_TX_COUNT,
		func(c *Channels) *uint32 { return &c.TxMax }, func(c *Channels) *uint32 { return &c.Tx }),
	pair(unix.ETHTOOL_A_CHANNELS_OTHER_MAX, unix.ETHTOOL_A_CHANNELS_OTHER_COUNT,
		func(c *Channels) *uint32 { return &c.OtherMax }, func(c *Channels) *uint32 { return &c.Other }),
	pair(unix.ETHTOOL_A_CHANNELS_COMBINED_MAX, unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT,
		func(c *Channels) *uint32 { return &c.CombinedMax }, func(c *Channels) *uint32 { return &c.Combined }),
)...)

// PrivFlagsSet is a PRIVFLAGS_SET request after the header: the private flags to change, by
// name or index, as ethtool --set-priv-flags sends them; the flags not listed keep their value.
type PrivFlagsSet struct {
	Flags []Bit
}

// PrivFlagsSetTable is PRIVFLAGS_SET after the header, as the client writes it (policy
// ethnl_privflags_set_policy). The server reads the FLAGS bitset as ethnl_update_bitset32 does,
// which also takes the compact form other clients send.
var PrivFlagsSetTable = NewTable(
	BitList(unix.ETHTOOL_A_PRIVFLAGS_FLAGS, func(p *PrivFlagsSet) *[]Bit { return &p.Flags }),
)

// FeaturesSet is a FEATURES_SET request after the header: the features to turn on or off, by
// name, as ethtool -K sends them; the others keep their wanted state.
type FeaturesSet struct {
	Wanted []Bit
}

// FeaturesSetTable is FEATURES_SET after the header, as the client writes it (policy
// ethnl_features_set_policy). The server reads WANTED as ethnl_set_features does, which also
// takes the compact form.
var FeaturesSetTable = NewTable(
	BitList(unix.ETHTOOL_A_FEATURES_WANTED, func(f *FeaturesSet) *[]Bit { return &f.Wanted }),
)

// RingsSet is a RINGS_SET request after the header: the ring parameters to change; nil fields
// are not sent and left alone (ethnl_update_u32 and friends).
type RingsSet struct {
	Rx, RxMini, RxJumbo, Tx, RxBufLen, CQESize *uint32
	TCPDataSplit                               *uint8
	TxPush, RxPush                             *bool
}

// RingsSetTable is RINGS_SET after the header, as the client writes it and the server reads it
// (ethnl_set_rings); the request policy is ethnl_rings_set_policy.
var RingsSetTable = NewTable(
	OptU32(unix.ETHTOOL_A_RINGS_RX, func(r *RingsSet) **uint32 { return &r.Rx }),
	OptU32(unix.ETHTOOL_A_RINGS_RX_MINI, func(r *RingsSet) **uint32 { return &r.RxMini }),
	OptU32(unix.ETHTOOL_A_RINGS_RX_JUMBO, func(r *RingsSet) **uint32 { return &r.RxJumbo }),
	OptU32(unix.ETHTOOL_A_RINGS_TX, func(r *RingsSet) **uint32 { return &r.Tx }),
	OptU32(unix.ETHTOOL_A_RINGS_RX_BUF_LEN, func(r *RingsSet) **uint32 { return &r.RxBufLen }),
	OptU8(unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT, func(r *RingsSet) **uint8 { return &r.TCPDataSplit }),
	OptU32(unix.ETHTOOL_A_RINGS_CQE_SIZE, func(r *RingsSet) **uint32 { return &r.CQESize }),
	OptBool(unix.ETHTOOL_A_RINGS_TX_PUSH, func(r *RingsSet) **bool { return &r.TxPush }),
	OptBool(unix.ETHTOOL_A_RINGS_RX_PUSH, func(r *RingsSet) **bool { return &r.RxPush }),
)

// ChannelsSet is a CHANNELS_SET request after the header: the counts to change; nil fields are
// not sent and left alone.
type ChannelsSet struct {
	Rx, Tx, Other, Combined *uint32
}

// ChannelsSetTable is CHANNELS_SET after the header (ethnl_set_channels; policy
// ethnl_channels_set_policy).
var ChannelsSetTable = NewTable(
	OptU32(unix.ETHTOOL_A_CHANNELS_RX_COUNT, func(c *ChannelsSet) **uint32 { return &c.Rx }),
	OptU32(unix.ETHTOOL_A_CHANNELS_TX_COUNT, func(c *ChannelsSet) **uint32 { return &c.Tx }),
	OptU32(unix.ETHTOOL_A_CHANNELS_OTHER_COUNT, func(c *ChannelsSet) **uint32 { return &c.Other }),
	OptU32(unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT, func(c *ChannelsSet) **uint32 { return &c.Combined }),
)

// Header is the request and reply header nest of every ethtool message
// (ETHTOOL_A_*_HEADER), and of manad's (AttrHeader).
type Header struct {
	Index uint32
	Name  string
	Flags uint32 // ETHTOOL_FLAG_*
}

// HeaderTable is the header nest as a client sends and reads it; zero fields
// are left out. (The server reads it against its policy and writes the name
// cut as ethnl_put_strz does.)
var HeaderTable = NewTable(
	U32(unix.ETHTOOL_A_HEADER_DEV_INDEX, func(h *Header) *uint32 { return &h.Index }),
	String(unix.ETHTOOL_A_HEADER_DEV_NAME, func(h *Header) *string { return &h.Name }),
	U32(unix.ETHTOOL_A_HEADER_FLAGS, func(h *Header) *uint32 { return &h.Flags }),
).OmitZero()
