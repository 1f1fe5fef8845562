package datapath

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/offload"
	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
)

const (
	// budget is how many frames one pass handles before looking at anything else: a TX
	// goroutine re-checks for Stop, a drain of the RX input lets go of the queue
	// (NAPI_POLL_WEIGHT).
	budget = 64
	// frameOverhead is what a frame carries beyond the MTU: the Ethernet header and one VLAN
	// tag.
	frameOverhead = 14 + 4
)

// Endpoint attaches one port to a wire segment and to its TAP. It is the port's vnic.Host (RX
// frames are written to the TAP queue of the same index) and vnic.Wire (TX frames go to the
// segment), and it runs the port's per-queue goroutines:
//
//   - TX, one per TAP queue: reads the frames the kernel transmits (parked on its queue's epoll),
//     and hands each to Port.Transmit, which accounts it and calls Send, which switches it on
//     the segment to the destination endpoints;
//   - RX, one per queue: processes frames from the queue's bounded input with Port.Receive
//     (RSS picked the queue with Port.SteerRx), whose Deliver writes them to the TAP.
//
// A unicast frame (or a small flood) arriving for an RX queue that is idle is processed inline, to completion, by the
// goroutine that forwarded it (the sender's TX goroutine): wire → RX ring → TAP write without a
// goroutine hand-off, which is what makes the data path as fast as a bare TAP-to-TAP relay. A
// sender that finds the queue busy (another sender, or the queue's goroutine, holds it) waits
// for it, as a wire holds a frame back behind the one before; a sender that finds a backlog
// drains it first, which keeps frames in order, and queues its frame behind what one budget
// left. Only frames produced inside an RX queue's processing (XDP_TX sends them
// back out of the port, through SendXDP) are never processed inline: that recursion could
// otherwise take queue locks of two ports in opposite orders. Everything else a port transmits
// is, whatever its own RX queues are doing: a TCP flow's data leaves on TX queue N while its
// ACKs arrive on RX queue N, and deferring the data then would push a whole window through the
// inputs.
//
// A flood to more than floodInlineMax members is never processed inline: the segment puts a
// copy in every member's input, and the queues' goroutines deliver them, taking turns in the
// segment's poll slots (pollSlots).
//
// Each RX queue's input holds as many frames as the port posts RX buffers per queue
// (rx_queue_size): what a NIC's ring holds for a host that is slow to poll. Beyond that a frame
// is dropped and counted as hc_rx_discards_no_wqe, as the NIC would.
//
// On a TAP with virtio headers (tap.Config.Offload) the TX goroutine cuts each superframe the
// kernel hands over into wire frames and finishes partial checksums (package offload), so
// every frame on the wire is MTU-sized and complete; on receive, consecutive TCP segments of
// one flow are written to the TAP as one superframe (gro.go), and so are UDP datagrams where the
// TAP's features allow it (SetUDPGRO), any other frame behind an empty header. A TCP superframe
// whose segments the destination would merge back into it is not cut at all: it crosses whole,
// each frame it stands for still accounted on both sides (sendWhole, inputWhole).
//
// The per-frame path allocates nothing and takes no lock but the destination queue's (a TryLock
// inline, the input's mutex otherwise) and vnic's per-queue ones.
//
// Polling (see the package documentation) is per queue, by the port's NAPI settings
// (vnic.Port.NAPIConfig, read lock-free at the end of each batch that found work): with
// defer-hard-irqs and gro-flush-timeout set, queue i's TAP reads and RX input are served by a
// poller of the segment's Pollers for defer-hard-irqs × gro-flush-timeout (or irq-suspend-timeout,
// when longer) after the last frame, instead of parking; with either unset, or with no poller
// slot free, the queue's goroutines park as described above. Stop, SetChannels and SetOffload end
// the polling of the queues they stop before they return; the port going down, or the setting
// going off, ends it at the poller's next pass.
type Endpoint struct {
	seg    *Segment
	mac    net.HardwareAddr
	log    *slog.Logger
	inline bool // process RX in the sender's goroutine when the queue is idle

	handle atomic.Pointer[port]
	vp     atomic.Pointer[vnic.Port]
	qs     atomic.Pointer[queueSet]
	udpGRO atomic.Bool // SetUDPGRO

	ctl     sync.Mutex // serialises Start, Stop and SetChannels
	dev     *tap.Device
	started bool
}

// queueSet is the endpoint's queues, published as one immutable snapshot.
type queueSet struct{ q []*queue }

