package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// addSegmentSeeds adds the segment commands' requests, valid and not, to the FuzzDispatch seeds.
func addSegmentSeeds(seeds map[string][]byte, msg func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte) {
	seg := func(fill func(b *nlattr.Builder)) func(b *nlattr.Builder) {
		return func(b *nlattr.Builder) {
			n := b.Nest(wire.AttrSegment)
			fill(b)
			b.EndNest(n)
		}
	}
	name := seg(func(b *nlattr.Builder) { b.PutString(wire.SegmentAttrName, "wire0") })
	up := func(dev, ns string) func(b *nlattr.Builder) {
		return func(b *nlattr.Builder) {
			name(b)
			n := b.Nest(wire.AttrUplink)
			b.PutString(wire.UplinkAttrDev, dev)
			if ns != "" {
				b.PutString(wire.UplinkAttrNetNS, ns)
			}
			b.EndNest(n)
		}
	}
	seeds["segment_get"] = msg(manadID, 0, wire.CmdSegmentGet, name)
	seeds["segment_dump"] = msg(manadID, nlattr.FlagDump, wire.CmdSegmentGet, nil)
	seeds["segment_new"] = msg(manadID, 0, wire.CmdSegmentNew, seg(func(b *nlattr.Builder) {
		b.PutString(wire.SegmentAttrName, "wire1")
		b.PutU32(wire.SegmentAttrMTU, 1450)
		b.PutU64(wire.SegmentAttrStormPPS, 1000)
		b.PutU64(wire.SegmentAttrAgeingMs, 0)
	}))
	seeds["segment_new_bad_mtu"] = msg(manadID, nlattr.FlagAck, wire.CmdSegmentNew, seg(func(b *nlattr.Builder) {
		b.PutString(wire.SegmentAttrName, "wire1")
		b.PutU32(wire.SegmentAttrMTU, 1)
	}))
	seeds["segment_new_no_name"] = msg(manadID, nlattr.FlagAck, wire.CmdSegmentNew, seg(func(b *nlattr.Builder) {}))
	seeds["segment_new_short_u64"] = msg(manadID, nlattr.FlagAck, wire.CmdSegmentNew, seg(func(b *nlattr.Builder) {
		b.PutString(wire.SegmentAttrName, "wire1")
		b.PutU32(wire.SegmentAttrAgeingMs, 5)
	}))
	seeds["segment_del"] = msg(manadID, nlattr.FlagAck, wire.CmdSegmentDel, name)
	seeds["uplink_add"] = msg(manadID, 0, wire.CmdUplinkAdd, up("vx0", "hostA"))
	seeds["uplink_add_no_dev"] = msg(manadID, nlattr.FlagAck, wire.CmdUplinkAdd, func(b *nlattr.Builder) {
		name(b)
		n := b.Nest(wire.AttrUplink)
		b.PutString(wire.UplinkAttrNetNS, "hostA")
		b.EndNest(n)
	})
	seeds["uplink_del"] = msg(manadID, nlattr.FlagAck, wire.CmdUplinkDel, up("vx0", ""))
	seeds["uplink_del_header"] = msg(manadID, nlattr.FlagAck, wire.CmdUplinkDel, func(b *nlattr.Builder) {
		up("vx0", "")(b)
		n := b.Nest(wire.AttrHeader)
		b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
		b.EndNest(n)
	})
}
