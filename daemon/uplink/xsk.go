package uplink

// The AF_XDP attachment. The module proxy this project builds from offers no Go AF_XDP library
// (its package list has nothing matching xdp or xsk), and the socket layer is small: per RX
// queue a UMEM and four rings mapped into memory, and one XDP program that redirects every
// queue into its socket through an XSKMAP. It is written here by hand with
// golang.org/x/sys/unix, following the kernel's samples and libxdp's xsk.c (xsk_umem__create,
// xsk_socket__create, xsk_ring_prod__reserve / xsk_ring_cons__peek).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/internal/nsrun"
	"github.com/manad/manad/internal/siocethtool"
)

// UMEM geometry. Chunks are page-sized (aligned mode needs a power of two between 2 KiB and a
// page); half of them are lent to the kernel through the fill ring for reception, half are
// manad's for transmission.
const (
	xskChunkSize = 4096
	xskRxChunks  = 2048
	xskTxChunks  = 2048
	xskChunks    = xskRxChunks + xskTxChunks
	xskTxRing    = 1024
	// xskMaxFrame is the longest frame a chunk takes: the kernel puts XDP_PACKET_HEADROOM
	// before a received frame's data (xp_alloc in net/xdp/xsk_buff_pool.c).
	xskMaxFrame = xskChunkSize - unix.XDP_PACKET_HEADROOM
	// xskBudget is how many frames one pass of the RX goroutine handles before it lets other
	// goroutines run.
	xskBudget = 256
)

// xdpMDRxQueue is the offset of rx_queue_index in struct xdp_md (include/uapi/linux/bpf.h).
const xdpMDRxQueue = 16

// xskRing is one of the four rings an AF_XDP socket shares with the kernel: a producer and a
// consumer index and an array of size descriptors (size a power of two).
type xskRing struct {
	mem       []byte
	producer  *uint32
	consumer  *uint32
	desc      unsafe.Pointer
	mask      uint32
	size      uint32
	descBytes uintptr // 8 for the fill and completion rings (addresses), 16 for RX and TX
}

// newXSKRing lays a ring over mem as the kernel's offsets say.
func newXSKRing(mem []byte, off unix.XDPRingOffset, size uint32, descBytes uintptr) (xskRing, error) {
	if size == 0 || size&(size-1) != 0 {
		return xskRing{}, fmt.Errorf("ring size %d is not a power of two: %w", size, unix.EINVAL)
	}
	need := off.Desc + uint64(size)*uint64(descBytes)
	if off.Producer+4 > uint64(len(mem)) || off.Consumer+4 > uint64(len(mem)) || need > uint64(len(mem)) {
		return xskRing{}, fmt.Errorf("ring offsets beyond the %d-byte mapping: %w", len(mem), unix.EINVAL)
	}
	return xskRing{
		mem: mem, producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])), consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		desc: unsafe.Pointer(&mem[off.Desc]), mask: size - 1, size: size, descBytes: descBytes,
	}, nil
}

// free is how many descriptors a producer may write (xsk_prod_nb_free).
func (r *xskRing) free() uint32 {
	return r.size - (*r.producer - atomic.LoadUint32(r.consumer))
}

// ready is how many descriptors a consumer may read (xsk_cons_nb_avail).
func (r *xskRing) ready() uint32 {
	return atomic.LoadUint32(r.producer) - *r.consumer
}

// addr is the i'th descriptor of a fill or completion ring (from index idx, wrapping).
func (r *xskRing) addr(idx uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(idx&r.mask)*r.descBytes))
}

// xdpDesc is the i'th descriptor of an RX or TX ring.
func (r *xskRing) xdpDesc(idx uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(idx&r.mask)*r.descBytes))
}

// produce publishes n descriptors written after the producer index (xsk_ring_prod__submit).
func (r *xskRing) produce(n uint32) { atomic.StoreUint32(r.producer, *r.producer+n) }

// consume gives n read descriptors back (xsk_ring_cons__release).
func (r *xskRing) consume(n uint32) { atomic.StoreUint32(r.consumer, *r.consumer+n) }

// xskMaxQueues bounds the RX queues an AF_XDP uplink serves (a socket and 16 MiB of UMEM
// each); a device with more is refused (AttachAuto falls back to AF_PACKET).
const xskMaxQueues = 8

