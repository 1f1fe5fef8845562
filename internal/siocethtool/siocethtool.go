// Package siocethtool is ethtool's legacy ioctl ABI, once for all of manad: the SIOCETHTOOL call
// with its struct ifreq, the string-set and statistics commands built on it (ETHTOOL_GSSET_INFO,
// ETHTOOL_GSTRINGS, ETHTOOL_GSTATS, as ethtool.c's get_stringset and do_gstats), and the numbers
// of include/uapi/linux/ethtool.h that golang.org/x/sys/unix lacks: the string-set ids (ETH_SS_*,
// which ethtool netlink's STRSET uses too) and ETH_GSTRING_LEN.
//
// The daemon uses it where ethtool netlink does not reach (a TAP's features, an uplink's GRO and
// channels, in the device's own namespace), manactl for a kernel driver's statistics, the
// protocol packages for the string-set ids. It links nothing of manad but genl/nlerr.
package siocethtool

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// String set ids (enum ethtool_stringset).
const (
	SSTest            = 0  // ETH_SS_TEST
	SSStats           = 1  // ETH_SS_STATS
	SSPrivFlags       = 2  // ETH_SS_PRIV_FLAGS
	SSNtupleFilters   = 3  // ETH_SS_NTUPLE_FILTERS
	SSFeatures        = 4  // ETH_SS_FEATURES
	SSRSSHashFuncs    = 5  // ETH_SS_RSS_HASH_FUNCS
	SSTunables        = 6  // ETH_SS_TUNABLES
	SSPhyStats        = 7  // ETH_SS_PHY_STATS
	SSPhyTunables     = 8  // ETH_SS_PHY_TUNABLES
	SSLinkModes       = 9  // ETH_SS_LINK_MODES
	SSMsgClasses      = 10 // ETH_SS_MSG_CLASSES
	SSWolModes        = 11 // ETH_SS_WOL_MODES
	SSSofTimestamping = 12 // ETH_SS_SOF_TIMESTAMPING
	SSTsTxTypes       = 13 // ETH_SS_TS_TX_TYPES
	SSTsRxFilters     = 14 // ETH_SS_TS_RX_FILTERS
	SSUDPTunnelTypes  = 15 // ETH_SS_UDP_TUNNEL_TYPES
	SSStatsStd        = 16 // ETH_SS_STATS_STD
	SSStatsEthPhy     = 17 // ETH_SS_STATS_ETH_PHY
	SSStatsEthMAC     = 18 // ETH_SS_STATS_ETH_MAC
	SSStatsEthCtrl    = 19 // ETH_SS_STATS_ETH_CTRL
	SSStatsRMON       = 20 // ETH_SS_STATS_RMON
	SSStatsPhy        = 21 // ETH_SS_STATS_PHY
	SSTsFlags         = 22 // ETH_SS_TS_FLAGS
	SSCount           = 23 // ETH_SS_COUNT
)

// GStringLen is ETH_GSTRING_LEN, the size of one name in ETHTOOL_GSTRINGS.
const GStringLen = 32

// ifreq is struct ifreq with ifr_data set: the name, then the union, as long as x/sys/unix's
// Ifreq makes it on this architecture (40 bytes in all on 64-bit, 32 on 32-bit). The pointer is
// kept typed, not stored as bytes in a unix.Ifreq, so that the garbage collector sees it.
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [unsafe.Sizeof(unix.Ifreq{}) - unix.IFNAMSIZ - unsafe.Sizeof(unsafe.Pointer(nil))]byte
}

