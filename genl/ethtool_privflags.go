package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
)

// PRIVFLAGS messages, as net/ethtool/privflags.c.

type privFlagsData struct {
	names []string
	flags uint32
}

// PrivFlagsGet is PRIVFLAGS_GET (ethnl_privflags_request_ops).
func (ethtoolMsgs) PrivFlagsGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_PRIVFLAGS_GET, "privflags-get", ethtool.Policy().PrivFlagsGet, privFlagsGet)
}

// PrivFlagsSet is PRIVFLAGS_SET (ethnl_set_privflags).
func (ethtoolMsgs) PrivFlagsSet() op {
	return ethSetOp(unix.ETHTOOL_MSG_PRIVFLAGS_SET, "privflags-set", ethtool.Policy().PrivFlagsSet,
		"SetPrivFlags", privFlagsValidate, privFlagsSet)
}

// privFlagsGet mirrors ethnl_privflags_request_ops.
var privFlagsGet = &ethGet{
	replyCmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET_REPLY,
	driver:   "PrivFlags",
	prepare: func(r *request, d *Device, _ any) (any, error) {
		if r.s.cfg.Backend.PrivFlags == nil {
			return nil, unix.EOPNOTSUPP // no get_priv_flags
		}
		pf, err := r.s.cfg.Backend.PrivFlags(r.ctx, r.c.caller, *d)
		if err != nil {
			return nil, err
		}
		return &privFlagsData{names: capNames(pf.Names), flags: pf.Flags}, nil
	},
	fill: func(r *request, b *nlattr.Builder, _, data any, compact bool) error {
		p := data.(*privFlagsData)
		putPrivFlags(b, p.names, p.flags, compact)
		return nil
	},
}

// capNames applies ethnl_get_priv_flags_info's cap of 32 flags.
func capNames(names []string) []string {
	return names[:min(len(names), ethtool.MaxPrivFlags)]
}

// putPrivFlags mirrors privflags_fill_reply: value/mask form, mask = all n
// flags.
func putPrivFlags(b *nlattr.Builder, names []string, flags uint32, compact bool) {
	n := len(names)
	all := ^uint32(0)
	if n < 32 {
		all = 1<<n - 1
	}
	ethtool.PutBitset32(b, unix.ETHTOOL_A_PRIVFLAGS_FLAGS, []uint32{flags}, []uint32{all}, n, names, compact)
}

// privFlagsValidate mirrors ethnl_set_privflags_validate.
func privFlagsValidate(r *request, _ Device) error {
	if !r.attr(unix.ETHTOOL_A_PRIVFLAGS_FLAGS).Present() {
		return unix.EINVAL
	}
	if b := r.s.cfg.Backend; b.PrivFlags == nil || b.SetPrivFlags == nil {
		return unix.EOPNOTSUPP
	}
	return nil
}

// privFlagsSet mirrors ethnl_set_privflags: names are looked up only for a
// verbose bitset; no change means no driver call and no notification.
func privFlagsSet(r *request, d Device) error {
	s := r.s
	attr := r.attr(unix.ETHTOOL_A_PRIVFLAGS_FLAGS)
	compact, err := ethtool.IsCompact(r.msg, attr)
	if err != nil {
		return err
	}
	return s.cfg.Backend.SetPrivFlags(r.ctx, r.c.caller, d, Update[PrivFlags]{
		Apply: func(cur PrivFlags) (PrivFlags, bool, error) {
			names := capNames(cur.Names)
			lookup := names
			if compact {
				lookup = nil
			}
			bitmap := []uint32{cur.Flags}
			mod, err := ethtool.UpdateBitset32(r.msg, attr, bitmap, len(names), lookup)
			return PrivFlags{Names: cur.Names, Flags: bitmap[0]}, mod && err == nil, err
		},
		Changed: func(pf PrivFlags) { s.NotifyPrivFlags(d, pf) },
	})
}
