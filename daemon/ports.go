package daemon

import (
	"context"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/daemon/xdp"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic"
)

// port is one software MANA port: the model, its TAP and its attachment to the wire.
//
// A port is its TAP's ifindex: when the TAP is renamed (`ip link set NAME name NEW`, possible
// while it is down), spec.Name follows, and with it the registry, lookups by name, lists, log
// lines and notifications (see renamePort).
type port struct {
	spec     config.PortSpec
	runtime  bool   // created at runtime (manactl port add), so the state file keeps its spec
	confName string // the name the port was created with: a configuration-file port's key in the state file
	watched  bool   // holds a reference on its namespace's link watcher (d.watchers)
	ns       genl.NetNS
	ready    chan struct{} // closed once the port is set up (or failed: then it is gone from the map)
	index    uint32

	vp    *vnic.Port
	dev   *tap.Device
	ep    *datapath.Endpoint
	ebpf  *xdp.Program // the attached eBPF program, closed when replaced
	watch context.CancelFunc
	// netdevGone: the TAP is being deleted, so page-pool notifications leave its ifindex out.
	netdevGone atomic.Bool

	// tapFeatures are the TAP's kernel features as its last link event or SetFeatures left
	// them; under the configuration lock.
	tapFeatures tap.Features

	// statNames' last answer and the queue count it is for; under the configuration lock.
	statNamesQueues int
	statNamesCache  []string
}

func (p *port) device() genl.Device {
	return genl.Device{Index: p.index, Name: p.spec.Name, NetNS: p.ns}
}

