package ethioctl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
)

// TestLayoutSizes: every structure encodes to its C size (include/uapi/linux/ethtool.h on
// x86-64 and arm64, as sizeof reports it).
func TestLayoutSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		size int
	}{
		{"ethtool_drvinfo", &drvinfo{}, 196},
		{"ethtool_ringparam", &ringparam{}, 36},
		{"ethtool_channels", &channelsC{}, 36},
		{"ethtool_coalesce", &coalesceC{}, 92},
		{"ethtool_cmd", &legacyCmd{}, legacyCmdSize},
		{"ethtool_link_settings", &linkSettings{}, linkModeMasksOff},
		{"ethtool_ts_info", &tsInfo{}, 44},
		{"ethtool_value", &value{}, 8},
		{"ethtool_sset_info", &ssetInfo{}, ssetInfoDataOff},
		{"ethtool_gstrings", &gstrings{}, 12},
		{"ethtool_stats", &statsHead{}, 8},
		{"ethtool_perm_addr", &permAddr{}, 8},
		{"ethtool_gfeatures", &featuresHead{}, 8},
		{"ethtool_get_features_block", &getFeaturesBlock{}, featuresGetBlkSize},
		{"ethtool_set_features_block", &setFeaturesBlock{}, featuresSetBlkSize},
		{"ethtool_rxfh", &rxfh{}, rxfhConfigOff},
		{"ethtool_rxnfc (GRXFH form)", &rxnfcHead{}, rxnfcLegacySize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Len(t, encode(tc.v), tc.size)
			assert.Equal(t, tc.size, binary.Size(tc.v))
		})
	}
}

