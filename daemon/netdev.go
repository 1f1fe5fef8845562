package daemon

import (
	"context"
	"time"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
)

// netdevXDPFeatures is what dev-get reports as xdp-features: mana's, as mana_probe_port sets
// them with xdp_set_features_flag (NETDEV_XDP_ACT_BASIC | _REDIRECT | _NDO_XMIT). mana sets no
// xdp_metadata_ops and no XSK TX metadata ops, so xdp-rx-metadata-features and xsk-features are
// 0, as here.
const netdevXDPFeatures = wire.NetdevXDPActBasic | wire.NetdevXDPActRedirect | wire.NetdevXDPActNDOXmit

// NetdevPort returns a port's netdev views (queues, NAPIs, qstats, page pools) from its vnic
// model. It fails with ENODEV when the port is gone. The views are read without the
// configuration lock, so a dump does not wait for a reconfiguration.
func (b *backend) NetdevPort(ctx context.Context, c genl.Caller, dev genl.Device) (genl.NetdevPort, error) {
	return b.NetdevViews(ctx, c, dev, genl.NetdevViewAll)
}

// NetdevViews is NetdevPort building only the views in want: each walks the port's queues.
func (b *backend) NetdevViews(ctx context.Context, c genl.Caller, dev genl.Device, want genl.NetdevView) (genl.NetdevPort, error) {
	var vp *vnic.Port
	if err := b.withPort(dev, func(p *port) error { vp = p.vp; return nil }); err != nil {
		return genl.NetdevPort{}, err
	}
	return netdevPort(dev.Index, vp, want), nil
}

// netdevDev is the port's netdev as dev-get shows it. mana sets xdp_features once, at probe
// (mana_probe_port), and never calls xdp_set_features_flag or xdp_features_set_redirect_target,
// and it reports no XDP RX metadata and no XSK features, so nothing here follows the port's
// configuration. The kernel's NETDEV_CMD_DEV_CHANGE_NTF comes only from NETDEV_XDP_FEAT_CHANGE
// (netdev_genl_netdevice_event), which those calls raise: a mana port never gets one, and
// neither does a manad port. Should a field come to follow the configuration, the change
// notification belongs in backend.changeLocked, sent when the value differs.
func netdevDev(ifi uint32) wire.NetdevDev {
	return wire.NetdevDev{Ifindex: ifi, XDPFeatures: netdevXDPFeatures}
}

// netdevPort converts the views in want of vp, the port of ifindex ifi, to the netdev family's.
func netdevPort(ifi uint32, vp *vnic.Port, want genl.NetdevView) genl.NetdevPort {
	out := genl.NetdevPort{Dev: netdevDev(ifi)}
	// Each view's slice is allocated once at its size: a round trip's time is mostly in what it
	// allocates (16 queues: 16 allocations of the growing slices before, 2 now).
	if want&genl.NetdevViewQueues != 0 {
		if qs := vp.Queues(); len(qs) > 0 {
			out.Queues = make([]wire.NetdevQueue, len(qs))
			for i, q := range qs {
				out.Queues[i] = wire.NetdevQueue{ID: uint32(q.ID), Type: uint32(q.Type), Ifindex: ifi, NAPIID: q.NAPIID}
			}
		}
	}
	if want&genl.NetdevViewNAPIs != 0 {
		if ns := vp.NAPIs(); len(ns) > 0 {
			out.NAPIs = make([]wire.NetdevNAPI, len(ns))
			for i, n := range ns {
				out.NAPIs[i] = netdevNAPI(ifi, n)
			}
		}
	}
	switch {
	case want&genl.NetdevViewQStats == 0:
	case want&genl.NetdevViewQStatsDevice != 0:
		out.Device = qstats(ifi, vp.QStatsTotal())
		out.Device.HasRX, out.Device.HasTX = true, true
	default:
		netdevQStats(&out, ifi, vp)
	}
	if want&genl.NetdevViewPools != 0 {
		netdevPools(&out, ifi, vp)
	}
	return out
}

// netdevQStats fills out's qstats views from vp.
func netdevQStats(out *genl.NetdevPort, ifi uint32, vp *vnic.Port) {
	qs := vp.QStats()
	out.Device = qstats(ifi, qs.Total)
	out.Device.HasRX, out.Device.HasTX = true, true
	if len(qs.Queues) > 0 {
		out.QueueStats = make([]wire.NetdevQStats, 0, len(qs.Queues))
	}
	for _, q := range qs.Queues {
		w := qstats(ifi, q.QStats)
		w.Scoped, w.Type, w.QueueID = true, uint32(q.Type), uint32(q.ID)
		w.HasRX, w.HasTX = q.Type == vnic.QueueRX, q.Type == vnic.QueueTX
		out.QueueStats = append(out.QueueStats, w)
	}
}

