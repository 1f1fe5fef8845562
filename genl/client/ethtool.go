package client

import (
	"context"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
)

// Flag is one private flag.
type Flag struct {
	Name  string
	Index int
	On    bool
}

// PrivateFlags are a device's private flags in driver order.
type PrivateFlags struct {
	Interface Interface
	Flags     []Flag
}

// Rings are a device's ring parameters.
type Rings struct {
	Interface Interface
	wire.Rings
}

// Channels are a device's channel counts.
type Channels struct {
	Interface Interface
	wire.Channels
}

// Bits returns the flags that are on as a bitmap, bit i for the flag of
// Index i (flags past the 32nd are left out).
func (p *PrivateFlags) Bits() uint32 {
	var bits uint32
	for _, f := range p.Flags {
		if f.On && f.Index >= 0 && f.Index < 32 {
			bits |= 1 << f.Index
		}
	}
	return bits
}

// StringSet is one string set (ETH_SS_*).
type StringSet struct {
	ID    uint32
	Count int
	// Strings is nil when only counts were asked for.
	Strings []string
}

// StringSets is a STRSET_GET reply: the sets of one device, or kernel-wide
// sets when Interface is zero.
type StringSets struct {
	Interface Interface
	Sets      []StringSet
}

// RingsUpdate selects the ring parameters to change; nil fields are left
// alone (the attribute is not sent). It is RINGS_SET's wire struct.
type RingsUpdate = wire.RingsSet

// ChannelsUpdate selects the channel counts to change; nil fields are left
// alone. It is CHANNELS_SET's wire struct.
type ChannelsUpdate = wire.ChannelsSet

// PrivateFlags returns ifi's private flags (PRIVFLAGS_GET, verbose).
func (c *Client) PrivateFlags(ctx context.Context, ifi Interface) (*PrivateFlags, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, unix.ETHTOOL_A_PRIVFLAGS_HEADER, ifi, 0); err != nil {
		return nil, err
	}
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_PRIVFLAGS_GET, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, "PRIVFLAGS_GET")
	if err != nil {
		return nil, err
	}
	return DecodePrivateFlags(m.Data, nil)
}

// AllPrivateFlags returns the private flags of every device that has them
// (PRIVFLAGS_GET dump).
func (c *Client) AllPrivateFlags(ctx context.Context) ([]*PrivateFlags, error) {
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_PRIVFLAGS_GET, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs, func(b []byte) (*PrivateFlags, error) { return DecodePrivateFlags(b, nil) })
}

// SetPrivateFlags changes the flags listed in p (by Name, or by Index when
// Name is empty) to their On value, as ethtool --set-priv-flags does: a
// verbose bitset without a mask, so unlisted flags keep their value.
func (c *Client) SetPrivateFlags(ctx context.Context, p PrivateFlags) error {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, unix.ETHTOOL_A_PRIVFLAGS_HEADER, p.Interface, 0); err != nil {
		return err
	}
	set := wire.PrivFlagsSet{Flags: make([]wire.Bit, len(p.Flags))}
	for i, f := range p.Flags {
		set.Flags[i] = wire.Bit{Name: f.Name, Index: uint32(f.Index), On: f.On}
	}
	putAttrs(ae, wire.PrivFlagsSetTable, &set)
	_, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_PRIVFLAGS_SET, netlink.Request|netlink.Acknowledge, ae)
	return err
}

// DecodePrivateFlags decodes a PRIVFLAGS_GET_REPLY or PRIVFLAGS_NTF payload
// (attributes after the genl header) in either bitset form. names name the
// bits of a compact bitset, which carries none.
func DecodePrivateFlags(b []byte, names []string) (*PrivateFlags, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	p := &PrivateFlags{}
	var bserr error
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_PRIVFLAGS_HEADER:
			p.Interface = decodeHeader(ad)
		case unix.ETHTOOL_A_PRIVFLAGS_FLAGS:
			var bs ethtool.Bitset
			bs, bserr = ethtool.DecodeBitset(ad.Bytes())
			for _, bit := range bs.List(names) {
				p.Flags = append(p.Flags, Flag{Name: bit.Name, Index: bit.Index, On: bit.On})
			}
		}
	}
	if err := ad.Err(); err != nil {
		return nil, err
	}
	if bserr != nil {
		return nil, bserr
	}
	return p, nil
}

// Rings returns ifi's ring parameters (RINGS_GET).
func (c *Client) Rings(ctx context.Context, ifi Interface) (*Rings, error) {
	r, err := Get(ctx, c, unix.ETHTOOL_MSG_RINGS_GET, unix.ETHTOOL_A_RINGS_HEADER, ifi, wire.RingsTable)
	if err != nil {
		return nil, err
	}
	return &Rings{Interface: r.Interface, Rings: r.Value}, nil
}

// AllRings returns the ring parameters of every device that has them.
func (c *Client) AllRings(ctx context.Context) ([]*Rings, error) {
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_RINGS_GET, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs, DecodeRings)
}

// SetRings changes the ring parameters set in u (RINGS_SET).
func (c *Client) SetRings(ctx context.Context, ifi Interface, u RingsUpdate) error {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, unix.ETHTOOL_A_RINGS_HEADER, ifi, 0); err != nil {
		return err
	}
	putAttrs(ae, wire.RingsSetTable, &u)
	_, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_RINGS_SET, netlink.Request|netlink.Acknowledge, ae)
	return err
}

// DecodeRings decodes a RINGS_GET_REPLY or RINGS_NTF payload; absent
// attributes are zero.
func DecodeRings(b []byte) (*Rings, error) {
	r := &Rings{}
	if err := decodeDevReply(b, unix.ETHTOOL_A_RINGS_HEADER, &r.Interface, wire.RingsTable, &r.Rings); err != nil {
		return nil, err
	}
	return r, nil
}

