package datapath

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCoalescedUDP sends bursts of small datagrams (one sendmmsg each, so that manad's TX
// goroutine finds many in one read loop) of two flows from a port into one whose TAP took the
// USO offloads, and checks that the receiving socket, without UDP_GRO, gets every datagram
// exactly, each flow in order: with UDP GRO off (the default) none is coalesced; turned on, the
// receiving RX queue merges some into USO superframes (its coalescing counter moves); turned off
// again, it merges none.
func TestCoalescedUDP(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 1, noIPv6: true})
	b := h.addPort(portOpts{queues: 1, offload: true, noIPv6: true})
	a.pingOK(t, b)
	var rc *net.UDPConn
	var err error
	taptest.InNetNS(t, b.ns, func() { rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: b.ip}) })
	require.NoError(t, err)
	defer rc.Close()
	rc.SetReadBuffer(4 << 20)
	const flows, burst, size = 2, 64, 64
	var fds [flows]int
	for i := range fds {
		taptest.InNetNS(t, a.ns, func() { fds[i], err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0) })
		require.NoError(t, err)
		defer unix.Close(fds[i])
		sa := &unix.SockaddrInet4{Port: rc.LocalAddr().(*net.UDPAddr).Port}
		copy(sa.Addr[:], b.ip)
		require.NoError(t, unix.Connect(fds[i], sa))
	}
	// Datagram k of flow f: size bytes (the last of each burst shorter), f and k first.
	iovs := make([]unix.Iovec, burst)
	msgs := make([]unix.Mmsghdr, burst)
	next := [flows]uint32{}
	buf := make([]byte, 65536)
	// merged reads the coalescing counter under the queue's busy lock: a run's datagrams can
	// reach the socket before the flush that wrote them has counted them, never after it let go.
	merged := func() uint64 {
		qq := b.ep.qs.Load().q[0]
		qq.busy.Lock()
		defer qq.busy.Unlock()
		return qq.stats.rxCoalesced.Load()
	}
	round := func(what string) {
		t.Helper()
		for f := range flows {
			for k := range burst {
				n := size
				if k == burst-1 {
					n = size / 2
				}
				p := make([]byte, n)
				binary.BigEndian.PutUint32(p, uint32(f))
				binary.BigEndian.PutUint32(p[4:], next[f]+uint32(k))
				for i := 8; i < n; i++ {
					p[i] = byte(int(next[f]) + k + i)
				}
				iovs[k].Base = &p[0]
				iovs[k].SetLen(n)
				msgs[k].Hdr.Iov = &iovs[k]
				msgs[k].Hdr.SetIovlen(1)
			}
			sent, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fds[f]), uintptr(unsafe.Pointer(&msgs[0])), burst, 0, 0, 0)
			if e != 0 || sent != burst {
				t.Fatalf("%s: sendmmsg: %d sent, %v", what, sent, e)
			}
		}
		got := [flows]int{}
		for range flows * burst {
			rc.SetReadDeadline(time.Now().Add(5 * time.Second))
			m, err := rc.Read(buf)
			require.NoError(t, err, "%s: received %v of %d datagrams per flow", what, got, burst)
			f := binary.BigEndian.Uint32(buf)
			require.GreaterOrEqual(t, m, 8, "%s: a datagram of %d bytes, flow %d", what, m, f)
			require.Less(t, f, uint32(flows), "%s: a datagram of %d bytes, flow %d", what, m, f)
			k := int(binary.BigEndian.Uint32(buf[4:]) - next[f])
			want := size
			if k == burst-1 {
				want = size / 2
			}
			require.Equal(t, got[f], k, "%s, flow %d: datagram %d of %d bytes, want %d of %d", what, f, k, m, got[f], want)
			require.Equal(t, want, m, "%s, flow %d: datagram %d of %d bytes, want %d of %d", what, f, k, m, got[f], want)
			for i := 8; i < m; i++ {
				require.Equal(t, byte(int(next[f])+k+i), buf[i], "%s, flow %d: datagram %d differs at byte %d", what, f, k, i)
			}
			got[f]++
		}
		for f := range next {
			next[f] += burst
		}
	}
	require.False(t, b.ep.UDPGRO(), "UDP GRO on by default")
	for range 10 {
		round("UDP GRO off")
	}
	require.Equal(t, uint64(0), merged(), "UDP GRO off: datagrams coalesced")
	b.ep.SetUDPGRO(true)
	for r := 0; merged() == 0; r++ {
		require.NotEqual(t, 50, r, "no datagram was coalesced in 50 bursts")
		round(fmt.Sprintf("UDP GRO on, round %d", r))
	}
	on := merged()
	b.ep.SetUDPGRO(false)
	for range 10 {
		round("UDP GRO off again")
	}
	n := merged()
	assert.Equal(t, on, n, "UDP GRO off again: %d more datagrams coalesced", n-on)
	s := b.ep.Stats()[0]
	assert.Equal(t, uint64(0), s.RxWriteErrors, "b: %d TAP write errors", s.RxWriteErrors)
	t.Logf("%d datagrams coalesced", on)
}

// udpDatagramFor returns a UDP datagram with valid checksums from src to dst (10.77.0.x addresses),
// from port 40000 to port.
func udpDatagramFor(dst, src *testPort, id uint16, port int, payload []byte) []byte {
	f := ipv4FrameFor(dst, src, id, 17, 8+len(payload))
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], uint16(port))
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], payload)
	binary.BigEndian.PutUint16(udp[6:], l4Checksum(src, dst, 17, udp))
	return f
}

// TestUSORefused is the fallback for a TAP that refuses USO superframes (a kernel whose tun
// takes no VIRTIO_NET_HDR_GSO_UDP_L4): the run's datagrams reach the TAP one by one, each whole,
// and the queue coalesces no UDP afterwards.
func TestUSORefused(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 1, noIPv6: true})
	b := h.addPort(portOpts{queues: 1, offload: true, noIPv6: true})
	a.pingOK(t, b)
	var rc *net.UDPConn
	var err error
	taptest.InNetNS(t, b.ns, func() { rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: b.ip}) })
	require.NoError(t, err)
	defer rc.Close()
	port := rc.LocalAddr().(*net.UDPAddr).Port
	qq := b.ep.qs.Load().q[0]
	qq.busy.Lock()
	if qq.uco == nil {
		qq.busy.Unlock()
		t.Fatal("a TAP with USO offloads, but no UDP coalescing")
	}
	var frames [][]byte
	for i := range 5 {
		f := udpDatagramFor(b, a, uint16(100+i), port, []byte{byte(i), 1, 2, 3, 4, 5, 6, 7})
		if !qq.uco.Add(f) {
			qq.busy.Unlock()
			t.Fatalf("datagram %d refused", i)
		}
		frames = append(frames, f)
	}
	if _, n := qq.uco.Flush(); n != len(frames) {
		qq.busy.Unlock()
		t.Fatalf("a run of %d", n)
	}
	qq.usoRefused(qq.uco.Frames())
	off := qq.uco == nil
	qq.busy.Unlock()
	assert.True(t, off, "UDP coalescing still on after the TAP refused a superframe")
	buf := make([]byte, 2048)
	for i := range frames {
		rc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := rc.Read(buf)
		require.NoError(t, err, "datagram %d", i)
		require.Equal(t, 8, n, "datagram %d: %d bytes %x", i, n, buf[:n])
		require.Equal(t, byte(i), buf[0], "datagram %d: %d bytes %x", i, n, buf[:n])
	}
	s := b.ep.Stats()[0]
	assert.Equal(t, uint64(0), s.RxWriteErrors, "%d TAP write errors", s.RxWriteErrors)
}
