package vnic

import (
	"math/bits"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// MaxQueues is the most queues a port can have: the upper bound of Config.MaxQueues. A port's
// queues are its TAP's, and tun allows at most MAX_TAP_QUEUES (drivers/net/tun.c); the RSS
// indirection table keeps queue numbers in a byte. The model owns the limit because every layer
// that checks a port (the configuration, port add, the XDP programs' per-queue state) checks
// it through the model; daemon/tap keeps the kernel's constant for the TAP itself, and its test
// holds the two equal.
const MaxQueues = 256

// Field names a field of Config or Settings that the port model checks, by its Go name.
type Field string

// The fields of Config (besides Hardware's) and Settings that Check and New refuse values of.
const (
	FieldRSSKey    Field = "RSSKey"
	FieldMTU       Field = "MTU"
	FieldQueues    Field = "Queues"
	FieldRxRing    Field = "RxRing"
	FieldTxRing    Field = "TxRing"
	FieldPrivFlags Field = "PrivFlags"
	FieldXDP       Field = "XDP"
)

// FieldError is the port model refusing the value of one field, as the kernel's extack names
// the attribute to blame: Field is the field and Err the errno-backed error (an *nlerr.Error,
// EINVAL, with the driver's message) that New and the Set methods return for it. When the rule
// is a range, Value is the value refused, Min..Max the range and MaxOf names the field whose value Max is (MaxMTU, or XDP while
// a program lowers the MTU's maximum, for MTU; MaxQueues for Queues; "" for a constant): a
// configuration can then say what is wrong in its own words without restating the rule.
// Max < Min when the rule is not a range (a page size, a rule, the private flag bits).
type FieldError struct {
	Field    Field
	Value    int
	Min, Max int
	MaxOf    Field
	Err      error
}

func (e *FieldError) Error() string { return e.Err.Error() }

// Unwrap returns Err, so errors.Is(err, unix.EINVAL) and errors.As(err, &nlerrErr) see it.
func (e *FieldError) Unwrap() error { return e.Err }

// refuse returns a FieldError that is not a range.
func refuse(f Field, format string, args ...any) *FieldError {
	return &FieldError{Field: f, Min: 0, Max: -1, Err: nlerr.New(unix.EINVAL, format, args...)}
}

// outOfRange returns a FieldError for a value outside min..max (max being maxOf's value).
func outOfRange(f Field, v, min, max int, maxOf Field, format string, args ...any) *FieldError {
	return &FieldError{Field: f, Value: v, Min: min, Max: max, MaxOf: maxOf, Err: nlerr.New(unix.EINVAL, format, args...)}
}

// Check validates a port's configuration c and starting settings s as New does, without
// creating the port, so that a configuration is refused with the model's rules before it is
// used. It takes c as New has filled it in: a zero PageSize, MaxMTU or MaxQueues (New's
// defaults) is refused here. The name, lock, host and wire New needs, the coalescing (CheckCoalesce) and the NAPI settings
// (NAPIConfig.Check) are not checked here. It returns every field New would refuse, in Config's
// then Settings' order, each a *FieldError; a field is not checked against a bound that is
// itself refused (MTU against MaxMTU, Queues against MaxQueues, the XDP MTU against PageSize).
// Rings are checked before they are rounded up (RoundRing).
func Check(c Config, s Settings) []*FieldError {
	errs := c.check()
	bad := map[Field]bool{}
	for _, e := range errs {
		bad[e.Field] = true
	}
	errs = append(errs, checkRings(s.RxRing, s.TxRing)...)
	if e := checkChannels(s.Queues, c.MaxQueues, bad[FieldMaxQueues]); e != nil {
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

// check validates the fields of the port's configuration, each on its own: the hardware's, then
// the starting RSS key.
func (c *Config) check() []*FieldError {
	errs := c.Hardware.check()
	if c.RSSKey != nil && len(c.RSSKey) != RSSKeySize {
		errs = append(errs, refuse(FieldRSSKey, "hash key must be %d bytes, got %d", RSSKeySize, len(c.RSSKey)))
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

// checkChannels validates a combined channel count as the ethtool core does; the maximum is not
// checked when MaxQueues is refused.
func checkChannels(n, maxQueues int, badMax bool) *FieldError {
	switch {
	case n < 1:
		return outOfRange(FieldQueues, n, 1, maxQueues, FieldMaxQueues,
			"requested channel counts would result in no RX or TX channel being configured")
	case !badMax && n > maxQueues:
		return outOfRange(FieldQueues, n, 1, maxQueues, FieldMaxQueues, "requested channel count exceeds maximum")
	}
	return nil
}

// RoundRing is roundup_pow_of_two, as mana_set_ringparam rounds a ring size: New and SetRings
// use the rounded size, and a configuration says what the port will really use.
func RoundRing(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}
