package genl

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
)

// FEATURES messages, as net/ethtool/features.c.

// Features are a device's netdev features by the kernel's names (the
// ETH_SS_FEATURES string set): the ones the driver can change (HW), the ones
// asked for (Wanted) and the ones in effect (Active). Names the running
// kernel does not know are ignored.
type Features struct {
	HW, Wanted, Active []string
}

// neverChange are the names of NETIF_F_NEVER_CHANGE (those the running
// kernel still has as features).
var neverChange = []string{"vlan-challenged", "tx-lockless", "netns-local"}

var (
	featuresGetPolicy = headerOnly()
	featuresSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_FEATURES_WANTED, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_FEATURES_HEADER: {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
		unix.ETHTOOL_A_FEATURES_WANTED: {Kind: nlattr.Nested},
	})
)

// featureNames returns the kernel's feature names, EOPNOTSUPP without them
// (see globalStrings) or without the backend's Features (and SetFeatures,
// when set is true).
func (s *Server) featureNames(set bool) ([]string, error) {
	if b := s.cfg.Backend; b.Features == nil || (set && b.SetFeatures == nil) {
		return nil, nlattr.Errorf(unix.EOPNOTSUPP, "the backend has no netdev features")
	}
	names, ok := s.globalSet(ethtool.SSFeatures)
	if !ok || len(names) == 0 {
		return nil, nlattr.Errorf(unix.EOPNOTSUPP, "the kernel's netdev feature names are unavailable")
	}
	return names, nil
}

// featureBits is a set of names as a bitmap over names.
func featureBits(names, set []string) []uint32 {
	m := make([]uint32, ethtool.Words(len(names)))
	for _, n := range set {
		for i, k := range names {
			if k == n {
				m[i/32] |= 1 << (i % 32)
				break
			}
		}
	}
	return m
}

// featureIndex is the bit of each of the kernel's feature names, built once per Server: featureBits compares every name of a set with the names
// before it (some 30 names against 60-odd: a thousand string comparisons per FEATURES_GET).
type featureIndex struct {
	once  sync.Once
	names []string // what bit was built from
	bit   map[string]int
}

// featureBitsOf is featureBits(names, set), by the Server's index of names when names are the
// kernel's feature names it was built from (always, but for a test's own), else by featureBits.
func (s *Server) featureBitsOf(names, set []string) []uint32 {
	fi := &s.featIdx
	fi.once.Do(func() {
		fi.names = names
		fi.bit = make(map[string]int, len(names))
		for i := len(names) - 1; i >= 0; i-- { // the first of equal names wins, as in featureBits
			fi.bit[names[i]] = i
		}
	})
	if len(names) == 0 || len(fi.names) != len(names) || &fi.names[0] != &names[0] {
		return featureBits(names, set)
	}
	m := make([]uint32, ethtool.Words(len(names)))
	for _, n := range set {
		if i, ok := fi.bit[n]; ok {
			m[i/32] |= 1 << (i % 32)
		}
	}
	return m
}

// featureSet is the inverse of featureBits.
func featureSet(names []string, m []uint32) []string {
	var out []string
	for i, n := range names {
		if m[i/32]&(1<<(i%32)) != 0 {
			out = append(out, n)
		}
	}
	return out
}

type featuresData struct {
	names                        []string
	hw, wanted, active, nochange []uint32
}

// FeaturesGet is FEATURES_GET (ethnl_features_request_ops).
func (ethtoolMsgs) FeaturesGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_FEATURES_GET, "features-get", featuresGetPolicy, featuresGet)
}

// FeaturesSet is FEATURES_SET, which answers with a reply, so it has its own doit
// (ethnl_set_features).
func (ethtoolMsgs) FeaturesSet() op {
	return op{cmd: unix.ETHTOOL_MSG_FEATURES_SET, name: "features-set", perm: unix.GENL_UNS_ADMIN_PERM,
		policy: featuresSetPolicy, mode: nlattr.Strict, driver: "SetFeatures", doit: (*Server).featuresSet}
}

