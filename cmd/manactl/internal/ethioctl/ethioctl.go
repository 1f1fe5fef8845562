// Package ethioctl answers the SIOCETHTOOL ioctl for manad's ports, on behalf of a process that
// `manactl exec` supervises: when the process calls ioctl(fd, SIOCETHTOOL, &ifr) on a device
// that is a manad port, the supervisor (seccomp user notification) hands the call to a Handler,
// which reads the command from the process's memory, answers it with manad's ethtool generic
// netlink (so a SET goes through manad's permission check, reconfiguration, notification and
// persistence exactly as the netlink SET does) and writes the result back, with the copy-in and
// copy-out sizes, checks and errnos of the kernel's dev_ethtool (net/ethtool/ioctl.c) running the
// mana driver's ethtool_ops. A device that is not a manad port is left to the kernel.
//
// The process's memory is hostile: every count it supplies is checked before it sizes anything,
// and every access that fails reads as EFAULT, as copy_from_user and copy_to_user do.
package ethioctl

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
)

// Memory is the supervised process's address space (process_vm_readv/writev in the supervisor).
type Memory interface {
	// ReadAt reads all of p from addr, or returns an error (EFAULT).
	ReadAt(p []byte, addr uint64) error
	// WriteAt writes all of p at addr, or returns an error (EFAULT).
	WriteAt(p []byte, addr uint64) error
}

// Options configure a Handler.
type Options struct {
	// Client returns a client connected to manad in CMD's network namespace (the supervisor
	// caches it; Dial errors mean manad is unreachable).
	Client func(ctx context.Context) (*client.Client, error)
	// Logger receives a debug line per handled command (with manad's extack message, which
	// the ioctl cannot carry) and per decision to leave a device to the kernel; nil: none.
	Logger *slog.Logger
	// Release is the kernel release ETHTOOL_GDRVINFO reports as the driver version (the
	// kernel's UTS_RELEASE, which dev_ethtool puts there for a driver without get_drvinfo,
	// such as mana); "": the running kernel's (uname -r).
	Release string
}

// maxSeen bounds the names remembered as manad ports (see Handler).
const maxSeen = 1024

// Handler emulates SIOCETHTOOL for manad's ports. It is safe for concurrent use.
//
// It caches nothing about a device across calls: each call asks manad whether the name is a
// port's (a port is its TAP's ifindex, and a rename moves the name) and names the device by the
// ifindex of that answer for the rest of the call. The one thing it remembers is the set of
// names manad has confirmed as ports (at most maxSeen, forgotten when manad says ENODEV for
// them), used only when manad cannot be reached: a name never seen as a port is then left to the
// kernel, while a name seen as a port answers ENODEV, as the kernel answers for a NIC that went
// away, rather than the TAP's answers posing as the NIC's.
type Handler struct {
	opts Options
	log  *slog.Logger

	mu   sync.Mutex
	seen map[string]struct{}
}

// New returns a Handler. opts.Client must not be nil.
func New(opts Options) *Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{opts: opts, log: log, seen: map[string]struct{}{}}
}

