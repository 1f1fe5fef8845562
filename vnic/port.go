package vnic

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic/faultpoint"
	"github.com/manad/manad/vnic/pagepool"
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// Config is the fixed configuration of a port: what its "hardware" is (Hardware, which the
// daemon's port spec embeds too), and what the model needs to run it.
type Config struct {
	Name string
	Lock *sync.Mutex // the configuration lock (rtnl analogue), shared by the daemon's ports
	Hardware
	Host   Host // required
	Wire   Wire // required
	Logger *slog.Logger
	// ResetBackoffMin and ResetBackoffMax bound the reset work's retry delay (doubling);
	// 0 means 10ms and 5s.
	ResetBackoffMin, ResetBackoffMax time.Duration
	// PoolReleaseInterval is how often a destroyed page pool with buffers still in flight retries
	// its release (page_pool's DEFER_TIME); 0 means 1s.
	PoolReleaseInterval time.Duration
	// OnReset, if set, is called after every reset-work attempt that did something: err is nil
	// when service was restored. It runs with the configuration lock held and must not block.
	OnReset func(p *Port, err error)
	// OnCarrier, if set, is called whenever the port starts or stops passing traffic: on when
	// its queues are attached (Open, a successful attach or reset), off when they are stopped
	// (Close, a reconfiguration's detach, Shutdown), as mana_attach and mana_detach call
	// netif_carrier_on and netif_carrier_off. While an attach failed and the reset work is
	// pending, the carrier stays off. It runs with the configuration lock held and must not
	// block.
	OnCarrier func(p *Port, on bool)
	// OnPagePool, if set, is called for every page-pool event (PagePoolEvent: a pool added,
	// detached with buffers out, removed), per port in the order of the changes, each while the
	// port's pool list shows exactly that change (so a PagePools call made after it sees it).
	// Added and detached, and removed for a pool destroyed with nothing out, are called from
	// the control path with the configuration lock held; removed after the last buffer came
	// back from the pool's releaser goroutine, without it. It must not block and must not call
	// the Port.
	OnPagePool func(p *Port, ev PagePoolEvent)
	// IDs hands out the port's page-pool and NAPI ids; the daemon shares one between its ports
	// so that ids are unique per daemon. nil means a source of the port's own.
	IDs *IDs
	// RSSKey is the Toeplitz key the port starts with, as mana_probe_port fills apc->hashkey
	// (netdev_rss_key_fill) before the first attach; nil means DefaultRSSKey. The daemon gives
	// the key a restart must keep. Errors of New: EINVAL unless RSSKeySize bytes.
	RSSKey []byte
}

// Port is one software MANA port. See the package documentation for the locking rules.
type Port struct {
	cfg       Config
	untouched UntouchedHost // cfg.Host, when it is one
	log       *slog.Logger
	mem       *pagepool.Memory

	// Guarded by cfg.Lock.
	set          Settings
	adminUp      bool // the administrator wants the port up (IFF_UP)
	running      bool // port_is_up: queues exist and pass traffic
	layout       rxbuf.Layout
	faults       [faultpoint.NumPoints]Fault
	resetPending bool
	closed       bool
	coalApplied  Coalesce            // the coalescing the running queues use (zero while never attached)
	draining     []*pagepool.Release // pools destroyed with buffers still out
	reconfigs    map[string]*opStats // by reconfig op
	resetsOK     uint64              // reset-work attempts that restored the port
	resetsFailed uint64

	rx            []rxSlot
	tx            []txSlot
	napi          napiConfigs // per queue index, as the kernel's dev->napi_config
	rssCfg        RSS         // guarded by cfg.Lock; the steering copy is rss
	rss           atomic.Pointer[rssTable]
	runningQueues atomic.Int32
	rxRingSize    atomic.Int32 // posted buffers per running RX queue, 0 when not running
	ifindex       atomic.Int32
	pools         poolRegistry

	resetKick  chan struct{}
	stopWorker context.CancelFunc
	workerDone chan struct{}
}

