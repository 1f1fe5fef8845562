package datapath

import (
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
)

// parker is where a queue's TX goroutine waits for its TAP queue when it has read everything the
// kernel queued: an epoll instance of the queue's own, holding the TAP queue's descriptor with
// EPOLLIN|EPOLLONESHOT, armed (EPOLL_CTL_MOD) only when the goroutine parks. The epoll
// descriptor itself is registered with Go's netpoller (an epoll instance is readable while it
// has an event to report), so a parked goroutine costs no thread, and the frame that arrives for
// it wakes the runtime's poller once, as a netpoller-backed TAP file did.
//
// What it changes is a queue nobody parks on: one a poller reads (poller.go), or one its TX
// goroutine is reading anyway. The TAP queue is not in the netpoller (tap.Queue), and its entry
// here is disarmed once it fired, so a frame the kernel queues meanwhile wakes no thread at all
// (ep_poll_callback returns at once for an entry with no events). With the TAP file in the
// netpoller, edge-triggered for as long as it was open, every frame woke the runtime's idle
// poller thread, in vain while a poller was reading the queue (issue 29: 17,387 wake-ups for
// 5,000 round trips with polling on): on two CPUs that thread took the CPU the round trip's
// other end needed. One epoll per queue rather than per segment: a waiter on a shared epoll
// would have to hand the queue to its TX goroutine, one more wake-up per frame.
//
// Stop wakes a parked goroutine with a read deadline on the epoll file (wake), as it did on the
// TAP file. A parker is used by its queue's TX goroutine only; wake and close by Stop.
type parker struct {
	f      *os.File // the epoll descriptor, netpoller-backed
	rc     syscall.RawConn
	tq     *tap.Queue
	armEv  unix.EpollEvent // EPOLLIN|EPOLLONESHOT: what arming asks for
	ev     [1]unix.EpollEvent
	armed  bool  // armed since the current park began
	aerr   error // arming failed: the TAP queue closed, or epoll_ctl's errno
	waitFn func(epfd uintptr) bool
	armFn  func(fd int)
}

// init creates the epoll instance and registers tq's descriptor in it, disarmed.
// Errors: the kernel's errno (EMFILE, ENOMEM); os.ErrClosed for a closed tq.
func (pk *parker) init(tq *tap.Queue) error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	// EPOLLONESHOT and no event: registered but disarmed (the kernel adds EPOLLERR|EPOLLHUP,
	// which a TAP queue reports only when its TAP is gone).
	cerr := tq.Control(func(fd int) {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLONESHOT, Fd: int32(fd)})
	})
	if cerr == nil && err == nil {
		// Non-blocking before os.NewFile, which registers only such a descriptor with the
		// netpoller.
		err = unix.SetNonblock(epfd, true)
	}
	if cerr != nil || err != nil {
		unix.Close(epfd)
		if cerr != nil {
			return cerr
		}
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	pk.f = os.NewFile(uintptr(epfd), "epoll:"+tq.Name())
	if err := pk.f.SetReadDeadline(time.Time{}); err != nil {
		pk.f.Close()
		return fmt.Errorf("epoll descriptor not pollable by the runtime: %w", err)
	}
	if pk.rc, err = pk.f.SyscallConn(); err != nil {
		pk.f.Close()
		return err
	}
	pk.tq = tq
	pk.armEv.Events = unix.EPOLLIN | unix.EPOLLONESHOT
	pk.waitFn = pk.poll
	pk.armFn = func(fd int) {
		pk.armEv.Fd = int32(fd)
		_, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), unix.EPOLL_CTL_MOD, uintptr(fd),
			uintptr(unsafe.Pointer(&pk.armEv)), 0, 0)
		if errno != 0 {
			pk.aerr = errno
		}
	}
	return nil
}

// park arms the TAP queue's entry and waits until the kernel has queued a frame on it (nil),
// wake was called (os.ErrDeadlineExceeded), or arming failed (os.ErrClosed once the TAP queue
// is closed; epoll_ctl's errno). The caller read the queue until EAGAIN first: arming checks for
// a frame queued since (ep_modify polls the file), so none is missed.
func (pk *parker) park() error {
	pk.armed, pk.aerr = false, nil
	err := pk.rc.Read(pk.waitFn)
	if pk.aerr != nil {
		return pk.aerr
	}
	return err
}

// poll is park's RawConn callback: it arms the entry on the first call of a park, then takes
// the entry's event if it fired (a non-blocking epoll_wait, which also disarms it until the
// next park). false: nothing yet, the netpoller waits for the epoll descriptor.
func (pk *parker) poll(epfd uintptr) bool {
	if !pk.armed {
		if err := pk.tq.Control(pk.armFn); err != nil {
			pk.aerr = err
		}
		if pk.aerr != nil {
			return true
		}
		pk.armed = true
	}
	n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, epfd, uintptr(unsafe.Pointer(&pk.ev[0])), 1, 0, 0, 0)
	return errno != 0 || n > 0 // an error: the caller's read finds out what it is
}

// wake makes a park in progress, or the next one, return os.ErrDeadlineExceeded.
func (pk *parker) wake() { pk.f.SetReadDeadline(time.Now()) }

// rearm undoes wake, for a wake-up that was not meant to stop the goroutine.
func (pk *parker) rearm() { pk.f.SetReadDeadline(time.Time{}) }

// close closes the epoll instance (its entry for the TAP queue goes with it). The TX goroutine
// must have ended.
func (pk *parker) close() {
	if pk.f != nil {
		pk.f.Close()
	}
}
