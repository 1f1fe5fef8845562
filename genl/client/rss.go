package client

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// RSS is one device's RSS_GET reply: hash function bits, key and indirection table.
type RSS struct {
	Interface Interface
	wire.RSS
}

// RSS returns ifi's RSS configuration, context 0 (RSS_GET). Errors: EOPNOTSUPP from a device
// without RSS (a veth), ENODEV for an unknown device, as errno-backed errors.
func (c *Client) RSS(ctx context.Context, ifi Interface) (*RSS, error) {
	m, err := c.getOne(ctx, unix.ETHTOOL_MSG_RSS_GET, wire.RSSHeader, ifi)
	if err != nil {
		return nil, err
	}
	return DecodeRSS(m.Data)
}

// DecodeRSS decodes an RSS_GET_REPLY payload. Errors: a malformed attribute.
func DecodeRSS(b []byte) (*RSS, error) {
	r := &RSS{}
	err := eachAttr(b, func(a nlattr.Attr) (err error) {
		if a.Type() == wire.RSSHeader {
			r.Interface, err = decodeHeaderAttr(a)
			return err
		}
		return wire.DecodeRSS(a, &r.RSS)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