// New creates a port in the administratively down state, with settings s (rings are rounded up to
// a power of two). Errors: EINVAL with a message for an invalid configuration or settings (a
// *FieldError for a value Check refuses: the first). The
// port's reset worker runs until Shutdown.
func New(cfg Config, s Settings) (*Port, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	p := &Port{
		cfg:        cfg,
		log:        cfg.Logger.With("port", cfg.Name),
		mem:        pagepool.NewMemory(max(cfg.MemoryBudget, 0)),
		rx:         make([]rxSlot, cfg.MaxQueues),
		tx:         make([]txSlot, cfg.MaxQueues),
		napi:       make(napiConfigs, cfg.MaxQueues),
		resetKick:  make(chan struct{}, 1),
		workerDone: make(chan struct{}),
		reconfigs:  map[string]*opStats{},
	}
	p.untouched, _ = cfg.Host.(UntouchedHost)
	var err error
	if s, err = p.checkSettings(s); err != nil {
		return nil, err
	}
	p.set = s
	p.rssCfg = RSS{Key: DefaultRSSKey, Indir: defaultIndir(s.Queues)}
	if cfg.RSSKey != nil {
		copy(p.rssCfg.Key[:], cfg.RSSKey)
	}
	for i := range p.faults {
		p.faults[i].Point = faultpoint.Point(i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stopWorker = cancel
	go p.resetWorker(ctx)
	return p, nil
}

// fill applies the defaults and checks the fields New needs besides the checked values
// (Check's): the first value refused is returned as its *FieldError.
func (c *Config) fill() error {
	c.defaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.IDs == nil {
		c.IDs = &IDs{}
	}
	if c.ResetBackoffMin <= 0 {
		c.ResetBackoffMin = 10 * time.Millisecond
	}
	if c.ResetBackoffMax < c.ResetBackoffMin {
		c.ResetBackoffMax = max(5*time.Second, c.ResetBackoffMin)
	}
	switch {
	case c.Name == "":
		return nlerr.New(unix.EINVAL, "port needs a name")
	case c.Lock == nil:
		return nlerr.New(unix.EINVAL, "port %s needs a configuration lock", c.Name)
	case c.Host == nil || c.Wire == nil:
		return nlerr.New(unix.EINVAL, "port %s needs a host and a wire", c.Name)
	}
	if errs := c.check(); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// checkSettings validates a complete set of settings the way the individual Set methods would
// (Check, whose first refusal it returns) and returns it with the rings rounded up.
func (p *Port) checkSettings(s Settings) (Settings, error) {
	if errs := Check(p.cfg, s); len(errs) > 0 {
		return s, errs[0]
	}
	s.RxRing, s.TxRing = RoundRing(s.RxRing), RoundRing(s.TxRing)
	if s.Coalesce == (Coalesce{}) {
		s.Coalesce = DefaultCoalesce() // not given: the probe's values
	}
	if err := p.CheckCoalesce(s.Coalesce); err != nil {
		return s, err
	}
	return s, nil
}

// Name returns the port's name.
func (p *Port) Name() string { return p.cfg.Name }

// Config returns the port's fixed configuration.
func (p *Port) Config() Config { return p.cfg }

// Memory returns the port's page memory (its budget and usage).
func (p *Port) Memory() *pagepool.Memory { return p.mem }

// assertLocked panics when the configuration lock is free, like ASSERT_RTNL: calling a
// configuration method without it is a bug in the caller.
func (p *Port) assertLocked() {
	if p.cfg.Lock.TryLock() {
		p.cfg.Lock.Unlock()
		panic("vnic: " + p.cfg.Name + ": configuration lock not held")
	}
}

// Settings returns the current settings: those of the running queues, or, while the port is down
// or detached, those it will use when it comes up. Caller holds the configuration lock.
func (p *Port) Settings() Settings {
	p.assertLocked()
	return p.set
}

// Running reports whether the port's queues run (State().Running, without the rest of State's
// per-queue walk: what LINKSTATE_GET needs). Caller holds the configuration lock.
func (p *Port) Running() bool {
	p.assertLocked()
	return p.running
}

// maxMTU is ndev->max_mtu (Config.maxMTU).
func (p *Port) maxMTU(xdp bool) int { return p.cfg.maxMTU(xdp) }

// layoutFor returns the RX buffer layout the port uses with settings s.
func (p *Port) layoutFor(s Settings) (rxbuf.Layout, error) {
	return rxbuf.Compute(rxbuf.Params{
		Rule: p.cfg.Rule, PageSize: p.cfg.PageSize, MTU: s.MTU, XDP: s.XDP != nil,
		FullPageRx: s.PrivFlags&privflag.FullPageRx != 0, RingSize: s.RxRing, Queues: s.Queues,
		Alloc: p.cfg.RxAlloc,
	})
}

// Open brings the port up (mana_open): it allocates and fills every queue with the current
// settings. It is a no-op when the port is running. Errors: ENOMEM when the memory budget cannot
// hold the rings (the port stays down); ENODEV after Shutdown. Caller holds the configuration
// lock.
func (p *Port) Open() error {
	p.assertLocked()
	if p.closed {
		return nlerr.New(unix.ENODEV, "port %s is being removed", p.cfg.Name)
	}
	if p.running {
		p.adminUp = true
		return nil
	}
	start := time.Now()
	if err := p.attach(p.set, nil, false); err != nil {
		p.adminUp = false
		p.log.Warn("open failed", "err", err)
		return nlerr.Wrap(err, unix.ENOMEM, "mana_alloc_queues failed")
	}
	p.adminUp = true
	p.resetPending = false
	p.log.Info("port up", "queues", p.set.Queues, "layout", p.layout.Reason, "took", time.Since(start))
	return nil
}

// Close brings the port down (mana_close): queues are stopped and every posted buffer goes back to
// its pool. A reset pending from a failed attach stands down. Never fails. Caller holds the
// configuration lock.
func (p *Port) Close() {
	p.assertLocked()
	p.adminUp = false
	if !p.running {
		return
	}
	p.stopQueues()
	p.log.Info("port down")
}

// allocation is a set of RX rings, allocated but not yet running: what mana_pre_alloc_rxbufs
// prepares before a reconfiguration detaches the port (and what attach builds when there is none).
// Pools whose queue was created are set to nil; free releases the rest.
type allocation struct {
	layout rxbuf.Layout
	pools  []*pagepool.Pool
	bufs   [][]*pagepool.Buffer
}

// allocRings allocates s.Queues pools with s.RxRing posted buffers each, in layout l. With
// prealloc set it is mana_pre_alloc_rxbufs and the prealloc fault point fires half-way through.
// On failure everything allocated is released. Caller holds the configuration lock.
func (p *Port) allocRings(s Settings, l rxbuf.Layout, prealloc bool) (*allocation, error) {
	a := &allocation{layout: l, pools: make([]*pagepool.Pool, 0, s.Queues), bufs: make([][]*pagepool.Buffer, 0, s.Queues)}
	for q := 0; q < s.Queues; q++ {
		if prealloc && q == s.Queues/2 {
			if err := p.fire(faultpoint.Prealloc); err != nil {
				p.free(a)
				return nil, err
			}
		}
		pool, err := pagepool.New(pagepool.Config{
			Mem: p.mem, PageBytes: l.PageBytes, BufSize: l.BufSize, FragCount: l.FragCount,
			ReturnRingSize: s.RxRing, Name: fmt.Sprintf("%s/rx%d", p.cfg.Name, q), Logger: p.log,
			ReleaseInterval: p.cfg.PoolReleaseInterval, Order: l.Order,
			NoRecycle: !p.cfg.RxRecycle.On() || p.cfg.RxAlloc == rxbuf.AllocNoPool,
		})
		if err != nil {
			p.free(a)
			return nil, err
		}
		bufs := make([]*pagepool.Buffer, s.RxRing)
		if err := pool.AllocBulk(bufs); err != nil {
			p.track(pool.Destroy())
			p.free(a)
			return nil, fmt.Errorf("RX queue %d: %w", q, err)
		}
		a.pools = append(a.pools, pool)
		a.bufs = append(a.bufs, bufs)
	}
	return a, nil
}

// free releases what an allocation still holds (mana_pre_dealloc_rxbufs).
func (p *Port) free(a *allocation) {
	if a == nil {
		return
	}
	for i, pool := range a.pools {
		if pool == nil {
			continue
		}
		for _, b := range a.bufs[i] {
			pool.Recycle(b)
		}
		p.track(pool.Destroy())
		a.pools[i], a.bufs[i] = nil, nil
	}
}

// track keeps a destroyed pool's release until its last buffer is back.
func (p *Port) track(r *pagepool.Release) {
	p.prune()
	select {
	case <-r.Done():
	default:
		p.draining = append(p.draining, r)
	}
}

// prune forgets the releases that completed.
func (p *Port) prune() {
	live := p.draining[:0]
	for _, d := range p.draining {
		select {
		case <-d.Done():
		default:
			live = append(live, d)
		}
	}
	clear(p.draining[len(live):])
	p.draining = live
}

// attach creates the queues for settings s and starts them (mana_attach → mana_alloc_queues).
// The rings come from a, when given (a reconfiguration's pre-allocation), or are allocated here.
// The attach fault point fires after half of the queues were started; the queues started so far
// are then stopped again. On failure the port is left without queues. Caller holds the
// configuration lock.
func (p *Port) attach(s Settings, a *allocation, inject bool) error {
	l, err := p.layoutFor(s)
	if err != nil {
		return err
	}
	if a == nil {
		if a, err = p.allocRings(s, l, false); err != nil {
			return err
		}
		defer p.free(a)
	} else if !a.layout.SameBuffers(l) || len(a.pools) != s.Queues {
		// mana_get_rxbuf_pre: "RX buffer ... mismatch" makes queue creation fail.
		return nlerr.New(unix.ENOMEM, "pre-allocated RX buffers do not match the new layout")
	}
	for q := 0; q < s.Queues; q++ {
		if inject && q == s.Queues/2 {
			if err := p.fire(faultpoint.Attach); err != nil {
				p.stopQueues()
				return err
			}
		}
		rq := newRxQueue(l, a.pools[q], a.bufs[q], s.XDP)
		a.pools[q], a.bufs[q] = nil, nil
		// A new RX queue gets a new NAPI id and, unless it has no pool, a new page-pool id.
		rq.napiID = p.cfg.IDs.newNAPIID()
		if p.cfg.RxAlloc != rxbuf.AllocNoPool {
			rq.poolID = p.cfg.IDs.newPoolID()
		}
		p.pools.mu.Lock()
		slot := &p.rx[q]
		slot.mu.Lock()
		slot.q = rq
		slot.qbase = slot.stats.qstats()
		slot.mu.Unlock()
		if rq.poolID != 0 {
			// As page_pool_create announces it in mana_create_rxq: before the queue's CQ
			// and NAPI exist (no napi-id) and before a page is taken (inflight 0).
			p.poolEvent(PagePoolAdded, PagePool{ID: rq.poolID, Ifindex: p.Ifindex(), Queue: q})
		}
		p.pools.mu.Unlock()
		t := &p.tx[q]
		t.mu.Lock()
		t.running = true
		t.qbase = t.stats.qstats()
		t.mu.Unlock()
	}
	p.layout = l
	p.running = true
	p.carrier(true)
	p.rssCfg.Indir = defaultIndir(s.Queues) // mana_rss_table_init: the user's table is lost
	p.rss.Store(newRSSTable(&p.rssCfg))
	p.runningQueues.Store(int32(s.Queues))
	p.rxRingSize.Store(int32(s.RxRing))
	p.coalApplied = s.Coalesce // mana_config_rss at attach programs the stored coalescing
	return nil
}

// stopQueues stops every queue and destroys its pool (mana_dealloc_queues); buffers still held
// elsewhere keep their pool's pages until they return. Caller holds the configuration lock.
func (p *Port) stopQueues() {
	if p.running {
		p.carrier(false)
	}
	p.running = false
	p.rss.Store(nil)
	p.runningQueues.Store(0)
	p.rxRingSize.Store(0)
	for q := range p.rx {
		t := &p.tx[q]
		t.mu.Lock()
		t.running = false
		t.mu.Unlock()
		p.pools.mu.Lock()
		s := &p.rx[q]
		s.mu.Lock()
		rq := s.q
		s.q = nil
		s.mu.Unlock()
		// The queue is unpublished, so this goroutine now owns its pool.
		if rq != nil {
			r := rq.destroy()
			if rq.poolID != 0 {
				p.detachPool(detachedPool{id: rq.poolID, queue: q, pool: rq.pool, rel: r, at: time.Now(), atBoot: boottime()})
			}
			p.track(r)
		}
		p.pools.mu.Unlock()
	}
}

// carrier reports a carrier change to Config.OnCarrier. Caller holds the configuration lock.
func (p *Port) carrier(on bool) {
	if p.cfg.OnCarrier != nil {
		p.cfg.OnCarrier(p, on)
	}
}

// detach stops the port for a reconfiguration (mana_detach). The detach fault point fires before
// anything is stopped, so a failed detach leaves the port running as it was.
func (p *Port) detach() error {
	if err := p.fire(faultpoint.Detach); err != nil {
		return err
	}
	p.stopQueues()
	return nil
}

// Teardown is what Shutdown leaves behind: the page pools still waiting for buffers.
type Teardown struct {
	port     string
	releases []*pagepool.Release
	worker   <-chan struct{}
}

// Wait blocks until the port's reset worker has exited and every buffer is back in its pool, or
// ctx ends. On ctx end it returns an error wrapping EBUSY that reports the leaked buffers.
func (t *Teardown) Wait(ctx context.Context) error {
	select {
	case <-t.worker:
	case <-ctx.Done():
		return nlerr.New(unix.EBUSY, "port %s: reset worker still running", t.port)
	}
	leaked := 0
	for _, r := range t.releases {
		if err := r.Wait(ctx); err != nil {
			leaked += r.InFlight()
		}
	}
	if leaked > 0 {
		return nlerr.New(unix.EBUSY, "port %s: %d RX buffers still in flight", t.port, leaked)
	}
	return nil
}

// InFlight returns the buffers not yet back.
func (t *Teardown) InFlight() int {
	n := 0
	for _, r := range t.releases {
		n += r.InFlight()
	}
	return n
}

// Shutdown removes the port: it stops the reset worker and every queue; later configuration calls
// fail with ENODEV. The returned Teardown waits for the buffers still in flight. Caller holds the
// configuration lock.
func (p *Port) Shutdown() *Teardown {
	p.assertLocked()
	if !p.closed {
		p.closed = true
		p.stopWorker()
		p.Close()
	}
	p.prune()
	return &Teardown{port: p.cfg.Name, releases: append([]*pagepool.Release(nil), p.draining...), worker: p.workerDone}
}

// State is a snapshot of a port for display.
type State struct {
	Name                    string
	Settings                Settings
	AdminUp, Running        bool
	Detached                bool // admin up but without queues: a failed attach awaits the reset work
	ResetPending            bool
	MinMTU, MaxMTU          int
	MaxQueues, PageSize     int
	Rule                    rxbuf.Rule
	Layout                  rxbuf.Layout // of the running queues, else what the settings give
	PagesPinned             int          // pool pages held, including those of draining pools
	BytesPinned             int64
	BuffersPosted           int // in the RX rings
	BuffersInFlight         int // handed out by the pools and not posted: held by the host or draining
	MemoryInUse, MemoryPeak int64
	MemoryBudget            int64 // 0 = unlimited
	Faults                  []Fault
	ReleasesPending         int // destroyed pools still waiting for buffers
	Netdev                  NetdevStats
}

// State returns a snapshot of the port. Caller holds the configuration lock.
func (p *Port) State() State {
	p.assertLocked()
	st := State{
		Name: p.cfg.Name, Settings: p.set, AdminUp: p.adminUp, Running: p.running,
		Detached: p.adminUp && !p.running, ResetPending: p.resetPending,
		MinMTU: MinMTU, MaxMTU: p.maxMTU(p.set.XDP != nil), MaxQueues: p.cfg.MaxQueues,
		PageSize: p.cfg.PageSize, Rule: p.cfg.Rule, MemoryBudget: p.mem.Budget(), Faults: p.Faults(),
		Netdev: p.NetdevStats(),
	}
	if p.running {
		st.Layout = p.layout
	} else {
		st.Layout, _ = p.layoutFor(p.set)
	}
	for q := range p.rx {
		s := &p.rx[q]
		s.mu.Lock()
		if s.q != nil {
			s.q.pool.FlushStats() // holding the queue lock makes this goroutine the pool's owner
			ps := s.q.pool.Stats()
			st.PagesPinned += ps.Pages
			st.BytesPinned += ps.PinnedBytes
			st.BuffersPosted += len(s.q.ring)
			// Buffers the host gave back with Put (a coalesced run, written) wait in the
			// pool's return ring until the next refill drains it: back, not in flight. A Put
			// under way may be drained before it is counted, hence the clamp; once the Puts
			// settle the figure is exact.
			st.BuffersInFlight += ps.InFlight - len(s.q.ring) - max(0, int(ps.Puts)-int(ps.RingDrained))
		}
		s.mu.Unlock()
	}
	p.prune()
	for _, r := range p.draining {
		st.BuffersInFlight += r.InFlight()
		st.ReleasesPending++
	}
	// Read last: a release that completed above has refunded its pages by now.
	st.MemoryInUse, st.MemoryPeak = p.mem.InUse(), p.mem.Peak()
	return st
}

// SetMemoryBudget changes the port's RX memory budget (bytes; 0 = unlimited). Lowering it below
// what is in use fails no running queue: only later allocations see it. Caller holds the
// configuration lock.
func (p *Port) SetMemoryBudget(b int64) {
	p.assertLocked()
	p.mem.SetBudget(max(b, 0))
}