// Channels returns ifi's channel counts (CHANNELS_GET).
func (c *Client) Channels(ctx context.Context, ifi Interface) (*Channels, error) {
	r, err := Get(ctx, c, unix.ETHTOOL_MSG_CHANNELS_GET, unix.ETHTOOL_A_CHANNELS_HEADER, ifi, wire.ChannelsTable)
	if err != nil {
		return nil, err
	}
	return &Channels{Interface: r.Interface, Channels: r.Value}, nil
}

// AllChannels returns the channel counts of every device that has them.
func (c *Client) AllChannels(ctx context.Context) ([]*Channels, error) {
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_CHANNELS_GET, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs, DecodeChannels)
}

// SetChannels changes the channel counts set in u (CHANNELS_SET).
func (c *Client) SetChannels(ctx context.Context, ifi Interface, u ChannelsUpdate) error {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, unix.ETHTOOL_A_CHANNELS_HEADER, ifi, 0); err != nil {
		return err
	}
	putAttrs(ae, wire.ChannelsSetTable, &u)
	_, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_CHANNELS_SET, netlink.Request|netlink.Acknowledge, ae)
	return err
}

// DecodeChannels decodes a CHANNELS_GET_REPLY or CHANNELS_NTF payload.
func DecodeChannels(b []byte) (*Channels, error) {
	ch := &Channels{}
	if err := decodeDevReply(b, unix.ETHTOOL_A_CHANNELS_HEADER, &ch.Interface, wire.ChannelsTable, &ch.Channels); err != nil {
		return nil, err
	}
	return ch, nil
}

// StringSet returns the strings of set id (ETH_SS_*) of ifi, or the
// kernel-wide set when ifi is zero. A set the device does not have is empty.
func (c *Client) StringSet(ctx context.Context, ifi Interface, id uint32) ([]string, error) {
	var p *Interface
	if ifi != (Interface{}) {
		p = &ifi
	}
	ss, err := c.StringSets(ctx, p, []uint32{id}, false)
	if err != nil {
		return nil, err
	}
	for _, s := range ss.Sets {
		if s.ID == id {
			return s.Strings, nil
		}
	}
	return nil, nil
}

// StringSets runs STRSET_GET: for device ifi (nil: kernel-wide sets only;
// the request then has an empty header nest, as the ethtool CLI sends), the
// sets ids (nil: all sets that apply), counts only or with strings.
func (c *Client) StringSets(ctx context.Context, ifi *Interface, ids []uint32, countsOnly bool) (*StringSets, error) {
	ae := netlink.NewAttributeEncoder()
	if ifi != nil {
		if err := putHeader(ae, unix.ETHTOOL_A_STRSET_HEADER, *ifi, 0); err != nil {
			return nil, err
		}
	} else {
		ae.Nested(unix.ETHTOOL_A_STRSET_HEADER, func(*netlink.AttributeEncoder) error { return nil })
	}
	putStringSetIDs(ae, ids, countsOnly)
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_STRSET_GET, netlink.Request, ae)
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, "STRSET_GET")
	if err != nil {
		return nil, err
	}
	return DecodeStringSets(m.Data)
}

// AllStringSets dumps STRSET_GET over every device.
func (c *Client) AllStringSets(ctx context.Context, ids []uint32, countsOnly bool) ([]*StringSets, error) {
	ae := netlink.NewAttributeEncoder()
	putStringSetIDs(ae, ids, countsOnly)
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_STRSET_GET, netlink.Request|netlink.Dump, ae)
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs, DecodeStringSets)
}

func putStringSetIDs(ae *netlink.AttributeEncoder, ids []uint32, countsOnly bool) {
	if len(ids) == 0 {
		return
	}
	ae.Nested(unix.ETHTOOL_A_STRSET_STRINGSETS, func(sets *netlink.AttributeEncoder) error {
		for _, id := range ids {
			sets.Nested(unix.ETHTOOL_A_STRINGSETS_STRINGSET, func(set *netlink.AttributeEncoder) error {
				set.Uint32(unix.ETHTOOL_A_STRINGSET_ID, id)
				return nil
			})
		}
		return nil
	})
	ae.Flag(unix.ETHTOOL_A_STRSET_COUNTS_ONLY, countsOnly)
}

// DecodeStringSets decodes a STRSET_GET_REPLY payload.
func DecodeStringSets(b []byte) (*StringSets, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	out := &StringSets{}
	var serr error
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_STRSET_HEADER:
			out.Interface = decodeHeader(ad)
		case unix.ETHTOOL_A_STRSET_STRINGSETS:
			var sets []ethtool.StringSet
			sets, serr = ethtool.DecodeStringSets(ad.Bytes())
			for _, s := range sets {
				out.Sets = append(out.Sets, StringSet{ID: s.ID, Count: int(s.Count), Strings: s.Strings})
			}
		}
	}
	if err := ad.Err(); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	return out, nil
}

func (c *Client) getOne(ctx context.Context, cmd uint8, hdr uint16, ifi Interface) (genetlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, hdr, ifi, 0); err != nil {
		return genetlink.Message{}, err
	}
	msgs, err := c.ethtoolExec(ctx, cmd, netlink.Request, ae)
	if err != nil {
		return genetlink.Message{}, err
	}
	return one(msgs, fmt.Sprintf("ethtool command %d", cmd))
}

func decodeAll[T any](msgs []genetlink.Message, dec func([]byte) (*T, error)) ([]*T, error) {
	out := make([]*T, 0, len(msgs))
	for _, m := range msgs {
		v, err := dec(m.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
