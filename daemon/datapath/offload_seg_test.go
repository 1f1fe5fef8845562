package datapath

import (
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/offload"
	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// segPort is the TCP destination port of the superframes these tests inject; segXDP acts only on
// those, so stray frames (ARP) do not disturb the counts.
const segPort = 9

// segXDP is an XDP program that records the TCP sequence number and length of every frame to
// segPort and returns verdict for it (for XDP_TX it swaps the MAC addresses first, as a
// reflector does); other frames pass.
type segXDP struct {
	verdict vnic.XDPAction
	mu      sync.Mutex
	seqs    []uint32
	lens    []int
}

func (x *segXDP) Name() string { return "segments" }

func (x *segXDP) Run(_ int, buf []byte, data, end int) (vnic.XDPAction, int, int, error) {
	f := buf[data:end]
	if len(f) < 54 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 6 || binary.BigEndian.Uint16(f[36:]) != segPort {
		return vnic.XDPPass, data, end, nil
	}
	x.mu.Lock()
	x.seqs = append(x.seqs, binary.BigEndian.Uint32(f[38:]))
	x.lens = append(x.lens, len(f))
	x.mu.Unlock()
	if x.verdict == vnic.XDPTx {
		var mac [6]byte
		copy(mac[:], f[0:6])
		copy(f[0:6], f[6:12])
		copy(f[6:12], mac[:])
	}
	return x.verdict, data, end, nil
}

func (x *segXDP) seen() ([]uint32, []int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.seqs), slices.Clone(x.lens)
}

// sendSuperframe writes one TCP superframe of segs×mss payload bytes from src to dst through an
// AF_PACKET socket with PACKET_VNET_HDR on src's TAP: the kernel passes it to the TAP as one GSO
// skb (the TAP has TSO), and manad reads it as one superframe with its virtio header.
func sendSuperframe(t *testing.T, src, dst *testPort, seq uint32, segs, mss int) {
	t.Helper()
	sendSuperframeFlags(t, src, dst, seq, segs, mss, 0x10)
}

// sendSuperframeFlags is sendSuperframe with the given TCP flags (sendSuperframe's are ACK).
func sendSuperframeFlags(t *testing.T, src, dst *testPort, seq uint32, segs, mss int, flags byte) {
	t.Helper()
	f := tcpFrameFor(dst, src, 1, seq, segs*mss)
	binary.BigEndian.PutUint16(f[36:], segPort)
	f[47] = flags
	// A partial checksum, as the stack leaves it for TSO: the pseudo-header sum, not inverted.
	var ps uint32
	for i := 26; i < 34; i += 2 {
		ps += uint32(binary.BigEndian.Uint16(f[i:]))
	}
	ps += 6 + uint32(len(f)-34)
	for ps > 0xffff {
		ps = ps&0xffff + ps>>16
	}
	binary.BigEndian.PutUint16(f[50:], uint16(ps))
	hdr := make([]byte, 10) // struct virtio_net_hdr
	hdr[0], hdr[1] = offload.FlagNeedsCsum, offload.GSOTCPv4
	binary.LittleEndian.PutUint16(hdr[2:], 54)
	binary.LittleEndian.PutUint16(hdr[4:], uint16(mss))
	binary.LittleEndian.PutUint16(hdr[6:], 34)
	binary.LittleEndian.PutUint16(hdr[8:], 16)
	var fd int
	var err error
	taptest.InNetNS(t, src.ns, func() {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	})
	require.NoError(t, err, "AF_PACKET socket")
	defer unix.Close(fd)
	require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1), "PACKET_VNET_HDR")
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: src.dev.Index()}
	require.NoError(t, unix.Sendto(fd, append(hdr, f...), 0, sa), "send the superframe")
}

