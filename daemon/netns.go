package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic/extack"
)

// netnsDir is where `ip netns add` bind-mounts named namespaces.
const netnsDir = "/run/netns"

// nsIDOf returns the identity (st_dev, st_ino) of the namespace file at path.
func nsIDOf(path string) (genl.NetNS, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return genl.NetNS{}, err
	}
	return genl.NetNS{Dev: st.Dev, Ino: st.Ino}, nil
}

// selfNetNS is the daemon's own network namespace.
func selfNetNS() (genl.NetNS, error) {
	return nsIDOf(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
}

// namedNetNS returns the identity of the named namespace ("" is the daemon's), creating it as
// `ip netns add` does when it does not exist yet.
func namedNetNS(name string) (genl.NetNS, error) {
	id, _, err := openNamedNetNS(name)
	return id, err
}

// openNamedNetNS is namedNetNS, also reporting whether it created the namespace.
func openNamedNetNS(name string) (id genl.NetNS, created bool, err error) {
	if name == "" {
		id, err = selfNetNS()
		return id, false, err
	}
	id, err = lookupNamedNetNS(name)
	if !errors.Is(err, unix.ENOENT) {
		return id, false, err
	}
	if err := createNamedNetNS(name); err != nil {
		return genl.NetNS{}, false, extack.Wrap(err, unix.EIO, "create network namespace %q", name)
	}
	id, err = nsIDOf(filepath.Join(netnsDir, name))
	return id, err == nil, err
}

// lookupNamedNetNS returns the identity of an existing named namespace. Errors: unix.ENOENT
// (unwrapped) when there is none; EINVAL when the file is not a namespace; another errno for a
// file that cannot be looked at.
func lookupNamedNetNS(name string) (genl.NetNS, error) {
	path := filepath.Join(netnsDir, name)
	id, err := nsIDOf(path)
	if err == nil {
		// A plain file left behind by a crashed `ip netns add` is not a namespace: its
		// device is the disk's, not nsfs. Check by opening it as a namespace.
		if h, herr := netns.GetFromPath(path); herr == nil {
			h.Close()
			return id, nil
		}
		return genl.NetNS{}, extack.New(unix.EINVAL, "%s exists but is not a network namespace", path)
	}
	if errors.Is(err, unix.ENOENT) {
		return genl.NetNS{}, unix.ENOENT
	}
	return genl.NetNS{}, extack.Wrap(err, unix.EIO, "network namespace %q", name)
}

// deleteNamedNetNS deletes a named namespace exactly as `ip netns del` does (iproute2
// ip/ipnetns.c, on_netns_del): a lazy unmount of netnsDir/name (MNT_DETACH, its error ignored,
// as ip does: a file that is not mounted is still removed) and the removal of the file. The
// namespace itself goes once nothing holds it any more. Errors: the unlink's (ENOENT, EBUSY,
// EROFS, …).
func deleteNamedNetNS(name string) error {
	path := filepath.Join(netnsDir, name)
	_ = unix.Unmount(path, unix.MNT_DETACH)
	if err := unix.Unlink(path); err != nil {
		return &os.PathError{Op: "remove namespace file", Path: path, Err: err}
	}
	return nil
}

// netnsLinks returns the names of the links in the named namespace other than lo and the one of
// index skip (a TAP still unregistering), sorted by index.
func netnsLinks(name string, skip int) ([]string, error) {
	h, err := netns.GetFromPath(filepath.Join(netnsDir, name))
	if err != nil {
		return nil, err
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, err
	}
	defer nh.Close()
	links, err := nh.LinkList()
	for try := 0; errors.Is(err, netlink.ErrDumpInterrupted) && try < 3; try++ {
		links, err = nh.LinkList() // the links changed during the dump: a consistent one is needed
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range links {
		a := l.Attrs()
		if a.Name == "lo" || a.Index == skip {
			continue
		}
		out = append(out, a.Name)
	}
	return out, nil
}

// createNamedNetNS creates a network namespace and bind-mounts it at netnsDir/name exactly as
// `ip netns add` does (iproute2 ip/ipnetns.c, netns_add), so that the two can share netnsDir:
// netnsDir is made a shared mount point first. Were it a plain directory, the next `ip netns add`
// would turn it into a recursive bind mount of itself, copying manad's namespace mounts, and
// `ip netns del` of manad's namespaces would then unmount only the copy and fail with EBUSY.
//
// The namespace is made on a thread that is thrown away afterwards, so the daemon's own threads
// never change namespace. Errors: the failing step's errno (EEXIST when the name appeared
// meanwhile, EROFS, EPERM, …); nothing is left behind then, except the shared mount point.
func createNamedNetNS(name string) error {
	if err := shareNetNSDir(netnsDir); err != nil {
		return err
	}
	path := filepath.Join(netnsDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0)
	if err != nil {
		return err
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Not unlocked: the thread ends with the goroutine, taking its namespace with it.
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			errc <- &os.PathError{Op: "bind mount", Path: path, Err: err}
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// shareNetNSDir makes dir (created when missing) a mount point with shared propagation, as
// iproute2's netns_add does, so that unmounting a namespace file in one mount namespace unmounts
// it in every peer and the namespace can go. When dir is not a mount point yet (EINVAL), it is
// bind-mounted onto itself once and the change retried. An exclusive flock on dir, which ip takes
// too, keeps concurrent creators from stacking those bind mounts.
//
// Errors: the errno of mkdir, open or mount (EROFS under ProtectSystem, EPERM without
// CAP_SYS_ADMIN, …).
func shareNetNSDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	lock, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	// Best effort, as in ip: without the lock a concurrent ip could stack one more bind mount,
	// which is untidy but harmless.
	_ = unix.Flock(int(lock.Fd()), unix.LOCK_EX)
	madeMountPoint := false
	for {
		err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINVAL) || madeMountPoint {
			return &os.PathError{Op: "mount --make-rshared", Path: dir, Err: err}
		}
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return &os.PathError{Op: "mount --rbind", Path: dir, Err: err}
		}
		madeMountPoint = true
	}
}
