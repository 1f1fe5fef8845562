package genl

import (
	"errors"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// COALESCE messages, as net/ethtool/coalesce.c.

// Coalesce is a device's coalescing parameters (mana_get_coalesce).
type Coalesce = wire.Coalesce

// irqModerationPolicy and profilePolicy are coalesce_irq_moderation_policy and
// coalesce_profile_policy.
var (
	irqModerationPolicy = nlattr.NewSet(3, map[uint16]nlattr.Policy{
		1: {Kind: nlattr.U32}, 2: {Kind: nlattr.U32}, 3: {Kind: nlattr.U32},
	})
	profilePolicy = nlattr.NewSet(1, map[uint16]nlattr.Policy{
		1: {Kind: nlattr.Nested, Nested: irqModerationPolicy}, // ETHTOOL_A_PROFILE_IRQ_MODERATION
	})
	coalesceGetPolicy = headerOnly()
	// coalesceSetPolicy is coalesce_set_policy: the parameters' types are those of the table the
	// client writes them with; the CQE mode switches are NLA_POLICY_MAX(NLA_U8, 1).
	coalesceSetPolicy = func() *nlattr.Set {
		p := map[uint16]nlattr.Policy{
			unix.ETHTOOL_A_COALESCE_HEADER: {Kind: nlattr.Nested, Nested: ethtool.Policy().Header},
			wire.CoalesceRxProfile:         {Kind: nlattr.Nested, Nested: profilePolicy},
			wire.CoalesceTxProfile:         {Kind: nlattr.Nested, Nested: profilePolicy},
		}
		for a, k := range wire.CoalesceParamsTable.Kinds() {
			switch {
			case a == unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_TX || a == unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_RX:
				p[a] = nlattr.Policy{Kind: nlattr.U8, Check: nlattr.CheckMax, Max: 1}
			case k == wire.KindBool:
				p[a] = nlattr.Policy{Kind: nlattr.U8}
			default:
				p[a] = nlattr.Policy{Kind: nlattr.U32}
			}
		}
		return nlattr.NewSet(wire.CoalesceMax, p)
	}()
)

// CoalesceGet is COALESCE_GET (ethnl_coalesce_request_ops).
func (ethtoolMsgs) CoalesceGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_COALESCE_GET, "coalesce-get", coalesceGetPolicy,
		tableGet(unix.ETHTOOL_MSG_COALESCE_GET_REPLY, "Coalesce", func(b Backend) getFunc[Coalesce] { return b.Coalesce }, wire.CoalesceTable))
}

// CoalesceSet is COALESCE_SET (ethnl_set_coalesce).
func (ethtoolMsgs) CoalesceSet() op {
	return ethSetOp(unix.ETHTOOL_MSG_COALESCE_SET, "coalesce-set", coalesceSetPolicy, "SetCoalesce", coalesceValidate, coalesceSet)
}

// coalesceValidate mirrors ethnl_set_coalesce_validate: EOPNOTSUPP without coalescing ops, then
// EINVAL for the first parameter mana's supported_coalesce_params lacks.
func coalesceValidate(r *request, d Device) error {
	cb := r.s.cfg.Backend
	if cb.Coalesce == nil || cb.SetCoalesce == nil {
		return unix.EOPNOTSUPP
	}
	// A device without coalescing answers the GET with EOPNOTSUPP: refuse before looking at
	// the parameters, as the kernel checks the ops first.
	if _, err := cb.Coalesce(r.ctx, r.c.caller, d); errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	for a := uint16(unix.ETHTOOL_A_COALESCE_RX_USECS); a <= wire.CoalesceMax; a++ {
		if at := r.attr(a); at.Present() && !slices.Contains(wire.CoalesceSupported, a) {
			return nlattr.AttrError(unix.EINVAL, at, "cannot modify an unsupported parameter")
		}
	}
	return nil
}

// coalesceSet mirrors ethnl_set_coalesce: the request's parameters applied to the current ones
// under the backend's lock; the driver's rules are the backend's.
func coalesceSet(r *request, d Device) error {
	s := r.s
	req, err := decodeRequest(r, wire.CoalesceSetTable)
	if err != nil {
		return err
	}
	return s.cfg.Backend.SetCoalesce(r.ctx, r.c.caller, d, Update[Coalesce]{
		Apply: func(cur Coalesce) (Coalesce, bool, error) {
			nc, mod := cur, false
			update(&nc.RxUsecs, req.RxUsecs, &mod)
			update(&nc.RxMaxFrames, req.RxMaxFrames, &mod)
			update(&nc.TxUsecs, req.TxUsecs, &mod)
			update(&nc.TxMaxFrames, req.TxMaxFrames, &mod)
			update(&nc.AdaptiveRx, req.AdaptiveRx, &mod) // ethnl_update_bool32: any non-zero u8 is true
			update(&nc.AdaptiveTx, req.AdaptiveTx, &mod)
			update(&nc.RxCQEFrames, req.RxCQEFrames, &mod)
			update(&nc.RxCQENsecs, req.RxCQENsecs, &mod)
			return nc, mod, nil
		},
		Changed: func(c Coalesce) { s.NotifyCoalesce(d, c) },
	})
}

// NotifyCoalesce sends ETHTOOL_MSG_COALESCE_NTF to the "monitor" subscribers in d's network
// namespace.
func (s *Server) NotifyCoalesce(d Device, c Coalesce) {
	s.notify(ethtoolID, ethtool.Version, unix.ETHTOOL_MSG_COALESCE_NTF, &s.ethtoolSeq, monitorGroup, d.NetNS,
		func(b *nlattr.Builder) {
			putDevHeader(b, hdrAttr, &d)
			wire.CoalesceTable.Put(b, &c)
		})
}
