package genl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// RSS messages, as net/ethtool/rss.c of 6.17/6.18 for a driver without RSS contexts, per-flow
// hash fields or input transformations (mana): only context 0, the device's own table.

// RSS is the RSS_GET reply of one device.
type RSS = wire.RSS

// RSSSetting is what RSS_SET changes: the device's RSS configuration and the number of RX rings
// its table may name (ethtool_get_rx_ring_count), both read under the configuration lock. In
// the value an Apply returns, HFunc is the struct ethtool_rxfh_param's: 0
// (ETH_RSS_HASH_NO_CHANGE) or the hash function asked for; Indir always has the device's size.
type RSSSetting struct {
	RSS
	RxRings uint32
	// Configured is the netdev's IFF_RXFH_CONFIGURED, the ethtool core's: set by a request
	// with a table, cleared by one asking for the default (an empty table).
	Configured bool
}

// rssGetPolicy is ethnl_rss_get_policy.
var rssGetPolicy = nlattr.NewSet(wire.RSSMax, map[uint16]nlattr.Policy{
	wire.RSSHeader:       {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
	wire.RSSContext:      {Kind: nlattr.U32},
	wire.RSSStartContext: {Kind: nlattr.U32},
})

// rssGet mirrors rss_parse_request, rss_prepare_data and rss_fill_reply.
var rssGet = &ethGet{
	replyCmd: unix.ETHTOOL_MSG_RSS_GET_REPLY,
	driver:   "RSS",
	parse: func(r *request) (any, error) {
		if a := r.attr(wire.RSSStartContext); a.Present() {
			return nil, nlattr.AttrError(unix.EINVAL, a, "")
		}
		return r.attr(wire.RSSContext).U32(), nil
	},
	prepare: func(r *request, d *Device, req any) (any, error) {
		rb := r.s.cfg.Backend
		if rb.RSS == nil {
			return nil, unix.EOPNOTSUPP // no get_rxfh
		}
		if req.(uint32) != 0 {
			return nil, unix.EOPNOTSUPP // !cap_rss_ctx_supported && !create_rxfh_context
		}
		v, err := rb.RSS(r.ctx, r.c.caller, *d)
		return &v, err
	},
	fill: func(r *request, b *nlattr.Builder, _, data any, _ bool) error {
		wire.PutRSS(b, data.(*RSS))
		return nil
	},
}

// RSSGet is RSS_GET (ethnl_rss_request_ops).
func (ethtoolMsgs) RSSGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_RSS_GET, "rss-get", rssGetPolicy, rssGet)
}

// RSSSet is RSS_SET (ethnl_rss_set).
func (ethtoolMsgs) RSSSet() op {
	return ethSetOp(wire.MsgRSSSet, "rss-set", rssSetPolicy, "SetRSS", rssSetValidate, rssSet)
}

// rssFlowsPolicy is ethnl_rss_flows_policy: per flow type, the RXH_* fields a hash may cover.
var rssFlowsPolicy = func() *nlattr.Set {
	p := map[uint16]nlattr.Policy{}
	for t := uint16(wire.FlowEther); t <= wire.FlowMax; t++ {
		mask := uint64(wire.RXHMask)
		if wire.FlowIsIPv6(t) {
			mask = wire.RXHMaskV6
		}
		p[t] = nlattr.Policy{Kind: nlattr.Uint, Check: nlattr.CheckMask, Mask: mask}
	}
	return nlattr.NewSet(wire.FlowMax, p)
}()

