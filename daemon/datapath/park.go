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
// kernel queued: an epoll instance of the queue's own, holding the TAP queue's descriptor, which
// is itself registered with Go's netpoller (an epoll instance is pollable: readable while a
// descriptor in it is). A parked goroutine costs no thread, and a frame that arrives for it wakes
// the runtime's poller once, as a netpoller-backed TAP file did: the TAP's wake-up reaches the
// netpoller through the epoll's (ep_poll_callback wakes the epoll's own pollers on every event
// of an armed entry), and nothing reads the epoll itself, so nothing is added on that path. The
// goroutine reads the TAP queue inside the epoll file's RawConn.Read, as it read it inside the
// TAP file's: a frame queued after a read found EAGAIN marks the epoll ready for the netpoller,
// so none is missed.
//
// What it changes is a queue a poller reads (poller.go). Its entry here is disarmed (no event:
// ep_poll_callback returns at once) from the hand-over until the poller gives the queue back, so
// the frames the kernel queues meanwhile wake no thread at all. With the TAP file in the
// netpoller (edge-triggered, for as long as it was open) every frame woke the runtime's idle
// poller thread, in vain while a poller was reading the queue (issue 29: 17,387 wake-ups for
// 5,000 round trips with polling on): on two CPUs that thread took the CPU the round trip's other
// end needed. Arming costs one epoll_ctl per polling episode, not per frame or per park (arming
// only while parked would cost two system calls per park, measured as a slower polling-off path
// on this VM, where a system call costs about a microsecond). One epoll per queue rather than per
// segment: a waiter on a shared epoll would have to hand the queue to its TX goroutine, one
// more wake-up per frame.
//
// Stop wakes a parked goroutine with a read deadline on the epoll file (wake), as it did on the
// TAP file. A parker is used by its queue's TX goroutine only; wake and close by Stop.
type parker struct {
	f      *os.File // the epoll descriptor, netpoller-backed
	rc     syscall.RawConn
	tq     *tap.Queue
	epfd   int
	ev     unix.EpollEvent // what the entry waits for: EPOLLIN armed, nothing disarmed
	cerr   error           // the last epoll_ctl's error
	ctlFn  func(fd int)
	readFn func(fd int) // the TX goroutine's batch read (queue.readFn)
	more   *bool        // whether that batch found EAGAIN (false) or should be read again
	waitFn func(epfd uintptr) bool
}

// init creates the epoll instance and registers tq's descriptor in it, armed.
// Errors: the kernel's errno (EMFILE, ENOMEM); os.ErrClosed for a closed tq.
func (pk *parker) init(tq *tap.Queue) error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	cerr := tq.Control(func(fd int) {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
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
	pk.tq, pk.epfd = tq, epfd
	pk.ctlFn = func(fd int) {
		pk.ev.Fd = int32(fd)
		_, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(pk.epfd), unix.EPOLL_CTL_MOD, uintptr(fd),
			uintptr(unsafe.Pointer(&pk.ev)), 0, 0)
		pk.cerr = nil
		if errno != 0 {
			pk.cerr = errno
		}
	}
	pk.waitFn = func(uintptr) bool {
		if err := pk.tq.Control(pk.readFn); err != nil {
			pk.cerr = err
			return true
		}
		return *pk.more
	}
	return nil
}

// read calls readFn with the TAP queue's descriptor until it leaves *more false (the queue is
// empty) and a frame arrives, or once when it leaves *more true (a full batch, a hand-over or an
// error: the caller decides). Errors: os.ErrDeadlineExceeded after wake; os.ErrClosed once the TAP
// queue is closed.
func (pk *parker) read(readFn func(fd int), more *bool) error {
	pk.readFn, pk.more, pk.cerr = readFn, more, nil
	err := pk.rc.Read(pk.waitFn)
	if pk.cerr != nil {
		return pk.cerr
	}
	return err
}

// arm makes the entry wait for frames (on) or for nothing (off, while a poller reads the queue).
// Errors: os.ErrClosed once the TAP queue is closed; epoll_ctl's errno.
func (pk *parker) arm(on bool) error {
	pk.ev.Events = 0
	if on {
		pk.ev.Events = unix.EPOLLIN
	}
	if err := pk.tq.Control(pk.ctlFn); err != nil {
		return err
	}
	return pk.cerr
}

// wake makes a read in progress, or the next one, return os.ErrDeadlineExceeded.
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
