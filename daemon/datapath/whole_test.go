package datapath

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/offload"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedGSOLog is a gsoLog the TX goroutine writes while the test reads it.
type lockedGSOLog struct {
	mu sync.Mutex
	gsoLog
}

func (l *lockedGSOLog) tx(f []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gsoLog.tx(f)
}

func (l *lockedGSOLog) gso(iov [][]byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gsoLog.gso(iov)
}

func (l *lockedGSOLog) take() []gsoWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes
	l.writes = nil
	return w
}

// portStat returns the port's ETH_SS_STATS value called name.
func (tp *testPort) portStat(t *testing.T, name string) uint64 {
	t.Helper()
	var names []string
	var vals []uint64
	tp.h.locked(func() {
		names = vnic.StatNames(tp.port.Settings().Queues)
		vals = tp.port.Stats()
	})
	for i, n := range names {
		if n == name {
			return vals[i]
		}
	}
	t.Fatalf("no statistic %s", name)
	return 0
}

// remoteStation is the station behind the uplink in these tests.
var remoteStation = &testPort{mac: mac(9), ip: net.IPv4(10, 77, 0, 9).To4()}

// TestSuperframeLeavesUplinkWhole: a TCP superframe a port's TAP hands over, to a station behind
// an uplink with GSO writes, goes out as it came, one GSO write with the port's segment size;
// the port's hc_tx_* counters and the uplink's count the wire frames it stands for, as if they
// had been cut. A superframe whose segments exceed the uplink's MTU is cut, and every frame
// dropped and counted as one that comes alone.
func TestSuperframeLeavesUplinkWhole(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{offload: true, queues: 1, noIPv6: true})
	dev := &lockedGSOLog{}
	u := h.seg.AttachUplink("vx0", dev.tx)
	defer u.Detach()
	u.SetMTU(1500)
	u.SetUp(true)
	u.SetTxGSO(dev.gso)
	u.Receive(frame(a.mac, remoteStation.mac, 1)) // the station is behind the uplink
	const segs, mss = 10, 1000
	wire := uint64(segs*54 + segs*mss)
	txBytes, txUcast := a.portStat(t, "hc_tx_bytes"), a.portStat(t, "hc_tx_ucast_pkts")

	sendSuperframe(t, a, remoteStation, 5000, segs, mss)
	waitFor(t, "the superframe to leave the uplink", func() bool { return u.Stats().TxFrames >= segs })
	ws := dev.take()
	require.Len(t, ws, 1, "%d writes, want the superframe as one", len(ws))
	w := ws[0]
	require.True(t, w.gso, "write: gso %v, header %+v, %d bytes; want the TCPv4 superframe whole", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint8(offload.GSOTCPv4), w.hdr.GSOType, "write: gso %v, header %+v, %d bytes; want the TCPv4 superframe whole", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint16(mss), w.hdr.GSOSize, "write: gso %v, header %+v, %d bytes; want the TCPv4 superframe whole", w.gso, w.hdr, len(w.frame))
	require.NotEqual(t, uint8(0), w.hdr.Flags&offload.FlagNeedsCsum, "write: gso %v, header %+v, %d bytes; want the TCPv4 superframe whole", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint16(54), w.hdr.HdrLen, "write: gso %v, header %+v, %d bytes; want the TCPv4 superframe whole", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint16(34), w.hdr.CsumStart, "write: gso %v, header %+v, %d bytes; want the TCPv4 superframe whole", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint16(16), w.hdr.CsumOffset, "write: gso %v, header %+v, %d bytes; want the TCPv4 superframe whole", w.gso, w.hdr, len(w.frame))
	require.Equal(t, 54+segs*mss, len(w.frame), "write: gso %v, header %+v, %d bytes; want the TCPv4 superframe whole", w.gso, w.hdr, len(w.frame))
	seq := binary.BigEndian.Uint32(w.frame[38:])
	require.Equal(t, uint32(5000), seq, "superframe: seq %d, addresses % x", seq, w.frame[:12])
	require.Equal(t, append(append([]byte(nil), remoteStation.mac...), a.mac...), w.frame[:12], "superframe: seq %d, addresses % x", seq, w.frame[:12])
	st := u.Stats()
	require.Equal(t, uint64(1), st.TxWhole, "uplink stats %+v, want TxWhole 1, TxAggregates 1, TxFrames %d, TxBytes %d", st, segs, wire)
	require.Equal(t, uint64(1), st.TxAggregates, "uplink stats %+v, want TxWhole 1, TxAggregates 1, TxFrames %d, TxBytes %d", st, segs, wire)
	require.Equal(t, uint64(segs), st.TxFrames, "uplink stats %+v, want TxWhole 1, TxAggregates 1, TxFrames %d, TxBytes %d", st, segs, wire)
	require.Equal(t, wire, st.TxBytes, "uplink stats %+v, want TxWhole 1, TxAggregates 1, TxFrames %d, TxBytes %d", st, segs, wire)
	require.Equal(t, uint64(0), st.TxErrors, "uplink stats %+v, want TxWhole 1, TxAggregates 1, TxFrames %d, TxBytes %d", st, segs, wire)
	assert.Equal(t, uint64(segs), a.portStat(t, "hc_tx_ucast_pkts")-txUcast, "hc_tx_ucast_pkts +")
	assert.Equal(t, wire, a.portStat(t, "hc_tx_bytes")-txBytes, "hc_tx_bytes +")
	if n := a.portStat(t, "tx_0_tso_packets"); n != 1 {
		t.Errorf("tx_0_tso_packets %d, want 1", n)
	}

	// Segments of 20+20+1000 bytes beyond an MTU of 1000: cut, and each dropped.
	u.SetMTU(1000)
	sendSuperframe(t, a, remoteStation, 20000, segs, mss)
	waitFor(t, "the second superframe's frames to be dropped", func() bool { return u.Stats().TxMTUDrops >= segs })
	st = u.Stats()
	require.Equal(t, uint64(1), st.TxWhole, "uplink stats %+v after a superframe beyond the MTU, want TxWhole 1, TxMTUDrops %d", st, segs)
	require.Equal(t, uint64(segs), st.TxMTUDrops, "uplink stats %+v after a superframe beyond the MTU, want TxWhole 1, TxMTUDrops %d", st, segs)
	require.Equal(t, uint64(segs), st.TxFrames, "uplink stats %+v after a superframe beyond the MTU, want TxWhole 1, TxMTUDrops %d", st, segs)
	n := len(dev.take())
	require.Equal(t, 0, n, "%d writes of a superframe beyond the MTU", n)
}