// rssSetPolicy is ethnl_rss_set_policy.
var rssSetPolicy = nlattr.NewSet(wire.RSSSetMax, map[uint16]nlattr.Policy{
	wire.RSSHeader:    {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
	wire.RSSContext:   {Kind: nlattr.U32},
	wire.RSSHFunc:     {Kind: nlattr.U32, Check: nlattr.CheckMin, Min: 1},
	wire.RSSIndir:     {Kind: nlattr.Binary},
	wire.RSSHKey:      {Kind: nlattr.Binary, Check: nlattr.CheckMin, Min: 1},
	wire.RSSInputXfrm: {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: wire.RXHXfrmSymOrXor},
	wire.RSSFlowHash:  {Kind: nlattr.Nested, Nested: rssFlowsPolicy},
})

// rssSetValidate mirrors ethnl_rss_set_validate for a driver without create_rxfh_context,
// rxfh_per_ctx_key, supported_input_xfrm or set_rxfh_fields: EOPNOTSUPP pointing at the first
// attribute asking for one of them (a context, a transformation, per-flow hash fields).
func rssSetValidate(r *request, _ Device) error {
	ctx := r.attr(wire.RSSContext)
	var bad []nlattr.Attr
	if ctx.U32() != 0 {
		bad = append(bad, ctx, r.attr(wire.RSSHFunc), r.attr(wire.RSSHKey), r.attr(wire.RSSInputXfrm))
	}
	if x := r.attr(wire.RSSInputXfrm); x.U32() != 0 {
		bad = append(bad, x)
	}
	bad = append(bad, r.attr(wire.RSSFlowHash))
	for _, a := range bad {
		if a.Present() {
			return nlattr.AttrError(unix.EOPNOTSUPP, a, "")
		}
	}
	return nil
}

// rssSet mirrors ethnl_rss_set for context 0: the request applied to the current setting under
// the backend's lock, the driver called only for a change, RSS_NTF from the resulting state.
func rssSet(r *request, d Device) error {
	s := r.s
	u := Update[RSSSetting]{
		Apply:   func(cur RSSSetting) (RSSSetting, bool, error) { return applyRSS(r, cur) },
		Changed: func(v RSSSetting) { s.NotifyRSS(d, v.RSS) },
	}
	rb := s.cfg.Backend
	if rb.RSS == nil || rb.SetRSS == nil {
		_, mod, err := u.Apply(RSSSetting{})
		if err == nil && mod {
			err = unix.EOPNOTSUPP // no set_rxfh
		}
		return err
	}
	return rb.SetRSS(r.ctx, r.c.caller, d, u)
}

// applyRSS is the core of ethnl_rss_set: rss_set_prep_indir, the hash function (ethnl_update_u8:
// only the attribute's first byte counts; unchanged means ETH_RSS_HASH_NO_CHANGE, 0),
// rss_set_prep_hkey and the input transformation, with the kernel's errors.
func applyRSS(r *request, cur RSSSetting) (RSSSetting, bool, error) {
	next := cur
	var mod bool
	if a := r.attr(wire.RSSIndir); a.Present() {
		t, err := rssPrepIndir(a, cur)
		if err != nil {
			return cur, false, err
		}
		mod = mod || !slices.Equal(t, cur.Indir)
		next.Indir = t
		next.Configured = len(a.Data) != 0 // IFF_RXFH_CONFIGURED: indir_mod, or cleared by indir_reset
	}
	hf := cur.HFunc & 0xff // rxfh.hfunc is a u8
	if a := r.attr(wire.RSSHFunc); a.Present() && uint32(a.Data[0]) != hf {
		hf, mod = uint32(a.Data[0]), true
	}
	if hf == cur.HFunc {
		hf = 0 // ETH_RSS_HASH_NO_CHANGE
	}
	next.HFunc = hf
	if a := r.attr(wire.RSSHKey); a.Present() {
		if len(a.Data) != len(cur.HKey) {
			return cur, false, nlattr.AttrError(unix.EINVAL, a, "")
		}
		if !bytes.Equal(a.Data, cur.HKey) {
			next.HKey, mod = bytes.Clone(a.Data), true
		}
	}
	xfrm := cur.InputXfrm
	if a := r.attr(wire.RSSInputXfrm); a.Present() && uint32(a.Data[0]) != cur.InputXfrm&0xff {
		xfrm, mod = uint32(a.Data[0]), true
	}
	// rss_check_rxfh_fields_sym: a symmetric transformation needs the per-flow hash fields,
	// which a driver without get_rxfh_fields never reports.
	if xfrm != 0 || cur.InputXfrm != 0 {
		return cur, false, nlattr.AttrError(unix.EINVAL, r.attr(wire.RSSInputXfrm), "hash field config not reported")
	}
	return next, mod, nil
}

// rssPrepIndir mirrors rss_set_prep_indir for context 0: an empty table asks for the default
// spread over the RX rings; a shorter one whose size divides the device's is repeated.
func rssPrepIndir(a nlattr.Attr, cur RSSSetting) ([]uint32, error) {
	size := len(cur.Indir)
	if size == 0 {
		return nil, unix.EOPNOTSUPP
	}
	if len(a.Data)%4 != 0 {
		return nil, nlattr.AttrError(unix.EINVAL, a, "")
	}
	user := len(a.Data) / 4
	if user != 0 && size%user != 0 {
		return nil, nlattr.AttrError(unix.EINVAL, a, fmt.Sprintf("size (%d) mismatch with device indir table (%d)", user, size))
	}
	t := make([]uint32, size)
	for i := 0; i < user; i++ {
		t[i] = binary.NativeEndian.Uint32(a.Data[4*i:])
		if t[i] >= cur.RxRings {
			return nil, nlattr.AttrError(unix.EINVAL, a, fmt.Sprintf("entry %d: queue out of range (%d)", i, int32(t[i])))
		}
	}
	for i := range t {
		switch {
		case user == 0:
			t[i] = uint32(i) % max(cur.RxRings, 1) // ethtool_rxfh_indir_default
		case i >= user:
			t[i] = t[i%user]
		}
	}
	return t, nil
}

// CheckRSSChannels is the RSS half of ethtool_check_max_channel, which CHANNELS_SET runs after
// its own checks for a change: while the user's table is in force (IFF_RXFH_CONFIGURED), the
// new RX channel count (combined + rx) must exceed the highest queue the device's table names.
// Errors: EINVAL with the kernel's message. A backend calls it under the lock of the channel
// change, with the RSS state of that moment.
func CheckRSSChannels(rss RSSSetting, ch Channels) error {
	if !rss.Configured || len(rss.Indir) == 0 {
		return nil
	}
	maxInUse := slices.Max(rss.Indir)
	if ch.Combined+ch.Rx <= maxInUse {
		return Errorf(unix.EINVAL, "requested channel counts are too low for existing indirection table (%d)", maxInUse)
	}
	return nil
}

// NotifyRSS sends ETHTOOL_MSG_RSS_NTF for context 0 to the "monitor" subscribers in d's network
// namespace: the RSS_GET reply of the state v (ethtool_rss_notify).
func (s *Server) NotifyRSS(d Device, v RSS) {
	s.notify(ethtoolID, ethtool.Version, wire.MsgRSSNtf, &s.ethtoolSeq, monitorGroup, d.NetNS,
		func(b *nlattr.Builder) {
			putDevHeader(b, wire.RSSHeader, &d)
			wire.PutRSS(b, &v)
		})
}