// xskSocket is the AF_XDP attachment of one device: a socket per RX queue, each with its own
// UMEM, and the XDP program that redirects each queue's frames to its socket through an
// XSKMAP. The program is attached through a BPF link: it is detached when the link is closed,
// and by the kernel when manad exits however it exits.
type xskSocket struct {
	queues []*xskQueue
	ctl    int // a UDP socket in the device's namespace, for ethtool ioctls (AF_XDP has none)

	xsks *ebpf.Map
	prog *ebpf.Program
	lnk  link.Link

	zeroCopy bool   // every queue's socket is zero-copy
	mode     string // "native" or "generic": where the program runs
	closed   atomic.Bool
}

// xskQueue is the AF_XDP socket of one RX queue, with its UMEM and rings. The socket is a raw
// non-blocking descriptor, never in Go's netpoller: the RX loop waits for it on its parker
// (park.go), as a packet socket's does.
type xskQueue struct {
	pk   *parker
	umem []byte
	maps [4][]byte // the mappings of fill, completion, RX and TX rings

	fill, comp, rx, tx xskRing
	zeroCopy           bool
	// bp busy-polls the RX ring after a pass that found frames (nil: never); kernelPoll says
	// the socket has SO_BUSY_POLL, so that a recvfrom between looks busy-polls the device
	// queue. Both set before receive.
	bp         *busyPoller
	kernelPoll bool

	txMu   sync.Mutex
	fd     int      // -1 once closed; for transmitters and stats, under txMu
	txFree []uint64 // UMEM addresses of chunks free for transmission
	closed atomic.Bool
	// rxFD is the socket's descriptor for the RX loop and setup: close leaves it open, release
	// (once the loop has returned) closes it.
	rxFD int
}

// xskZeroCopy reports whether the device with index ifindex in namespace ns offers AF_XDP
// zero-copy (NETDEV_XDP_ACT_XSK_ZEROCOPY in the xdp-features the kernel's netdev family
// reports), and those features by name. It asks the kernel only: nothing is attached to the
// device. Errors: the netdev family's (a kernel before 6.3 has none), ENODEV when it does not
// list the device.
func xskZeroCopy(ctx context.Context, ns netns.NsHandle, ifindex int) (bool, []string, error) {
	var c *client.Client
	if err := nsrun.InHandle(ns, func() (err error) {
		c, err = client.DialKernel() // its socket stays in ns
		return err
	}); err != nil {
		return false, nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	devs, err := c.NetdevDevs(ctx)
	if err != nil {
		return false, nil, err
	}
	for _, d := range devs {
		if int(d.Ifindex) == ifindex {
			return d.XDPFeatures&wire.NetdevXDPActXSKZeroCopy != 0, wire.NetdevXDPActList(d.XDPFeatures), nil
		}
	}
	return false, nil, fmt.Errorf("netdev dev-get lists no ifindex %d: %w", ifindex, unix.ENODEV)
}

// openXSK opens an AF_XDP socket in namespace ns on every RX queue of the device with index
// ifindex (name dev) and attaches the redirecting program (native mode where the driver has
// it, else generic). mtu and rxQueues are the device's (IFLA_MTU, IFLA_NUM_RX_QUEUES; the
// queues in use, ETHTOOL_GCHANNELS, win where the driver reports them): a frame must fit a
// chunk, and every RX queue in use needs a socket, or its frames would pass the uplink by.
//
// Errors: EMSGSIZE for an MTU beyond a chunk, EOPNOTSUPP for more than xskMaxQueues queues,
// else the failing step's errno (EPERM without CAP_NET_ADMIN/CAP_BPF, ENOMEM or ENOBUFS over
// RLIMIT_MEMLOCK, EBUSY when another XDP program is attached…), wrapped with the step.
func openXSK(ns netns.NsHandle, ifindex int, dev string, mtu, rxQueues int) (*xskSocket, error) {
	if mtu+14+4 > xskMaxFrame {
		return nil, fmt.Errorf("MTU %d exceeds an AF_XDP frame (%d bytes): %w", mtu, xskMaxFrame, unix.EMSGSIZE)
	}
	s := &xskSocket{ctl: -1}
	err := nsrun.InHandle(ns, func() (err error) {
		if s.ctl, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return fmt.Errorf("control socket: %w", err)
		}
		if n, err := activeRxQueues(s.ctl, dev); err == nil {
			rxQueues = n
		}
		rxQueues = max(rxQueues, 1)
		if rxQueues > xskMaxQueues {
			return fmt.Errorf("device has %d RX queues, AF_XDP uplinks take at most %d: %w", rxQueues, xskMaxQueues, unix.EOPNOTSUPP)
		}
		for range rxQueues {
			q := &xskQueue{fd: -1, rxFD: -1}
			s.queues = append(s.queues, q)
			if q.rxFD, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
				return fmt.Errorf("AF_XDP socket: %w", err)
			}
			q.fd = q.rxFD
		}
		return nil
	})
	if err == nil {
		err = s.setup(ns, ifindex)
	}
	if err != nil {
		s.close()
		s.release()
		return nil, err
	}
	return s, nil
}

