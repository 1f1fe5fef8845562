package uplink

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/offload"
	"github.com/manad/manad/internal/nsrun"
)

// Geometry of the TPACKET_V2 RX ring. Each frame has a slot of its own that the kernel hands
// over as soon as the frame is in it (TPACKET_V3 hands over whole blocks, when full or after a
// retire timeout of at least 1 ms: a lone frame, a ping, waited up to that long at every
// uplink). A slot holds a frame of a 1500-byte MTU with its VLAN tags; a larger one (a GSO
// aggregate, a jumbo frame) leaves its first bytes in the slot marked TP_STATUS_COPY and comes
// whole through the socket's queue (PACKET_COPY_THRESH), in ring order.
const (
	slotSize  = 1 << 11 // 2 KiB
	ringBytes = 4 << 20 // 2048 slots
	// rxQueueBytes is the socket queue (SO_RCVBUF) the frames too large for a slot wait in: a
	// hundred 64 KiB aggregates.
	rxQueueBytes = 8 << 20
	// maxFrame is the largest frame taken from the queue, its virtio_net_hdr included: a
	// 64 KiB aggregate with its Ethernet header and two VLAN tags. A larger one is truncated.
	maxFrame = 1<<16 + 256
	// frameBudget is how many slots one pass of the RX goroutine processes before it ends the
	// batch and lets other goroutines run (a NAPI poll's weight).
	frameBudget = 64
)

// packetSocket is an AF_PACKET socket bound to one device, with a TPACKET_V2 RX ring mapped into
// memory. Transmission is a plain write of the frame (PACKET_QDISC_BYPASS hands it straight to
// the driver); frames the socket sends itself are never received back (PACKET_IGNORE_OUTGOING).
// The socket is a raw non-blocking descriptor, never in Go's netpoller: the RX loop waits for it
// on its parker (park.go).
type packetSocket struct {
	pk   *parker
	ring []byte

	// txMu lets transmitters write the descriptor while close waits for them to finish.
	txMu   sync.RWMutex
	fd     int // -1 once closed
	closed atomic.Bool

	giov []unix.Iovec // writeGSO's; its callers are serialised

	// rxFD is the socket's descriptor for the RX loop: close leaves it open, release (once the
	// loop has returned) closes it, so the loop never uses a number the kernel gave again.
	rxFD int
	big  []byte // the RX loop's buffer for frames too large for a slot
	// bp busy-polls the ring after a pass that found frames (nil: never); set before receive.
	bp *busyPoller
}

// openPacket opens a packet socket in namespace ns on the device with index ifindex.
//
// Errors: the failing step's errno (EPERM without CAP_NET_RAW, ENODEV when the device is gone,
// ENETDOWN, ENOMEM for the ring), wrapped with the step.
func openPacket(ns netns.NsHandle, ifindex int) (*packetSocket, error) {
	var fd int
	err := nsrun.InHandle(ns, func() (err error) {
		// Protocol 0: receive nothing until the ring is set up and the socket bound to the
		// device, so no frame of another device ever lands in the ring.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	s := &packetSocket{fd: fd, rxFD: fd}
	if err := s.setup(ifindex); err != nil {
		if s.ring != nil {
			unix.Munmap(s.ring)
		}
		unix.Close(fd)
		return nil, err
	}
	if s.pk, err = newParker(fd, "packet"); err != nil {
		unix.Munmap(s.ring)
		unix.Close(fd)
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	return s, nil
}

func (s *packetSocket) setup(ifindex int) error {
	fd := s.fd
	steps := []struct {
		what string
		do   func() error
	}{
		{"PACKET_VERSION TPACKET_V2", func() error {
			return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2)
		}},
		{"PACKET_VNET_HDR", func() error {
			// Before the ring: a virtio_net_hdr precedes each frame in it, saying whether the
			// frame is a GSO aggregate to cut into MTU-sized ones, and with what segment size.
			return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1)
		}},
		{"PACKET_RX_RING", func() error {
			// One page per block: order-0 allocations, which a fragmented host still has.
			page := os.Getpagesize()
			return unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &unix.TpacketReq{
				Block_size: uint32(page), Block_nr: uint32(ringBytes / page),
				Frame_size: slotSize, Frame_nr: ringBytes / slotSize,
			})
		}},
		{"PACKET_COPY_THRESH", func() error {
			return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_COPY_THRESH, 1)
		}},
		{"SO_RCVBUF", func() error {
			// FORCE passes net.core.rmem_max (CAP_NET_ADMIN, which attaching took anyway).
			if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rxQueueBytes) == nil {
				return nil
			}
			return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rxQueueBytes)
		}},
		{"PACKET_QDISC_BYPASS", func() error {
			return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
		}},
		{"PACKET_IGNORE_OUTGOING", func() error {
			return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
		}},
		{"mmap of the RX ring", func() (err error) {
			s.ring, err = unix.Mmap(fd, 0, ringBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_LOCKED)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) {
				// Over RLIMIT_MEMLOCK: an unlocked ring works as well, it may just be paged.
				s.ring, err = unix.Mmap(fd, 0, ringBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			}
			return err
		}},
		{"bind", func() error {
			return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex})
		}},
		{"PACKET_ADD_MEMBERSHIP promiscuous", func() error {
			// A NIC filters unicast to other addresses; the segment's stations are behind it.
			// The membership ends with the socket.
			return unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP,
				&unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC})
		}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// noVnetHdr is the virtio_net_hdr written before every frame: PACKET_VNET_HDR applies to
