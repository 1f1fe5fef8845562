package client

import (
	"context"
	"encoding/binary"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// StdStats is a STATS_GET reply: a device's standard statistics groups (IEEE 802.3 PHY, MAC and
// MAC control, RMON, PHY), as `ethtool -S DEV --all-groups` shows them. A device whose driver
// implements none still lists every requested group, without counters.
type StdStats struct {
	Interface Interface
	Src       uint32 // enum ethtool_mac_stats_src
	Groups    []wire.StatsGroup
}

// StdStats runs STATS_GET on ifi for the groups named (ETH_SS_STATS_STD names: "eth-phy",
// "eth-mac", "eth-ctrl", "rmon", …), or for every group the kernel knows when names is nil, as
// ethtool's --all-groups asks: a compact bitset with all ETH_SS_STATS_STD bits set (their
// number from STRSET_GET). Errors: the server's (ENODEV, EINVAL "no stats requested", an
// unknown group name's EINVAL with its extack), or a malformed reply.
func (c *Client) StdStats(ctx context.Context, ifi Interface, names []string) (*StdStats, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, wire.StatsHeader, ifi, 0); err != nil {
		return nil, err
	}
	if names == nil {
		std, err := c.StringSet(ctx, Interface{}, ethtool.SSStatsStd)
		if err != nil {
			return nil, err
		}
		value := make([]byte, 4*ethtool.Words(len(std)))
		for i := range std {
			w := binary.NativeEndian.Uint32(value[4*(i/32):])
			binary.NativeEndian.PutUint32(value[4*(i/32):], w|1<<(i%32))
		}
		ae.Nested(wire.StatsGroups, func(bs *netlink.AttributeEncoder) error {
			bs.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
			bs.Uint32(unix.ETHTOOL_A_BITSET_SIZE, uint32(len(std)))
			bs.Bytes(unix.ETHTOOL_A_BITSET_VALUE, value)
			return nil
		})
	} else {
		ae.Nested(wire.StatsGroups, func(bs *netlink.AttributeEncoder) error {
			bs.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
			bs.Nested(unix.ETHTOOL_A_BITSET_BITS, func(bits *netlink.AttributeEncoder) error {
				for _, n := range names {
					bits.Nested(unix.ETHTOOL_A_BITSET_BITS_BIT, func(bit *netlink.AttributeEncoder) error {
						bit.String(unix.ETHTOOL_A_BITSET_BIT_NAME, n)
						return nil
					})
				}
				return nil
			})
			return nil
		})
	}
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_STATS_GET, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, "STATS_GET")
	if err != nil {
		return nil, err
	}
	return DecodeStdStats(m.Data)
}

// DecodeStdStats decodes a STATS_GET_REPLY payload.
func DecodeStdStats(b []byte) (*StdStats, error) {
	st := &StdStats{}
	err := eachAttr(b, func(a nlattr.Attr) (err error) {
		switch a.Type() {
		case wire.StatsHeader:
			st.Interface, err = decodeHeaderAttr(a)
		case wire.StatsSrc:
			st.Src = a.U32()
		case wire.StatsGrp:
			var g wire.StatsGroup
			if g, err = wire.DecodeStatsGroup(a.Data); err == nil {
				st.Groups = append(st.Groups, g)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}
