package tap

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/internal/siocethtool"
)

// Features are the kernel netdev features of a TAP that decide what receive coalescing (GRO)
// the kernel would do for packets arriving on it, which manad, playing the TAP's NIC, does in
// its stead: the TAP's own receive path (tun_get_user) runs no GRO. They are what `ethtool -k`
// shows on the TAP and `ethtool -K` changes, not manad's port features.
type Features uint8

const (
	FeatureGRO       Features = 1 << iota // rx-gro, "generic-receive-offload" (NETIF_F_GRO)
	FeatureGROUDPFwd                      // rx-udp-gro-forwarding (NETIF_F_GRO_UDP_FWD)
	FeatureGROList                        // rx-gro-list (NETIF_F_GRO_FRAGLIST)
)

// featureNames are the features' names in the kernel's ETH_SS_FEATURES string set
// (netdev_features_strings): their bit numbers differ between kernels, their names do not.
var featureNames = [...]struct {
	f    Features
	name string
}{{FeatureGRO, "rx-gro"}, {FeatureGROUDPFwd, "rx-udp-gro-forwarding"}, {FeatureGROList, "rx-gro-list"}}

// Name returns the kernel's name of a single feature f ("rx-udp-gro-forwarding"), "" for a set of
// several or none.
func (f Features) Name() string {
	for _, fn := range featureNames {
		if fn.f == f {
			return fn.name
		}
	}
	return ""
}

// UDPGRO reports whether the kernel's GRO would merge consecutive datagrams of a UDP flow arriving
// on the device whatever becomes of them, forwarded or delivered to a socket without UDP_GRO:
// GRO runs at all (NETIF_F_GRO, netif_elide_gro) and the device has rx-udp-gro-forwarding or
// rx-gro-list on (udp_gro_receive, for a datagram no UDP_GRO socket claims). Without either, a
// forwarding namespace would forward and count every datagram on its own.
func (f Features) UDPGRO() bool {
	return f&FeatureGRO != 0 && f&(FeatureGROUDPFwd|FeatureGROList) != 0
}

// maxFeatures bounds the feature names open takes from the kernel (6.12 has 66; netdev_features_t
// is 64 bits wide, so far more means a reply open cannot trust).
const maxFeatures = 1024

// featureReader reads devices' Features with the SIOCETHTOOL ioctl (ETHTOOL_GFEATURES, as
// ethtool -k does on a kernel without ethtool netlink) through a socket inside their namespace,
// opened on first use. The feature names are resolved to bit numbers once (ETHTOOL_GSTRINGS):
// they belong to the kernel, not to a device.
type featureReader struct {
	ns *netNS

	mu     sync.Mutex
	fd     int                    // -1 until the first read, and after close
	bits   [len(featureNames)]int // bit number of each featureNames entry; -1: unknown to the kernel
	blocks int                    // 32-bit blocks of the feature set
	closed bool
}

func newFeatureReader(ns *netNS) *featureReader { return &featureReader{ns: ns, fd: -1} }

// close releases the socket; reads fail with ENODEV afterwards.
func (r *featureReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// read returns the Features active on the device named name. Errors: ENODEV when the reader is
// closed or no such device exists; the kernel's errno when the socket cannot be opened or an
// ioctl fails.
func (r *featureReader) read(name string) (Features, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, nlerr.New(unix.ENODEV, "network namespace %q closed", r.ns.name)
	}
	if r.fd < 0 {
		if err := r.open(name); err != nil {
			return 0, err
		}
	}
	// struct ethtool_gfeatures: cmd, size, then per block available, requested, active,
	// never_changed.
	buf := make([]byte, 8+16*r.blocks)
	binary.NativeEndian.PutUint32(buf, unix.ETHTOOL_GFEATURES)
	binary.NativeEndian.PutUint32(buf[4:], uint32(r.blocks))
	if _, err := siocethtool.Do(r.fd, name, unsafe.Pointer(&buf[0])); err != nil {
		return 0, nlerr.Wrap(err, unix.EIO, "ETHTOOL_GFEATURES on %s", name)
	}
	if got := binary.NativeEndian.Uint32(buf[4:]); got != uint32(r.blocks) {
		// The kernel writes back its own block count; another means the feature set changed
		// size under us, and the bits below would be read from the wrong places.
		return 0, nlerr.New(unix.EIO, "ETHTOOL_GFEATURES on %s: %d feature blocks, want %d", name, got, r.blocks)
	}
	var f Features
	for i, b := range r.bits {
		if b < 0 {
			continue
		}
		active := binary.NativeEndian.Uint32(buf[8+16*(b/32)+8:])
		if active&(1<<(b%32)) != 0 {
			f |= featureNames[i].f
		}
	}
	return f, nil
}

