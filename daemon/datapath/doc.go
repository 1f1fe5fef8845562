// Package datapath is manad's wire: it moves frames between the ports' TAPs through the vnic port
// model (README: Architecture, The port model).
//
// A Segment is a named wire segment, a learning L2 switch shared by the ports attached to it. An
// Endpoint attaches one port to a segment and to its TAP: it is the port's vnic.Host and
// vnic.Wire, and it runs one TX and one RX goroutine per queue, each parked (the TX goroutine on
// its queue's own epoll, which the netpoller watches; see parker) or blocking on a channel, so an
// idle daemon uses no CPU.
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
// # Polling
//
// A queue whose NAPI settings ask for deferral (vnic.NAPIConfig: defer-hard-irqs and
// gro-flush-timeout both set) is polled rather than parked while it is busy. When its TX
// goroutine's batch found work and then nothing more, it hands the queue to a poller instead of
// parking on the netpoller; the poller reads the TAP queue (non-blocking reads) and drains the RX
// input, pass after pass, until the queue's window passes without work, then gives it back and
// the goroutine parks as before. The window mirrors the kernel's napi_complete_done, which keeps
// a NAPI's interrupts off, re-polling from the gro-flush-timeout timer, until defer-hard-irqs
// polls in a row found nothing: it is defer-hard-irqs × gro-flush-timeout after the last poll
// that found work, or irq-suspend-timeout when that is longer (pollWindow). So
// `defer-hard-irqs 100, gro-flush-timeout 20000` (ns) polls for 2 ms after the last frame.
//
// A poller is a goroutine locked to its thread that holds one slot of the segment's Pollers
// (shared by the segments of one Segments; DefaultMaxPollers: one with two CPUs or more, none on
// one CPU, where a queue always parks). One poller serves several queues (up to pollerQueues
// before a second slot is taken; all of them when no slot is free), as a DPDK lcore or a
// busy-poll thread polls several rings: a round trip between ports A and B on one segment
// crosses A's TAP queue one way and B's the other, and a poller that served only A's would leave
// the reply to wake B's parked goroutine, the very wake-up polling is meant to save. A pass asks the
// poller's epoll instance (pollSet: the TAP queues it serves, level-triggered, waited on by no
// one) which queues have frames, with one epoll_pwait that never waits, and reads only those,
// and the queues it wrote a frame to meanwhile (a reply the kernel made inside the write); an
// empty pass costs that one system call, where a read of every queue cost one per queue. Once
// passes have found nothing for YieldAfter, the poller yields the thread's CPU (sched_yield) to
// any task waiting for it, as napi_busy_loop stops on need_resched: on a loaded machine the
// round trip's other end is often that task. A queue leaves its poller at once when its endpoint stops, a channel change removes
// it, its port goes down, or its setting goes off; a poller with no queue left ends and gives
// its slot back. Endpoint.PollStats counts each queue's polls, the polls that found work and its
// share of its poller's thread CPU time (getrusage RUSAGE_THREAD, read every millisecond).
//
// What a round trip waits on without polling (issue 29, measured with perf stat and strace -c on
// BenchmarkRoundTrip's UDP RR through two ports, 5,000 round trips): per direction, one wake-up
// of the runtime's thread sleeping in epoll_pwait (about 3 per round trip counted, the TAP's
// edge-triggered readiness), one read that returns the frame, one write to the other TAP (the
// frame is processed inline, so no goroutine hand-off: about 180 futex calls in all, not per
// frame) and one read that finds EAGAIN (the edge-triggered netpoller needs it before parking).
// Nothing else (no timer, no Gosched, no hand-off) is on that path, so nothing was removed: the
// netpoller's wake-up is what polling saves.
//
// It saves it because a TAP queue is not in the runtime's netpoller (tap.Queue): a TX goroutine
// parks on an epoll instance of its queue's own, which the netpoller watches (parker), and in
// which the TAP queue is disarmed from the hand-over to a poller until the poller gives it back,
// so the frames the kernel queues on a polled queue wake no thread. When the TAP file itself was
// in the netpoller (edge-triggered, always), its idle thread was woken for every frame, in vain,
// about as often as without polling (perf: 17,387 wake-ups for 5,000 round trips with polling on,
// 15,947 off), and on a 2-CPU machine that thread's CPU was taken from the round trip's other
// end. A queue that is not polled pays no system call for this (strace: the same reads, writes
// and epoll_pwaits per frame as before), one epoll_ctl per polling episode on each side; the
// kernel's wake-up crosses one more epoll on its way (ep_poll_callback twice). Measured through
// the manad binary (BenchmarkRoundTripBinary, UDP RR, 2 vCPUs under load 8–10): with polling on,
// the daemon's threads slept 0.0–0.1 times per round trip (1.1–1.9 with the TAP files in the
// netpoller), and with polling off as often as before (1.0–1.5). What a polled round trip still costs over a veth
// pair is its system calls, at about 3 µs each on that VM (BenchmarkForwardOverhead's
// devnull-write-ns), even in the fastest 1 % of round trips (p1-ns). Counted with perf stat on
// the daemon over 20,000 polled pings (one at a time, as BenchmarkRoundTrip's client): reading
// every served queue at every pass cost 4.6–6.1 reads per round trip (2 of them frames), 2
// writevs and 0.4–1.1 sched_yields; with the poller's epoll set (pollSet) it is 2.3 reads, 2
// writevs, 2.2–2.6 epoll_pwaits and 0.1–0.3 sched_yields, and about one context switch. perf
// record shows why: the ping client runs on the poller's CPU, woken by the write of its reply,
// and has sent its next request when the poller runs again, which reads it at once (queue.wrote),
// so that a round trip is the client's poll, recvmsg and sendto, the poller's read, writev, read,
// writev, and two context switches. That is the floor of a forwarder with a system call per frame
// on this VM: a veth pair answers a ping inside the client's sendto, with no switch at all.
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
