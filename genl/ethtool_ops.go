package genl

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The ethtool family, mirroring net/ethtool/netlink.c for the messages manad
// implements. Every other ethtool command is EOPNOTSUPP, as an unknown
// command in the kernel (and the ethtool CLI, reading the op list from
// nlctrl, does not try them).

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
	return &family{
		id: ethtoolID, name: ethtool.FamilyName, version: ethtool.Version,
		resvStartOp: unix.ETHTOOL_MSG_MODULE_GET + 1,
		ops: []op{
			get(unix.ETHTOOL_MSG_STRSET_GET, ethtool.Policy().StrsetGet, s.strsetGet()),
			get(unix.ETHTOOL_MSG_PRIVFLAGS_GET, ethtool.Policy().PrivFlagsGet, s.privFlagsGet()),
			set(unix.ETHTOOL_MSG_PRIVFLAGS_SET, ethtool.Policy().PrivFlagsSet, s.privFlagsValidate, s.privFlagsSet),
			get(unix.ETHTOOL_MSG_RINGS_GET, ethtool.Policy().RingsGet, s.ringsGet()),
			set(unix.ETHTOOL_MSG_RINGS_SET, ethtool.Policy().RingsSet, s.ringsValidate, s.ringsSet),
			get(unix.ETHTOOL_MSG_CHANNELS_GET, ethtool.Policy().ChannelsGet, s.channelsGet()),
			set(unix.ETHTOOL_MSG_CHANNELS_SET, ethtool.Policy().ChannelsSet, nil, s.channelsSet),
		},
		groups: []mcGroup{{id: monitorGroup, name: ethtool.MonitorGroup}},
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
	tb, err := nlattr.ParseNested(r.msg, hdr, ethtool.Policy().Header)
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
}

