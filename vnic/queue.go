package vnic

import (
	"sync"

	"github.com/manad/manad/vnic/pagepool"
	"github.com/manad/manad/vnic/rxbuf"
)

// Host is the kernel side of a port: where frames that pass RX go up the stack. In manad it writes
// the frame to the TAP queue of the same index.
type Host interface {
	// Deliver passes frame (which lies inside buf) up the stack on RX queue q. It is called with
	// the queue's lock held, by the goroutine that called Receive. It returns true when it keeps
	// buf; it must then return it later with buf.Pool().Put(buf), from any goroutine. Returning
	// false lets the queue recycle buf at once (page_pool_recycle_direct).
	Deliver(q int, frame []byte, buf *pagepool.Buffer) (kept bool)
}

// UntouchedHost is a Host that wants to know which frames reach it byte for byte as Receive was
// given them: those of a queue without an XDP program (with one, the program may have written
// the frame, or moved its bounds, even when it passed it). A host that trusts something about
// the frames its wire carries (their checksums, say) may then rely on it for those only.
type UntouchedHost interface {
	Host
	// DeliverUntouched is Deliver for a frame no XDP program ran on: it holds exactly the bytes
	// Receive was given. Same contract as Deliver otherwise.
	DeliverUntouched(q int, frame []byte, buf *pagepool.Buffer) (kept bool)
}

// Wire is the network side of a port: where transmitted frames go. In manad it is the port's wire
// segment (a learning switch).
type Wire interface {
	// Send puts a frame transmitted on TX queue q on the wire. frame is only valid during the
	// call.
	Send(q int, frame []byte)
}

// XDPWire is a Wire that is told which frames an XDP program sent back out (XDP_TX). Those are
// sent from inside RX queue q's processing, with the queue's lock held, so the wire must not
// process them inline in another port's RX queue: that one could bounce them back the same
// way. A Wire without SendXDP gets them through Send.
type XDPWire interface {
	Wire
	// SendXDP is Send for an XDP_TX frame of RX queue q (sent on TX queue q).
	SendXDP(q int, frame []byte)
}

// RxResult says what Receive did with a frame.
type RxResult uint8

// The outcomes of Receive.
const (
	RxDelivered      RxResult = iota // passed to Host.Deliver
	RxXDPTx                          // XDP_TX: sent back out of the port
	RxXDPDrop                        // XDP_DROP, XDP_ABORTED, an unsupported redirect or a failed program
	RxDropOversize                   // longer than the queue's datasize (2e2a83b4998a)
	RxDropNoMemory                   // the refill failed; the old buffer was re-posted
	RxDropLen0                       // a zero-length completion (pkt_len0_err)
	RxDropNotRunning                 // the queue is stopped (port down, detached or mid-reconfiguration)
)

// String returns a short description for logs and tests.
func (r RxResult) String() string {
	return [...]string{"delivered", "xdp-tx", "xdp-drop", "drop-oversize", "drop-nomem", "drop-len0",
		"drop-not-running"}[r]
}

// rxSlot is the per-queue state that outlives reconfigurations: the lock that plays the role of
// NAPI (held while a frame is processed; taking it stops the queue), the running queue if any, and
// the counters.
type rxSlot struct {
	mu    sync.Mutex
	q     *rxQueue
	stats rxStats
	qbase QStats   // stats.qstats() when q was created (QStats)
	_     [64]byte // keep neighbouring queues' locks and counters off each other's cache lines
}

// txSlot is the TX counterpart; its lock is netif_tx_lock (XDP_TX from the RX path and the host's
// transmit path share it).
type txSlot struct {
	mu      sync.Mutex
	running bool
	stats   txStats
	qbase   QStats // stats.qstats() when the queue was started
	_       [64]byte
}

// rxQueue is one running RX queue: a ring of posted buffers from the queue's page pool (the RQ and
// its WQEs) in one layout.
type rxQueue struct {
	pool     *pagepool.Pool
	ring     []*pagepool.Buffer // the posted buffers (see Receive for why they stay put)
	datasize int
	headroom int
	xdp      XDPProgram
	napiID   uint32             // the RX NAPI's id
	poolID   uint32             // 0 without a page pool (rxbuf.AllocNoPool)
	bulk     []*pagepool.Buffer // ReceiveWhole's refills
}

