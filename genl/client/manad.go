package client

import (
	"context"
	"net"
	"slices"

	"github.com/mdlayher/netlink"

	"github.com/manad/manad/genl"
)

// The manad-family methods. On a kernel client they fail with an error
// wrapping EOPNOTSUPP.

// Ports returns the ports the PORT_GET dump shows the caller: those in its network namespace,
// or, for an admin in manad's own namespace, every port.
func (c *Client) Ports(ctx context.Context) ([]genl.PortInfo, error) {
	msgs, err := c.manadExec(ctx, "Ports", genl.CmdPortGet, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	ports := make([]genl.PortInfo, 0, len(msgs))
	for _, m := range msgs {
		p, err := DecodePort(m.Data)
		if err != nil {
			return nil, err
		}
		ports = append(ports, *p)
	}
	return ports, nil
}

// Port returns one port (PORT_GET).
func (c *Client) Port(ctx context.Context, ifi Interface) (*genl.PortInfo, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, genl.AttrHeader, ifi, 0); err != nil {
		return nil, err
	}
	msgs, err := c.manadExec(ctx, "Port", genl.CmdPortGet, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, "PORT_GET")
	if err != nil {
		return nil, err
	}
	return DecodePort(m.Data)
}

// CreatePort creates a port (PORT_NEW, admin) and returns it. Zero fields of
// s are not sent, leaving them to the daemon's defaults.
func (c *Client) CreatePort(ctx context.Context, s genl.PortSpec) (*genl.PortInfo, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(genl.AttrPort, func(p *netlink.AttributeEncoder) error {
		str := func(t uint16, v string) {
			if v != "" {
				p.String(t, v)
			}
		}
		u32 := func(t uint16, v uint32) {
			if v != 0 {
				p.Uint32(t, v)
			}
		}
		str(genl.PortAttrDevName, s.Name)
		str(genl.PortAttrNetNS, s.NetNS)
		str(genl.PortAttrSegment, s.Segment)
		if len(s.MAC) > 0 {
			p.Bytes(genl.PortAttrMAC, s.MAC)
		}
		if s.Persistent {
			p.Uint8(genl.PortAttrPersistent, 1)
		}
		u32(genl.PortAttrMTU, s.MTU)
		u32(genl.PortAttrMaxMTU, s.MaxMTU)
		u32(genl.PortAttrPageSize, s.PageSize)
		u32(genl.PortAttrQueues, s.Queues)
		u32(genl.PortAttrMaxQueues, s.MaxQueues)
		u32(genl.PortAttrRxRing, s.RxRing)
		u32(genl.PortAttrTxRing, s.TxRing)
		u32(genl.PortAttrPrivFlags, s.PrivFlags)
		if s.MemoryBudget != 0 {
			p.Uint64(genl.PortAttrMemoryBudget, s.MemoryBudget)
		}
		return nil
	})
	msgs, err := c.manadExec(ctx, "CreatePort", genl.CmdPortNew, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, "PORT_NEW")
	if err != nil {
		return nil, err
	}
	return DecodePort(m.Data)
}

// DeletePort deletes a port (PORT_DEL, admin).
func (c *Client) DeletePort(ctx context.Context, ifi Interface) error {
	return c.devAction(ctx, "DeletePort", genl.CmdPortDel, ifi, nil)
}

// SetMTU sets a port's MTU (PORT_SET_MTU, admin).
func (c *Client) SetMTU(ctx context.Context, ifi Interface, mtu uint32) error {
	return c.devAction(ctx, "SetMTU", genl.CmdPortSetMTU, ifi, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(genl.AttrMTU, mtu)
	})
}

// xdpChunk keeps each XDP_OBJECT attribute under the 64 KiB attribute limit.
const xdpChunk = 60 << 10

