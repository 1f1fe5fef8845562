package genl

import (
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
)

// STRSET messages, as net/ethtool/strset.c.

type strsetReq struct {
	ids        uint32 // bitmap of requested ETH_SS_* ids
	countsOnly bool
}

type strsetInfo struct {
	perDev  bool
	has     bool // the set has a strings table (global) or was filled (per-dev)
	strings []string
	enc     []byte // strings encoded as ETHTOOL_A_STRINGSET_STRINGS (strsetCache); nil: encode
}

// StrsetGet is STRSET_GET (ethnl_strset_request_ops).
func (ethtoolMsgs) StrsetGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_STRSET_GET, "strset-get", ethtool.Policy().StrsetGet, &ethGet{
		replyCmd:   unix.ETHTOOL_MSG_STRSET_GET_REPLY,
		allowNoDev: true,
		driver:     "StringSet",
		parse:      strsetParse,
		prepare:    func(r *request, d *Device, req any) (any, error) { return r.s.strsetPrepare(r, d, req) },
		fill:       strsetFill,
	})
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
		s.encodeSets(nil, data)
		return data, nil
	}
	// strset_prepare_data: the PHY the header names (mana has none; a dump has no PHY index).
	if err := noPhy(r); err != nil {
		return nil, err
	}
	for id := range sets {
		if !strsetInclude(req, sets, id, true) || !sets[id].perDev || s.cfg.Backend.StringSet == nil {
			continue
		}
		// strset_prepare_set: a failing get_sset_count means count 0.
		strs, err := s.cfg.Backend.StringSet(r.ctx, r.c.caller, *d, uint32(id))
		if err == nil && len(strs) > 0 {
			sets[id].strings, sets[id].has = strs, true
		}
	}
	s.encodeSets(d, data)
	return data, nil
}

// encodeSets fetches from the cache the encoding of every set the reply will list with its
// strings.
func (s *Server) encodeSets(d *Device, data *strsetData) {
	if data.req.countsOnly {
		return
	}
	for id := range data.sets {
		set := &data.sets[id]
		if len(set.strings) == 0 || !strsetInclude(data.req, data.sets, id, data.dev) {
			continue
		}
		k := strsetKey{id: uint32(id)}
		if set.perDev {
			k.ns, k.ifindex = d.NetNS, d.Index
		}
		set.enc = s.strsets.encoded(k, set.strings)
	}
}

// strsetCacheMax bounds strsetCache: past it, the cache starts over (ports come and go; two
// sets per port, the statistics and the private flags, are cached).
const strsetCacheMax = 1024

// strsetCache keeps the encoded ETHTOOL_A_STRINGSET_STRINGS nest of the string sets last
// answered, per device and set. A device's sets change only with its configuration (its
// statistics with its queue count) and the global ones never, so a repeated STRSET_GET copies
// their encoding rather than writing hundreds of nests again — the kernel, too, keeps its
// tables static and only copies them out. The strings are compared on every use, so a set that
// changed is encoded anew: nothing needs to invalidate the cache.
type strsetCache struct {
	mu sync.Mutex
	m  map[strsetKey]strsetEnc
}

type strsetKey struct {
	ns      NetNS
	ifindex uint32 // 0 for a global set
	id      uint32
}

type strsetEnc struct {
	strs []string
	nest []byte
}

// encoded returns strs encoded as an ETHTOOL_A_STRINGSET_STRINGS nest, or nil when the nest
// does not fit in an attribute (the reply then fails with EMSGSIZE as it did).
func (c *strsetCache) encoded(k strsetKey, strs []string) []byte {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && slices.Equal(e.strs, strs) {
		return e.nest
	}
	var b nlattr.Builder
	putStrings(&b, strs)
	if b.Overflow {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= strsetCacheMax {
		c.m = make(map[strsetKey]strsetEnc)
	}
	c.m[k] = strsetEnc{strs: slices.Clone(strs), nest: b.B}
	return b.B
}

// putStrings appends strs as the ETHTOOL_A_STRINGSET_STRINGS nest of strset_fill_set.
func putStrings(b *nlattr.Builder, strs []string) {
	n := b.Nest(unix.ETHTOOL_A_STRINGSET_STRINGS)
	for i, str := range strs {
		s := b.Nest(unix.ETHTOOL_A_STRINGS_STRING)
		b.PutU32(unix.ETHTOOL_A_STRING_INDEX, uint32(i))
		ethtool.PutStrz(b, unix.ETHTOOL_A_STRING_VALUE, str)
		b.EndNest(s)
	}
	b.EndNest(n)
}

// strsetFill mirrors strset_fill_reply and strset_fill_set.
func strsetFill(_ *request, b *nlattr.Builder, _, dataAny any, _ bool) error {
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
		switch {
		case data.req.countsOnly:
		case set.enc != nil:
			b.B = append(b.B, set.enc...)
		default:
			putStrings(b, set.strings)
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