// txOffloadTotals sums p's superframes, bad virtio headers and oversize frames over its queues.
func txOffloadTotals(p *testPort) (super, bad, oversize uint64) {
	for _, q := range p.ep.Stats() {
		super += q.TxSuperframes
		bad += q.TxBadVnetHdr
		oversize += q.TxOversize
	}
	return super, bad, oversize
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func sum(v []uint64) (s uint64) {
	for _, x := range v {
		s += x
	}
	return s
}

// waitFor polls cond until it holds, failing after 10 s (a deadlock guard, not a measurement).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestXDPSeesEverySegment sends TCP superframes out of a port with offloads to a port running an
// XDP program: the program runs on every wire frame the superframe became — the segments in
// order, each within the MTU — whether it drops them or sends them back (XDP_TX), and the
// reflected segments reach the sender's TAP (coalesced again there).
func TestXDPSeesEverySegment(t *testing.T) {
	const segs, mss = 10, 1000
	for _, verdict := range []vnic.XDPAction{vnic.XDPDrop, vnic.XDPTx} {
		t.Run(verdict.String(), func(t *testing.T) {
			h := newHarness(t)
			a := h.addPort(portOpts{queues: 1, offload: true, noIPv6: true})
			b := h.addPort(portOpts{queues: 1, noIPv6: true})
			x := &segXDP{verdict: verdict}
			h.locked(func() {
				require.NoError(t, b.port.SetXDP(x))
			})
			a.pingOK(t, b) // the switch learns both MACs
			superBefore := a.ep.Stats()[0].TxSuperframes
			aRxBefore, _ := a.queueStats("packets")
			sendSuperframe(t, a, b, 5000, segs, mss)
			waitFor(t, "the program to see every segment", func() bool { s, _ := x.seen(); return len(s) >= segs })
			seqs, lens := x.seen()
			require.Len(t, seqs, segs, "the program saw %d frames, want %d", len(seqs), segs)
			for i := range seqs {
				assert.Equal(t, 5000+uint32(i*mss), seqs[i], "frame %d: seq", i)
				assert.Equal(t, 54+mss, lens[i], "frame %d: bytes", i)
			}
			n := a.ep.Stats()[0].TxSuperframes - superBefore
			assert.Equal(t, uint64(1), n, "a counted %d superframes, want 1", n)
			if verdict == vnic.XDPTx {
				waitFor(t, "the reflected segments to reach a", func() bool {
					rx, _ := a.queueStats("packets")
					return sum(rx)-sum(aRxBefore) >= segs
				})
			}
		})
	}
}

// TestOffloadJumbo4K carries TCP at MTU 9000 between two ports with offloads on 4K pages, where
// a 9000-byte frame takes a buffer of several pages: the kernels' superframes are cut into
// 9000-byte segments, none is too long for the RX buffers, and the streams arrive intact.
func TestOffloadJumbo4K(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{offload: true, pageSize: 4096, mtu: 9000})
	b := h.addPort(portOpts{offload: true, pageSize: 4096, mtu: 9000})
	a.pingOK(t, b)
	tcpTransfer(t, a, b, 4, 4<<20)
	tcpTransfer(t, b, a, 2, 2<<20)
	for _, p := range []*testPort{a, b} {
		super, bad, oversize := txOffloadTotals(p)
		assert.NotEqual(t, uint64(0), super, "port %s: %d superframes, %d bad virtio headers, %d oversize: want superframes only", p.name, super, bad, oversize)
		assert.Equal(t, uint64(0), bad, "port %s: %d superframes, %d bad virtio headers, %d oversize: want superframes only", p.name, super, bad, oversize)
		assert.Equal(t, uint64(0), oversize, "port %s: %d superframes, %d bad virtio headers, %d oversize: want superframes only", p.name, super, bad, oversize)
		n := p.port.NetdevStats().RxOversize
		assert.Equal(t, uint64(0), n, "port %s: %d frames too long for the RX buffers", p.name, n)
		rxp, _ := p.queueStats("packets")
		rxb, _ := p.queueStats("bytes")
		if assert.NotEqual(t, uint64(0), sum(rxp), "port %s: no frames received: the MTU of 9000 was not used", p.name) {
			assert.GreaterOrEqual(t, sum(rxb)/sum(rxp), uint64(1500), "port %s: %d frames of %d bytes on average: the MTU of 9000 was not used", p.name, sum(rxp), sum(rxb)/sum(rxp))
		}
	}
}

