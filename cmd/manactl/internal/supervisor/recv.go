package supervisor

import (
	"context"
	"encoding/binary"
	"errors"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The 64-bit layouts of struct msghdr and struct iovec.
const (
	sizeofMsghdr  = 56
	sizeofIovec   = 16
	offMsgName    = 0
	offMsgNamelen = 8
	offMsgIov     = 16
	offMsgIovlen  = 24
	offMsgControl = 32
	offMsgCtrllen = 40
	offMsgFlags   = 48
	maxIov        = 1024    // UIO_MAXIOV
	maxDatagram   = 1 << 20 // a bridged datagram is a netlink message batch: well below this
)

// errWouldBlock says a receive served inline, in the notification loop, would wait: it is served
// again in a goroutine of its own.
var errWouldBlock = errors.New("the trapped call would block")

// errInterrupted says the program's call ended (a signal, or the task died) while the
// supervisor waited for a datagram: the call has nobody to answer.
var errInterrupted = errors.New("the trapped call was interrupted")

var _ [sizeofMsghdr]byte = [unsafe.Sizeof(unix.Msghdr{})]byte{}

// iov is one of the program's receive buffers.
type iov struct{ base, len uint64 }

// recvmsg serves recvmsg(fd, msg, flags) on a bridged socket, as netlink_recvmsg answers it.
func (s *supervisor) recvmsg(ctx context.Context, n *notif, b *bridged, m procMemory, cfd int, mayBlock bool) error {
	return s.recvmsgAt(ctx, n, b, m, cfd, n.Data.Args[1], int(int32(n.Data.Args[2])), false, mayBlock)
}

// recvmmsg serves recvmmsg(fd, msgvec, vlen, flags, timeout) with one datagram: the first
// mmsghdr is filled as recvmsg fills its msghdr, its msg_len gets the length, and the call
// returns 1 (0 for vlen 0). The kernel would go on filling entries while datagrams are queued
// (MSG_WAITFORONE), or wait for vlen of them; one at a time keeps each datagram in the socket
// until the program has it (see finish), and a program calling recvmmsg takes any count. The
// timeout, which the kernel checks only after a datagram, is not needed for the first.
func (s *supervisor) recvmmsg(ctx context.Context, n *notif, b *bridged, m procMemory, cfd int, mayBlock bool) error {
	if uint32(n.Data.Args[2]) == 0 {
		return s.l.respond(n.ID, 0, 0)
	}
	return s.recvmsgAt(ctx, n, b, m, cfd, n.Data.Args[1], int(int32(n.Data.Args[3])), true, mayBlock)
}

// recvmsgAt fills the msghdr at msgAddr with the next datagram; mmsg: it is the first entry of
// recvmmsg's vector, whose msg_len gets the length, and the call answers 1.
func (s *supervisor) recvmsgAt(ctx context.Context, n *notif, b *bridged, m procMemory, cfd int, msgAddr uint64, flags int, mmsg, mayBlock bool) error {
	hdr, raw, err := readMsghdr(m, msgAddr)
	if err != nil {
		return s.answer(n, 0, err)
	}
	le := binary.NativeEndian
	nameAddr, nameLen := le.Uint64(hdr[offMsgName:]), le.Uint32(hdr[offMsgNamelen:])
	iovLen := le.Uint64(hdr[offMsgIovlen:])
	iovs := make([]iov, iovLen)
	var total uint64
	for i := range iovs {
		iovs[i] = iov{le.Uint64(raw[i*sizeofIovec:]), le.Uint64(raw[i*sizeofIovec+8:])}
		if iovs[i].len > maxDatagram {
			iovs[i].len = maxDatagram
		}
		total += iovs[i].len
	}
	r, err := s.receive(ctx, n, b, cfd, flags, total, mayBlock)
	if err != nil {
		return s.answerRecv(n, err)
	}
	defer b.rmu.Unlock()
	if !s.l.valid(n.ID) {
		return nil // see stillWaiting
	}
	data, full := r.data, r.full
	from, group, pktinfo := b.sock.Origin(r.all, false)
	// One process_vm_writev for the data and the header fields the kernel writes back.
	var w writes
	scatter(&w, iovs, data)
	if nameAddr != 0 { // ____sys_recvmsg writes msg_name and msg_namelen only with a msg_name
		name := encodeSockaddrNL(&unix.SockaddrNetlink{Pid: from, Groups: groupMask(group)})
		if int(nameLen) < len(name) {
			name = name[:nameLen]
		}
		w.add(name, nameAddr)
		w.add(le.AppendUint32(nil, sizeofSockaddrNL), msgAddr+offMsgNamelen)
	}
	mflags := uint32(0)
	if full > len(data) {
		mflags |= unix.MSG_TRUNC
	}
	ctrlUsed := uint64(0)
	if pktinfo {
		var trunc bool
		ctrlUsed, trunc = addPktinfo(&w, le.Uint64(hdr[offMsgControl:]), le.Uint64(hdr[offMsgCtrllen:]), group)
		if trunc {
			mflags |= unix.MSG_CTRUNC
		}
	}
	w.add(le.AppendUint64(nil, ctrlUsed), msgAddr+offMsgCtrllen)
	w.add(le.AppendUint32(nil, mflags), msgAddr+offMsgFlags)
	ret := int64(-1) // the received length
	if mmsg {
		l := len(data)
		if flags&unix.MSG_TRUNC != 0 {
			l = full
		}
		w.add(le.AppendUint32(nil, uint32(l)), msgAddr+sizeofMsghdr)
		ret = 1
	}
	if err := m.writeAll(&w); err != nil {
		return s.answer(n, 0, err)
	}
	return s.finish(n, b, cfd, flags, r, ret)
}

// msghdrNear is how much of the program's memory around a msghdr readMsghdr reads with it, where
// its iovec array usually is (both on the caller's stack, as C and Go's x/sys/unix put them).
const msghdrNear = 256

// readMsghdr reads the struct msghdr at addr and its iovec array (raw, sizeofIovec bytes each):
// with one process_vm_readv when the array lies within msghdrNear bytes of the msghdr, which
// saves the round trip a system call in most programs, else with a second one. An iovec count
// above UIO_MAXIOV is EMSGSIZE, as import_iovec says.
func readMsghdr(m procMemory, addr uint64) (hdr [sizeofMsghdr]byte, raw []byte, err error) {
	le := binary.NativeEndian
	var near [msghdrNear + sizeofMsghdr + msghdrNear]byte
	lo := addr - min(addr, msghdrNear)
	// The msghdr and what follows it first: a read that runs into an unmapped page stops
	// there, and the msghdr is still read whole.
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: sizeofMsghdr + msghdrNear}, {Base: uintptr(lo), Len: int(addr - lo)}}
	after := near[msghdrNear:]
	got, rerr := unix.ProcessVMReadv(m.pid, []unix.Iovec{{Base: &after[0], Len: uint64(len(after))}, {Base: &near[msghdrNear-(addr-lo)], Len: addr - lo}}, remote, 0)
	if rerr != nil || got < sizeofMsghdr {
		// Nothing near: the msghdr alone, which says EFAULT if it is not there either.
		if err := m.ReadAt(hdr[:], addr); err != nil {
			return hdr, nil, err
		}
		got = sizeofMsghdr
	} else {
		copy(hdr[:], after)
	}
	iovAddr, iovLen := le.Uint64(hdr[offMsgIov:]), le.Uint64(hdr[offMsgIovlen:])
	if iovLen > maxIov {
		return hdr, nil, unix.EMSGSIZE
	}
	size := iovLen * sizeofIovec
	// What was read: [addr, addr+got) of the first part, and [lo, addr) when all was read (a
	// part of it read short holds its start, not what is next to the msghdr: not used).
	readLo, readHi := addr, addr+uint64(min(got, len(after)))
	if got == len(after)+int(addr-lo) {
		readLo = lo
	}
	if iovAddr >= readLo && iovAddr+size >= iovAddr && iovAddr+size <= readHi {
		off := msghdrNear - (addr - iovAddr)
		if iovAddr >= addr {
			off = msghdrNear + (iovAddr - addr)
		}
		return hdr, append([]byte(nil), near[off:off+size]...), nil
	}
	raw = make([]byte, size)
	if err := m.ReadAt(raw, iovAddr); err != nil {
		return hdr, nil, err
	}
	return hdr, raw, nil
}