// TestLayoutOffsets: fields land at their C offsets (offsetof), in the host's byte order, and
// decode back.
func TestLayoutOffsets(t *testing.T) {
	u32 := func(b []byte, off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }
	u16 := func(b []byte, off int) uint16 { return binary.NativeEndian.Uint16(b[off:]) }
	for _, tc := range []struct {
		name  string
		v, rt any // rt: a zero value of the same type, decoded into
		check func(t *testing.T, b []byte)
	}{
		{"ethtool_drvinfo", &drvinfo{Cmd: 3, NPrivFlags: 7, NStats: 163, RegdumpLen: 9, Driver: [32]byte{'m', 'a', 'n', 'a'}}, &drvinfo{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint32(3), u32(b, 0))
				assert.Equal(t, "mana", goString(b[4:36]))
				assert.Equal(t, uint32(7), u32(b, 176))
				assert.Equal(t, uint32(163), u32(b, 180))
				assert.Equal(t, uint32(9), u32(b, 192))
			}},
		{"ethtool_cmd", &legacyCmd{Cmd: 1, Supported: 2, Speed: 0x2710, SpeedHi: 1, Duplex: 1, Port: 0xff, Transceiver: 4, MaxTxPkt: 5, LpAdvertising: 6}, &legacyCmd{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint32(2), u32(b, 4))
				assert.Equal(t, uint16(0x2710), u16(b, 12))
				assert.Equal(t, byte(1), b[14])
				assert.Equal(t, byte(0xff), b[15])
				assert.Equal(t, byte(4), b[17])
				assert.Equal(t, uint32(5), u32(b, 20))
				assert.Equal(t, uint16(1), u16(b, 28))
				assert.Equal(t, uint32(6), u32(b, 32))
			}},
		{"ethtool_link_settings", &linkSettings{Cmd: 0x4c, Speed: 100000, Duplex: 1, Port: 0xff, LinkModeMasksNwords: -4, Transceiver: 2, RateMatching: 3}, &linkSettings{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint32(100000), u32(b, 4))
				assert.Equal(t, byte(1), b[8])
				assert.Equal(t, byte(0xff), b[9])
				assert.Equal(t, int8(-4), int8(b[15]))
				assert.Equal(t, byte(2), b[16])
				assert.Equal(t, byte(3), b[19])
			}},
		{"ethtool_ts_info", &tsInfo{Cmd: 0x41, SoTimestamping: 0x5a, PhcIndex: -1, TxTypes: 1, RxFilters: 2}, &tsInfo{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint32(0x5a), u32(b, 4))
				assert.Equal(t, uint32(math.MaxUint32), u32(b, 8))
				assert.Equal(t, uint32(1), u32(b, 12))
				assert.Equal(t, uint32(2), u32(b, 28))
			}},
		{"ethtool_rxfh", &rxfh{Cmd: 0x46, RSSContext: 1, IndirSize: 64, KeySize: 40, HFunc: 1, InputXfrm: 2, Rsvd32: 3}, &rxfh{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint32(1), u32(b, rxfhRSSContextOff))
				assert.Equal(t, uint32(64), u32(b, 8))
				assert.Equal(t, uint32(40), u32(b, 12))
				assert.Equal(t, []byte{1, 2}, b[16:18])
				assert.Equal(t, uint32(3), u32(b, 20))
			}},
		{"ethtool_coalesce", &coalesceC{Cmd: 0xe, F: [coalesceFields]uint32{0: 11, 9: 1, 21: 99}}, &coalesceC{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint32(11), u32(b, 4))  // rx_coalesce_usecs
				assert.Equal(t, uint32(1), u32(b, 40))  // use_adaptive_rx_coalesce
				assert.Equal(t, uint32(99), u32(b, 88)) // rate_sample_interval
			}},
		{"ethtool_channels", &channelsC{Cmd: 0x3c, MaxCombined: 64, Combined: 4}, &channelsC{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint32(64), u32(b, 16))
				assert.Equal(t, uint32(4), u32(b, 32))
			}},
		{"ethtool_ringparam", &ringparam{Cmd: 0x10, RxMaxPending: 8192, TxPending: 256}, &ringparam{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint32(8192), u32(b, 4))
				assert.Equal(t, uint32(256), u32(b, 32))
			}},
		{"ethtool_sset_info", &ssetInfo{Cmd: 0x37, SsetMask: 1<<1 | 1<<40}, &ssetInfo{},
			func(t *testing.T, b []byte) {
				assert.Equal(t, uint64(1<<1|1<<40), binary.NativeEndian.Uint64(b[8:]))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := encode(tc.v)
			tc.check(t, b)
			decode(b, tc.rt)
			assert.Equal(t, tc.v, tc.rt)
		})
	}
}

// TestIfrName: ifr_name as dev_ioctl reads it.
func TestIfrName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"mana0\x00garbage", "mana0"},
		{"mana0:1\x00", "mana0"},
		{"abcdefghijklmnopqrst", "abcdefghijklmno"}, // no NUL: cut at IFNAMSIZ-1
		{"\x00mana0", ""},
		{":x", ""},
	} {
		ifr := make([]byte, ifreqSize)
		copy(ifr[:ifNameSize], tc.in)
		assert.Equal(t, tc.want, ifrName(ifr), "%q", tc.in)
	}
}

// bufMem is a Memory over a byte slice mapped at base: any access outside it is EFAULT, as
// process_vm_readv answers for an unmapped page.
type bufMem struct {
	base uint64
	b    []byte
}

func (m *bufMem) span(n int, addr uint64) ([]byte, error) {
	if addr < m.base || addr-m.base > uint64(len(m.b)) || uint64(n) > uint64(len(m.b))-(addr-m.base) {
		return nil, unix.EFAULT
	}
	return m.b[addr-m.base : addr-m.base+uint64(n)], nil
}

func (m *bufMem) ReadAt(p []byte, addr uint64) error {
	s, err := m.span(len(p), addr)
	copy(p, s)
	return err
}

func (m *bufMem) WriteAt(p []byte, addr uint64) error {
	s, err := m.span(len(p), addr)
	copy(s, p)
	return err
}

