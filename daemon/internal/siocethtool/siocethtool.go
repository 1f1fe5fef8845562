// Package siocethtool runs ethtool's legacy ioctl, SIOCETHTOOL, the one call the TAP and uplink
// code make for what ethtool netlink does not offer them in a device's own namespace (a socket
// there is all it takes).
package siocethtool

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic/extack"
)

// ifreq is struct ifreq with ifr_data set.
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte // the rest of the union
}

// Do runs SIOCETHTOOL on the device named name through socket fd (any socket in the device's
// namespace) with cmd, a struct that begins with its ETHTOOL_* command, and returns the ioctl's
// non-negative result (ETHTOOL_SFEATURES reports flags in it). Errors: EINVAL for a name that
// does not fit IFNAMSIZ; else the ioctl's errno (EOPNOTSUPP where the driver lacks the command,
// ENODEV for no such device).
func Do(fd int, name string, cmd unsafe.Pointer) (int, error) {
	var ifr ifreq
	if len(name) >= len(ifr.name) {
		return 0, extack.New(unix.EINVAL, "device name %q too long", name)
	}
	copy(ifr.name[:], name)
	ifr.data = cmd
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(cmd) // reached through ifr.data only
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