// groupMask is netlink_group_mask: the nl_groups bit of a group, none past 32.
func groupMask(group uint32) uint32 {
	if group == 0 || group > 32 {
		return 0
	}
	return 1 << (group - 1)
}

// addPktinfo adds the writes of the NETLINK_PKTINFO control message (struct nl_pktinfo, the
// group) into the program's control buffer at ctrl of ctrlLen bytes, as put_cmsg does: a buffer
// shorter than a cmsghdr gets nothing and MSG_CTRUNC, one shorter than the message what fits of
// it, with MSG_CTRUNC. It returns the msg_controllen the kernel reports (the bytes used).
func addPktinfo(w *writes, ctrl, ctrlLen uint64, group uint32) (used uint64, trunc bool) {
	const hdrLen, cmsgLen, cmsgSpace = 16, 20, 24 // CMSG_LEN(4), CMSG_SPACE(4) on 64 bits
	if ctrl == 0 || ctrlLen < hdrLen {
		return 0, true
	}
	le := binary.NativeEndian
	b := le.AppendUint64(nil, cmsgLen)
	b = le.AppendUint32(b, unix.SOL_NETLINK)
	b = le.AppendUint32(b, unix.NETLINK_PKTINFO)
	b = le.AppendUint32(b, group)
	if ctrlLen < cmsgLen {
		le.PutUint64(b, ctrlLen)
		b, trunc = b[:ctrlLen], true
	}
	w.add(b, ctrl)
	return min(cmsgSpace, ctrlLen), trunc
}

