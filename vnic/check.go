package vnic

import (
	"math/bits"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
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

// FieldRSSKey is Config.RSSKey, which Check and New refuse values of besides Hardware's and
// Settings' fields.
const FieldRSSKey Field = "RSSKey"

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
	return append(errs, s.check(&c, bad)...)
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

// RoundRing is roundup_pow_of_two, as mana_set_ringparam rounds a ring size: New and SetRings
// use the rounded size, and a configuration says what the port will really use.
func RoundRing(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}