// TestAggregateReachesPortWhole: a TCP aggregate an uplink's device hands over reaches a port
// whose TAP takes superframes as one (offload.Aggregate's header: TestAggregateIsTheCoalesced-
// Superframe): the port's kernel counts one packet and takes it as the segments it stands for
// (the reset it answers the connection-less segment with acknowledges every byte). The port's
// RX counters and the uplink's count the wire frames. Aggregates the segment cannot hand over
// so are refused, nothing counted.
func TestAggregateReachesPortWhole(t *testing.T) {
	h := newHarness(t)
	b := h.addPort(portOpts{offload: true, queues: 1, noIPv6: true})
	dev := &lockedGSOLog{}
	u := h.seg.AttachUplink("vx0", dev.tx)
	defer u.Detach()
	u.SetMTU(1500)
	u.SetUp(true)
	// The port's answer goes straight to the station.
	taptest.IP(t, b.ns, "neigh", "replace", remoteStation.ip.String(), "lladdr", remoteStation.mac.String(), "dev", "eth0")
	b.ep.Send(0, frame(remoteStation.mac, b.mac, 1)) // the segment learns the port's address
	dev.take()
	const segs, mss, seq = 10, 1000, 7000
	wire := uint64(segs*54 + segs*mss)
	rxBytes, rxUcast := b.portStat(t, "hc_rx_bytes"), b.portStat(t, "hc_rx_ucast_pkts")
	before, _ := taptest.ShowLink(t, b.ns, "eth0")

	f := tcpFrameFor(b, remoteStation, 1, seq, segs*mss)
	f[47] = 0x08                               // PSH alone: the reset acknowledges what it got (tcp_v4_send_reset)
	binary.BigEndian.PutUint16(f[50:], 0x1234) // a checksum nobody computed, as for a TSO aggregate
	require.True(t, u.ReceiveWhole(f, offload.GSOTCPv4, mss, 1500), "the port did not take the aggregate whole")
	st := u.Stats()
	require.Equal(t, uint64(1), st.RxWhole, "uplink stats %+v, want RxWhole 1, RxFrames %d, RxBytes %d", st, segs, wire)
	require.Equal(t, uint64(segs), st.RxFrames, "uplink stats %+v, want RxWhole 1, RxFrames %d, RxBytes %d", st, segs, wire)
	require.Equal(t, wire, st.RxBytes, "uplink stats %+v, want RxWhole 1, RxFrames %d, RxBytes %d", st, segs, wire)
	assert.Equal(t, uint64(segs), b.portStat(t, "hc_rx_ucast_pkts")-rxUcast, "hc_rx_ucast_pkts +")
	assert.Equal(t, wire, b.portStat(t, "hc_rx_bytes")-rxBytes, "hc_rx_bytes +")
	qs := b.ep.Stats()
	assert.Equal(t, uint64(segs-1), qs[0].RxCoalesced, "RxCoalesced")
	after, _ := taptest.ShowLink(t, b.ns, "eth0")
	d := after.Stats64.RX.Packets - before.Stats64.RX.Packets
	assert.Equal(t, uint64(1), d, "the TAP received %d packets, want the aggregate as 1", d)
	waitFor(t, "the port's reset", func() bool {
		for _, w := range dev.take() {
			r := w.frame
			if len(r) >= 54 && r[23] == 6 && r[47]&0x04 != 0 {
				ack := binary.BigEndian.Uint32(r[42:])
				require.Equal(t, uint32(seq+segs*mss), ack, "the reset acknowledges %d, want %d (every byte of the aggregate)", ack, seq+segs*mss)
				return true
			}
		}
		return false
	})

	// A station the segment does not know, and a segment size beyond the MTU: refused,
	// nothing counted.
	f = tcpFrameFor(b, remoteStation, 2, seq, segs*mss)
	assert.False(t, u.ReceiveWhole(f, offload.GSOTCPv4, 1461, 1500), "an aggregate with segments beyond the MTU was taken whole")
	copy(f[0:6], mac(77))
	assert.False(t, u.ReceiveWhole(f, offload.GSOTCPv4, mss, 1500), "an aggregate to an unknown station was taken whole")
	st = u.Stats()
	require.Equal(t, uint64(1), st.RxWhole, "uplink stats %+v after refusals, want them unchanged", st)
	require.Equal(t, uint64(segs), st.RxFrames, "uplink stats %+v after refusals, want them unchanged", st)
}