// setup sets every queue's socket up and bound, then loads and attaches the program.
func (s *xskSocket) setup(ns netns.NsHandle, ifindex int) (err error) {
	s.zeroCopy = true
	for i, q := range s.queues {
		if err := q.setup(ifindex, i); err != nil {
			return fmt.Errorf("queue %d: %w", i, err)
		}
		s.zeroCopy = s.zeroCopy && q.zeroCopy
	}
	if s.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "manad_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(len(s.queues))}); err != nil {
		return fmt.Errorf("XSKMAP: %w", err)
	}
	for i, q := range s.queues {
		if err := s.xsks.Put(uint32(i), uint32(q.fd)); err != nil {
			return fmt.Errorf("XSKMAP entry %d: %w", i, err)
		}
	}
	if s.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "manad_xsk", Type: ebpf.XDP, License: "Dual MIT/GPL", Instructions: xskProgram(s.xsks.FD())}); err != nil {
		return fmt.Errorf("XDP program: %w", err)
	}
	// The link's ifindex is resolved in the calling thread's namespace.
	return nsrun.InHandle(ns, func() error {
		var errs []error
		for _, m := range []struct {
			flags link.XDPAttachFlags
			name  string
		}{{link.XDPDriverMode, "native"}, {link.XDPGenericMode, "generic"}} {
			l, err := link.AttachXDP(link.XDPOptions{Program: s.prog, Interface: ifindex, Flags: m.flags})
			if err == nil {
				s.lnk, s.mode = l, m.name
				return nil
			}
			errs = append(errs, fmt.Errorf("%s XDP: %w", m.name, err))
		}
		return errors.Join(errs...)
	})
}

// setup registers the queue's UMEM, maps its rings, lends the RX chunks to the kernel and binds
// the socket to RX queue queue of the device.
func (s *xskQueue) setup(ifindex, queue int) (err error) {
	s.umem, err = unix.Mmap(-1, 0, xskChunks*xskChunkSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("UMEM: %w", err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))), Len: uint64(len(s.umem)), Size: xskChunkSize}
	if err := setsockoptPtr(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	sizes := [4]struct {
		opt  int
		size uint32
	}{{unix.XDP_UMEM_FILL_RING, xskRxChunks}, {unix.XDP_UMEM_COMPLETION_RING, xskTxChunks}, {unix.XDP_RX_RING, xskRxChunks}, {unix.XDP_TX_RING, xskTxRing}}
	for _, r := range sizes {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, r.opt, int(r.size)); err != nil {
			return fmt.Errorf("ring option %d: %w", r.opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	n := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return fmt.Errorf("XDP_MMAP_OFFSETS: %w", e)
	}
	if n != uint32(unsafe.Sizeof(off)) {
		return fmt.Errorf("XDP_MMAP_OFFSETS of %d bytes (a kernel before 5.4): %w", n, unix.EOPNOTSUPP)
	}
	rings := [4]struct {
		r     *xskRing
		off   unix.XDPRingOffset
		pgoff int64
		desc  uintptr
	}{
		{&s.fill, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, 8},
		{&s.comp, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, 8},
		{&s.rx, off.Rx, unix.XDP_PGOFF_RX_RING, unsafe.Sizeof(unix.XDPDesc{})},
		{&s.tx, off.Tx, unix.XDP_PGOFF_TX_RING, unsafe.Sizeof(unix.XDPDesc{})},
	}
	for i, r := range rings {
		length := int(r.off.Desc) + int(sizes[i].size)*int(r.desc)
		if s.maps[i], err = unix.Mmap(s.fd, r.pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			return fmt.Errorf("mmap of ring %d: %w", i, err)
		}
		if *r.r, err = newXSKRing(s.maps[i], r.off, sizes[i].size, r.desc); err != nil {
			return err
		}
	}
	// Lend every RX chunk to the kernel before frames can arrive.
	for i := range uint32(xskRxChunks) {
		*s.fill.addr(*s.fill.producer + i) = uint64(i) * xskChunkSize
	}
	s.fill.produce(xskRxChunks)
	s.txFree = make([]uint64, 0, xskTxChunks)
	for i := range uint64(xskTxChunks) {
		s.txFree = append(s.txFree, (xskRxChunks+i)*xskChunkSize)
	}
	// No bind flag: the kernel takes zero-copy where the driver offers it, else copies.
	if err := unix.Bind(s.fd, &unix.SockaddrXDP{Ifindex: uint32(ifindex), QueueID: uint32(queue)}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	var opts uint32
	n = 4
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_OPTIONS, uintptr(unsafe.Pointer(&opts)), uintptr(unsafe.Pointer(&n)), 0); e == 0 {
		s.zeroCopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	s.pk, err = newParker(s.fd, "xsk")
	return err
}

// xskProgram redirects every frame of the RX queue it runs for into the XSKMAP at mapFD, and
// passes it to the stack when the queue has no socket (bpf_redirect_map's flags are the action
// for a missing entry) — what libxdp's default program does.
func xskProgram(mapFD int) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, xdpMDRxQueue, asm.Word),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Imm(asm.R3, 2), // XDP_PASS
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}
}