// transmission too, and manad's frames are whole (no GSO, checksums done).
var noVnetHdr [vnetHdrLen]byte

// write transmits one frame. It never waits: a full device queue is an error (the frame is
// dropped), as is a closed socket (ENOTCONN).
func (s *packetSocket) write(frame []byte) error {
	if len(frame) == 0 {
		return unix.EINVAL
	}
	s.txMu.RLock()
	defer s.txMu.RUnlock()
	if s.fd < 0 {
		return unix.ENOTCONN
	}
	iov := [2]unix.Iovec{{Base: &noVnetHdr[0]}, {Base: &frame[0]}}
	iov[0].SetLen(vnetHdrLen)
	iov[1].SetLen(len(frame))
	err := writev(s.fd, iov[:])
	runtime.KeepAlive(frame)
	return err
}

// writev is one raw writev of iov on fd, as the endpoint writes its TAP: non-blocking, done in
// a few µs, retried on EINTR. The caller keeps what iov points to alive. Errors: the errno.
func writev(fd int, iov []unix.Iovec) error {
	for {
		_, _, errno := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return errno
	}
}

// writeGSO transmits a coalesced run, offload.Coalescer's Flush result: iov[0] is a 12-byte
// virtio_net_hdr_v1 and the headers, the rest the payloads. The packet socket takes the
// 10-byte virtio_net_hdr (PACKET_VNET_HDR), which is the v1 header without num_buffers, so
// the header goes out as two pieces and no PACKET_VNET_HDR_SZ is needed. packet_snd builds
// one skb from it (virtio_net_hdr_to_skb: gso_type, gso_size, the partial checksum), and the
// device or validate_xmit_skb segments it. Calls must not overlap. Errors: write's.
func (s *packetSocket) writeGSO(iov [][]byte) error {
	if len(iov) < 1 || len(iov[0]) <= offload.HeaderLen {
		return unix.EINVAL
	}
	s.txMu.RLock()
	defer s.txMu.RUnlock()
	if s.fd < 0 {
		return unix.ENOTCONN
	}
	v := append(s.giov[:0], unix.Iovec{Base: &iov[0][0]}, unix.Iovec{Base: &iov[0][offload.HeaderLen]})
	v[0].SetLen(vnetHdrLen)
	v[1].SetLen(len(iov[0]) - offload.HeaderLen)
	for _, b := range iov[1:] {
		if len(b) > 0 {
			v = append(v, unix.Iovec{Base: &b[0]})
			v[len(v)-1].SetLen(len(b))
		}
	}
	s.giov = v
	defer clear(v)
	err := writev(s.fd, v)
	runtime.KeepAlive(iov)
	return err
}

// frameFunc receives one frame from the ring: its bytes (writable, valid only during the call),
// its length on the wire, the ring's status bits (TP_STATUS_*), its VLAN TCI and TPID, and its
// virtio_net_hdr.
type frameFunc func(frame []byte, wireLen int, status uint32, vlanTCI uint32, vlanTPID uint16, vh vnetHdr)

