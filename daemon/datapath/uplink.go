package datapath

import (
	"sync"
	"sync/atomic"

	"github.com/manad/manad/daemon/offload"
)

// Uplink attaches a kernel netdev (a VXLAN or Geneve device, a veth into a bridge, a NIC) to a
// segment as one more member: frames the segment forwards to it go out through its transmit
// function, frames it receives (Receive) are switched like a port's. The segment's split
// horizon applies to it as to a port: a frame that came in through the uplink never goes back
// out through it, so two daemons joined by one overlay cannot loop a frame between them.
//
// A frame whose payload (the frame without its Ethernet header and one VLAN tag) exceeds the
// uplink's MTU is dropped and counted, never fragmented. While the uplink is down its frames
// are dropped and counted, and the addresses learned on it are forgotten (SetUp), so frames to
// them are flooded again when it returns.
//
// The daemon/uplink package provides the device side (AF_PACKET); Uplink is what the segment
// sees of it.
type Uplink struct {
	seg  *Segment
	name string
	tx   func(frame []byte) error
	p    *port

	mtu   atomic.Int64
	up    atomic.Bool
	stats uplinkStats

	// Transmit coalescing (SetTxGSO): consecutive TCP segments of one flow that one sender
	// forwards within its batch go out as one GSO superframe. runMu guards the run: senders
	// call input concurrently.
	runMu    sync.Mutex
	txGSO    func(iov [][]byte) error // nil: every frame goes out alone through tx
	co       *offload.Coalescer
	arena    []byte    // copies of the run's frames (the senders' are only valid during input)
	runBytes uint64    // wire bytes of the run's frames
	listed   bool      // in the segment's pending list
	whole    [1][]byte // sendWhole's iovec, kept so that a superframe written whole allocates none
}

// uplinkArena holds the frames of one run: a superframe's payloads stay below 64 KiB, so the
// copies of its frames, headers included, fit.
const uplinkArena = 1 << 17

type uplinkStats struct {
	rxFrames, rxBytes, rxRunts, rxWhole        atomic.Uint64
	txFrames, txBytes, txErrors, txDown, txMTU atomic.Uint64
	txAggregates, txWhole                      atomic.Uint64
}

// UplinkStats are an uplink's counters since it was attached.
type UplinkStats struct {
	RxFrames, RxBytes uint64 // frames received from the device and switched on the segment
	RxRunts           uint64 // frames shorter than an Ethernet header received from the device
	// RxWhole counts TCP aggregates received from the device that a port took whole
	// (ReceiveWhole); RxFrames counts the frames each stands for.
	RxWhole           uint64
	TxFrames, TxBytes uint64 // frames the device took
	TxErrors          uint64 // frames the device refused (a full queue, a vanished link)
	TxDown            uint64 // frames dropped because the uplink was down
	TxMTUDrops        uint64 // frames dropped because they exceed the uplink's MTU
	// TxAggregates counts GSO superframes written (SetTxGSO), each standing for two or more
	// of the frames TxFrames counts.
	TxAggregates uint64
	// TxWhole counts the superframes among TxAggregates that a port's TAP handed over and that
	// went out as they came, never cut into frames by manad (Uplink.sendWhole).
	TxWhole uint64
}

// AttachUplink attaches an uplink named name (for FDB listings and logs) that transmits frames
// with tx, starting down with no MTU (SetMTU, SetUp). tx is called concurrently from every
// goroutine forwarding on the segment; frame is only valid during the call and tx must not
// block. Detach it with (*Uplink).Detach.
func (s *Segment) AttachUplink(name string, tx func(frame []byte) error) *Uplink {
	u := &Uplink{seg: s, name: name, tx: tx}
	u.p = s.join(u)
	return u
}

// Detach removes the uplink from its segment, forgetting the addresses learned on it.
func (u *Uplink) Detach() {
	u.seg.leave(u.p)
	u.SetTxGSO(nil)
}

// SetTxGSO makes the uplink coalesce, as tcp_gro_receive would, the TCP segments one sender
// forwards to it within one batch, and write each run with gso: iov is offload.Coalescer's
// Flush result (a virtio_net_hdr_v1 and the headers, then the payloads), valid during the
// call; gso's error counts every frame of the run as refused. Frames that cannot merge end the
// run and go out alone through tx, in order. nil stops coalescing, writing a pending run
// first. gso is never called concurrently with itself and must not block.
func (u *Uplink) SetTxGSO(gso func(iov [][]byte) error) {
	u.runMu.Lock()
	defer u.runMu.Unlock()
	u.flushLocked()
	u.txGSO = gso
	if gso != nil && u.co == nil {
		u.co = offload.NewCoalescer(GROMaxSegs)
		u.arena = make([]byte, 0, uplinkArena)
	}
}

