package daemon

import (
	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/layout"
	"github.com/manad/manad/vnic"
)

// rings is mana_get_ringparam.
func rings(s vnic.Settings) genl.Rings {
	return genl.Rings{RxMax: vnic.MaxRxRing, TxMax: vnic.MaxTxRing, Rx: uint32(s.RxRing), Tx: uint32(s.TxRing)}
}

// privFlags is mana_get_priv_flags.
func privFlags(s vnic.Settings) genl.PrivFlags {
	return genl.PrivFlags{Names: vnic.PrivFlagNames[:], Flags: s.PrivFlags}
}

// channels is mana_get_channels: combined channels only.
func channels(s vnic.Settings, maxQueues int) genl.Channels {
	return genl.Channels{CombinedMax: uint32(maxQueues), Combined: uint32(s.Queues)}
}

// xdpName is how a port's program shows in its state.
func xdpName(p vnic.XDPProgram) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

// wireFaults converts the armed faults.
func wireFaults(fs []vnic.Fault) []genl.Fault {
	out := make([]genl.Fault, len(fs))
	for i, f := range fs {
		out[i] = genl.Fault{Point: f.Point.String(), Mode: f.Mode.String(), Count: uint32(f.Count), Errno: uint32(f.Errno)}
	}
	return out
}

// info builds a port's full state. Caller holds the configuration lock.
func (p *port) info() genl.PortInfo {
	st := p.vp.State()
	s := st.Settings
	return genl.PortInfo{
		Device:    p.device(),
		NetNSName: p.spec.NetNS, Segment: p.spec.Segment, MAC: p.spec.MAC,
		AdminUp: st.AdminUp, Running: st.Running, Detached: st.Detached, ResetPending: st.ResetPending,
		Persistent: p.spec.Persistent,
		MTU:        uint32(s.MTU), MinMTU: uint32(st.MinMTU), MaxMTU: uint32(st.MaxMTU),
		PageSize: uint32(st.PageSize), Queues: uint32(s.Queues), MaxQueues: uint32(st.MaxQueues),
		RxRing: uint32(s.RxRing), TxRing: uint32(s.TxRing), PrivFlags: s.PrivFlags,
		PrivFlagNames: config.PrivFlagNames(s.PrivFlags), XDP: xdpName(s.XDP),
		Layout:      layout.Wire(st.Layout),
		PagesPinned: uint64(st.PagesPinned), BytesPinned: uint64(st.BytesPinned),
		BuffersInFlight: uint64(st.BuffersInFlight), MemoryInUse: uint64(st.MemoryInUse),
		MemoryPeak: uint64(st.MemoryPeak), MemoryBudget: uint64(st.MemoryBudget),
		Faults:  wireFaults(st.Faults),
		Offload: p.offload(), RxAlloc: p.spec.RxAlloc.String(), RxRecycle: !p.spec.RxNoRecycle,
		Speed:           uint32(max(p.spec.Speed, 0)),
		RxShortHeadroom: st.Netdev.RxShortHeadroom,
	}
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
