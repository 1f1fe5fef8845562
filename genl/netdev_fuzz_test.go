package genl

import (
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// addNetdevSeeds adds FuzzDispatch seeds for every netdev command: well-formed requests for the
// first port (ifindex 101), NLA_UINT ids of both widths, and the bad scope and queue type.
func addNetdevSeeds(seeds map[string][]byte, msg func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte) {
	u32 := func(t uint16, v uint32) func(b *nlattr.Builder) { return func(b *nlattr.Builder) { b.PutU32(t, v) } }
	seeds["netdev_dev_get"] = msg(netdevID, 0, wire.NetdevCmdDevGet, u32(wire.NetdevADevIfindex, 101))
	seeds["netdev_dev_dump"] = msg(netdevID, nlattr.FlagDump, wire.NetdevCmdDevGet, nil)
	seeds["netdev_queue_get"] = msg(netdevID, 0, wire.NetdevCmdQueueGet, func(b *nlattr.Builder) {
		b.PutU32(wire.NetdevAQueueID, 1)
		b.PutU32(wire.NetdevAQueueType, wire.NetdevQueueTypeTX)
		b.PutU32(wire.NetdevAQueueIfindex, 101)
	})
	seeds["netdev_queue_dump"] = msg(netdevID, nlattr.FlagDump, wire.NetdevCmdQueueGet, u32(wire.NetdevAQueueIfindex, 101))
	seeds["netdev_napi_get"] = msg(netdevID, 0, wire.NetdevCmdNAPIGet, u32(wire.NetdevANAPIID, 20100))
	seeds["netdev_napi_dump"] = msg(netdevID, nlattr.FlagDump, wire.NetdevCmdNAPIGet, nil)
	seeds["netdev_napi_set"] = msg(netdevID, 0, wire.NetdevCmdNAPISet, func(b *nlattr.Builder) {
		b.PutU32(wire.NetdevANAPIID, 20100)
		b.PutU32(wire.NetdevANAPIDeferHardIRQs, 2)
		b.PutU32(wire.NetdevANAPIGROFlushTimeout, 20000)
		b.PutU64(wire.NetdevANAPIIRQSuspendTimeout, 1<<40)
		b.PutU32(wire.NetdevANAPIThreaded, 1)
	})
	seeds["netdev_pool_get"] = msg(netdevID, 0, wire.NetdevCmdPagePoolGet, func(b *nlattr.Builder) { b.PutU64(wire.NetdevAPagePoolID, 10101) })
	seeds["netdev_pool_dump"] = msg(netdevID, nlattr.FlagDump, wire.NetdevCmdPagePoolGet, nil)
	seeds["netdev_pool_stats_get"] = msg(netdevID, 0, wire.NetdevCmdPagePoolStatsGet, func(b *nlattr.Builder) {
		n := b.Nest(wire.NetdevAPagePoolStatsInfo)
		b.PutU32(wire.NetdevAPagePoolID, 10101)
		b.EndNest(n)
	})
	seeds["netdev_pool_stats_dump"] = msg(netdevID, nlattr.FlagDump, wire.NetdevCmdPagePoolStatsGet, nil)
	seeds["netdev_qstats_queue"] = msg(netdevID, nlattr.FlagDump, wire.NetdevCmdQStatsGet, func(b *nlattr.Builder) {
		b.PutU32(wire.NetdevAQStatsIfindex, 101)
		b.PutU64(wire.NetdevAQStatsScope, wire.NetdevQStatsScopeQueue)
	})
	seeds["netdev_qstats_bad_scope"] = msg(netdevID, nlattr.FlagDump, wire.NetdevCmdQStatsGet, u32(wire.NetdevAQStatsScope, 3))
	seeds["netdev_qstats_odd_scope"] = msg(netdevID, nlattr.FlagDump, wire.NetdevCmdQStatsGet, func(b *nlattr.Builder) {
		b.Put(wire.NetdevAQStatsScope, []byte{1, 0, 0, 0, 0, 0})
	})
}