// newRxQueue builds a queue around a pool and the buffers to post (a pre-allocation's or a fresh
// one's); it takes ownership of both.
func newRxQueue(l rxbuf.Layout, pool *pagepool.Pool, bufs []*pagepool.Buffer, xdp XDPProgram) *rxQueue {
	return &rxQueue{pool: pool, ring: bufs, datasize: l.DataSize, headroom: l.Headroom, xdp: xdp}
}

// destroy returns every posted buffer and destroys the pool (mana_destroy_rxq). Buffers still held
// elsewhere keep the pool's memory alive until they come back; the returned Release tracks them.
// The caller must own the queue (it was unpublished under the slot lock).
func (q *rxQueue) destroy() *pagepool.Release {
	for i, b := range q.ring {
		if b != nil {
			q.pool.Recycle(b)
			q.ring[i] = nil
		}
	}
	return q.pool.Destroy()
}

// Receive processes one frame arriving from the wire on RX queue qi, as mana_process_rx_cqe and
// mana_rx_skb do for one completion: the slot is refilled before anything else (on allocation
// failure the frame is dropped and the old buffer stays posted, so the ring never shrinks), the
// frame is "DMA"ed into a buffer of the slot's layout, the XDP program gives its verdict, and a
// passing frame is handed to the Host. Safe for concurrent use; calls for the same queue are serialised.
func (p *Port) Receive(qi int, frame []byte) RxResult {
	s := &p.rx[qi]
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.stats
	n := uint64(len(frame))
	q := s.q
	if q == nil || p.rss.Load() == nil {
		// The vport is not passing traffic to a queue: the frame finds no posted WQE. That
		// includes a queue an attach in progress already started: mana steers RX to the
		// vport's queues (mana_config_rss) only once mana_alloc_queues created them all, so
		// an attach that fails half-way (the attach fault point) never passed a frame.
		st.discardNoWQE++
		st.dropped++
		return RxDropNotRunning
	}
	st.hcBytes += n
	classify(frame, n, &st.ucastPkts, &st.ucastBytes, &st.bcastPkts, &st.bcastBytes, &st.mcastPkts, &st.mcastBytes)
	switch {
	case len(frame) == 0:
		st.pktLen0Err++
		return RxDropLen0
	case len(frame) > q.datasize:
		st.oversize++
		st.dropped++
		return RxDropOversize
	}
	// mana_refill_rx_oob: allocate the replacement first.
	nb, err := q.pool.Alloc()
	if err != nil {
		st.allocFail++
		st.dropped++
		return RxDropNoMemory
	}
	// The frame goes into the replacement and the slot keeps its buffer: the two are the same
	// pool's, of one layout, so no counter, layout or XDP view tells them apart, and it is the
	// NIC filling the slot's buffer and the driver posting nb in its place, but for which of
	// the two is called which. The ring's buffers are therefore a reservation (what the
	// posted ring holds of the pool's memory) that never carries a frame. What differs is the
	// cache: a slot's buffer was last touched a ring's worth of frames ago (16 MiB at MTU 9000
	// with 1024 buffers), and copying a frame into it misses the cache on every line, where the
	// NIC's DMA costs the CPU nothing; nb usually is a buffer the pool's LIFO cache got back a
	// few frames ago, still in the cache.
	buf := nb
	mem := buf.Bytes()
	data, end := q.headroom, q.headroom+copy(mem[q.headroom:], frame)

	if q.xdp != nil {
		act, d, e, err := q.xdp.Run(qi, mem, data, end)
		if err != nil || d < 0 || e < d || e > len(mem) {
			act = XDPAborted // trace_xdp_exception
		}
		switch act {
		case XDPPass:
			data, end = d, e
		case XDPTx:
			// Counted as received (the skb path) and sent out of the same port (mana_xdp_tx).
			st.packets++
			st.bytes += n
			st.xdpTx++
			p.transmit(qi, mem[d:e], true)
			q.pool.Recycle(buf)
			return RxXDPTx
		default:
			// XDP_DROP, XDP_ABORTED, an invalid verdict, and XDP_REDIRECT (the model has no
			// redirect targets, so xdp_do_redirect fails and it falls through to ABORTED).
			st.xdpDrop++
			st.dropped++
			q.pool.Recycle(buf)
			return RxXDPDrop
		}
	}
	st.packets++
	st.bytes += n
	if data < rxbuf.LLReservedSpace {
		// Forwarded out of a MANA port, this frame would fail ip_forward's
		// skb_cow(LL_RESERVED_SPACE) and be copied by pskb_expand_head (seed 002).
		st.shortHeadroom++
	}
	var kept bool
	if p.untouched != nil && q.xdp == nil {
		kept = p.untouched.DeliverUntouched(qi, mem[data:end], buf)
	} else {
		kept = p.cfg.Host.Deliver(qi, mem[data:end], buf)
	}
	if !kept {
		q.pool.Recycle(buf)
	}
	return RxDelivered
}

