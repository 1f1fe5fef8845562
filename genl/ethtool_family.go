package genl

import (
	"context"
	"errors"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The ethtool family, mirroring net/ethtool/netlink.c: the kernel's whole op
// list (ethtool_genl_ops of 6.18, in command order, with its flags and
// policies), each op answering as the kernel does for a mana netdev. The
// messages mana has no callback for are in ethtool_nocallback.go. A command
// the kernel does not know is EOPNOTSUPP.

// hdrAttr is the header attribute of every ethtool request (ETHTOOL_A_*_HEADER).
const hdrAttr = 1

func (s *Server) ethtoolFamily() *family {
	get := func(cmd uint8, pol *nlattr.Set, g *ethGet) op {
		return op{cmd: cmd, policy: pol, mode: nlattr.Strict, dumpMode: nlattr.Strict,
			doit: s.ethDoit(g), start: s.ethDumpStart(g), dumpit: s.ethDumpit(g)}
	}
	set := func(cmd uint8, pol *nlattr.Set, validate func(*request, Device) error, apply func(*request, Device) error) op {
		return op{cmd: cmd, perm: unix.GENL_UNS_ADMIN_PERM, policy: pol, mode: nlattr.Strict,
			doit: s.ethSetDoit(validate, apply)}
	}
	ops := []op{
		get(unix.ETHTOOL_MSG_STRSET_GET, ethtool.Policy().StrsetGet, s.strsetGet()),
		get(unix.ETHTOOL_MSG_PRIVFLAGS_GET, ethtool.Policy().PrivFlagsGet, s.privFlagsGet()),
		set(unix.ETHTOOL_MSG_PRIVFLAGS_SET, ethtool.Policy().PrivFlagsSet, s.privFlagsValidate, s.privFlagsSet),
		get(unix.ETHTOOL_MSG_RINGS_GET, ethtool.Policy().RingsGet, s.ringsGet()),
		set(unix.ETHTOOL_MSG_RINGS_SET, ethtool.Policy().RingsSet, s.ringsValidate, s.ringsSet),
		get(unix.ETHTOOL_MSG_CHANNELS_GET, ethtool.Policy().ChannelsGet, s.channelsGet()),
		set(unix.ETHTOOL_MSG_CHANNELS_SET, ethtool.Policy().ChannelsSet, nil, s.channelsSet),
		get(unix.ETHTOOL_MSG_LINKINFO_GET, linkInfoGetPolicy, s.linkInfoGet()),
		set(unix.ETHTOOL_MSG_LINKINFO_SET, linkInfoSetPolicy, noLinkSettingsSet, nil),
		get(unix.ETHTOOL_MSG_LINKMODES_GET, linkModesGetPolicy, s.linkModesGet()),
		set(unix.ETHTOOL_MSG_LINKMODES_SET, linkModesSetPolicy, noLinkSettingsSet, nil),
		get(unix.ETHTOOL_MSG_LINKSTATE_GET, linkStateGetPolicy, s.linkStateGet()),
		get(unix.ETHTOOL_MSG_TSINFO_GET, tsInfoGetPolicy, s.tsInfoGet()),
		get(unix.ETHTOOL_MSG_STATS_GET, statsGetPolicy, s.ethStatsGet()),
		get(unix.ETHTOOL_MSG_RSS_GET, rssGetPolicy, s.rssGet()),
		get(unix.ETHTOOL_MSG_FEATURES_GET, featuresGetPolicy, s.featuresGet()),
		{cmd: unix.ETHTOOL_MSG_FEATURES_SET, perm: unix.GENL_UNS_ADMIN_PERM, policy: featuresSetPolicy, mode: nlattr.Strict, doit: s.featuresSet},
		get(unix.ETHTOOL_MSG_COALESCE_GET, coalesceGetPolicy, s.coalesceGet()),
		set(unix.ETHTOOL_MSG_COALESCE_SET, coalesceSetPolicy, s.coalesceValidate, s.coalesceSet),
		set(wire.MsgRSSSet, rssSetPolicy, s.rssSetValidate, s.rssSet),
	}
	ops = append(ops, s.noCallbackOps()...)
	// ctrl_fill_info lists the ops in the order of ethtool_genl_ops, which is command order.
	sort.Slice(ops, func(i, j int) bool { return ops[i].cmd < ops[j].cmd })
	return &family{
		id: ethtoolID, name: ethtool.FamilyName, version: ethtool.Version,
		resvStartOp: unix.ETHTOOL_MSG_MODULE_GET + 1,
		ops:         ops,
		groups:      []mcGroup{{id: monitorGroup, name: ethtool.MonitorGroup}},
	}
}

// parseHeader mirrors ethnl_parse_header_dev_get: it resolves the device
// named by the header nest in the caller's netns, with the kernel's errors.
// It returns a nil device when none is named and requireDev is false.
func (r *request) parseHeader(hdr nlattr.Attr, requireDev bool) (*Device, uint32, error) {
	if !hdr.Present() {
		if !requireDev {
			return nil, 0, nil
		}
		return nil, 0, nlattr.Errorf(unix.EINVAL, "request header missing")
	}
	pol := ethtool.Policy().Header
	if o := r.fam.op(r.cmd); o != nil && o.policy.Policy(hdr.Type()).Nested != nil {
		pol = o.policy.Policy(hdr.Type()).Nested // ethnl_header_policy_stats for LINKSTATE, TSINFO
	}
	tb, err := nlattr.ParseNested(r.msg, hdr, pol)
	if err != nil {
		return nil, 0, err
	}
	flags := tb[unix.ETHTOOL_A_HEADER_FLAGS].U32()
	name := tb[unix.ETHTOOL_A_HEADER_DEV_NAME]
	b := r.s.cfg.Backend
	switch idx := tb[unix.ETHTOOL_A_HEADER_DEV_INDEX]; {
	case idx.Present():
		d, err := b.DeviceByIndex(r.ctx, r.c.caller, idx.U32())
		if errors.Is(err, unix.ENODEV) {
			return nil, 0, nlattr.AttrError(unix.ENODEV, idx, "no device matches ifindex")
		} else if err != nil {
			return nil, 0, err
		}
		// strncmp(dev->name, name, IFNAMSIZ)
		if name.Present() && ifname(d.Name) != ifname(name.Str()) {
			return nil, 0, nlattr.AttrError(unix.ENODEV, hdr, "ifindex and name do not match")
		}
		return &d, flags, nil
	case name.Present():
		d, err := b.DeviceByName(r.ctx, r.c.caller, name.Str())
		if errors.Is(err, unix.ENODEV) {
			return nil, 0, nlattr.AttrError(unix.ENODEV, name, "no device matches name")
		} else if err != nil {
			return nil, 0, err
		}
		return &d, flags, nil
	case requireDev:
		return nil, 0, nlattr.AttrError(unix.EINVAL, hdr, "neither ifindex nor name specified")
	}
	// Only ethnl_header_policy_phy admits a PHY index, and it needs a device.
	if int(ethtool.HeaderPhyIndex) < len(tb) && tb[ethtool.HeaderPhyIndex].Present() {
		return nil, 0, nlattr.AttrError(unix.EINVAL, hdr, "phy_index set without a netdev")
	}
	return nil, flags, nil
}

func ifname(s string) string {
	if len(s) > ethtool.IfNameSize {
		return s[:ethtool.IfNameSize]
	}
	return s
}

// putDevHeader mirrors ethnl_fill_reply_header: nothing without a device.
func putDevHeader(b *nlattr.Builder, t uint16, d *Device) {
	if d == nil {
		return
	}
	n := b.Nest(t)
	b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, d.Index)
	ethtool.PutStrz(b, unix.ETHTOOL_A_HEADER_DEV_NAME, d.Name)
	b.EndNest(n)
}

