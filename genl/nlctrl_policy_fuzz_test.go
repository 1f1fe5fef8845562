package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// addPolicySeeds adds FuzzDispatch seeds for CTRL_CMD_GETPOLICY (each family
// whole and by op, by id and by name, and the refused forms) and for
// ETHTOOL_MSG_STATS_GET.
func addPolicySeeds(seeds map[string][]byte, msg func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte) {
	pol := func(fill func(b *nlattr.Builder)) []byte {
		return msg(nlctrlID, nlattr.FlagDump, unix.CTRL_CMD_GETPOLICY, fill)
	}
	seeds["getpolicy_ethtool"] = pol(func(b *nlattr.Builder) { b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "ethtool") })
	seeds["getpolicy_ethtool_rings"] = pol(func(b *nlattr.Builder) {
		b.PutU16(unix.CTRL_ATTR_FAMILY_ID, ethtoolID)
		b.PutU32(unix.CTRL_ATTR_OP, unix.ETHTOOL_MSG_RINGS_GET)
	})
	seeds["getpolicy_nlctrl"] = pol(func(b *nlattr.Builder) { b.PutU16(unix.CTRL_ATTR_FAMILY_ID, nlctrlID) })
	seeds["getpolicy_manad"] = pol(func(b *nlattr.Builder) { b.PutU16(unix.CTRL_ATTR_FAMILY_ID, manadID) })
	seeds["getpolicy_netdev"] = pol(func(b *nlattr.Builder) { b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "netdev") })
	seeds["getpolicy_no_family"] = pol(nil)
	seeds["getpolicy_bad_op"] = pol(func(b *nlattr.Builder) {
		b.PutU16(unix.CTRL_ATTR_FAMILY_ID, ethtoolID)
		b.PutU32(unix.CTRL_ATTR_OP, 0x1ff)
	})
	seeds["stats_get_all"] = msg(ethtoolID, 0, unix.ETHTOOL_MSG_STATS_GET, func(b *nlattr.Builder) {
		h := b.Nest(2)
		b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 101)
		b.EndNest(h)
		g := b.Nest(3)
		b.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
		b.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 4)
		b.PutU32(unix.ETHTOOL_A_BITSET_VALUE, 0xf)
		b.EndNest(g)
		b.PutU32(5, 2)
	})
	seeds["stats_dump"] = msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_STATS_GET, func(b *nlattr.Builder) {
		g := b.Nest(3)
		bits := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
		bit := b.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
		b.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, "rmon")
		b.EndNest(bit)
		b.EndNest(bits)
		b.EndNest(g)
	})
	seeds["getpolicy_do"] = msg(nlctrlID, 0, unix.CTRL_CMD_GETPOLICY, func(b *nlattr.Builder) { b.PutU16(unix.CTRL_ATTR_FAMILY_ID, nlctrlID) })
}
