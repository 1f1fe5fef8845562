package genl

import (
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// NotifyPrivFlags sends ETHTOOL_MSG_PRIVFLAGS_NTF (compact bitset) to the
// "monitor" subscribers in d's network namespace. The server calls it from
// the Changed of its own PRIVFLAGS_SET; a backend calls it for changes made
// otherwise.
func (s *Server) NotifyPrivFlags(d Device, pf PrivFlags) {
	s.notify(ethtoolID, ethtool.Version, unix.ETHTOOL_MSG_PRIVFLAGS_NTF, &s.ethtoolSeq, monitorGroup, d.NetNS,
		func(b *nlattr.Builder) {
			putDevHeader(b, hdrAttr, &d)
			// ethnl_default_notify forces ETHTOOL_FLAG_COMPACT_BITSETS.
			putPrivFlags(b, capNames(pf.Names), pf.Flags, true)
		})
}

// NotifyRings sends ETHTOOL_MSG_RINGS_NTF to the "monitor" subscribers in
// d's network namespace.
func (s *Server) NotifyRings(d Device, r Rings) {
	s.notify(ethtoolID, ethtool.Version, unix.ETHTOOL_MSG_RINGS_NTF, &s.ethtoolSeq, monitorGroup, d.NetNS,
		func(b *nlattr.Builder) {
			putDevHeader(b, hdrAttr, &d)
			wire.RingsTable.Put(b, &r)
		})
}

// NotifyChannels sends ETHTOOL_MSG_CHANNELS_NTF to the "monitor"
// subscribers in d's network namespace.
func (s *Server) NotifyChannels(d Device, ch Channels) {
	s.notify(ethtoolID, ethtool.Version, unix.ETHTOOL_MSG_CHANNELS_NTF, &s.ethtoolSeq, monitorGroup, d.NetNS,
		func(b *nlattr.Builder) {
			putDevHeader(b, hdrAttr, &d)
			wire.ChannelsTable.Put(b, &ch)
		})
}

// NotifyPort sends a manad PORT_{NEW,CHANGE,DEL}_NTF for ev to the "events"
// subscribers in the port's network namespace. A value that is no Event is
// logged and ignored.
func (s *Server) NotifyPort(ev Event, p PortInfo) {
	cmd, ok := portNtf.cmd(ev)
	if !ok {
		s.log.Error("genl: NotifyPort with unknown event, ignored", "event", ev, "port", p.Device.Name)
		return
	}
	s.notify(manadID, wire.FamilyVersion, cmd, &s.manadSeq, eventsGroup, p.Device.NetNS,
		func(b *nlattr.Builder) { wire.PortTable.PutNest(b, wire.AttrPort, &p) })
}

// notify builds one notification (pid 0, seq from the family-global counter,
// as ethnl_bcastmsg_put, or 0 when seq is nil, as genl_info_init_ntf) and
// broadcasts it to every member of group whose caller netns is ns
// (transport.Server.Broadcast). Subscribers that cannot take it are dropped.
func (s *Server) notify(famID uint16, version, cmd uint8, seq *atomic.Uint32, group uint32, ns NetNS, fill func(*nlattr.Builder)) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	var n uint32
	if seq != nil {
		n = seq.Add(1)
	}
	var b nlattr.Builder
	start := b.BeginMsg(famID, 0, n, 0)
	b.Genl(cmd, version)
	fill(&b)
	b.EndMsg(start)
	if b.Overflow {
		s.log.Error("genl: notification does not fit in a netlink message, dropped", "cmd", cmd)
		return
	}
	s.t.Broadcast(group, ns, b.B)
}
