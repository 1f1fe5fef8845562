package supervisor

import (
	"bytes"
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// maxSyncSend bounds the datagram a trapped send reads to have it served inside the send: a
// netlink request is a few hundred bytes; a longer datagram goes on into the pair.
const maxSyncSend = 64 << 10

// maxSyncIov bounds the iovecs of a sendmsg served inside the send (libraries send one or two).
const maxSyncIov = 16

// maxResent bounds the threads whose last served send is remembered (see send).
const maxResent = 256

// restartWindow bounds how soon after a served send the same thread's send of the same bytes
// counts as the kernel's restart of it (see send): a signal handler's run, not a program's
// next request.
const restartWindow = 20 * time.Millisecond

// servedSend is the last send of a thread that the bridge served inside the call.
type servedSend struct {
	d  []byte
	at time.Time
}

// send serves sendmsg(fd, msg, flags) and sendto(fd, buf, len, flags, addr, addrlen) on a
// bridged socket: it reads the datagram from the program and offers it to the bridge
// (NetlinkSocket.Request), which answers it before the send returns, as the kernel does; the
// send then returns the datagram's length. What the bridge does not take, and what it cannot
// be offered (a destination other than the kernel, control messages, MSG_OOB, more than
// maxSyncSend bytes or maxSyncIov iovecs), goes on into the pair (SECCOMP_USER_NOTIF_FLAG_CONTINUE),
// where Serve takes it as it takes a write(2).
//
// A signal may interrupt the program's send after the bridge served the request: before the
// answer (SECCOMP_IOCTL_NOTIF_SEND fails with ENOENT), or in the instant it arrives (the send
// succeeds, and the kernel restarts the call all the same, as seccomp_do_user_notification
// checks for a signal before it looks at the reply). The kernel restarts the call (Go's
// handlers, and most, are SA_RESTART) with the same datagram, and the request must not be served
// twice: a thread's send of the bytes the bridge served last for it, within restartWindow and
// with no other trapped call of the thread between, is that restart, and is answered with
// their length. (A program that sends the same request, sequence number included, twice in a
// row without reading in between gets one answer.)
func (s *supervisor) send(n *notif) error {
	tid, fd := int(n.PID), int(int32(n.Data.Args[0]))
	b := s.lookup(tid, fd)
	if b == nil {
		s.forgetSend(tid)
		return s.l.continueSyscall(n.ID)
	}
	d, ok := readSend(procMemory{pid: tid}, n)
	if !ok {
		s.forgetSend(tid)
		return s.l.continueSyscall(n.ID)
	}
	s.mu.Lock()
	prev, had := s.served[tid]
	restart := had && time.Since(prev.at) < restartWindow && bytes.Equal(prev.d, d)
	if restart {
		// Kept: the restarted call may be interrupted and restarted again.
		s.served[tid] = servedSend{d: d, at: time.Now()}
	} else {
		delete(s.served, tid)
	}
	s.mu.Unlock()
	if restart {
		return s.l.respond(n.ID, int64(len(d)), 0)
	}
	if !b.sock.Request(d) {
		return s.l.continueSyscall(n.ID)
	}
	s.mu.Lock()
	if len(s.served) >= maxResent {
		clear(s.served)
	}
	s.served[tid] = servedSend{d: d, at: time.Now()}
	s.mu.Unlock()
	return s.l.respond(n.ID, int64(len(d)), 0)
}

// forgetSend forgets tid's last served send: the thread made another trapped call since.
func (s *supervisor) forgetSend(tid int) {
	s.mu.Lock()
	delete(s.served, tid)
	s.mu.Unlock()
}

// readSend reads the datagram of a trapped sendmsg or sendto; ok is false when it is not to be
// served inside the send (see send), or the program's memory cannot be read (the kernel then
// answers the continued call, EFAULT included).
func readSend(m procMemory, n *notif) (d []byte, ok bool) {
	a := n.Data.Args
	le := binary.NativeEndian
	var name uint64
	var nameLen uint32
	var iovs []unix.RemoteIovec
	var flags int
	switch int(n.Data.Nr) {
	case unix.SYS_SENDTO:
		flags = int(int32(a[3]))
		if a[2] == 0 || a[2] > maxSyncSend {
			return nil, false
		}
		iovs = []unix.RemoteIovec{{Base: uintptr(a[1]), Len: int(a[2])}}
		name, nameLen = a[4], uint32(a[5])
	case unix.SYS_SENDMSG:
		flags = int(int32(a[2]))
		hdr, raw, err := readMsghdr(m, a[1])
		if err != nil {
			return nil, false
		}
		name, nameLen = le.Uint64(hdr[offMsgName:]), le.Uint32(hdr[offMsgNamelen:])
		iovLen := le.Uint64(hdr[offMsgIovlen:])
		if le.Uint64(hdr[offMsgCtrllen:]) != 0 || iovLen == 0 || iovLen > maxSyncIov {
			return nil, false
		}
		total := uint64(0)
		for i := range iovLen {
			base, l := le.Uint64(raw[i*sizeofIovec:]), le.Uint64(raw[i*sizeofIovec+8:])
			total += l
			if l > maxSyncSend || total > maxSyncSend {
				return nil, false
			}
			if l != 0 {
				iovs = append(iovs, unix.RemoteIovec{Base: uintptr(base), Len: int(l)})
			}
		}
		if total == 0 {
			return nil, false
		}
	default:
		return nil, false
	}
	if flags&unix.MSG_OOB != 0 {
		return nil, false
	}
	total := 0
	for _, v := range iovs {
		total += v.Len
	}
	want := total
	var sa *unix.SockaddrNetlink
	if name != 0 && nameLen != 0 {
		// The destination, read with the data.
		if nameLen < sizeofSockaddrNL {
			return nil, false
		}
		iovs = append(iovs, unix.RemoteIovec{Base: uintptr(name), Len: sizeofSockaddrNL})
		want += sizeofSockaddrNL
	}
	buf := make([]byte, want)
	got, err := unix.ProcessVMReadv(m.pid, []unix.Iovec{{Base: &buf[0], Len: uint64(want)}}, iovs, 0)
	if err != nil || got != want {
		return nil, false
	}
	if want > total {
		sa = decodeSockaddrNL(buf[total:])
	}
	// A destination: only the kernel's (nl_pid 0, no groups) is a request to the bridge.
	if sa != nil && (sa.Family != unix.AF_NETLINK || sa.Pid != 0 || sa.Groups != 0) {
		return nil, false
	}
	return buf[:total], true
}
