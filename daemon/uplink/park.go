package uplink

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// parker is where an uplink's RX loop waits for its socket (a packet socket, or one AF_XDP
// queue's) when its ring is empty: an epoll instance of the socket's own, holding the socket's
// raw descriptor, which never enters Go's netpoller. The epoll descriptor does (an epoll instance
// is pollable: readable while a descriptor in it is), and the loop reads its ring inside the
// epoll file's RawConn.Read, so a parked loop costs no thread and a frame that arrives for it
// wakes the runtime's poller once, as a netpoller-backed socket did.
//
// What it changes is a loop that busy-polls (busyPoller). Its entry here is disarmed (no event:
// ep_poll_callback returns at once) for as long as the loop polls its ring, so the frames the
// kernel hands over meanwhile wake no thread. With the socket itself in the netpoller
// (edge-triggered, for as long as it was open) every frame woke the runtime's idle poller thread,
// in vain while the loop was polling the ring anyway: on two CPUs that thread took the CPU the
// round trip's other end needed. Arming costs one epoll_ctl each way per polling episode, not per
// frame; as daemon/datapath's parker for the TAP queues (park.go there), whose design this
// mirrors.
//
// close wakes a parked loop: closing the epoll file evicts its reader (the Read returns
// os.ErrClosed), and the descriptor is closed once the Read has returned. A parker is used by
// its RX loop only (wait, arm); close by the socket's close, from any goroutine.
type parker struct {
	f     *os.File // the epoll instance, netpoller-backed
	rc    syscall.RawConn
	epfd  int
	sock  int  // the socket's descriptor in the epoll instance (not owned)
	armed bool // whether the entry waits for EPOLLIN; the RX loop's
	err   error
}

// newParker creates the epoll instance of socket sock (named name in errors and /proc) and
// registers sock in it, armed. Errors: the kernel's errno (EMFILE, ENOMEM), wrapped with the
// call.
func newParker(sock int, name string) (*parker, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, sock, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(sock)}); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	// Non-blocking before os.NewFile, which registers only such a descriptor with the netpoller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll descriptor: %w", err)
	}
	pk := &parker{f: os.NewFile(uintptr(epfd), "epoll:"+name), epfd: epfd, sock: sock, armed: true}
	if pk.rc, err = pk.f.SyscallConn(); err != nil {
		pk.f.Close()
		return nil, err
	}
	return pk, nil
}

// wait calls ready until it reports true, parking between calls until the socket is readable:
// ready reads the ring and reports whether the loop should come back without waiting (false:
// the ring is empty and the entry armed). Errors: os.ErrClosed (or the poller's closing error)
// once close ran; the last arm's error.
func (pk *parker) wait(ready func() bool) error {
	err := pk.rc.Read(func(uintptr) bool { return ready() || pk.err != nil })
	if pk.err != nil {
		return pk.err
	}
	return err
}

// arm makes the entry wait for frames (on), or for nothing (off: while the loop polls its ring).
// Only a change costs a system call. It must be called from the RX loop, whose socket is open.
// A failure (ENOMEM) is kept and returned by wait: the loop ends rather than park deaf.
func (pk *parker) arm(on bool) {
	if pk == nil || pk.armed == on || pk.err != nil {
		return
	}
	ev := unix.EpollEvent{Fd: int32(pk.sock)}
	if on {
		ev.Events = unix.EPOLLIN
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(pk.epfd), unix.EPOLL_CTL_MOD, uintptr(pk.sock),
		uintptr(unsafe.Pointer(&ev)), 0, 0)
	if errno != 0 {
		pk.err = fmt.Errorf("epoll_ctl: %w", errno)
		return
	}
	pk.armed = on
}

// close closes the epoll instance, waking a loop parked in wait; the socket is left open (its
// owner closes it once the loop has returned). Nil-safe; closing twice is harmless.
func (pk *parker) close() {
	if pk != nil {
		pk.f.Close()
	}
}
