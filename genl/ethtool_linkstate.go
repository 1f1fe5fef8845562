package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// LINKSTATE messages, as net/ethtool/linkstate.c for a device without a
// PHY, get_link_ext_state or get_link_ext_stats (mana): the link only, with
// or without ETHTOOL_FLAG_STATS.

// statsHeader is ethnl_header_policy_stats: the basic header that also
// accepts ETHTOOL_FLAG_STATS.
func statsHeader() *nlattr.Set {
	h := ethtool.Policy().Header
	flags := h.Policy(unix.ETHTOOL_A_HEADER_FLAGS)
	flags.Mask |= unix.ETHTOOL_FLAG_STATS
	return nlattr.NewSet(unix.ETHTOOL_A_HEADER_FLAGS, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_HEADER_DEV_INDEX: h.Policy(unix.ETHTOOL_A_HEADER_DEV_INDEX),
		unix.ETHTOOL_A_HEADER_DEV_NAME:  h.Policy(unix.ETHTOOL_A_HEADER_DEV_NAME),
		unix.ETHTOOL_A_HEADER_FLAGS:     flags,
	})
}

// linkStateGetPolicy is ethnl_linkstate_get_policy.
var linkStateGetPolicy = nlattr.NewSet(unix.ETHTOOL_A_LINKSTATE_HEADER, map[uint16]nlattr.Policy{
	unix.ETHTOOL_A_LINKSTATE_HEADER: {Kind: nlattr.Nested, Nested: statsHeader()},
})

// LinkStateGet is LINKSTATE_GET (ethnl_linkstate_request_ops).
func (ethtoolMsgs) LinkStateGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_LINKSTATE_GET, "linkstate-get", linkStateGetPolicy, &ethGet{
		replyCmd: unix.ETHTOOL_MSG_LINKSTATE_GET_REPLY,
		driver:   "LinkState",
		prepare: func(r *request, d *Device, _ any) (any, error) {
			if r.s.cfg.Backend.LinkState == nil {
				// linkstate_prepare_data: __ethtool_get_link is EOPNOTSUPP without get_link,
				// and linkstate_fill_reply leaves the link state out.
				return (*LinkState)(nil), nil
			}
			l, err := r.s.cfg.Backend.LinkState(r.ctx, r.c.caller, *d)
			return &l, err
		},
		fill: func(_ *request, b *nlattr.Builder, _, data any, _ bool) error {
			if l := data.(*LinkState); l != nil {
				wire.LinkStateTable.Put(b, l)
			}
			return nil
		},
	})
}

// wantStats reports whether the request header asks for ETHTOOL_FLAG_STATS
// (the header was validated by the op's policy).
func wantStats(r *request) bool {
	hdr := r.attr(hdrAttr)
	for it := nlattr.NewIter(hdr.Data, 0, len(hdr.Data)); it.Next(); {
		if a := it.Attr(); a.Type() == unix.ETHTOOL_A_HEADER_FLAGS {
			return a.U32()&unix.ETHTOOL_FLAG_STATS != 0
		}
	}
	return false
}
