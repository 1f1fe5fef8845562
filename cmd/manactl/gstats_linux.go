package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/wire"
)

// Kernel driver statistics for `stats --kernel`. The kernel's ethtool netlink has no request for
// the driver's ETH_SS_STATS counters (STATS_GET carries only the standard IEEE/RMON groups), so
// ethtool -S uses the SIOCETHTOOL ioctl, and so does manactl for devices manad does not own:
// ETHTOOL_GSSET_INFO for the count, ETHTOOL_GSTRINGS for the names, ETHTOOL_GSTATS for the values
// (ethtool.c: do_gstats, get_stringset).

const (
	ethtoolGStrings  = 0x1b // ETHTOOL_GSTRINGS
	ethtoolGStats    = 0x1d // ETHTOOL_GSTATS
	ethtoolGSSetInfo = 0x37 // ETHTOOL_GSSET_INFO
	ethSSStats       = 1    // ETH_SS_STATS
	ethGStringLen    = 32   // ETH_GSTRING_LEN
)

// ifreqData is struct ifreq with the ifr_data member of the union (40 bytes on 64-bit).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ethtoolIoctl runs SIOCETHTOOL on dev with buf as the command structure.
func ethtoolIoctl(fd int, dev string, buf unsafe.Pointer) error {
	var ifr ifreqData
	copy(ifr.name[:unix.IFNAMSIZ-1], dev)
	ifr.data = buf
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&ifr)
	if errno != 0 {
		return errno
	}
	return nil
}

// errnoError is an error printed perror-style, "what: Errno text" (as ethtool prints a failed
// ioctl: "Cannot get stats strings information: No such device"); it unwraps to the errno.
type errnoError struct {
	what  string
	errno unix.Errno
	part  failure // which part of the command failed (exitStatuses)
}

func (e *errnoError) failurePart() failure { return e.part }

func (e *errnoError) Error() string {
	if e.what == "" {
		return strerror(e.errno)
	}
	return e.what + ": " + strerror(e.errno)
}

func (e *errnoError) Unwrap() error { return e.errno }

// errNoStats is ethtool's "no stats available" for a driver without statistics.
type errNoStats struct{}

func (errNoStats) Error() string { return "no stats available" }
func (errNoStats) Unwrap() error { return unix.ENODATA }

func (errNoStats) failurePart() failure { return failNoStats }

// kernelStats returns dev's driver statistics from the kernel, in driver order. Errors are
// *errnoError, reading as ethtool's ("Cannot get stats strings information: No such device") and
// wrapping the errno, or errNoStats (ENODATA) for a driver that has none.
func kernelStats(dev string) ([]wire.Stat, error) {
	if len(dev) >= unix.IFNAMSIZ {
		return nil, &errnoError{"Cannot get stats strings information", unix.ENODEV, failStatsStrings}
	}
	// As ethtool: socket(AF_INET, SOCK_DGRAM), else AF_UNIX.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return nil, &errnoError{"Cannot get control socket", errnoOf(err), failStatsSocket}
		}
	}
	defer unix.Close(fd)

	// struct ethtool_sset_info { u32 cmd, reserved; u64 sset_mask; u32 data[]; }
	info := make([]uint64, 3)
	binary.NativeEndian.PutUint32(u64Bytes(info)[0:], ethtoolGSSetInfo)
	info[1] = 1 << ethSSStats
	if err := ethtoolIoctl(fd, dev, unsafe.Pointer(&info[0])); err != nil {
		return nil, &errnoError{"Cannot get stats strings information", errnoOf(err), failStatsStrings}
	}
	var n uint32
	if info[1]&(1<<ethSSStats) != 0 {
		n = binary.NativeEndian.Uint32(u64Bytes(info)[16:])
	}
	if n < 1 {
		return nil, errNoStats{}
	}

	// struct ethtool_gstrings { u32 cmd, string_set, len; u8 data[]; }
	strs := make([]uint64, (12+int(n)*ethGStringLen+7)/8)
	sb := u64Bytes(strs)
	binary.NativeEndian.PutUint32(sb[0:], ethtoolGStrings)
	binary.NativeEndian.PutUint32(sb[4:], ethSSStats)
	binary.NativeEndian.PutUint32(sb[8:], n)
	if err := ethtoolIoctl(fd, dev, unsafe.Pointer(&strs[0])); err != nil {
		return nil, &errnoError{"Cannot get stats strings information", errnoOf(err), failStatsStrings}
	}
	n = min(n, binary.NativeEndian.Uint32(sb[8:]))

	// struct ethtool_stats { u32 cmd, n_stats; u64 data[]; }
	vals := make([]uint64, 1+n)
	binary.NativeEndian.PutUint32(u64Bytes(vals)[0:], ethtoolGStats)
	binary.NativeEndian.PutUint32(u64Bytes(vals)[4:], n)
	if err := ethtoolIoctl(fd, dev, unsafe.Pointer(&vals[0])); err != nil {
		return nil, &errnoError{"Cannot get stats information", errnoOf(err), failStatsValues}
	}
	n = min(n, binary.NativeEndian.Uint32(u64Bytes(vals)[4:]))

	out := make([]wire.Stat, n)
	for i := range out {
		name := sb[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if j := bytes.IndexByte(name, 0); j >= 0 {
			name = name[:j]
		}
		out[i] = wire.Stat{Name: string(name), Value: vals[1+i]}
	}
	return out, nil
}

// errnoOf is err's errno (EIO if it has none).
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// u64Bytes views a []uint64 (8-byte aligned, as the ioctl structures need) as bytes.
func u64Bytes(s []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*8)
}
