package genl

import (
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The netdev family's multicast groups, numbered after manad's "events".
const (
	netdevMgmtGroup     = 4 // "mgmt": dev add/del/change
	netdevPagePoolGroup = 5 // "page-pool" (reserved: no page-pool notifications yet)
)

// NotifyNetdevDev sends NETDEV_CMD_DEV_{ADD,DEL,CHANGE}_NTF for kind "new", "del" or
// "change" to the netdev "mgmt" subscribers in d's network namespace, with dev as dev-get
// shows it (netdev_genl_dev_notify). Other kinds are logged and ignored.
func (s *Server) NotifyNetdevDev(kind string, d Device, dev wire.NetdevDev) {
	var cmd uint8
	switch kind {
	case "new":
		cmd = wire.NetdevCmdDevAddNtf
	case "del":
		cmd = wire.NetdevCmdDevDelNtf
	case "change":
		cmd = wire.NetdevCmdDevChangeNtf
	default:
		s.log.Error("genl: NotifyNetdevDev with unknown kind, ignored", "kind", kind, "dev", d.Name)
		return
	}
	s.notify(netdevID, wire.NetdevFamilyVersion, cmd, &s.netdevSeq, netdevMgmtGroup, d.NetNS,
		func(b *nlattr.Builder) { wire.NetdevDevTable.Put(b, &dev) })
}
