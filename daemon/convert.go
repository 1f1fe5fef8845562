package daemon

import (
	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/layout"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/privflag"
)

// rings is mana_get_ringparam.
func rings(s vnic.Settings) genl.Rings {
	return genl.Rings{RxMax: vnic.MaxRxRing, TxMax: vnic.MaxTxRing, Rx: uint32(s.RxRing), Tx: uint32(s.TxRing)}
}

// privFlags is mana_get_priv_flags.
func privFlags(s vnic.Settings) genl.PrivFlags {
	return genl.PrivFlags{Names: privflag.Names[:], Flags: s.PrivFlags}
}

// channels is mana_get_channels: combined channels only.
func channels(s vnic.Settings, maxQueues int) genl.Channels {
	return genl.Channels{CombinedMax: uint32(maxQueues), Combined: uint32(s.Queues)}
}

// wireFaults converts the armed faults.
func wireFaults(fs []vnic.Fault) []genl.Fault {
	out := make([]genl.Fault, len(fs))
	for i, f := range fs {
		out[i] = genl.Fault{Point: f.Point.String(), Mode: f.Mode.String(), Count: uint32(f.Count), Errno: uint32(f.Errno)}
	}
	return out
}

// info builds a port's full state: what its spec says (config's port schema: PortSpec.Info),
// with the settings as they are now, then what only the live port knows. Caller holds the
// configuration lock.
func (p *port) info() genl.PortInfo {
	st := p.vp.State()
	cur := p.spec
	cur.Settings, cur.Offload = st.Settings, p.offload()
	cur.NAPI = config.CommonNAPI(p.vp.NAPIConfigs())
	key := p.vp.RSS().Key
	cur.RSSKey = key[:]
	out := cur.Info()
	out.Device = p.device()
	out.AdminUp, out.Running, out.Detached, out.ResetPending = st.AdminUp, st.Running, st.Detached, st.ResetPending
	out.MinMTU, out.MaxMTU = uint32(st.MinMTU), uint32(st.MaxMTU) // less than max_mtu with XDP
	out.PageSize, out.MaxQueues, out.Rule = uint32(st.PageSize), uint32(st.MaxQueues), st.Rule.String()
	out.Layout = layout.Wire(st.Layout)
	out.PagesPinned, out.BytesPinned = uint64(st.PagesPinned), uint64(st.BytesPinned)
	out.BuffersInFlight, out.MemoryInUse = uint64(st.BuffersInFlight), uint64(st.MemoryInUse)
	out.MemoryPeak, out.MemoryBudget = uint64(st.MemoryPeak), uint64(st.MemoryBudget)
	out.Faults = wireFaults(st.Faults)
	out.RxShortHeadroom = st.Netdev.RxShortHeadroom
	return out
}

// poolEvent is the netdev family's event for a page-pool event: page_pool_list's ADD,
// page_pool_detached's CHANGE, page_pool_unlist's DEL.
func poolEvent(k vnic.PagePoolEventKind) genl.Event {
	switch k {
	case vnic.PagePoolAdded:
		return genl.EventNew
	case vnic.PagePoolDetached:
		return genl.EventChange
	case vnic.PagePoolRemoved:
		return genl.EventDel
	}
	return 0 // no Event: NotifyNetdevPagePool logs it
}
