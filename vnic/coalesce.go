package vnic

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// Coalesce is a port's coalescing configuration, the fields of struct ethtool_coalesce and
// kernel_ethtool_coalesce that mana_get_coalesce reports.
type Coalesce struct {
	RxUsecs, RxMaxFrames   uint32
	TxUsecs, TxMaxFrames   uint32
	AdaptiveRx, AdaptiveTx bool
	// RxCQEFrames is how many packets one RX CQE may carry (1 = no CQE coalescing, 4 or 8).
	RxCQEFrames uint32
	// RxCQENsecs is the CQE coalescing timeout the firmware reports; the driver never sets it.
	RxCQENsecs uint32
}

// Limits of mana_set_coalesce.
const (
	MaxCoalesceUsecs  = 1023
	MaxCoalesceFrames = 255
	// DefaultRxCQENsecs is what mana_get_coalesce reports when the firmware reports 0.
	DefaultRxCQENsecs = 2048
)

// DefaultCoalesce returns the coalescing of a freshly probed port: no CQE coalescing, no
// interrupt moderation.
func DefaultCoalesce() Coalesce {
	return Coalesce{RxCQEFrames: 1, RxCQENsecs: DefaultRxCQENsecs}
}

// CheckCoalesce validates c as mana_set_coalesce does. Errors: EINVAL with the driver's extack
// text for an rx-cqe-frames other than 1 or 4 (or 8 with the CQECoalesce8 capability), usecs
// above MaxCoalesceUsecs or frames above MaxCoalesceFrames.
func (p *Port) CheckCoalesce(c Coalesce) error { return CheckCoalesce(c, p.cfg.CQECoalesce8) }

// CheckCoalesce is Port.CheckCoalesce for a port whose Config.CQECoalesce8 is cqe8, so that a
// configuration can be checked before the port exists, with the same rule and texts.
func CheckCoalesce(c Coalesce, cqe8 bool) error {
	switch c.RxCQEFrames {
	case 1, 4:
	case 8:
		if cqe8 {
			break
		}
		fallthrough
	default:
		if cqe8 {
			return nlerr.New(unix.EINVAL, "rx-frames must be 1 or 4 or 8, got %d", c.RxCQEFrames)
		}
		return nlerr.New(unix.EINVAL, "rx-frames must be 1 or 4, got %d", c.RxCQEFrames)
	}
	for _, u := range []struct {
		name string
		v    uint32
	}{{"rx-usecs", c.RxUsecs}, {"tx-usecs", c.TxUsecs}} {
		if u.v > MaxCoalesceUsecs {
			return nlerr.New(unix.EINVAL, "%s must be at most %d, got %d", u.name, MaxCoalesceUsecs, u.v)
		}
	}
	for _, f := range []struct {
		name string
		v    uint32
	}{{"rx-frames", c.RxMaxFrames}, {"tx-frames", c.TxMaxFrames}} {
		if f.v > MaxCoalesceFrames {
			return nlerr.New(unix.EINVAL, "%s must be at most %d, got %d", f.name, MaxCoalesceFrames, f.v)
		}
	}
	return nil
}

// SetCoalesce changes the port's coalescing (mana_set_coalesce). The firmware-reported
// RxCQENsecs is not the driver's to set and is kept. A running port applies the change at once
// (mana_config_rss, no detach); a port that is down stores it for its next attach. Errors: those
// of CheckCoalesce; nothing is changed then. Caller holds the configuration lock.
func (p *Port) SetCoalesce(c Coalesce) error {
	p.assertLocked()
	if err := p.CheckCoalesce(c); err != nil {
		return err
	}
	c.RxCQENsecs = p.set.Coalesce.RxCQENsecs
	p.set.Coalesce = c
	if p.running {
		p.coalApplied = c
	}
	return nil
}

// AppliedCoalesce returns the coalescing the running queues use: the settings' value once the
// port has attached with it, an older one while a change waits for the next attach. Caller
// holds the configuration lock.
func (p *Port) AppliedCoalesce() Coalesce {
	p.assertLocked()
	return p.coalApplied
}
