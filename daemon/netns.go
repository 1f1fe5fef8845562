package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlerr"
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
// `ip netns add` does when it does not exist yet. It records nothing: a port's namespace is
// created by Daemon.portNetNS.
func namedNetNS(name string) (genl.NetNS, error) {
	if name == "" {
		return selfNetNS()
	}
	id, err := lookupNamedNetNS(name)
	if !errors.Is(err, unix.ENOENT) {
		return id, err
	}
	if err := createNamedNetNS(name); err != nil {
		return genl.NetNS{}, nlerr.Wrap(err, unix.EIO, "create network namespace %q", name)
	}
	return nsIDOf(filepath.Join(netnsDir, name))
}

// lookupNamedNetNS returns the identity of an existing named namespace. Errors: unix.ENOENT
// (unwrapped) when there is none; EINVAL when the file is not a namespace (nothing mounted on it:
// a plain file that a crashed `ip netns add`, or a manad killed while creating the namespace,
// left); another errno for a file that cannot be looked at.
func lookupNamedNetNS(name string) (genl.NetNS, error) {
	path := filepath.Join(netnsDir, name)
	id, mounted, err := inspectNetNSFile(path)
	switch {
	case errors.Is(err, unix.ENOENT):
		return genl.NetNS{}, unix.ENOENT
	case err != nil:
		return genl.NetNS{}, nlerr.Wrap(err, unix.EIO, "network namespace %q", name)
	case !mounted:
		return genl.NetNS{}, nlerr.New(unix.EINVAL,
			"%s exists but is not a network namespace (left by an interrupted ip netns add?): remove it with ip netns del %s", path, name)
	}
	return id, nil
}

