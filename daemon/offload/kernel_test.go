package offload

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openTAP creates a TAP in the calling thread's namespace, with a 12-byte virtio header when
// vnet, and returns it non-blocking (deadlines work).
func openTAP(name string, vnet bool) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if vnet {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if vnet {
		if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, HeaderLen); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// router is a namespace that forwards from TAP in (which takes virtio headers, so a test can
// write GSO superframes into it) to TAP out (no offloads, so the kernel segments what it
// forwards there in software: validate_xmit_skb → skb_gso_segment).
type router struct {
	in, out *os.File
	inMAC   net.HardwareAddr
	next4   net.IP // a neighbour behind out
	next6   net.IP
	src4    net.IP // an address behind in
	src6    net.IP
}

func newRouter(t *testing.T) *router {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	r := &router{inMAC: net.HardwareAddr{2, 0, 0, 0, 0x0b, 1},
		next4: net.IPv4(10, 98, 2, 2).To4(), next6: net.ParseIP("fd98:2::2"),
		src4: net.IPv4(10, 98, 1, 2).To4(), src6: net.ParseIP("fd98:1::2")}
	var err error
	taptest.InNetNS(t, ns, func() {
		for k, v := range map[string]string{"ipv4/ip_forward": "1", "ipv6/conf/all/forwarding": "1",
			"ipv4/conf/all/rp_filter": "0", "ipv4/conf/default/rp_filter": "0"} {
			if err = os.WriteFile("/proc/sys/net/"+k, []byte(v), 0); err != nil {
				return
			}
		}
		if r.in, err = openTAP("ob0", true); err != nil {
			return
		}
		r.out, err = openTAP("oc0", false)
	})
	require.NoError(t, err, "router setup")
	t.Cleanup(func() { r.in.Close(); r.out.Close() })
	for _, args := range [][]string{
		{"link", "set", "ob0", "address", r.inMAC.String(), "up"},
		{"link", "set", "oc0", "address", "02:00:00:00:0c:01", "up"},
		{"addr", "add", "10.98.1.1/24", "dev", "ob0"},
		{"addr", "add", "10.98.2.1/24", "dev", "oc0"},
		{"addr", "add", "fd98:1::1/64", "dev", "ob0", "nodad"},
		{"addr", "add", "fd98:2::1/64", "dev", "oc0", "nodad"},
		{"neigh", "add", "10.98.2.2", "lladdr", "02:00:00:00:0c:02", "dev", "oc0", "nud", "permanent"},
		{"neigh", "add", "fd98:2::2", "lladdr", "02:00:00:00:0c:02", "dev", "oc0", "nud", "permanent"},
	} {
		taptest.IP(t, ns, args...)
	}
	return r
}

// forward writes a superframe with its header into in and returns the frames of the same
// protocol that the kernel puts out of out for the destination, want of them.
func (r *router) forward(t *testing.T, h Header, f []byte, l layout, want int) [][]byte {
	t.Helper()
	b := make([]byte, HeaderLen, HeaderLen+len(f))
	h.Encode(b)
	return r.forwardv(t, [][]byte{b, f}, l, want)
}

// forwardv is forward for a frame given as an iovec list (virtio header first), written with
// one writev as the data path writes a coalesced superframe.
func (r *router) forwardv(t *testing.T, iov [][]byte, l layout, want int) [][]byte {
	t.Helper()
	rc, err := r.in.SyscallConn()
	require.NoError(t, err)
	var werr error
	err = rc.Write(func(fd uintptr) bool { _, werr = unix.Writev(int(fd), iov); return true })
	require.NoError(t, err, "writing the superframe: %v %v", err, werr)
	require.NoError(t, werr, "writing the superframe: %v %v", err, werr)
	_, dst := l.addrs(bytes.Join(iov, nil)[HeaderLen:])
	var out [][]byte
	buf := make([]byte, 65536)
	r.out.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(out) < want {
		n, err := r.out.Read(buf)
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the kernel forwarded %d frames of %d", len(out), want)
		require.NoError(t, err)
		g, err := parseLayout(buf[:n], true)
		if err != nil || g.proto != l.proto || g.v6 != l.v6 {
			continue // neighbour discovery, MLD and the like
		}
		if _, d := g.addrs(buf[:n]); !bytes.Equal(d, dst) {
			continue
		}
		out = append(out, bytes.Clone(buf[:n]))
	}
	return out
}

// TestSegmentLikeTheKernel forwards superframes through a namespace whose egress TAP has no
// offloads, so the kernel segments them itself, and compares its segments with Segmenter's,
// byte for byte from the IP header on (the kernel's are one hop older: TTL one less).
func TestSegmentLikeTheKernel(t *testing.T) {
	r := newRouter(t)
	opts := []byte{1, 1, 8, 10, 0, 0, 0x12, 0x34, 0, 0, 0x56, 0x78} // NOP NOP timestamp
	payload := make([]byte, 7000)
	for i := range payload {
		payload[i] = byte(i*7 + i>>8)
	}
	for _, tc := range []struct {
		name string
		s    spec
		mss  int
		segs int
	}{
		{"TCPv4", spec{flags: tcpACK | tcpPSH, seq: 1 << 31, ack: 99, win: 502, tcpOpts: opts, id: 0xfffe, df: true}, 1448, 5},
		{"TCPv4 FIN CWR ECE", spec{flags: tcpACK | tcpFIN | tcpCWR | tcpECE, seq: 12345, ack: 1, win: 1000, id: 7}, 1000, 7},
		{"TCPv6", spec{v6: true, flags: tcpACK | tcpPSH, seq: 4000, ack: 5, win: 64, tcpOpts: opts}, 1400, 5},
		{"TCPv6 CWR", spec{v6: true, flags: tcpACK | tcpCWR, seq: 1, win: 64}, 1440, 5},
		{"UDPv4", spec{udp: true, id: 300}, 1200, 6},
		{"UDPv6", spec{udp: true, v6: true}, 1232, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.payload, s.ttl = payload, 64
			if s.v6 {
				copy(s.src[:], r.src6)
				copy(s.dst[:], r.next6)
			} else {
				copy(s.src[:], r.src4)
				copy(s.dst[:], r.next4)
			}
			f, l := s.build()
			copy(f, r.inMAC)
			h := s.gsoHeader(l, tc.mss)
			kernel := r.forward(t, h, bytes.Clone(f), l, tc.segs)
			var ours [][]byte
			_, err := NewSegmenter().Segment(&h, f, func(b []byte) { ours = append(ours, bytes.Clone(b)) })
			require.NoError(t, err)
			require.Len(t, ours, tc.segs, "Segmenter made %d segments, want %d", len(ours), tc.segs)
			if !s.udp {
				// Coalesced again, our segments must be a superframe the kernel takes and
				// segments into the same frames.
				co := NewCoalescer(64)
				for i, o := range ours {
					seg := bytes.Clone(o)
					copy(seg, r.inMAC)
					require.True(t, co.Add(seg), "segment %d refused by the coalescer", i)
				}
				iov, n := co.Flush()
				require.Equal(t, tc.segs, n, "coalesced %d segments", n)
				again := r.forwardv(t, iov, l, tc.segs)
				for i := range again {
					assert.Equal(t, kernel[i], again[i], "segment %d of our superframe differs from the kernel's own:\n ours   %x\n kernel %x", i, head(again[i]), head(kernel[i]))
				}
			}
			for i, o := range ours {
				// One hop on: TTL or hop limit one less, the IPv4 header checksum after it.
				if l.v6 {
					o[l.l3+7]--
				} else {
					o[l.l3+8]--
					o[l.l3+10], o[l.l3+11] = 0, 0
					binary.BigEndian.PutUint16(o[l.l3+10:], ipv4Csum(o[l.l3:l.l4]))
				}
				k := kernel[i]
				if len(k)-14 != len(o)-l.l3 || !bytes.Equal(k[14:], o[l.l3:]) {
					t.Errorf("segment %d differs from the kernel's:\n ours   %x\n kernel %x", i, head(o[l.l3:]), head(k[14:]))
				}
			}
		})
	}
}

// head is the headers of a frame, for a failure message.
func head(b []byte) []byte { return b[:min(len(b), 80)] }
