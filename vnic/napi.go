package vnic

import (
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// NAPIConfig is one NAPI's settings, as the netdev family's napi-set writes them and napi-get
// reports them (struct napi_config of 6.18). The kernel keeps them per queue index in the
// netdev, not in the NAPI (netif_napi_add_config): a channel change that destroys queue 3's NAPI
// and creates it again finds them where they were, and so does a Port here. The zero value is
// the kernel's default for a device nobody configured: no deferral, no timeouts.
//
// manad's data path reads them to decide how long a queue's reader keeps polling after it found
// work before it parks (package daemon/datapath, Endpoint); what each field means there is
// documented with it.
type NAPIConfig struct {
	// DeferHardIRQs is napi_defer_hard_irqs: 0..math.MaxInt32 (an s32 on the wire). With
	// GROFlushTimeout also set, the queue's reader polls instead of parking (a poller of the
	// segment's datapath.Pollers reads its TAP and drains its RX input) until DeferHardIRQs ×
	// GROFlushTimeout has passed since the last poll that found work, as the kernel re-polls
	// that many times, a gro_flush_timeout apart, before it re-arms the IRQ
	// (napi_complete_done); 0 turns polling off.
	DeferHardIRQs uint32
	// GROFlushTimeout is gro_flush_timeout, ≥ 0: see DeferHardIRQs; 0 turns polling off.
	GROFlushTimeout time.Duration
	// IRQSuspendTimeout is irq_suspend_timeout, ≥ 0: while the other two are set, the polling
	// window is this long instead when it is longer (as the kernel suspends the IRQ for it while
	// an application busy-polls).
	IRQSuspendTimeout time.Duration
	// Threaded is napi-set's threaded (NETDEV_NAPI_THREADED_ENABLED), which napi-get reports
	// back. A manad queue always has a reader of its own (a goroutine), as a threaded NAPI has
	// its kthread, so the data path does not read it; it is kept and saved as the kernel keeps
	// napi_config.threaded.
	Threaded bool
}

// Check validates c. Errors: EINVAL with a message naming the field and its range.
func (c NAPIConfig) Check() error {
	switch {
	case c.DeferHardIRQs > math.MaxInt32:
		return nlerr.New(unix.EINVAL, "defer-hard-irqs %d out of range 0..%d", c.DeferHardIRQs, math.MaxInt32)
	case c.GROFlushTimeout < 0:
		return nlerr.New(unix.EINVAL, "gro-flush-timeout %d out of range: must not be negative", c.GROFlushTimeout)
	case c.IRQSuspendTimeout < 0:
		return nlerr.New(unix.EINVAL, "irq-suspend-timeout %d out of range: must not be negative", c.IRQSuspendTimeout)
	}
	return nil
}

// napiConfigs is a port's NAPIConfig per queue index, read lock-free by the data path.
type napiConfigs []atomic.Pointer[NAPIConfig]

// NAPIConfig returns queue q's NAPI settings; the zero value for a q beyond the port's maximum
// queue count. Safe for concurrent use, without the configuration lock: the data path calls it
// on its hot path (one atomic load).
func (p *Port) NAPIConfig(q int) NAPIConfig {
	if q < 0 || q >= len(p.napi) {
		return NAPIConfig{}
	}
	if c := p.napi[q].Load(); c != nil {
		return *c
	}
	return NAPIConfig{}
}

// SetNAPIConfig sets queue q's NAPI settings, whether or not the queue runs now (as napi-set's
// config outlives the NAPI). Errors: EINVAL with a message for a q outside the port's maximum
// queue count or a value out of range (NAPIConfig.Check); nothing changes then. Safe for
// concurrent use; the daemon calls it under its configuration lock, so that what it saves is
// what the port has.
func (p *Port) SetNAPIConfig(q int, c NAPIConfig) error {
	if q < 0 || q >= len(p.napi) {
		return nlerr.New(unix.EINVAL, "queue %d out of range 0..%d", q, len(p.napi)-1)
	}
	if err := c.Check(); err != nil {
		return err
	}
	p.napi[q].Store(&c)
	return nil
}

// NAPIConfigs returns every queue index's NAPI settings, running or not (the port's maximum
// queue count of them), as the state file keeps them. Safe for concurrent use.
func (p *Port) NAPIConfigs() []NAPIConfig {
	out := make([]NAPIConfig, len(p.napi))
	for q := range out {
		out[q] = p.NAPIConfig(q)
	}
	return out
}

// SetNAPIConfigAll sets every queue index's NAPI settings to c, as the kernel's per-device
// sysfs knobs (napi_defer_hard_irqs, gro_flush_timeout: netdev_set_defer_hard_irqs,
// netdev_set_gro_flush_timeout) set every NAPI's and every napi_config's. Errors: as
// SetNAPIConfig's for a value out of range; nothing changes then.
func (p *Port) SetNAPIConfigAll(c NAPIConfig) error {
	if err := c.Check(); err != nil {
		return err
	}
	for q := range p.napi {
		p.napi[q].Store(&c)
	}
	return nil
}
