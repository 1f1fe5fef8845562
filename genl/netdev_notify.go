package genl

import (
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The netdev family's multicast groups, numbered after manad's "events".
const (
	netdevMgmtGroup     = 4 // "mgmt": dev add/del/change
	netdevPagePoolGroup = 5 // "page-pool": page-pool add/del/change
)

// NotifyNetdevDev sends NETDEV_CMD_DEV_{ADD,CHANGE,DEL}_NTF for ev to the netdev "mgmt"
// subscribers in d's network namespace, with dev as dev-get shows it (netdev_genl_dev_notify:
// seq 0, as genl_info_init_ntf). A value that is no Event is logged and ignored.
func (s *Server) NotifyNetdevDev(ev Event, d Device, dev wire.NetdevDev) {
	cmd, ok := netdevDevNtf.cmd(ev)
	if !ok {
		s.log.Error("genl: NotifyNetdevDev with unknown event, ignored", "event", ev, "dev", d.Name)
		return
	}
	s.notify(netdevID, wire.NetdevFamilyVersion, cmd, nil, netdevMgmtGroup, d.NetNS,
		func(b *nlattr.Builder) { wire.NetdevDevTable.Put(b, &dev) })
}

// NotifyNetdevPagePool sends NETDEV_CMD_PAGE_POOL_{ADD,CHANGE,DEL}_NTF for ev to the netdev
// "page-pool" subscribers in namespace ns, with pp as page-pool-get shows it
// (netdev_nl_page_pool_event: page_pool_nl_fill, seq 0). The kernel sends add (EventNew) from
// page_pool_list, change from page_pool_detached and from page_pool_unreg_netdev (the pool's
// netdev went away: the pool moves to loopback, whose ifindex it leaves out), del from
// page_pool_unlist. A value that is no Event is logged and ignored.
func (s *Server) NotifyNetdevPagePool(ev Event, ns NetNS, pp wire.NetdevPagePool) {
	cmd, ok := pagePoolNtf.cmd(ev)
	if !ok {
		s.log.Error("genl: NotifyNetdevPagePool with unknown event, ignored", "event", ev, "pool", pp.ID)
		return
	}
	s.notify(netdevID, wire.NetdevFamilyVersion, cmd, nil, netdevPagePoolGroup, ns,
		func(b *nlattr.Builder) { wire.NetdevPagePoolTable.Put(b, &pp) })
}