// queue is one queue index's TAP queue and goroutines.
type queue struct {
	e   *Endpoint
	idx int
	tq  *tap.Queue
	pk  parker // where the TX goroutine waits for the TAP queue (park.go)

	// busy is held by whoever processes frames for RX queue idx (an inline sender or the
	// queue's goroutine): the NAPI context.
	busy  sync.Mutex
	in    *inputRing
	wake  chan struct{}
	drops atomic.Uint64 // input-full drops not yet handed to Port.DropRx

	// The TAP write of Deliver. Deliver calls for one queue are serialised by vnic's RX queue
	// lock, so these need no lock of their own; writeFn (tap.Queue.Control's callback) is
	// built once so that a write does not allocate a closure. On a TAP with virtio headers
	// (tap.Config.Offload) the frame goes out behind an all-zero header (nothing to finish) in
	// one writev of wiov.
	wframe  []byte
	werr    error
	writeFn func(fd int)
	vnet    bool
	wiov    [2]unix.Iovec
	zeroHdr [offload.HeaderLen]byte

	// Receive coalescing on a TAP with virtio headers (gro.go); guarded by busy.
	co      *offload.Coalescer
	held    []*pagepool.Buffer // the RX buffers of the run in co
	giov    []unix.Iovec
	gframe  [][]byte
	flushFn func(fd int)
	whole   [2][]byte               // inputWhole's writev: its virtio header, the aggregate
	wholeH  [offload.HeaderLen]byte // the virtio header
	listed  bool                    // in the segment's pending list
	// uco is the UDP run, next to co's TCP one: nil without USO on the TAP, or after the TAP
	// refused a USO superframe (gro.go). It is used only while the endpoint's udpGRO is on.
	uco *offload.UDPCoalescer
	// vin vouches for the frame an inline sender is passing through Port.Receive right now
	// (the segment its Segmenter built), for DeliverUntouched; guarded by busy.
	vin offload.Checked

	// The TX side of a TAP with virtio headers: superframes the kernel hands over are cut into
	// wire frames, each transmitted on its own. emitFn is built once, like writeFn.
	seg      *offload.Segmenter
	txPort   *vnic.Port
	maxFrame int // the longest frame the port may put on the wire
	emitFn   func(frame []byte)

	// clock is the segment clock read when the TX goroutine's current batch began, 0 between
	// batches: Send uses it instead of reading the clock for every frame.
	clock atomic.Int64

	// The TAP read: readFn reads one batch (tap.Queue.Control's callback, built once by
	// txLoop), and leaves how many frames it read in nread, whether more may be waiting (a
	// full batch, a hand-off to a poller or an error: not EAGAIN) in more, and a read error in
	// rerr; pollFn is readFn for a poller. Whoever reads the queue owns these: its TX
	// goroutine, or the poller it handed the queue over to (poller.go), never both.
	readFn  func(fd int)
	pollFn  func(fd int)
	pollMax int // how many frames pollFn reads at most (pollOnce)
	nread   int
	more    bool
	rerr    error
	// handoff is set by readFn when a batch found work and then nothing more, and the
	// queue's NAPI settings make it poll: txLoop then hands the queue to a poller.
	handoff bool
	// polled is set while a poller reads the queue and drains its input: senders do not
	// kick its RX goroutine then. back is where the poller gives the queue back.
	polled atomic.Bool
	back   chan struct{}
	// wrote is set by a TAP write (write, writeRun) while polled: the kernel may have queued
	// a reply on the TAP queue already, which its poller reads without waiting for epoll.
	wrote atomic.Bool

	stop chan struct{}
	wg   sync.WaitGroup

	stats queueStats
}

type queueStats struct {
	rxInline, rxDeferred, rxInputDrops, rxWriteErrors atomic.Uint64
	txRunts, txOversize                               atomic.Uint64
	txSuperframes, txBadVnet                          atomic.Uint64
	rxCoalesced                                       atomic.Uint64
	rxWaited                                          atomic.Uint64
	rxWhole                                           atomic.Uint64
	polls, pollHits, pollNanos                        atomic.Uint64 // PollStats
}

// carry adds the counters of s, a queue being replaced, to t, its replacement's.
func (t *queueStats) carry(s *queueStats) {
	for _, c := range [][2]*atomic.Uint64{
		{&t.rxInline, &s.rxInline}, {&t.rxDeferred, &s.rxDeferred}, {&t.rxInputDrops, &s.rxInputDrops},
		{&t.rxWriteErrors, &s.rxWriteErrors}, {&t.txRunts, &s.txRunts}, {&t.txOversize, &s.txOversize},
		{&t.txSuperframes, &s.txSuperframes}, {&t.txBadVnet, &s.txBadVnet}, {&t.rxCoalesced, &s.rxCoalesced},
		{&t.rxWaited, &s.rxWaited}, {&t.rxWhole, &s.rxWhole},
		{&t.polls, &s.polls}, {&t.pollHits, &s.pollHits}, {&t.pollNanos, &s.pollNanos},
	} {
		c[0].Add(c[1].Load())
	}
}

// NewEndpoint returns an endpoint for a port with the given MAC on segment seg. The MAC is only
// reported (the segment learns addresses from traffic, as a switch does). log may be nil
// (slog.Default()). Create the vnic.Port with the endpoint as its Host and Wire, then Start it.
func NewEndpoint(seg *Segment, mac net.HardwareAddr, log *slog.Logger) *Endpoint {
	if log == nil {
		log = slog.Default()
	}
	return &Endpoint{seg: seg, mac: append(net.HardwareAddr(nil), mac...), log: log, inline: true}
}

// Segment returns the segment the endpoint attaches to.
func (e *Endpoint) Segment() *Segment { return e.seg }

// MAC returns the MAC the endpoint was created with.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// label names the endpoint in FDB listings: its port's name.
func (e *Endpoint) label() string {
	if p := e.vp.Load(); p != nil {
		return p.Name()
	}
	return e.mac.String()
}

// Start attaches the endpoint to its segment and starts a TX and an RX goroutine for each of
// dev's queues. p must have been created with e as its Host and Wire; its RX queues should not
// outnumber dev's queues (SetChannels keeps them in step). The port may be up or down: frames for
// a port that is down are dropped and counted by vnic. Errors: EINVAL for a port not wired to e
// or a device without queues; EBUSY when already started.
func (e *Endpoint) Start(p *vnic.Port, dev *tap.Device) error {
	if p == nil || dev == nil {
		return nlerr.New(unix.EINVAL, "endpoint needs a port and a TAP")
	}
	if c := p.Config(); c.Host != vnic.Host(e) || c.Wire != vnic.Wire(e) {
		return nlerr.New(unix.EINVAL, "port %s was not created with this endpoint as its Host and Wire", p.Name())
	}
	e.ctl.Lock()
	defer e.ctl.Unlock()
	if e.started {
		return nlerr.New(unix.EBUSY, "endpoint of port %s already started", p.Name())
	}
	files := dev.Queues()
	if len(files) == 0 {
		return nlerr.New(unix.EINVAL, "TAP %s has no queues", dev.Name())
	}
	qs := &queueSet{q: make([]*queue, 0, len(files))}
	for i, f := range files {
		qq, err := e.newQueue(i, f, dev.VnetHdr(), usoOn(dev))
		if err != nil {
			closeParkers(qs.q)
			return err
		}
		qs.q = append(qs.q, qq)
	}
	e.dev = dev
	e.vp.Store(p)
	e.qs.Store(qs)
	e.handle.Store(e.seg.join(e))
	for _, qq := range qs.q {
		qq.start(p)
	}
	e.started = true
	e.log.Info("endpoint started", "port", p.Name(), "segment", e.seg.Name(), "queues", len(qs.q))
	return nil
}

