package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/xdp"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/layout"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/faultpoint"
	"github.com/manad/manad/vnic/privflag"
)

// backend is the Daemon as the netlink server sees it: its methods are the ops of ops().
type backend Daemon

// ops is the daemon's genl.Backend: every op, the daemon's methods.
func (b *backend) ops() genl.Backend {
	return genl.Backend{
		Devices: b.Devices, DeviceByIndex: b.DeviceByIndex, DeviceByName: b.DeviceByName,

		StringSet: b.StringSet, PrivFlags: b.PrivFlags, SetPrivFlags: b.SetPrivFlags,
		Rings: b.Rings, SetRings: b.SetRings, Channels: b.Channels, SetChannels: b.SetChannels,
		Coalesce: b.Coalesce, SetCoalesce: b.SetCoalesce, RSS: b.RSS, SetRSS: b.SetRSS,
		Features: b.Features, SetFeatures: b.SetFeatures,
		LinkSettings: b.LinkSettings, LinkState: b.LinkState, TSInfo: b.TSInfo,

		Ports: b.Ports, Port: b.Port, CreatePort: b.CreatePort, DeletePort: b.DeletePort,
		DeletePortNetNS: b.DeletePortNetNS, SetMTU: b.SetMTU, AttachXDP: b.AttachXDP, DetachXDP: b.DetachXDP,
		Stats: b.Stats, PlanLayout: b.PlanLayout, SetFault: b.SetFault, StartCapture: b.StartCapture,

		Segments: b.Segments, Segment: b.Segment, CreateSegment: b.CreateSegment, DeleteSegment: b.DeleteSegment,
		AddUplink: b.AddUplink, DeleteUplink: b.DeleteUplink,

		NetdevPort: b.NetdevPort, NetdevViews: b.NetdevViews, SetNAPI: b.SetNAPI,
	}
}

func (b *backend) d() *Daemon { return (*Daemon)(b) }

// Devices lists the ports in the caller's network namespace, by name.
func (b *backend) Devices(ctx context.Context, c genl.Caller) ([]genl.Device, error) {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []genl.Device
	for _, p := range d.ports {
		if p.ns == c.NetNS && p.isReady() {
			out = append(out, p.device())
		}
	}
	slices.SortFunc(out, func(a, b genl.Device) int { return int(a.Index) - int(b.Index) })
	return out, nil
}

// DeviceByIndex finds a port by ifindex in the caller's namespace.
func (b *backend) DeviceByIndex(ctx context.Context, c genl.Caller, ifindex uint32) (genl.Device, error) {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.ports {
		if p.ns == c.NetNS && p.index == ifindex && p.isReady() {
			return p.device(), nil
		}
	}
	return genl.Device{}, errNoDevice
}