// EndBatch ends the batch of a goroutine that forwards frames it received from the uplink's
// device: the coalesced runs it left open in RX queues and uplinks of the segment are written.
func (u *Uplink) EndBatch() { u.seg.gro.flush() }

// Name returns the uplink's name.
func (u *Uplink) Name() string { return u.name }

// SetMTU sets the largest payload the uplink carries (the device's MTU, or less when the
// configuration caps it).
func (u *Uplink) SetMTU(mtu int) { u.mtu.Store(int64(mtu)) }

// MTU returns the uplink's MTU.
func (u *Uplink) MTU() int { return int(u.mtu.Load()) }

// SetUp marks the uplink up (frames go out) or down (frames are dropped and counted). Going
// down forgets the addresses learned on the uplink.
func (u *Uplink) SetUp(up bool) {
	if old := u.up.Swap(up); old && !up {
		u.seg.flush(u.p)
	}
}

// Up reports whether the uplink is up.
func (u *Uplink) Up() bool { return u.up.Load() }

// Receive switches a frame the device received onto the segment. frame is only valid during
// the call; the caller's goroutine delivers it to idle destination ports itself.
func (u *Uplink) Receive(frame []byte) {
	if len(frame) < 14 {
		u.stats.rxRunts.Add(1)
		return
	}
	u.stats.rxFrames.Add(1)
	u.stats.rxBytes.Add(uint64(len(frame)))
	u.seg.forward(u.p, frame, true)
}

// ReceiveWhole switches frame, a TCP aggregate the device received (a GSO packet of gsoType's
// TCP kind with segments of gsoSize payload bytes), to the port that has its destination as
// the one superframe it is, when that port takes it so (Endpoint.inputWhole), and reports
// whether it did. Otherwise the caller cuts the aggregate into the frames it stands for and
// passes each to Receive; frame's IP length and TCP checksum field may have been rewritten
// (offload.Aggregate), which cutting ignores (offload.Segmenter.Segment sets both afresh).
// A segment carrying more than mtu bytes beyond the Ethernet header and VLAN tag is refused.
// frame is only valid during the call; the caller's goroutine delivers it itself. Floods,
// captures and anything but a unicast TCP aggregate to a port are left to the frame-by-frame
// path.
func (u *Uplink) ReceiveWhole(frame []byte, gsoType uint8, gsoSize uint16, mtu int) bool {
	s := u.seg
	if len(frame) < 14 || frame[0]&1 != 0 || s.captures.list.Load() != nil {
		return false
	}
	now := s.now()
	dst, ok := s.unicastDst(frame, now)
	if !ok {
		return false
	}
	ep, ok := dst.m.(*Endpoint)
	if !ok || dst == u.p {
		return false
	}
	h, st, err := offload.Aggregate(frame, gsoType, gsoSize)
	if err != nil || st.HeaderLen-(len(frame)-PayloadLen(frame))+int(gsoSize) > mtu {
		return false
	}
	wire := uint64(st.PayloadLen + st.N*st.HeaderLen)
	if !ep.inputWhole(frame, &h, st, wire) {
		return false
	}
	s.learnSource(u.p, frame, now) // once for the frames
	u.stats.rxFrames.Add(uint64(st.N))
	u.stats.rxBytes.Add(wire)
	u.stats.rxWhole.Add(1)
	return true
}

// input implements member: the frame goes out through the device, or is dropped and counted.
func (u *Uplink) input(frame []byte, inline bool) {
	u.seg.captures.record(u, CaptureIn, frame)
	if !u.up.Load() {
		u.stats.txDown.Add(1)
		return
	}
	if PayloadLen(frame) > int(u.mtu.Load()) {
		u.stats.txMTU.Add(1)
		return
	}
	if u.coalesce(frame, inline) {
		return
	}
	if err := u.tx(frame); err != nil {
		u.stats.txErrors.Add(1)
		return
	}
	u.stats.txFrames.Add(1)
	u.stats.txBytes.Add(uint64(len(frame)))
}