// Stop detaches the endpoint from its segment (forgetting the addresses learned on it), ends the
// port's captures and stops its goroutines; frames still waiting in the RX inputs are dropped
// and counted. The TAP and the port are left alone. Stopping an endpoint that is not started is
// a no-op.
func (e *Endpoint) Stop() {
	e.ctl.Lock()
	defer e.ctl.Unlock()
	if !e.started {
		return
	}
	if h := e.handle.Swap(nil); h != nil {
		e.seg.leave(h)
	}
	e.seg.captures.endMember(e) // capture.go
	p := e.vp.Load()
	qs := e.qs.Load()
	stopQueues(p, qs.q)
	e.qs.Store(nil)
	e.vp.Store(nil)
	e.dev = nil
	e.started = false
	e.log.Info("endpoint stopped", "port", p.Name())
}

// StopAll stops every endpoint of eps as Stop does, all at once: every queue is told to stop
// before any is waited for, and each segment drops its leaving members (and the addresses
// learned on them) in one copy of its tables. Stopping a thousand ports of one segment one by
// one would copy the segment's member list and table a thousand times, and each port would wait
// for its goroutines while the ports still attached keep flooding it. The caller must not hold
// the ctl lock of any of them (Stop, SetChannels and SetOffload take it); endpoints not started
// are skipped.
func StopAll(eps []*Endpoint) {
	var run []*Endpoint
	for _, e := range eps {
		e.ctl.Lock()
		if e.started {
			run = append(run, e)
		} else {
			e.ctl.Unlock()
		}
	}
	for _, e := range run {
		signalQueues(e.qs.Load().q)
	}
	leaving := map[*Segment][]*port{}
	for _, e := range run {
		if h := e.handle.Swap(nil); h != nil {
			leaving[e.seg] = append(leaving[e.seg], h)
		}
	}
	for seg, ps := range leaving {
		seg.leave(ps...)
	}
	for _, e := range run {
		p := e.vp.Load()
		waitQueues(p, e.qs.Load().q)
		e.qs.Store(nil)
		e.vp.Store(nil)
		e.dev = nil
		e.started = false
		e.ctl.Unlock()
		e.log.Info("endpoint stopped", "port", p.Name())
	}
}

// SetChannels changes the number of queues to n around apply, the port's own reconfiguration
// (typically func() error { return port.SetChannels(n) }, called with the configuration lock
// held, as SetChannels itself must be). The order keeps every RX queue the port runs backed by a
// TAP queue and a goroutine: growing attaches the TAP queues and starts their goroutines before
// apply (and undoes that when apply fails); shrinking runs apply first, then stops the surplus
// goroutines and detaches their TAP queues. Frames the kernel had queued on a removed TAP queue
// are lost, as a NIC loses what is in flight on a channel change.
//
// Errors: apply's error (nothing changed); the TAP's when it cannot attach queues (apply not
// called); EINVAL for n outside 1..tap.MaxQueues; ENODEV when the endpoint is not started.
func (e *Endpoint) SetChannels(n int, apply func() error) error {
	if n < 1 || n > tap.MaxQueues {
		return nlerr.New(unix.EINVAL, "queue count %d out of range 1..%d", n, tap.MaxQueues)
	}
	e.ctl.Lock()
	defer e.ctl.Unlock()
	if !e.started {
		return nlerr.New(unix.ENODEV, "endpoint not started")
	}
	p := e.vp.Load()
	old := e.qs.Load()
	cur := len(old.q)
	switch {
	case n > cur:
		if err := e.dev.SetQueues(n); err != nil {
			return err
		}
		files := e.dev.Queues()
		grown := &queueSet{q: append([]*queue(nil), old.q...)}
		for i := cur; i < n; i++ {
			qq, err := e.newQueue(i, files[i], e.dev.VnetHdr(), usoOn(e.dev))
			if err != nil {
				closeParkers(grown.q[cur:])
				e.undoGrow(cur)
				return err
			}
			grown.q = append(grown.q, qq)
		}
		for _, qq := range grown.q[cur:] {
			qq.start(p)
		}
		e.qs.Store(grown)
		if err := apply(); err != nil {
			e.qs.Store(old)
			stopQueues(p, grown.q[cur:])
			e.undoGrow(cur)
			return err
		}
	case n < cur:
		if err := apply(); err != nil {
			return err
		}
		e.qs.Store(&queueSet{q: old.q[:n:n]})
		stopQueues(p, old.q[n:])
		if err := e.dev.SetQueues(n); err != nil {
			// Closing files cannot fail in a way that leaves them attached; report it anyway.
			e.log.Error("detaching TAP queues failed", "err", err)
		}
	default:
		return apply()
	}
	e.log.Info("endpoint queues changed", "port", p.Name(), "from", cur, "to", n)
	return nil
}

// SetOffload turns the TAP's virtio header and offloads on or off (tap.Device.SetOffload, for
// ethtool -K) without taking the port down: the queues' goroutines stop, the TAP's queues are
// attached again with the new setting, and new goroutines start on them, carrying the old
// queues' counters. What is in flight meanwhile is lost (and counted), as across a NIC's
// features change. The kernel turns the TAP's carrier on: callers set it again. Call it with the
// configuration lock held, as SetChannels.
//
// Errors: ENODEV when the endpoint is not started; the TAP's, after which the endpoint runs on
// the queues the TAP has, with whichever setting it kept (tap.Device.VnetHdr).
func (e *Endpoint) SetOffload(on bool) error {
	e.ctl.Lock()
	defer e.ctl.Unlock()
	if !e.started {
		return nlerr.New(unix.ENODEV, "endpoint not started")
	}
	if e.dev.VnetHdr() == on {
		return nil
	}
	p := e.vp.Load()
	old := e.qs.Load()
	e.qs.Store(nil) // senders meanwhile find no queue: vnic counts their frames as dropped
	stopQueues(p, old.q)
	err := e.dev.SetOffload(on)
	qs := &queueSet{}
	for i, f := range e.dev.Queues() {
		qq, qerr := e.newQueue(i, f, e.dev.VnetHdr(), usoOn(e.dev))
		if qerr != nil {
			err = errors.Join(err, qerr)
			break
		}
		if i < len(old.q) {
			qq.stats.carry(&old.q[i].stats)
		}
		qs.q = append(qs.q, qq)
	}
	for _, qq := range qs.q {
		qq.start(p)
	}
	e.qs.Store(qs)
	if err != nil {
		return err
	}
	e.log.Info("endpoint offloads changed", "port", p.Name(), "vnet_hdr", on, "queues", len(qs.q))
	return nil
}

