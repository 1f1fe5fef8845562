package daemon

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/daemon/xdp"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/extack"
)

// port is one software MANA port: the model, its TAP and its attachment to the wire.
type port struct {
	spec    config.PortSpec
	runtime bool // created at runtime (manactl port add), so the state file keeps its spec
	ns      genl.NetNS
	ready   chan struct{} // closed once the port is set up (or failed: then it is gone from the map)
	index   uint32

	vp    *vnic.Port
	dev   *tap.Device
	ep    *datapath.Endpoint
	ebpf  *xdp.Program // the attached eBPF program, closed when replaced
	watch context.CancelFunc
}

func (p *port) device() genl.Device {
	return genl.Device{Index: p.index, Name: p.spec.Name, NetNS: p.ns}
}

func (p *port) isReady() bool {
	select {
	case <-p.ready:
		return true
	default:
		return false
	}
}

// createPort creates a port: its vnic model, its TAP (re-attaching to a persistent one left by an
// earlier run, addresses and all) and its wire attachment, then brings it up if the TAP is up (a
// re-attached TAP keeps its administrative state) or adminUp asks for it. The port is registered
// before its TAP exists, so that a request naming it (a udev rule reacting to the TAP's add
// event) waits for it instead of failing. Caller holds the configuration lock. Errors: EEXIST
// for a name or MAC in use; EINVAL for an invalid spec; the TAP's or the model's errors.
func (d *Daemon) createPort(spec config.PortSpec, adminUp, runtime bool) (*port, error) {
	if d.closing {
		return nil, extack.New(unix.ESHUTDOWN, "manad is shutting down")
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if _, dup := d.ports[spec.Name]; dup {
		return nil, extack.New(unix.EEXIST, "port %s already exists", spec.Name)
	}
	for _, o := range d.ports {
		if string(o.spec.MAC) == string(spec.MAC) {
			return nil, extack.New(unix.EEXIST, "MAC %s is already port %s's", spec.MAC, o.spec.Name)
		}
	}
	ns, err := namedNetNS(spec.NetNS)
	if err != nil {
		return nil, err
	}
	log := d.log.With("port", spec.Name)
	p := &port{spec: spec, runtime: runtime, ns: ns, ready: make(chan struct{})}
	d.ports[spec.Name] = p
	ok := false
	defer func() {
		if !ok {
			delete(d.ports, spec.Name)
			d.teardown(p, true)
		}
		close(p.ready)
	}()

	// The endpoint, the model and the TAP name the port in their own log lines.
	p.ep = datapath.NewEndpoint(d.segments.Get(spec.Segment), spec.MAC, d.log)
	vcfg := spec.Config()
	vcfg.Lock, vcfg.Host, vcfg.Wire, vcfg.Logger = &d.mu, p.ep, p.ep, d.log
	vcfg.OnReset = func(_ *vnic.Port, err error) { d.onReset(p, err) }
	vcfg.IDs = &d.ids
	set := spec.Settings()
	if p.vp, err = vnic.New(vcfg, set); err != nil {
		return nil, err
	}
	if p.dev, err = tap.Open(tap.Config{
		Name: spec.Name, MAC: spec.MAC, MTU: set.MTU, Queues: set.Queues, NetNS: spec.NetNS,
		Persistent: spec.Persistent, Logger: d.log,
	}); err != nil {
		return nil, err
	}
	p.index = uint32(p.dev.Index())
	p.vp.SetIfindex(p.dev.Index())
	if err := p.ep.Start(p.vp, p.dev); err != nil {
		return nil, err
	}
	if p.dev.Reattached() {
		ls, err := p.dev.State()
		if err != nil {
			return nil, err
		}
		adminUp = ls.Up
	}
	if adminUp {
		if err := p.dev.SetUp(true); err != nil {
			return nil, err
		}
		if err := p.vp.Open(); err != nil {
			// The TAP stays as the administrator left it; the link watcher will retry the
			// open on the next up.
			log.Error("port could not come up", "err", err)
			_ = p.dev.SetUp(false)
		}
	}
	events, err := p.dev.Watch(context.Background())
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	p.watch = cancel
	d.bg.Add(1)
	go d.followLink(wctx, p, events)
	ok = true
	if spec.NetNS == "" {
		announce(spec.Name, log)
	}
	log.Info("port created", "netns", spec.NetNS, "segment", spec.Segment, "ifindex", p.index,
		"reattached", p.dev.Reattached(), "up", p.vp.State().Running)
	d.srv.NotifyPort("new", p.info())
	return p, nil
}

// followLink applies what `ip link set` does to the TAP: up/down opens and closes the port; an MTU
// change goes through the port's reconfiguration, and the TAP's MTU is put back when the port
// refuses it. It runs until the port is stopped or its TAP disappears.
func (d *Daemon) followLink(ctx context.Context, p *port, events <-chan tap.LinkEvent) {
	defer d.bg.Done()
	log := d.log.With("port", p.spec.Name)
	for {
		var ev tap.LinkEvent
		var open bool
		select {
		case <-ctx.Done():
			return
		case ev, open = <-events:
		}
		if !open {
			return
		}
		d.mu.Lock()
		if ctx.Err() != nil {
			d.mu.Unlock()
			return
		}
		if ev.Deleted {
			log.Warn("TAP deleted from outside manad; removing the port")
			d.removePort(p)
			d.mu.Unlock()
			return
		}
		changed := d.applyLink(p, ev, log)
		if changed {
			d.recordSettings(p)
			d.srv.NotifyPort("change", p.info())
		}
		d.mu.Unlock()
	}
}

// applyLink reconciles the port with one link state. Caller holds the configuration lock.
func (d *Daemon) applyLink(p *port, ev tap.LinkEvent, log interface {
	Info(string, ...any)
	Error(string, ...any)
}) (changed bool) {
	set := p.vp.Settings()
	if ev.MTU != 0 && ev.MTU != set.MTU {
		start := time.Now()
		if err := p.vp.SetMTU(ev.MTU); err != nil {
			log.Error("MTU set on the TAP refused; putting the TAP's MTU back", "asked", ev.MTU,
				"mtu", set.MTU, "err", err, "took", time.Since(start))
			if err := p.dev.SetMTU(set.MTU); err != nil {
				log.Error("restoring the TAP's MTU failed", "err", err)
			}
		} else {
			log.Info("reconfigure", "op", "mtu", "value", ev.MTU, "by", "ip link", "result", "ok", "took", time.Since(start))
			changed = true
		}
	}
	st := p.vp.State()
	switch {
	case ev.Up && !st.AdminUp:
		if err := p.vp.Open(); err != nil {
			log.Error("port could not come up; setting the TAP down", "err", err)
			_ = p.dev.SetUp(false)
		} else {
			log.Info("port up", "by", "ip link")
		}
		changed = true
	case !ev.Up && st.AdminUp:
		p.vp.Close()
		log.Info("port down", "by", "ip link")
		changed = true
	}
	return changed
}

// onReset reports the reset work's outcome. Called with the configuration lock held.
func (d *Daemon) onReset(p *port, err error) {
	if err != nil {
		d.log.Warn("reset attempt failed", "port", p.spec.Name, "err", err)
		return
	}
	d.log.Info("reset restored service", "port", p.spec.Name)
	if p.isReady() {
		d.srv.NotifyPort("change", p.info())
	}
}

// removePort takes a port out of the registry and stops it, deleting its TAP. Caller holds the
// configuration lock.
func (d *Daemon) removePort(p *port) {
	delete(d.ports, p.spec.Name)
	info := p.info()
	d.teardown(p, true)
	d.state.RecordDeleted(p.spec.Name, d.cfg)
	d.saveState()
	d.srv.NotifyPort("del", info)
}

// stopPort stops a port at shutdown, keeping its last settings in the state file; its TAP goes
// unless persistent.
func (d *Daemon) stopPort(p *port) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.ports, p.spec.Name)
	d.recordSettings(p)
	d.teardown(p, false)
}

