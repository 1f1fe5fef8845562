package client

import (
	"context"

	"github.com/mdlayher/netlink"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The manad family's wire segment methods (genl/wire/segment.go). On a kernel client they fail
// with an error wrapping EOPNOTSUPP; manad's errors come back as *Error with its errno (ENOENT
// for an unknown segment or uplink, EEXIST, EBUSY, EPERM for a non-admin change, EINVAL).

// Segments returns every wire segment manad knows (SEGMENT_GET dump), by name: those of its
// configuration and those created at runtime, and the ones ports use without a definition.
func (c *Client) Segments(ctx context.Context) ([]wire.SegmentInfo, error) {
	msgs, err := c.manadExec(ctx, "Segments", wire.CmdSegmentGet, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	out := make([]wire.SegmentInfo, 0, len(msgs))
	for _, m := range msgs {
		s, err := DecodeSegment(m.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	return out, nil
}

// Segment returns one segment (SEGMENT_GET).
func (c *Client) Segment(ctx context.Context, name string) (*wire.SegmentInfo, error) {
	return c.segmentDo(ctx, "Segment", wire.CmdSegmentGet, segmentName(name), nil)
}

// CreateSegment defines a segment (SEGMENT_NEW, admin) and returns it. Zero fields of s are not
// sent and take the defaults; AgeingMs is sent when AgeingSet (0 then means never age).
func (c *Client) CreateSegment(ctx context.Context, s wire.SegmentSpec) (*wire.SegmentInfo, error) {
	return c.segmentDo(ctx, "CreateSegment", wire.CmdSegmentNew, func(ae *netlink.AttributeEncoder) {
		putNest(ae, wire.AttrSegment, wire.SegmentSpecTable, &s)
	}, nil)
}

// DeleteSegment deletes a segment and its uplinks (SEGMENT_DEL, admin); manad refuses with EBUSY
// while ports are on it.
func (c *Client) DeleteSegment(ctx context.Context, name string) error {
	return c.segmentAction(ctx, "DeleteSegment", wire.CmdSegmentDel, segmentName(name))
}

// AddUplink plugs segment seg into the kernel netdev u (UPLINK_ADD, admin) and returns the
// segment. The device need not exist yet: the uplink attaches when it appears.
func (c *Client) AddUplink(ctx context.Context, seg string, u wire.UplinkSpec) (*wire.SegmentInfo, error) {
	return c.segmentDo(ctx, "AddUplink", wire.CmdUplinkAdd, segmentName(seg), &u)
}

// DeleteUplink unplugs segment seg from u (UPLINK_DEL, admin).
func (c *Client) DeleteUplink(ctx context.Context, seg string, u wire.UplinkSpec) error {
	return c.segmentAction(ctx, "DeleteUplink", wire.CmdUplinkDel, func(ae *netlink.AttributeEncoder) {
		segmentName(seg)(ae)
		putNest(ae, wire.AttrUplink, wire.UplinkSpecTable, &u)
	})
}

// segmentName writes the AttrSegment that names a segment.
func segmentName(name string) func(*netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		putNest(ae, wire.AttrSegment, wire.SegmentSpecTable, &wire.SegmentSpec{Name: name})
	}
}

// segmentDo sends a request answered with one segment.
func (c *Client) segmentDo(ctx context.Context, op string, cmd uint8, attrs func(*netlink.AttributeEncoder), u *wire.UplinkSpec) (*wire.SegmentInfo, error) {
	ae := netlink.NewAttributeEncoder()
	attrs(ae)
	if u != nil {
		putNest(ae, wire.AttrUplink, wire.UplinkSpecTable, u)
	}
	msgs, err := c.manadExec(ctx, op, cmd, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, op)
	if err != nil {
		return nil, err
	}
	return DecodeSegment(m.Data)
}

// segmentAction sends a request answered with an ACK.
func (c *Client) segmentAction(ctx context.Context, op string, cmd uint8, attrs func(*netlink.AttributeEncoder)) error {
	ae := netlink.NewAttributeEncoder()
	attrs(ae)
	_, err := c.manadExec(ctx, op, cmd, netlink.Request|netlink.Acknowledge, ae)
	return err
}

// DecodeSegment decodes a SEGMENT_GET, SEGMENT_NEW or UPLINK_ADD reply or a SEGMENT_*_NTF
// payload.
func DecodeSegment(b []byte) (*wire.SegmentInfo, error) {
	s := &wire.SegmentInfo{}
	err := eachAttr(b, func(a nlattr.Attr) error {
		if a.Type() == wire.AttrSegment {
			return wire.SegmentTable.Decode(a.Data, s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Kinds of the segment notifications (manad SEGMENT_{NEW,DEL,CHANGE}_NTF), whose Notification
// carries Segment; values apart from the others', as CoalesceChanged's.
const (
	SegmentAdded NotificationKind = 300 + iota
	SegmentRemoved
	SegmentChanged
)
