package vnic

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic/pagepool"
)

// MinNAPIID is the first NAPI id IDs hands out: the kernel's MIN_NAPI_ID (NR_CPUS + 1 with the
// usual NR_CPUS of 8192), below which busy polling reads an id as a CPU number.
const MinNAPIID = 8193

// IDs hands out the identifiers the kernel's netdev family shows: page-pool ids (from 1) and
// NAPI ids (from MinNAPIID), each unique among the ports sharing the IDs and never reused. The
// daemon keeps one for all its ports. Safe for concurrent use; the zero value is ready.
type IDs struct {
	pool, napi atomic.Uint32
}

func (x *IDs) newPoolID() uint32 { return x.pool.Add(1) }
func (x *IDs) newNAPIID() uint32 { return x.napi.Add(1) + MinNAPIID - 1 }

// QueueType is a netdev queue's type, numbered as netdev.yaml's queue-type.
type QueueType uint8

// The queue types.
const (
	QueueRX QueueType = 0
	QueueTX QueueType = 1
)

// String returns "rx" or "tx".
func (t QueueType) String() string {
	if t == QueueTX {
		return "tx"
	}
	return "rx"
}

// Queue is one running queue as the netdev family's queue-get shows it.
type Queue struct {
	Type    QueueType
	ID      int    // queue index
	Ifindex int    // the port's (SetIfindex); 0 when unknown
	NAPIID  uint32 // the NAPI polling the queue's CQ; 0 (none) for TX queues, see NAPI
}

// NAPI is one NAPI instance with an id, as napi-get shows it. mana polls every CQ with a NAPI
// of its own, but adds the TX ones with netif_napi_add_tx (NAPI_STATE_NO_BUSY_POLL), which
// napi_hash_add gives no id: so only the RX queues' NAPIs have ids and are listed, and a TX
// queue reports none.
type NAPI struct {
	ID      uint32
	Ifindex int
	Queue   int // the RX queue it polls
	Config  NAPIConfig
}

// PagePool is one page pool as page-pool-get and page-pool-stats-get show it: a running
// queue's, or a detached one (its queue was destroyed by a reconfiguration, Close or Shutdown)
// that still waits for buffers. Queues in no-pool mode (rxbuf.AllocNoPool) have none, as a driver
// without a page pool.
type PagePool struct {
	ID      uint32 // unique per IDs, never reused
	Ifindex int
	// NAPIID is the NAPI of the queue it serves; 0 once detached, when the kernel unlinks the
	// pool from its NAPI (page_pool_unlink_napi) and stops reporting one.
	NAPIID uint32
	Queue  int
	// Inflight and InflightMem are the kernel's inflight and inflight-mem: the pages the pool
	// took from the port's memory and has not given back (wherever they are: posted, held by
	// the host, in the cache or the return ring), and their bytes.
	Inflight    int
	InflightMem int64
	// BuffersOut is the buffers handed out and not back: posted in the RX ring or held by the
	// host (after a detach, only the latter).
	BuffersOut int
	// DetachTime is when the pool's queue was destroyed; zero while it runs. DetachBoottime is
	// the same instant on CLOCK_BOOTTIME, whose seconds are the kernel's detach-time.
	DetachTime     time.Time
	DetachBoottime time.Duration
	Stats          pagepool.KernelStats
}

// Detached reports whether the pool's queue is gone.
func (pp PagePool) Detached() bool { return !pp.DetachTime.IsZero() }

// QStats are the netdev family's per-queue statistics (qstats-get) the model keeps. RX:
// rx-packets, rx-bytes, rx-alloc-fail (the refill failed, the frame was dropped), rx-hw-drops
// (frames the "NIC" dropped: no posted buffer, or longer than the buffer) and rx-hw-drop-overruns
// (of those, the ones without a posted buffer). TX: tx-packets, tx-bytes. No checksum counters:
// TAP frames carry no checksum status, so the model computes none.
type QStats struct {
	RxPackets, RxBytes, RxAllocFail, RxHwDrops, RxHwDropOverruns uint64
	TxPackets, TxBytes                                           uint64
}

func (s *QStats) add(o QStats) {
	s.RxPackets += o.RxPackets
	s.RxBytes += o.RxBytes
	s.RxAllocFail += o.RxAllocFail
	s.RxHwDrops += o.RxHwDrops
	s.RxHwDropOverruns += o.RxHwDropOverruns
	s.TxPackets += o.TxPackets
	s.TxBytes += o.TxBytes
}