// teardown stops whatever parts of a port exist: the link watcher, the wire attachment, the model,
// the TAP (deleted when del, or when not persistent) and the eBPF program. The port's buffers
// still in flight are waited for in the background (d.bg), and the outcome logged: zero in
// flight, or the leak. Caller holds the configuration lock.
func (d *Daemon) teardown(p *port, del bool) {
	if p.watch != nil {
		p.watch()
	}
	if p.ep != nil {
		p.ep.Stop()
	}
	if p.vp != nil {
		td := p.vp.Shutdown()
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), d.opts.ShutdownWait)
			defer cancel()
			if err := td.Wait(ctx); err != nil {
				d.log.Error("port stopped with RX buffers still in flight", "port", p.spec.Name, "err", err)
				return
			}
			d.log.Info("port stopped: every RX buffer returned", "port", p.spec.Name, "in_flight", 0)
		}()
	}
	if p.dev != nil {
		var err error
		if del {
			err = p.dev.Delete()
		} else {
			err = p.dev.Close()
		}
		if err != nil {
			d.log.Error("closing TAP failed", "port", p.spec.Name, "err", err)
		}
	}
	if p.ebpf != nil {
		p.ebpf.Close()
		p.ebpf = nil
	}
}

// announce has the kernel send a "change" uevent for a port's TAP once the port is ready. The
// "add" uevent went out when the TAP was created, before manad had set its alias, so a udev rule
// matching ATTR{ifalias}=="manad:*" could not see it then; it sees it on this one. Only ports in
// manad's own network namespace are visible to the host's udev (and through /sys here). Best
// effort: a read-only /sys (systemd's ProtectKernelTunables) just means no second event.
func announce(name string, log interface{ Debug(string, ...any) }) {
	if err := os.WriteFile("/sys/class/net/"+name+"/uevent", []byte("change"), 0); err != nil {
		log.Debug("no change uevent for udev", "err", err)
	}
}
