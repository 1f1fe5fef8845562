package uplink

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nsIdentity is a network namespace's identity: the device and inode of its nsfs file, which
// /run/netns/NAME shows while the namespace is mounted there.
type nsIdentity struct{ dev, ino uint64 }

// nsIdentityOf returns the identity of the namespace ns refers to. Errors: fstat's.
func nsIdentityOf(ns netns.NsHandle) (nsIdentity, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return nsIdentity{}, err
	}
	return nsIdentity{dev: st.Dev, ino: st.Ino}, nil
}

// netnsGone says why the uplink's named namespace is no longer the one it opened, or "" while it
// is (or for manad's own namespace, or when /run/netns cannot be looked at: the uplink keeps
// what it has rather than guess).
//
// A namespace deleted with `ip netns del` sends nothing: its device would go, with an RTM_DELLINK,
// only once nothing holds the namespace, and the uplink's own sockets hold it. So the name is
// looked at instead: it is gone when /run/netns/NAME is gone, and it names another namespace when
// it was deleted and added again between two looks (or is being added: a file with nothing
// mounted yet). A look is one stat a netnsCheck; an inotify watch on /run/netns would cost an
// inotify instance per uplink (128 a user by default) and still miss the mount that completes an
// `ip netns add`.
func (u *Uplink) netnsGone() string {
	if u.cfg.NetNS == "" {
		return ""
	}
	var st unix.Stat_t
	err := unix.Stat(filepath.Join("/run/netns", u.cfg.NetNS), &st)
	if err == nil {
		u.nsCheckFailed = false
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Sprintf("network namespace %q was deleted; waiting for it to be added again with device %s", u.cfg.NetNS, u.cfg.Dev)
	case err != nil:
		if !u.nsCheckFailed {
			u.nsCheckFailed = true // said once, not every netnsCheck
			u.log.Warn("uplink cannot check its network namespace", "netns", u.cfg.NetNS, "err", err)
		}
		return ""
	case (nsIdentity{dev: st.Dev, ino: st.Ino}) != u.nsID:
		return fmt.Sprintf("network namespace %q was deleted and added again; attaching to device %s there", u.cfg.NetNS, u.cfg.Dev)
	}
	return ""
}