// Handle emulates ioctl(fd, SIOCETHTOOL, ifr) where ifr is the address of CMD's struct ifreq
// (40 bytes on amd64: ifr_name[16], ifr_data pointer at offset 16). handled=false: the device is
// not a manad port, let the kernel answer (also when ifr itself cannot be read, so that the
// kernel's own EFAULT answers). handled=true: ret is the ioctl's return value (>= 0,
// ETHTOOL_SFEATURES returns flags) when err is nil, else err is the unix.Errno CMD gets: the
// errno manad answered with, EFAULT for memory CMD cannot access, EINVAL/EOPNOTSUPP/ETOOSMALL
// where dev_ethtool gives them, EPERM for a command that needs admin rights manad does not grant
// the caller, ENODEV when manad went away during the call (or is unreachable and the name was a
// port's), EINTR when ctx ended first, EIO when manad's reply does not decode.
func (h *Handler) Handle(ctx context.Context, mem Memory, ifr uint64) (handled bool, ret int, err error) {
	var req [ifreqSize]byte
	if mem.ReadAt(req[:], ifr) != nil {
		return false, 0, nil
	}
	name := ifrName(req[:])
	if name == "" {
		return false, 0, nil
	}
	c, port, err := h.lookup(ctx, name)
	if err != nil {
		return true, 0, err
	}
	if c == nil {
		return false, 0, nil
	}
	cl := &call{
		h: h, ctx: ctx, c: c, mem: mem, name: name,
		data: decodeUint64(req[ifrDataOff:]),
		ifi:  client.Interface{Index: int(port.Device.Index)},
		port: port,
	}
	r, err := cl.run()
	if err != nil {
		var errno unix.Errno
		if !errors.As(err, &errno) {
			// Not an answer but a failure of ours or manad's (a reply that does not
			// decode): EIO, and said louder.
			h.log.Warn("SIOCETHTOOL failed", "dev", name, "cmd", cl.cmd, "err", err)
			return true, 0, unix.EIO
		}
		h.log.Debug("SIOCETHTOOL", "dev", name, "cmd", cl.cmd, "errno", errno.Error(), "err", err)
		return true, 0, errno
	}
	h.log.Debug("SIOCETHTOOL", "dev", name, "cmd", cl.cmd, "ret", r)
	return true, r, nil
}

// ifrName returns ifr_name as dev_ioctl reads it: cut at IFNAMSIZ-1 and at the first ':' (an
// alias label names its device).
func ifrName(ifr []byte) string {
	n := ifr[:ifNameSize-1]
	for i, c := range n {
		if c == 0 || c == ':' {
			return string(n[:i])
		}
	}
	return string(n)
}

// lookup asks manad whether name is one of its ports in CMD's namespace. It returns the client
// and the port, or a nil client for "let the kernel answer", or an errno when the call is to
// fail (a name seen as a port while manad is unreachable: ENODEV).
func (h *Handler) lookup(ctx context.Context, name string) (*client.Client, *portInfo, error) {
	unreachable := func(err error) (*client.Client, *portInfo, error) {
		if ctx.Err() != nil {
			// The supervisor gave up on the call: no answer is wanted, and the kernel's
			// would be the TAP's.
			return nil, nil, unix.EINTR
		}
		if h.wasPort(name) {
			h.log.Debug("SIOCETHTOOL: manad unreachable for a known port", "dev", name, "err", err)
			return nil, nil, unix.ENODEV
		}
		h.log.Debug("SIOCETHTOOL: manad unreachable, left to the kernel", "dev", name, "err", err)
		return nil, nil, nil
	}
	c, err := h.opts.Client(ctx)
	if err == nil && c == nil {
		err = errors.New("no client")
	}
	if err != nil {
		return unreachable(err)
	}
	p, err := c.Port(ctx, client.Interface{Name: name})
	if err != nil {
		if isTransport(err) || ctx.Err() != nil {
			return unreachable(err)
		}
		if errors.Is(err, unix.ENODEV) {
			h.forget(name)
			return nil, nil, nil
		}
		// manad knows the name but refuses it (a malformed name: EINVAL): the kernel
		// would not find such a device either.
		h.log.Debug("SIOCETHTOOL: manad refused the device lookup", "dev", name, "err", err)
		return nil, nil, nil
	}
	if p.Device.Index == 0 || p.Device.Index > math.MaxInt32 {
		return unreachable(errors.New("port without ifindex"))
	}
	h.remember(name)
	return c, (*portInfo)(p), nil
}

func (h *Handler) wasPort(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.seen[name]
	return ok
}

func (h *Handler) remember(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.seen[name]; ok {
		return
	}
	if len(h.seen) >= maxSeen {
		for k := range h.seen { // any one: the set is a bound, not an order
			delete(h.seen, k)
			break
		}
	}
	h.seen[name] = struct{}{}
}

func (h *Handler) forget(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.seen, name)
}