// ReceiveWhole takes on RX queue qi frames wire frames of bytes bytes in all, the longest
// maxFrame bytes, all addressed as dst, that arrive as one aggregate (a TCP GSO packet the
// kernel behind an uplink carried whole). Each is accounted as Receive accounts a delivered
// frame, and takes a buffer from the pool, as the refill of its slot (mana_refill_rx_oob), but
// the aggregate's bytes are never copied into them: the caller hands the aggregate to the host as
// the superframe its coalescer would have made of those frames, and the buffers go straight
// back to the pool. It reports false, counting nothing, when Receive would not deliver every
// one of them alike: the queue is not running, an XDP program runs on it (each frame gets its
// own verdict), a frame exceeds the buffers' datasize, or the pool cannot refill them all (the
// pool counts that failure; Receive then tries frame by frame). Safe for concurrent use, as
// Receive.
func (p *Port) ReceiveWhole(qi int, dst []byte, frames int, bytes uint64, maxFrame int) bool {
	s := &p.rx[qi]
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.q
	if q == nil || p.rss.Load() == nil || q.xdp != nil || maxFrame > q.datasize || frames <= 0 {
		return false
	}
	if cap(q.bulk) < frames {
		q.bulk = make([]*pagepool.Buffer, frames)
	}
	nbs := q.bulk[:frames]
	if q.pool.TryAllocBulk(nbs) != nil {
		return false // the caller's frame-by-frame fallback counts the failure where it occurs
	}
	// As Receive: each frame's refill is the buffer it would have been copied into (the slot
	// keeps its own), and the host is done with it at once.
	for i, nb := range nbs {
		q.pool.Recycle(nb)
		nbs[i] = nil
	}
	st := &s.stats
	n := uint64(frames)
	st.hcBytes += bytes
	classifyN(dst, n, bytes, &st.ucastPkts, &st.ucastBytes, &st.bcastPkts, &st.bcastBytes, &st.mcastPkts, &st.mcastBytes)
	st.packets += n
	st.bytes += bytes
	if q.headroom < rxbuf.LLReservedSpace {
		st.shortHeadroom += n
	}
	return true
}

// DropRx counts a frame for RX queue qi that never reached the ring (the daemon's input queue for
// it was full): the hardware's hc_rx_discards_no_wqe.
func (p *Port) DropRx(qi int) {
	s := &p.rx[qi]
	s.mu.Lock()
	s.stats.discardNoWQE++
	s.stats.dropped++
	s.mu.Unlock()
}

// Transmit sends a frame the host transmitted on TX queue qi onto the wire (mana_start_xmit). It
// returns false, counting a TX drop, when the queue is stopped. Safe for concurrent use.
func (p *Port) Transmit(qi int, frame []byte) bool { return p.transmit(qi, frame, false) }

// transmit is Transmit; xdp marks an XDP_TX frame (sent from inside RX queue qi's processing).
// The TX queue's lock covers the accounting, not Wire.Send: a wire that delivers inline runs
// another port's RX queue, whose XDP_TX takes that port's TX lock, and holding ours across it
// would let two ports transmitting to each other take the TX locks in opposite orders.
func (p *Port) transmit(qi int, frame []byte, xdp bool) bool {
	t := &p.tx[qi]
	t.mu.Lock()
	st := &t.stats
	if !t.running || p.rss.Load() == nil {
		// Stopped, or started by an attach still in progress: mana wakes the TX queues
		// (netif_device_attach) only when mana_attach has created every queue.
		st.dropped++
		t.mu.Unlock()
		return false
	}
	n := uint64(len(frame))
	st.packets++
	st.bytes += n
	// No VLAN offload on a TAP, so every WQE uses the short packet format.
	st.shortPktFmt++
	st.hcBytes += n
	classify(frame, n, &st.ucastPkts, &st.ucastBytes, &st.bcastPkts, &st.bcastBytes, &st.mcastPkts, &st.mcastBytes)
	t.mu.Unlock()
	if w, ok := p.cfg.Wire.(XDPWire); ok && xdp {
		w.SendXDP(qi, frame)
	} else {
		p.cfg.Wire.Send(qi, frame)
	}
	return true
}

