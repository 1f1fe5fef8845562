package uplink

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolValue is struct ethtool_value (linux/ethtool.h).
type ethtoolValue struct {
	cmd, data uint32
}

// ifreqData is struct ifreq with ifr_data set.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte // the rest of the union
}

// setGRO switches generic receive offload of the device named name on or off through socket fd
// (any socket in the device's namespace) and returns whether it was on before. GRO merges the
// TCP segments a device receives into one large frame (vxlan's gro_cells do it for every
// decapsulated burst); a packet socket would then see frames far beyond the MTU, which no port
// could take. Errors: the ioctl's errno (EOPNOTSUPP where the device has no such feature).
func setGRO(fd int, name string, on bool) (was bool, err error) {
	var ifr ifreqData
	copy(ifr.name[:unix.IFNAMSIZ-1], name)
	get := ethtoolValue{cmd: unix.ETHTOOL_GGRO}
	if err := ethtoolIoctl(fd, &ifr, &get); err != nil {
		return false, err
	}
	was = get.data != 0
	if was == on {
		return was, nil
	}
	set := ethtoolValue{cmd: unix.ETHTOOL_SGRO}
	if on {
		set.data = 1
	}
	return was, ethtoolIoctl(fd, &ifr, &set)
}

func ethtoolIoctl(fd int, ifr *ifreqData, v *ethtoolValue) error {
	ifr.data = unsafe.Pointer(v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(ifr)))
	runtime.KeepAlive(v)
	if errno != 0 {
		return errno
	}
	return nil
}
