package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// RINGS messages, as net/ethtool/rings.c.

// RingsGet is RINGS_GET (ethnl_rings_request_ops).
func (ethtoolMsgs) RingsGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_RINGS_GET, "rings-get", ethtool.Policy().RingsGet,
		tableGet(unix.ETHTOOL_MSG_RINGS_GET_REPLY, "Rings", func(b Backend) getFunc[Rings] { return b.Rings }, wire.RingsTable))
}

// RingsSet is RINGS_SET (ethnl_set_rings).
func (ethtoolMsgs) RingsSet() op {
	return ethSetOp(unix.ETHTOOL_MSG_RINGS_SET, "rings-set", ethtool.Policy().RingsSet, "SetRings", ringsValidate, ringsSet)
}

// ringsValidate mirrors ethnl_set_rings_validate for a driver whose
// supported_ring_params is empty (the MANA driver's): EOPNOTSUPP without
// get_ringparam or set_ringparam, then the parameters it cannot set.
func ringsValidate(r *request, _ Device) error {
	if b := r.s.cfg.Backend; b.Rings == nil || b.SetRings == nil {
		return unix.EOPNOTSUPP
	}
	for _, u := range []struct {
		attr uint16
		msg  string
	}{
		{unix.ETHTOOL_A_RINGS_RX_BUF_LEN, "setting rx buf len not supported"},
		{unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT, "setting TCP data split is not supported"},
		{unix.ETHTOOL_A_RINGS_HDS_THRESH, "setting hds-thresh is not supported"},
		{unix.ETHTOOL_A_RINGS_CQE_SIZE, "setting cqe size not supported"},
		{unix.ETHTOOL_A_RINGS_TX_PUSH, "setting tx push not supported"},
		{unix.ETHTOOL_A_RINGS_RX_PUSH, "setting rx push not supported"},
		{unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN, "setting tx push buf len is not supported"},
	} {
		if a := r.attr(u.attr); a.Present() {
			return nlattr.AttrError(unix.EOPNOTSUPP, a, u.msg)
		}
	}
	return nil
}

// update mirrors ethnl_update_u32 (and _u8, _bool32) on a decoded request: v, when the request carries it, replaces *dst.
func update[T comparable](dst *T, v *T, mod *bool) {
	if v != nil && *v != *dst {
		*dst = *v
		*mod = true
	}
}

// ringsSet mirrors ethnl_set_rings: the request's sizes are applied to the
// current rings under the backend's lock, so a request that sets only rx
// never writes back a tx it read before a concurrent change.
func ringsSet(r *request, d Device) error {
	s := r.s
	req, err := decodeRequest(r, wire.RingsSetTable)
	if err != nil {
		return err
	}
	return s.cfg.Backend.SetRings(r.ctx, r.c.caller, d, Update[Rings]{
		Apply: func(cur Rings) (Rings, bool, error) {
			nr, mod := cur, false
			update(&nr.Rx, req.Rx, &mod)
			update(&nr.RxMini, req.RxMini, &mod)
			update(&nr.RxJumbo, req.RxJumbo, &mod)
			update(&nr.Tx, req.Tx, &mod)
			if !mod {
				return cur, false, nil
			}
			// An offender that is not in the request has no attribute to blame,
			// and then, as in the kernel, no error.
			var bad nlattr.Attr
			switch {
			case nr.Rx > nr.RxMax:
				bad = r.attr(unix.ETHTOOL_A_RINGS_RX)
			case nr.RxMini > nr.RxMiniMax:
				bad = r.attr(unix.ETHTOOL_A_RINGS_RX_MINI)
			case nr.RxJumbo > nr.RxJumboMax:
				bad = r.attr(unix.ETHTOOL_A_RINGS_RX_JUMBO)
			case nr.Tx > nr.TxMax:
				bad = r.attr(unix.ETHTOOL_A_RINGS_TX)
			}
			if bad.Present() {
				return cur, false, nlattr.AttrError(unix.EINVAL, bad, "requested ring size exceeds maximum")
			}
			return nr, true, nil
		},
		Changed: func(rg Rings) { s.NotifyRings(d, rg) },
	})
}