// AttachXDP attaches a built-in or eBPF XDP program (XDP_ATTACH, admin). The
// object travels in XDP_OBJECT chunks; the whole request must fit in one
// datagram (the socket send buffer, about 200 KiB by default, and manad's
// MaxMessage).
func (c *Client) AttachXDP(ctx context.Context, ifi Interface, p genl.XDPProgram) error {
	return c.devAction(ctx, "AttachXDP", genl.CmdXDPAttach, ifi, func(ae *netlink.AttributeEncoder) {
		if p.Builtin != "" || p.Section != "" || p.Name != "" {
			ae.Nested(genl.AttrXDP, func(x *netlink.AttributeEncoder) error {
				if p.Builtin != "" {
					x.String(genl.XDPAttrBuiltin, p.Builtin)
				}
				if p.Section != "" {
					x.String(genl.XDPAttrSection, p.Section)
				}
				if p.Name != "" {
					x.String(genl.XDPAttrName, p.Name)
				}
				return nil
			})
		}
		for obj := p.Object; len(obj) > 0; {
			n := min(len(obj), xdpChunk)
			ae.Bytes(genl.AttrXDPObject, obj[:n])
			obj = obj[n:]
		}
	})
}

// DetachXDP detaches a port's XDP program (XDP_DETACH, admin).
func (c *Client) DetachXDP(ctx context.Context, ifi Interface) error {
	return c.devAction(ctx, "DetachXDP", genl.CmdXDPDetach, ifi, nil)
}

// SetFault sets (or, with Mode "off", clears) fault injection at a
// reconfiguration point of a port (FAULT_SET, admin).
func (c *Client) SetFault(ctx context.Context, ifi Interface, f genl.Fault) error {
	return c.devAction(ctx, "SetFault", genl.CmdFaultSet, ifi, func(ae *netlink.AttributeEncoder) {
		ae.Nested(genl.AttrFault, func(n *netlink.AttributeEncoder) error {
			n.String(genl.FaultAttrPoint, f.Point)
			n.String(genl.FaultAttrMode, f.Mode)
			if f.Count != 0 {
				n.Uint32(genl.FaultAttrCount, f.Count)
			}
			if f.Errno != 0 {
				n.Uint32(genl.FaultAttrErrno, f.Errno)
			}
			return nil
		})
	})
}

func (c *Client) devAction(ctx context.Context, op string, cmd uint8, ifi Interface, attrs func(*netlink.AttributeEncoder)) error {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, genl.AttrHeader, ifi, 0); err != nil {
		return err
	}
	if attrs != nil {
		attrs(ae)
	}
	_, err := c.manadExec(ctx, op, cmd, netlink.Request|netlink.Acknowledge, ae)
	return err
}

// DeviceStats are the statistics of one device.
type DeviceStats struct {
	Interface Interface
	Stats     []genl.Stat
}

// Stats returns a port's statistics in the driver's order (STATS_GET).
func (c *Client) Stats(ctx context.Context, ifi Interface) ([]genl.Stat, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, genl.AttrHeader, ifi, 0); err != nil {
		return nil, err
	}
	msgs, err := c.manadExec(ctx, "Stats", genl.CmdStatsGet, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, "STATS_GET")
	if err != nil {
		return nil, err
	}
	ds, err := DecodeStats(m.Data)
	if err != nil {
		return nil, err
	}
	return ds.Stats, nil
}

// AllStats returns the statistics of every port (STATS_GET dump).
func (c *Client) AllStats(ctx context.Context) ([]*DeviceStats, error) {
	msgs, err := c.manadExec(ctx, "AllStats", genl.CmdStatsGet, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs, DecodeStats)
}

// DecodeStats decodes a STATS_GET reply.
func DecodeStats(b []byte) (*DeviceStats, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	ds := &DeviceStats{}
	for ad.Next() {
		switch ad.Type() {
		case genl.AttrHeader:
			ds.Interface = decodeHeader(ad)
		case genl.AttrStat:
			var st genl.Stat
			ad.Nested(func(n *netlink.AttributeDecoder) error {
				for n.Next() {
					switch n.Type() {
					case genl.StatAttrName:
						st.Name = n.String()
					case genl.StatAttrValue:
						st.Value = n.Uint64()
					}
				}
				return nil
			})
			ds.Stats = append(ds.Stats, st)
		}
	}
	if err := ad.Err(); err != nil {
		return nil, err
	}
	return ds, nil
}

