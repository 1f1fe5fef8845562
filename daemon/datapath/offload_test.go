package datapath

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/internal/rrclient"
	"github.com/manad/manad/vnic"
)

// TestOffloadTCP runs TCP both ways between two ports whose TAPs carry virtio headers with TSO
// and checksum offload on: the kernels hand over superframes, which the endpoints cut into
// MTU-sized frames for the wire (each through the receiving port's RX ring like any frame) and
// the streams arrive intact. A port with offloads and one without talk to each other too.
func TestOffloadTCP(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{offload: true})
	b := h.addPort(portOpts{offload: true})
	c := h.addPort(portOpts{})
	a.pingOK(t, b)
	tcpTransfer(t, a, b, 4, 4<<20)
	tcpTransfer(t, b, a, 4, 4<<20)
	tcpTransfer(t, a, c, 2, 2<<20)
	tcpTransfer(t, c, a, 2, 2<<20)
	udpBurst(t, a, b, 500, 1200, 4)
	// Queues attached later carry virtio headers too.
	for _, n := range []int{2, 6} {
		var err error
		h.locked(func() { err = a.ep.SetChannels(n, func() error { return a.port.SetChannels(n) }) })
		require.NoError(t, err, "SetChannels(%d)", n)
		tcpTransfer(t, b, a, 6, 1<<20)
		tcpTransfer(t, a, b, 6, 1<<20)
	}
	for _, p := range []*testPort{a, b} {
		super, bad, oversize := txOffloadTotals(p)
		// The driver's counters: each superframe is one TSO work item.
		_, tso := p.queueStats("tso_packets")
		var tsoSum uint64
		for _, v := range tso {
			tsoSum += v
		}
		assert.GreaterOrEqual(t, tsoSum, super, "port %s: tx tso_packets %v for %d superframes", p.name, tso, super)
		var merged uint64
		for _, q := range p.ep.Stats() {
			merged += q.RxCoalesced
		}
		assert.NotEqual(t, uint64(0), merged, "port %s: no frame coalesced on receive", p.name)
		t.Logf("port %s: %d frames coalesced", p.name, merged)
		assert.NotEqual(t, uint64(0), super, "port %s: %d superframes, %d bad virtio headers, %d oversize: want superframes only", p.name, super, bad, oversize)
		assert.Equal(t, uint64(0), bad, "port %s: %d superframes, %d bad virtio headers, %d oversize: want superframes only", p.name, super, bad, oversize)
		assert.Equal(t, uint64(0), oversize, "port %s: %d superframes, %d bad virtio headers, %d oversize: want superframes only", p.name, super, bad, oversize)
		// Every frame on the wire fits the MTU: none was dropped as oversize on receive.
		n := p.port.NetdevStats().RxOversize
		assert.Equal(t, uint64(0), n, "port %s: %d frames too long for the RX buffers", p.name, n)
		t.Logf("port %s: %d superframes", p.name, super)
	}
	s := c.ep.Stats()
	assert.Equal(t, uint64(0), s[0].TxSuperframes, "a TAP without offloads handed over superframes: %+v", s[0])
	assert.Equal(t, uint64(0), s[0].RxCoalesced, "a TAP without offloads took coalesced frames: %+v", s[0])
}

// tcpFrameFor returns a TCP segment with valid checksums from src to dst (10.77.0.x addresses).
func tcpFrameFor(dst, src *testPort, id uint16, seq uint32, payload int) []byte {
	f := ipv4FrameFor(dst, src, id, 6, 20+payload)
	tcp := f[34:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 9)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12], tcp[13] = 5<<4, 0x10 // ACK
	binary.BigEndian.PutUint16(tcp[14:], 1000)
	binary.BigEndian.PutUint16(tcp[16:], l4Checksum(src, dst, 6, tcp))
	return f
}

// ipv4FrameFor returns an Ethernet frame from src to dst with an IPv4 header (protocol proto,
// ID id, TTL 64, its checksum set) and l4 zero bytes after it, for the caller to fill.
func ipv4FrameFor(dst, src *testPort, id uint16, proto byte, l4 int) []byte {
	f := make([]byte, 14+20+l4)
	copy(f[0:6], dst.mac)
	copy(f[6:12], src.mac)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	binary.BigEndian.PutUint16(ip[4:], id)
	copy(ip[12:16], src.ip)
	copy(ip[16:20], dst.ip)
	binary.BigEndian.PutUint16(ip[10:], rrclient.Checksum(ip))
	return f
}

// l4Checksum returns the TCP or UDP checksum (protocol proto) of segment l4, whose checksum field
// is zero, from src to dst: over the IPv4 pseudo-header and the segment.
func l4Checksum(src, dst *testPort, proto byte, l4 []byte) uint16 {
	ps := make([]byte, 12+len(l4))
	copy(ps, src.ip)
	copy(ps[4:], dst.ip)
	ps[9] = proto
	binary.BigEndian.PutUint16(ps[10:], uint16(len(l4)))
	copy(ps[12:], l4)
	return rrclient.Checksum(ps)
}

