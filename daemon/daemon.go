// Package daemon is manad: it owns the software MANA ports — each a vnic.Port on a real TAP device,
// plugged into a wire segment — and serves them over the genl netlink families.
//
// The daemon adapts the layers to each other (README: Architecture): it keeps the port registry, the
// configuration lock every reconfiguration runs under (the analogue of rtnl), the link watchers
// that follow `ip link set … up|down|mtu`, persistence of runtime changes, and the genl.Backend
// the netlink server calls. It resolves devices in the caller's network namespace, as the kernel
// does.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/metrics"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/transport"
	"github.com/manad/manad/vnic"
)

// Options configure a Daemon.
type Options struct {
	// Config is the configuration (config.Default() for the embedded one). Its Daemon table
	// gives the socket, state directory and admin group.
	Config *config.Config
	// Listener, when set, is a socket systemd passed in (socket activation); otherwise the
	// daemon listens on Config.Daemon.Socket.
	Listener *net.UnixListener
	// Logger receives the daemon's logs; nil means slog.Default().
	Logger *slog.Logger
	// Ready, when set, is called once the daemon serves requests (sd_notify READY=1).
	Ready func()
	// PortWait bounds how long a request naming a port that is still being set up waits for it
	// (a udev rule may run before the port is ready); 0 means 5s.
	PortWait time.Duration
	// ShutdownWait bounds how long shutdown waits for RX buffers still in flight; 0 means 5s.
	ShutdownWait time.Duration
	// LinkReadBuffer, when non-zero, is the receive buffer of the link watchers' notification
	// sockets (tap.WatcherOptions.ReadBuffer); 0 keeps tap's default. A test hook: a tiny buffer
	// forces overruns.
	LinkReadBuffer int
}

// Daemon is a running manad.
type Daemon struct {
	opts Options
	cfg  *config.Config
	log  *slog.Logger

	// mu is the configuration lock: every port reconfiguration, and every read of
	// configuration that must be consistent, runs under it (rtnl).
	mu       sync.Mutex
	ports    map[string]*port // by name
	segments *datapath.Segments
	segDefs  []*segDef // the defined segments and their uplinks, in definition order; see segments.go
	state    *config.State
	srv      *genl.Server
	closing  bool
	control  *metrics.Control          // nil unless metrics are served
	watchers map[genl.NetNS]*nsWatcher // the link watcher of each namespace that has ports (by identity: a name can be reused)
	saving   bool                      // a deferred state-file write is pending (saveSoon)
	ids      vnic.IDs                  // page-pool and NAPI ids, unique among the daemon's ports
	group    uint32                    // the netdev group of the daemon's non-persistent TAPs (see tapGroup)

	// Persistence (persist.go): the state-file write reserved for the request being applied,
	// why its commit failed, the file's size at the last save, whether the state in
	// memory is newer than the file, and the retry of a failed save.
	saveRes   *config.Reservation
	saveErr   error
	stateSize int64
	unsaved   bool
	saveRetry *time.Timer
	saveDelay time.Duration

	bg sync.WaitGroup // link watchers
}