// closeParkers releases what newQueue made for queues that never started.
func closeParkers(qs []*queue) {
	for _, qq := range qs {
		qq.pk.close()
	}
}

// undoGrow puts the TAP back to cur queues after a failed grow.
func (e *Endpoint) undoGrow(cur int) {
	if err := e.dev.SetQueues(cur); err != nil {
		e.log.Error("removing TAP queues after a failed channel change", "err", err)
	}
}

// newQueue prepares queue i on TAP queue tq; vnet says whether the TAP carries virtio headers, uso
// whether it took the USO offloads (usoOn), so that UDP runs may be coalesced too.
func (e *Endpoint) newQueue(i int, tq *tap.Queue, vnet, uso bool) (*queue, error) {
	qq := e.newQueueIdle(i, tq, vnet, uso)
	if err := qq.pk.init(tq); err != nil {
		return nil, nlerr.Wrap(err, unix.EIO, "TAP queue %d: the epoll its reader parks on", i)
	}
	return qq, nil
}

// newQueueIdle is newQueue without the parker: a queue whose goroutines never run (a benchmark
// that writes to something else than a TAP).
func (e *Endpoint) newQueueIdle(i int, tq *tap.Queue, vnet, uso bool) *queue {
	qq := &queue{e: e, idx: i, tq: tq, in: newInputRing(), wake: make(chan struct{}, 1), stop: make(chan struct{}),
		back: make(chan struct{}, 1)}
	qq.writeFn = qq.write
	if vnet {
		qq.vnet, qq.seg = true, offload.NewSegmenter()
		qq.seg.Buffer() // allocated before the queue is shared (Segmenter.Buffer)
		qq.emitFn = qq.emit
		qq.wiov[0].Base = &qq.zeroHdr[0]
		qq.wiov[0].SetLen(offload.HeaderLen)
		qq.co = offload.NewCoalescer(GROMaxSegs)
		if uso {
			qq.uco = offload.NewUDPCoalescer(GROMaxSegs)
		}
		qq.held = make([]*pagepool.Buffer, 0, GROMaxSegs)
		qq.giov = make([]unix.Iovec, GROMaxSegs+1)
		qq.flushFn = qq.writeRun
	}
	return qq
}

// usoOn reports whether dev took the USO offloads: a kernel that has them in tun (6.2) also
// takes VIRTIO_NET_HDR_GSO_UDP_L4 superframes written to it (virtio_net_hdr_to_skb). One that
// refuses them anyway is handled by the write (queue.usoRefused).
func usoOn(dev *tap.Device) bool { return dev.Offloads()&(tap.OffloadUSO4|tap.OffloadUSO6) != 0 }

// SetUDPGRO turns receive coalescing of UDP datagrams on or off for the port's RX queues (on a
// TAP with virtio headers and USO; off after NewEndpoint). Turn it on only where the kernel's own
// GRO would merge the datagrams for the TAP's netdev, whatever the namespace does with them
// (tap.Features.UDPGRO: rx-udp-gro-forwarding or rx-gro-list on): a namespace that forwards
// them then forwards, and counts, the superframes whole, as it would behind a real NIC; without
// those features it must see every datagram on its own. The change applies from the next frame
// on; a run open meanwhile ends there. Safe to call at any time, from any goroutine.
func (e *Endpoint) SetUDPGRO(on bool) {
	if e.udpGRO.Swap(on) != on {
		e.log.Info("endpoint UDP receive coalescing", "port", e.label(), "on", on)
	}
}

// UDPGRO reports whether SetUDPGRO turned UDP receive coalescing on.
func (e *Endpoint) UDPGRO() bool { return e.udpGRO.Load() }

// start runs the queue's goroutines.
func (qq *queue) start(p *vnic.Port) {
	qq.wg.Add(2)
	go qq.txLoop(p)
	go qq.rxLoop(p)
}

// stopQueues stops the goroutines of qs and drops (and counts) what their inputs still hold.
func stopQueues(p *vnic.Port, qs []*queue) {
	signalQueues(qs)
	waitQueues(p, qs)
}

// signalQueues tells the goroutines of qs to stop, without waiting for them.
func signalQueues(qs []*queue) {
	for _, qq := range qs {
		close(qq.stop)
		// Wakes a TX goroutine parked on the queue's epoll; one inside a batch sees stop
		// before its next frame.
		qq.pk.wake()
	}
}

// waitQueues waits for the goroutines of qs, told to stop, and drops (and counts) what their
// inputs still hold.
func waitQueues(p *vnic.Port, qs []*queue) {
	for _, qq := range qs {
		qq.wg.Wait()
		qq.pk.close()
		qq.busy.Lock()
		qq.flushRun() // a run a sender left: its RX buffers go back
		n := uint64(qq.in.reset()) + qq.drops.Swap(0)
		for range n {
			p.DropRx(qq.idx)
		}
		qq.busy.Unlock()
	}
}

// Deliver implements vnic.Host: it writes a frame that passed RX queue q to TAP queue q. The
// buffer is never kept: the write copies the frame into the kernel. A TAP write never blocks
// (the kernel drops instead), so a failing write is counted and the frame is gone, as one the
// host stack dropped.
func (e *Endpoint) Deliver(q int, frame []byte, buf *pagepool.Buffer) bool {
	return e.deliver(q, frame, buf, false)
}