// ethDoit mirrors ethnl_default_doit.
func (s *Server) ethDoit(g *ethGet) func(*request) error {
	return func(r *request) error {
		hdr := r.attr(hdrAttr)
		if !hdr.Present() { // GENL_REQ_ATTR_CHECK
			return nlattr.Missing(nlattr.Attr{}, hdrAttr)
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
			putDevHeader(b, hdrAttr, dev)
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
		_, flags, err := r.parseHeader(r.attr(hdrAttr), false)
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
					putDevHeader(b, hdrAttr, dev)
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

// STRSET (net/ethtool/strset.c)

type strsetReq struct {
	ids        uint32 // bitmap of requested ETH_SS_* ids
	countsOnly bool
}

type strsetInfo struct {
	perDev  bool
	has     bool // the set has a strings table (global) or was filled (per-dev)
	strings []string
}

func (s *Server) strsetGet() *ethGet {
	return &ethGet{
		replyCmd:   unix.ETHTOOL_MSG_STRSET_GET_REPLY,
		allowNoDev: true,
		parse:      strsetParse,
		prepare:    s.strsetPrepare,
		fill:       strsetFill,
	}
}

// strsetParse mirrors strset_parse_request (COUNTS_ONLY is read only when
// STRINGSETS is present, a kernel quirk kept on purpose).
func strsetParse(r *request) (any, error) {
	req := &strsetReq{}
	nest := r.attr(unix.ETHTOOL_A_STRSET_STRINGSETS)
	if !nest.Present() {
		return req, nil
	}
	if err := nlattr.ValidateNestedAttr(r.msg, nest, ethtool.Policy().StringSets); err != nil {
		return nil, err
	}
	req.countsOnly = r.attr(unix.ETHTOOL_A_STRSET_COUNTS_ONLY).Present()
	it := nlattr.NestedIter(r.msg, nest)
	for it.Next() {
		a := it.Attr()
		if a.Type() != unix.ETHTOOL_A_STRINGSETS_STRINGSET {
			return nil, unix.EINVAL
		}
		tb, err := nlattr.ParseNested(r.msg, a, ethtool.Policy().StringSet)
		if err != nil {
			return nil, err
		}
		id := tb[unix.ETHTOOL_A_STRINGSET_ID]
		if !id.Present() {
			return nil, nlattr.Missing(a, unix.ETHTOOL_A_STRINGSET_ID)
		}
		if id.U32() >= ethtool.SSCount {
			return nil, nlattr.AttrError(unix.EOPNOTSUPP, a, "unknown string set id")
		}
		req.ids |= 1 << id.U32()
	}
	return req, nil
}

func strsetInclude(req *strsetReq, sets []strsetInfo, id int, dev bool) bool {
	if req.ids != 0 {
		return req.ids&(1<<id) != 0
	}
	if !sets[id].perDev && !sets[id].has {
		return false
	}
	return dev == sets[id].perDev
}

type strsetData struct {
	sets []strsetInfo
	dev  bool
	req  *strsetReq
}

// strsetPrepare mirrors strset_prepare_data; global sets come from the
// kernel's own tables (see globalStrings).
func (s *Server) strsetPrepare(r *request, d *Device, reqAny any) (any, error) {
	req := reqAny.(*strsetReq)
	sets := make([]strsetInfo, ethtool.SSCount)
	for id := range sets {
		if ethtool.PerDevStringSet(uint32(id)) {
			sets[id].perDev = true
		} else {
			sets[id].strings, sets[id].has = s.globalSet(uint32(id))
		}
	}
	data := &strsetData{sets: sets, dev: d != nil, req: req}
	if d == nil {
		for id := range sets {
			if req.ids&(1<<id) != 0 && sets[id].perDev {
				return nil, nlattr.Errorf(unix.EINVAL, "requested per device strings without dev")
			}
		}
		return data, nil
	}
	for id := range sets {
		if !strsetInclude(req, sets, id, true) || !sets[id].perDev {
			continue
		}
		// strset_prepare_set: a failing get_sset_count means count 0.
		strs, err := s.cfg.Backend.StringSet(r.ctx, r.c.caller, *d, uint32(id))
		if err == nil && len(strs) > 0 {
			sets[id].strings, sets[id].has = strs, true
		}
	}
	return data, nil
}

// strsetFill mirrors strset_fill_reply and strset_fill_set.
func strsetFill(b *nlattr.Builder, _, dataAny any, _ bool) error {
	data := dataAny.(*strsetData)
	nest := b.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
	for id, set := range data.sets {
		if !strsetInclude(data.req, data.sets, id, data.dev) {
			continue
		}
		if !set.perDev && !set.has {
			return unix.EOPNOTSUPP
		}
		if len(set.strings) == 0 {
			continue
		}
		ss := b.Nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
		b.PutU32(unix.ETHTOOL_A_STRINGSET_ID, uint32(id))
		b.PutU32(unix.ETHTOOL_A_STRINGSET_COUNT, uint32(len(set.strings)))
		if !data.req.countsOnly {
			strs := b.Nest(unix.ETHTOOL_A_STRINGSET_STRINGS)
			for i, str := range set.strings {
				n := b.Nest(unix.ETHTOOL_A_STRINGS_STRING)
				b.PutU32(unix.ETHTOOL_A_STRING_INDEX, uint32(i))
				ethtool.PutStrz(b, unix.ETHTOOL_A_STRING_VALUE, str)
				b.EndNest(n)
			}
			b.EndNest(strs)
		}
		b.EndNest(ss)
	}
	b.EndNest(nest)
	return nil
}

// globalStrings caches the kernel-wide string tables (ETH_SS_FEATURES,
// ETH_SS_LINK_MODES, …). Rather than copying kernel tables into manad, which
// would drift with the kernel, they are read once from the running kernel's
// own ethtool family with a device-less STRSET_GET. Without kernel ethtool
// netlink the global sets have no strings and requesting them is EOPNOTSUPP,
// exactly as for a set without a table.
type globalStrings struct {
	once sync.Once
	sets map[uint32][]string
}

func (s *Server) globalSet(id uint32) ([]string, bool) {
	s.global.once.Do(func() {
		sets, err := kernelGlobalStringSets()
		if err != nil {
			s.log.Warn("genl: cannot read the kernel's global ethtool string sets; they will be EOPNOTSUPP", "err", err)
		}
		s.global.sets = sets
	})
	v, ok := s.global.sets[id]
	return v, ok
}

func kernelGlobalStringSets() (map[uint32][]string, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return nil, err
	}
	f, err := c.GetFamily(ethtool.FamilyName)
	if err != nil {
		return nil, err
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_STRSET_HEADER, func(*netlink.AttributeEncoder) error { return nil })
	data, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	msgs, err := c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: unix.ETHTOOL_MSG_STRSET_GET, Version: ethtool.Version},
		Data:   data,
	}, f.ID, netlink.Request)
	if err != nil {
		return nil, err
	}
	out := map[uint32][]string{}
	for _, m := range msgs {
		it := nlattr.NewIter(m.Data, 0, len(m.Data))
		for it.Next() {
			if it.Attr().Type() != unix.ETHTOOL_A_STRSET_STRINGSETS {
				continue
			}
			sets, err := ethtool.DecodeStringSets(it.Attr().Data)
			if err != nil {
				return nil, err
			}
			for _, ss := range sets {
				if ss.ID < ethtool.SSCount && !ethtool.PerDevStringSet(ss.ID) {
					out[ss.ID] = ss.Strings
				}
			}
		}
	}
	return out, nil
}

