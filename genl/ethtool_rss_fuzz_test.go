package genl

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/transport"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/require"
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

// FuzzRSSSet sends RSS_SET requests built from arbitrary attribute payloads (a table, a key, a
// hash function, a context, each present or not) to a port of 4 queues and checks what the core
// and the driver promise whatever the input: a well-formed answer; the port's table always of
// its 64 entries, each naming one of its queues, and its key of 40 bytes; a refused request
// changes nothing and reaches no driver; a request that changes the state reaches the driver
// exactly once (one notification).
func FuzzRSSSet(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 0}, []byte(nil), uint32(0), uint32(0), uint8(1))
	f.Add([]byte{}, []byte(nil), uint32(0), uint32(0), uint8(1))
	f.Add([]byte{1, 2, 3}, make([]byte, 40), uint32(1), uint32(0), uint8(7))
	f.Add([]byte(nil), make([]byte, 40), uint32(0x100), uint32(0), uint8(6))
	f.Add([]byte{9, 0, 0, 0}, make([]byte, 39), uint32(2), uint32(1), uint8(15))
	s, _ := fuzzServer(f)
	f.Fuzz(func(t *testing.T, indir, key []byte, hfunc, context uint32, present uint8) {
		be := NewMemBackend()
		s.cfg.Backend = be.Ops()
		ns := NetNS{Dev: 1, Ino: 1}
		m := be.AddPort(ns, "mana0")
		before := m.rss()
		var out [][]byte
		c := newConn(s, transport.Detached(t.Context(), Caller{UID: 0, Admin: true, NetNS: ns}, func(b []byte) error {
			out = append(out, append([]byte(nil), b...))
			return nil
		}))
		var b nlattr.Builder
		start := b.BeginMsg(ethtoolID, nlattr.FlagRequest|nlattr.FlagAck, 1, 0)
		b.Genl(wire.MsgRSSSet, 1)
		n := b.Nest(wire.RSSHeader)
		b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
		b.EndNest(n)
		if present&1 != 0 {
			b.Put(wire.RSSIndir, indir)
		}
		if present&2 != 0 {
			b.Put(wire.RSSHKey, key)
		}
		if present&4 != 0 {
			b.PutU32(wire.RSSHFunc, hfunc)
		}
		if present&8 != 0 {
			b.PutU32(wire.RSSContext, context)
		}
		b.EndMsg(start)
		if b.Overflow {
			t.Skip("request does not fit a message")
		}
		s.handleDatagram(t.Context(), c, b.B)
		require.Len(t, out, 1, "%d answers", len(out))
		checkDatagram(t, out[0])
		h, _ := nlattr.ReadHeader(out[0])
		require.Equal(t, nlattr.MsgError, h.Type, "answer is not an ACK: % x", out[0])
		require.GreaterOrEqual(t, len(out[0]), nlattr.MsgHdrLen+4, "answer is not an ACK: % x", out[0])
		errno := int32(binary.NativeEndian.Uint32(out[0][nlattr.MsgHdrLen:]))

		be.mu.Lock()
		after := m.rss()
		be.mu.Unlock()
		hist := be.History()
		require.Len(t, after.Indir, 64, "state %+v", after)
		require.Equal(t, 40, len(after.HKey), "state %+v", after)
		require.Equal(t, uint32(1), after.HFunc, "state %+v", after)
		for i, q := range after.Indir {
			require.Less(t, q, after.RxRings, "entry %d names queue %d of %d", i, q, after.RxRings)
		}
		changed := !slices.Equal(before.Indir, after.Indir) || !bytes.Equal(before.HKey, after.HKey)
		switch {
		case errno != 0 && (changed || len(hist) != 0):
			t.Fatalf("refused (%d) but changed %v, driver calls %v", errno, changed, hist)
		case len(hist) > 1:
			t.Fatalf("driver called %d times: %v", len(hist), hist)
		case changed && len(hist) != 1:
			t.Fatalf("changed without one driver call: %v", hist)
		}
	})
}