// resetWatcher reads the frames p's TAP receives (an AF_PACKET socket in p's namespace) and
// reports the acknowledgement numbers of the TCP resets among them.
type resetWatcher struct{ fd int }

func watchResets(t *testing.T, p *testPort) *resetWatcher {
	t.Helper()
	var fd int
	var err error
	taptest.InNetNS(t, p.ns, func() {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
	})
	require.NoError(t, err, "AF_PACKET socket")
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: p.dev.Index()}), "bind")
	tv := unix.Timeval{Usec: 100_000}
	require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv))
	return &resetWatcher{fd: fd}
}

// waitAck waits up to 10 s for a reset that acknowledges ack.
func (w *resetWatcher) waitAck(t *testing.T, ack uint32) {
	t.Helper()
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(w.fd, buf, 0)
		if err != nil {
			continue // the receive timeout
		}
		r := buf[:n]
		if n >= 54 && r[23] == 6 && r[47]&0x04 != 0 && binary.BigEndian.Uint32(r[42:]) == ack {
			return
		}
	}
	t.Fatalf("no reset acknowledging %d", ack)
}

// TestSuperframeReachesPortWhole: a TCP superframe a port's TAP hands over, to a port whose TAP
// takes superframes, reaches that TAP as one packet without being cut: the sender's hc_tx_* and
// the receiver's hc_rx_* and rx_0_packets count the wire frames it stands for, the receiver's
// kernel takes every byte (its reset acknowledges them all), and RxWhole counts it. It is cut,
// and the receiving queue merges the segments again, while a capture runs on the segment (which
// sees every wire frame); and cut and not merged when GRO would not merge its segments (URG).
func TestSuperframeReachesPortWhole(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{offload: true, queues: 1, noIPv6: true})
	b := h.addPort(portOpts{offload: true, queues: 1, noIPv6: true})
	a.pingOK(t, b) // the segment and both neighbour tables learn the addresses
	resets := watchResets(t, a)
	const segs, mss = 10, 1000
	wire := uint64(segs*54 + segs*mss)
	type counts struct{ txUcast, rxUcast, rxBytes, rxPackets, tapPackets, whole, coalesced uint64 }
	read := func() counts {
		link, _ := taptest.ShowLink(t, b.ns, "eth0")
		qs := b.ep.Stats()
		return counts{a.portStat(t, "hc_tx_ucast_pkts"), b.portStat(t, "hc_rx_ucast_pkts"), b.portStat(t, "hc_rx_bytes"),
			b.portStat(t, "rx_0_packets"), link.Stats64.RX.Packets, qs[0].RxWhole, qs[0].RxCoalesced}
	}
	check := func(what string, before counts, whole, coalesced, tapPackets uint64) {
		t.Helper()
		after := read()
		want := counts{before.txUcast + segs, before.rxUcast + segs, before.rxBytes + wire, before.rxPackets + segs,
			before.tapPackets + tapPackets, before.whole + whole, before.coalesced + coalesced}
		assert.Equal(t, want, after, "%s: counters %+v, want %+v (from %+v)", what, after, want, before)
	}

	// PSH alone, no ACK: the reset acknowledges what the kernel got (tcp_v4_send_reset).
	const psh, urg = 0x08, 0x20
	before := read()
	sendSuperframeFlags(t, a, b, 7000, segs, mss, psh)
	waitFor(t, "the superframe to reach the port whole", func() bool { return b.ep.Stats()[0].RxWhole > before.whole })
	resets.waitAck(t, 7000+segs*mss)
	check("whole", before, 1, segs-1, 1)

	// A capture on the segment: the superframe is cut, the capture sees its frames, the port
	// merges them again.
	c, err := h.seg.Capture(CaptureConfig{})
	require.NoError(t, err)
	before = read()
	sendSuperframeFlags(t, a, b, 20000, segs, mss, psh)
	resets.waitAck(t, 20000+segs*mss)
	c.Stop()
	check("with a capture", before, 0, segs-1, 1)
	captured := 0
	for {
		f, ok := c.Poll()
		if !ok {
			break
		}
		if len(f.Data) >= 54 && f.Data[23] == 6 && binary.BigEndian.Uint16(f.Data[36:]) == segPort {
			captured++
		}
	}
	assert.Equal(t, segs, captured, "the capture saw %d frames of the superframe, want %d", captured, segs)

	// URG: GRO does not merge such segments, so neither does the port: cut, each written alone.
	before = read()
	sendSuperframeFlags(t, a, b, 40000, segs, mss, urg|psh)
	resets.waitAck(t, 40000+mss) // each segment gets its own reset; the first one's comes first
	waitFor(t, "every URG segment to reach the TAP", func() bool { return read().tapPackets >= before.tapPackets+segs })
	check("URG", before, 0, 0, segs)
}
