package datapath

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// markerType is the EtherType of the test's marker frames (IEEE local experimental).
const markerType = 0x88b5

// markerFrame returns a minimal frame of markerType from src to dst.
func markerFrame(dst, src []byte) []byte {
	f := make([]byte, 60)
	copy(f, dst)
	copy(f[6:], src)
	f[12], f[13] = markerType>>8, markerType&0xff
	copy(f[14:], "manad-marker")
	return f
}

func isMarker(f []byte) bool {
	return len(f) >= 26 && f[12] == markerType>>8 && f[13] == markerType&0xff && bytes.Equal(f[14:26], []byte("manad-marker"))
}

// gateXDP is an XDP program that passes everything and counts marker frames; with entered set
// it holds the RX queue on the first marker until release is closed, the way a slow frame
// keeps NAPI busy.
type gateXDP struct {
	entered chan struct{}
	release chan struct{}
	seen    atomic.Int32
}

func (g *gateXDP) Name() string { return "gate" }

func (g *gateXDP) Run(_ int, buf []byte, data, end int) (vnic.XDPAction, int, int, error) {
	if isMarker(buf[data:end]) {
		if g.seen.Add(1) == 1 && g.entered != nil {
			close(g.entered)
			<-g.release
		}
	}
	return vnic.XDPPass, data, end, nil
}

// TestSendWhileOwnRxQueueActive holds a's RX queue 0 in the middle of processing a frame (its XDP
// program waits) and transmits from a on TX queue 0 meanwhile: b processes that frame inline in
// the sender's goroutine, as with any other send. Only XDP_TX sends made from inside an RX
// queue's processing are deferred (TestXDPTxIsNotProcessedInline); a plain transmit that
// happens to share the index of a busy RX queue is not.
func TestSendWhileOwnRxQueueActive(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 1, noIPv6: true})
	b := h.addPort(portOpts{queues: 1, noIPv6: true})
	ga := &gateXDP{entered: make(chan struct{}), release: make(chan struct{})}
	gb := &gateXDP{}
	h.locked(func() {
		require.NoError(t, a.port.SetXDP(ga))
		require.NoError(t, b.port.SetXDP(gb))
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(ga.release)
		}
	}
	defer release()

	// b → a: processed inline into a's RX queue 0, where a's program holds it.
	done := make(chan bool)
	go func() { done <- b.port.Transmit(0, markerFrame(a.mac, b.mac)) }()
	select {
	case <-ga.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("a's RX queue never saw b's marker")
	}
	before := b.ep.Stats()[0]
	require.True(t, a.port.Transmit(0, markerFrame(b.mac, a.mac)), "a refused to transmit")
	after := b.ep.Stats()[0]
	seen := gb.seen.Load()
	assert.Equal(t, int32(1), seen, "b's RX queue saw %d markers when a's transmit returned, want 1 (processed inline)", seen)
	assert.Equal(t, before.RxDeferred, after.RxDeferred, "b deferred %d → %d, inline %d → %d: want the frame inline", before.RxDeferred, after.RxDeferred, before.RxInline, after.RxInline)
	assert.Equal(t, before.RxInline+1, after.RxInline, "b deferred %d → %d, inline %d → %d: want the frame inline", before.RxDeferred, after.RxDeferred, before.RxInline, after.RxInline)
	release()
	assert.True(t, <-done, "b refused to transmit")
}

// TestTCPWithoutDeferral runs TCP between two single-queue ports: a's data leaves on TX queue 0
// while b's ACKs arrive on a's RX queue 0, processed in b's TX goroutine. Each RX queue has one
// sender only, so once the addresses are learned (a ping first: ARP's broadcasts are floods,
// which the queues' own goroutines deliver) nothing is deferred or dropped at an input.
func TestTCPWithoutDeferral(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 1, noIPv6: true})
	b := h.addPort(portOpts{queues: 1, noIPv6: true})
	a.pingOK(t, b)
	before := map[*testPort]QueueStats{a: a.ep.Stats()[0], b: b.ep.Stats()[0]}
	tcpTransfer(t, a, b, 2, 8<<20)
	for _, p := range []*testPort{a, b} {
		s, b := p.ep.Stats()[0], before[p]
		assert.Equal(t, b.RxDeferred, s.RxDeferred, "port %s during TCP: inline %d, deferred %d, input drops %d: want only inline", p.name, s.RxInline-b.RxInline, s.RxDeferred-b.RxDeferred, s.RxInputDrops-b.RxInputDrops)
		assert.Equal(t, b.RxInputDrops, s.RxInputDrops, "port %s during TCP: inline %d, deferred %d, input drops %d: want only inline", p.name, s.RxInline-b.RxInline, s.RxDeferred-b.RxDeferred, s.RxInputDrops-b.RxInputDrops)
		assert.NotEqual(t, b.RxInline, s.RxInline, "port %s during TCP: inline %d, deferred %d, input drops %d: want only inline", p.name, s.RxInline-b.RxInline, s.RxDeferred-b.RxDeferred, s.RxInputDrops-b.RxInputDrops)
	}
}

// TestSenderWaitsForBusyQueue holds b's RX queue 0 in its XDP program and has a send more
// frames to b than b's input holds (its RX ring size) meanwhile: the sender waits for the queue
// rather than pushing past the input's bound, so once the queue is released every frame
// reaches b's program and none is dropped as input-full (hc_rx_discards_no_wqe), the loss
// that made a TCP stream through two ports retransmit.
func TestSenderWaitsForBusyQueue(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 1, noIPv6: true, rxRing: 128})
	b := h.addPort(portOpts{queues: 1, noIPv6: true, rxRing: 128})
	gb := &gateXDP{entered: make(chan struct{}), release: make(chan struct{})}
	h.locked(func() {
		require.NoError(t, b.port.SetXDP(gb))
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(gb.release)
		}
	}
	defer release()

	const n = 3 * 128
	before := b.ep.Stats()[0]
	first := make(chan bool)
	go func() { first <- a.port.Transmit(0, markerFrame(b.mac, a.mac)) }()
	select {
	case <-gb.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("b's RX queue never saw a's first marker")
	}
	rest := make(chan int)
	started := make(chan struct{})
	go func() {
		close(started)
		ok := 0
		for range n {
			if a.port.Transmit(0, markerFrame(b.mac, a.mac)) {
				ok++
			}
		}
		rest <- ok
	}()
	<-started
	release()
	require.True(t, <-first, "a refused the first marker")
	ok := <-rest
	require.Equal(t, n, ok, "a transmitted %d of %d markers", ok, n)
	after := b.ep.Stats()[0]
	d := after.RxInputDrops - before.RxInputDrops
	assert.Equal(t, uint64(0), d, "b dropped %d frames at its input, want 0 (the sender waits for the queue)", d)
	seen := gb.seen.Load()
	assert.Equal(t, int32(n+1), seen, "b's program saw %d markers, want %d", seen, n+1)
}