// DeliverUntouched implements vnic.UntouchedHost: it is Deliver for a frame no XDP program ran
// on, so that a segment the sending port's Segmenter vouched for (queue.vin) joins a coalesced
// run without its checksums being verified again.
func (e *Endpoint) DeliverUntouched(q int, frame []byte, buf *pagepool.Buffer) bool {
	return e.deliver(q, frame, buf, true)
}

// deliver is Deliver; untouched says frame holds the bytes Receive was given.
func (e *Endpoint) deliver(q int, frame []byte, buf *pagepool.Buffer, untouched bool) bool {
	qs := e.qs.Load()
	if qs == nil || q >= len(qs.q) {
		return false
	}
	qq := qs.q[q]
	var v offload.Checked
	if untouched {
		v = qq.vin
	}
	if qq.co != nil && qq.coalesce(frame, buf, v) {
		return true
	}
	qq.wframe = frame
	if err := qq.tq.Control(qq.writeFn); err != nil || qq.werr != nil {
		qq.stats.rxWriteErrors.Add(1)
	}
	qq.wframe = nil
	return false
}

// write is the tap.Queue.Control callback of Deliver. It never waits for writability (EAGAIN,
// which a TAP does not return): the caller holds queue locks.
func (qq *queue) write(fd int) {
	for {
		var errno unix.Errno
		if qq.vnet {
			errno = rawWritev(fd, &qq.wiov, qq.wframe)
		} else {
			errno = rawWrite(fd, qq.wframe)
		}
		if errno == unix.EINTR {
			continue
		}
		qq.werr = nil
		if errno != 0 {
			qq.werr = errno
		}
		qq.noteWrite()
		return
	}
}

// noteWrite tells the queue's poller, if one reads the queue, that a frame was written to its
// TAP (queue.wrote).
func (qq *queue) noteWrite() {
	if qq.polled.Load() {
		qq.wrote.Store(true)
	}
}

// rawRead and rawWrite are read(2) and write(2) on a TAP queue without telling the scheduler
// (RawSyscall): entersyscall and exitsyscall cost about 30 ns per call here, together a quarter
// of what manad itself spends per frame (BenchmarkForwardOverhead). That is sound because the descriptors are non-blocking: a read returns a frame or EAGAIN at once, and
// a write hands the frame to the stack in the caller's context (tun_get_user) without waiting for
// anything but, rarely, a GFP_KERNEL page allocation. The goroutine keeps its P for those few
// microseconds, as it would for the same work done in Go.
func rawRead(fd int, buf []byte) (int, unix.Errno) {
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)))
	return int(n), errno
}

func rawWrite(fd int, b []byte) unix.Errno {
	_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return errno
}

// rawWritev writes iov[0] (the virtio header) and b with one writev(2), as rawWrite.
func rawWritev(fd int, iov *[2]unix.Iovec, b []byte) unix.Errno {
	iov[1].Base = unsafe.SliceData(b)
	iov[1].SetLen(len(b))
	_, _, errno := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), 2)
	iov[1].Base = nil
	return errno
}

// Send implements vnic.Wire: it switches a frame the port transmitted on queue q onto the
// segment, processing it inline in the destinations' idle RX queues; see Endpoint.
func (e *Endpoint) Send(q int, frame []byte) { e.send(q, frame, e.inline) }

// SendXDP implements vnic.XDPWire: it is Send for a frame XDP_TX bounced from inside RX queue
// q's processing, which its destinations never process inline.
func (e *Endpoint) SendXDP(q int, frame []byte) { e.send(q, frame, false) }

func (e *Endpoint) send(q int, frame []byte, inline bool) {
	h := e.handle.Load()
	if h == nil {
		return
	}
	var now int64
	var stop <-chan struct{}
	var v offload.Checked
	var qq *queue
	if qs := e.qs.Load(); qs == nil || q >= len(qs.q) {
		inline = false
	} else {
		qq = qs.q[q]
		now, stop = qq.clock.Load(), qq.stop
		if inline && qq.seg != nil {
			// Only the TX goroutine inside Segment's emit holds a frame that is the
			// Segmenter's own buffer; for any other frame this is the zero Checked.
			v = qq.seg.Checked(frame)
		}
	}
	if now != 0 {
		e.seg.forwardChecked(h, frame, inline, now, stop, v)
		// A TX batch of queue q is under way, and its end flushes the coalesced runs this
		// frame left (queue.endBatch). But the caller may be a direct Port.Transmit on the
		// same queue rather than its TX goroutine, and the batch may have ended while the
		// frame was forwarded, its flush coming before the frame's runs were listed.
		// endBatch clears the clock before it flushes: a clock still set is a batch whose
		// flush is yet to come and will find them; a cleared one leaves them to this sender.
		if qq.clock.Load() != 0 {
			return
		}
		e.seg.gro.flush()
		return
	}
	// Not inside a TX goroutine's batch (a direct Port.Transmit): nothing else would end the
	// runs this frame may have opened.
	e.seg.forwardChecked(h, frame, inline, e.seg.now(), stop, v)
	e.seg.gro.flush()
}

// input takes a frame the segment forwards to this endpoint's port: RSS picks the RX queue, and
// the frame is processed inline when allowed and the queue is free (after the backlog, which
// the sender drains first as far as one budget), else queued for the queue's goroutine (or
// dropped, and counted, when the queue's input is full).
func (e *Endpoint) input(frame []byte, inline bool) { e.inputChecked(frame, inline, offload.Checked{}) }

