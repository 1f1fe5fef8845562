package daemon

import (
	"context"
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
)

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
// NAPI's queue index (napi->config), so they outlive it, and are saved. It is a reconfiguration
// like any SET (changeLocked): refused before it is applied when the state file cannot be
// written, undone when the write fails afterwards, logged, and announced as a port change.
// Errors: ENOENT when dev has no such NAPI any more, ENODEV when dev is gone, EINVAL for a
// value out of range (vnic.NAPIConfig.Check), the state file's errno with its extack.
func (b *backend) SetNAPI(ctx context.Context, c genl.Caller, dev genl.Device, id uint32, s genl.NAPISet) error {
	return b.withPort(dev, func(p *port) error {
		q, err := napiQueue(p.vp, id)
		if err != nil {
			return err
		}
		cur := p.vp.NAPIConfig(q)
		next := applyNAPISet(cur, s)
		if next == cur {
			return nil // no change: no log, no save, no notification, as ethnl's SETs
		}
		if err := next.Check(); err != nil {
			return err
		}
		value := map[string]any{"queue": q, "napi_id": id, "defer_hard_irqs": next.DeferHardIRQs,
			"gro_flush_timeout": next.GROFlushTimeout, "irq_suspend_timeout": next.IRQSuspendTimeout,
			"threaded": next.Threaded}
		return b.changeLocked(c, p, "napi", value, func() error { return p.vp.SetNAPIConfig(q, next) })
	})
}

// napiView is a port's NAPI settings of every queue index in comparable form, for portView:
// 21 bytes per queue index (defer-hard-irqs, gro-flush-timeout, irq-suspend-timeout, threaded).
type napiView string

const napiViewEntry = 4 + 8 + 8 + 1

func newNAPIView(cs []vnic.NAPIConfig) napiView {
	b := make([]byte, 0, len(cs)*napiViewEntry)
	for _, c := range cs {
		b = binary.LittleEndian.AppendUint32(b, c.DeferHardIRQs)
		b = binary.LittleEndian.AppendUint64(b, uint64(c.GROFlushTimeout))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.IRQSuspendTimeout))
		var t byte
		if c.Threaded {
			t = 1
		}
		b = append(b, t)
	}
	return napiView(b)
}

// configs returns the settings v holds, queue index by queue index.
func (v napiView) configs() []vnic.NAPIConfig {
	out := make([]vnic.NAPIConfig, 0, len(v)/napiViewEntry)
	for b := []byte(v); len(b) >= napiViewEntry; b = b[napiViewEntry:] {
		out = append(out, vnic.NAPIConfig{
			DeferHardIRQs:     binary.LittleEndian.Uint32(b),
			GROFlushTimeout:   time.Duration(binary.LittleEndian.Uint64(b[4:])),
			IRQSuspendTimeout: time.Duration(binary.LittleEndian.Uint64(b[12:])),
			Threaded:          b[20] != 0,
		})
	}
	return out
}