// set turns the features in mask on (those also in value) or off on the device named name, as
// `ethtool -K` does without ethtool netlink (ETHTOOL_SFEATURES), and returns the features active
// afterwards. Errors: as read; EOPNOTSUPP when the kernel has no such feature or refuses the
// change (the device's hw_features lack it: ETHTOOL_F_UNSUPPORTED, or it is wanted but not
// active: ETHTOOL_F_WISH).
func (r *featureReader) set(name string, mask, value Features) (Features, error) {
	if err := r.sfeatures(name, mask, value); err != nil {
		return 0, err
	}
	return r.read(name)
}

func (r *featureReader) sfeatures(name string, mask, value Features) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nlerr.New(unix.ENODEV, "network namespace %q closed", r.ns.name)
	}
	if r.fd < 0 {
		if err := r.open(name); err != nil {
			return err
		}
	}
	// struct ethtool_sfeatures: cmd, size, then per block valid, requested.
	buf := make([]byte, 8+8*r.blocks)
	binary.NativeEndian.PutUint32(buf, unix.ETHTOOL_SFEATURES)
	binary.NativeEndian.PutUint32(buf[4:], uint32(r.blocks))
	for i, b := range r.bits {
		fn := featureNames[i]
		if mask&fn.f == 0 {
			continue
		}
		if b < 0 {
			return nlerr.New(unix.EOPNOTSUPP, "%s: the kernel has no feature %s", name, fn.name)
		}
		off := 8 + 8*(b/32)
		binary.NativeEndian.PutUint32(buf[off:], binary.NativeEndian.Uint32(buf[off:])|1<<(b%32))
		if value&fn.f != 0 {
			binary.NativeEndian.PutUint32(buf[off+4:], binary.NativeEndian.Uint32(buf[off+4:])|1<<(b%32))
		}
	}
	ret, err := siocethtool.Do(r.fd, name, unsafe.Pointer(&buf[0]))
	if err != nil {
		return nlerr.Wrap(err, unix.EIO, "ETHTOOL_SFEATURES on %s", name)
	}
	// ethtool_set_features returns ETHTOOL_F_* flags for a change it did not make in full.
	if ret&(unix.ETHTOOL_F_UNSUPPORTED|unix.ETHTOOL_F_WISH) != 0 {
		return nlerr.New(unix.EOPNOTSUPP, "%s: the kernel did not make the feature change (ETHTOOL_SFEATURES flags %#x)", name, ret)
	}
	return nil
}

// open opens the socket in the namespace and resolves the feature names, asking device name.
// Caller holds mu.
func (r *featureReader) open(name string) error {
	fd := -1
	if err := r.ns.run(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		return nlerr.Wrap(err, unix.EIO, "ioctl socket in network namespace %q", r.ns.name)
	}
	n, err := siocethtool.SetLen(fd, name, siocethtool.SSFeatures)
	if err != nil {
		unix.Close(fd)
		return nlerr.Wrap(err, unix.EIO, "ETHTOOL_GSSET_INFO on %s", name)
	}
	if n <= 0 || n > maxFeatures {
		unix.Close(fd)
		return nlerr.New(unix.EOPNOTSUPP, "ETHTOOL_GSSET_INFO on %s: %d netdev features (want 1..%d)", name, n, maxFeatures)
	}
	names, err := siocethtool.Strings(fd, name, siocethtool.SSFeatures, n)
	if err != nil {
		unix.Close(fd)
		return nlerr.Wrap(err, unix.EIO, "ETHTOOL_GSTRINGS on %s", name)
	}
	if len(names) != n {
		unix.Close(fd)
		return nlerr.New(unix.EIO, "ETHTOOL_GSTRINGS on %s: %d feature names, want %d", name, len(names), n)
	}
	for i := range r.bits {
		r.bits[i] = -1
	}
	for b, s := range names {
		for i, fn := range featureNames {
			if s == fn.name {
				r.bits[i] = b
			}
		}
	}
	r.fd, r.blocks = fd, (n+31)/32
	return nil
}
