package client

import (
	"context"
	"fmt"

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

// CoalesceUpdate selects the coalescing parameters to change, by ETHTOOL_A_COALESCE_* type: the
// u32 parameters in U32, the u8 flags (wire.CoalesceFlag: the adaptive and CQE mode switches)
// in Bool. It may name any parameter COALESCE_SET takes, also those the device lacks (the
// server then refuses the request, as the kernel does).
type CoalesceUpdate struct {
	U32  map[uint16]uint32
	Bool map[uint16]bool
}

// params returns u as the request wire.CoalesceParamsTable writes. Errors wrap EINVAL: a type
// that is no parameter of COALESCE_SET, or one given in the map of the other kind.
func (u CoalesceUpdate) params() (wire.CoalesceParams, error) {
	var p wire.CoalesceParams
	kinds := wire.CoalesceParamsTable.Kinds()
	for t, v := range u.U32 {
		if kinds[t] != wire.KindU32 {
			return p, fmt.Errorf("client: coalescing attribute %d is not a u32 parameter of COALESCE_SET: %w", t, unix.EINVAL)
		}
		p.U32[t] = &v
	}
	for t, v := range u.Bool {
		if kinds[t] != wire.KindBool {
			return p, fmt.Errorf("client: coalescing attribute %d is not a flag of COALESCE_SET: %w", t, unix.EINVAL)
		}
		p.Bool[t] = &v
	}
	return p, nil
}

// Coalesce returns ifi's coalescing parameters (COALESCE_GET).
func (c *Client) Coalesce(ctx context.Context, ifi Interface) (*Coalesce, error) {
	m, err := c.getOne(ctx, unix.ETHTOOL_MSG_COALESCE_GET, unix.ETHTOOL_A_COALESCE_HEADER, ifi)
	if err != nil {
		return nil, err
	}
	return DecodeCoalesce(m.Data)
}

// SetCoalesce changes the parameters set in u (COALESCE_SET), written in attribute order by
// wire.CoalesceParamsTable. A parameter u cannot carry (see CoalesceUpdate) is an error
// wrapping EINVAL, and nothing is sent.
func (c *Client) SetCoalesce(ctx context.Context, ifi Interface, u CoalesceUpdate) error {
	p, err := u.params()
	if err != nil {
		return err
	}
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, unix.ETHTOOL_A_COALESCE_HEADER, ifi, 0); err != nil {
		return err
	}
	putAttrs(ae, wire.CoalesceParamsTable, &p)
	_, err = c.ethtoolExec(ctx, unix.ETHTOOL_MSG_COALESCE_SET, netlink.Request|netlink.Acknowledge, ae)
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