func (s QStats) sub(o QStats) QStats {
	return QStats{
		RxPackets: s.RxPackets - o.RxPackets, RxBytes: s.RxBytes - o.RxBytes,
		RxAllocFail: s.RxAllocFail - o.RxAllocFail, RxHwDrops: s.RxHwDrops - o.RxHwDrops,
		RxHwDropOverruns: s.RxHwDropOverruns - o.RxHwDropOverruns,
		TxPackets:        s.TxPackets - o.TxPackets, TxBytes: s.TxBytes - o.TxBytes,
	}
}

func (r *rxStats) qstats() QStats {
	return QStats{RxPackets: r.packets, RxBytes: r.bytes, RxAllocFail: r.allocFail,
		RxHwDrops: r.discardNoWQE + r.oversize, RxHwDropOverruns: r.discardNoWQE}
}

func (t *txStats) qstats() QStats { return QStats{TxPackets: t.packets, TxBytes: t.bytes} }

// QueueQStats are one running queue's statistics since the queue was created: only the RX
// fields are set for an RX queue, only the TX ones for a TX queue.
type QueueQStats struct {
	Type QueueType
	ID   int
	QStats
}

// QStatsSnapshot is the port's qstats at one moment: per running queue, counted since that queue
// was created (a reconfiguration that rebuilds the queues starts them from 0, as the driver's
// new queues do), and Base, everything else the device counted (queues since destroyed, and
// frames that found no queue), so that Base plus the queues is Total, which never goes
// backwards: the kernel's qstats "base" (get_base_stats).
type QStatsSnapshot struct {
	Queues []QueueQStats // RX queues, then TX queues, by index
	Base   QStats
	Total  QStats
}

// SetIfindex records the ifindex of the port's netdev (its TAP), which the netdev views report.
// Safe for concurrent use.
func (p *Port) SetIfindex(ifindex int) { p.ifindex.Store(int32(ifindex)) }

// Ifindex returns what SetIfindex recorded, 0 before. Safe for concurrent use.
func (p *Port) Ifindex() int { return int(p.ifindex.Load()) }

// Queues returns the running queues, RX then TX, as queue-get lists them; none while the port
// is down (the kernel lists queues only of a running netdev). RX queues carry their NAPI's id,
// TX queues none (see NAPI). Safe for concurrent use, without the configuration lock.
func (p *Port) Queues() []Queue {
	ifi := p.Ifindex()
	var out []Queue // one allocation, at the first running queue: RX in the first half
	n := 0
	for q := range p.rx {
		s := &p.rx[q]
		s.mu.Lock()
		if rq := s.q; rq != nil {
			if out == nil {
				out = make([]Queue, 2*len(p.rx))
			}
			out[n] = Queue{Type: QueueRX, ID: q, Ifindex: ifi, NAPIID: rq.napiID}
			out[len(p.rx)+n] = Queue{Type: QueueTX, ID: q, Ifindex: ifi}
			n++
		}
		s.mu.Unlock()
	}
	if out == nil {
		return nil
	}
	return append(out[:n], out[len(p.rx):len(p.rx)+n]...) // in place: n ≤ len(p.rx)
}