// ethtoolChannels is struct ethtool_channels (linux/ethtool.h).
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// activeRxQueues is how many RX queues device name uses now (ETHTOOL_GCHANNELS through socket
// fd, as `ethtool -l` shows): a veth allocates a queue per CPU but uses one. Errors: the ioctl's
// errno (EOPNOTSUPP for devices without channels, such as VXLAN: the caller then takes
// IFLA_NUM_RX_QUEUES).
func activeRxQueues(fd int, name string) (int, error) {
	ch := ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	if _, err := siocethtool.Do(fd, name, unsafe.Pointer(&ch)); err != nil {
		return 0, err
	}
	return max(int(ch.rxCount+ch.combinedCount), 1), nil
}

func setsockoptPtr(fd, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0)
	runtime.KeepAlive(p)
	if e != 0 {
		return e
	}
	return nil
}

// reclaimTX takes the chunks the kernel has sent back to the free list. txMu held.
func (s *xskQueue) reclaimTX() {
	n := s.comp.ready()
	for i := range n {
		s.txFree = append(s.txFree, *s.comp.addr(*s.comp.consumer + i))
	}
	s.comp.consume(n)
}

// write transmits one frame through the first queue's socket (any queue may send). Errors:
// xskQueue.write's.
func (s *xskSocket) write(frame []byte) error { return s.queues[0].write(frame) }

// write transmits one frame: it is copied into a free chunk, queued on the TX ring and the
// kernel is kicked. It never waits: no free chunk or a full ring is ENOBUFS (the frame is
// dropped), a frame beyond a chunk EMSGSIZE, a closed socket ENOTCONN.
func (s *xskQueue) write(frame []byte) error {
	if len(frame) == 0 {
		return unix.EINVAL
	}
	if len(frame) > xskChunkSize {
		return unix.EMSGSIZE
	}
	s.txMu.Lock()
	defer s.txMu.Unlock()
	if s.fd < 0 {
		return unix.ENOTCONN
	}
	s.reclaimTX()
	if len(s.txFree) == 0 || s.tx.free() == 0 {
		s.kick()
		return unix.ENOBUFS
	}
	addr := s.txFree[len(s.txFree)-1]
	s.txFree = s.txFree[:len(s.txFree)-1]
	copy(s.umem[addr:addr+xskChunkSize], frame)
	d := s.tx.xdpDesc(*s.tx.producer)
	d.Addr, d.Len, d.Options = addr, uint32(len(frame)), 0
	s.tx.produce(1)
	return s.kick()
}

// xskKicks bounds the sendto calls of one kick: in copy mode each sends at most
// max_tx_budget (32) descriptors and says EAGAIN while more are queued (__xsk_generic_xmit), so
// a full TX ring takes xskTxRing/32 calls.
const xskKicks = xskTxRing/32 + 1

// kick makes the kernel send what the TX ring holds (in copy mode the send happens in the
// call). EAGAIN means descriptors remain beyond the call's budget: kicked again, or they would
// wait for the next frame. EBUSY and ENOBUFS mean the device's queue is full: what remains goes
// with the next kick.
func (s *xskQueue) kick() error {
	for range xskKicks {
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EAGAIN, unix.EINTR:
			continue
		case 0, unix.EBUSY, unix.ENOBUFS:
			return nil
		}
		return e
	}
	return nil
}

// receive runs an RX loop per queue until the sockets are closed; fn and batchEnd (after each
// batch of frames) are called from all of them at once. It returns the first loop's error, once
// every loop has returned.
func (s *xskSocket) receive(fn func(frame []byte), batchEnd func()) error {
	errs := make([]error, len(s.queues))
	var wg sync.WaitGroup
	for i, q := range s.queues[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = q.receive(fn, batchEnd)
		}()
	}
	errs[0] = s.queues[0].receive(fn, batchEnd)
	wg.Wait()
	return errors.Join(errs...)
}

