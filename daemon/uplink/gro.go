package uplink

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/internal/siocethtool"
)

// ethtoolValue is struct ethtool_value (linux/ethtool.h).
type ethtoolValue struct {
	cmd, data uint32
}

// setGRO switches generic receive offload of the device named name on or off through socket fd
// (any socket in the device's namespace) and returns whether it was on before. GRO merges the
// TCP segments a device receives into one large frame (vxlan's gro_cells do it for every
// decapsulated burst); a packet socket would then see frames far beyond the MTU, which no port
// could take. Errors: the ioctl's errno (EOPNOTSUPP where the device has no such feature).
func setGRO(fd int, name string, on bool) (was bool, err error) {
	get := ethtoolValue{cmd: unix.ETHTOOL_GGRO}
	if _, err := siocethtool.Do(fd, name, unsafe.Pointer(&get)); err != nil {
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
	_, err = siocethtool.Do(fd, name, unsafe.Pointer(&set))
	return was, err
}
