package genl

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// LINKINFO messages, as net/ethtool/linkinfo.c.

// headerOnly is a GET policy whose only attribute is the header (type 1).
func headerOnly() *nlattr.Set {
	return nlattr.NewSet(hdrAttr, map[uint16]nlattr.Policy{
		hdrAttr: {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
	})
}

var (
	linkInfoGetPolicy = headerOnly()
	// linkInfoSetPolicy is ethnl_linkinfo_set_policy (TP_MDIX has no entry:
	// strict validation answers "Unsupported attribute").
	linkInfoSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_LINKINFO_TP_MDIX_CTRL, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_LINKINFO_HEADER:       {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
		unix.ETHTOOL_A_LINKINFO_PORT:         {Kind: nlattr.U8},
		unix.ETHTOOL_A_LINKINFO_PHYADDR:      {Kind: nlattr.U8},
		unix.ETHTOOL_A_LINKINFO_TP_MDIX_CTRL: {Kind: nlattr.U8},
	})
)

// LinkInfoGet is LINKINFO_GET (ethnl_linkinfo_request_ops).
func (ethtoolMsgs) LinkInfoGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_LINKINFO_GET, "linkinfo-get", linkInfoGetPolicy,
		tableGet(unix.ETHTOOL_MSG_LINKINFO_GET_REPLY, "LinkSettings", linkSettingsOf, wire.LinkInfoTable))
}

// LinkInfoSet is LINKINFO_SET (ethnl_set_linkinfo).
func (ethtoolMsgs) LinkInfoSet() op {
	return ethSetOp(unix.ETHTOOL_MSG_LINKINFO_SET, "linkinfo-set", linkInfoSetPolicy, "", noLinkSettingsSet, nil)
}

// linkSettingsOf is b's LinkSettings, or for a backend without it what
// linkinfo_prepare_data and linkmodes_prepare_data answer for a driver
// without get_link_ksettings.
func linkSettingsOf(b Backend) getFunc[LinkSettings] {
	if b.LinkSettings != nil {
		return b.LinkSettings
	}
	return func(context.Context, Caller, Device) (LinkSettings, error) {
		return LinkSettings{}, nlattr.Errorf(unix.EOPNOTSUPP, "failed to retrieve link settings")
	}
}

// noLinkSettingsSet mirrors ethnl_set_linkinfo_validate and
// ethnl_set_linkmodes_validate for a driver without set_link_ksettings
// (mana's): EOPNOTSUPP, without a message.
func noLinkSettingsSet(*request, Device) error { return unix.EOPNOTSUPP }
