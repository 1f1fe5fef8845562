package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// CHANNELS messages, as net/ethtool/channels.c.

// ChannelsGet is CHANNELS_GET (ethnl_channels_request_ops).
func (ethtoolMsgs) ChannelsGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_CHANNELS_GET, "channels-get", ethtool.Policy().ChannelsGet,
		tableGet(unix.ETHTOOL_MSG_CHANNELS_GET_REPLY, "Channels", func(b Backend) getFunc[Channels] { return b.Channels }, wire.ChannelsTable))
}

// ChannelsSet is CHANNELS_SET (ethnl_set_channels).
func (ethtoolMsgs) ChannelsSet() op {
	return ethSetOp(unix.ETHTOOL_MSG_CHANNELS_SET, "channels-set", ethtool.Policy().ChannelsSet, "SetChannels", channelsValidate, channelsSet)
}

// channelsValidate mirrors ethnl_set_channels_validate: EOPNOTSUPP without
// get_channels or set_channels.
func channelsValidate(r *request, _ Device) error {
	if b := r.s.cfg.Backend; b.Channels == nil || b.SetChannels == nil {
		return unix.EOPNOTSUPP
	}
	return nil
}

// channelsSet mirrors ethnl_set_channels (current form, with attribute
// types in err_attr) up to the driver call (manad has no
// RSS indirection table or AF_XDP zero-copy queues to check).
func channelsSet(r *request, d Device) error {
	s := r.s
	req, err := decodeRequest(r, wire.ChannelsSetTable)
	if err != nil {
		return err
	}
	return s.cfg.Backend.SetChannels(r.ctx, r.c.caller, d, Update[Channels]{
		Apply:   func(cur Channels) (Channels, bool, error) { return applyChannels(r, req, cur) },
		Changed: func(ch Channels) { s.NotifyChannels(d, ch) },
	})
}

// applyChannels is ethnl_set_channels' core on the decoded request req; r's attributes are
// the offenders its errors point at.
func applyChannels(r *request, req wire.ChannelsSet, cur Channels) (Channels, bool, error) {
	ch := cur
	var mod, modCombined bool
	update(&ch.Rx, req.Rx, &mod)
	update(&ch.Tx, req.Tx, &mod)
	update(&ch.Other, req.Other, &mod)
	update(&ch.Combined, req.Combined, &modCombined)
	if !mod && !modCombined {
		return cur, false, nil
	}
	// Unlike rings.c, channels.c picks the offender by attribute type, so
	// the error stands even when that attribute is not in the request (then
	// without an offset).
	var bad uint16
	switch {
	case ch.Rx > ch.RxMax:
		bad = unix.ETHTOOL_A_CHANNELS_RX_COUNT
	case ch.Tx > ch.TxMax:
		bad = unix.ETHTOOL_A_CHANNELS_TX_COUNT
	case ch.Other > ch.OtherMax:
		bad = unix.ETHTOOL_A_CHANNELS_OTHER_COUNT
	case ch.Combined > ch.CombinedMax:
		bad = unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT
	}
	if bad != 0 {
		return cur, false, nlattr.AttrError(unix.EINVAL, r.attr(bad), "requested channel count exceeds maximum")
	}
	switch {
	case ch.Combined == 0 && ch.Rx == 0:
		bad = unix.ETHTOOL_A_CHANNELS_RX_COUNT
	case ch.Combined == 0 && ch.Tx == 0:
		bad = unix.ETHTOOL_A_CHANNELS_TX_COUNT
	}
	if bad != 0 {
		if modCombined {
			bad = unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT
		}
		return cur, false, nlattr.AttrError(unix.EINVAL, r.attr(bad),
			"requested channel counts would result in no RX or TX channel being configured")
	}
	return ch, true, nil
}
