package main

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI this program uses (include/uapi/linux/io_uring.h); golang.org/x/sys/unix
// has the system call numbers but none of these.
const (
	setupSQPoll    = 1 << 1 // IORING_SETUP_SQPOLL
	setupSQAff     = 1 << 2 // IORING_SETUP_SQ_AFF
	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP
	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS
	enterSQWakeup  = 1 << 1 // IORING_ENTER_SQ_WAKEUP
	sqNeedWakeup   = 1 << 0 // IORING_SQ_NEED_WAKEUP

	offSQRing = 0          // IORING_OFF_SQ_RING
	offCQRing = 0x8000000  // IORING_OFF_CQ_RING
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	opRead          = 22 // IORING_OP_READ
	opWrite         = 23 // IORING_OP_WRITE
	opReadMultishot = 49 // IORING_OP_READ_MULTISHOT

	sqeBufferSelect  = 1 << 5 // IOSQE_BUFFER_SELECT
	cqeFBuffer       = 1 << 0 // IORING_CQE_F_BUFFER
	cqeFMore         = 1 << 1 // IORING_CQE_F_MORE
	cqeBufferShift   = 16     // IORING_CQE_BUFFER_SHIFT
	registerPbufRing = 22     // IORING_REGISTER_PBUF_RING
)

// sqringOffsets is struct io_sqring_offsets.
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets.
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes), with the fields a READ or WRITE uses.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	_           uint64
}

// cqe is struct io_uring_cqe (16 bytes, no IORING_SETUP_CQE32).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring is a minimal io_uring instance: its submission and completion rings mapped into this
// process, SQEs queued by one goroutine (the ring has a single producer) and completions reaped
// by the same one, polling the CQ ring's tail with no system call. The kernel's side of each
// ring index (the SQ head, the CQ tail) and ours (the SQ tail, the CQ head) are read and written
// with sync/atomic, whose sequentially consistent loads and stores are the barriers liburing's
// io_uring_smp_load_acquire, io_uring_smp_store_release and io_uring_smp_mb stand for.
//
// With SQPOLL a kernel thread of this process (iou-sqp-PID) polls the SQ ring: a queued SQE is
// submitted by storing the tail, with no system call, unless the thread has slept after
// sqThreadIdle without work (IORING_SQ_NEED_WAKEUP: one io_uring_enter wakes it). Without it
// every submit is an io_uring_enter.
type ring struct {
	fd     int
	sqpoll bool

	sqMem, cqMem, sqeMem []byte

	sqHead, sqTail, sqFlags *atomic.Uint32
	sqMask, sqEntries       uint32
	sqArray                 []uint32
	sqes                    []sqe

	cqHead, cqTail *atomic.Uint32
	cqMask         uint32
	cqes           []cqe

	tail    uint32 // our SQ tail, published by submit
	pending uint32 // SQEs queued since the last submit
}

// errRingUnavailable wraps an io_uring_setup failure that means io_uring is not available here
// (not built in, disabled by kernel.io_uring_disabled, or refused by a seccomp filter), not
// that this program is wrong.
var errRingUnavailable = errors.New("io_uring unavailable")

// newRing sets up a ring of entries SQEs (a power of two), with an SQPOLL thread that sleeps
// after idle without work when sqpoll is set, bound to CPU cpu when cpu >= 0. Errors: io_uring_setup's (wrapping
// errRingUnavailable for ENOSYS and EPERM) or mmap's.
func newRing(entries uint32, sqpoll bool, idle time.Duration, cpu int) (*ring, error) {
	var p params
	if sqpoll {
		p.flags = setupSQPoll
		p.sqThreadIdle = uint32(max(1, idle.Milliseconds()))
		if cpu >= 0 {
			p.flags |= setupSQAff
			p.sqThreadCPU = uint32(cpu)
		}
	}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		if e == unix.ENOSYS || e == unix.EPERM {
			return nil, fmt.Errorf("io_uring_setup: %w: %w", errRingUnavailable, e)
		}
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	r := &ring{fd: int(fd), sqpoll: sqpoll}
	if err := r.mmap(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// mmap maps the rings and the SQE array as io_uring_setup's params describe them.
func (r *ring) mmap(p *params) error {
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_POPULATE
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	single := p.features&featSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, prot, flags); err != nil {
		return fmt.Errorf("mmap SQ ring: %w", err)
	}
	r.cqMem = r.sqMem
	if !single {
		if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, prot, flags); err != nil {
			return fmt.Errorf("mmap CQ ring: %w", err)
		}
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), prot, flags); err != nil {
		return fmt.Errorf("mmap SQEs: %w", err)
	}
	u32 := func(b []byte, off uint32) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail, r.sqFlags = u32(r.sqMem, p.sqOff.head), u32(r.sqMem, p.sqOff.tail), u32(r.sqMem, p.sqOff.flags)
	r.sqMask, r.sqEntries = u32(r.sqMem, p.sqOff.ringMask).Load(), p.sqEntries
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.array])), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail = u32(r.cqMem, p.cqOff.head), u32(r.cqMem, p.cqOff.tail)
	r.cqMask = u32(r.cqMem, p.cqOff.ringMask).Load()
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)
	r.tail = r.sqTail.Load()
	return nil
}

