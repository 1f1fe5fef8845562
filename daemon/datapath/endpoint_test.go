package datapath

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/privflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoPortsTraffic: two ports on one segment, each in its own namespace, talk ICMP, TCP and
// UDP, and the traffic is spread over several queues in both directions.
func TestTwoPortsTraffic(t *testing.T) {
	for _, mode := range []struct {
		name     string
		noInline bool
	}{{"inline", false}, {"rx-goroutine", true}} {
		t.Run(mode.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.addPort(portOpts{noInline: mode.noInline})
			b := h.addPort(portOpts{noInline: mode.noInline})

			a.pingOK(t, b)
			b.pingOK(t, a)
			// Frames may have found a port not yet open while the other one came up (its
			// IPv6 chatter): count drops from here on.
			base := map[*testPort]vnic.NetdevStats{a: a.port.NetdevStats(), b: b.port.NetdevStats()}
			baseDrops := map[*testPort]uint64{a: sumInputDrops(a), b: sumInputDrops(b)}
			tcpTransfer(t, a, b, 8, 1<<20)
			tcpTransfer(t, b, a, 8, 1<<20)
			udpBurst(t, a, b, 1000, 1200, 8)
			udpBurst(t, b, a, 1000, 64, 8)

			for _, p := range []*testPort{a, b} {
				rx, tx := p.queueStats("packets")
				assert.GreaterOrEqual(t, nonZero(rx), 2, "port %s: packets per RX queue %v, per TX queue %v; want traffic on several queues", p.name, rx, tx)
				assert.GreaterOrEqual(t, nonZero(tx), 2, "port %s: packets per RX queue %v, per TX queue %v; want traffic on several queues", p.name, rx, tx)
				var inline, deferred, inputDrops uint64
				for _, q := range p.ep.Stats() {
					inline += q.RxInline
					deferred += q.RxDeferred
					inputDrops += q.RxInputDrops
				}
				// The only drops without a reconfiguration: a full RX input (a burst
				// while the queue was busy), each handed to vnic as no posted buffer by
				// the queue's next poll.
				deadline := time.Now().Add(5 * time.Second)
				for {
					ns := p.port.NetdevStats()
					missed, dropped := ns.RxMissed-base[p].RxMissed, ns.RxDropped-base[p].RxDropped
					if ns.TxDropped == base[p].TxDropped && dropped == missed && missed == inputDrops-baseDrops[p] {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("port %s: netdev drops %+v (before the transfers %+v), endpoint input drops %d (before %d)",
							p.name, ns, base[p], inputDrops, baseDrops[p])
						break
					}
					time.Sleep(time.Millisecond)
				}
				if mode.noInline && inline != 0 || !mode.noInline && inline == 0 || mode.noInline && deferred == 0 {
					t.Errorf("port %s: %d frames processed inline, %d by the RX goroutines", p.name, inline, deferred)
				}
				t.Logf("port %s: rx %v tx %v, inline %d, deferred %d, input drops %d", p.name, rx, tx, inline, deferred, inputDrops)
			}
			fdb := h.seg.FDB()
			assert.Len(t, fdb, 2, "segment learned %v, want the two ports' addresses", fdb)
		})
	}
}