// PlanLayout computes RX buffer layouts for hypothetical parameters, one per
// rule (LAYOUT_PLAN), however many rules: a reply longer than one datagram
// arrives multi-part and is joined here.
func (c *Client) PlanLayout(ctx context.Context, r genl.LayoutRequest) ([]genl.RxBufLayout, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(genl.AttrLayoutRequest, func(n *netlink.AttributeEncoder) error {
		n.Uint32(genl.LayoutAttrPageSize, r.PageSize)
		n.Uint32(genl.LayoutAttrMTU, r.MTU)
		n.Uint32(genl.LayoutAttrRingSize, r.RingSize)
		n.Uint32(genl.LayoutAttrQueues, r.Queues)
		n.Uint8(genl.LayoutAttrXDP, b2u8(r.XDP))
		n.Uint8(genl.LayoutAttrFullPageRx, b2u8(r.FullPageRx))
		for _, rule := range r.Rules {
			n.String(genl.LayoutAttrRule, rule)
		}
		return nil
	})
	msgs, err := c.manadExec(ctx, "PlanLayout", genl.CmdLayoutPlan, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	// A reply too long for one datagram comes multi-part (netlink.Conn joins the parts up
	// to NLMSG_DONE): the layouts are those of every message, in order.
	if len(msgs) == 0 {
		_, err := one(msgs, "LAYOUT_PLAN")
		return nil, err
	}
	var out []genl.RxBufLayout
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			return nil, err
		}
		for ad.Next() {
			if ad.Type() == genl.AttrLayout {
				var l genl.RxBufLayout
				ad.Nested(decodeLayout(&l))
				out = append(out, l)
			}
		}
		if err := ad.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func b2u8(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

// DecodePort decodes a PORT_GET/PORT_NEW reply or a PORT_*_NTF payload.
func DecodePort(b []byte) (*genl.PortInfo, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	p := &genl.PortInfo{}
	for ad.Next() {
		if ad.Type() == genl.AttrPort {
			ad.Nested(decodePortAttrs(p))
		}
	}
	if err := ad.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

func decodePortAttrs(p *genl.PortInfo) func(*netlink.AttributeDecoder) error {
	return func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			switch ad.Type() {
			case genl.PortAttrDevIndex:
				p.Device.Index = ad.Uint32()
			case genl.PortAttrDevName:
				p.Device.Name = ad.String()
			case genl.PortAttrNetNS:
				p.NetNSName = ad.String()
			case genl.PortAttrSegment:
				p.Segment = ad.String()
			case genl.PortAttrMAC:
				p.MAC = net.HardwareAddr(slices.Clone(ad.Bytes()))
			case genl.PortAttrAdminUp:
				p.AdminUp = ad.Uint8() != 0
			case genl.PortAttrRunning:
				p.Running = ad.Uint8() != 0
			case genl.PortAttrDetached:
				p.Detached = ad.Uint8() != 0
			case genl.PortAttrResetPending:
				p.ResetPending = ad.Uint8() != 0
			case genl.PortAttrPersistent:
				p.Persistent = ad.Uint8() != 0
			case genl.PortAttrMTU:
				p.MTU = ad.Uint32()
			case genl.PortAttrMinMTU:
				p.MinMTU = ad.Uint32()
			case genl.PortAttrMaxMTU:
				p.MaxMTU = ad.Uint32()
			case genl.PortAttrPageSize:
				p.PageSize = ad.Uint32()
			case genl.PortAttrQueues:
				p.Queues = ad.Uint32()
			case genl.PortAttrMaxQueues:
				p.MaxQueues = ad.Uint32()
			case genl.PortAttrRxRing:
				p.RxRing = ad.Uint32()
			case genl.PortAttrTxRing:
				p.TxRing = ad.Uint32()
			case genl.PortAttrPrivFlags:
				p.PrivFlags = ad.Uint32()
			case genl.PortAttrPrivFlagNames:
				ad.Nested(func(n *netlink.AttributeDecoder) error {
					for n.Next() {
						p.PrivFlagNames = append(p.PrivFlagNames, n.String())
					}
					return nil
				})
			case genl.PortAttrXDP:
				p.XDP = ad.String()
			case genl.PortAttrLayout:
				ad.Nested(decodeLayout(&p.Layout))
			case genl.PortAttrPagesPinned:
				p.PagesPinned = ad.Uint64()
			case genl.PortAttrBytesPinned:
				p.BytesPinned = ad.Uint64()
			case genl.PortAttrBuffersInFlight:
				p.BuffersInFlight = ad.Uint64()
			case genl.PortAttrMemoryInUse:
				p.MemoryInUse = ad.Uint64()
			case genl.PortAttrMemoryPeak:
				p.MemoryPeak = ad.Uint64()
			case genl.PortAttrMemoryBudget:
				p.MemoryBudget = ad.Uint64()
			case genl.PortAttrFaults:
				ad.Nested(func(n *netlink.AttributeDecoder) error {
					for n.Next() {
						var f genl.Fault
						n.Nested(func(fa *netlink.AttributeDecoder) error {
							for fa.Next() {
								switch fa.Type() {
								case genl.FaultAttrPoint:
									f.Point = fa.String()
								case genl.FaultAttrMode:
									f.Mode = fa.String()
								case genl.FaultAttrCount:
									f.Count = fa.Uint32()
								case genl.FaultAttrErrno:
									f.Errno = fa.Uint32()
								}
							}
							return nil
						})
						p.Faults = append(p.Faults, f)
					}
					return nil
				})
			case genl.PortAttrNetNSDev:
				p.Device.NetNS.Dev = ad.Uint64()
			case genl.PortAttrNetNSIno:
				p.Device.NetNS.Ino = ad.Uint64()
			}
		}
		return nil
	}
}

func decodeLayout(l *genl.RxBufLayout) func(*netlink.AttributeDecoder) error {
	return func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			switch ad.Type() {
			case genl.LayoutAttrRule:
				l.Rule = ad.String()
			case genl.LayoutAttrPageSize:
				l.PageSize = ad.Uint32()
			case genl.LayoutAttrMTU:
				l.MTU = ad.Uint32()
			case genl.LayoutAttrXDP:
				l.XDP = ad.Uint8() != 0
			case genl.LayoutAttrFullPageRx:
				l.FullPageRx = ad.Uint8() != 0
			case genl.LayoutAttrDataSize:
				l.DataSize = ad.Uint32()
			case genl.LayoutAttrAllocSize:
				l.AllocSize = ad.Uint32()
			case genl.LayoutAttrHeadroom:
				l.Headroom = ad.Uint32()
			case genl.LayoutAttrBufSize:
				l.BufSize = ad.Uint32()
			case genl.LayoutAttrFragCount:
				l.FragCount = ad.Uint32()
			case genl.LayoutAttrOrder:
				l.Order = ad.Uint32()
			case genl.LayoutAttrPoolSize:
				l.PoolSize = ad.Uint32()
			case genl.LayoutAttrSingle:
				l.Single = ad.Uint8() != 0
			case genl.LayoutAttrReason:
				l.Reason = ad.String()
			case genl.LayoutAttrRingSize:
				l.RingSize = ad.Uint32()
			case genl.LayoutAttrQueues:
				l.Queues = ad.Uint32()
			case genl.LayoutAttrPagesPerQueue:
				l.PagesPerQueue = ad.Uint32()
			case genl.LayoutAttrBytesPerQueue:
				l.BytesPerQueue = ad.Uint64()
			case genl.LayoutAttrBytesTotal:
				l.BytesTotal = ad.Uint64()
			}
		}
		return nil
	}
}
