package tap

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Queue is one queue of a TAP: the /dev/net/tun descriptor attached to it, non-blocking and
// never registered with Go's netpoller. os.NewFile would register it (edge-triggered, for as
// long as it is open), and every frame the kernel queues on it would then wake the runtime's
// poller thread, whether a goroutine waits for the queue or a busy-polling reader is about to
// read it anyway (issue 29: that wake-up per frame took the CPU the round trip's other end
// needed). The data path waits for a queue on its own epoll instead, armed only while a reader
// parks (daemon/datapath). Read and Write never wait: a read with nothing queued fails with
// EAGAIN.
//
// A Queue is safe for concurrent use. Close waits for a Read, Write or Control in progress,
// each of which is one non-blocking system call or a few, so the descriptor number is never used
// after it was closed (when the kernel may have given it to another file). A reader waiting for
// the queue elsewhere (on an epoll) is not woken by Close: stop it first.
type Queue struct {
	name string
	mu   sync.RWMutex // held shared while fd is in use, exclusively to close it
	fd   int          // -1 after Close
}

// NewQueue makes a Queue of fd, which it takes over (Close closes it): a non-blocking tun
// descriptor attached to a TAP queue by other means than Open, or any descriptor a benchmark
// writes to instead of a TAP (/dev/null). name is what Name returns.
func NewQueue(fd int, name string) *Queue { return &Queue{fd: fd, name: name} }

// Name returns the name the queue was attached with: "tap:" and the TAP's name then.
func (q *Queue) Name() string { return q.name }

// Control calls f with the queue's descriptor, which stays open (and is not reused) until f
// returns. f must not block, and must not close the descriptor. Errors: os.ErrClosed after
// Close (f is not called).
func (q *Queue) Control(f func(fd int)) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.fd < 0 {
		return os.ErrClosed
	}
	f(q.fd)
	return nil
}

// Read reads one frame (with its virtio header on a TAP with offloads) into b, without waiting.
// Errors: unix.EAGAIN when the kernel has queued nothing; os.ErrClosed after Close; the kernel's
// errno otherwise (EBADFD once the TAP is gone, EINVAL for a b too short for the frame).
func (q *Queue) Read(b []byte) (int, error) { return q.io(unix.Read, b) }

// Write writes one frame (behind its virtio header on a TAP with offloads), which the kernel
// receives on the TAP's netdev. A TAP never makes a writer wait. Errors: os.ErrClosed after
// Close; the kernel's errno otherwise (EIO while the TAP is down, EINVAL for a malformed frame
// or header).
func (q *Queue) Write(b []byte) (int, error) { return q.io(unix.Write, b) }

// io runs op (unix.Read or unix.Write) on the descriptor with b, again while a signal interrupts
// it, under the read lock that keeps the descriptor from being closed meanwhile.
func (q *Queue) io(op func(int, []byte) (int, error), b []byte) (int, error) {
	n, err := 0, error(nil)
	if cerr := q.Control(func(fd int) {
		for {
			if n, err = op(fd, b); err != unix.EINTR {
				return
			}
		}
	}); cerr != nil {
		return 0, cerr
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Close closes the descriptor, which detaches the queue from the TAP (deleting a TAP that is not
// persistent once its last queue closes). Closing twice is a no-op.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fd < 0 {
		return nil
	}
	err := unix.Close(q.fd)
	q.fd = -1
	return err
}

// ioctl runs ioctl(fd, req, arg) on the queue's descriptor.
func (q *Queue) ioctl(req uint, arg int) error {
	var ierr error
	if err := q.Control(func(fd int) { ierr = unix.IoctlSetInt(fd, req, arg) }); err != nil {
		return err
	}
	return ierr
}

// ioctlPtr runs ioctl(fd, req, &v) on the queue's descriptor.
func (q *Queue) ioctlPtr(req uint, v int) error {
	var ierr error
	if err := q.Control(func(fd int) { ierr = unix.IoctlSetPointerInt(fd, req, v) }); err != nil {
		return err
	}
	return ierr
}
