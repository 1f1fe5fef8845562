package client

import (
	"context"

	"github.com/mdlayher/netlink"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The manad-family methods. On a kernel client they fail with an error
// wrapping EOPNOTSUPP.

// Ports returns the ports the PORT_GET dump shows the caller: those in its network namespace,
// or, for an admin in manad's own namespace, every port.
func (c *Client) Ports(ctx context.Context) ([]wire.PortInfo, error) {
	msgs, err := c.manadExec(ctx, "Ports", wire.CmdPortGet, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	ports := make([]wire.PortInfo, 0, len(msgs))
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
func (c *Client) Port(ctx context.Context, ifi Interface) (*wire.PortInfo, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, wire.AttrHeader, ifi, 0); err != nil {
		return nil, err
	}
	msgs, err := c.manadExec(ctx, "Port", wire.CmdPortGet, netlink.Request, ae)
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
func (c *Client) CreatePort(ctx context.Context, s wire.PortSpec) (*wire.PortInfo, error) {
	ae := netlink.NewAttributeEncoder()
	putNest(ae, wire.AttrPort, wire.PortSpecTable, &s)
	msgs, err := c.manadExec(ctx, "CreatePort", wire.CmdPortNew, netlink.Request, ae)
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
	return c.devAction(ctx, "DeletePort", wire.CmdPortDel, ifi, nil)
}

// DeletePortNetNS deletes a port and then its named network namespace, when that is empty (no
// link but lo, no other manad port) and manad created it (PORT_DEL with PortAttrNetNSToo,
// admin). A namespace that is kept is not an error: the result's NetNSDeleted is false and
// Notice says why. Errors: the port deletion's.
func (c *Client) DeletePortNetNS(ctx context.Context, ifi Interface) (*wire.PortDel, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, wire.AttrHeader, ifi, 0); err != nil {
		return nil, err
	}
	putNest(ae, wire.AttrPort, wire.PortDelTable, &wire.PortDel{NetNSToo: true})
	msgs, err := c.manadExec(ctx, "DeletePortNetNS", wire.CmdPortDel, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, "PORT_DEL")
	if err != nil {
		return nil, err
	}
	res := &wire.PortDel{}
	err = eachAttr(m.Data, func(a nlattr.Attr) error {
		if a.Type() == wire.AttrPort {
			return wire.PortDelTable.Decode(a.Data, res)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// SetMTU sets a port's MTU (PORT_SET_MTU, admin).
func (c *Client) SetMTU(ctx context.Context, ifi Interface, mtu uint32) error {
	return c.devAction(ctx, "SetMTU", wire.CmdPortSetMTU, ifi, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(wire.AttrMTU, mtu)
	})
}

// xdpChunk keeps each XDP_OBJECT attribute under the 64 KiB attribute limit.
const xdpChunk = 60 << 10

// AttachXDP attaches a built-in or eBPF XDP program (XDP_ATTACH, admin). The
// object travels in XDP_OBJECT chunks; the whole request must fit in one
// datagram (the socket send buffer, about 200 KiB by default, and manad's
// MaxMessage).
func (c *Client) AttachXDP(ctx context.Context, ifi Interface, p wire.XDPProgram) error {
	return c.devAction(ctx, "AttachXDP", wire.CmdXDPAttach, ifi, func(ae *netlink.AttributeEncoder) {
		if p.Builtin != "" || p.Section != "" || p.Name != "" {
			putNest(ae, wire.AttrXDP, wire.XDPTable, &p)
		}
		for obj := p.Object; len(obj) > 0; {
			n := min(len(obj), xdpChunk)
			ae.Bytes(wire.AttrXDPObject, obj[:n])
			obj = obj[n:]
		}
	})
}

// DetachXDP detaches a port's XDP program (XDP_DETACH, admin).
func (c *Client) DetachXDP(ctx context.Context, ifi Interface) error {
	return c.devAction(ctx, "DetachXDP", wire.CmdXDPDetach, ifi, nil)
}

// SetFault sets (or, with Mode "off", clears) fault injection at a
// reconfiguration point of a port (FAULT_SET, admin).
func (c *Client) SetFault(ctx context.Context, ifi Interface, f wire.Fault) error {
	return c.devAction(ctx, "SetFault", wire.CmdFaultSet, ifi, func(ae *netlink.AttributeEncoder) {
		putNest(ae, wire.AttrFault, wire.FaultTable.OmitZero(), &f)
	})
}

func (c *Client) devAction(ctx context.Context, op string, cmd uint8, ifi Interface, attrs func(*netlink.AttributeEncoder)) error {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, wire.AttrHeader, ifi, 0); err != nil {
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
	Stats     []wire.Stat
}

// Stats returns a port's statistics in the driver's order (STATS_GET).
func (c *Client) Stats(ctx context.Context, ifi Interface) ([]wire.Stat, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, wire.AttrHeader, ifi, 0); err != nil {
		return nil, err
	}
	msgs, err := c.manadExec(ctx, "Stats", wire.CmdStatsGet, netlink.Request, ae)
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
	msgs, err := c.manadExec(ctx, "AllStats", wire.CmdStatsGet, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs, DecodeStats)
}

// DecodeStats decodes a STATS_GET reply.
func DecodeStats(b []byte) (*DeviceStats, error) {
	ds := &DeviceStats{}
	err := eachAttr(b, func(a nlattr.Attr) (err error) {
		switch a.Type() {
		case wire.AttrHeader:
			ds.Interface, err = decodeHeaderAttr(a)
		case wire.AttrStat:
			var st wire.Stat
			err = wire.StatTable.Decode(a.Data, &st)
			ds.Stats = append(ds.Stats, st)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// PlanLayout computes RX buffer layouts for hypothetical parameters, one per
// rule (LAYOUT_PLAN), however many rules: a reply longer than one datagram
// arrives multi-part and is joined here.
func (c *Client) PlanLayout(ctx context.Context, r wire.LayoutRequest) ([]wire.RxBufLayout, error) {
	ae := netlink.NewAttributeEncoder()
	putNest(ae, wire.AttrLayoutRequest, wire.LayoutRequestTable, &r)
	msgs, err := c.manadExec(ctx, "PlanLayout", wire.CmdLayoutPlan, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	// A reply too long for one datagram comes multi-part (netlink.Conn joins the parts up
	// to NLMSG_DONE): the layouts are those of every message, in order.
	if len(msgs) == 0 {
		_, err := one(msgs, "LAYOUT_PLAN")
		return nil, err
	}
	var out []wire.RxBufLayout
	for _, m := range msgs {
		err := eachAttr(m.Data, func(a nlattr.Attr) error {
			if a.Type() != wire.AttrLayout {
				return nil
			}
			var l wire.RxBufLayout
			err := wire.LayoutTable.Decode(a.Data, &l)
			out = append(out, l)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecodePort decodes a PORT_GET/PORT_NEW reply or a PORT_*_NTF payload.
func DecodePort(b []byte) (*wire.PortInfo, error) {
	p := &wire.PortInfo{}
	err := eachAttr(b, func(a nlattr.Attr) error {
		if a.Type() == wire.AttrPort {
			return wire.PortTable.Decode(a.Data, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
