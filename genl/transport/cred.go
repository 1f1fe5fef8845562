package transport

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/wire"
)

// Caller is the peer of a connection, from its socket credentials at connect
// time.
type Caller struct {
	PID      int32
	UID, GID uint32
	// Admin is true for uid 0, or when the primary or a supplementary group
	// of the peer is the configured admin group. Supplementary groups come
	// from SO_PEERGROUPS (the connecting task's own credentials), falling
	// back to /proc/<pid>/status.
	Admin bool
	// NetNS is the caller's network namespace, which scopes device lookups
	// and notifications as the kernel scopes them by socket netns.
	NetNS wire.NetNS
}

// peerCaller reads the peer's credentials (SO_PEERCRED, SO_PEERGROUPS) and
// network namespace. It fails only when SO_PEERCRED cannot be read; groups
// and namespace that cannot be read are left empty.
func peerCaller(uc *net.UnixConn, adminGroup int) (Caller, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *unix.Ucred
	var groups []uint32
	var credErr, groupsErr, nsErr error
	var ns wire.NetNS
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil {
			groups, groupsErr = peerGroups(int(fd))
		}
		ns, nsErr = socketNetNS(int(fd))
	}); err != nil {
		return Caller{}, err
	}
	if credErr != nil {
		return Caller{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	if groupsErr != nil {
		groups, groupsErr = procGroups(cred.Pid)
		if groupsErr != nil {
			groups = nil
		}
	}
	c := Caller{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}
	c.Admin = cred.Uid == 0 || (adminGroup >= 0 &&
		(cred.Gid == uint32(adminGroup) || slices.Contains(groups, uint32(adminGroup))))
	switch {
	case nsErr == nil:
		c.NetNS = ns
	case cred.Pid > 0:
		// SIOCGSKNS needs CAP_NET_ADMIN over the namespace; without it fall back to the
		// namespace of the peer process's main thread.
		var st unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", cred.Pid), &st); err == nil {
			c.NetNS = wire.NetNS{Dev: uint64(st.Dev), Ino: st.Ino}
		}
	}
	return c, nil
}

// socketNetNS returns the network namespace of the accepted socket fd. unix_stream_connect
// creates the server end of a connection in the namespace of the connecting socket, so this is
// the namespace the client's socket was created in — what the kernel scopes an ethtool request
// by (sock_net of the netlink socket) — even when the client is a thread that entered another
// namespace than its process's (SIOCGSKNS, Linux 4.9+).
func socketNetNS(fd int) (wire.NetNS, error) {
	nsfd, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err != nil {
		return wire.NetNS{}, err
	}
	defer unix.Close(nsfd)
	var st unix.Stat_t
	if err := unix.Fstat(nsfd, &st); err != nil {
		return wire.NetNS{}, err
	}
	return wire.NetNS{Dev: uint64(st.Dev), Ino: st.Ino}, nil
}

// peerGroups reads SO_PEERGROUPS: the supplementary groups of the task that
// connected, captured at connect time.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 32)
	for range 4 {
		l := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
		switch e {
		case 0:
			return buf[:l/4], nil
		case unix.ERANGE:
			buf = make([]uint32, l/4+1)
		default:
			return nil, e
		}
	}
	return nil, unix.ERANGE
}

// procGroups reads the Groups: line of /proc/<pid>/status.
func procGroups(pid int32) ([]uint32, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Groups:")
		if !ok {
			continue
		}
		var gs []uint32
		for _, g := range strings.Fields(rest) {
			v, err := strconv.ParseUint(g, 10, 32)
			if err == nil {
				gs = append(gs, uint32(v))
			}
		}
		return gs, nil
	}
	return nil, sc.Err()
}
