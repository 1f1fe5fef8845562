package offload

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// udpDatagram builds the frame of s (UDP unless s.flags are TCP's) with its checksum
// completed, as it arrives from the wire.
func udpDatagram(s spec) []byte {
	s.udp = s.flags == 0
	f, _ := s.build()
	return completeCsum(f)
}

// completeCsum computes the L4 checksum of f again, after a change.
func completeCsum(f []byte) []byte {
	l, err := parseLayout(f, true)
	if err != nil {
		panic(err)
	}
	binary.BigEndian.PutUint16(f[l.csumField():], 0)
	binary.BigEndian.PutUint16(f[l.csumField():], l.l4Csum(f, len(f)))
	return f
}

func TestUDPCoalesceEndsRuns(t *testing.T) {
	base := &spec{udp: true, ttl: 64, id: 10, payload: bytes.Repeat([]byte{7}, 64)}
	copy(base.src[:], []byte{10, 0, 0, 1})
	copy(base.dst[:], []byte{10, 0, 0, 2})
	next := func(mod func(s *spec)) []byte {
		s := *base
		s.id++
		if mod != nil {
			mod(&s)
		}
		return udpDatagram(s)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		joins bool
	}{
		{"next of the flow", next(nil), true},
		{"IPv4 ID not one up", next(func(s *spec) { s.id += 2 }), false},
		{"same IPv4 ID without DF", next(func(s *spec) { s.id-- }), false},
		{"longer than the first", next(func(s *spec) { s.payload = make([]byte, 65) }), false},
		{"no payload", next(func(s *spec) { s.payload = nil }), false},
		{"other TTL", next(func(s *spec) { s.ttl-- }), false},
		{"other TOS", next(func(s *spec) { s.tos = 4 }), false},
		{"other destination", next(func(s *spec) { s.dst[3] = 9 }), false},
		{"DF set on one only", next(func(s *spec) { s.df = true }), false},
		{"IPv4 options", next(func(s *spec) { s.ipOpts = 4 }), false},
		{"TCP", next(func(s *spec) { s.flags = tcpACK }), false},
		{"corrupt checksum", func() []byte { f := next(nil); f[len(f)-1]++; return f }(), false},
		{"no checksum", func() []byte { f := next(nil); f[34+6], f[34+7] = 0, 0; return f }(), false},
		{"other source port", func() []byte { f := next(nil); f[34]++; return completeCsum(f) }(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewUDPCoalescer(8)
			require.True(t, c.Add(udpDatagram(*base)), "first datagram refused")
			require.Equal(t, tc.joins, c.Add(tc.frame), "Add")
			third := c.Add(next(func(s *spec) { s.id++ }))
			assert.Equal(t, tc.joins, third, "third datagram joined")
		})
	}
	t.Run("shorter datagram ends the run", func(t *testing.T) {
		c := NewUDPCoalescer(8)
		c.Add(udpDatagram(*base))
		require.True(t, c.Add(next(func(s *spec) { s.payload = s.payload[:20] })), "shorter datagram refused")
		assert.False(t, c.Add(next(func(s *spec) { s.id++ })), "a datagram joined after a short one")
	})
	t.Run("DF with a fixed ID", func(t *testing.T) {
		s := *base
		s.df = true
		c := NewUDPCoalescer(8)
		for i := range 3 {
			require.True(t, c.Add(udpDatagram(s)), "datagram %d with DF and the same ID refused", i)
		}
		s.id++
		assert.False(t, c.Add(udpDatagram(s)), "a datagram with another ID joined a fixed-ID run")
	})
	t.Run("maxSegs", func(t *testing.T) {
		c := NewUDPCoalescer(2)
		c.Add(udpDatagram(*base))
		c.Add(next(nil))
		assert.False(t, c.Add(next(func(s *spec) { s.id++ })), "a third datagram joined a run limited to 2")
		_, n := c.Flush()
		assert.Equal(t, 2, n, "flushed")
	})
}