// inputChecked is input for a frame v may vouch for (the segment a sending port's Segmenter
// built); only a frame processed inline can use it, while it is still that segment.
func (e *Endpoint) inputChecked(frame []byte, inline bool, v offload.Checked) {
	p := e.vp.Load()
	if p == nil {
		return
	}
	e.seg.captures.record(e, CaptureIn, frame)
	q := p.SteerRx(frame)
	if q < 0 {
		// The port is not running. Queue 0 takes the frame, and vnic counts it as finding no
		// posted buffer (or processes it, if the port came up meanwhile).
		q = 0
	}
	qs := e.qs.Load()
	if qs == nil || q >= len(qs.q) {
		p.DropRx(q)
		return
	}
	qq := qs.q[q]
	if inline && qq.lockIdle(p) {
		qq.stats.rxInline.Add(1)
		qq.vin = v
		p.Receive(qq.idx, frame)
		qq.vin = offload.Checked{}
		qq.deferFlush()
		qq.busy.Unlock()
		return
	}
	// Not inline, or still a backlog after one budget: the frame queues behind it, in order.
	if qq.in.push(frame, inputLimit(p)) {
		qq.stats.rxDeferred.Add(1)
	} else {
		qq.stats.rxInputDrops.Add(1)
		qq.drops.Add(1)
	}
	if !qq.polled.Load() { // a poller drains it (and kicks when it gives the queue back)
		qq.kick()
	}
}

// inputWhole takes a TCP aggregate the segment forwards to this endpoint's port whole (see
// Uplink.ReceiveWhole): frame with its virtio header h, standing for the frames st says. It
// reports whether the port took it; if not, nothing was counted, and the caller forwards the
// frames it stands for one by one. The port takes it when the RX queue RSS picks for it
// coalesces its writes to the TAP (a TAP with virtio headers and GRO on), could coalesce all
// of those frames into one superframe (GROMaxSegs), has no backlog (which the frames would
// queue behind), and accounts them whole (vnic.Port.ReceiveWhole): the TAP then gets the
// superframe its coalescer would have written, with no frame copied or checksummed on the way.
func (e *Endpoint) inputWhole(frame []byte, h *offload.Header, st offload.Segments, wire uint64) bool {
	p := e.vp.Load()
	if p == nil || st.N > GROMaxSegs {
		return false
	}
	q := p.SteerRx(frame)
	qs := e.qs.Load()
	if q < 0 || qs == nil || q >= len(qs.q) || qs.q[q].co == nil {
		return false
	}
	qq := qs.q[q]
	if !qq.lockIdle(p) {
		return false // the frames queue behind the backlog, one by one
	}
	defer qq.busy.Unlock()
	if !p.ReceiveWhole(qq.idx, frame, st.N, wire, st.HeaderLen+int(h.GSOSize)) {
		qq.deferFlush() // what poll coalesced, for the end of the batch
		return false
	}
	qq.flush() // the run before it goes first
	h.Encode(qq.wholeH[:])
	qq.whole = [2][]byte{qq.wholeH[:], frame}
	qq.gframe = qq.whole[:]
	if err := qq.tq.Control(qq.flushFn); err != nil || qq.werr != nil {
		qq.stats.rxWriteErrors.Add(uint64(st.N))
	}
	qq.gframe, qq.whole = nil, [2][]byte{}
	qq.stats.rxInline.Add(uint64(st.N))
	qq.stats.rxCoalesced.Add(uint64(st.N - 1))
	qq.stats.rxWhole.Add(1)
	return true
}

// lockIdle takes RX queue qq for an inline sender and drains up to one budget of its backlog
// first. It reports whether the queue is idle now, still held by the caller, who processes its
// frame and unlocks. Otherwise it ends the run the poll coalesced and unlocks: the sender's frame
// must queue behind the backlog.
//
// A sender waits for a queue another context holds rather than queue behind it: the holder's
// work is bounded (one frame or superframe inline, one budget for the queue's goroutine), and
// the wait is the back-pressure a wire gives, where a push would let a sender that only copies
// outrun a queue that writes to the stack and overflow the input (a TCP window's worth of
// hc_rx_discards_no_wqe, each one a retransmit). An inline sender holds no RX queue of its own
// meanwhile (frames XDP_TX produces inside an RX queue's processing are never inline), so the
// wait cannot close a cycle.
func (qq *queue) lockIdle(p *vnic.Port) bool {
	if !qq.busy.TryLock() {
		qq.busy.Lock()
		qq.stats.rxWaited.Add(1)
	}
	if qq.poll(p) {
		qq.flushRun()
		qq.busy.Unlock()
		return false
	}
	return true
}

// inputLimit is the bound of an RX queue's input: the port's RX ring size, or one budget while
// the port is not running (vnic drops those frames anyway).
func inputLimit(p *vnic.Port) int {
	if n := p.RxRingSize(); n > 0 {
		return n
	}
	return budget
}

// poll processes up to budget frames from the input and hands input-full drops to the port. It
// reports whether frames remain. Caller holds busy.
func (qq *queue) poll(p *vnic.Port) (more bool) {
	if n := qq.drops.Load(); n > 0 {
		n = qq.drops.Swap(0)
		for range n {
			p.DropRx(qq.idx)
		}
	}
	for range budget {
		if qq.in.empty() {
			return false
		}
		f := qq.in.peek()
		if f == nil {
			return false
		}
		p.Receive(qq.idx, f)
		qq.in.pop()
	}
	return !qq.in.empty()
}

// stopping reports whether Stop has begun for the queue.
func (qq *queue) stopping() bool {
	select {
	case <-qq.stop:
		return true
	default:
		return false
	}
}

// kick wakes the queue's RX goroutine.
func (qq *queue) kick() {
	select {
	case qq.wake <- struct{}{}:
	default:
	}
}

// rxLoop is the RX queue's goroutine: it sleeps until kicked, then drains the input.
func (qq *queue) rxLoop(p *vnic.Port) {
	defer qq.wg.Done()
	for {
		select {
		case <-qq.wake:
		case <-qq.stop:
			return
		}
		for {
			// One budget per slot: on a segment where every member has a backlog, the
			// queues take turns (see pollSlots) instead of all being runnable at once.
			if !qq.e.seg.slots.acquire(qq.stop) {
				return
			}
			qq.busy.Lock()
			more := qq.poll(p)
			qq.flushRun() // a poll ends a coalesced run
			qq.busy.Unlock()
			qq.e.seg.slots.release()
			if !more {
				break
			}
			select {
			case <-qq.stop:
				return
			default:
			}
			runtime.Gosched() // as in txLoop: one batch, then the others' turn
		}
	}
}

