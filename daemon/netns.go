package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

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
	if name == "" {
		return selfNetNS()
	}
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
	if !errors.Is(err, unix.ENOENT) {
		return genl.NetNS{}, extack.Wrap(err, unix.EIO, "network namespace %q", name)
	}
	if err := createNamedNetNS(name); err != nil {
		return genl.NetNS{}, extack.Wrap(err, unix.EIO, "create network namespace %q", name)
	}
	return nsIDOf(path)
}

// createNamedNetNS creates and bind-mounts a new namespace on a thread that is thrown away
// afterwards, so the daemon's own threads never change namespace.
func createNamedNetNS(name string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Not unlocked: the thread ends with the goroutine, taking its namespace with it.
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		errc <- err
	}()
	return <-errc
}