// TestUDPCoalescedDelivery writes USO superframes made by UDPCoalescer into a TAP and checks
// that a socket behind it, without UDP_GRO, receives exactly the original datagrams, in order:
// the kernel takes the superframe (tun_get_user → virtio_net_hdr_to_skb) and cuts it up again
// (udp_queue_rcv_skb → udp_rcv_segment). A datagram of another flow or a longer one ends a run.
func TestUDPCoalescedDelivery(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	mac := net.HardwareAddr{2, 0, 0, 0, 0x0d, 1}
	var tapf *os.File
	var err error
	taptest.InNetNS(t, ns, func() { tapf, err = openTAP("ud0", true) })
	require.NoError(t, err)
	t.Cleanup(func() { tapf.Close() })
	for _, args := range [][]string{
		{"link", "set", "ud0", "address", mac.String(), "up"},
		{"addr", "add", "10.98.3.1/24", "dev", "ud0"},
		{"addr", "add", "fd98:3::1/64", "dev", "ud0", "nodad"},
		{"neigh", "add", "10.98.3.2", "lladdr", "02:00:00:00:0d:02", "dev", "ud0", "nud", "permanent"},
		{"neigh", "add", "fd98:3::2", "lladdr", "02:00:00:00:0d:02", "dev", "ud0", "nud", "permanent"},
	} {
		taptest.IP(t, ns, args...)
	}
	rc, err := tapf.SyscallConn()
	require.NoError(t, err)
	write := func(iov [][]byte) {
		t.Helper()
		var werr error
		err := rc.Write(func(fd uintptr) bool { _, werr = unix.Writev(int(fd), iov); return true })
		require.NoError(t, err, "writing to the TAP: %v %v", err, werr)
		require.NoError(t, werr, "writing to the TAP: %v %v", err, werr)
	}
	for _, tc := range []struct {
		name string
		v6   bool
		df   bool
		id   uint16 // step of the IPv4 ID: 1, or 0 with DF
	}{
		{"IPv4", false, false, 1},
		{"IPv4 DF fixed ID", false, true, 0},
		{"IPv6", true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conn *net.UDPConn
			laddr := &net.UDPAddr{IP: net.IPv4(10, 98, 3, 1), Port: 53}
			src := net.IPv4(10, 98, 3, 2).To4()
			if tc.v6 {
				laddr.IP, src = net.ParseIP("fd98:3::1"), net.ParseIP("fd98:3::2")
			}
			taptest.InNetNS(t, ns, func() { conn, err = net.ListenUDP("udp", laddr) })
			require.NoError(t, err)
			defer conn.Close()
			conn.SetReadBuffer(1 << 20)
			// Flow A from port 12345, flow B from port 12346 (its first byte one up).
			type dg struct {
				port int
				data []byte
			}
			var sent []dg
			id := uint16(0xfffd) // wraps inside the run
			mk := func(port, size int) []byte {
				s := spec{udp: true, v6: tc.v6, ttl: 64, df: tc.df, id: id, payload: make([]byte, size)}
				id += tc.id
				for i := range s.payload {
					s.payload[i] = byte(len(sent)*31 + i)
				}
				copy(s.dst[:], laddr.IP.To16())
				copy(s.src[:], src.To16())
				if !tc.v6 {
					copy(s.dst[:], laddr.IP.To4())
					copy(s.src[:], src)
				}
				f := udpDatagram(s)
				copy(f, mac)
				if port != 12345 {
					l, _ := udpMergeable(f)
					binary.BigEndian.PutUint16(f[l.l4:], uint16(port))
					completeCsum(f)
				}
				sent = append(sent, dg{port, bytes.Clone(s.payload)})
				return f
			}
			frames := [][]byte{
				mk(12345, 100), mk(12345, 100), mk(12345, 100), mk(12345, 100), mk(12345, 37), // a run ended by a shorter one
				mk(12345, 100), mk(12345, 100), mk(12346, 100), // another flow
				mk(12346, 100), mk(12346, 200), // a longer one
				mk(12346, 200), mk(12346, 200), mk(12346, 200),
			}
			c := NewUDPCoalescer(64)
			var runs []int
			flush := func() {
				iov, n := c.Flush()
				if n > 0 {
					write(iov)
					runs = append(runs, n)
				}
			}
			for i, f := range frames {
				if c.Add(f) {
					continue
				}
				require.NotEqual(t, 0, c.Len(), "datagram %d refused by an empty coalescer", i)
				flush()
				require.True(t, c.Add(f), "datagram %d refused by an empty coalescer", i)
			}
			flush()
			assert.Equal(t, "[5 2 2 4]", fmt.Sprint(runs), "runs %v, want [5 2 2 4]", runs)
			buf := make([]byte, 65536)
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			for i, want := range sent {
				n, from, err := conn.ReadFromUDP(buf)
				require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "received %d datagrams of %d", i, len(sent))
				require.NoError(t, err)
				require.Equal(t, want.port, from.Port, "datagram %d: %d bytes from port %d, want %d from %d", i, n, from.Port, len(want.data), want.port)
				require.Equal(t, want.data, buf[:n], "datagram %d: %d bytes from port %d, want %d from %d", i, n, from.Port, len(want.data), want.port)
			}
			conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			n, _, err := conn.ReadFromUDP(buf)
			assert.Error(t, err, "an extra datagram of %d bytes", n)
		})
	}
}

// TestUDPCoalesceForwardedLikeTheKernel cuts a UDP superframe with Segmenter, coalesces the
// datagrams again and has a router namespace forward both superframes, the kernel's and ours,
// through a TAP without offloads: the kernel segments each in software (__udp_gso_segment), and
// the datagrams must be the same, byte for byte.
func TestUDPCoalesceForwardedLikeTheKernel(t *testing.T) {
	r := newRouter(t)
	payload := make([]byte, 5000)
	for i := range payload {
		payload[i] = byte(i*5 + i>>8)
	}
	for _, tc := range []struct {
		name string
		s    spec
		mss  int
		segs int
	}{
		{"UDPv4", spec{udp: true, id: 0xfffe}, 1000, 5},
		{"UDPv4 DF", spec{udp: true, id: 77, df: true, tos: 0x10}, 1472, 4},
		{"UDPv6", spec{udp: true, v6: true, tos: 0x20}, 999, 6},
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
			c := NewUDPCoalescer(64)
			i := 0
			_, err := NewSegmenter().Segment(&h, f, func(b []byte) {
				assert.True(t, c.Add(bytes.Clone(b)), "datagram %d refused by the coalescer", i)
				i++
			})
			require.NoError(t, err)
			iov, n := c.Flush()
			require.Equal(t, tc.segs, n, "coalesced %d datagrams, want %d", n, tc.segs)
			again := r.forwardv(t, iov, l, tc.segs)
			for i := range again {
				assert.Equal(t, kernel[i], again[i], "datagram %d of our superframe differs from the kernel's own:\n ours   %x\n kernel %x", i, head(again[i]), head(kernel[i]))
			}
		})
	}
}
