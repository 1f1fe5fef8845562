package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Control counts the netlink server's control traffic. It is a genl.Observer; the zero value is
// not usable, use NewControl. Safe for concurrent use.
type Control struct {
	mu        sync.Mutex
	requests  map[requestKey]uint64
	dropped   atomic.Uint64
	busyPolls atomic.Pointer[func() BusyPolls]

	saveFailures atomic.Uint64 // state-file writes that failed, refused changes included
	unsaved      atomic.Bool   // the daemon's state is newer than its state file
}

// BusyPolls are the server's busy-poll counts (genl.Server.BusyPolls): polls that found the
// next request, polls that found nothing within the window, polls not started for want of a
// slot.
type BusyPolls struct{ Hits, Misses, Skipped uint64 }

// SetBusyPolls makes f the source of the busy-poll counts; the server keeps them, so they are
// read at each scrape rather than counted twice.
func (c *Control) SetBusyPolls(f func() BusyPolls) { c.busyPolls.Store(&f) }

// requestKey is the label set of one request counter. The server names only the families and
// commands it serves (anything else is "unknown"), and errnos are the server's own, so the set
// stays small whatever clients send.
type requestKey struct {
	family, cmd string
	errno       unix.Errno
}

// NewControl returns a Control with no counts.
func NewControl() *Control { return &Control{requests: map[requestKey]uint64{}} }

// Request counts one request of family and cmd answered with errno (0: success).
func (c *Control) Request(family, cmd string, errno unix.Errno) {
	c.mu.Lock()
	c.requests[requestKey{family, cmd, errno}]++
	c.mu.Unlock()
}

// SubscriberDropped counts one subscriber dropped for not reading its notifications.
func (c *Control) SubscriberDropped() { c.dropped.Add(1) }

// StateSaveFailed counts one state-file write that failed: a change refused because its state
// could not be saved, or a save of a change already made (then retried).
func (c *Control) StateSaveFailed() { c.saveFailures.Add(1) }

// SetStateUnsaved says whether the daemon holds changes its state file does not (a save failed
// and is being retried).
func (c *Control) SetStateUnsaved(on bool) { c.unsaved.Store(on) }

// snapshot copies the request counts.
func (c *Control) snapshot() map[requestKey]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[requestKey]uint64, len(c.requests))
	for k, v := range c.requests {
		out[k] = v
	}
	return out
}

// errnoLabel is the errno label of a request: "0" for success, else the errno's symbolic name
// (EINVAL), or its number when it has none.
func errnoLabel(e unix.Errno) string {
	if e == 0 {
		return "0"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return strconv.Itoa(int(e))
}