var featuresGet = &ethGet{
	replyCmd: unix.ETHTOOL_MSG_FEATURES_GET_REPLY,
	driver:   "Features",
	prepare: func(r *request, d *Device, _ any) (any, error) {
		s := r.s
		names, err := s.featureNames(false)
		if err != nil {
			return nil, err
		}
		f, err := s.cfg.Backend.Features(r.ctx, r.c.caller, *d)
		if err != nil {
			return nil, err
		}
		return s.newFeaturesData(names, f), nil
	},
	fill: func(r *request, b *nlattr.Builder, _, data any, compact bool) error {
		data.(*featuresData).put(b, compact)
		return nil
	},
}

func (s *Server) newFeaturesData(names []string, f Features) *featuresData {
	return &featuresData{names: names, hw: s.featureBitsOf(names, f.HW), wanted: s.featureBitsOf(names, f.Wanted),
		active: s.featureBitsOf(names, f.Active), nochange: s.featureBitsOf(names, neverChange)}
}

// put mirrors features_fill_reply: HW as value/mask over every bit, the
// others as lists.
func (fd *featuresData) put(b *nlattr.Builder, compact bool) {
	n := len(fd.names)
	all := make([]uint32, ethtool.Words(n))
	for i := range all {
		all[i] = ^uint32(0)
	}
	clip(all, n)
	ethtool.PutBitset32(b, unix.ETHTOOL_A_FEATURES_HW, fd.hw, all, n, fd.names, compact)
	ethtool.PutBitset32(b, unix.ETHTOOL_A_FEATURES_WANTED, fd.wanted, nil, n, fd.names, compact)
	ethtool.PutBitset32(b, unix.ETHTOOL_A_FEATURES_ACTIVE, fd.active, nil, n, fd.names, compact)
	ethtool.PutBitset32(b, unix.ETHTOOL_A_FEATURES_NOCHANGE, fd.nochange, nil, n, fd.names, compact)
}

// NotifyFeatures sends ETHTOOL_MSG_FEATURES_NTF (compact bitsets) to the
// "monitor" subscribers in d's network namespace; nothing when the kernel's
// feature names are unavailable.
func (s *Server) NotifyFeatures(d Device, f Features) {
	names, ok := s.globalSet(ethtool.SSFeatures)
	if !ok || len(names) == 0 {
		return
	}
	fd := s.newFeaturesData(names, f)
	s.notify(ethtoolID, ethtool.Version, unix.ETHTOOL_MSG_FEATURES_NTF, &s.ethtoolSeq, monitorGroup, d.NetNS,
		func(b *nlattr.Builder) {
			putDevHeader(b, hdrAttr, &d)
			fd.put(b, true)
		})
}

// parseWanted mirrors ethnl_parse_bitset on ETHTOOL_A_FEATURES_WANTED: the
// value and mask the request carries, by applying it to an all-zeros and an
// all-ones bitmap (a list has every bit in its mask).
func parseWanted(r *request, attr nlattr.Attr, names []string) (val, mask []uint32, err error) {
	compact, err := ethtool.IsCompact(r.msg, attr)
	if err != nil {
		return nil, nil, err
	}
	lookup := names
	if compact {
		lookup = nil
	}
	n := len(names)
	zeros, ones := make([]uint32, ethtool.Words(n)), make([]uint32, ethtool.Words(n))
	for i := range ones {
		ones[i] = ^uint32(0)
	}
	if _, err := ethtool.UpdateBitset32(r.msg, attr, zeros, n, lookup); err != nil {
		return nil, nil, err
	}
	if _, err := ethtool.UpdateBitset32(r.msg, attr, ones, n, lookup); err != nil {
		return nil, nil, err
	}
	mask = make([]uint32, len(ones))
	for i := range mask {
		mask[i] = ^ones[i] | zeros[i]
	}
	clip(mask, n)
	return zeros, mask, nil
}

// clip clears the bits at or past n.
func clip(m []uint32, n int) {
	for i := range m {
		for b := 0; b < 32; b++ {
			if i*32+b >= n {
				m[i] &^= 1 << b
			}
		}
	}
}