// TestMalformedVnetHeader hands the TX path frames whose virtio header does not fit them, as a
// buggy or hostile kernel path could: each is dropped and counted as a bad virtio header, and
// nothing of it reaches the port (the queue has none: reaching it would panic).
func TestMalformedVnetHeader(t *testing.T) {
	good := func() (offload.Header, []byte) {
		a := &testPort{mac: []byte{2, 0, 0, 0, 0, 1}, ip: []byte{10, 0, 0, 1}}
		b := &testPort{mac: []byte{2, 0, 0, 0, 0, 2}, ip: []byte{10, 0, 0, 2}}
		return offload.Header{Flags: offload.FlagNeedsCsum, GSOType: offload.GSOTCPv4, HdrLen: 54, GSOSize: 1000,
			CsumStart: 34, CsumOffset: 16}, tcpFrameFor(b, a, 1, 1, 3000)
	}
	for _, tc := range []struct {
		name string
		bad  func(h *offload.Header, f []byte) []byte
		want offload.Reason
	}{
		{"unknown gso_type", func(h *offload.Header, f []byte) []byte { h.GSOType = 7; return f }, offload.ErrUnknownGSOType},
		{"UFO", func(h *offload.Header, f []byte) []byte { h.GSOType = offload.GSOUDP; return f }, offload.ErrUnsupportedGSO},
		{"gso_size 0", func(h *offload.Header, f []byte) []byte { h.GSOSize = 0; return f }, offload.ErrGSOSizeZero},
		{"csum past the end", func(h *offload.Header, f []byte) []byte { h.CsumStart = 4000; return f }, offload.ErrCsumPastEnd},
		{"csum not at L4", func(h *offload.Header, f []byte) []byte { h.CsumStart = 30; return f }, offload.ErrCsumMismatch},
		{"TCPv6 on IPv4", func(h *offload.Header, f []byte) []byte { h.GSOType = offload.GSOTCPv6; return f }, offload.ErrProtoMismatch},
		{"truncated", func(h *offload.Header, f []byte) []byte { return f[:100] }, offload.ErrMalformed},
		{"hdr_len past the frame", func(h *offload.Header, f []byte) []byte { h.HdrLen = 9000; return f }, offload.ErrHdrLenPastFrame},
		{"too many segments", func(h *offload.Header, f []byte) []byte { h.GSOSize = 1; return f }, offload.ErrTooManySegments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, f := good()
			f = tc.bad(&h, f)
			// The segmenter's own verdict, so the case tests what it means to.
			_, err := offload.NewSegmenter().Plan(&h, f)
			require.ErrorIs(t, err, tc.want, "Plan")
			b := make([]byte, offload.HeaderLen+len(f))
			h.Encode(b)
			copy(b[offload.HeaderLen:], f)
			qq := &queue{seg: offload.NewSegmenter()}
			qq.transmitOffload(b)
			assert.Equal(t, uint64(1), qq.stats.txBadVnet.Load(), "bad virtio header drops")
			n := qq.stats.txSuperframes.Load()
			assert.Equal(t, uint64(0), n, "superframes = %d, want 0", n)
		})
	}
}

// TestSetOffload turns a running port's offloads off and on again (the seam for ethtool -K):
// the TAP keeps its ifindex and address, the port stays open, TCP both ways keeps arriving
// intact, superframes stop while the offloads are off and come back after, and the counters
// survive the queues' replacement.
func TestSetOffload(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 2, offload: true})
	b := h.addPort(portOpts{queues: 2, offload: true})
	a.pingOK(t, b)
	tcpTransfer(t, a, b, 2, 2<<20)
	superframes := func() uint64 { s, _, _ := txOffloadTotals(a); return s }
	idx := a.dev.Index()
	s0 := superframes()
	require.NotEqual(t, uint64(0), s0, "no superframes with offloads on")
	for _, on := range []bool{false, true} {
		var err error
		h.locked(func() { err = a.ep.SetOffload(on) })
		require.NoError(t, err, "SetOffload(%v)", on)
		require.Equal(t, on, a.dev.VnetHdr(), "after SetOffload(%v): vnet header %v, offloads %s, ifindex %d (was %d), %d queues", on, a.dev.VnetHdr(), tap.OffloadString(a.dev.Offloads()), a.dev.Index(), idx, a.dev.NumQueues())
		require.Equal(t, on, a.dev.Offloads() != 0, "after SetOffload(%v): vnet header %v, offloads %s, ifindex %d (was %d), %d queues", on, a.dev.VnetHdr(), tap.OffloadString(a.dev.Offloads()), a.dev.Index(), idx, a.dev.NumQueues())
		require.Equal(t, idx, a.dev.Index(), "after SetOffload(%v): vnet header %v, offloads %s, ifindex %d (was %d), %d queues", on, a.dev.VnetHdr(), tap.OffloadString(a.dev.Offloads()), a.dev.Index(), idx, a.dev.NumQueues())
		require.Equal(t, 2, a.dev.NumQueues(), "after SetOffload(%v): vnet header %v, offloads %s, ifindex %d (was %d), %d queues", on, a.dev.VnetHdr(), tap.OffloadString(a.dev.Offloads()), a.dev.Index(), idx, a.dev.NumQueues())
		require.True(t, a.state().Running, "port down after SetOffload(%v)", on)
		before := superframes()
		require.GreaterOrEqual(t, before, s0, "superframe counter went back from %d to %d", s0, before)
		a.pingOK(t, b)
		tcpTransfer(t, a, b, 2, 2<<20)
		tcpTransfer(t, b, a, 2, 2<<20)
		got := superframes() - before
		assert.Equal(t, on, got != 0, "offloads %v: %d superframes", on, got)
	}
}
