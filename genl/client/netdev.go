package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The netdev-family methods. They work on manad (its ports) and on the
// kernel (DialKernel: every netdev of the caller's namespace that the kernel
// answers for), as both serve the same family.

// netdevExec runs a netdev-family request. The family id is resolved with the first request
// on a connection (one nlctrl request: the family is optional on either side) and kept with the
// connection's other families, so that later requests are one round trip, as ethtool's are.
func (c *Client) netdevExec(ctx context.Context, cmd uint8, flags netlink.HeaderFlags, ae *netlink.AttributeEncoder) ([]genetlink.Message, error) {
	c.mu.Lock()
	id := c.fams.netdev
	c.mu.Unlock()
	if id == 0 {
		var err error
		if id, err = c.resolveNetdev(ctx); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.fams.netdev = id // a reconnection meanwhile finds the same server's same id
		c.mu.Unlock()
	}
	data, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return c.execute(ctx, id, wire.NetdevFamilyVersion, cmd, flags, data)
}

// resolveNetdev asks nlctrl for the netdev family's id.
func (c *Client) resolveNetdev(ctx context.Context) (uint16, error) {
	rq := netlink.NewAttributeEncoder()
	rq.String(unix.CTRL_ATTR_FAMILY_NAME, wire.NetdevFamilyName)
	data, err := rq.Encode()
	if err != nil {
		return 0, err
	}
	msgs, err := c.execute(ctx, unix.GENL_ID_CTRL, 1, unix.CTRL_CMD_GETFAMILY, netlink.Request, data)
	if err != nil {
		return 0, fmt.Errorf("client: resolve the %q family: %w", wire.NetdevFamilyName, err)
	}
	m, err := one(msgs, "CTRL_CMD_GETFAMILY")
	if err != nil {
		return 0, err
	}
	var id uint16
	if err := eachAttr(m.Data, func(a nlattr.Attr) error {
		if a.Type() == unix.CTRL_ATTR_FAMILY_ID && len(a.Data) >= 2 {
			id = binary.NativeEndian.Uint16(a.Data)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if id == 0 {
		return 0, fmt.Errorf("client: no id for the %q family: %w", wire.NetdevFamilyName, unix.EPROTO)
	}
	return id, nil
}

func netdevDump[T any](ctx context.Context, c *Client, cmd uint8, attrs func(*netlink.AttributeEncoder), dec func([]byte, *T) error) ([]T, error) {
	ae := netlink.NewAttributeEncoder()
	if attrs != nil {
		attrs(ae)
	}
	msgs, err := c.netdevExec(ctx, cmd, netlink.Request|netlink.Dump, ae)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(msgs))
	for i, m := range msgs {
		if err := dec(m.Data, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Queues returns the queues of the netdev with ifindex (all of the
// namespace's when 0), queue-get dump.
func (c *Client) Queues(ctx context.Context, ifindex uint32) ([]wire.NetdevQueue, error) {
	return netdevDump(ctx, c, wire.NetdevCmdQueueGet, ifindexAttr(wire.NetdevAQueueIfindex, ifindex), wire.NetdevQueueTable.Decode)
}

// NAPIs returns the NAPI instances of the netdev with ifindex (all when 0), napi-get dump.
func (c *Client) NAPIs(ctx context.Context, ifindex uint32) ([]wire.NetdevNAPI, error) {
	return netdevDump(ctx, c, wire.NetdevCmdNAPIGet, ifindexAttr(wire.NetdevANAPIIfindex, ifindex), wire.NetdevNAPITable.Decode)
}

// NAPISet changes the settings of the NAPI with id (napi-set; Linux 6.13): those set in s, the
// others stay. It needs an admin (EPERM); an id the namespace has no NAPI of is ENOENT; a
// negative timeout is EINVAL, before anything is sent.
func (c *Client) NAPISet(ctx context.Context, id uint32, s wire.NetdevNAPISet) error {
	for _, d := range []*time.Duration{s.GROFlushTimeout, s.IRQSuspendTimeout} {
		if d != nil && *d < 0 {
			return fmt.Errorf("client: napi-set: negative timeout %v: %w", *d, unix.EINVAL)
		}
	}
	ae := netlink.NewAttributeEncoder()
	putAttrs(ae, wire.NetdevNAPISetTable, &wire.NetdevNAPISetRequest{ID: id, NetdevNAPISet: s})
	_, err := c.netdevExec(ctx, wire.NetdevCmdNAPISet, netlink.Request|netlink.Acknowledge, ae)
	return err
}

// NetdevDevs returns the netdev family's devices (dev-get dump).
func (c *Client) NetdevDevs(ctx context.Context) ([]wire.NetdevDev, error) {
	return netdevDump(ctx, c, wire.NetdevCmdDevGet, nil, wire.NetdevDevTable.Decode)
}

// PagePools returns every page pool of the namespace, attached and detached (page-pool-get dump).
func (c *Client) PagePools(ctx context.Context) ([]wire.NetdevPagePool, error) {
	return netdevDump(ctx, c, wire.NetdevCmdPagePoolGet, nil, wire.NetdevPagePoolTable.Decode)
}

// PagePoolStats returns the stats of every page pool (page-pool-stats-get dump).
func (c *Client) PagePoolStats(ctx context.Context) ([]wire.NetdevPagePoolStats, error) {
	return netdevDump(ctx, c, wire.NetdevCmdPagePoolStatsGet, nil, wire.NetdevPagePoolStatsTable.Decode)
}

// QStats returns qstats-get: per device (perQueue false) or per queue, of the
// netdev with ifindex (all when 0). A device that keeps no qstats fails the
// request with EOPNOTSUPP when named, and is skipped in a dump of all.
func (c *Client) QStats(ctx context.Context, ifindex uint32, perQueue bool) ([]wire.NetdevQStats, error) {
	return netdevDump(ctx, c, wire.NetdevCmdQStatsGet, func(ae *netlink.AttributeEncoder) {
		if ifindex != 0 {
			ae.Uint32(wire.NetdevAQStatsIfindex, ifindex)
		}
		if perQueue {
			ae.Uint32(wire.NetdevAQStatsScope, wire.NetdevQStatsScopeQueue)
		}
	}, DecodeQStats)
}

// DecodeQStats decodes a qstats-get message, setting Scoped, HasRX, HasTX and
// Present from the attributes present.
func DecodeQStats(b []byte, v *wire.NetdevQStats) error {
	if err := wire.NetdevQStatsTable.Decode(b, v); err != nil {
		return err
	}
	return eachAttr(b, func(a nlattr.Attr) error {
		if t := a.Type(); t >= wire.NetdevAQStatsRxPackets && t < 64 {
			v.Present |= 1 << t
		}
		switch t := a.Type(); {
		case t == wire.NetdevAQStatsQueueType:
			v.Scoped = true
		case t == wire.NetdevAQStatsRxPackets || t == wire.NetdevAQStatsRxBytes || t >= wire.NetdevAQStatsRxAllocFail && t <= qstatsLastRX:
			v.HasRX = true
		case t == wire.NetdevAQStatsTxPackets || t == wire.NetdevAQStatsTxBytes || t > qstatsLastRX:
			v.HasTX = true
		}
		return nil
	})
}

// qstatsLastRX is NETDEV_A_QSTATS_RX_HW_DROP_RATELIMITS; the TX counters follow it.
const qstatsLastRX = 21

func ifindexAttr(t uint16, ifindex uint32) func(*netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		if ifindex != 0 {
			ae.Uint32(t, ifindex)
		}
	}
}

// The netdev family's notification kinds (values apart from the others').
const (
	NetdevDevAdded   NotificationKind = 200 + iota // NETDEV_CMD_DEV_ADD_NTF
	NetdevDevRemoved                               // NETDEV_CMD_DEV_DEL_NTF
	NetdevDevChanged                               // NETDEV_CMD_DEV_CHANGE_NTF
	PagePoolAdded                                  // NETDEV_CMD_PAGE_POOL_ADD_NTF
	PagePoolChanged                                // NETDEV_CMD_PAGE_POOL_CHANGE_NTF
	PagePoolRemoved                                // NETDEV_CMD_PAGE_POOL_DEL_NTF
)

// decodeNetdevNotification decodes a netdev-family notification; other
// commands are skipped (ok false).
func decodeNetdevNotification(m genetlink.Message) (n Notification, ok bool, err error) {
	switch m.Header.Command {
	case wire.NetdevCmdDevAddNtf, wire.NetdevCmdDevDelNtf, wire.NetdevCmdDevChangeNtf:
		n.Kind = NetdevDevAdded + NotificationKind(m.Header.Command-wire.NetdevCmdDevAddNtf)
		n.NetdevDev = new(wire.NetdevDev)
		err = wire.NetdevDevTable.Decode(m.Data, n.NetdevDev)
		n.Interface.Index = int(n.NetdevDev.Ifindex)
	case wire.NetdevCmdPagePoolAddNtf, wire.NetdevCmdPagePoolDelNtf, wire.NetdevCmdPagePoolChangeNtf:
		n.Kind = map[uint8]NotificationKind{wire.NetdevCmdPagePoolAddNtf: PagePoolAdded,
			wire.NetdevCmdPagePoolDelNtf: PagePoolRemoved, wire.NetdevCmdPagePoolChangeNtf: PagePoolChanged}[m.Header.Command]
		n.PagePool = new(wire.NetdevPagePool)
		err = wire.NetdevPagePoolTable.Decode(m.Data, n.PagePool)
		n.Interface.Index = int(n.PagePool.Ifindex)
	default:
		return n, false, nil
	}
	if err != nil {
		return n, false, fmt.Errorf("client: netdev notification %d: %w", m.Header.Command, err)
	}
	return n, true, nil
}