// inspectNetNSFile looks at a namespace file: its identity, and whether a namespace is mounted
// on it (the file is on nsfs; a plain file is on the tmpfs under it). Errors: stat's (ENOENT
// for none).
func inspectNetNSFile(path string) (id genl.NetNS, mounted bool, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return genl.NetNS{}, false, err
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(path, &sfs); err != nil {
		return genl.NetNS{}, false, err
	}
	return genl.NetNS{Dev: st.Dev, Ino: st.Ino}, sfs.Type == unix.NSFS_MAGIC, nil
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
// The namespace is made on a locked thread that enters it (unshare) and goes back to its own
// namespace afterwards, so the daemon's other goroutines never run in it; a thread that cannot go
// back is thrown away. (Thrown away always, the thread could be the main one, which the runtime
// parks instead, in the new namespace: that namespace would then outlive its deletion.) Errors:
// the failing step's errno (EEXIST when the name appeared meanwhile, EROFS, EPERM, …); nothing
// is left behind then, except the shared mount point.
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
	crashPoint(crashNetNSFile)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("the thread's own network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still in its own namespace
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		err = unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, "")
		if err != nil {
			err = &os.PathError{Op: "bind mount", Path: path, Err: err}
		}
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
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

// crashPointEnv names an environment variable for manad's crash tests only
// (tests/integration/netns_crash_test.go): set to one of the crash* steps, manad kills itself
// with SIGKILL there, as kill -9 would, so that the test can restart it and check what a crash at
// that step leaves. Never set it otherwise.
const crashPointEnv = "MANAD_INTERNAL_TEST_CRASH_AT"

// The steps of creating a port's namespace at which crashPointEnv can kill manad.
const (
	crashNetNSIntent = "netns-intent" // the intent is saved; nothing created yet
	crashNetNSFile   = "netns-file"   // /run/netns/NAME is an empty file, nothing mounted on it
	crashNetNSMount  = "netns-mount"  // the namespace is mounted; its inode is not recorded yet
	crashNetNSPort   = "netns-port"   // the port (TAP and all) is made; the state is not saved
)

// crashPoint kills the process with SIGKILL when crashPointEnv names step.
func crashPoint(step string) {
	if os.Getenv(crashPointEnv) != step {
		return
	}
	_ = unix.Kill(os.Getpid(), unix.SIGKILL)
	select {} // the signal is on its way: nothing more may happen
}

// staleNetNSFile is how old a /run/netns file with nothing mounted on it must be before a port add
// takes it for a crash's leftover and replaces it, when manad did not record it as its own: `ip
// netns add` mounts the namespace a moment after it creates the file.
const staleNetNSFile = 5 * time.Second

// portNetNS returns the identity of the named namespace a port goes into ("" is manad's own),
// creating it when it does not exist, and whether it did. The creation survives a crash at any
// step: the intent is saved in the state file (netns_created, inode 0) before anything is made,
// so that the next start finds and undoes what a crash left (reconcileNetNS); the inode is
// recorded once the namespace is mounted, and saved with the port. An empty file a crash left at
// /run/netns/NAME is replaced (repairNetNSFile). Caller holds the configuration lock.
//
// Errors: the state file's errno (EROFS, ENOSPC, …; EIO without one) when the intent cannot be
// saved, and nothing is created then; the creation's (EIO without one); EINVAL for a file there that is not a namespace and not a crash's leftover; the
// errno of a file that cannot be looked at.
func (d *Daemon) portNetNS(name string) (id genl.NetNS, created bool, err error) {
	if name == "" {
		id, err = selfNetNS()
		return id, false, err
	}
	id, err = lookupNamedNetNS(name)
	if errors.Is(err, unix.EINVAL) { // a file with nothing mounted on it
		if rerr := d.repairNetNSFile(name); rerr != nil {
			d.log.Warn("network namespace file left alone", "netns", name, "why", rerr)
			return genl.NetNS{}, false, err
		}
		err = unix.ENOENT
	}
	if !errors.Is(err, unix.ENOENT) {
		return id, false, err
	}
	d.state.RecordNetNS(name, 0)
	if err := d.state.Save(d.cfg.Daemon.StateDir); err != nil {
		d.state.ForgetNetNS(name)
		return genl.NetNS{}, false, nlerr.Wrap(err, unix.EIO,
			"network namespace %q not created: recording it in state_dir %s failed: %v", name, d.cfg.Daemon.StateDir, err)
	}
	crashPoint(crashNetNSIntent)
	if err := createNamedNetNS(name); err != nil {
		d.state.ForgetNetNS(name)
		d.saveState() // best effort: an intent left on disk is dropped at the next start
		return genl.NetNS{}, false, nlerr.Wrap(err, unix.EIO, "create network namespace %q", name)
	}
	crashPoint(crashNetNSMount)
	if id, err = nsIDOf(filepath.Join(netnsDir, name)); err != nil {
		d.undoNetNS(name)
		return genl.NetNS{}, false, nlerr.Wrap(err, unix.EIO, "network namespace %q just created", name)
	}
	d.state.RecordNetNS(name, id.Ino)
	d.log.Info("network namespace created", "netns", name)
	return id, true, nil
}

// undoNetNS deletes a namespace portNetNS created for a port that could not be made, and
// forgets it. Caller holds the configuration lock.
func (d *Daemon) undoNetNS(name string) {
	if err := deleteNamedNetNS(name); err != nil {
		d.log.Warn("network namespace created for a port that failed not deleted", "netns", name, "err", err)
		return
	}
	d.state.ForgetNetNS(name)
	d.saveState()
	d.log.Info("network namespace created for a port that failed deleted", "netns", name)
}

// repairNetNSFile removes /run/netns/NAME when it is a crash's leftover: a plain empty file with
// nothing mounted on it, which manad recorded as its own or which is older than staleNetNSFile.
// Caller holds the configuration lock. Errors: why the file is not a leftover, or the removal's.
func (d *Daemon) repairNetNSFile(name string) error {
	path := filepath.Join(netnsDir, name)
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0 {
		return errors.New("not an empty file")
	}
	_, ours := d.state.NetNS[name]
	age := time.Since(time.Unix(st.Mtim.Unix()))
	if !ours && age < staleNetNSFile {
		return fmt.Errorf("made %v ago: an ip netns add may be under way", age.Round(time.Millisecond))
	}
	if err := deleteNamedNetNS(name); err != nil {
		return err
	}
	d.log.Warn("removed an empty network namespace file left by a crash", "path", path, "age", age.Round(time.Second))
	return nil
}

// reconcileNetNS brings the namespaces the state file says manad created (netns_created) in line
// with /run/netns, before the ports that use them are created at start: an entry whose
// namespace is gone, or was deleted and added again by someone else (another inode), is dropped;
// one whose file is empty with nothing mounted on it (a crash between creating and mounting) has
// the file removed and is dropped; one with inode 0 (the intent of a port add that a crash
// interrupted: its port was never saved, nor acknowledged) has what was made of its namespace
// deleted and is dropped. The state is saved when it changed. Caller holds the configuration lock.
func (d *Daemon) reconcileNetNS() {
	changed := false
	for _, name := range slices.Sorted(maps.Keys(d.state.NetNS)) {
		ino := d.state.NetNS[name]
		path := filepath.Join(netnsDir, name)
		id, mounted, err := inspectNetNSFile(path)
		drop := func(msg string, args ...any) {
			d.state.ForgetNetNS(name)
			changed = true
			d.log.Warn(msg, append([]any{"netns", name}, args...)...)
		}
		switch {
		case errors.Is(err, unix.ENOENT):
			drop("network namespace manad created is gone (deleted outside manad, or its creation was interrupted): forgotten")
		case err != nil:
			d.log.Warn("network namespace manad created cannot be looked at: kept", "netns", name, "err", err)
		case !mounted:
			if err := d.repairNetNSFile(name); err != nil {
				d.log.Warn("empty network namespace file not removed", "netns", name, "err", err)
				continue
			}
			drop("network namespace manad was creating when it stopped was never mounted: file removed, forgotten")
		case ino == 0:
			links, _ := netnsLinks(name, 0)
			if err := deleteNamedNetNS(name); err != nil {
				d.log.Warn("network namespace of an interrupted port add not deleted", "netns", name, "err", err)
				continue
			}
			drop("network namespace of a port add interrupted before it was saved: deleted", "links", links)
		case id.Ino != ino:
			drop("network namespace manad created was deleted and added again outside manad: not manad's any more, forgotten")
		}
	}
	if changed {
		d.saveState()
	}
}
