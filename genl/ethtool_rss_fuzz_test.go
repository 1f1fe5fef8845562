package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// addRSSSeeds adds FuzzDispatch seeds for RSS_GET: a do and a dump for the first port, a
// context, START_CONTEXT outside a dump, and a short context.
func addRSSSeeds(seeds map[string][]byte, msg func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte) {
	hdr := func(b *nlattr.Builder) {
		n := b.Nest(wire.RSSHeader)
		b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
		b.EndNest(n)
	}
	seeds["rss_get"] = msg(ethtoolID, 0, unix.ETHTOOL_MSG_RSS_GET, hdr)
	seeds["rss_dump"] = msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_RSS_GET, nil)
	seeds["rss_context"] = msg(ethtoolID, 0, unix.ETHTOOL_MSG_RSS_GET, func(b *nlattr.Builder) { hdr(b); b.PutU32(wire.RSSContext, 1) })
	seeds["rss_start_context"] = msg(ethtoolID, 0, unix.ETHTOOL_MSG_RSS_GET, func(b *nlattr.Builder) { hdr(b); b.PutU32(wire.RSSStartContext, 0) })
	seeds["rss_short_context"] = msg(ethtoolID, 0, unix.ETHTOOL_MSG_RSS_GET, func(b *nlattr.Builder) { hdr(b); b.PutU16(wire.RSSContext, 1) })
}