// TestFullPageRxFlipDuringTCP flips full-page-rx on both ports over and over (under the
// configuration lock, as the daemon does) while TCP transfers run: the transfers complete
// intact, and afterwards no RX buffer is left in flight.
func TestFullPageRxFlipDuringTCP(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{pageSize: 65536})
	b := h.addPort(portOpts{pageSize: 65536})
	a.pingOK(t, b)

	stop := make(chan struct{})
	var flips atomic.Int64
	var flipTime atomic.Int64 // ns
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, p := range []*testPort{a, b} {
				var err error
				start := time.Now()
				h.locked(func() { err = p.port.SetPrivFlags(p.port.Settings().PrivFlags ^ privflag.FullPageRx) })
				flipTime.Add(int64(time.Since(start)))
				if err != nil {
					t.Errorf("flip on %s: %v", p.name, err)
					return
				}
			}
			flips.Add(1)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	// The transfers go on, both ways, until flips have happened during them: a flip takes
	// longer than a transfer on a loaded machine (the race detector, two CPUs), so a fixed
	// amount of data would prove nothing there. A minute without two flips is a failure.
	start := time.Now()
	var during int64
	for round := 1; ; round++ {
		tcpTransfer(t, a, b, 4, 4<<20)
		tcpTransfer(t, b, a, 4, 4<<20)
		during = flips.Load()
		t.Logf("round %d done after %v, %d flips so far, %v flipping", round, time.Since(start), during, time.Duration(flipTime.Load()))
		if during >= 2 || time.Since(start) > time.Minute || t.Failed() {
			break
		}
	}
	close(stop)
	wg.Wait()
	require.GreaterOrEqual(t, during, int64(2), "only %d flips happened during %v of transfers", during, time.Since(start))
	for _, p := range []*testPort{a, b} {
		st := p.waitQuiet(t)
		assert.Equal(t, 0, st.BuffersInFlight, "port %s after %d flips: %d buffers in flight, %d pools draining", p.name, flips.Load(), st.BuffersInFlight, st.ReleasesPending)
		assert.Equal(t, 0, st.ReleasesPending, "port %s after %d flips: %d buffers in flight, %d pools draining", p.name, flips.Load(), st.BuffersInFlight, st.ReleasesPending)
	}
	t.Logf("%d flips per port during the transfers", during)
	a.pingOK(t, b)
}