// NAPIs returns the NAPI of every running RX queue (the NAPIs with an id). Safe for concurrent
// use, without the configuration lock.
func (p *Port) NAPIs() []NAPI {
	ifi := p.Ifindex()
	out := make([]NAPI, 0, len(p.rx))
	for q := range p.rx {
		s := &p.rx[q]
		s.mu.Lock()
		if rq := s.q; rq != nil {
			out = append(out, NAPI{ID: rq.napiID, Ifindex: ifi, Queue: q, Config: p.NAPIConfig(q)})
		}
		s.mu.Unlock()
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// QStats returns the port's qstats. Safe for concurrent use, without the configuration lock.
func (p *Port) QStats() QStatsSnapshot {
	var snap QStatsSnapshot
	// One allocation for both halves; TX entries go to the second half, then move down.
	all := make([]QueueQStats, 2*len(p.rx))
	rx, tx := all[:0:len(p.rx)], all[len(p.rx):len(p.rx)]
	var running QStats
	for q := range p.rx {
		s := &p.rx[q]
		s.mu.Lock()
		all := s.stats.qstats()
		if s.q != nil {
			cur := all.sub(s.qbase)
			rx = append(rx, QueueQStats{Type: QueueRX, ID: q, QStats: cur})
			running.add(cur)
		}
		s.mu.Unlock()
		snap.Total.add(all)
		t := &p.tx[q]
		t.mu.Lock()
		all = t.stats.qstats()
		if t.running {
			cur := all.sub(t.qbase)
			tx = append(tx, QueueQStats{Type: QueueTX, ID: q, QStats: cur})
			running.add(cur)
		}
		t.mu.Unlock()
		snap.Total.add(all)
	}
	snap.Queues = all[:len(rx)+copy(all[len(rx):], tx)] // tx moves down behind rx
	snap.Base = snap.Total.sub(running)
	return snap
}

// QStatsTotal is QStats().Total, everything the device counted, without building the per-queue
// views (a device-scope qstats-get needs only this). Safe for concurrent use, without the
// configuration lock.
func (p *Port) QStatsTotal() QStats {
	var total QStats
	for q := range p.rx {
		s := &p.rx[q]
		s.mu.Lock()
		total.add(s.stats.qstats())
		s.mu.Unlock()
		t := &p.tx[q]
		t.mu.Lock()
		total.add(t.stats.qstats())
		t.mu.Unlock()
	}
	return total
}

// poolRegistry lists a port's page pools for the netdev views: the detached ones here, the
// running ones in their queues. Its lock is taken before a queue lock, by the control path when
// it starts or stops a queue and by PagePools, so a pool is always listed exactly once.
type poolRegistry struct {
	mu       sync.Mutex
	detached []detachedPool
}

// addDetached lists a pool whose queue was just destroyed, unless its release already
// completed, and forgets those whose release completed since, so the list never outgrows the
// pools really draining. It reports whether d was listed. Caller holds r.mu.
func (r *poolRegistry) addDetached(d detachedPool) bool {
	r.prune()
	select {
	case <-d.rel.Done():
		return false
	default:
		r.detached = append(r.detached, d)
		return true
	}
}

// prune drops the pools whose last buffer came back (the kernel unlists them then). Caller
// holds r.mu.
func (r *poolRegistry) prune() {
	live := r.detached[:0]
	for _, d := range r.detached {
		select {
		case <-d.rel.Done():
		default:
			live = append(live, d)
		}
	}
	clear(r.detached[len(live):])
	r.detached = live
}

type detachedPool struct {
	id     uint32
	queue  int
	pool   *pagepool.Pool
	rel    *pagepool.Release
	at     time.Time
	atBoot time.Duration
}

// boottime reads CLOCK_BOOTTIME; 0 if the clock cannot be read (it always can on Linux).
func boottime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// PagePools returns the port's page pools: those of the running queues, then the detached ones
// still waiting for buffers, oldest first. A detached pool disappears once its last buffer is
// back. Safe for concurrent use (with the data path too), without the configuration lock.
func (p *Port) PagePools() []PagePool {
	var out []PagePool
	p.EachPagePool(func(pp *PagePool) { out = append(out, *pp) })
	return out
}

// EachPagePool calls fn with each of PagePools' pools in its order, without building the list:
// a PagePool is some 400 bytes, and a page-pool dump of a 16-queue port spent more on
// allocating and clearing the list than on reading the pools. fn runs with the port's pool list
// and one queue's lock held: it must not keep pp, block, or call into the port. Safe for
// concurrent use as PagePools.
func (p *Port) EachPagePool(fn func(pp *PagePool)) {
	ifi := p.Ifindex()
	p.pools.mu.Lock()
	defer p.pools.mu.Unlock()
	var pp PagePool
	for q := range p.rx {
		s := &p.rx[q]
		s.mu.Lock()
		if rq := s.q; rq != nil && rq.poolID != 0 {
			pp = rq.poolView(q, ifi)
			fn(&pp)
		}
		s.mu.Unlock()
	}
	p.pools.prune()
	for i := range p.pools.detached {
		pp = p.pools.detached[i].view(ifi)
		fn(&pp)
	}
}

// poolView is a running queue's pool as PagePools shows it. Caller holds the queue's slot lock,
// which makes it the pool's owner.
func (rq *rxQueue) poolView(q, ifi int) PagePool {
	rq.pool.FlushStats()
	st := rq.pool.Stats()
	return PagePool{ID: rq.poolID, Ifindex: ifi, NAPIID: rq.napiID, Queue: q,
		Inflight: st.Pages, InflightMem: st.PinnedBytes, BuffersOut: st.InFlight, Stats: st.Kernel()}
}

// view is a detached pool as PagePools shows it (any goroutine: Stats and InFlight are).
func (d *detachedPool) view(ifi int) PagePool {
	st := d.pool.Stats()
	return PagePool{ID: d.id, Ifindex: ifi, Queue: d.queue, Inflight: st.Pages,
		InflightMem: st.PinnedBytes, BuffersOut: d.rel.InFlight(), DetachTime: d.at, DetachBoottime: d.atBoot, Stats: st.Kernel()}
}

// PagePoolEventKind says what happened to a page pool: the three moments at which the kernel's
// net/core/page_pool_user.c announces one to the netdev family's "page-pool" group.
type PagePoolEventKind uint8

// The page-pool events.
const (
	// PagePoolAdded: a queue started with a new pool (page_pool_list: PAGE_POOL_ADD_NTF); the
	// event comes once the pool is listed, the queue's NAPI id and posted buffers with it.
	PagePoolAdded PagePoolEventKind = iota + 1
	// PagePoolDetached: the pool's queue was destroyed while buffers of the pool were still
	// out; it stays listed, with its detach time and no NAPI (page_pool_detached:
	// PAGE_POOL_CHANGE_NTF).
	PagePoolDetached
	// PagePoolRemoved: the pool is gone from the list: destroyed with nothing out (then
	// without a detach time, as page_pool_destroy unlists it before page_pool_detached), or
	// detached earlier and its last buffer is back (page_pool_unlist: PAGE_POOL_DEL_NTF).
	PagePoolRemoved
)

// String returns "add", "change" or "del", the kernel's names of the notifications.
func (k PagePoolEventKind) String() string {
	switch k {
	case PagePoolAdded:
		return "add"
	case PagePoolDetached:
		return "change"
	case PagePoolRemoved:
		return "del"
	}
	return "unknown"
}

// PagePoolEvent is one page-pool event and the pool as the kernel's notification shows it: for
// PagePoolAdded, as page_pool_create leaves it in mana_create_rxq, which creates the pool before
// the queue's CQ and NAPI and fills the ring after (so no NAPI id, nothing in flight); for
// PagePoolDetached, as PagePools shows it then; for PagePoolRemoved, as it was at the end (no
// page in flight).
type PagePoolEvent struct {
	Kind PagePoolEventKind
	Pool PagePool
}

// poolEvent reports ev to Config.OnPagePool. Caller holds p.pools.mu, so events reach the
// callback in the order the list changed, and a PagePools call after the callback shows the
// change.
func (p *Port) poolEvent(kind PagePoolEventKind, pp PagePool) {
	if p.cfg.OnPagePool != nil {
		p.cfg.OnPagePool(p, PagePoolEvent{Kind: kind, Pool: pp})
	}
}

// detachPool lists the pool of a queue just destroyed (rel is its Destroy) and announces it:
// detached while buffers are out, then removed when the last returns (from the pool's releaser,
// through Release.OnDone); removed at once when nothing was out, as page_pool_destroy skips
// page_pool_detached when page_pool_release already freed the pool. Caller holds p.pools.mu
// and the configuration lock.
func (p *Port) detachPool(d detachedPool) {
	ifi := p.Ifindex()
	if !p.pools.addDetached(d) {
		idle := d.view(ifi)
		idle.DetachTime, idle.DetachBoottime = time.Time{}, 0
		p.poolEvent(PagePoolRemoved, idle)
		return
	}
	p.poolEvent(PagePoolDetached, d.view(ifi))
	if !d.rel.OnDone(func() { p.poolReleased(d) }) {
		// The last buffer came back between the listing and here; pools.mu held, so the
		// removal still follows the detach.
		p.pools.prune()
		p.poolEvent(PagePoolRemoved, d.view(ifi))
	}
}

// poolReleased unlists a detached pool whose last buffer is back and announces it. It runs on
// the pool's releaser goroutine, without the configuration lock.
func (p *Port) poolReleased(d detachedPool) {
	p.pools.mu.Lock()
	defer p.pools.mu.Unlock()
	p.pools.prune()
	p.poolEvent(PagePoolRemoved, d.view(p.Ifindex()))
}