// TxWork is one TX work item as mana_start_xmit sees it: a frame, or a superframe the NIC
// segments (TSO, USO), or a frame whose checksum the NIC completes.
type TxWork struct {
	Len         int  // skb->len: the whole frame or superframe
	GSO         bool // a superframe
	HeaderLen   int  // gso_hs: the headers each segment repeats (GSO only)
	CsumPartial bool // CHECKSUM_PARTIAL on a frame that is not GSO
}

// Post accounts a work item the host posted on TX queue qi, by mana_start_xmit's rules: one
// packet of w.Len bytes in the short packet format (no VLAN offload on a TAP); a superframe also
// as tso_packets and tso_bytes (its payload, skb->len - gso_hs; never tso_inner_*, as nothing
// is encapsulated), a frame with a checksum to complete as csum_partial. It returns false,
// counting a TX drop, when the queue is stopped: then nothing of the item may go on the wire.
// The frames it becomes go there through PutWire. Safe for concurrent use.
func (p *Port) Post(qi int, w TxWork) bool {
	t := &p.tx[qi]
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &t.stats
	if !t.running || p.rss.Load() == nil { // as transmit
		st.dropped++
		return false
	}
	st.packets++
	st.bytes += uint64(w.Len)
	st.shortPktFmt++
	switch {
	case w.GSO:
		st.tsoPackets++
		st.tsoBytes += uint64(max(w.Len-w.HeaderLen, 0))
	case w.CsumPartial:
		st.csumPartial++
	}
	return true
}

// PutWire puts one frame of a work item Post accepted on the wire: the adapter's own counters
// (hc_tx_*) count what leaves the port, frame by frame. Safe for concurrent use.
func (p *Port) PutWire(qi int, frame []byte) {
	t := &p.tx[qi]
	n := uint64(len(frame))
	t.mu.Lock()
	st := &t.stats
	st.hcBytes += n
	classify(frame, n, &st.ucastPkts, &st.ucastBytes, &st.bcastPkts, &st.bcastBytes, &st.mcastPkts, &st.mcastBytes)
	t.mu.Unlock()
	p.cfg.Wire.Send(qi, frame)
}

// PutWireBulk accounts, as frames calls of PutWire would, frames wire frames of bytes bytes in
// all, every one addressed as dst (the Ethernet header they share), without sending them: the
// caller hands the work item Post accepted to a wire that carries it whole (a TCP superframe an
// uplink's device segments, as the NIC's TSO engine would have cut it). Safe for concurrent use.
func (p *Port) PutWireBulk(qi int, dst []byte, frames int, bytes uint64) {
	t := &p.tx[qi]
	t.mu.Lock()
	st := &t.stats
	st.hcBytes += bytes
	classifyN(dst, uint64(frames), bytes, &st.ucastPkts, &st.ucastBytes, &st.bcastPkts, &st.bcastBytes, &st.mcastPkts, &st.mcastBytes)
	t.mu.Unlock()
}

// SteerRx returns the RX queue RSS picks for frame (Toeplitz hash of the flow through the
// indirection table), or -1 when the port is not running. Safe for concurrent use.
func (p *Port) SteerRx(frame []byte) int {
	t := p.rss.Load()
	if t == nil {
		return -1
	}
	return t.steer(frame)
}

// NumRxQueues returns the number of running RX queues (0 when the port is not running). Safe for
// concurrent use.
func (p *Port) NumRxQueues() int { return int(p.runningQueues.Load()) }

// RxRingSize returns the number of buffers posted on each running RX queue (rx_queue_size), 0
// when the port is not running: what a NIC holds for a host that is slow to poll. Safe for
// concurrent use.
func (p *Port) RxRingSize() int { return int(p.rxRingSize.Load()) }