// waitQuiet waits until the port's destroyed pools have all been released (they are released
// asynchronously, every PoolReleaseInterval) and returns the state.
func (tp *testPort) waitQuiet(t *testing.T) vnic.State {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := tp.state()
		if st.ReleasesPending == 0 || time.Now().After(deadline) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestChannelChangeDuringTraffic changes the queue count of both ports while TCP transfers run:
// the TAP gains and loses queues with the port, and the transfers complete intact.
func TestChannelChangeDuringTraffic(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 4})
	b := h.addPort(portOpts{queues: 4})
	a.pingOK(t, b)

	counts := []int{2, 6, 1, 8, 3}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 3*len(counts); i++ {
			n := counts[i%len(counts)]
			for _, p := range []*testPort{a, b} {
				var err error
				h.locked(func() {
					err = p.ep.SetChannels(n, func() error { return p.port.SetChannels(n) })
				})
				if err != nil {
					t.Errorf("SetChannels(%d) on %s: %v", n, p.name, err)
					return
				}
				if got := p.dev.NumQueues(); got != n {
					t.Errorf("%s: TAP has %d queues after SetChannels(%d)", p.name, got, n)
				}
				got := len(p.ep.Stats())
				assert.Equal(t, n, got, "%s: endpoint runs %d queues after SetChannels(%d)", p.name, got, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// Keep TCP running for as long as the changes go on.
	transfers := 0
	for {
		tcpTransfer(t, a, b, 4, 1<<20)
		transfers++
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	t.Logf("%d transfers of 4 MiB during %d channel changes per port", transfers, 3*len(counts))
	final := counts[(3*len(counts)-1)%len(counts)]
	for _, p := range []*testPort{a, b} {
		l, _ := taptest.ShowLink(t, p.ns, "eth0")
		assert.Equal(t, final, l.LinkInfo.Data.NumQueues, "%s: kernel TAP queues %d, port queues %d; want %d", p.name, l.LinkInfo.Data.NumQueues, p.port.NumRxQueues(), final)
		assert.Equal(t, final, p.port.NumRxQueues(), "%s: kernel TAP queues %d, port queues %d; want %d", p.name, l.LinkInfo.Data.NumQueues, p.port.NumRxQueues(), final)
	}
	tcpTransfer(t, b, a, 4, 1<<20)
	rx, tx := a.queueStats("packets")
	assert.GreaterOrEqual(t, nonZero(rx), 2, "after the changes: rx %v tx %v, want traffic on several queues", rx, tx)
	assert.GreaterOrEqual(t, nonZero(tx), 2, "after the changes: rx %v tx %v, want traffic on several queues", rx, tx)

	// A channel change the port refuses leaves everything as it was.
	var err error
	h.locked(func() {
		err = a.ep.SetChannels(vnic.DefaultMaxQueues+1, func() error { return a.port.SetChannels(vnic.DefaultMaxQueues + 1) })
	})
	assert.ErrorIs(t, err, unix.EINVAL, "SetChannels beyond the port's maximum: %v, want EINVAL", err)
	assert.Equal(t, final, a.dev.NumQueues(), "refused change left the TAP with %d queues and the endpoint with %d, want %d", a.dev.NumQueues(), len(a.ep.Stats()), final)
	assert.Len(t, a.ep.Stats(), final, "refused change left the TAP with %d queues and the endpoint with %d, want %d", a.dev.NumQueues(), len(a.ep.Stats()), final)
	a.pingOK(t, b)
}

// TestPortDownUp closes a port (vnic Close, as the daemon does when its TAP goes down): traffic
// to it stops and is counted as dropped; opening it again restores it.
func TestPortDownUp(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{})
	b := h.addPort(portOpts{})
	a.pingOK(t, b)

	before := b.port.NetdevStats()
	h.locked(b.port.Close)
	require.Error(t, a.ping(b.ip, 100, 300*time.Millisecond), "ping answered by a port that is down")
	after := b.port.NetdevStats()
	assert.Greater(t, after.RxMissed, before.RxMissed, "frames to the port that is down were not counted: before %+v after %+v", before, after)
	h.locked(func() {
		require.NoError(t, b.port.Open())
	})
	a.pingOK(t, b)
	b.pingOK(t, a)
}

// TestLinkStateDrivesPort wires the TAP's link watcher to the port, as the daemon core does:
// `ip link set eth0 down` in the namespace closes the port, `up` opens it again.
func TestLinkStateDrivesPort(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{})
	b := h.addPort(portOpts{})
	ctx := t.Context()
	events, err := b.dev.Watch(ctx)
	require.NoError(t, err)
	go func() {
		for ev := range events {
			h.locked(func() {
				if ev.Up {
					b.port.Open()
				} else {
					b.port.Close()
				}
			})
		}
	}()
	waitRunning := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for b.state().Running != want {
			if time.Now().After(deadline) {
				t.Fatalf("port running = %v, want %v", !want, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	a.pingOK(t, b)
	taptest.IP(t, b.ns, "link", "set", "eth0", "down")
	waitRunning(false)
	taptest.IP(t, b.ns, "link", "set", "eth0", "up")
	waitRunning(true)
	a.pingOK(t, b)
}

// TestXDPTxIsNotProcessedInline attaches XDP_TX to one port: every frame it receives goes back
// out of it. Reflected broadcasts reach the other port through its RX goroutine, never inline
// inside the reflecting port's RX processing, and nothing deadlocks.
func TestXDPTxIsNotProcessedInline(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{})
	b := h.addPort(portOpts{})
	a.pingOK(t, b)
	h.locked(func() {
		require.NoError(t, b.port.SetXDP(vnic.XDPProgTx))
	})
	// Broadcasts from a: b reflects each one, and the segment floods the copy back to a.
	var err error
	taptest.InNetNS(t, a.ns, func() {
		var c *net.UDPConn
		if c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: a.ip}); err != nil {
			return
		}
		defer c.Close()
		for i := range 200 {
			if _, err = c.WriteTo(make([]byte, 100+i), &net.UDPAddr{IP: net.IPv4(10, 77, 0, 255), Port: 9}); err != nil {
				return
			}
		}
	})
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, xdpTx := b.queueStats("packets")
		var deferred uint64
		for _, q := range a.ep.Stats() {
			deferred += q.RxDeferred
		}
		rxXDPTx, _ := b.queueStats("xdp_tx")
		sum := func(v []uint64) (s uint64) {
			for _, x := range v {
				s += x
			}
			return s
		}
		if sum(rxXDPTx) >= 200 && deferred >= 200 {
			t.Logf("b reflected %d frames (tx %v); a took %d reflected frames through its RX goroutines", sum(rxXDPTx), xdpTx, deferred)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b xdp_tx %v, a deferred %d: want at least 200 each", rxXDPTx, deferred)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEndpointLifecycle stops and restarts an endpoint under traffic and checks the refusals.
func TestEndpointLifecycle(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{})
	b := h.addPort(portOpts{})
	a.pingOK(t, b)

	assert.ErrorIs(t, b.ep.Start(b.port, b.dev), unix.EBUSY, "second Start")
	assert.ErrorIs(t, a.ep.Start(b.port, b.dev), unix.EINVAL, "Start with another endpoint's port")
	assert.ErrorIs(t, a.ep.Start(nil, nil), unix.EINVAL, "Start(nil, nil)")

	b.ep.Stop()
	b.ep.Stop() // no-op
	assert.Equal(t, 1, h.seg.Ports(), "after Stop: segment has %d ports, stats %v", h.seg.Ports(), b.ep.Stats())
	assert.Nil(t, b.ep.Stats(), "after Stop: segment has %d ports, stats %v", h.seg.Ports(), b.ep.Stats())
	assert.Error(t, a.ping(b.ip, 50, 300*time.Millisecond), "ping answered through a stopped endpoint")
	var err error
	h.locked(func() { err = b.ep.SetChannels(2, func() error { return b.port.SetChannels(2) }) })
	assert.ErrorIs(t, err, unix.ENODEV, "SetChannels on a stopped endpoint: %v, want ENODEV", err)
	require.NoError(t, b.ep.Start(b.port, b.dev), "restart")
	a.pingOK(t, b)
	b.pingOK(t, a)
	tcpTransfer(t, a, b, 2, 256<<10)
}

// sumInputDrops sums the endpoint's input-full drops over its queues.
func sumInputDrops(p *testPort) uint64 {
	var n uint64
	for _, q := range p.ep.Stats() {
		n += q.RxInputDrops
	}
	return n
}

// TestStopAllWhileFlooding stops three of four ports of one segment with one StopAll while the
// fourth floods broadcasts at them: the three leave the segment with the addresses learned on
// them, their goroutines are gone (no stats), Stop and StopAll on them again are no-ops, the
// flooding port still transmits, and every RX buffer of every port comes back (teardown checks).
func TestStopAllWhileFlooding(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{queues: 2, noIPv6: true})
	rest := []*testPort{h.addPort(portOpts{queues: 2, noIPv6: true}), h.addPort(portOpts{queues: 1, noIPv6: true}),
		h.addPort(portOpts{queues: 2, noIPv6: true})}
	for _, p := range rest {
		a.pingOK(t, p) // every address learned
	}
	require.GreaterOrEqual(t, len(h.seg.FDB()), 4, "FDB entries after the pings")
	stop := make(chan struct{})
	flooded := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				flooded <- n
				return
			default:
			}
			if a.port.Transmit(n%2, frame(broadcast, a.mac, byte(n))) {
				n++
			}
		}
	}()
	var eps []*Endpoint
	for _, p := range rest {
		eps = append(eps, p.ep)
	}
	StopAll(eps)
	assert.Equal(t, 1, h.seg.Ports(), "segment members after StopAll, want 1 (the flooding port)")
	for _, e := range h.seg.FDB() {
		assert.Equal(t, a.name, e.Port, "FDB still has %s on %s after StopAll", e.MAC, e.Port)
	}
	for _, p := range rest {
		assert.Nil(t, p.ep.Stats(), "port %s still has queues after StopAll", p.name)
		p.ep.Stop()
	}
	StopAll(eps)
	close(stop)
	assert.NotEqual(t, 0, <-flooded, "the flooding port transmitted nothing")
	assert.True(t, a.port.Transmit(0, frame(broadcast, a.mac, 0)), "the remaining port cannot transmit after StopAll")
}