// PRIVFLAGS (net/ethtool/privflags.c)

type privFlagsData struct {
	names []string
	flags uint32
}

func (s *Server) privFlagsGet() *ethGet {
	return &ethGet{
		replyCmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET_REPLY,
		prepare: func(r *request, d *Device, _ any) (any, error) {
			pf, err := s.cfg.Backend.PrivFlags(r.ctx, r.c.caller, *d)
			if err != nil {
				return nil, err
			}
			return &privFlagsData{names: capNames(pf.Names), flags: pf.Flags}, nil
		},
		fill: func(b *nlattr.Builder, _, data any, compact bool) error {
			p := data.(*privFlagsData)
			putPrivFlags(b, p.names, p.flags, compact)
			return nil
		},
	}
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
func (s *Server) privFlagsValidate(r *request, _ Device) error {
	if !r.attr(unix.ETHTOOL_A_PRIVFLAGS_FLAGS).Present() {
		return unix.EINVAL
	}
	return nil
}

// privFlagsSet mirrors ethnl_set_privflags: names are looked up only for a
// verbose bitset; no change means no driver call and no notification.
func (s *Server) privFlagsSet(r *request, d Device) error {
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

// RINGS (net/ethtool/rings.c)

func (s *Server) ringsGet() *ethGet {
	return &ethGet{
		replyCmd: unix.ETHTOOL_MSG_RINGS_GET_REPLY,
		prepare: func(r *request, d *Device, _ any) (any, error) {
			rg, err := s.cfg.Backend.Rings(r.ctx, r.c.caller, *d)
			return rg, err
		},
		fill: func(b *nlattr.Builder, _, data any, _ bool) error {
			rg := data.(Rings)
			wire.RingsTable.Put(b, &rg)
			return nil
		},
	}
}

// ringsValidate mirrors ethnl_set_rings_validate for a driver whose
// supported_ring_params is empty (the MANA driver's).
func (s *Server) ringsValidate(r *request, _ Device) error {
	for _, u := range []struct {
		attr uint16
		msg  string
	}{
		{unix.ETHTOOL_A_RINGS_RX_BUF_LEN, "setting rx buf len not supported"},
		{unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT, "setting TCP data split is not supported"},
		{unix.ETHTOOL_A_RINGS_HDS_THRESH, "setting hds-thresh is not supported"},
		{unix.ETHTOOL_A_RINGS_CQE_SIZE, "setting cqe size not supported"},
		{unix.ETHTOOL_A_RINGS_TX_PUSH, "setting tx push not supported"},
		{unix.ETHTOOL_A_RINGS_RX_PUSH, "setting rx push not supported"},
		{unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN, "setting tx push buf len is not supported"},
	} {
		if a := r.attr(u.attr); a.Present() {
			return nlattr.AttrError(unix.EOPNOTSUPP, a, u.msg)
		}
	}
	return nil
}

// updateU32 mirrors ethnl_update_u32.
func updateU32(dst *uint32, a nlattr.Attr, mod *bool) {
	if a.Present() && a.U32() != *dst {
		*dst = a.U32()
		*mod = true
	}
}

// ringsSet mirrors ethnl_set_rings: the request's sizes are applied to the
// current rings under the backend's lock, so a request that sets only rx
// never writes back a tx it read before a concurrent change.
func (s *Server) ringsSet(r *request, d Device) error {
	return s.cfg.Backend.SetRings(r.ctx, r.c.caller, d, Update[Rings]{
		Apply: func(cur Rings) (Rings, bool, error) {
			nr, mod := cur, false
			updateU32(&nr.Rx, r.attr(unix.ETHTOOL_A_RINGS_RX), &mod)
			updateU32(&nr.RxMini, r.attr(unix.ETHTOOL_A_RINGS_RX_MINI), &mod)
			updateU32(&nr.RxJumbo, r.attr(unix.ETHTOOL_A_RINGS_RX_JUMBO), &mod)
			updateU32(&nr.Tx, r.attr(unix.ETHTOOL_A_RINGS_TX), &mod)
			if !mod {
				return cur, false, nil
			}
			// An offender that is not in the request has no attribute to blame,
			// and then, as in the kernel, no error.
			var bad nlattr.Attr
			switch {
			case nr.Rx > nr.RxMax:
				bad = r.attr(unix.ETHTOOL_A_RINGS_RX)
			case nr.RxMini > nr.RxMiniMax:
				bad = r.attr(unix.ETHTOOL_A_RINGS_RX_MINI)
			case nr.RxJumbo > nr.RxJumboMax:
				bad = r.attr(unix.ETHTOOL_A_RINGS_RX_JUMBO)
			case nr.Tx > nr.TxMax:
				bad = r.attr(unix.ETHTOOL_A_RINGS_TX)
			}
			if bad.Present() {
				return cur, false, nlattr.AttrError(unix.EINVAL, bad, "requested ring size exceeds maximum")
			}
			return nr, true, nil
		},
		Changed: func(rg Rings) { s.NotifyRings(d, rg) },
	})
}

// CHANNELS (net/ethtool/channels.c)

func (s *Server) channelsGet() *ethGet {
	return &ethGet{
		replyCmd: unix.ETHTOOL_MSG_CHANNELS_GET_REPLY,
		prepare: func(r *request, d *Device, _ any) (any, error) {
			ch, err := s.cfg.Backend.Channels(r.ctx, r.c.caller, *d)
			return ch, err
		},
		fill: func(b *nlattr.Builder, _, data any, _ bool) error {
			ch := data.(Channels)
			wire.ChannelsTable.Put(b, &ch)
			return nil
		},
	}
}

// channelsSet mirrors ethnl_set_channels (current form, with attribute
// types in err_attr) up to the driver call (manad has no
// RSS indirection table or AF_XDP zero-copy queues to check).
func (s *Server) channelsSet(r *request, d Device) error {
	return s.cfg.Backend.SetChannels(r.ctx, r.c.caller, d, Update[Channels]{
		Apply:   func(cur Channels) (Channels, bool, error) { return applyChannels(r, cur) },
		Changed: func(ch Channels) { s.NotifyChannels(d, ch) },
	})
}

func applyChannels(r *request, cur Channels) (Channels, bool, error) {
	ch := cur
	var mod, modCombined bool
	updateU32(&ch.Rx, r.attr(unix.ETHTOOL_A_CHANNELS_RX_COUNT), &mod)
	updateU32(&ch.Tx, r.attr(unix.ETHTOOL_A_CHANNELS_TX_COUNT), &mod)
	updateU32(&ch.Other, r.attr(unix.ETHTOOL_A_CHANNELS_OTHER_COUNT), &mod)
	updateU32(&ch.Combined, r.attr(unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT), &modCombined)
	if !mod && !modCombined {
		return cur, false, nil
	}
	// Unlike rings.c, channels.c picks the offender by attribute type, so
	// the error stands even when that attribute is not in the request (then
	// without an offset).
	var bad uint16
	switch {
	case ch.Rx > ch.RxMax:
		bad = unix.ETHTOOL_A_CHANNELS_RX_COUNT
	case ch.Tx > ch.TxMax:
		bad = unix.ETHTOOL_A_CHANNELS_TX_COUNT
	case ch.Other > ch.OtherMax:
		bad = unix.ETHTOOL_A_CHANNELS_OTHER_COUNT
	case ch.Combined > ch.CombinedMax:
		bad = unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT
	}
	if bad != 0 {
		return cur, false, nlattr.AttrError(unix.EINVAL, r.attr(bad), "requested channel count exceeds maximum")
	}
	switch {
	case ch.Combined == 0 && ch.Rx == 0:
		bad = unix.ETHTOOL_A_CHANNELS_RX_COUNT
	case ch.Combined == 0 && ch.Tx == 0:
		bad = unix.ETHTOOL_A_CHANNELS_TX_COUNT
	}
	if bad != 0 {
		if modCombined {
			bad = unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT
		}
		return cur, false, nlattr.AttrError(unix.EINVAL, r.attr(bad),
			"requested channel counts would result in no RX or TX channel being configured")
	}
	return ch, true, nil
}