// txLoop is the TX queue's goroutine: it reads what the kernel transmits on TAP queue idx and
// hands it to the port, batches of up to budget frames per wake-up (park.go).
func (qq *queue) txLoop(p *vnic.Port) {
	defer qq.wg.Done()
	qq.maxFrame = p.Config().MaxMTU + frameOverhead
	qq.txPort = p
	hdr, size := 0, qq.maxFrame
	if qq.vnet {
		hdr, size = offload.HeaderLen, offload.MaxFrameLen
	}
	var buf []byte
	if qq.vnet {
		buf = qq.seg.Buffer() // SegmentInPlace cuts superframes where they were read
	} else {
		buf = make([]byte, hdr+size+1) // +1 tells a truncated frame apart
	}
	pollers := qq.e.seg.pollers
	readBatch := func(fd, limit int) {
		qq.nread, qq.more = 0, true
		qq.clock.Store(qq.e.seg.now())
		defer qq.endBatch()
		for i := 0; i < limit; i++ {
			if i > 0 && qq.stopping() {
				// Every frame may be a flood to every member of a shared segment: Stop
				// waits for at most one, not for a whole batch of them.
				return
			}
			n, errno := rawRead(fd, buf)
			switch errno {
			case 0:
			case unix.EAGAIN:
				if i > 0 && pollers.Max() > 0 && pollWindow(p.NAPIConfig(qq.idx)) > 0 && p.NumRxQueues() > 0 {
					qq.handoff = true // poll for the next frames rather than park
					return
				}
				qq.more = false // park on the queue's epoll
				return
			case unix.EINTR:
				i--
				continue
			default:
				qq.rerr = errno
				return
			}
			qq.nread++
			switch {
			case n < hdr+14:
				qq.stats.txRunts.Add(1)
			case n == len(buf):
				// Longer than the port's largest MTU allows: a real NIC refuses it
				// (hc_tx_err_mtu_violation); never forward it truncated.
				qq.stats.txOversize.Add(1)
			case qq.vnet:
				qq.transmitOffload(buf[:n])
			default:
				p.Transmit(qq.idx, buf[:n])
			}
		}
	}
	qq.readFn = func(fd int) { readBatch(fd, budget) }
	qq.pollFn = func(fd int) {
		qq.handoff = false // the poller has it already
		readBatch(fd, qq.pollMax)
		qq.handoff = false
	}
	for {
		// Read, and wait on the queue's own epoll (park.go) while the kernel queued nothing,
		// until a batch found more (or a hand-over, or an error), or Stop wakes it.
		err := qq.pk.read(qq.readFn, &qq.more)
		select {
		case <-qq.stop:
			return
		default:
		}
		switch {
		case err == nil && qq.rerr == nil && qq.handoff:
			// The batch found work and then none: a poller reads the queue (and drains its
			// RX input) until its window passes without work, then gives it back.
			qq.handoff = false
			// Disarmed first: the frames the kernel queues while a poller reads the queue
			// must not wake the netpoller (parker).
			if err := qq.pk.arm(false); err != nil {
				continue // the next read finds out what it is
			}
			if !pollers.handOver(qq) {
				qq.pk.arm(true) // no poller slot: read again, parking as with polling off
				continue
			}
			select {
			case <-qq.back:
				qq.pk.arm(true) // an error: the next read finds out what it is
			case <-qq.stop:
				return
			}
		case err == nil && qq.rerr == nil && qq.more:
			// A full batch and more waiting: let the other queues' goroutines have the CPU.
			// The reads are raw system calls that never hand the P over, so without this a
			// busy ingress queue starves the egress queue of a port the kernel forwards to
			// (a router between two ports) down to what preemption lets through.
			runtime.Gosched()
		case errors.Is(err, os.ErrDeadlineExceeded):
			qq.pk.rearm() // a wake-up that was not Stop's (Stop closes stop first)
		case errors.Is(err, os.ErrClosed):
			return // the queue was detached
		case qq.rerr != nil:
			if errors.Is(qq.rerr, unix.EBADFD) {
				qq.e.log.Info("TAP queue detached; TX goroutine exits", "port", p.Name(), "queue", qq.idx)
			} else {
				qq.e.log.Error("TAP read failed; TX goroutine exits", "port", p.Name(), "queue", qq.idx, "err", qq.rerr)
			}
			return
		default:
			qq.e.log.Error("TAP queue failed; TX goroutine exits", "port", p.Name(), "queue", qq.idx, "err", err)
			return
		}
	}
}

// endBatch ends the TX batch the queue's clock marks: it clears the clock, then flushes the
// coalesced runs the batch left in the destinations' RX queues (the segment's pending list). In
// that order because a sender outside the batch (a direct Port.Transmit on the same queue) that
// read the clock while it was set leaves its runs to this flush: it lists them, then reads the
// clock again and flushes them itself if it finds it cleared (Endpoint.send). With the flush
// first, such a sender could list its runs after the flush and before the clear, and leave them
// open until some other frame came.
func (qq *queue) endBatch() {
	qq.clock.Store(0)
	qq.e.seg.gro.flush()
}