// close unmaps the rings and closes the ring, which cancels what is still in flight and ends
// its SQPOLL thread.
func (r *ring) close() {
	if r.sqeMem != nil {
		_ = unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && (r.sqMem == nil || &r.cqMem[0] != &r.sqMem[0]) {
		_ = unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		_ = unix.Munmap(r.sqMem)
	}
	unix.Close(r.fd)
}

// queue queues a read (op opRead) or write (opWrite) of buf on fd, tagged with userData, and
// reports false when the SQ ring is full (submit, then try again). buf must stay mapped until
// its completion: this program's buffers are mmap'd, outside the Go heap.
func (r *ring) queue(op uint8, fd int, buf []byte, userData uint64) bool {
	if r.tail-r.sqHead.Load() >= r.sqEntries {
		return false
	}
	i := r.tail & r.sqMask
	r.sqes[i] = sqe{opcode: op, fd: int32(fd), addr: uint64(uintptr(unsafe.Pointer(&buf[0]))),
		len: uint32(len(buf)), userData: userData}
	r.sqArray[i] = i
	r.tail++
	r.pending++
	return true
}

// queueMultishot queues a multishot read of fd (IORING_OP_READ_MULTISHOT) into the buffers of
// provided-buffer group bgid, tagged with userData: one completion per frame read, with
// IORING_CQE_F_MORE while the read stays armed. It reports false when the SQ ring is full.
func (r *ring) queueMultishot(fd int, bgid uint16, userData uint64) bool {
	if r.tail-r.sqHead.Load() >= r.sqEntries {
		return false
	}
	i := r.tail & r.sqMask
	r.sqes[i] = sqe{opcode: opReadMultishot, flags: sqeBufferSelect, fd: int32(fd), bufIndex: bgid, userData: userData}
	r.sqArray[i] = i
	r.tail++
	r.pending++
	return true
}

// submit hands the queued SQEs to the kernel: with SQPOLL by publishing the tail (and waking
// the thread when it sleeps), otherwise with io_uring_enter. Errors: io_uring_enter's.
func (r *ring) submit() error {
	if r.pending == 0 {
		return nil
	}
	r.sqTail.Store(r.tail) // a full barrier: the flags load below cannot pass it
	if r.sqpoll {
		r.pending = 0
		if r.sqFlags.Load()&sqNeedWakeup != 0 {
			_, err := r.enter(0, 0, enterSQWakeup)
			return err
		}
		return nil
	}
	for r.pending > 0 {
		n, err := r.enter(r.pending, 0, 0)
		if err != nil {
			return err
		}
		r.pending -= n
	}
	return nil
}

// enter is io_uring_enter(2), retried on EINTR.
func (r *ring) enter(toSubmit, minComplete, flags uint32) (uint32, error) {
	for {
		n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, fmt.Errorf("io_uring_enter: %w", e)
		}
		return uint32(n), nil
	}
}

// completions returns the CQ ring's unread range [head, tail): cqe(i) for each, then consumed
// with done(tail).
func (r *ring) completions() (head, tail uint32) {
	return r.cqHead.Load(), r.cqTail.Load()
}

// cqe returns completion i of completions' range.
func (r *ring) cqe(i uint32) cqe { return r.cqes[i&r.cqMask] }

// done gives the CQ entries before head back to the kernel.
func (r *ring) done(head uint32) { r.cqHead.Store(head) }

// ioUringBuf is struct io_uring_buf, an entry of a provided-buffer ring; the ring's tail
// overlays entry 0's resv field (struct io_uring_buf_ring).
type ioUringBuf struct {
	addr uint64
	len  uint32
	bid  uint16
	resv uint16
}

// bufReg is struct io_uring_buf_reg.
type bufReg struct {
	ringAddr    uint64
	ringEntries uint32
	bgid        uint16
	flags       uint16
	resv        [5]uint32
}

// bufRing is a provided-buffer ring (IORING_REGISTER_PBUF_RING) of one buffer group: this
// process adds buffers at its tail, the kernel takes one at its head for each frame a
// multishot read reads.
type bufRing struct {
	mem  []byte
	bufs []ioUringBuf
	mask uint16
	tail uint16
}

// registerBufRing maps and registers a provided-buffer ring of entries (a power of two) for
// group bgid. Errors: mmap's or io_uring_register's.
func (r *ring) registerBufRing(entries int, bgid uint16) (*bufRing, error) {
	mem, err := unix.Mmap(-1, 0, entries*int(unsafe.Sizeof(ioUringBuf{})), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap buffer ring: %w", err)
	}
	reg := bufReg{ringAddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), ringEntries: uint32(entries), bgid: bgid}
	if _, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerPbufRing, uintptr(unsafe.Pointer(&reg)), 1, 0, 0); e != 0 {
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("IORING_REGISTER_PBUF_RING: %w", e)
	}
	return &bufRing{mem: mem, bufs: unsafe.Slice((*ioUringBuf)(unsafe.Pointer(&mem[0])), entries), mask: uint16(entries - 1)}, nil
}

// add puts buf (which must stay mapped) in the ring as buffer bid; publish makes it visible.
// Fields are written one by one: entry 0's resv is the tail.
func (b *bufRing) add(buf []byte, bid uint16) {
	e := &b.bufs[b.tail&b.mask]
	e.addr, e.len, e.bid = uint64(uintptr(unsafe.Pointer(&buf[0]))), uint32(len(buf)), bid
	b.tail++
}

// publish stores the tail (a 16-bit field) with a 32-bit atomic store of the word it shares
// with entry 0's bid, which it writes back unchanged: the release liburing's
// io_uring_buf_ring_advance does with a 16-bit store.
func (b *bufRing) publish() {
	(*atomic.Uint32)(unsafe.Pointer(&b.mem[12])).Store(uint32(b.bufs[0].bid) | uint32(b.tail)<<16)
}

// close unmaps the ring's memory (after the ring it was registered with is closed).
func (b *bufRing) close() { _ = unix.Munmap(b.mem) }
