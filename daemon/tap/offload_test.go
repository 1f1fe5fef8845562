package tap

import (
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/offload"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOffload opens a TAP with offloads: the kernel marks it vnet_hdr, accepts at least
// checksum and TCP segmentation offload, and hands over a UDP_SEGMENT send as one USO
// superframe (where it accepted USO) or as datagrams with partial checksums, each behind a
// virtio header. A persistent TAP re-attached after a restart gets the same offloads.
func TestOffload(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mo")
	d := openTest(t, Config{Name: name, Queues: 1, NetNS: ns, Offload: true, Persistent: true})
	l, _ := taptest.ShowLink(t, ns, name)
	require.True(t, l.LinkInfo.Data.VnetHdr, "link info %+v, VnetHdr %v: want vnet_hdr", l.LinkInfo.Data, d.VnetHdr())
	require.True(t, d.VnetHdr(), "link info %+v, VnetHdr %v: want vnet_hdr", l.LinkInfo.Data, d.VnetHdr())
	got := d.Offloads()
	want := uint(OffloadCsum | OffloadTSO4 | OffloadTSO6 | OffloadTSOECN)
	require.Equal(t, want, got&want, "offloads %s, want at least %s", OffloadString(got), OffloadString(want))
	t.Logf("offloads: %s", OffloadString(got))

	taptest.IP(t, ns, "addr", "add", "10.99.0.1/24", "dev", name)
	taptest.IP(t, ns, "link", "set", name, "up")
	taptest.IP(t, ns, "neigh", "add", "10.99.0.2", "lladdr", "02:00:00:00:00:02", "dev", name, "nud", "permanent")
	payload := make([]byte, 5000)
	var err error
	taptest.InNetNS(t, ns, func() {
		var c *net.UDPConn
		if c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 99, 0, 2), Port: 9}); err != nil {
			return
		}
		defer c.Close()
		rc, _ := c.SyscallConn()
		rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 1000) })
		if err == nil {
			_, err = c.Write(payload)
		}
	})
	require.NoError(t, err)
	q := d.Queue(0)
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, VnetHdrLen+offload.MaxFrameLen)
	var frames []offload.Header
	bytes := 0
	for bytes < len(payload) {
		n, err := readWait(q, buf, deadline)
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "read %d of %d UDP bytes from the TAP", bytes, len(payload))
		require.NoError(t, err)
		f := buf[VnetHdrLen:n]
		// IPv4, UDP, to port 9; IPv6 chatter and ARP are skipped.
		if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 || binary.BigEndian.Uint16(f[36:]) != 9 {
			continue
		}
		var h offload.Header
		require.NoError(t, h.Decode(buf[:n]))
		assert.NotEqual(t, uint8(0), h.Flags&offload.FlagNeedsCsum, "UDP frame with header %+v: want a partial checksum at 34+6", h)
		assert.Equal(t, uint16(34), h.CsumStart, "UDP frame with header %+v: want a partial checksum at 34+6", h)
		assert.Equal(t, uint16(6), h.CsumOffset, "UDP frame with header %+v: want a partial checksum at 34+6", h)
		frames = append(frames, h)
		bytes += len(f) - 42
	}
	if got&OffloadUSO4 != 0 {
		if len(frames) != 1 || frames[0].GSOType != offload.GSOUDPL4 || frames[0].GSOSize != 1000 {
			t.Errorf("USO on: headers %+v, want one USO superframe of gso_size 1000", frames)
		}
	} else if len(frames) != 5 || frames[0].GSOType != offload.GSONone {
		t.Errorf("USO off: headers %+v, want 5 datagrams", frames)
	}

	// Re-attach, as a restarted manad does.
	require.NoError(t, d.Close())
	d2 := openTest(t, Config{Name: name, Queues: 2, NetNS: ns, Offload: true, Persistent: true})
	if !d2.Reattached() || d2.Offloads() != got {
		t.Errorf("re-attached %v with offloads %s, want %s", d2.Reattached(), OffloadString(d2.Offloads()), OffloadString(got))
	}
	l, _ = taptest.ShowLink(t, ns, name)
	assert.True(t, l.LinkInfo.Data.VnetHdr, "re-attached TAP lost vnet_hdr")

	// Re-attached without offloads, the TAP hands over plain frames again: the UDP_SEGMENT
	// send arrives as five datagrams of 1042 bytes, no header in front.
	require.NoError(t, d2.Close())
	d3 := openTest(t, Config{Name: name, Queues: 1, NetNS: ns, Persistent: true})
	if l, _ := taptest.ShowLink(t, ns, name); l.LinkInfo.Data.VnetHdr || d3.Offloads() != 0 || d3.VnetHdr() {
		t.Errorf("re-attached without offloads: vnet_hdr %v, offloads %s", l.LinkInfo.Data.VnetHdr, OffloadString(d3.Offloads()))
	}
	taptest.InNetNS(t, ns, func() {
		var c *net.UDPConn
		if c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 99, 0, 2), Port: 9}); err != nil {
			return
		}
		defer c.Close()
		rc, _ := c.SyscallConn()
		rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 1000) })
		if err == nil {
			_, err = c.Write(payload)
		}
	})
	require.NoError(t, err)
	q = d3.Queue(0)
	deadline = time.Now().Add(5 * time.Second)
	for n := 0; n < 5; {
		m, err := readWait(q, buf, deadline)
		require.NoError(t, err, "after %d datagrams", n)
		f := buf[:m]
		if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 || binary.BigEndian.Uint16(f[36:]) != 9 {
			continue
		}
		require.Equal(t, 1042, m, "datagram %d is a %d-byte frame, want 1042", n, m)
		n++
	}
}