// DeviceByName finds a port by name in the caller's namespace. A port still being set up is
// waited for (up to Options.PortWait): a udev rule runs on the TAP's add event, before manad has
// finished with the port.
func (b *backend) DeviceByName(ctx context.Context, c genl.Caller, name string) (genl.Device, error) {
	d := b.d()
	d.mu.Lock()
	p, ok := d.ports[name]
	d.mu.Unlock()
	if !ok || p.ns != c.NetNS {
		return genl.Device{}, errNoDevice
	}
	if !p.isReady() {
		t := time.NewTimer(d.opts.PortWait)
		defer t.Stop()
		select {
		case <-p.ready:
		case <-t.C:
		case <-ctx.Done():
			return genl.Device{}, ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.ports[name]; cur != p || !p.isReady() {
		return genl.Device{}, errNoDevice
	}
	return p.device(), nil
}

// withPort runs f on the port d names, under the configuration lock. ENODEV when it is gone.
func (b *backend) withPort(dev genl.Device, f func(p *port) error) error {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[dev.Name]
	if !ok || p.ns != dev.NetNS || !p.isReady() {
		return errNoDevice
	}
	return f(p)
}

// portView is what a "change" event reports of a port, in comparable form, plus what the state
// file keeps besides vnic.Settings (the TAP's offloads, the RSS key), so that every change the
// state file must survive goes through the one "changed → record" path of changeLocked.
type portView struct {
	set                             vnic.Settings
	up, running, detached, resetDue bool
	faults                          [faultpoint.NumPoints]vnic.Fault
	offload                         bool
	rssKey                          [vnic.RSSKeySize]byte
	napi                            napiView
}

func (p *port) view() portView {
	st := p.vp.State()
	v := portView{set: st.Settings, up: st.AdminUp, running: st.Running, detached: st.Detached, resetDue: st.ResetPending,
		offload: p.offload(), rssKey: p.vp.RSS().Key, napi: newNAPIView(p.vp.NAPIConfigs())}
	copy(v.faults[:], st.Faults)
	return v
}

// offload reports whether the port's TAP carries virtio headers (its offloads are on).
func (p *port) offload() bool { return p.dev != nil && p.dev.VnetHdr() }

// change runs a reconfiguration of a port under the configuration lock, logs what was asked, by
// whom, the outcome and its duration, and persists and announces the result when the port
// changed (a refused or no-op request announces nothing, as the ethtool notifications do).
func (b *backend) change(c genl.Caller, dev genl.Device, op string, value any, f func(p *port) error) error {
	return b.withPort(dev, func(p *port) error { return b.changeLocked(c, p, op, value, func() error { return f(p) }) })
}

// changeLocked is change on a port already looked up, the lock held. The change is refused
// before it is applied when its state could not be saved (reserveSave), and undone (revert)
// when saving it failed all the same.
func (b *backend) changeLocked(c genl.Caller, p *port, op string, value any, f func() error) (err error) {
	d := b.d()
	done, err := d.reserveSave()
	if err != nil {
		d.log.Warn("reconfigure", "port", p.spec.Name, "op", op, "value", value, "uid", c.UID, "pid", c.PID,
			"result", "refused", "err", err)
		return err
	}
	defer done(&err)
	before := p.view()
	err = b.apply(c, p, op, value, f)
	if cause := d.saveErr; cause != nil {
		d.saveErr = nil
		outcome := "the change was undone"
		if rerr := d.revert(p, before); rerr != nil {
			outcome = fmt.Sprintf("the change was applied but not saved, and undoing it failed (%v); "+
				"manad retries saving it, and it is lost if manad stops before a retry succeeds", rerr)
		}
		d.log.Warn("reconfigure undone: its state could not be saved", "port", p.spec.Name, "op", op, "outcome", outcome)
		d.noteSettings(p) // what the port runs now, for the retry to save
		d.srv.NotifyPort(genl.EventChange, p.info())
		err = d.saveError(cause, outcome)
	}
	return err
}

// apply is changeLocked without the reservation: for a change the state file does not keep
// (fault injection), or within a reservation.
func (b *backend) apply(c genl.Caller, p *port, op string, value any, f func() error) error {
	d := b.d()
	before := p.view()
	start := time.Now()
	err := f()
	attrs := []any{"port", p.spec.Name, "op", op, "value", value, "uid", c.UID, "pid", c.PID,
		"took", time.Since(start)}
	if err != nil {
		d.log.Warn("reconfigure", append(attrs, "result", "error", "err", err)...)
	} else {
		d.log.Info("reconfigure", append(attrs, "result", "ok")...)
	}
	if p.view() != before {
		d.recordSettings(p)
		d.srv.NotifyPort(genl.EventChange, p.info())
	}
	return err
}

// update runs an ethtool SET under the configuration lock (genl.Update): the request applied
// to the current value get(p); for a change, the logged reconfiguration set and then u.Changed
// with the value it produced, so the ethtool notification is queued before the lock is let go.
// A refused request reaches neither the port nor the log.
func update[T any](b *backend, c genl.Caller, dev genl.Device, op string, u genl.Update[T], get func(p *port) T,
	value func(T) any, set func(p *port, v T) error) error {
	return b.withPort(dev, func(p *port) error {
		next, mod, err := u.Apply(get(p))
		if err != nil || !mod {
			return err
		}
		if err := b.changeLocked(c, p, op, value(next), func() error { return set(p, next) }); err != nil {
			return err
		}
		if u.Changed != nil {
			u.Changed(get(p))
		}
		return nil
	})
}

// StringSet returns ETH_SS_STATS (mana_get_strings, then manad's own counters) and
// ETH_SS_PRIV_FLAGS; other sets are empty.
func (b *backend) StringSet(ctx context.Context, c genl.Caller, dev genl.Device, set uint32) (names []string, err error) {
	err = b.withPort(dev, func(p *port) error {
		switch set {
		case ethtool.SSStats:
			names = p.statNames()
		case ethtool.SSPrivFlags:
			names = privflag.Names[:]
		}
		return nil
	})
	return names, err
}

// PrivFlags is mana_get_priv_flags.
func (b *backend) PrivFlags(ctx context.Context, c genl.Caller, dev genl.Device) (pf genl.PrivFlags, err error) {
	err = b.withPort(dev, func(p *port) error {
		pf = privFlags(p.vp.Settings())
		return nil
	})
	return pf, err
}

// SetPrivFlags is mana_set_priv_flags.
func (b *backend) SetPrivFlags(ctx context.Context, c genl.Caller, dev genl.Device, u genl.Update[genl.PrivFlags]) error {
	return update(b, c, dev, "priv-flags", u, func(p *port) genl.PrivFlags { return privFlags(p.vp.Settings()) },
		func(pf genl.PrivFlags) any { return privflag.NamesOf(pf.Flags) },
		func(p *port, pf genl.PrivFlags) error { return p.vp.SetPrivFlags(pf.Flags) })
}

// Rings is mana_get_ringparam.
func (b *backend) Rings(ctx context.Context, c genl.Caller, dev genl.Device) (r genl.Rings, err error) {
	err = b.withPort(dev, func(p *port) error {
		r = rings(p.vp.Settings())
		return nil
	})
	return r, err
}

// SetRings is mana_set_ringparam.
func (b *backend) SetRings(ctx context.Context, c genl.Caller, dev genl.Device, u genl.Update[genl.Rings]) error {
	return update(b, c, dev, "rings", u, func(p *port) genl.Rings { return rings(p.vp.Settings()) },
		func(r genl.Rings) any { return map[string]uint32{"rx": r.Rx, "tx": r.Tx} },
		func(p *port, r genl.Rings) error { return p.vp.SetRings(int(r.Rx), int(r.Tx)) })
}

// Channels is mana_get_channels.
func (b *backend) Channels(ctx context.Context, c genl.Caller, dev genl.Device) (ch genl.Channels, err error) {
	err = b.withPort(dev, func(p *port) error {
		ch = channels(p.vp.Settings(), p.vp.Config().MaxQueues)
		return nil
	})
	return ch, err
}

// SetChannels is mana_set_channels; the TAP gains or loses queues with the port.
func (b *backend) SetChannels(ctx context.Context, c genl.Caller, dev genl.Device, u genl.Update[genl.Channels]) error {
	var cur *port // the port get last read, for the RSS check of the change under the same lock
	apply := u.Apply
	u.Apply = func(ch genl.Channels) (genl.Channels, bool, error) {
		next, mod, err := apply(ch)
		if err == nil && mod {
			err = checkRSSChannels(cur, next)
		}
		return next, mod, err
	}
	return update(b, c, dev, "channels", u, func(p *port) genl.Channels {
		cur = p
		return channels(p.vp.Settings(), p.vp.Config().MaxQueues)
	},
		func(ch genl.Channels) any { return int(ch.Combined) },
		func(p *port, ch genl.Channels) error {
			n := int(ch.Combined)
			return p.ep.SetChannels(n, func() error { return p.vp.SetChannels(n) })
		})
}

// Ports lists every port in the caller's namespace with its full state; for an admin caller
// (root or the admin group) in manad's own namespace, every port in every namespace, so that
// `manactl list` on the host shows them all. Others see only their namespace's ports: which
// ports live in which namespaces is the administrator's business.
func (b *backend) Ports(ctx context.Context, c genl.Caller) ([]genl.PortInfo, error) {
	all := false
	if c.Admin {
		self, err := selfNetNS()
		all = err == nil && c.NetNS == self
	}
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []genl.PortInfo
	for _, p := range d.ports {
		if (all || p.ns == c.NetNS) && p.isReady() {
			out = append(out, p.info())
		}
	}
	// Ports in different namespaces may share an ifindex.
	slices.SortFunc(out, func(a, b genl.PortInfo) int {
		return cmp.Or(cmp.Compare(a.Device.Index, b.Device.Index), strings.Compare(a.Device.Name, b.Device.Name))
	})
	return out, nil
}

// Port returns one port's full state.
func (b *backend) Port(ctx context.Context, c genl.Caller, dev genl.Device) (info genl.PortInfo, err error) {
	err = b.withPort(dev, func(p *port) error {
		info = p.info()
		return nil
	})
	return info, err
}

// CreatePort creates a port at runtime; the state file remembers it. It is refused when its
// state cannot be saved (reserveSave), and removed again when saving fails after it was made.
func (b *backend) CreatePort(ctx context.Context, c genl.Caller, s genl.PortSpec) (_ genl.PortInfo, err error) {
	d := b.d()
	spec, err := config.SpecFromWire(s) // defaults filled in; values checked by createPort's Validate
	if err != nil {
		return genl.PortInfo{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	start := time.Now()
	attrs := []any{"port", spec.Name, "op", "port-add", "uid", c.UID, "pid", c.PID}
	done, err := d.reserveSave()
	if err != nil {
		d.log.Warn("reconfigure", append(attrs, "result", "refused", "err", err)...)
		return genl.PortInfo{}, err
	}
	defer done(&err)
	p, err := d.createPort(spec, true, true)
	attrs = append(attrs, "took", time.Since(start))
	if err != nil {
		d.log.Warn("reconfigure", append(attrs, "result", "error", "err", err)...)
		return genl.PortInfo{}, err
	}
	d.log.Info("reconfigure", append(attrs, "result", "ok")...)
	d.recordSettings(p)
	if d.saveErr != nil {
		// Not saved: the port goes, so that what manad runs is what a restart brings back.
		d.log.Warn("port removed: its state could not be saved", "port", spec.Name)
		d.removePort(p)
		err, d.saveErr = d.saveError(d.saveErr, fmt.Sprintf("port %s was not added", spec.Name)), nil
		return genl.PortInfo{}, err
	}
	return p.info(), nil
}

// DeletePort removes a port and its TAP, even a persistent one; it is refused when its state
// cannot be saved (reserveSave).
func (b *backend) DeletePort(ctx context.Context, c genl.Caller, dev genl.Device) error {
	d := b.d()
	return b.withPort(dev, func(p *port) (err error) {
		done, err := d.reserveSave()
		if err != nil {
			d.log.Warn("reconfigure", "port", p.spec.Name, "op", "port-del", "uid", c.UID, "pid", c.PID, "result", "refused", "err", err)
			return err
		}
		defer done(&err)
		d.removePort(p)
		d.saveState()
		d.log.Info("reconfigure", "port", p.spec.Name, "op", "port-del", "uid", c.UID, "pid", c.PID, "result", "ok")
		return nil
	})
}

// DeletePortNetNS deletes a port as DeletePort does, then its named network namespace as `ip
// netns del` would, when the namespace is one manad created (the same one: its inode is the
// recorded one), holds no other manad port and no link but lo. Otherwise, or when deleting it
// fails, the namespace stays and the result's Notice says why; the port is deleted either way.
func (b *backend) DeletePortNetNS(ctx context.Context, c genl.Caller, dev genl.Device) (res wire.PortDel, err error) {
	d := b.d()
	err = b.withPort(dev, func(p *port) (err error) {
		done, err := d.reserveSave()
		if err != nil {
			d.log.Warn("reconfigure", "port", p.spec.Name, "op", "port-del", "uid", c.UID, "pid", c.PID, "result", "refused", "err", err)
			return err
		}
		defer done(&err)
		defer d.saveState() // the port's deletion and, below, the namespace's: one write
		res = wire.PortDel{Name: p.spec.Name, NetNS: p.spec.NetNS}
		d.removePort(p)
		d.log.Info("reconfigure", "port", p.spec.Name, "op", "port-del", "uid", c.UID, "pid", c.PID, "result", "ok")
		if res.Notice = d.netnsKept(p); res.Notice != "" {
			d.log.Info("network namespace kept", "netns", res.NetNS, "why", res.Notice)
			return nil
		}
		if err := deleteNamedNetNS(res.NetNS); err != nil {
			res.Notice = fmt.Sprintf("deleting network namespace %q failed: %v", res.NetNS, err)
			d.log.Warn("network namespace not deleted", "netns", res.NetNS, "err", err)
			return nil
		}
		res.NetNSDeleted = true
		d.state.ForgetNetNS(res.NetNS)
		d.log.Info("network namespace deleted", "netns", res.NetNS, "uid", c.UID, "pid", c.PID)
		return nil
	})
	return res, err
}

// netnsKept says why the namespace of p, a port just removed, must not be deleted, or "" when it
// may. Caller holds the configuration lock.
func (d *Daemon) netnsKept(p *port) string {
	name := p.spec.NetNS
	if name == "" {
		return "the port was in manad's own network namespace"
	}
	ino, ok := d.state.NetNS[name]
	if !ok {
		return fmt.Sprintf("network namespace %q was not created by manad", name)
	}
	id, err := lookupNamedNetNS(name)
	if err != nil {
		return fmt.Sprintf("network namespace %q: %v", name, err)
	}
	if id.Ino != ino {
		return fmt.Sprintf("network namespace %q is not the one manad created (it was deleted and added again)", name)
	}
	var others []string
	for _, o := range d.ports {
		if o.ns == id {
			others = append(others, o.spec.Name)
		}
	}
	if len(others) > 0 {
		slices.Sort(others)
		return fmt.Sprintf("network namespace %q still has manad ports: %s", name, strings.Join(others, ", "))
	}
	links, err := netnsLinks(name, int(p.index))
	if err != nil {
		return fmt.Sprintf("network namespace %q: listing its links: %v", name, err)
	}
	if len(links) > 0 {
		return fmt.Sprintf("network namespace %q still has links other than lo: %s", name, strings.Join(links, ", "))
	}
	return ""
}

// SetMTU changes the MTU through the port's reconfiguration, then sets it on the TAP.
func (b *backend) SetMTU(ctx context.Context, c genl.Caller, dev genl.Device, mtu uint32) error {
	return b.change(c, dev, "mtu", mtu, func(p *port) error {
		if err := p.vp.SetMTU(int(mtu)); err != nil {
			return err
		}
		if err := p.dev.SetMTU(int(mtu)); err != nil {
			// The port runs at the new MTU; the TAP refusing it is reported, and the link
			// watcher brings the port back in line with the TAP.
			return nlerr.Wrap(err, unix.EIO, "the port took MTU %d but its TAP did not", mtu)
		}
		return nil
	})
}

// AttachXDP attaches a built-in program or loads an eBPF object and attaches it.
func (b *backend) AttachXDP(ctx context.Context, c genl.Caller, dev genl.Device, prog genl.XDPProgram) error {
	var value any = prog.Builtin
	if prog.Builtin == "" {
		value = slog.GroupValue(slog.Int("object_bytes", len(prog.Object)), slog.String("section", prog.Section))
	}
	return b.change(c, dev, "xdp-attach", value, func(p *port) error {
		var vp vnic.XDPProgram
		var loaded *xdp.Program
		switch {
		case prog.Builtin != "" && len(prog.Object) != 0:
			return nlerr.New(unix.EINVAL, "give either a built-in program or an eBPF object, not both")
		case prog.Builtin != "":
			bi := vnic.BuiltinXDPByName(prog.Builtin)
			if bi == nil {
				return nlerr.New(unix.EINVAL, "unknown built-in XDP program %q (want pass, drop, tx or aborted)", prog.Builtin)
			}
			vp = bi
		case len(prog.Object) != 0:
			var err error
			if loaded, err = xdp.Load(prog.Object, prog.Section, prog.Name); err != nil {
				return err
			}
			vp = loaded
		default:
			return nlerr.New(unix.EINVAL, "no XDP program given")
		}
		if err := p.vp.SetXDP(vp); err != nil {
			if loaded != nil {
				loaded.Close()
			}
			return err
		}
		if p.ebpf != nil && p.ebpf != loaded {
			p.ebpf.Close()
		}
		p.ebpf = loaded
		return nil
	})
}

// DetachXDP detaches the port's program.
func (b *backend) DetachXDP(ctx context.Context, c genl.Caller, dev genl.Device) error {
	return b.change(c, dev, "xdp-detach", "", func(p *port) error {
		if err := p.vp.SetXDP(nil); err != nil {
			return err
		}
		if p.ebpf != nil {
			p.ebpf.Close()
			p.ebpf = nil
		}
		return nil
	})
}

// Stats returns ETH_SS_STATS names and values in the driver's order (mana_get_ethtool_stats),
// followed by manad's own counters (port.statNames).
func (b *backend) Stats(ctx context.Context, c genl.Caller, dev genl.Device) (out []genl.Stat, err error) {
	err = b.withPort(dev, func(p *port) error {
		names, vals := p.statNames(), p.statValues()
		out = make([]genl.Stat, len(names))
		for i := range names {
			out[i] = genl.Stat{Name: names[i], Value: vals[i]}
		}
		return nil
	})
	return out, err
}

// PlanLayout computes RX buffer layouts for hypothetical parameters (layout.Plan).
func (b *backend) PlanLayout(ctx context.Context, c genl.Caller, r genl.LayoutRequest) ([]genl.RxBufLayout, error) {
	return layout.Plan(r)
}

// SetFault arms or clears fault injection on a port.
func (b *backend) SetFault(ctx context.Context, c genl.Caller, dev genl.Device, f genl.Fault) error {
	point, err := faultpoint.Parse(f.Point)
	if err != nil {
		return err
	}
	mode, err := vnic.ParseFaultMode(f.Mode)
	if err != nil {
		return err
	}
	// Faults are not saved: injecting one needs no writable state directory.
	return b.withPort(dev, func(p *port) error {
		return b.apply(c, p, "fault", f, func() error {
			return p.vp.SetFault(vnic.Fault{Point: point, Mode: mode, Count: int(f.Count), Errno: unix.Errno(f.Errno)})
		})
	})
}

// LinkSettings is mana_get_link_ksettings: the vport's speed (the port's speed key; unknown when
// not given, as when MANA_QUERY_LINK_CONFIG reports none), full duplex, PORT_OTHER, no autoneg
// and no link modes.
func (b *backend) LinkSettings(ctx context.Context, c genl.Caller, dev genl.Device) (ls genl.LinkSettings, err error) {
	err = b.withPort(dev, func(p *port) error {
		ls = linkSettings(p.spec)
		return nil
	})
	return ls, err
}

func linkSettings(s config.PortSpec) genl.LinkSettings {
	ls := genl.LinkSettings{Speed: wire.SpeedUnknown, Duplex: wire.DuplexFull, Port: wire.PortOther, Autoneg: wire.AutonegOff}
	if s.Speed > 0 {
		ls.Speed = uint32(s.Speed)
	}
	return ls
}

// LinkState is ethtool_op_get_link as __ethtool_get_link calls it: the link is up while the
// port is running (administratively up with its queues attached), which is when its TAP has a
// carrier (setCarrier).
func (b *backend) LinkState(ctx context.Context, c genl.Caller, dev genl.Device) (ls genl.LinkState, err error) {
	err = b.withPort(dev, func(p *port) error {
		ls.Link = p.vp.Running()
		return nil
	})
	return ls, err
}

// TSInfo is get_ts_info of a driver without one (mana): no hardware timestamping, no PHC; the
// ethtool core adds the software receive timestamps.
func (b *backend) TSInfo(ctx context.Context, c genl.Caller, dev genl.Device) (ts genl.TSInfo, err error) {
	err = b.withPort(dev, func(*port) error { return nil })
	return genl.TSInfo{PHCIndex: -1}, err
}
