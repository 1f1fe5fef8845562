package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// addRSSSeeds adds FuzzDispatch seeds for RSS_GET: a do and a dump for the first port, a
// context, START_CONTEXT outside a dump, and a short context; and for RSS_SET: a full table, a
// table of 2 repeated, the default table, a key, the hash function, each refused shape (a
// table not of u32s, of a size not dividing 64, naming a queue that does not exist, a short
// key, a context, an input transformation, per-flow fields, a flow field with a reserved bit).
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

	set := func(name string, fill func(b *nlattr.Builder)) {
		seeds["rss_set_"+name] = msg(ethtoolID, nlattr.FlagAck, wire.MsgRSSSet, func(b *nlattr.Builder) { hdr(b); fill(b) })
	}
	table := func(n int, mod uint32) []uint32 {
		t := make([]uint32, n)
		for i := range t {
			t[i] = uint32(i) % mod
		}
		return t
	}
	set("full", func(b *nlattr.Builder) { b.Put(wire.RSSIndir, wire.IndirBytes(table(64, 2))) })
	set("equal2", func(b *nlattr.Builder) { b.Put(wire.RSSIndir, wire.IndirBytes(table(2, 2))) })
	set("default", func(b *nlattr.Builder) { b.Put(wire.RSSIndir, nil) })
	set("key", func(b *nlattr.Builder) { b.Put(wire.RSSHKey, make([]byte, 40)) })
	set("hfunc", func(b *nlattr.Builder) { b.PutU32(wire.RSSHFunc, 1) })
	set("hfunc_xor", func(b *nlattr.Builder) { b.PutU32(wire.RSSHFunc, 2) })
	set("odd_table", func(b *nlattr.Builder) { b.Put(wire.RSSIndir, []byte{1, 2, 3}) })
	set("table_of_3", func(b *nlattr.Builder) { b.Put(wire.RSSIndir, wire.IndirBytes(table(3, 1))) })
	set("queue_9", func(b *nlattr.Builder) { b.Put(wire.RSSIndir, wire.IndirBytes([]uint32{0, 9})) })
	set("short_key", func(b *nlattr.Builder) { b.Put(wire.RSSHKey, make([]byte, 39)) })
	set("context", func(b *nlattr.Builder) { b.PutU32(wire.RSSContext, 1); b.PutU32(wire.RSSHFunc, 1) })
	set("xfrm", func(b *nlattr.Builder) { b.PutU32(wire.RSSInputXfrm, 1) })
	set("flow_hash", func(b *nlattr.Builder) {
		n := b.Nest(wire.RSSFlowHash)
		b.PutU32(4, wire.RXHIPSrc|wire.RXHIPDst)
		b.EndNest(n)
	})
	set("flow_reserved", func(b *nlattr.Builder) {
		n := b.Nest(wire.RSSFlowHash)
		b.PutU64(4, 1)
		b.EndNest(n)
	})
}