// stateKey is the name the state file records the port under: a runtime port's current name
// (its spec is recorded with it), a configuration-file port's name in the configuration, which
// a rename does not change.
func (p *port) stateKey() string {
	if p.runtime {
		return p.spec.Name
	}
	return p.confName
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
// for a name or MAC in use; ENOSPC for a segment with config.MaxSegmentPorts ports; EINVAL for an
// invalid spec; the TAP's or the model's errors.
func (d *Daemon) createPort(spec config.PortSpec, adminUp, runtime bool) (*port, error) {
	if d.closing {
		return nil, nlerr.New(unix.ESHUTDOWN, "manad is shutting down")
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if _, dup := d.ports[spec.Name]; dup {
		return nil, nlerr.New(unix.EEXIST, "port %s already exists", spec.Name)
	}
	onSegment := 0
	for _, o := range d.ports {
		if string(o.spec.MAC) == string(spec.MAC) {
			return nil, nlerr.New(unix.EEXIST, "MAC %s is already port %s's", spec.MAC, o.spec.Name)
		}
		if o.spec.Segment == spec.Segment {
			onSegment++
		}
	}
	if onSegment >= config.MaxSegmentPorts {
		return nil, nlerr.New(unix.ENOSPC, "segment %s has %d ports, at most %d (as a Linux bridge)", spec.Segment, onSegment, config.MaxSegmentPorts)
	}
	// A namespace created here is recorded before it is made and saved with the port, so that
	// `port del --netns-too` may delete it and a crash in between leaves nothing behind.
	ns, created, err := d.portNetNS(spec.NetNS)
	if err != nil {
		return nil, err
	}
	log := d.log.With("port", spec.Name)
	p := &port{spec: spec, runtime: runtime, confName: spec.Name, ns: ns, ready: make(chan struct{})}
	d.ports[spec.Name] = p
	ok, announced := false, false
	defer func() {
		if !ok {
			delete(d.ports, spec.Name)
			d.teardown(p, true)
			if announced {
				d.unregisterNetdevPools(p)
				d.notifyNetdevDev(genl.EventDel, p.device())
			}
			if created {
				d.undoNetNS(spec.NetNS) // nothing half-made: the namespace was made for this port
			}
		}
		close(p.ready)
	}()

	// The endpoint, the model and the TAP name the port in their own log lines.
	p.ep = datapath.NewEndpoint(d.segment(spec.Segment), spec.MAC, d.log)
	vcfg := spec.Config()
	vcfg.Lock, vcfg.Host, vcfg.Wire, vcfg.Logger = &d.mu, p.ep, p.ep, d.log
	vcfg.OnReset = func(_ *vnic.Port, err error) { d.onReset(p, err) }
	vcfg.OnCarrier = func(_ *vnic.Port, on bool) { d.setCarrier(p, on) }
	vcfg.IDs = &d.ids
	vcfg.OnPagePool = func(_ *vnic.Port, ev vnic.PagePoolEvent) { d.notifyNetdevPool(p, ev) }
	set := spec.Settings
	if p.vp, err = vnic.New(vcfg, set); err != nil {
		return nil, err
	}
	// Each queue index's NAPI settings before any queue runs, as the kernel's napi_config
	// outlives the NAPIs: the file's napi_* keys, or what the state file kept.
	for q, c := range spec.NAPIConfigs(p.vp.Config().MaxQueues) {
		if err := p.vp.SetNAPIConfig(q, c); err != nil {
			return nil, err
		}
	}
	w, err := d.acquireWatcher(p)
	if err != nil {
		return nil, err
	}
	if p.dev, err = tap.Open(tap.Config{
		Name: spec.Name, MAC: spec.MAC, MTU: set.MTU, Queues: set.Queues, NetNS: spec.NetNS,
		Persistent: spec.Persistent, Offload: spec.Offload, Logger: d.log, Watcher: w, Group: d.group,
		TxQueueLen: etherTxQueueLen,
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
	// The netdev exists from here (register_netdevice: its dev add goes out before the page
	// pools an open creates announce theirs). A request it prompts waits for the configuration
	// lock, so it finds the port ready, or gone with its dev del.
	d.notifyNetdevDev(genl.EventNew, p.device())
	announced = true
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
	d.syncCarrier(p)
	events, err := p.dev.Watch(context.Background())
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	p.watch = cancel
	d.bg.Add(1)
	go d.followLink(wctx, p, events)
	if created {
		crashPoint(crashNetNSPort)
	}
	ok = true
	if spec.NetNS == "" {
		announce(spec.Name, log)
	}
	log.Info("port created", "netns", spec.NetNS, "segment", spec.Segment, "ifindex", p.index,
		"reattached", p.dev.Reattached(), "up", p.vp.State().Running,
		"offloads", tap.OffloadString(p.dev.Offloads()))
	d.srv.NotifyPort(genl.EventNew, p.info())
	return p, nil
}

// nsWatcher is the link watcher of one namespace, shared by the ports there.
type nsWatcher struct {
	w    *tap.Watcher
	refs int
}

// acquireWatcher returns the link watcher of p's namespace, starting it for the namespace's first
// port. Caller holds the configuration lock.
func (d *Daemon) acquireWatcher(p *port) (*tap.Watcher, error) {
	nw := d.watchers[p.ns]
	if nw == nil {
		w, err := tap.NewWatcher(p.spec.NetNS, tap.WatcherOptions{Logger: d.log, ReadBuffer: d.opts.LinkReadBuffer})
		if err != nil {
			return nil, err
		}
		nw = &nsWatcher{w: w}
		d.watchers[p.ns] = nw
	}
	nw.refs++
	p.watched = true
	return nw.w, nil
}

// releaseWatcher drops p's reference on its namespace's watcher, stopping it with the last port
// there. Caller holds the configuration lock.
func (d *Daemon) releaseWatcher(p *port) {
	if !p.watched {
		return
	}
	p.watched = false
	nw := d.watchers[p.ns]
	if nw == nil {
		return
	}
	if nw.refs--; nw.refs == 0 {
		delete(d.watchers, p.ns)
		nw.w.Close()
	}
}

// followLink applies what `ip link set` does to the TAP: up/down opens and closes the port; an MTU
// change goes through the port's reconfiguration, and the TAP's MTU is put back when the port
// refuses it; a rename renames the port; `ethtool -K` of rx-udp-gro-forwarding or rx-gro-list
// turns the port's UDP receive coalescing on or off. It runs until the port is stopped or its TAP disappears.
// The state file is written shortly after (saveSoon), once for a burst of changes: `ip -batch`
// bringing a thousand ports up costs a few writes, not a thousand.
func (d *Daemon) followLink(ctx context.Context, p *port, events <-chan tap.LinkEvent) {
	defer d.bg.Done()
	d.mu.Lock()
	log := d.log.With("port", p.spec.Name)
	d.mu.Unlock()
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
			d.saveSoon()
			d.mu.Unlock()
			return
		}
		// The TAP's kernel features say whether its NIC may coalesce UDP (datapath.Endpoint.SetUDPGRO).
		p.tapFeatures = ev.Features
		p.ep.SetUDPGRO(ev.Features.UDPGRO())
		renamed := ev.Name != "" && ev.Name != p.spec.Name && d.renamePort(p, ev.Name, log)
		if renamed {
			log = d.log.With("port", p.spec.Name)
		}
		changed := d.applyLink(p, ev, log)
		if changed || renamed {
			if d.noteSettings(p) {
				d.saveSoon()
			}
			d.srv.NotifyPort(genl.EventChange, p.info())
		}
		d.mu.Unlock()
	}
}

// renamePort gives p the name its TAP was renamed to, and reports whether it did. Port names are
// unique across namespaces in manad (its registry and state file are by name), so a rename to
// the name of another port is undone: the TAP gets its name back (logged). Caller holds the
// configuration lock.
func (d *Daemon) renamePort(p *port, name string, log interface {
	Info(string, ...any)
	Error(string, ...any)
}) bool {
	old := p.spec.Name
	if o, taken := d.ports[name]; taken && o != p {
		log.Error("TAP renamed to the name of another manad port; renaming it back", "to", name,
			"other_netns", o.spec.NetNS)
		if err := p.dev.SetName(old); err != nil {
			log.Error("renaming the TAP back failed", "err", err)
		}
		return false
	}
	delete(d.ports, old)
	p.spec.Name = name
	d.ports[name] = p
	if p.runtime {
		// A runtime port's spec is in the state file under its name: move it.
		d.state.RecordDeleted(old, d.cfg)
	}
	log.Info("port renamed", "from", old, "to", name, "ifindex", p.index, "by", "ip link")
	return true
}

// saveSoon writes the state file from a goroutine of its own once it gets the configuration
// lock, so that the changes made meanwhile share the write. Caller holds the configuration lock.
func (d *Daemon) saveSoon() {
	if d.saving {
		return
	}
	d.saving = true
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		d.mu.Lock()
		defer d.mu.Unlock()
		d.saving = false
		d.saveState()
	}()
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
		d.srv.NotifyPort(genl.EventChange, p.info())
	}
}