// TestCoalescedRunOutsideTXBatch transmits TCP segments into a port with offloads from outside
// any TX goroutine (Port.Transmit called directly): each opens a coalesced run in the receiving
// RX queue, and nothing but the sender can end it, so Send flushes it before returning (or
// leaves it to the flush of a TX batch under way on the same queue, TestDirectSendAcrossBatchEnd).
// Every frame reaches the kernel without another frame to push it out (when the RX queue is
// busy at that moment the frame goes through its input instead, so the test waits rather than
// asking for it at the instant Transmit returns); a segment that continues the flow is merged
// with the run before it only within one send, so here each goes alone. The neighbours are
// static, so that no ARP (b probes a five seconds after its echo reply) adds a frame to b's count.
func TestCoalescedRunOutsideTXBatch(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 1, noIPv6: true})
	b := h.addPort(portOpts{queues: 1, offload: true, noIPv6: true})
	staticNeighbours(t, a, b)
	a.pingOK(t, b)
	before := linkStats(t, b.ns, "eth0").RxPackets
	for i := range 3 {
		require.True(t, a.port.Transmit(0, tcpFrameFor(b, a, uint16(i), uint32(1000+i*100), 100)), "a refused to transmit")
		waitFor(t, fmt.Sprintf("b's TAP to receive frame %d alone", i), func() bool {
			return linkStats(t, b.ns, "eth0").RxPackets-before == uint64(i+1)
		})
	}
	s := b.ep.Stats()[0]
	assert.Equal(t, uint64(0), s.RxCoalesced, "b: %+v", s)
	assert.Equal(t, uint64(0), s.RxWriteErrors, "b: %+v", s)
}

// TestDirectSendAcrossBatchEnd transmits a TCP segment into a port with offloads from outside
// any TX goroutine (Port.Transmit called directly) while a TX batch of the same queue is under
// way, and that batch ends while the segment is in the receiving RX queue: after the sender
// chose to leave its coalesced run to the batch's flush and before the run was opened and
// listed, so that flush finds nothing. The sender must then flush the run itself, or the
// segment waits in it until some other frame comes (none does here: IPv6 off, static
// neighbours). On a loaded machine a direct Transmit met the end of a real batch this way (the
// tail of the batch that carried pingOK's echo request) and TestCoalescedRunOutsideTXBatch
// timed out; here the batch is marked on the sender's queue as txLoop marks it, and an XDP
// program on the receiving port ends it at that instant, from inside the RX queue's processing
// (before the frame is delivered), as queue.endBatch does at the end of every batch.
func TestDirectSendAcrossBatchEnd(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 1, noIPv6: true})
	b := h.addPort(portOpts{queues: 1, offload: true, noIPv6: true})
	qa := a.ep.qs.Load().q[0]
	x := &batchEnder{q: qa}
	h.locked(func() { require.NoError(t, b.port.SetXDP(x)) })
	staticNeighbours(t, a, b)
	a.pingOK(t, b) // the switch learns both MACs
	before := linkStats(t, b.ns, "eth0").RxPackets
	// A batch of a's TX queue 0 under way. a's own TX goroutine may run one meanwhile and clear
	// the clock early: the sender then flushes as outside any batch, and the test still passes.
	qa.clock.Store(h.seg.now())
	require.True(t, a.port.Transmit(0, tcpFrameFor(b, a, 1, 1000, 100)), "a refused to transmit")
	require.True(t, x.ended.Load(), "the XDP program did not see the segment")
	waitFor(t, "b's TAP to receive the segment", func() bool {
		return linkStats(t, b.ns, "eth0").RxPackets-before == 1
	})
	s := b.ep.Stats()[0]
	assert.Equal(t, uint64(0), s.RxWriteErrors, "b: %+v", s)
}

// batchEnder is an XDP program that ends TX queue q's batch (queue.endBatch) when it sees the
// first TCP frame to segPort; every frame passes.
type batchEnder struct {
	q     *queue
	ended atomic.Bool
}

func (x *batchEnder) Name() string { return "batch-ender" }

func (x *batchEnder) Run(_ int, buf []byte, data, end int) (vnic.XDPAction, int, int, error) {
	f := buf[data:end]
	if len(f) >= 54 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && f[23] == 6 && binary.BigEndian.Uint16(f[36:]) == segPort &&
		x.ended.CompareAndSwap(false, true) {
		x.q.endBatch()
	}
	return vnic.XDPPass, data, end, nil
}

// staticNeighbours gives a and b permanent ARP entries for each other: no ARP request, probe or
// reply crosses the wire between them.
func staticNeighbours(t *testing.T, a, b *testPort) {
	t.Helper()
	for _, p := range [][2]*testPort{{a, b}, {b, a}} {
		taptest.IP(t, p[0].ns, "neigh", "replace", p[1].ip.String(), "lladdr", p[1].mac.String(), "nud", "permanent", "dev", "eth0")
	}
}
