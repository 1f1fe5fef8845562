package vnic

import (
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// Limits and defaults of a port's settings (mana.h, mana_en.c).
const (
	MinMTU     = rxbuf.MinMTU // netdev min_mtu
	DefaultMTU = 1500         // ETH_DATA_LEN

	DefaultQueues = 16 // MANA_DEF_NUM_QUEUES

	MinRxRing     = 128  // MIN_RX_BUFFERS_PER_QUEUE
	MaxRxRing     = 8192 // MAX_RX_BUFFERS_PER_QUEUE
	DefaultRxRing = 1024 // DEF_RX_BUFFERS_PER_QUEUE
	MinTxRing     = 128
	MaxTxRing     = 16384
	DefaultTxRing = 256
)

// Settings are the values a user reconfigures; what the daemon persists. The daemon's port spec
// embeds them as the settings a port starts with. Each field's rule is Check's, in check below.
type Settings struct {
	MTU       int
	Queues    int // combined channels
	RxRing    int // rx_queue_size, a power of two
	TxRing    int // tx_queue_size, a power of two
	PrivFlags uint32
	XDP       XDPProgram // nil when no program is attached
	Coalesce  Coalesce   // interrupt and RX CQE coalescing (ethtool -C)
}

// DefaultSettings returns the settings of a freshly probed port.
func DefaultSettings() Settings {
	return Settings{MTU: DefaultMTU, Queues: DefaultQueues, RxRing: DefaultRxRing, TxRing: DefaultTxRing,
		Coalesce: DefaultCoalesce()}
}

// The fields of Settings that Check and the Set methods refuse values of.
const (
	FieldMTU       Field = "MTU"
	FieldQueues    Field = "Queues"
	FieldRxRing    Field = "RxRing"
	FieldTxRing    Field = "TxRing"
	FieldPrivFlags Field = "PrivFlags"
	FieldXDP       Field = "XDP"
)

// check validates the settings of a port configured as c, in the order the driver and the
// ethtool core check them (rings, channels, private flags, MTU); bad holds the fields of c
// already refused, which are then no bound (Check).
func (s *Settings) check(c *Config, bad map[Field]bool) []*FieldError {
	errs := checkRings(s.RxRing, s.TxRing)
	if e := checkChannels(s.Queues, &c.Hardware, bad[FieldMaxQueues] || bad[FieldMSIX]); e != nil {
		errs = append(errs, e)
	}
	if err := privflag.Check(s.PrivFlags); err != nil {
		errs = append(errs, &FieldError{Field: FieldPrivFlags, Max: -1, Err: err})
	}
	if e := c.checkMTU(s.MTU, s.XDP != nil, bad[FieldMaxMTU], bad[FieldPageSize]); e != nil {
		errs = append(errs, e)
	}
	return errs
}

// maxMTU is ndev->max_mtu: the adapter's limit, lowered to MANA_XDP_MTU_MAX while a program is
// attached (mana_xdp_set).
func (c *Config) maxMTU(xdp bool) int {
	if xdp {
		return min(c.MaxMTU, rxbuf.XDPMTUMax(c.PageSize))
	}
	return c.MaxMTU
}

// checkMTU is dev_validate_mtu against min_mtu and the current max_mtu; the maximum is not
// checked when MaxMTU is refused, nor the XDP one when PageSize is.
func (c *Config) checkMTU(mtu int, xdp, badMaxMTU, badPageSize bool) *FieldError {
	if mtu < MinMTU {
		return outOfRange(FieldMTU, mtu, MinMTU, c.maxMTU(xdp && !badPageSize), FieldMaxMTU, "mtu less than device minimum")
	}
	switch {
	case badMaxMTU:
	case mtu > c.MaxMTU:
		return outOfRange(FieldMTU, mtu, MinMTU, c.MaxMTU, FieldMaxMTU, "mtu greater than device maximum")
	case xdp && !badPageSize && mtu > c.maxMTU(true):
		return outOfRange(FieldMTU, mtu, MinMTU, c.maxMTU(true), FieldXDP,
			"mtu greater than device maximum (%d while an XDP program is attached)", c.maxMTU(true))
	}
	return nil
}

// checkRings validates ring sizes as mana_set_ringparam and the ethtool core do, in their order
// (both minima, then the maxima): the first is what ETHTOOL_MSG_RINGS_SET reports.
func checkRings(rx, tx int) []*FieldError {
	var errs []*FieldError
	if rx < MinRxRing {
		errs = append(errs, outOfRange(FieldRxRing, rx, MinRxRing, MaxRxRing, "", "rx:%d less than the min:%d", rx, MinRxRing))
	}
	if tx < MinTxRing {
		errs = append(errs, outOfRange(FieldTxRing, tx, MinTxRing, MaxTxRing, "", "tx:%d less than the min:%d", tx, MinTxRing))
	}
	if rx > MaxRxRing {
		errs = append(errs, outOfRange(FieldRxRing, rx, MinRxRing, MaxRxRing, "", "requested ring size exceeds maximum"))
	}
	if tx > MaxTxRing {
		errs = append(errs, outOfRange(FieldTxRing, tx, MinTxRing, MaxTxRing, "", "requested ring size exceeds maximum"))
	}
	return errs
}

// checkChannels validates a combined channel count against h's maximum as the ethtool core does;
// the maximum is not checked when it is refused (badMax). The error's MaxOf is MSIXVectors when
// the vectors lower the maximum (Hardware.limitQueues), else MaxQueues.
func checkChannels(n int, h *Hardware, badMax bool) *FieldError {
	lim := *h
	lim.limitQueues()
	maxQueues, maxOf := lim.MaxQueues, FieldMaxQueues
	if maxQueues < h.MaxQueues {
		maxOf = FieldMSIX
	}
	switch {
	case n < 1:
		return outOfRange(FieldQueues, n, 1, maxQueues, maxOf,
			"requested channel counts would result in no RX or TX channel being configured")
	case !badMax && n > maxQueues:
		return outOfRange(FieldQueues, n, 1, maxQueues, maxOf, "requested channel count exceeds maximum")
	}
	return nil
}