// ethGet describes a GET request (struct ethnl_request_ops).
type ethGet struct {
	replyCmd   uint8
	allowNoDev bool
	parse      func(r *request) (any, error)
	prepare    func(r *request, d *Device, req any) (any, error)
	fill       func(b *nlattr.Builder, req, data any, compact bool) error
	// hdr is the request and reply header attribute when it is not hdrAttr
	// (ETHTOOL_A_STATS_HEADER follows a PAD).
	hdr uint16
}

func (g *ethGet) hdrType() uint16 {
	if g.hdr != 0 {
		return g.hdr
	}
	return hdrAttr
}

// tableGet is the GET of a message whose reply is one value the backend
// returns, written by its wire table: prepare asks get, fill puts the table.
func tableGet[T any](replyCmd uint8, get func(context.Context, Caller, Device) (T, error), t *wire.Table[T]) *ethGet {
	return &ethGet{
		replyCmd: replyCmd,
		prepare: func(r *request, d *Device, _ any) (any, error) {
			v, err := get(r.ctx, r.c.caller, *d)
			return &v, err
		},
		fill: func(b *nlattr.Builder, _, data any, _ bool) error {
			t.Put(b, data.(*T))
			return nil
		},
	}
}

// ethDoit mirrors ethnl_default_doit.
func (s *Server) ethDoit(g *ethGet) func(*request) error {
	return func(r *request) error {
		hdr := r.attr(g.hdrType())
		if !hdr.Present() { // GENL_REQ_ATTR_CHECK
			return nlattr.Missing(nlattr.Attr{}, g.hdrType())
		}
		dev, flags, err := r.parseHeader(hdr, !g.allowNoDev)
		if err != nil {
			return err
		}
		var req any
		if g.parse != nil {
			if req, err = g.parse(r); err != nil {
				return err
			}
		}
		data, err := g.prepare(r, dev, req)
		if err != nil {
			return err
		}
		return r.reply(g.replyCmd, func(b *nlattr.Builder) error {
			putDevHeader(b, g.hdrType(), dev)
			return g.fill(b, req, data, flags&unix.ETHTOOL_FLAG_COMPACT_BITSETS != 0)
		})
	}
}

