package genl

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/wire"
)

// MemDetachedPools is how many detached page pools (after the running ones)
// MemBackend lists per port: as a port shortly after a reconfiguration.
const MemDetachedPools = 1

// NetdevPort gives a port Channels.Combined queue pairs, NAPI ids 10000+
// 100·ifindex+queue, one page pool per RX queue (ids 100·ifindex+queue+1)
// and MemDetachedPools detached ones; counters are derived from the ids so
// every value is distinct. A plain device answers EOPNOTSUPP.
func (b *MemBackend) NetdevPort(ctx context.Context, c Caller, d Device) (NetdevPort, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.find(c, d)
	if err != nil {
		return NetdevPort{}, err
	}
	if !m.Port {
		return NetdevPort{}, unix.EOPNOTSUPP
	}
	ifi := m.Dev.Index
	p := NetdevPort{Dev: wire.NetdevDev{Ifindex: ifi, XDPFeatures: 1}}
	p.Device = wire.NetdevQStats{Ifindex: ifi, HasRX: true, HasTX: true}
	n := m.Channels.Combined
	if !m.Info.Running {
		n = 0
	}
	var rx, tx []wire.NetdevQueue
	var txs []wire.NetdevQStats
	for q := range n {
		napi := 10000 + 100*ifi + q
		rx = append(rx, wire.NetdevQueue{ID: q, Type: wire.NetdevQueueTypeRX, Ifindex: ifi, NAPIID: napi})
		tx = append(tx, wire.NetdevQueue{ID: q, Type: wire.NetdevQueueTypeTX, Ifindex: ifi})
		p.NAPIs = append(p.NAPIs, wire.NetdevNAPI{ID: napi, Ifindex: ifi})
		qs := wire.NetdevQStats{Ifindex: ifi, Scoped: true, Type: wire.NetdevQueueTypeRX, QueueID: q, HasRX: true,
			RxPackets: uint64(napi), RxBytes: 64 * uint64(napi), RxHwDrops: uint64(q)}
		ts := wire.NetdevQStats{Ifindex: ifi, Scoped: true, Type: wire.NetdevQueueTypeTX, QueueID: q, HasTX: true,
			TxPackets: uint64(q + 1), TxBytes: 1 << 33} // a u64 on the wire
		p.QueueStats = append(p.QueueStats, qs)
		p.Device.RxPackets += qs.RxPackets
		p.Device.RxBytes += qs.RxBytes
		p.Device.RxHwDrops += qs.RxHwDrops
		p.Device.TxPackets += ts.TxPackets
		p.Device.TxBytes += ts.TxBytes
		p.Pools = append(p.Pools, memPool(ifi, uint64(100*ifi+q+1), uint64(napi), 0))
		txs = append(txs, ts)
	}
	p.Queues = append(rx, tx...)
	p.QueueStats = append(p.QueueStats, txs...) // RX queues, then TX, as the kernel
	for i := range uint64(MemDetachedPools) {
		p.Pools = append(p.Pools, memPool(ifi, uint64(100*ifi+90)+i, 0, 5000+i))
	}
	return p, nil
}

func memPool(ifi uint32, id, napi, detach uint64) NetdevPool {
	return NetdevPool{
		Pool: wire.NetdevPagePool{ID: id, Ifindex: ifi, NAPIID: napi, Inflight: id + 1, InflightMem: 4096 * (id + 1), DetachTime: detach},
		Stats: wire.NetdevPagePoolStats{Info: wire.NetdevPagePoolInfo{ID: id, Ifindex: ifi}, AllocFast: id * 10, AllocSlow: id,
			RecycleCached: id * 9, RecycleRing: 3},
	}
}