// coalesce offers frame to the uplink's run; true means the run took (a copy of) it. A frame
// that cannot join ends the run, which is written first, so order is kept; the caller then
// writes the frame alone. Only an inline sender's frames coalesce: its batch ends with the
// flush of the segment's pending list (groPending), where the run is written.
func (u *Uplink) coalesce(frame []byte, inline bool) bool {
	u.runMu.Lock()
	defer u.runMu.Unlock()
	if u.txGSO == nil {
		return false
	}
	if !inline || len(frame) > cap(u.arena)-len(u.arena) {
		u.flushLocked()
		if !inline || len(frame) > cap(u.arena) {
			return false
		}
	}
	if !u.add(frame) {
		if u.co.Len() == 0 {
			return false
		}
		u.flushLocked()
		if !u.add(frame) {
			return false
		}
	}
	u.runBytes += uint64(len(frame))
	if !u.listed {
		u.listed = true
		u.seg.gro.addUplink(u)
	}
	return true
}

// add copies frame into the arena, which has room for it, and offers the copy to the run.
// Caller holds runMu.
func (u *Uplink) add(frame []byte) bool {
	off := len(u.arena)
	if !u.co.Add(append(u.arena, frame...)[off:]) {
		return false
	}
	u.arena = u.arena[:off+len(frame)]
	return true
}

// flushRun writes the uplink's run, if any.
func (u *Uplink) flushRun() {
	u.runMu.Lock()
	u.flushLocked()
	u.runMu.Unlock()
}

// flushLocked writes the run, if any, and counts its frames. Caller holds runMu.
func (u *Uplink) flushLocked() {
	u.listed = false
	if u.co == nil {
		return
	}
	iov, n := u.co.Flush()
	b := u.runBytes
	u.runBytes, u.arena = 0, u.arena[:0]
	if n == 0 {
		return
	}
	if err := u.txGSO(iov); err != nil {
		u.stats.txErrors.Add(uint64(n))
		return
	}
	if n > 1 {
		u.stats.txAggregates.Add(1)
	}
	u.stats.txFrames.Add(uint64(n))
	u.stats.txBytes.Add(b)
}

// sendWhole writes b, a virtio_net_hdr_v1 and the TCP superframe a port's TAP handed over, to
// the device as one GSO superframe, as a NIC hands a TSO work item to its segmentation engine:
// the device (or validate_xmit_skb past it) cuts it into the frames the port would have put on
// the wire one by one. segLen is the largest payload one of its frames carries, frames and
// wire how many frames it stands for and their bytes. It reports false, writing nothing, when
// the uplink could not take the frames as it takes them one by one (down, no GSO writes, a
// frame beyond the MTU): the caller then sends them so, to be counted as those are. A write the
// device refuses counts every frame as refused, and reports true.
func (u *Uplink) sendWhole(b []byte, segLen, frames int, wire uint64) bool {
	if !u.up.Load() || segLen > int(u.mtu.Load()) || u.seg.captures.list.Load() != nil {
		return false
	}
	u.runMu.Lock()
	defer u.runMu.Unlock()
	if u.txGSO == nil {
		return false
	}
	u.flushLocked() // the frames before it go first
	u.whole[0] = b
	err := u.txGSO(u.whole[:])
	u.whole[0] = nil // b is the sender's
	if err != nil {
		u.stats.txErrors.Add(uint64(frames))
		return true
	}
	u.stats.txAggregates.Add(1)
	u.stats.txWhole.Add(1)
	u.stats.txFrames.Add(uint64(frames))
	u.stats.txBytes.Add(wire)
	return true
}

// label implements member.
func (u *Uplink) label() string { return "uplink:" + u.name }

// PayloadLen is what of frame counts against an MTU: all but the Ethernet header and one VLAN
// tag (802.1Q or 802.1ad), as a NIC's MTU check allows.
func PayloadLen(frame []byte) int {
	n := len(frame) - 14
	if len(frame) >= 18 && (frame[12] == 0x81 && frame[13] == 0x00 || frame[12] == 0x88 && frame[13] == 0xa8) {
		n -= 4
	}
	return n
}

// Stats returns the uplink's counters.
func (u *Uplink) Stats() UplinkStats {
	s := &u.stats
	return UplinkStats{
		RxFrames: s.rxFrames.Load(), RxBytes: s.rxBytes.Load(), RxRunts: s.rxRunts.Load(), RxWhole: s.rxWhole.Load(),
		TxFrames: s.txFrames.Load(), TxBytes: s.txBytes.Load(), TxErrors: s.txErrors.Load(),
		TxDown: s.txDown.Load(), TxMTUDrops: s.txMTU.Load(), TxAggregates: s.txAggregates.Load(),
		TxWhole: s.txWhole.Load(),
	}
}
