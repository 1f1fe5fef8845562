package client

import (
	"context"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// putNest writes v as nest typ of ae, encoded by its wire table.
func putNest[T any](ae *netlink.AttributeEncoder, typ uint16, t *wire.Table[T], v *T) {
	var b nlattr.Builder
	t.Put(&b, v)
	ae.Do(netlink.Nested|typ, func() ([]byte, error) { return b.B, nil })
}

// putAttrs appends the attributes t writes for v at ae's level (a request's top level).
func putAttrs[T any](ae *netlink.AttributeEncoder, t *wire.Table[T], v *T) {
	var b nlattr.Builder
	t.Put(&b, v)
	for it := nlattr.NewIter(b.B, 0, len(b.B)); it.Next(); {
		a := it.Attr()
		ae.Do(a.Raw, func() ([]byte, error) { return a.Data, nil })
	}
}

// eachAttr calls f for each top-level attribute of a message payload. Bytes
// after the last attribute are an error wrapping EINVAL.
func eachAttr(b []byte, f func(a nlattr.Attr) error) error {
	it := nlattr.NewIter(b, 0, len(b))
	for it.Next() {
		if err := f(it.Attr()); err != nil {
			return err
		}
	}
	if it.Rem() > 0 {
		return fmt.Errorf("client: %d bytes of trailing data: %w", it.Rem(), unix.EINVAL)
	}
	return nil
}

// decodeHeaderAttr reads a reply header nest.
func decodeHeaderAttr(a nlattr.Attr) (Interface, error) {
	var h wire.Header
	err := wire.HeaderTable.Decode(a.Data, &h)
	return Interface{Index: int(h.Index), Name: h.Name}, err
}

// decodeDevReply decodes an ethtool-style reply: the device header nest hdr
// into ifi and the attributes t describes into v.
func decodeDevReply[T any](b []byte, hdr uint16, ifi *Interface, t *wire.Table[T], v *T) error {
	if err := t.Decode(b, v); err != nil {
		return err
	}
	return eachAttr(b, func(a nlattr.Attr) (err error) {
		if a.Type() == hdr {
			*ifi, err = decodeHeaderAttr(a)
		}
		return err
	})
}

// DeviceReply is one device's answer to an ethtool GET: the device its reply header names and
// the value the message's wire table reads from the rest.
type DeviceReply[T any] struct {
	Interface Interface
	Value     T
}

// Get asks ifi's answer to the ethtool GET cmd, whose request and reply header is attribute hdr
// and whose reply t describes (RINGS_GET: unix.ETHTOOL_MSG_RINGS_GET,
// unix.ETHTOOL_A_RINGS_HEADER, wire.RingsTable), from manad or the kernel. A GET described by a
// wire table needs no client code of its own. Errors are the server's (*Error), or EINVAL for a
// reply the table cannot read.
func Get[T any](ctx context.Context, c *Client, cmd uint8, hdr uint16, ifi Interface, t *wire.Table[T]) (*DeviceReply[T], error) {
	m, err := c.getOne(ctx, cmd, hdr, ifi)
	if err != nil {
		return nil, err
	}
	r := &DeviceReply[T]{}
	if err := decodeDevReply(m.Data, hdr, &r.Interface, t, &r.Value); err != nil {
		return nil, err
	}
	return r, nil
}

// GetAll is Get as a dump: the answer of every device that has one.
func GetAll[T any](ctx context.Context, c *Client, cmd uint8, hdr uint16, t *wire.Table[T]) ([]*DeviceReply[T], error) {
	msgs, err := c.ethtoolExec(ctx, cmd, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs, func(b []byte) (*DeviceReply[T], error) {
		r := &DeviceReply[T]{}
		return r, decodeDevReply(b, hdr, &r.Interface, t, &r.Value)
	})
}
