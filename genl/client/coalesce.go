package client

import (
	"context"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// CoalesceChanged is the kind of an ETHTOOL_MSG_COALESCE_NTF (a value apart from the others'
// sequence, so that kinds added elsewhere do not renumber it).
const CoalesceChanged NotificationKind = 100

// Coalesce are a device's coalescing parameters. Attrs holds every u32 and u8 parameter the
// reply carried, by ETHTOOL_A_COALESCE_* type (a device reports the parameters it supports, and
// any other that is not zero): an absent one is "n/a" in ethtool's output.
type Coalesce struct {
	Interface Interface
	wire.Coalesce
	Attrs map[uint16]uint32
}

// CoalesceUpdate selects the coalescing parameters to change: each ETHTOOL_A_COALESCE_* type in
// U32 is sent as a u32, each in Bool as a u8.
type CoalesceUpdate struct {
	U32  map[uint16]uint32
	Bool map[uint16]bool
}

// Coalesce returns ifi's coalescing parameters (COALESCE_GET).
func (c *Client) Coalesce(ctx context.Context, ifi Interface) (*Coalesce, error) {
	m, err := c.getOne(ctx, unix.ETHTOOL_MSG_COALESCE_GET, unix.ETHTOOL_A_COALESCE_HEADER, ifi)
	if err != nil {
		return nil, err
	}
	return DecodeCoalesce(m.Data)
}

// SetCoalesce changes the parameters set in u (COALESCE_SET), in attribute order.
func (c *Client) SetCoalesce(ctx context.Context, ifi Interface, u CoalesceUpdate) error {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, unix.ETHTOOL_A_COALESCE_HEADER, ifi, 0); err != nil {
		return err
	}
	for t := uint16(unix.ETHTOOL_A_COALESCE_RX_USECS); t <= wire.CoalesceMax; t++ {
		if v, ok := u.U32[t]; ok {
			ae.Uint32(t, v)
		} else if b, ok := u.Bool[t]; ok {
			var x uint8
			if b {
				x = 1
			}
			ae.Uint8(t, x)
		}
	}
	_, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_COALESCE_SET, netlink.Request|netlink.Acknowledge, ae)
	return err
}

// DecodeCoalesce decodes a COALESCE_GET_REPLY or COALESCE_NTF payload.
func DecodeCoalesce(b []byte) (*Coalesce, error) {
	co := &Coalesce{Attrs: map[uint16]uint32{}}
	if err := decodeDevReply(b, unix.ETHTOOL_A_COALESCE_HEADER, &co.Interface, wire.CoalesceTable, &co.Coalesce); err != nil {
		return nil, err
	}
	err := eachAttr(b, func(a nlattr.Attr) error {
		switch {
		case a.Type() == unix.ETHTOOL_A_COALESCE_HEADER || a.IsNested() ||
			a.Type() == wire.CoalesceRxProfile || a.Type() == wire.CoalesceTxProfile:
		case len(a.Data) >= 4:
			co.Attrs[a.Type()] = a.U32()
		case len(a.Data) >= 1:
			co.Attrs[a.Type()] = uint32(a.U8())
		}
		return nil
	})
	return co, err
}