// netdevPools fills out's page-pool view from vp.
func netdevPools(out *genl.NetdevPort, ifi uint32, vp *vnic.Port) {
	vp.EachPagePool(func(pp *vnic.PagePool) {
		k := pp.Stats
		out.Pools = append(out.Pools, genl.NetdevPool{
			Pool: netdevPool(ifi, *pp),
			Stats: wire.NetdevPagePoolStats{Info: wire.NetdevPagePoolInfo{ID: uint64(pp.ID), Ifindex: ifi},
				AllocFast: k.AllocFast, AllocSlow: k.AllocSlow, AllocSlowHighOrder: k.AllocSlowHighOrder,
				AllocEmpty: k.AllocEmpty, AllocRefill: k.AllocRefill, AllocWaive: k.AllocWaive,
				RecycleCached: k.RecycleCached, RecycleCacheFull: k.RecycleCacheFull, RecycleRing: k.RecycleRing,
				RecycleRingFull: k.RecycleRingFull, RecycleReleasedRefcnt: k.RecycleReleasedRefcnt},
		})
	})
}

func qstats(ifi uint32, s vnic.QStats) wire.NetdevQStats {
	return wire.NetdevQStats{Ifindex: ifi, RxPackets: s.RxPackets, RxBytes: s.RxBytes, RxAllocFail: s.RxAllocFail,
		RxHwDrops: s.RxHwDrops, RxHwDropOverruns: s.RxHwDropOverruns, TxPackets: s.TxPackets, TxBytes: s.TxBytes}
}

// notifyNetdevDev announces a port's netdev to the netdev family's "mgmt" subscribers
// (genl.EventNew or EventDel), as the kernel's NETDEV_REGISTER/UNREGISTER notifier does.
func (d *Daemon) notifyNetdevDev(ev genl.Event, dev genl.Device) {
	d.srv.NotifyNetdevDev(ev, dev, netdevDev(dev.Index))
}

// notifyNetdevPool announces a page-pool event of port p to the netdev family's "page-pool"
// subscribers in p's namespace (vnic.Config.OnPagePool). It runs with the port's pool list
// locked, from the control path or from a pool's releaser, and only queues the message. Once
// the port's netdev is unregistered its pools carry no ifindex, as the kernel's, moved to
// loopback by page_pool_unreg_netdev.
func (d *Daemon) notifyNetdevPool(p *port, ev vnic.PagePoolEvent) {
	d.srv.NotifyNetdevPagePool(poolEvent(ev.Kind), p.ns, netdevPoolNotification(ev.Pool, p.netdevGone.Load()))
}

// netdevPoolNotification is a page-pool event's pool as its notification carries it: as
// page-pool-get shows it, without ifindex once the netdev is gone.
func netdevPoolNotification(pp vnic.PagePool, gone bool) wire.NetdevPagePool {
	w := netdevPool(uint32(pp.Ifindex), pp)
	if gone {
		w.Ifindex = 0
	}
	return w
}

// netdevPool converts a pool of the port of ifindex ifi to page-pool-get's reply.
func netdevPool(ifi uint32, pp vnic.PagePool) wire.NetdevPagePool {
	var detach uint64
	if pp.Detached() {
		// The kernel's detach_time is ktime_get_boottime_seconds(); a pool detached in
		// the first second after boot would read 0 there too (and show as attached).
		detach = uint64(pp.DetachBoottime / time.Second)
	}
	return wire.NetdevPagePool{ID: uint64(pp.ID), Ifindex: ifi, NAPIID: uint64(pp.NAPIID),
		Inflight: uint64(pp.Inflight), InflightMem: uint64(pp.InflightMem), DetachTime: detach}
}

// unregisterNetdevPools is page_pool_unreg_netdev for a port whose netdev is being deleted: the
// pools still draining (its queues are stopped) lose their ifindex, each announced with a
// change, before the dev del. Caller holds the configuration lock.
func (d *Daemon) unregisterNetdevPools(p *port) {
	p.netdevGone.Store(true)
	if p.vp == nil {
		return
	}
	for _, pp := range p.vp.PagePools() {
		d.notifyNetdevPool(p, vnic.PagePoolEvent{Kind: vnic.PagePoolDetached, Pool: pp})
	}
}