// removePort takes a port out of the registry and stops it, deleting its TAP; the state in
// memory forgets it, and the caller saves it. Caller holds the configuration lock.
func (d *Daemon) removePort(p *port) {
	delete(d.ports, p.spec.Name)
	info := p.info()
	d.teardown(p, true)
	d.state.RecordDeleted(p.stateKey(), d.cfg)
	d.srv.NotifyPort(genl.EventDel, info)
	d.unregisterNetdevPools(p)
	d.notifyNetdevDev(genl.EventDel, info.Device)
}

// teardown stops whatever parts of a port exist: the link watcher, the wire attachment, the model,
// the TAP (deleted when del, or when not persistent) and the eBPF program. The port's buffers
// still in flight are waited for in the background (d.bg), and the outcome logged: zero in
// flight, or the leak. Caller holds the configuration lock.
func (d *Daemon) teardown(p *port, del bool) {
	d.stop(p)
	d.closeTAP(p, del)
	d.releaseWatcher(p)
}

// stop is the part of teardown that needs the configuration lock: the link watch, the wire
// attachment and the model stop.
func (d *Daemon) stop(p *port) {
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
}

// closeTAP is the part of teardown that needs no lock once the port is stopped and out of the
// registry: closing (or deleting) the TAP, and releasing the eBPF program.
func (d *Daemon) closeTAP(p *port, del bool) {
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

// shutdownWorkers bounds how many ports shutdown works on at once.
const shutdownWorkers = 32

// tapGroup picks the netdev group (IFLA_GROUP) of a daemon's non-persistent TAPs: random, so that
// two daemons with TAPs in one namespace never share one, and with the high byte 'm' (0x6d), far
// from the small numbers /etc/iproute2/group names. `ip link show group N` lists them (the daemon
// logs N as tap_group when ready).
func tapGroup() uint32 {
	return 0x6d<<24 + 1 + rand.Uint32N(1<<24-1) // 0x6d000001..0x6dffffff
}

// deleteGroups unregisters the non-persistent TAPs of stopped ports with one request per
// namespace (tap.DeleteGroup): the kernel then pays its RCU waits once per namespace instead of
// once per TAP (about 2 ms each). Where the group cannot be deleted safely (someone put another
// device into it, or took a TAP out), it is logged and the TAPs are deleted one by one by
// closeTAPs, as without it.
func (d *Daemon) deleteGroups(ports []*port) {
	type nsKey struct{ dev, ino uint64 }
	byNS := map[nsKey][]*tap.Device{}
	for _, p := range ports {
		if p.dev == nil || p.dev.Persistent() {
			continue
		}
		dev, ino := p.dev.NetNSID()
		k := nsKey{dev, ino}
		byNS[k] = append(byNS[k], p.dev)
	}
	for _, devs := range byNS {
		start := time.Now()
		if err := tap.DeleteGroup(d.group, devs); err != nil {
			d.log.Warn("TAPs not deleted by group; deleting them one by one", "netns", devs[0].NetNS(), "taps", len(devs), "err", err)
			continue
		}
		d.log.Info("TAPs deleted by group", "netns", devs[0].NetNS(), "taps", len(devs), "group", d.group, "took", time.Since(start))
	}
}

// closeTAPs closes the TAPs of stopped ports concurrently. Unregistering a netdev waits for RCU
// grace periods (about 20 ms here); the kernel batches the unregistrations queued while one
// waits, so concurrent closes share the waits instead of paying one per port.
func (d *Daemon) closeTAPs(ports []*port, del bool) {
	concurrently(ports, func(p *port) { d.closeTAP(p, del) })
}

// concurrently calls f on every port, shutdownWorkers at a time, and returns when all are done.
func concurrently(ports []*port, f func(*port)) {
	work := make(chan *port)
	var wg sync.WaitGroup
	for range min(shutdownWorkers, len(ports)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				f(p)
			}
		}()
	}
	for _, p := range ports {
		work <- p
	}
	close(work)
	wg.Wait()
}

// etherTxQueueLen is the tx_queue_len a port's new TAP gets: DEFAULT_TX_QUEUE_LEN, what
// alloc_etherdev_mq (ether_setup) gives a mana netdev, so `ip link` shows a MANA port's qlen 1000
// rather than tun's 500. On a TAP it is also how many transmitted frames each queue holds while
// its TX goroutine waits for the CPU: where mana stops the queue and the qdisc holds the frames,
// tun_net_xmit drops them.
const etherTxQueueLen = 1000