type ethDumpState struct {
	flags uint32
	req   any
}

// ethDumpStart mirrors ethnl_default_start: the header is parsed (and a named
// device must exist) but the dump ignores it.
func (s *Server) ethDumpStart(g *ethGet) func(*request) error {
	return func(r *request) error {
		_, flags, err := r.parseHeader(r.attr(g.hdrType()), false)
		if err != nil {
			return err
		}
		st := &ethDumpState{flags: flags}
		if g.parse != nil {
			if st.req, err = g.parse(r); err != nil {
				return err
			}
		}
		r.state = st
		return nil
	}
}

// ethDumpit mirrors ethnl_default_dumpit: one reply per device in ifindex
// order; devices answering EOPNOTSUPP are skipped silently; any other error
// ends the dump with that error in NLMSG_DONE.
func (s *Server) ethDumpit(g *ethGet) func(*request, *dumper) error {
	return func(r *request, d *dumper) error {
		st := r.state.(*ethDumpState)
		devs, err := s.cfg.Backend.Devices(r.ctx, r.c.caller)
		if err != nil {
			return err
		}
		sort.Slice(devs, func(i, j int) bool { return devs[i].Index < devs[j].Index })
		for i := range devs {
			dev := &devs[i]
			data, err := g.prepare(r, dev, st.req)
			if err == nil {
				err = d.add(g.replyCmd, func(b *nlattr.Builder) error {
					putDevHeader(b, g.hdrType(), dev)
					return g.fill(b, st.req, data, st.flags&unix.ETHTOOL_FLAG_COMPACT_BITSETS != 0)
				})
			}
			if errors.Is(err, unix.EOPNOTSUPP) {
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// ethSetDoit mirrors ethnl_default_set_doit: header required, device
// required, validate, apply; apply hands the backend an Update whose Changed
// queues the *_NTF under the backend's lock.
func (s *Server) ethSetDoit(validate func(*request, Device) error, apply func(*request, Device) error) func(*request) error {
	return func(r *request) error {
		hdr := r.attr(hdrAttr)
		if !hdr.Present() {
			return nlattr.Missing(nlattr.Attr{}, hdrAttr)
		}
		dev, _, err := r.parseHeader(hdr, true)
		if err != nil {
			return err
		}
		if validate != nil {
			if err := validate(r, *dev); err != nil {
				return err
			}
		}
		return apply(r, *dev)
	}
}