// Do runs SIOCETHTOOL on the device named name through socket fd (any socket in the device's
// namespace) with cmd, a struct that begins with its ETHTOOL_* command, and returns the ioctl's
// non-negative result (ETHTOOL_SFEATURES reports flags in it). Errors: EINVAL for a name that
// does not fit IFNAMSIZ; else the ioctl's errno (EOPNOTSUPP where the driver lacks the command,
// ENODEV for no such device).
func Do(fd int, name string, cmd unsafe.Pointer) (int, error) {
	var ifr ifreq
	if len(name) >= len(ifr.name) {
		return 0, nlerr.New(unix.EINVAL, "device name %q too long", name)
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

// SetLen returns how many strings the device's string set set holds (ETHTOOL_GSSET_INFO), 0 when
// the device has no such set. Errors are Do's.
func SetLen(fd int, name string, set uint32) (int, error) {
	// struct ethtool_sset_info { u32 cmd, reserved; u64 sset_mask; u32 data[]; }
	var info [3]uint64
	b := u64Bytes(info[:])
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_GSSET_INFO)
	info[1] = 1 << set
	if _, err := Do(fd, name, unsafe.Pointer(&info[0])); err != nil {
		return 0, err
	}
	if info[1]&(1<<set) == 0 {
		return 0, nil
	}
	return int(binary.NativeEndian.Uint32(b[16:])), nil
}

// Strings returns the strings of the device's string set set (ETHTOOL_GSTRINGS); n is SetLen's
// answer (for 0, there is nothing to read and nothing is asked). A set that changed size since
// SetLen gives no strings on Linux 6.11 and later (ethtool_get_strings answers a count other than
// its own with 0); older kernels ignore the count they are given and write the whole set, so the
// buffer has room for a set that grew (room(n) entries), and the result holds what the kernel
// wrote. Errors are Do's, and EIO for a set that outgrew the room.
func Strings(fd int, name string, set uint32, n int) ([]string, error) {
	if n <= 0 { // a count of 0 would ask for the whole set, of any size
		return nil, nil
	}
	r := room(n)
	// struct ethtool_gstrings { u32 cmd, string_set, len; u8 data[]; }
	buf := make([]uint64, (12+r*GStringLen+7)/8)
	b := u64Bytes(buf)
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(b[4:], set)
	binary.NativeEndian.PutUint32(b[8:], uint32(n))
	if _, err := Do(fd, name, unsafe.Pointer(&buf[0])); err != nil {
		return nil, err
	}
	got := int(binary.NativeEndian.Uint32(b[8:]))
	if got > r {
		return nil, nlerr.New(unix.EIO, "ETHTOOL_GSTRINGS on %s: string set %d grew from %d to %d strings", name, set, n, got)
	}
	out := make([]string, got)
	for i := range out {
		s := b[12+i*GStringLen : 12+(i+1)*GStringLen]
		if k := bytes.IndexByte(s, 0); k >= 0 {
			s = s[:k]
		}
		out[i] = string(s)
	}
	return out, nil
}

// Stats returns the device driver's statistics (ETHTOOL_GSTATS), in the order of its SSStats
// strings; n is SetLen(SSStats)'s answer. As with Strings, statistics that changed in number
// since give none on Linux 6.11 and later and all of them before (within room(n)). Errors are
// Do's, and EIO for statistics that outgrew the room.
func Stats(fd int, name string, n int) ([]uint64, error) {
	if n <= 0 {
		return nil, nil
	}
	r := room(n)
	// struct ethtool_stats { u32 cmd, n_stats; u64 data[]; }
	buf := make([]uint64, 1+r)
	b := u64Bytes(buf)
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_GSTATS)
	binary.NativeEndian.PutUint32(b[4:], uint32(n))
	if _, err := Do(fd, name, unsafe.Pointer(&buf[0])); err != nil {
		return nil, err
	}
	got := int(binary.NativeEndian.Uint32(b[4:]))
	if got > r {
		return nil, nlerr.New(unix.EIO, "ETHTOOL_GSTATS on %s: statistics grew from %d to %d", name, n, got)
	}
	return buf[1 : 1+got], nil
}

// room is how many entries Strings and Stats make room for when SetLen said n: half as many
// again, and 16 more (a driver's per-queue counters grow with its channels between two calls).
func room(n int) int { return n + n/2 + 16 }

// u64Bytes is s's memory as bytes: the commands are built in uint64 slices so that their u64
// fields are aligned.
func u64Bytes(s []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*8)
}
