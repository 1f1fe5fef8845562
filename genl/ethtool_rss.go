package genl

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// RSS messages, as net/ethtool/rss.c of 6.12 for a driver without RSS contexts (mana): only
// context 0, the device's own table. Kernels before 6.17 have no RSS_SET; manad changes the
// table through the manad family instead.

// RSS is the RSS_GET reply of one device.
type RSS = wire.RSS

// RSSBackend is the part of a Backend that answers RSS_GET. A Backend without it answers
// EOPNOTSUPP, as the kernel does for a driver without get_rxfh.
type RSSBackend interface {
	// RSS returns the device's hash function, key and indirection table (get_rxfh). Errors:
	// ENODEV when the device is gone.
	RSS(ctx context.Context, c Caller, d Device) (RSS, error)
}

// rssGetPolicy is ethnl_rss_get_policy.
var rssGetPolicy = nlattr.NewSet(wire.RSSMax, map[uint16]nlattr.Policy{
	wire.RSSHeader:       {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
	wire.RSSContext:      {Kind: nlattr.U32},
	wire.RSSStartContext: {Kind: nlattr.U32},
})

// rssGet mirrors rss_parse_request, rss_prepare_data and rss_fill_reply.
func (s *Server) rssGet() *ethGet {
	return &ethGet{
		replyCmd: unix.ETHTOOL_MSG_RSS_GET_REPLY,
		parse: func(r *request) (any, error) {
			if a := r.attr(wire.RSSStartContext); a.Present() {
				return nil, nlattr.AttrError(unix.EINVAL, a, "")
			}
			return r.attr(wire.RSSContext).U32(), nil
		},
		prepare: func(r *request, d *Device, req any) (any, error) {
			rb, ok := s.cfg.Backend.(RSSBackend)
			if !ok {
				return nil, unix.EOPNOTSUPP // no get_rxfh
			}
			if req.(uint32) != 0 {
				return nil, unix.EOPNOTSUPP // !cap_rss_ctx_supported && !create_rxfh_context
			}
			v, err := rb.RSS(r.ctx, r.c.caller, *d)
			return &v, err
		},
		fill: func(b *nlattr.Builder, _, data any, _ bool) error {
			wire.PutRSS(b, data.(*RSS))
			return nil
		},
	}
}
