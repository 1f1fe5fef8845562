// Package datapath is manad's wire: it moves frames between the ports' TAPs through the vnic port
// model (README: Architecture, The port model).
//
// A Segment is a named wire segment, a learning L2 switch shared by the ports attached to it. An
// Endpoint attaches one port to a segment and to its TAP: it is the port's vnic.Host and
// vnic.Wire, and it runs one TX and one RX goroutine per queue, each blocking on the netpoller or
// on a channel, so an idle daemon uses no CPU.
//
// The path of a frame from port A to port B:
//
//	A's kernel transmits on TAP A queue i
//	  → A's TX goroutine i reads it (Port.Transmit: tx_i_* counters)
//	  → Endpoint.Send → Segment (learn source, look up destination / flood)
//	  → B's endpoint: Port.SteerRx picks RX queue j (Toeplitz RSS)
//	  → Port.Receive(j): copy into the posted buffer, refill, XDP, rx_j_* counters
//	  → Endpoint.Deliver: write to TAP B queue j → B's kernel receives it
//
// A TCP superframe (TSO) from A that B's RX queue would coalesce back takes a short cut from
// Endpoint.Send's place: Port.ReceiveWhole accounts every frame it stands for, and B's TAP gets
// it in one write (Endpoint.inputWhole).
//
// From the TAP read to the TAP write, a unicast frame stays in the goroutine that read it whenever
// B's RX queue j is idle; see Endpoint for when and why the queue's own goroutine takes over (a
// flood to more than a handful of ports, always).
//
// Typical use by the daemon, under its configuration lock:
//
//	seg := segments.Get("lan0")
//	dev, _ := tap.Open(tap.Config{Name: "eth0", NetNS: "a", Queues: s.Queues, Persistent: true})
//	ep := datapath.NewEndpoint(seg, mac, log)
//	port, _ := vnic.New(vnic.Config{Name: "a/eth0", Lock: &mu, Host: ep, Wire: ep}, s)
//	_ = ep.Start(port, dev)
//	_ = port.Open() // when the TAP is up
//	…
//	_ = ep.SetChannels(n, func() error { return port.SetChannels(n) })
//	…
//	ep.Stop(); td := port.Shutdown(); _ = dev.Close() // then td.Wait outside the lock
package datapath
