package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// addPolicySeeds adds FuzzDispatch seeds for CTRL_CMD_GETPOLICY: each family
// whole and by op, by id and by name, and the refused forms.
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
	seeds["getpolicy_do"] = msg(nlctrlID, 0, unix.CTRL_CMD_GETPOLICY, func(b *nlattr.Builder) { b.PutU16(unix.CTRL_ATTR_FAMILY_ID, nlctrlID) })
}
