package vnic

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic/faultpoint"
)

// FaultMode says how often an armed fault fires.
type FaultMode uint8

// The fault modes.
const (
	FaultOff    FaultMode = iota // never
	FaultOnce                    // the next time only
	FaultCount                   // the next Count times
	FaultAlways                  // every time until turned off
)

// String returns the mode's name ("off", "once", "count", "always").
func (m FaultMode) String() string {
	switch m {
	case FaultOff:
		return "off"
	case FaultOnce:
		return "once"
	case FaultCount:
		return "count"
	case FaultAlways:
		return "always"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseFaultMode parses a mode name; unknown names give EINVAL.
func ParseFaultMode(s string) (FaultMode, error) {
	for m := FaultOff; m <= FaultAlways; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, nlerr.New(unix.EINVAL, "unknown fault mode %q (want off, once, count or always)", s)
}

// Fault is the injection armed at one point.
type Fault struct {
	Point faultpoint.Point
	Mode  FaultMode
	Count int        // remaining firings for FaultCount
	Errno unix.Errno // what the failure returns; 0 means the point's default
	Fired int        // how many times this point has fired since it was armed
}

// validate checks a fault request.
func (f Fault) validate() error {
	switch {
	case f.Point >= faultpoint.NumPoints:
		return nlerr.New(unix.EINVAL, "unknown fault point %d", f.Point)
	case f.Mode > FaultAlways:
		return nlerr.New(unix.EINVAL, "unknown fault mode %d", f.Mode)
	case f.Mode == FaultCount && f.Count <= 0:
		return nlerr.New(unix.EINVAL, "fault mode count needs a count of at least 1")
	case f.Errno > 4095:
		return nlerr.New(unix.EINVAL, "errno %d out of range", f.Errno)
	}
	return nil
}

// fire consumes one firing of the fault at point and returns the injected error, or nil.
// Caller holds the configuration lock.
func (p *Port) fire(point faultpoint.Point) error {
	f := &p.faults[point]
	switch f.Mode {
	case FaultOff:
		return nil
	case FaultOnce:
		f.Mode = FaultOff
	case FaultCount:
		f.Count--
		if f.Count <= 0 {
			f.Mode, f.Count = FaultOff, 0
		}
	}
	f.Fired++
	errno := f.Errno
	if errno == 0 {
		errno = point.Errno()
	}
	p.log.Warn("fault injected", "point", point.String(), "during", point.Decl().Step, "errno", errno.Error())
	return nlerr.New(errno, "injected %s fault", point)
}

// SetFault arms (or with FaultOff disarms) fault injection at f.Point. Errors: EINVAL for an
// unknown point or mode, or a count mode without a count. Caller holds the configuration lock.
func (p *Port) SetFault(f Fault) error {
	p.assertLocked()
	if err := f.validate(); err != nil {
		return err
	}
	if f.Mode != FaultCount {
		f.Count = 0
	}
	f.Fired = 0
	p.faults[f.Point] = f
	return nil
}

// Faults returns the fault armed at every point, in faultpoint.Points order. Caller holds the
// configuration lock.
func (p *Port) Faults() []Fault {
	p.assertLocked()
	out := make([]Fault, len(p.faults))
	copy(out, p.faults[:])
	for i := range out {
		if out[i].Errno == 0 {
			out[i].Errno = out[i].Point.Errno()
		}
	}
	return out
}
