package tap

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// netnsDir is where `ip netns add NAME` bind-mounts named network namespaces.
const netnsDir = "/run/netns/"

// netNS is an open handle on a network namespace: the daemon's own (name "") or a named one.
// Holding it keeps the namespace alive even if `ip netns del` unmounts its name meanwhile, as
// the kernel keeps it alive for the TAP queues' sockets anyway.
type netNS struct {
	name     string
	f        *os.File
	dev, ino uint64
}

// netnsPath returns the file of the named network namespace, or of the daemon's own for "".
// Errors: EINVAL for a name that cannot be a namespace name.
func netnsPath(name string) (string, error) {
	if name == "" {
		return "/proc/self/ns/net", nil // the thread group leader's: the daemon's own namespace
	}
	if name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", nlerr.New(unix.EINVAL, "invalid network namespace name %q", name)
	}
	return netnsDir + name, nil
}

// openNetNS opens the named network namespace, or the daemon's own for "". Errors: EINVAL for a
// name that cannot be a namespace name; ENOENT when no such namespace exists.
func openNetNS(name string) (*netNS, error) {
	path, err := netnsPath(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nlerr.New(unix.ENOENT, "network namespace %q does not exist (create it with: ip netns add %s)", name, name)
		}
		return nil, nlerr.Wrap(err, unix.EIO, "open network namespace %q", name)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, nlerr.Wrap(err, unix.EIO, "stat network namespace %q", name)
	}
	// A path under /run/netns that is not a bind mount of a namespace is an ordinary file;
	// setns on it would fail later with a less helpful EINVAL.
	if err := checkNetNSFile(f); err != nil {
		f.Close()
		return nil, nlerr.Wrap(err, unix.EINVAL, "%s is not a network namespace", path)
	}
	return &netNS{name: name, f: f, dev: st.Dev, ino: st.Ino}, nil
}

// checkNetNSFile verifies that f is a network namespace (NS_GET_NSTYPE).
func checkNetNSFile(f *os.File) error {
	const nsGetNSType = 0xb703 // _IO(NSIO, 0x3)
	t, err := unix.IoctlRetInt(int(f.Fd()), nsGetNSType)
	if err != nil {
		return err
	}
	if t != unix.CLONE_NEWNET {
		return unix.EINVAL
	}
	return nil
}

// isNamed reports whether name (as openNetNS takes it) currently names namespace n. Errors as
// openNetNS.
func (n *netNS) isNamed(name string) (bool, error) {
	path, err := netnsPath(name)
	if err != nil {
		return false, err
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nlerr.New(unix.ENOENT, "network namespace %q does not exist (create it with: ip netns add %s)", name, name)
		}
		return false, nlerr.Wrap(err, unix.EIO, "stat network namespace %q", name)
	}
	return st.Dev == n.dev && st.Ino == n.ino, nil
}

// nsHandle is an open network namespace with an rtnetlink handle inside it, shared by a Watcher
// and the Devices opened with it (one socket per namespace instead of one per TAP), and closed
// with its last user. A vishvananda Handle serializes its requests, so sharing is safe.
type nsHandle struct {
	ns   *netNS
	nl   *netlink.Handle
	feat *featureReader

	mu   sync.Mutex
	refs int
}

// openNSHandle opens the named namespace and an rtnetlink handle in it, with one reference.
// Errors as openNetNS; the kernel's errno when the socket cannot be opened.
func openNSHandle(name string) (*nsHandle, error) {
	ns, err := openNetNS(name)
	if err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(netns.NsHandle(ns.fd()), unix.NETLINK_ROUTE)
	if err != nil {
		ns.close()
		return nil, nlerr.Wrap(err, unix.EIO, "rtnetlink socket in network namespace %q", name)
	}
	return &nsHandle{ns: ns, nl: h, feat: newFeatureReader(ns), refs: 1}, nil
}

// acquire takes one more reference; false when the handle is already closed.
func (h *nsHandle) acquire() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs == 0 {
		return false
	}
	h.refs++
	return true
}

// release drops a reference, closing the socket and the namespace with the last. A closed
// vishvananda Handle silently falls back to the calling thread's namespace, which is why nobody
// may keep using one after its release.
func (h *nsHandle) release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs--; h.refs > 0 {
		return nil
	}
	h.nl.Close()
	h.feat.close()
	return h.ns.close()
}

// fd returns the namespace's file descriptor, valid until close.
func (n *netNS) fd() int { return int(n.f.Fd()) }

func (n *netNS) close() error { return n.f.Close() }

// run calls f on an OS thread that has entered the namespace. The thread goes back to its own
// namespace after f and is handed back to the scheduler only when that worked; otherwise the
// goroutine exits still locked, so no other goroutine can ever run in the wrong namespace. It
// is not simply left locked: a locked goroutine that exits on the process's main thread does not
// end that thread (the runtime parks it for good), and a thread parked inside the namespace would
// keep the namespace alive after `ip netns del`.
func (n *netNS) run(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- nlerr.Wrap(err, unix.EIO, "open this thread's network namespace")
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(n.fd(), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still in its own namespace
			errc <- nlerr.Wrap(err, unix.EIO, "enter network namespace %q", n.name)
			return
		}
		err = f()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