// New prepares a daemon; Run starts it. Errors: EINVAL for an invalid configuration.
func New(opts Options) (*Daemon, error) {
	if opts.Config == nil {
		opts.Config = config.Default()
	}
	if err := opts.Config.Daemon.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PortWait <= 0 {
		opts.PortWait = 5 * time.Second
	}
	if opts.ShutdownWait <= 0 {
		opts.ShutdownWait = 5 * time.Second
	}
	d := &Daemon{
		opts: opts, cfg: opts.Config, log: opts.Logger,
		ports: map[string]*port{}, segments: datapath.NewSegments(), watchers: map[genl.NetNS]*nsWatcher{},
		group: tapGroup(),
	}
	if n := opts.Config.Daemon.MaxPollers; n != config.DefaultMaxPollers {
		if err := d.segments.Pollers().SetMax(n); err != nil { // Validate checked the range
			return nil, err
		}
	}
	scfg := genl.ServerConfig{
		Backend: (*backend)(d).ops(), Logger: opts.Logger,
		Transport: transport.Config{
			AdminGroup: opts.Config.Daemon.AdminGID, MaxMessage: maxRequest,
			MaxConns: opts.Config.Daemon.MaxConnections, MaxConnsPerUID: opts.Config.Daemon.MaxConnectionsPerUID,
			IdleTimeout: opts.Config.Daemon.IdleTimeout, BusyPoll: opts.Config.Daemon.BusyPoll,
		},
	}
	if opts.Config.Daemon.MetricsListen != "" {
		d.control = metrics.NewControl()
		scfg.Observer = d.control
	}
	srv, err := genl.NewServer(scfg)
	if err != nil {
		return nil, err
	}
	d.srv = srv
	if d.control != nil {
		d.control.SetBusyPolls(func() metrics.BusyPolls {
			b := srv.BusyPolls()
			return metrics.BusyPolls{Hits: b.Hits, Misses: b.Misses, Skipped: b.Skipped}
		})
	}
	return d, nil
}

// Run creates the configured ports (with the settings the state file remembers), serves the
// netlink families until ctx ends, then shuts down: the server stops, every port's queues stop
// and its buffers return (checked and logged), non-persistent TAPs are removed. A port that cannot
// be created is logged and skipped; failing to listen is an error, and so is a state file Run
// must not overwrite (see loadState: config.ErrStateNewer), reported before anything is created.
func (d *Daemon) Run(ctx context.Context) error {
	st, err := d.loadState()
	if err != nil {
		return err
	}
	d.state = st
	if d.control != nil {
		stopMetrics, err := d.serveMetrics()
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	ports, notes := config.Merge(d.cfg, st)
	for _, n := range notes {
		d.log.Warn(n.Error())
	}

	l := d.opts.Listener
	if l == nil {
		// The socket belongs to the admin group when there is one, so that mode 0660 lets
		// exactly root and that group connect.
		if l, err = transport.Listen(d.cfg.Daemon.Socket, d.cfg.Daemon.SocketMode, d.cfg.Daemon.AdminGID); err != nil {
			return fmt.Errorf("listen on %s: %w", d.cfg.Daemon.Socket, err)
		}
		defer os.Remove(d.cfg.Daemon.Socket)
	}
	serveCtx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.srv.Serve(serveCtx, l) }()

	d.mu.Lock()
	d.startUplinks(context.Background())
	for _, p := range ports {
		if _, err := d.createPort(p.Spec, p.AdminUp, p.Runtime); err != nil {
			d.log.Error("port not created", "port", p.Spec.Name, "err", err)
		}
	}
	d.saveState()
	d.mu.Unlock()

	d.log.Info("manad ready", "socket", l.Addr().String(), "ports", len(ports), "tap_group", d.group)
	if d.opts.Ready != nil {
		d.opts.Ready()
	}

	select {
	case <-ctx.Done():
		d.log.Info("manad stopping", "reason", context.Cause(ctx))
	case err = <-served:
		d.log.Error("netlink server stopped", "err", err)
	}
	stopServe()
	if err == nil {
		err = <-served
		if errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) {
			err = nil
		}
	}
	d.shutdown()
	return err
}