// receive runs the RX loop until the socket is closed: it waits on its parker for a slot to be
// handed over, passes every frame handed over to fn, up to frameBudget of them, calls batchEnd
// and gives their slots back; with busy polling (s.bp) it looks at the ring for the poller's
// window before it waits again, its parker disarmed meanwhile.
func (s *packetSocket) receive(fn frameFunc, batchEnd func()) error {
	if s.big == nil {
		s.big = make([]byte, maxFrame)
	}
	slots := len(s.ring) / slotSize
	next := 0
	ready := func() bool {
		h := (*unix.Tpacket2Hdr)(unsafe.Pointer(&s.ring[next*slotSize]))
		return atomic.LoadUint32(&h.Status)&unix.TP_STATUS_USER != 0
	}
	pass := func() int {
		first, n := next, 0
		for n < frameBudget {
			slot := s.ring[next*slotSize : (next+1)*slotSize]
			h := (*unix.Tpacket2Hdr)(unsafe.Pointer(&slot[0]))
			status := atomic.LoadUint32(&h.Status)
			if status&unix.TP_STATUS_USER == 0 {
				break
			}
			s.frame(slot, h, status, fn)
			n++
			next = (next + 1) % slots
		}
		if n == 0 {
			return 0
		}
		batchEnd()
		for i := range n {
			h := (*unix.Tpacket2Hdr)(unsafe.Pointer(&s.ring[(first+i)%slots*slotSize]))
			atomic.StoreUint32(&h.Status, unix.TP_STATUS_KERNEL)
		}
		return n
	}
	drain := func() bool {
		for {
			n := pass()
			// A full budget: come back after the others ran, without waiting, as frames
			// may be left that no new wake-up will announce. None: wait for the next frame.
			// Fewer: the ring is empty; with busy polling the loop looks at it for the
			// window before it waits (a frame the peer's answer brings is taken without a
			// wake-up), else it waits.
			if n == frameBudget {
				return true
			}
			if n == 0 || !s.bp.poll(ready, nil, s.pk) {
				// Armed before the last look at the ring: a frame handed over after
				// that look marks the epoll readable, and the wait returns at once.
				s.pk.arm(true)
				if ready() {
					continue
				}
				return false
			}
		}
	}
	for {
		err := s.pk.wait(drain)
		switch {
		case s.closed.Load():
			// close ran: the poller reports "use of closed file", not os.ErrClosed.
			return nil
		case err == nil:
			runtime.Gosched() // a pass is done: let the others run, then go on
		default:
			return err
		}
	}
}

// frame passes the frame in slot (header h) to fn: from the slot, or from the socket's queue
// when the kernel put it there whole (TP_STATUS_COPY). A frame the kernel could not keep whole
// is passed truncated, its wire length saying so.
func (s *packetSocket) frame(slot []byte, h *unix.Tpacket2Hdr, status uint32, fn frameFunc) {
	tci, tpid := uint32(h.Vlan_tci), h.Vlan_tpid
	if status&unix.TP_STATUS_COPY != 0 {
		// The queued copy starts with its own virtio_net_hdr (PACKET_VNET_HDR).
		n, err := recvTrunc(s.rxFD, s.big)
		if err == nil && n >= vnetHdrLen {
			end := min(n, len(s.big))
			fn(s.big[vnetHdrLen:end], n-vnetHdrLen, status, tci, tpid, parseVnetHdr(s.big[:vnetHdrLen]))
			return
		}
		// Not there after all (the kernel queues it before handing the slot over): the slot's
		// truncated copy stands for it and is counted as such.
	}
	start, end := int(h.Mac), int(h.Mac)+int(h.Snaplen)
	if end <= len(slot) && start <= end && start-vnetHdrLen >= int(unsafe.Sizeof(*h)) {
		fn(slot[start:end], int(h.Len), status, tci, tpid, parseVnetHdr(slot[start-vnetHdrLen:start]))
	}
}

// recvTrunc takes the next datagram of the socket's queue into b, without waiting, and returns
// its whole length (MSG_TRUNC), which may exceed len(b). Errors: the errno (EAGAIN when empty).
func recvTrunc(fd int, b []byte) (int, error) {
	for {
		n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			unix.MSG_TRUNC|unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, errno
	}
}

// close stops the socket: transmitters in flight finish first and later ones get ENOTCONN; the
// RX loop returns (its parker is closed under it). The ring is unmapped and the descriptor closed
// by release, once the RX loop has returned.
func (s *packetSocket) close() {
	if s.closed.Swap(true) {
		return
	}
	s.txMu.Lock()
	s.fd = -1
	s.txMu.Unlock()
	s.pk.close()
}

// release unmaps the ring and closes the descriptor. Call it after close, once receive has
// returned (or was never called).
func (s *packetSocket) release() {
	if s.rxFD >= 0 {
		unix.Close(s.rxFD)
		s.rxFD = -1
	}
	if s.ring != nil {
		unix.Munmap(s.ring)
		s.ring = nil
	}
}
