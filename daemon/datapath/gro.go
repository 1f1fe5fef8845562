package datapath

import (
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/offload"
	"github.com/manad/manad/vnic/pagepool"
)

// GROMaxSegs is the most frames one coalesced superframe carries: an RX queue holds up to that
// many RX buffers besides its ring until the run is written.
const GROMaxSegs = 64

// Receive coalescing (GRO) on a TAP with virtio headers: consecutive TCP segments of one flow
// that pass an RX queue in one poll are written to the TAP as one superframe, gathered with
// writev straight from their RX buffers, which go back to the pool after the write. So are
// consecutive datagrams of one UDP flow, as a USO superframe (offload.UDPCoalescer), while the
// endpoint's UDP GRO is on (Endpoint.SetUDPGRO): only where the kernel's own GRO would merge them
// for the TAP's netdev, so that a namespace forwarding them sees what it would behind a real NIC.
// A queue has one run open at a time, of either kind.
//
// A poll of the queue's goroutine ends with a flush. A sender that processes frames inline
// hands one frame at a time, so its run stays open after it lets go of the queue, listed in
// the segment's pending list, and is flushed when the sender's TX batch ends (the burst of
// frames one TAP read loop produced), or earlier by whoever takes the queue next and brings a
// frame that does not merge. The run is guarded by the queue's busy lock throughout.

// coalesce offers a frame that passed RX queue qq to the queue's run; true means the run took it
// and buf with it. A frame that cannot join ends the run (it is written first, keeping order).
// v vouches for the frame's checksums when it is the untouched segment a Segmenter built
// (offload.Coalescer.AddChecked); the zero Checked has them verified. Caller holds busy
// (Deliver runs inside Port.Receive).
func (qq *queue) coalesce(frame []byte, buf *pagepool.Buffer, v offload.Checked) bool {
	if qq.runAdd(frame, v) {
		qq.held = append(qq.held, buf)
		return true
	}
	if qq.runLen() == 0 {
		return false
	}
	qq.flush()
	if qq.runAdd(frame, v) {
		qq.held = append(qq.held, buf)
		return true
	}
	return false
}

// runAdd offers frame to the queue's open run, TCP (co) or UDP (uco), or, with neither open, to
// the TCP and then, while UDP GRO is on, the UDP one; true means a run took it. A UDP run open
// when UDP GRO went off takes no more datagrams. Caller holds busy.
func (qq *queue) runAdd(frame []byte, v offload.Checked) bool {
	u := qq.uco
	if u != nil && u.Len() > 0 {
		return qq.e.udpGRO.Load() && u.Add(frame)
	}
	if qq.co.AddChecked(frame, v) {
		return true
	}
	return u != nil && qq.co.Len() == 0 && qq.e.udpGRO.Load() && u.Add(frame)
}

// runLen is the number of frames in the queue's open run. Caller holds busy.
func (qq *queue) runLen() int {
	if qq.uco != nil {
		return qq.co.Len() + qq.uco.Len()
	}
	return qq.co.Len()
}

// flushRun is flush for a queue that may not coalesce at all.
func (qq *queue) flushRun() {
	if qq.co != nil {
		qq.flush()
	}
}

// flush writes the queue's run, if any, to the TAP and returns its RX buffers. Caller holds
// busy.
func (qq *queue) flush() {
	qq.listed = false
	iov, n := qq.co.Flush()
	u := qq.uco
	if n == 0 && u != nil {
		iov, n = u.Flush()
	} else {
		u = nil
	}
	if n == 0 {
		return
	}
	qq.gframe = iov
	err := qq.tq.Control(qq.flushFn)
	qq.gframe = nil
	if u != nil && n > 1 && err == nil && errors.Is(qq.werr, unix.EINVAL) {
		qq.usoRefused(u.Frames())
	} else {
		if err != nil || qq.werr != nil {
			qq.stats.rxWriteErrors.Add(uint64(n))
		}
		qq.stats.rxCoalesced.Add(uint64(n - 1))
	}
	for i, b := range qq.held {
		b.Pool().Put(b)
		qq.held[i] = nil
	}
	qq.held = qq.held[:0]
}

// deferFlush leaves the run open for the inline sender's next frames and lists the queue for
// the flush at the end of the sender's batch. Caller holds busy.
func (qq *queue) deferFlush() {
	if qq.co == nil || qq.runLen() == 0 || qq.listed {
		return
	}
	qq.listed = true
	qq.e.seg.gro.add(qq)
}

// usoRefused writes the datagrams of a UDP run one by one after the TAP refused their USO
// superframe (EINVAL from tun_get_user: a kernel whose virtio_net_hdr_to_skb knows no
// VIRTIO_NET_HDR_GSO_UDP_L4), and turns UDP coalescing off for the queue. Caller holds busy.
func (qq *queue) usoRefused(frames [][]byte) {
	if qq.uco != nil {
		qq.e.log.Warn("TAP refuses USO superframes (EINVAL): UDP receive coalescing off", "queue", qq.idx)
	}
	qq.uco = nil
	for _, f := range frames {
		qq.wframe = f
		if err := qq.tq.Control(qq.writeFn); err != nil || qq.werr != nil {
			qq.stats.rxWriteErrors.Add(1)
		}
	}
	qq.wframe = nil
}

// writeRun is the tap.Queue.Control callback of flush: one writev of the run.
func (qq *queue) writeRun(fd int) {
	n := 0
	for _, b := range qq.gframe {
		qq.giov[n].Base = unsafe.SliceData(b)
		qq.giov[n].SetLen(len(b))
		n++
	}
	for {
		_, _, errno := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&qq.giov[0])), uintptr(n))
		if errno == unix.EINTR {
			continue
		}
		qq.werr = nil
		if errno != 0 {
			qq.werr = errno
		}
		qq.noteWrite()
		break
	}
	for i := range n {
		qq.giov[i].Base = nil
	}
}

// groPending is a segment's list of RX queues whose run an inline sender left open.
type groPending struct {
	n     atomic.Int32 // len(q), for the common case of nothing pending
	mu    sync.Mutex
	q     []*queue
	spare []*queue
	ups   []*Uplink // uplinks with a transmit run open (Uplink.coalesce)
}

func (g *groPending) addUplink(u *Uplink) {
	g.mu.Lock()
	g.ups = append(g.ups, u)
	g.n.Store(int32(len(g.q) + len(g.ups)))
	g.mu.Unlock()
}

func (g *groPending) add(qq *queue) {
	g.mu.Lock()
	g.q = append(g.q, qq)
	g.n.Store(int32(len(g.q) + len(g.ups)))
	g.mu.Unlock()
}

// flush flushes every listed queue it can take. One that is busy is someone else's now: its
// holder either continues the run (and lists it again) or ends it; the queue's goroutine is
// kicked so that a run is never left behind.
func (g *groPending) flush() {
	if g.n.Load() == 0 {
		return
	}
	g.mu.Lock()
	if len(g.q) == 0 && len(g.ups) == 0 {
		g.mu.Unlock()
		return
	}
	qs, ups := g.q, g.ups
	g.q, g.spare, g.ups = g.spare[:0], nil, nil
	g.n.Store(0)
	g.mu.Unlock()
	// An uplink's run is written whoever holds it: its holders only add a frame or write.
	for _, u := range ups {
		u.flushRun()
	}
	for i, qq := range qs {
		if qq.busy.TryLock() {
			qq.flushRun()
			qq.busy.Unlock()
		} else {
			qq.kick()
		}
		qs[i] = nil
	}
	g.mu.Lock()
	if g.spare == nil {
		g.spare = qs[:0]
	}
	g.mu.Unlock()
}
