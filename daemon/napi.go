package daemon

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
)

var _ genl.NetdevNAPISetter = (*backend)(nil)

// netdevNAPI is NAPI n of the port of ifindex ifi as napi-get shows it (netdev_nl_napi_fill_one):
// its queue index's settings, which outlive the NAPI.
func netdevNAPI(ifi uint32, n vnic.NAPI) wire.NetdevNAPI {
	w := wire.NetdevNAPI{ID: n.ID, Ifindex: ifi, DeferHardIRQs: n.Config.DeferHardIRQs,
		GROFlushTimeout: uint64(n.Config.GROFlushTimeout), IRQSuspendTimeout: uint64(n.Config.IRQSuspendTimeout)}
	if n.Config.Threaded {
		w.Threaded = wire.NetdevNAPIThreadedEnabled
	}
	return w
}

// napiQueue returns the queue index of the NAPI with id on vp: ENOENT when vp has none (the
// queue stopped, or the port went down, since the server looked it up).
func napiQueue(vp *vnic.Port, id uint32) (int, error) {
	for _, n := range vp.NAPIs() {
		if n.ID == id {
			return n.Queue, nil
		}
	}
	return 0, unix.ENOENT
}

// applyNAPISet returns c with the settings s carries.
func applyNAPISet(c vnic.NAPIConfig, s genl.NAPISet) vnic.NAPIConfig {
	if s.Threaded != nil {
		c.Threaded = *s.Threaded
	}
	if s.DeferHardIRQs != nil {
		c.DeferHardIRQs = *s.DeferHardIRQs
	}
	if s.IRQSuspendTimeout != nil {
		c.IRQSuspendTimeout = *s.IRQSuspendTimeout
	}
	if s.GROFlushTimeout != nil {
		c.GROFlushTimeout = *s.GROFlushTimeout
	}
	return c
}

// SetNAPI is netdev_nl_napi_set_config for the NAPI with id on dev: the settings go to the
// NAPI's queue index (napi->config), so they outlive it, and are saved. The change is refused
// before it is applied when the state file cannot be written (reserveSave), and undone when
// the write fails afterwards, as every SET. Errors: ENOENT when dev has no such NAPI any more,
// ENODEV when dev is gone, EINVAL for a value out of range (vnic.NAPIConfig.Check), the state
// file's errno with its extack.
func (b *backend) SetNAPI(ctx context.Context, c genl.Caller, dev genl.Device, id uint32, s genl.NAPISet) error {
	return b.withPort(dev, func(p *port) (err error) {
		q, err := napiQueue(p.vp, id)
		if err != nil {
			return err
		}
		old := p.vp.NAPIConfig(q)
		next := applyNAPISet(old, s)
		if next == old {
			return nil
		}
		if err := next.Check(); err != nil {
			return err
		}
		d := b.d()
		done, err := d.reserveSave()
		if err != nil {
			d.log.Warn("napi-set", "port", p.spec.Name, "queue", q, "napi_id", id, "uid", c.UID, "pid", c.PID,
				"result", "refused", "err", err)
			return err
		}
		defer done(&err)
		if err := p.vp.SetNAPIConfig(q, next); err != nil {
			return err
		}
		d.log.Info("napi-set", "port", p.spec.Name, "queue", q, "napi_id", id, "uid", c.UID, "pid", c.PID,
			"defer_hard_irqs", next.DeferHardIRQs, "gro_flush_timeout", next.GROFlushTimeout,
			"irq_suspend_timeout", next.IRQSuspendTimeout, "threaded", next.Threaded)
		d.recordSettings(p)
		if cause := d.saveErr; cause != nil {
			d.saveErr = nil
			outcome := "the change was undone"
			if rerr := p.vp.SetNAPIConfig(q, old); rerr != nil {
				outcome = fmt.Sprintf("the change was applied but not saved, and undoing it failed (%v); "+
					"manad retries saving it, and it is lost if manad stops before a retry succeeds", rerr)
			}
			d.log.Warn("napi-set undone: its state could not be saved", "port", p.spec.Name, "queue", q, "outcome", outcome)
			d.noteSettings(p)
			return d.saveError(cause, outcome)
		}
		return nil
	})
}