// recvfrom serves recvfrom(fd, buf, len, flags, addr, addrlen).
func (s *supervisor) recvfrom(ctx context.Context, n *notif, b *bridged, m procMemory, cfd int, mayBlock bool) error {
	a := n.Data.Args
	buf, size, flags := a[1], a[2], int(int32(a[3]))
	if size > maxDatagram {
		size = maxDatagram
	}
	r, err := s.receive(ctx, n, b, cfd, flags, size, mayBlock)
	if err != nil {
		return s.answerRecv(n, err)
	}
	defer b.rmu.Unlock()
	if !s.l.valid(n.ID) {
		return nil // see stillWaiting
	}
	if err := m.WriteAt(r.data, buf); err != nil {
		return s.answer(n, 0, err)
	}
	if a[4] != 0 && a[5] != 0 {
		from, group, _ := b.sock.Origin(r.all, false)
		if err := writeSockaddrNL(m, a[4], a[5], &unix.SockaddrNetlink{Pid: from, Groups: groupMask(group)}); err != nil {
			return s.answer(n, 0, err)
		}
	}
	return s.finish(n, b, cfd, flags, r, -1)
}

// stillWaiting: a receive checks, holding b.rmu, that its call is still waiting
// (SECCOMP_IOCTL_NOTIF_ID_VALID) before it writes into the program's buffers. A call that a
// signal interrupted is restarted as a new notification, which another receive may have
// answered meanwhile; the program has then moved on, and its buffers' memory (often its stack)
// is something else: a late write would corrupt it. Checked under b.rmu, a valid call stays
// unanswered until the writes are done (the restarted call's receive waits for the lock), and
// its buffers where they were (a restarted call is the same call, with the same arguments).

// answerRecv answers a receive that failed, or nothing when its call was interrupted or is to
// be served where it may block.
func (s *supervisor) answerRecv(n *notif, err error) error {
	if errors.Is(err, errInterrupted) {
		return nil
	}
	if errors.Is(err, errWouldBlock) {
		return err
	}
	return s.answer(n, 0, err)
}

// finish answers the receive with ret, or when ret < 0 the datagram's length (the full length
// with MSG_TRUNC, as netlink_recvmsg), then consumes the datagram unless the program peeked. The caller holds
// b.rmu, so no other receive of the socket sees the datagram between the answer and its
// consumption.
//
// The answer goes first because only its success says that the program got the datagram: a
// signal that interrupts the call before it (Go's preemption signal does, every few
// milliseconds under GC) makes the kernel restart the call, or fail it with EINTR, and the
// datagram must then still be there. (The kernel's one remaining window: a signal that wakes
// the program in the instant the answer arrives makes the call restart although
// SECCOMP_IOCTL_NOTIF_SEND succeeded, and the datagram is lost. Only
// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV closes it, at the price of blocking receives that no
// signal handler can interrupt.)
func (s *supervisor) finish(n *notif, b *bridged, cfd, flags int, r received, ret int64) error {
	if ret < 0 {
		ret = int64(len(r.data))
		if flags&unix.MSG_TRUNC != 0 {
			ret = int64(r.full)
		}
	}
	if err := s.l.respond(n.ID, ret, 0); err != nil {
		return err // ENOENT: interrupted, the datagram stays for the restarted call
	}
	if flags&unix.MSG_PEEK == 0 {
		var one [1]byte
		if _, _, err := unix.Recvfrom(cfd, one[:], unix.MSG_DONTWAIT|unix.MSG_TRUNC); err != nil {
			s.cfg.Logger.Warn("consume a received datagram", "err", err)
		}
		b.sock.Origin(r.all, true)
	}
	return nil
}

