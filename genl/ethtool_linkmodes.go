package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// LINKMODES messages, as net/ethtool/linkmodes.c.

var (
	linkModesGetPolicy = headerOnly()
	// linkModesSetPolicy is ethnl_linkmodes_set_policy.
	linkModesSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_LINKMODES_LANES, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_LINKMODES_HEADER:           {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
		unix.ETHTOOL_A_LINKMODES_AUTONEG:          {Kind: nlattr.U8},
		unix.ETHTOOL_A_LINKMODES_OURS:             {Kind: nlattr.Nested},
		unix.ETHTOOL_A_LINKMODES_SPEED:            {Kind: nlattr.U32},
		unix.ETHTOOL_A_LINKMODES_DUPLEX:           {Kind: nlattr.U8},
		unix.ETHTOOL_A_LINKMODES_MASTER_SLAVE_CFG: {Kind: nlattr.U8},
		unix.ETHTOOL_A_LINKMODES_LANES:            {Kind: nlattr.U32, Check: nlattr.CheckRange, Min: 1, Max: 8},
	})
)

// linkModesGet mirrors linkmodes_fill_reply for a driver that reports no
// link modes (mana): OURS is an empty advertised/supported bitset, there is
// no PEER, no master/slave state.
var linkModesGet = &ethGet{
	replyCmd: unix.ETHTOOL_MSG_LINKMODES_GET_REPLY,
	driver:   "LinkSettings",
	prepare: func(r *request, d *Device, _ any) (any, error) {
		l, err := linkSettingsOf(r.s.cfg.Backend)(r.ctx, r.c.caller, *d)
		return &l, err
	},
	fill: func(r *request, b *nlattr.Builder, _, data any, compact bool) error {
		l := data.(*wire.LinkSettings)
		wire.LinkModesHead.Put(b, l)
		_, nbits := r.s.globalBits(ethtool.SSLinkModes, wire.LinkModeBits)
		none := make([]uint32, ethtool.Words(nbits))
		ethtool.PutBitset32(b, unix.ETHTOOL_A_LINKMODES_OURS, none, none, nbits, nil, compact)
		wire.LinkModesTail.Put(b, l)
		return nil
	},
}

// LinkModesGet is LINKMODES_GET (ethnl_linkmodes_request_ops).
func (ethtoolMsgs) LinkModesGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_LINKMODES_GET, "linkmodes-get", linkModesGetPolicy, linkModesGet)
}

// LinkModesSet is LINKMODES_SET (ethnl_set_linkmodes).
func (ethtoolMsgs) LinkModesSet() op {
	return ethSetOp(unix.ETHTOOL_MSG_LINKMODES_SET, "linkmodes-set", linkModesSetPolicy, "", noLinkSettingsSet, nil)
}