// transmitOffload transmits what a TAP with virtio headers handed over: a frame to finish (its
// partial checksum) or a superframe to cut into wire frames. A header that does not fit the
// frame drops it, counted; nothing of it reaches the wire.
//
// The port accounts the superframe as one work item (vnic.Port.Post: tx_<q>_tso_*,
// csum_partial), and each frame it becomes as it leaves (vnic.Port.PutWire: hc_tx_*).
func (qq *queue) transmitOffload(b []byte) {
	var h offload.Header
	_ = h.Decode(b) // the caller checked the length
	frame := b[offload.HeaderLen:]
	st, err := qq.seg.Plan(&h, frame)
	if err != nil {
		qq.stats.txBadVnet.Add(1)
		return
	}
	if !qq.txPort.Post(qq.idx, vnic.TxWork{Len: len(frame), GSO: st.GSO, HeaderLen: st.HeaderLen, CsumPartial: st.CsumDone && !st.GSO}) {
		return
	}
	if st.GSO {
		qq.stats.txSuperframes.Add(1)
		if qq.sendWhole(&h, b, st) {
			return
		}
	}
	_, _ = qq.seg.SegmentInPlace(&h, frame, qq.emitFn) // Plan accepted it
}

// sendWhole hands b, a TCP superframe Plan accepted (st) after its virtio header h, whole to
// the member that has its destination address, and reports whether it did: a NIC's TSO engine
// cuts a work item into the frames it sends, and what the receiving side does with them (the
// kernel behind an uplink cuts a GSO packet into the same frames where it has to, or carries it
// whole through VXLAN and the underlay; a port's RX queue coalesces them back into this
// superframe) needs them cut by manad no more than it needs them checksummed and coalesced
// again. Each frame is still accounted as it leaves the port (vnic.Port.PutWireBulk) and as it
// arrives (the uplink's counters; vnic.Port.ReceiveWhole, one posted buffer per frame); every
// other superframe, and one the destination cannot take whole (see Uplink.sendWhole and
// Endpoint.inputWhole), is cut by the caller.
func (qq *queue) sendWhole(h *offload.Header, b []byte, st offload.Segments) bool {
	gt := h.GSOType &^ offload.GSOECN
	frame := b[offload.HeaderLen:]
	if gt != offload.GSOTCPv4 && gt != offload.GSOTCPv6 || h.Flags&offload.FlagNeedsCsum == 0 ||
		st.HeaderLen+int(h.GSOSize) > qq.maxFrame || frame[0]&1 != 0 {
		return false
	}
	e := qq.e
	src, now := e.handle.Load(), qq.clock.Load()
	if src == nil || now == 0 {
		return false
	}
	s := e.seg
	dst, ok := s.unicastDst(frame, now)
	if !ok || dst == src {
		return false
	}
	wire := uint64(st.PayloadLen + st.N*st.HeaderLen)
	switch m := dst.m.(type) {
	case *Uplink:
		l2 := len(frame) - PayloadLen(frame)
		// The hint the TAP gave is the guest's skb_headlen; the device's linear part is the headers.
		binary.LittleEndian.PutUint16(b[2:], uint16(st.HeaderLen))
		if !m.sendWhole(b, st.HeaderLen-l2+int(h.GSOSize), st.N, wire) {
			return false
		}
	case *Endpoint:
		// Frame by frame, each segment is processed inline (or queued) and captured: a
		// capture sees the frames the wire carries, so it gets them cut.
		if !e.inline || s.captures.list.Load() != nil {
			return false
		}
		ah, ast, err := offload.Aggregate(frame, h.GSOType, h.GSOSize)
		if err != nil || !m.inputWhole(frame, &ah, ast, wire) {
			return false // frame's IP length and TCP checksum field may be rewritten: cutting sets both afresh
		}
	default:
		return false
	}
	s.learnSource(src, frame, now) // once for the frames
	qq.txPort.PutWireBulk(qq.idx, frame, st.N, wire)
	return true
}

// emit puts one frame Segment made on the wire.
func (qq *queue) emit(frame []byte) {
	if len(frame) > qq.maxFrame {
		qq.stats.txOversize.Add(1) // a gso_size beyond the MTU: as for a plain frame
		return
	}
	qq.txPort.PutWire(qq.idx, frame)
}

// QueueStats are one queue's data-path counters beyond vnic's own.
type QueueStats struct {
	RxInline      uint64 // frames the forwarding goroutine processed itself
	RxDeferred    uint64 // frames queued for the RX goroutine (not inline, or behind a backlog)
	RxInputDrops  uint64 // frames dropped because the input was full (also in hc_rx_discards_no_wqe)
	RxWriteErrors uint64 // frames the TAP refused (it was down or detached)
	TxRunts       uint64 // frames shorter than an Ethernet header read from the TAP
	TxOversize    uint64 // frames longer than the port's largest MTU read from the TAP
	TxSuperframes uint64 // GSO superframes read from a TAP with offloads, each cut into frames or passed on whole (RxWhole, Uplink's TxWhole)
	TxBadVnetHdr  uint64 // frames dropped because their virtio header did not fit them
	RxCoalesced   uint64 // frames written to the TAP merged into an earlier one (GRO: TCP, and UDP as USO while SetUDPGRO is on)
	RxWaited      uint64 // frames whose sender waited for the queue another context held
	RxWhole       uint64 // superframes written to the TAP as they came (a port's TSO, an uplink's GRO), never cut; their frames are in RxInline and, but one each, RxCoalesced
	RxBacklog     int    // frames waiting in the input now
}

// Stats returns the counters of each running queue (nil when not started).
func (e *Endpoint) Stats() []QueueStats {
	qs := e.qs.Load()
	if qs == nil {
		return nil
	}
	out := make([]QueueStats, len(qs.q))
	for i, qq := range qs.q {
		s := &qq.stats
		out[i] = QueueStats{
			RxInline: s.rxInline.Load(), RxDeferred: s.rxDeferred.Load(), RxInputDrops: s.rxInputDrops.Load(),
			RxWriteErrors: s.rxWriteErrors.Load(), TxRunts: s.txRunts.Load(), TxOversize: s.txOversize.Load(),
			TxSuperframes: s.txSuperframes.Load(), TxBadVnetHdr: s.txBadVnet.Load(), RxCoalesced: s.rxCoalesced.Load(),
			RxWaited: s.rxWaited.Load(), RxWhole: s.rxWhole.Load(),
			RxBacklog: int(qq.in.count.Load()),
		}
	}
	return out
}