// receive peeks at the next datagram of cfd, the program's end of bridged socket b, waiting for
// one as the program's receive would (unless MSG_DONTWAIT or O_NONBLOCK, or until SO_RCVTIMEO),
// and returns at most limit of its bytes and its full length, holding b.rmu (the caller unlocks it
// once the datagram is delivered and consumed). A pending socket error (ENOBUFS) is returned
// first, as sock_error does. It returns errInterrupted when the program's call was interrupted
// meanwhile (nobody to answer), and errWouldBlock, without waiting, when it would wait or
// another receive of the socket is being answered and mayBlock is false (the caller then
// serves the call where it may block). On error b.rmu is not held.
func (s *supervisor) receive(ctx context.Context, n *notif, b *bridged, cfd, flags int, limit uint64, mayBlock bool) (r received, err error) {
	if err := b.sock.PendingError(); err != nil {
		return r, err
	}
	size := min(limit, maxDatagram)
	buf := make([]byte, max(size, originHead)) // at least the head Origin tells datagrams apart by
	var deadline time.Time
	checked, nonblockWait, lastLook := false, false, false
	for {
		if !mayBlock {
			if !b.rmu.TryLock() {
				return r, errWouldBlock
			}
		} else {
			b.rmu.Lock()
		}
		got, _, err := unix.Recvfrom(cfd, buf, unix.MSG_PEEK|unix.MSG_TRUNC|unix.MSG_DONTWAIT)
		if err == nil {
			d := buf[:min(got, len(buf))]
			return received{data: d[:min(uint64(len(d)), size)], full: got, all: d}, nil
		}
		b.rmu.Unlock()
		switch {
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			return r, err
		case lastLook:
			return r, unix.EAGAIN
		}
		if !checked { // only a receive that finds nothing needs the socket's blocking mode
			fl, err := unix.FcntlInt(uintptr(cfd), unix.F_GETFL, 0)
			if err != nil {
				return r, err
			}
			if flags&unix.MSG_DONTWAIT != 0 || fl&unix.O_NONBLOCK != 0 {
				if !b.sock.Busy() {
					// The answer may have landed between the look above and Busy: one
					// more look, then EAGAIN.
					checked, lastLook = true, true
					continue
				}
				// The kernel would hold the answer already: wait for the bridge's, briefly.
				if !mayBlock {
					return r, errWouldBlock
				}
				deadline = time.Now().Add(answerWait)
				nonblockWait = true
			} else if !mayBlock {
				return r, errWouldBlock
			}
			if tv, err := unix.GetsockoptTimeval(cfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO); !nonblockWait && err == nil && (tv.Sec != 0 || tv.Usec != 0) {
				deadline = time.Now().Add(time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond)
			}
			checked = true
		}
		wait := recvPoll
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return r, unix.EAGAIN
			}
			wait = min(wait, left)
		}
		pfd := []unix.PollFd{{Fd: int32(cfd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, int(wait.Milliseconds())+1); err != nil && err != unix.EINTR {
			return r, err
		}
		if ctx.Err() != nil || !s.l.valid(n.ID) {
			return r, errInterrupted
		}
		if err := b.sock.PendingError(); err != nil {
			return r, err
		}
		if nonblockWait && !b.sock.Busy() {
			nonblockWait = false
			deadline = time.Now() // one more look, then EAGAIN
		}
	}
}

// received is a datagram a receive found: the part of it the program's buffers hold, its full
// length, and its first originHead bytes or more (all of it that was read).
type received struct {
	data []byte
	full int
	all  []byte
}

// originHead is how much of a datagram NetlinkSocket.Origin needs.
const originHead = 20

// answerWait bounds how long a non-blocking receive on a busy bridged socket waits for the
// answer (a request manad takes long over, a SET without an answer ends sooner).
const answerWait = 100 * time.Millisecond

// scatter adds the writes of data into the program's buffers, in order, to w.
func scatter(w *writes, iovs []iov, data []byte) {
	for _, v := range iovs {
		if len(data) == 0 {
			return
		}
		k := min(uint64(len(data)), v.len)
		if k == 0 {
			continue
		}
		w.add(data[:k], v.base)
		data = data[k:]
	}
}