// featuresSet mirrors ethnl_set_features: the wanted bits the request
// carries replace the current wanted ones; touching a NETIF_F_NEVER_CHANGE
// bit is EINVAL; bits the driver cannot change stay as they are. Unless
// ETHTOOL_FLAG_OMIT_REPLY, the reply lists the wanted bits that did not take
// effect and the active bits that changed, as the kernel's.
func (s *Server) featuresSet(r *request) error {
	hdr := r.attr(hdrAttr)
	if !hdr.Present() {
		return nlattr.Missing(nlattr.Attr{}, hdrAttr)
	}
	dev, flags, err := r.parseHeader(hdr, true)
	if err != nil {
		return err
	}
	attr := r.attr(unix.ETHTOOL_A_FEATURES_WANTED)
	if !attr.Present() { // GENL_REQ_ATTR_CHECK
		return nlattr.Missing(nlattr.Attr{}, unix.ETHTOOL_A_FEATURES_WANTED)
	}
	names, err := s.featureNames(true)
	if err != nil {
		return err
	}
	n := len(names)
	var reqWanted, reqMask, oldActive, newActive []uint32
	err = s.cfg.Backend.SetFeatures(r.ctx, r.c.caller, *dev, Update[Features]{
		Apply: func(cur Features) (Features, bool, error) {
			oldWanted := featureBits(names, cur.Wanted)
			oldActive = featureBits(names, cur.Active)
			newActive = oldActive
			val, mask, err := parseWanted(r, attr, names)
			if err != nil {
				return cur, false, err
			}
			never := featureBits(names, neverChange)
			for i := range mask {
				if mask[i]&never[i] != 0 {
					return cur, false, nlattr.Errorf(unix.EINVAL, "attempt to change non-ethtool features")
				}
			}
			reqWanted, reqMask = make([]uint32, len(val)), mask
			mod := false
			for i := range val {
				reqWanted[i] = val[i]&mask[i] | oldWanted[i]&^mask[i]
				mod = mod || reqWanted[i] != oldWanted[i]
			}
			if !mod {
				return cur, false, nil
			}
			hw := featureBits(names, cur.HW)
			next := make([]uint32, len(val))
			for i := range next {
				next[i] = oldWanted[i]&^hw[i] | reqWanted[i]&hw[i]
			}
			return Features{HW: cur.HW, Wanted: featureSet(names, next), Active: cur.Active}, true, nil
		},
		Changed: func(f Features) {
			newActive = featureBits(names, f.Active)
			for i := range newActive {
				if newActive[i] != oldActive[i] {
					s.NotifyFeatures(*dev, f)
					return
				}
			}
		},
	})
	if err != nil || flags&unix.ETHTOOL_FLAG_OMIT_REPLY != 0 {
		return err
	}
	wantedDiff, activeDiff := make([]uint32, len(reqWanted)), make([]uint32, len(reqWanted))
	wv, av := make([]uint32, len(reqWanted)), make([]uint32, len(reqWanted))
	for i := range reqWanted {
		wantedDiff[i] = (reqWanted[i] ^ newActive[i]) & reqMask[i]
		activeDiff[i] = oldActive[i] ^ newActive[i]
		wv[i] = reqWanted[i] & wantedDiff[i]
		av[i] = newActive[i] & activeDiff[i]
	}
	compact := flags&unix.ETHTOOL_FLAG_COMPACT_BITSETS != 0
	return r.reply(unix.ETHTOOL_MSG_FEATURES_SET_REPLY, func(b *nlattr.Builder) error {
		putDevHeader(b, hdrAttr, dev)
		ethtool.PutBitset32(b, unix.ETHTOOL_A_FEATURES_WANTED, wv, wantedDiff, n, names, compact)
		ethtool.PutBitset32(b, unix.ETHTOOL_A_FEATURES_ACTIVE, av, activeDiff, n, names, compact)
		return nil
	})
}
