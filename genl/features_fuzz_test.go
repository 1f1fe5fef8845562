package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// addFeaturesSeeds adds FuzzDispatch seeds for FEATURES_GET/SET on the first port: a get, a
// dump, a verbose set by name, a compact set, and a set of a never-changeable bit.
func addFeaturesSeeds(seeds map[string][]byte, msg func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte) {
	hdr := func(b *nlattr.Builder) {
		n := b.Nest(unix.ETHTOOL_A_FEATURES_HEADER)
		b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
		b.EndNest(n)
	}
	byName := func(name string) func(b *nlattr.Builder) {
		return func(b *nlattr.Builder) {
			hdr(b)
			w := b.Nest(unix.ETHTOOL_A_FEATURES_WANTED)
			bits := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
			bit := b.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
			b.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, name)
			b.EndNest(bit)
			b.EndNest(bits)
			b.EndNest(w)
		}
	}
	seeds["features_get"] = msg(ethtoolID, 0, unix.ETHTOOL_MSG_FEATURES_GET, hdr)
	seeds["features_dump"] = msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_FEATURES_GET, nil)
	seeds["features_set_tso_off"] = msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_FEATURES_SET, byName("tx-tcp-segmentation"))
	seeds["features_set_nochange"] = msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_FEATURES_SET, byName("vlan-challenged"))
	seeds["features_set_compact"] = msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_FEATURES_SET, func(b *nlattr.Builder) {
		hdr(b)
		w := b.Nest(unix.ETHTOOL_A_FEATURES_WANTED)
		b.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 64)
		b.Put(unix.ETHTOOL_A_BITSET_VALUE, []byte{0, 0, 1, 0, 0, 0, 0, 0})
		b.Put(unix.ETHTOOL_A_BITSET_MASK, []byte{0, 0, 1, 0, 0, 0, 0, 0})
		b.EndNest(w)
	})
}