// receive runs the RX loop until the socket is closed: it waits on its parker for frames,
// passes each to fn (the bytes are valid only during the call) and lends its chunk back to the
// kernel through the fill ring; batchEnd follows each batch.
func (s *xskQueue) receive(fn func(frame []byte), batchEnd func()) error {
	ready := func() bool { return s.rx.ready() > 0 }
	// kick uses the RX loop's descriptor, which release closes only after the loop returned.
	var kick func()
	if s.kernelPoll {
		kick = func() { recvKick(s.rxFD) }
	}
	pass := func() uint32 {
		n := min(s.rx.ready(), xskBudget)
		if n == 0 {
			return 0
		}
		// Every RX chunk is in the fill ring, the RX ring or here: the fill ring has room.
		for i := range n {
			d := s.rx.xdpDesc(*s.rx.consumer + i)
			if d.Addr+uint64(d.Len) <= uint64(len(s.umem)) && d.Len > 0 {
				fn(s.umem[d.Addr : d.Addr+uint64(d.Len)])
			}
			*s.fill.addr(*s.fill.producer + i) = d.Addr &^ (xskChunkSize - 1)
		}
		batchEnd()
		s.rx.consume(n)
		s.fill.produce(n)
		return n
	}
	drain := func() bool {
		for {
			// As packetSocket.receive: a full budget comes back without waiting; after
			// fewer, busy polling (s.bp) looks at the ring for the window before waiting,
			// its parker disarmed, and arms it again before the last look.
			n := pass()
			if n == xskBudget {
				return true
			}
			if n == 0 || !s.bp.poll(ready, kick, s.pk) {
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
			return nil
		case err == nil:
			runtime.Gosched()
		default:
			return err
		}
	}
}

// stats sums the sockets' drop counters (XDP_STATISTICS).
func (s *xskSocket) stats() (unix.XDPStatistics, error) {
	var sum unix.XDPStatistics
	for _, q := range s.queues {
		var st unix.XDPStatistics
		n := uint32(unsafe.Sizeof(st))
		errno := unix.ENOTCONN
		q.txMu.Lock() // keeps fd open
		if q.fd >= 0 {
			_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(q.fd), unix.SOL_XDP, unix.XDP_STATISTICS, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&n)), 0)
		}
		q.txMu.Unlock()
		if errno != 0 {
			return sum, errno
		}
		sum.Rx_dropped += st.Rx_dropped
		sum.Rx_invalid_descs += st.Rx_invalid_descs
		sum.Tx_invalid_descs += st.Tx_invalid_descs
		sum.Rx_ring_full += st.Rx_ring_full
		sum.Rx_fill_ring_empty_descs += st.Rx_fill_ring_empty_descs
		sum.Tx_ring_empty_descs += st.Tx_ring_empty_descs
	}
	return sum, nil
}

// close detaches the program and closes the sockets: transmitters in flight finish first, the
// RX loops return. The memory is unmapped by release, once the RX loops have returned.
func (s *xskSocket) close() {
	if s.closed.Swap(true) {
		return
	}
	if s.lnk != nil {
		s.lnk.Close()
	}
	for _, q := range s.queues {
		q.close()
	}
	if s.ctl >= 0 {
		unix.Close(s.ctl)
		s.ctl = -1
	}
}

// close stops the queue's socket: transmitters in flight finish first and later ones get
// ENOTCONN; the RX loop returns (its parker is closed under it). release closes the descriptor.
func (s *xskQueue) close() {
	if s.closed.Swap(true) {
		return
	}
	s.txMu.Lock()
	s.fd = -1
	s.txMu.Unlock()
	s.pk.close()
}

// release unmaps the rings and the UMEMs and frees the program and map. Call it after close,
// once receive has returned.
func (s *xskSocket) release() {
	for _, q := range s.queues {
		q.release()
	}
	if s.prog != nil {
		s.prog.Close()
		s.prog = nil
	}
	if s.xsks != nil {
		s.xsks.Close()
		s.xsks = nil
	}
}

func (s *xskQueue) release() {
	if s.rxFD >= 0 {
		unix.Close(s.rxFD)
		s.rxFD = -1
	}
	for i, m := range s.maps {
		if m != nil {
			unix.Munmap(m)
			s.maps[i] = nil
		}
	}
	if s.umem != nil {
		unix.Munmap(s.umem)
		s.umem = nil
	}
}