// shutdown stops every port: queues stop, buffers come back (zero in flight, checked and logged),
// non-persistent TAPs are removed. Under the configuration lock the ports leave the registry,
// their last settings are written once, every endpoint stops at once (datapath.StopAll: on a
// segment shared by many ports, the ones still attached keep flooding the ones stopping; one at
// a time, each would pay for the traffic of all the others, 15 s for 500 ports) and the models
// stop; then the TAPs close concurrently outside the lock, the non-persistent ones of each
// namespace first unregistered in one batch (see deleteGroups).
func (d *Daemon) shutdown() {
	start := time.Now()
	d.mu.Lock()
	d.closing = true
	ports := make([]*port, 0, len(d.ports))
	for _, p := range d.ports {
		ports = append(ports, p)
	}
	changed := false
	for _, p := range ports {
		delete(d.ports, p.spec.Name)
		changed = d.noteSettings(p) || changed
		if p.watch != nil {
			p.watch()
		}
	}
	d.stopSaveRetry()
	if changed || d.unsaved {
		d.saveState()
	}
	eps := make([]*datapath.Endpoint, 0, len(ports))
	for _, p := range ports {
		if p.ep != nil {
			eps = append(eps, p.ep)
		}
	}
	datapath.StopAll(eps)
	for _, p := range ports {
		d.stop(p)
	}
	d.mu.Unlock()
	d.log.Info("ports stopped", "ports", len(ports), "took", time.Since(start))
	d.deleteGroups(ports)
	d.closeTAPs(ports, false)
	d.mu.Lock()
	for _, p := range ports {
		d.releaseWatcher(p)
	}
	d.mu.Unlock()
	d.bg.Wait()
	d.stopUplinks()
	d.log.Info("manad stopped", "ports", len(ports), "took", time.Since(start))
}

// loadState reads the state file for the start. A file it cannot use (corrupt, or unreadable) must
// neither keep the ports down nor be lost: it is set aside as state.json.bad-<time>, logged with
// the reason and the kept copy's path, and the daemon starts from the configuration.
//
// Errors (the daemon then refuses to start, touching nothing): config.ErrStateNewer when a newer
// manad wrote the file — running from the configuration would overwrite it at the first save,
// and a downgraded manad must not destroy what the newer one saved; config.ErrStateFile when it
// is not a regular file of bounded size (a FIFO, a link, a directory: not a file manad wrote);
// the error of SetAsideState when the unusable file cannot be moved (saving would replace it).
func (d *Daemon) loadState() (*config.State, error) {
	dir := d.cfg.Daemon.StateDir
	st, err := config.LoadState(dir)
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, config.ErrStateNewer):
		return nil, fmt.Errorf("%w; run the newer manad, or move the file away to start from the configuration", err)
	case errors.Is(err, config.ErrStateFile):
		// Not a file manad wrote (a FIFO, a link to /dev/zero, …): not manad's to move.
		return nil, err
	}
	kept, serr := config.SetAsideState(dir, time.Now())
	if kept == "" {
		return nil, fmt.Errorf("%w; and it cannot be set aside: %w", err, serr)
	}
	d.log.Error("state file unusable, kept a copy, starting from the configuration", "err", err, "kept", kept)
	if serr != nil {
		d.log.Warn("setting the state file aside may not survive a crash", "err", serr)
	}
	return config.NewState(), nil
}

// recordSettings remembers a port's runtime settings, writing the state file only when they
// changed (a refused request changes nothing and costs no fsync). Caller holds the configuration
// lock.
func (d *Daemon) recordSettings(p *port) {
	if d.noteSettings(p) {
		d.saveState()
	}
}

// noteSettings is recordSettings without the write: it updates the state in memory and reports
// whether it changed. Caller holds the configuration lock.
func (d *Daemon) noteSettings(p *port) bool {
	s := p.vp.Settings()
	ps := config.NewPortSettings(s, p.vp.State().AdminUp)
	key := p.vp.RSS().Key
	ps.SetDevice(p.offload(), key[:])
	ps.SetNAPI(p.vp.NAPIConfigs(), p.spec.NAPI)
	name := p.stateKey()
	if old, ok := d.state.Ports[name]; ok && reflect.DeepEqual(old.Settings, ps) && (old.Spec != nil) == p.runtime {
		return false
	}
	if p.runtime {
		d.state.RecordCreated(p.spec, ps)
	} else {
		d.state.RecordSettings(name, ps)
	}
	return true
}

// maxRequest is the largest request datagram manad accepts: room for an eBPF object in an
// XDP_ATTACH (a client's socket send buffer allows about 200 KiB by default).
const maxRequest = 256 << 10

// errNoDevice is the ENODEV a lookup returns; the server adds the kernel's extack.
var errNoDevice = unix.ENODEV
