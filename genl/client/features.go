package client

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// Features are a device's netdev features (FEATURES_GET) by name: those the
// driver can change (HW), asked for (Wanted), in effect (Active) and never
// changeable (NoChange).
type Features struct {
	Interface                    Interface
	HW, Wanted, Active, NoChange []string
}

// FeaturesChange is a FEATURES_SET reply: the wanted features that did not
// take effect as asked (Wanted: name → the value asked) and the active
// features that changed (Active: name → the new value), as ethtool -K
// prints them.
type FeaturesChange struct {
	Interface      Interface
	Wanted, Active map[string]bool
}

// Features returns ifi's features (ethtool -k).
func (c *Client) Features(ctx context.Context, ifi Interface) (*Features, error) {
	m, err := c.getOne(ctx, unix.ETHTOOL_MSG_FEATURES_GET, unix.ETHTOOL_A_FEATURES_HEADER, ifi)
	if err != nil {
		return nil, err
	}
	return DecodeFeatures(m.Data)
}

// setBitNames returns the names of the set bits of an ethtool bitset attribute (none for a
// compact bitset, whose bits have no names). Errors: a malformed bitset (EINVAL), with the names
// decoded before it.
func setBitNames(data []byte) ([]string, error) {
	bs, err := ethtool.DecodeBitset(data)
	var names []string
	for _, bit := range bs.List(nil) {
		if bit.On {
			names = append(names, bit.Name)
		}
	}
	return names, err
}

// DecodeFeatures decodes a FEATURES_GET_REPLY or FEATURES_NTF payload; a
// compact bitset's bits have no names.
func DecodeFeatures(b []byte) (*Features, error) {
	f := &Features{}
	err := eachAttr(b, func(a nlattr.Attr) (err error) {
		var dst *[]string
		switch a.Type() {
		case unix.ETHTOOL_A_FEATURES_HEADER:
			f.Interface, err = decodeHeaderAttr(a)
			return err
		case unix.ETHTOOL_A_FEATURES_HW:
			dst = &f.HW
		case unix.ETHTOOL_A_FEATURES_WANTED:
			dst = &f.Wanted
		case unix.ETHTOOL_A_FEATURES_ACTIVE:
			dst = &f.Active
		case unix.ETHTOOL_A_FEATURES_NOCHANGE:
			dst = &f.NoChange
		default:
			return nil
		}
		*dst, err = setBitNames(a.Data)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// SetFeatures asks for the features in want (name → on) on ifi (ethtool
// -K) and returns what the device did otherwise than asked. Errors: the
// server's errno and extack (EINVAL for a never-changeable feature or an
// unknown name).
func (c *Client) SetFeatures(ctx context.Context, ifi Interface, want map[string]bool) (*FeaturesChange, error) {
	ae := netlink.NewAttributeEncoder()
	if err := putHeader(ae, unix.ETHTOOL_A_FEATURES_HEADER, ifi, 0); err != nil {
		return nil, err
	}
	var set wire.FeaturesSet
	for _, name := range slices.Sorted(maps.Keys(want)) {
		set.Wanted = append(set.Wanted, wire.Bit{Name: name, On: want[name]})
	}
	putAttrs(ae, wire.FeaturesSetTable, &set)
	msgs, err := c.ethtoolExec(ctx, unix.ETHTOOL_MSG_FEATURES_SET, netlink.Request, ae) // the reply takes the place of the ACK
	if err != nil {
		return nil, err
	}
	m, err := one(msgs, "features-set")
	if err != nil {
		return nil, err
	}
	fc := &FeaturesChange{Wanted: map[string]bool{}, Active: map[string]bool{}}
	err = eachAttr(m.Data, func(a nlattr.Attr) (err error) {
		dst := fc.Wanted
		switch a.Type() {
		case unix.ETHTOOL_A_FEATURES_HEADER:
			fc.Interface, err = decodeHeaderAttr(a)
			return err
		case unix.ETHTOOL_A_FEATURES_WANTED:
		case unix.ETHTOOL_A_FEATURES_ACTIVE:
			dst = fc.Active
		default:
			return nil
		}
		bs, err := ethtool.DecodeBitset(a.Data)
		for _, bit := range bs.List(nil) {
			dst[bit.Name] = bit.On
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: features-set reply: %w", err)
	}
	return fc, nil
}