// TestCallAddressing: reads and writes at ifr_data+off fail with EFAULT, without touching
// anything, when the range leaves the caller's memory or wraps around the address space.
func TestCallAddressing(t *testing.T) {
	mem := &bufMem{base: 0x1000, b: make([]byte, 64)}
	for _, tc := range []struct {
		name      string
		data, off uint64
		n         int
		ok        bool
	}{
		{"inside", 0x1000, 8, 16, true},
		{"to the end", 0x1000, 48, 16, true},
		{"past the end", 0x1000, 49, 16, false},
		{"before", 0xff0, 0, 8, false},
		{"offset wraps", math.MaxUint64 - 4, 8, 4, false},
		{"length wraps", math.MaxUint64 - 8, 0, 16, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{mem: mem, data: tc.data, ctx: context.Background()}
			err := c.read(tc.off, make([]byte, tc.n))
			werr := c.write(tc.off, make([]byte, tc.n))
			if tc.ok {
				assert.NoError(t, err)
				assert.NoError(t, werr)
			} else {
				assert.ErrorIs(t, err, unix.EFAULT)
				assert.ErrorIs(t, werr, unix.EFAULT)
			}
		})
	}
}

// TestUnreadableIfreq: an ifreq the caller cannot read is left to the kernel (which answers
// EFAULT itself) without asking manad.
func TestUnreadableIfreq(t *testing.T) {
	asked := false
	h := New(Options{Client: func(context.Context) (*client.Client, error) {
		asked = true
		return nil, errors.New("not to be asked")
	}})
	mem := &bufMem{base: 0x1000, b: make([]byte, 16)}
	handled, _, err := h.Handle(context.Background(), mem, 0x1000)
	assert.False(t, handled)
	assert.NoError(t, err)
	assert.False(t, asked)
}

// TestModeMaskAndFeatureWords: names become bits at their index in the string set; unknown
// names and bits past the words asked for are dropped.
func TestModeMaskAndFeatureWords(t *testing.T) {
	set := make([]string, 40)
	for i := range set {
		set[i] = string(rune('a' + i))
	}
	assert.Equal(t, []uint32{1<<0 | 1<<3, 1 << 1}, modeMask(set, []string{"a", "d", set[33], "nope"}, 2))
	assert.Equal(t, []uint32{1 << 0}, modeMask(set, []string{"a", set[33]}, 1))
	assert.Equal(t, []uint32{1 << 2, 1 << 7}, featureWords(set, map[string]bool{"c": true, set[39]: true}))
}

// TestManadErr: manad's errno passes through; a lost connection reads ENODEV; an ended context
// EINTR.
func TestManadErr(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &call{ctx: ctx}
	var errno unix.Errno
	require.ErrorAs(t, c.manadErr("X", &client.Error{Errno: unix.EPERM, Message: "needs admin"}), &errno)
	assert.Equal(t, unix.EPERM, errno)
	refused := fmt.Errorf("cannot connect to manad at /run/manad/manad.sock: %w",
		&net.OpError{Op: "dial", Net: "unixpacket", Err: os.NewSyscallError("connect", unix.ECONNREFUSED)})
	require.ErrorAs(t, c.manadErr("X", refused), &errno)
	assert.Equal(t, unix.ENODEV, errno)
	assert.False(t, errors.As(c.manadErr("X", errors.New("client: STRSET_GET: expected 1 reply, got 0")), &errno),
		"a reply that does not decode is no errno (Handle answers EIO)")
	require.ErrorAs(t, c.manadErr("X", &client.Error{Errno: unix.EPIPE}), &errno)
	assert.Equal(t, unix.ENODEV, errno, "a send on a connection manad closed")
	cancel()
	require.ErrorAs(t, c.manadErr("X", errors.New("read: deadline")), &errno)
	assert.Equal(t, unix.EINTR, errno)
}
