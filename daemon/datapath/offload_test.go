package datapath

import "testing"

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
		if err != nil {
			t.Fatalf("SetChannels(%d): %v", n, err)
		}
		tcpTransfer(t, b, a, 6, 1<<20)
		tcpTransfer(t, a, b, 6, 1<<20)
	}
	for _, p := range []*testPort{a, b} {
		var super, bad, oversize uint64
		for _, q := range p.ep.Stats() {
			super += q.TxSuperframes
			bad += q.TxBadVnetHdr
			oversize += q.TxOversize
		}
		// The driver's counters: each superframe is one TSO work item.
		_, tso := p.queueStats("tso_packets")
		var tsoSum uint64
		for _, v := range tso {
			tsoSum += v
		}
		if tsoSum < super {
			t.Errorf("port %s: tx tso_packets %v for %d superframes", p.name, tso, super)
		}
		var merged uint64
		for _, q := range p.ep.Stats() {
			merged += q.RxCoalesced
		}
		if merged == 0 {
			t.Errorf("port %s: no frame coalesced on receive", p.name)
		}
		t.Logf("port %s: %d frames coalesced", p.name, merged)
		if super == 0 || bad != 0 || oversize != 0 {
			t.Errorf("port %s: %d superframes, %d bad virtio headers, %d oversize: want superframes only", p.name, super, bad, oversize)
		}
		// Every frame on the wire fits the MTU: none was dropped as oversize on receive.
		if n := p.port.NetdevStats().RxOversize; n != 0 {
			t.Errorf("port %s: %d frames too long for the RX buffers", p.name, n)
		}
		t.Logf("port %s: %d superframes", p.name, super)
	}
	if s := c.ep.Stats(); s[0].TxSuperframes != 0 || s[0].RxCoalesced != 0 {
		t.Errorf("a TAP without offloads handed over superframes or took coalesced ones: %+v", s[0])
	}
}
