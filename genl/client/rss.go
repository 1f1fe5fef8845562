package client

import (
	"context"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
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

// RSSChanged is the kind of an ETHTOOL_MSG_RSS_NTF (a value apart from the others', as
// CoalesceChanged): Notification.RSS holds the device's configuration after the change.
const RSSChanged NotificationKind = 101

// SetRSS changes ifi's RSS context 0 (RSS_SET) as u asks; see wire.RSSSet for what each field
// means. A request that changes nothing succeeds without a notification. Errors, errno-backed
// with the server's or kernel's message: EOPNOTSUPP for a device without RSS, a hash function
// other than Toeplitz or a port that is down; EINVAL for a key of the wrong size or a table that
// does not fit the device or names a queue it does not have; EPERM without admin rights.
func (c *Client) SetRSS(ctx context.Context, ifi Interface, u wire.RSSSet) error {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, wire.RSSHeader, ifi, 0); err != nil {
		return err
	}
	hdr, err := ae.Encode()
	if err != nil {
		return err
	}
	var b nlattr.Builder
	wire.PutRSSSet(&b, &u)
	_, err = c.execute(ctx, c.fams.ethtool.ID, ethtool.Version, wire.MsgRSSSet, netlink.Request|netlink.Acknowledge, append(hdr, b.B...))
	return err
}
