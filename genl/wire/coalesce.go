package wire

import "golang.org/x/sys/unix"

// COALESCE attributes newer than golang.org/x/sys names (uapi ethtool_netlink_generated.h).
const (
	CoalesceTxAggrMaxBytes  = 0x1a
	CoalesceTxAggrMaxFrames = 0x1b
	CoalesceTxAggrTimeUsecs = 0x1c
	CoalesceRxProfile       = 0x1d
	CoalesceTxProfile       = 0x1e
	CoalesceRxCQEFrames     = 0x1f
	CoalesceRxCQENsecs      = 0x20
	CoalesceMax             = CoalesceRxCQENsecs
)

// Coalesce are the coalescing parameters of a MANA port: the fields of struct
// ethtool_coalesce and kernel_ethtool_coalesce in mana's supported_coalesce_params.
type Coalesce struct {
	RxUsecs, RxMaxFrames   uint32
	TxUsecs, TxMaxFrames   uint32
	AdaptiveRx, AdaptiveTx bool
	RxCQEFrames            uint32
	RxCQENsecs             uint32
}

// CoalesceSupported are the attributes of mana's supported_coalesce_params, in attribute
// order: coalesce_fill_reply always writes these, and ethnl_set_coalesce_validate refuses
// any other parameter.
var CoalesceSupported = []uint16{
	unix.ETHTOOL_A_COALESCE_RX_USECS, unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES,
	unix.ETHTOOL_A_COALESCE_TX_USECS, unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES,
	unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX,
	CoalesceRxCQEFrames, CoalesceRxCQENsecs,
}

// CoalesceSet is a COALESCE_SET request of mana's supported parameters after the header: nil
// fields are not sent and left alone.
type CoalesceSet struct {
	RxUsecs, RxMaxFrames   *uint32
	TxUsecs, TxMaxFrames   *uint32
	AdaptiveRx, AdaptiveTx *bool
	RxCQEFrames            *uint32
	RxCQENsecs             *uint32
}

// CoalesceSetTable is COALESCE_SET after the header for mana's supported_coalesce_params, as
// the server reads it (ethnl_set_coalesce; the other parameters were refused before).
var CoalesceSetTable = NewTable(
	OptU32(unix.ETHTOOL_A_COALESCE_RX_USECS, func(c *CoalesceSet) **uint32 { return &c.RxUsecs }),
	OptU32(unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES, func(c *CoalesceSet) **uint32 { return &c.RxMaxFrames }),
	OptU32(unix.ETHTOOL_A_COALESCE_TX_USECS, func(c *CoalesceSet) **uint32 { return &c.TxUsecs }),
	OptU32(unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES, func(c *CoalesceSet) **uint32 { return &c.TxMaxFrames }),
	OptBool(unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, func(c *CoalesceSet) **bool { return &c.AdaptiveRx }),
	OptBool(unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX, func(c *CoalesceSet) **bool { return &c.AdaptiveTx }),
	OptU32(CoalesceRxCQEFrames, func(c *CoalesceSet) **uint32 { return &c.RxCQEFrames }),
	OptU32(CoalesceRxCQENsecs, func(c *CoalesceSet) **uint32 { return &c.RxCQENsecs }),
)

// CoalesceParams is a COALESCE_SET request of any scalar parameter of the kernel's
// coalesce_set_policy after the header, by attribute type (ETHTOOL_A_COALESCE_RX_USECS to
// CoalesceMax): a u32 in U32, a u8 flag (CoalesceFlag) in Bool; nil is not sent. Unlike
// CoalesceSet it also carries the parameters mana lacks, so that a client can send what
// ethtool -C sends and get the server's refusal.
type CoalesceParams struct {
	U32  [CoalesceMax + 1]*uint32
	Bool [CoalesceMax + 1]*bool
}

// CoalesceFlag reports whether COALESCE_SET's parameter t is a u8 flag (the adaptive and CQE
// mode switches) rather than a u32.
func CoalesceFlag(t uint16) bool {
	switch t {
	case unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX,
		unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_TX, unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_RX:
		return true
	}
	return false
}

// CoalesceParamsTable writes a CoalesceParams in attribute order: every parameter of
// coalesce_set_policy but the nested RX and TX profiles, each with the policy's type. The
// server reads the parameters mana supports with CoalesceSetTable, whose rows are these.
var CoalesceParamsTable = func() *Table[CoalesceParams] {
	var fields []Field[CoalesceParams]
	for a := uint16(unix.ETHTOOL_A_COALESCE_RX_USECS); a <= CoalesceMax; a++ {
		switch {
		case a == CoalesceRxProfile || a == CoalesceTxProfile:
		case CoalesceFlag(a):
			fields = append(fields, OptBool(a, func(p *CoalesceParams) **bool { return &p.Bool[a] }))
		default:
			fields = append(fields, OptU32(a, func(p *CoalesceParams) **uint32 { return &p.U32[a] }))
		}
	}
	return NewTable(fields...)
}()

// CoalesceTable is COALESCE_GET_REPLY and COALESCE_NTF after the header, as
// coalesce_fill_reply writes them for mana: the supported parameters, zero or not.
var CoalesceTable = NewTable(
	U32(unix.ETHTOOL_A_COALESCE_RX_USECS, func(c *Coalesce) *uint32 { return &c.RxUsecs }),
	U32(unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES, func(c *Coalesce) *uint32 { return &c.RxMaxFrames }),
	U32(unix.ETHTOOL_A_COALESCE_TX_USECS, func(c *Coalesce) *uint32 { return &c.TxUsecs }),
	U32(unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES, func(c *Coalesce) *uint32 { return &c.TxMaxFrames }),
	Bool(unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, func(c *Coalesce) *bool { return &c.AdaptiveRx }),
	Bool(unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX, func(c *Coalesce) *bool { return &c.AdaptiveTx }),
	U32(CoalesceRxCQEFrames, func(c *Coalesce) *uint32 { return &c.RxCQEFrames }),
	U32(CoalesceRxCQENsecs, func(c *Coalesce) *uint32 { return &c.RxCQENsecs }),
)
