package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// addCoalesceSeeds adds FuzzDispatch seeds for COALESCE_GET and _SET: a get, a dump, a set of
// every supported parameter, an unsupported parameter, a bool above 1, a profile nest and a
// u32 cut short.
func addCoalesceSeeds(seeds map[string][]byte, msg func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte) {
	hdr := func(b *nlattr.Builder) {
		n := b.Nest(unix.ETHTOOL_A_COALESCE_HEADER)
		b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
		b.EndNest(n)
	}
	set := func(fill func(b *nlattr.Builder)) []byte {
		return msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_COALESCE_SET, func(b *nlattr.Builder) { hdr(b); fill(b) })
	}
	seeds["coalesce_get"] = msg(ethtoolID, 0, unix.ETHTOOL_MSG_COALESCE_GET, hdr)
	seeds["coalesce_dump"] = msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_COALESCE_GET, nil)
	seeds["coalesce_set_all"] = set(func(b *nlattr.Builder) {
		b.PutU32(unix.ETHTOOL_A_COALESCE_RX_USECS, 1023)
		b.PutU32(unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES, 255)
		b.PutU32(unix.ETHTOOL_A_COALESCE_TX_USECS, 1024)
		b.PutU32(unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES, 256)
		b.PutU8(unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, 1)
		b.PutU8(unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX, 0)
		b.PutU32(wire.CoalesceRxCQEFrames, 8)
		b.PutU32(wire.CoalesceRxCQENsecs, 0)
	})
	seeds["coalesce_set_unsupported"] = set(func(b *nlattr.Builder) { b.PutU32(unix.ETHTOOL_A_COALESCE_RX_USECS_IRQ, 5) })
	seeds["coalesce_set_cqe_mode_2"] = set(func(b *nlattr.Builder) { b.PutU8(unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_RX, 2) })
	seeds["coalesce_set_profile"] = set(func(b *nlattr.Builder) {
		p := b.Nest(wire.CoalesceRxProfile)
		m := b.Nest(1)
		b.PutU32(1, 8)
		b.EndNest(m)
		b.EndNest(p)
	})
	seeds["coalesce_set_short"] = set(func(b *nlattr.Builder) { b.Put(unix.ETHTOOL_A_COALESCE_RX_USECS, []byte{1, 2}) })
}
