package client

import (
	"context"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// LinkSettings are a device's link settings: LINKINFO and LINKMODES together
// (what `ethtool DEV` shows), plus the link modes it supports and advertises,
// by name.
type LinkSettings struct {
	Interface Interface
	wire.LinkSettings
	Supported, Advertised, Peer []string
}

// LinkState is a device's link state (LINKSTATE_GET).
type LinkState struct {
	Interface Interface
	wire.LinkState
}

// TSInfo is a device's time stamping capabilities (TSINFO_GET): the names
// of the SOF_TIMESTAMPING_* bits, HWTSTAMP_TX_* types and HWTSTAMP_FILTER_*
// filters, and its PHC index (-1: none).
type TSInfo struct {
	Interface                        Interface
	Timestamping, TxTypes, RxFilters []string
	PHCIndex                         int32
}

// LinkSettings returns ifi's link settings (LINKINFO_GET then LINKMODES_GET).
func (c *Client) LinkSettings(ctx context.Context, ifi Interface) (*LinkSettings, error) {
	m, err := c.getOne(ctx, unix.ETHTOOL_MSG_LINKINFO_GET, unix.ETHTOOL_A_LINKINFO_HEADER, ifi)
	if err != nil {
		return nil, err
	}
	ls := &LinkSettings{}
	if err := decodeDevReply(m.Data, unix.ETHTOOL_A_LINKINFO_HEADER, &ls.Interface, wire.LinkInfoTable, &ls.LinkSettings); err != nil {
		return nil, err
	}
	if m, err = c.getOne(ctx, unix.ETHTOOL_MSG_LINKMODES_GET, unix.ETHTOOL_A_LINKMODES_HEADER, ifi); err != nil {
		return nil, err
	}
	if err := DecodeLinkModes(m.Data, ls); err != nil {
		return nil, err
	}
	return ls, nil
}

// DecodeLinkModes decodes a LINKMODES_GET_REPLY payload into ls. Verbose
// bitsets name their bits; a compact one gives no names.
func DecodeLinkModes(b []byte, ls *LinkSettings) error {
	for _, t := range []*wire.Table[wire.LinkSettings]{wire.LinkModesHead, wire.LinkModesTail} {
		if err := decodeDevReply(b, unix.ETHTOOL_A_LINKMODES_HEADER, &ls.Interface, t, &ls.LinkSettings); err != nil {
			return err
		}
	}
	return eachAttr(b, func(a nlattr.Attr) error {
		switch a.Type() {
		case unix.ETHTOOL_A_LINKMODES_OURS:
			bs, err := ethtool.DecodeBitset(a.Data)
			for _, bit := range bs.List(nil) {
				ls.Supported = append(ls.Supported, bit.Name)
				if bit.On {
					ls.Advertised = append(ls.Advertised, bit.Name)
				}
			}
			return err
		case unix.ETHTOOL_A_LINKMODES_PEER:
			bs, err := ethtool.DecodeBitset(a.Data)
			for _, bit := range bs.List(nil) {
				ls.Peer = append(ls.Peer, bit.Name)
			}
			return err
		}
		return nil
	})
}

// AllLinkModes returns the LINKMODES part of the link settings of every
// device that has them (a LINKMODES_GET dump).
func (c *Client) AllLinkModes(ctx context.Context) ([]*LinkSettings, error) {
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_LINKMODES_GET, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs, func(b []byte) (*LinkSettings, error) {
		ls := &LinkSettings{}
		return ls, DecodeLinkModes(b, ls)
	})
}

// LinkState returns ifi's link state (LINKSTATE_GET).
func (c *Client) LinkState(ctx context.Context, ifi Interface) (*LinkState, error) {
	r, err := Get(ctx, c, unix.ETHTOOL_MSG_LINKSTATE_GET, unix.ETHTOOL_A_LINKSTATE_HEADER, ifi, wire.LinkStateTable)
	if err != nil {
		return nil, err
	}
	return &LinkState{Interface: r.Interface, LinkState: r.Value}, nil
}

// TSInfo returns ifi's time stamping capabilities (TSINFO_GET, verbose
// bitsets so that every bit comes with its name).
func (c *Client) TSInfo(ctx context.Context, ifi Interface) (*TSInfo, error) {
	m, err := c.getOne(ctx, unix.ETHTOOL_MSG_TSINFO_GET, unix.ETHTOOL_A_TSINFO_HEADER, ifi)
	if err != nil {
		return nil, err
	}
	return DecodeTSInfo(m.Data)
}

// DecodeTSInfo decodes a TSINFO_GET_REPLY payload.
func DecodeTSInfo(b []byte) (*TSInfo, error) {
	ts := &TSInfo{PHCIndex: -1}
	err := eachAttr(b, func(a nlattr.Attr) (err error) {
		var dst *[]string
		switch a.Type() {
		case unix.ETHTOOL_A_TSINFO_HEADER:
			ts.Interface, err = decodeHeaderAttr(a)
			return err
		case unix.ETHTOOL_A_TSINFO_PHC_INDEX:
			if len(a.Data) < 4 {
				return fmt.Errorf("client: PHC index of %d bytes: %w", len(a.Data), unix.EINVAL)
			}
			ts.PHCIndex = int32(a.U32())
			return nil
		case unix.ETHTOOL_A_TSINFO_TIMESTAMPING:
			dst = &ts.Timestamping
		case unix.ETHTOOL_A_TSINFO_TX_TYPES:
			dst = &ts.TxTypes
		case unix.ETHTOOL_A_TSINFO_RX_FILTERS:
			dst = &ts.RxFilters
		default:
			return nil
		}
		*dst, err = setBitNames(a.Data)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ts, nil
}
