package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/internal/nsrun"
	"github.com/manad/manad/vnic/rxbuf"
)

// opts are one run's knobs.
type opts struct {
	rounds int
	window time.Duration // one measurement
}

// pair is a port under test and the port that feeds it, on a segment of their own, with
// addresses in a /24 of their own: src in nsA sends to dst in nsB.
type pair struct {
	v            variant
	src, dst     string // port names
	nsSrc, nsDst string
	srcIP, dstIP string
}

// world is every table's ports in one daemon.
type world struct {
	e          *env
	nsA, nsB   string
	p001, p000 []pair
	p003, p004 []pair
	fwd        []appliance // seed 002
}

// appliance is seed 002's forwarding node: a (nsA) — r1 [router ns] r2 — b (nsB).
type appliance struct {
	v                    variant
	ns                   string
	a, r1, r2, b         string
	ipA, ipR1, ipR2, ipB string
}

// plain is the feeding side's variant: today's driver, so only the port under test differs.
func plain(v variant) variant {
	return variant{label: "feeder", rule: rxbuf.RuleUpstream, pageSize: 4096, mtu: v.mtu, queues: v.queues, ring: 128}
}

// build lays out every port, starts manad, and addresses the ports.
func build(ctx context.Context, e *env) (*world, error) {
	w := &world{e: e}
	var err error
	if w.nsA, err = e.ns("a"); err != nil {
		return nil, err
	}
	if w.nsB, err = e.ns("b"); err != nil {
		return nil, err
	}
	var cfg strings.Builder
	subnet := 0
	mk := func(tag string, vs []variant) []pair {
		var ps []pair
		for i, v := range vs {
			subnet++
			p := pair{v: v, src: portName(tag, i, "a"), dst: portName(tag, i, "b"), nsSrc: w.nsA, nsDst: w.nsB,
				srcIP: fmt.Sprintf("10.219.%d.1", subnet), dstIP: fmt.Sprintf("10.219.%d.2", subnet)}
			seg := fmt.Sprintf("seeds-%s-%d", tag, i)
			cfg.WriteString(plain(v).portTOML(p.src, w.nsA, seg))
			cfg.WriteString(v.portTOML(p.dst, w.nsB, seg))
			ps = append(ps, p)
		}
		return ps
	}
	w.p001 = mk("1", variants001)
	w.p000 = mk("0", variants000[:1]) // one port; the flag flips it between the rows
	w.p003 = mk("3", variants003)
	w.p004 = mk("4", variants004)
	for i, v := range variants002 {
		ns, err := e.ns(fmt.Sprintf("r%d", i))
		if err != nil {
			return nil, err
		}
		subnet += 2
		a := appliance{v: v, ns: ns, a: portName("2", i, "a"), r1: portName("2", i, "i"), r2: portName("2", i, "o"), b: portName("2", i, "b"),
			ipA: fmt.Sprintf("10.219.%d.1", subnet-1), ipR1: fmt.Sprintf("10.219.%d.254", subnet-1),
			ipR2: fmt.Sprintf("10.219.%d.254", subnet), ipB: fmt.Sprintf("10.219.%d.1", subnet)}
		in, out := fmt.Sprintf("seeds-2-%d-in", i), fmt.Sprintf("seeds-2-%d-out", i)
		// Only the forwarding node's ports differ, as in the thread's measurement.
		cfg.WriteString(plain(v).portTOML(a.a, w.nsA, in))
		cfg.WriteString(v.portTOML(a.r1, ns, in))
		cfg.WriteString(v.portTOML(a.r2, ns, out))
		cfg.WriteString(plain(v).portTOML(a.b, w.nsB, out))
		w.fwd = append(w.fwd, a)
	}
	if err := e.start(cfg.String()); err != nil {
		return nil, err
	}
	for _, ps := range [][]pair{w.p001, w.p000, w.p003, w.p004} {
		for _, p := range ps {
			if err := errors.Join(addr(w.nsA, p.src, p.srcIP), addr(w.nsB, p.dst, p.dstIP)); err != nil {
				return nil, err
			}
		}
	}
	for _, a := range w.fwd {
		dstNet := a.ipB[:strings.LastIndexByte(a.ipB, '.')] + ".0/24"
		srcNet := a.ipA[:strings.LastIndexByte(a.ipA, '.')] + ".0/24"
		if err := errors.Join(addr(w.nsA, a.a, a.ipA), addr(a.ns, a.r1, a.ipR1), addr(a.ns, a.r2, a.ipR2), addr(w.nsB, a.b, a.ipB),
			run(a.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"),
			run(w.nsA, "ip", "route", "add", dstNet, "via", a.ipR1),
			run(w.nsB, "ip", "route", "add", srcNet, "via", a.ipR2)); err != nil {
			return nil, err
		}
	}
	// Static neighbours instead of ARP (ping is not everywhere, and the drop tests' receivers
	// drop ARP too): each side knows the other's MAC from PORT_GET.
	mac := func(ns, dev string) (string, error) {
		info, err := e.port(ctx, ns, dev)
		if err != nil {
			return "", err
		}
		return info.MAC.String(), nil
	}
	neigh := func(ns, dev, ip, peerNS, peerDev string) error {
		m, err := mac(peerNS, peerDev)
		if err != nil {
			return err
		}
		return run(ns, "ip", "neigh", "replace", ip, "lladdr", m, "dev", dev, "nud", "permanent")
	}
	for _, ps := range [][]pair{w.p001, w.p000, w.p003, w.p004} {
		for _, p := range ps {
			if err := errors.Join(neigh(w.nsA, p.src, p.dstIP, w.nsB, p.dst), neigh(w.nsB, p.dst, p.srcIP, w.nsA, p.src)); err != nil {
				return nil, err
			}
		}
	}
	for _, a := range w.fwd {
		if err := errors.Join(neigh(w.nsA, a.a, a.ipR1, a.ns, a.r1), neigh(a.ns, a.r1, a.ipA, w.nsA, a.a),
			neigh(a.ns, a.r2, a.ipB, w.nsB, a.b), neigh(w.nsB, a.b, a.ipR2, a.ns, a.r2)); err != nil {
			return nil, err
		}
	}
	// The drop tests' receivers drop everything (generic XDP, in the kernel).
	for _, p := range append(append([]pair{}, w.p003...), w.p004...) {
		if err := e.attachGenericDrop(w.nsB, p.dst); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// portName is a port name unique to this process: "s" + the PID's last digits + table, index and
// side (at most 15 bytes, as an interface name must be).
func portName(tag string, i int, side string) string {
	return nsrun.Name("s", fmt.Sprintf("%s%d%s", tag, i, side))
}

// Measured column names.
const (
	colTCP        = "TCP throughput"
	colPagesNow   = "pages pinned per queue"
	colBlackout   = "blackout of the flip into this mode"
	colFlip       = "flip request time"
	colFwdPPS     = "forwarded pps"
	colFwdGbps    = "forwarded throughput"
	colShortHR    = "short-headroom frames"
	colShortShare = "short-headroom share"
	colDrop64     = "drop rate 64 B"
	colDrop128    = "drop rate 128 B"
	colDrop       = "drop rate"
	colAllocSlow  = "pages the pools allocated"
	colThread     = "thread (their hardware)"
	colOffered    = "sender offered 64 B"
	colSent       = "sender offered"
)

// Frame sizes of the drop tests are Ethernet frame lengths (mausezahn's and xdp-bench's): the
// UDP payload is what is left after 14 + 20 + 8 bytes of headers.
const udpOverhead = 14 + 20 + 8

func streamsFor(short bool) int {
	if short {
		return 4
	}
	return 24 // "> 16 TCP streams"
}

// seed001 measures buffers per page and RX memory per queue on 64K pages, pre-frag vs frag.
func (w *world) seed001(ctx context.Context, o opts) (table, error) {
	t := table{seed: "001", title: "page-pool fragments on 64K pages: buffers per page, RX memory per queue, throughput (730ff06d3f5c)",
		columns: []column{{name: colPerPage, kind: modelled, unit: ""}, {name: colBufSize, kind: modelled, unit: "B"}, {name: colMemQueue, kind: modelled, unit: "MiB"},
			{name: colPagesQueue, kind: modelled}, {name: colPagesNow, kind: measured},
			{name: colTCP, kind: measured, unit: "Mbit/s"}, {name: colThread, kind: thread}},
		notes: []string{"ring of 1024 buffers, 1 queue; pages pinned is the live page pools' count (PORT_GET), read after traffic",
			"TCP: 4 streams for the window, A B A B over the rounds; manad's cost is per frame, not per page, so expect no 200%"}}
	tcp := make([][]float64, len(w.p001))
	for r := 0; r < o.rounds; r++ {
		for i, p := range w.p001 {
			bps, err := tcpStreams(p.nsSrc, p.nsDst, p.dstIP+":5201", 4, o.window)
			if err != nil {
				return t, fmt.Errorf("%s: %w", p.v.label, err)
			}
			tcp[i] = append(tcp[i], bps/1e6)
		}
	}
	threadSays := []string{"1 buffer per 64K page", "35 buffers per 64K page; ~200% throughput", "1 per page", "–"}
	for i, p := range w.p001 {
		info, err := w.e.port(ctx, p.nsDst, p.dst)
		if err != nil {
			return t, err
		}
		c := modelCells(p.v)
		r := row{label: p.v.label, cells: map[string]cell{colPerPage: c[colPerPage], colBufSize: c[colBufSize], colMemQueue: c[colMemQueue],
			colPagesQueue: c[colPagesQueue],
			colPagesNow:   once(float64(info.PagesPinned) / float64(p.v.queues)), colTCP: over(tcp[i]), colThread: text(threadSays[i])}}
		t.rows = append(t.rows, r)
	}
	return t, nil
}

// seed000 measures fragment vs full-page-rx with many TCP streams on 4K pages, and the blackout
// of one flip of the flag under that load.
func (w *world) seed000(ctx context.Context, o opts, short bool) (table, error) {
	n := streamsFor(short)
	t := table{seed: "000", title: fmt.Sprintf("full-page-rx on 4K pages, pre-headroom rule: %d TCP streams, and one flip under load", n),
		columns: []column{{name: colPerPage, kind: modelled, unit: ""}, {name: colMemQueue, kind: modelled, unit: "MiB"}, {name: colTCP, kind: measured, unit: "Mbit/s"},
			{name: colBlackout, kind: measured, unit: "ms"}, {name: colFlip, kind: measured, unit: "ms"}, {name: colThread, kind: thread, unit: ""}},
		notes: []string{"one port flipped between the rows with PRIVFLAGS_SET (as ethtool --set-priv-flags); blackout = the longest gap between datagrams of a UDP probe flow through the port while the flip ran, under the TCP load",
			"the thread's regression is an ARM64 atomic (napi_pp_put_page 3.93% vs 0.85%); manad's fragment refcount is a Go atomic on whatever CPU this is"}}
	p := w.p000[0]
	c, err := w.e.client(p.nsDst)
	if err != nil {
		return t, err
	}
	probe, err := newArrivals(p.nsDst, p.dstIP+":9300")
	if err != nil {
		return t, err
	}
	defer probe.close()
	setFlag := func(on bool) error {
		return c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: client.Interface{Name: p.dst}, Flags: []client.Flag{{Name: "full-page-rx", On: on}}})
	}
	tcp := [2][]float64{}
	blackout, flipMS := [2][]float64{}, [2][]float64{}
	for r := 0; r < o.rounds; r++ {
		for mode := 0; mode < 2; mode++ {
			// Flip into this mode under load: TCP streams and the probe flow run, the flip
			// happens a third of the way in.
			errc := make(chan error, 2)
			go func() {
				_, err := tcpStreams(p.nsSrc, p.nsDst, p.dstIP+":5202", n, o.window)
				errc <- err
			}()
			go func() {
				_, err := udpFlood(p.nsSrc, p.dstIP+":9300", 64, 1, o.window)
				errc <- err
			}()
			time.Sleep(o.window / 3)
			probe.mark(true)
			t0 := time.Now()
			ferr := setFlag(mode == 1)
			took := time.Since(t0)
			time.Sleep(o.window / 10) // the first frames after the flip
			gap := probe.mark(false)
			e1, e2 := <-errc, <-errc
			if err := errors.Join(ferr, e1, e2); err != nil {
				return t, fmt.Errorf("%s: %w", variants000[mode].label, err)
			}
			blackout[mode] = append(blackout[mode], float64(gap.Microseconds())/1e3)
			flipMS[mode] = append(flipMS[mode], float64(took.Microseconds())/1e3)
			// Steady state in this mode.
			bps, err := tcpStreams(p.nsSrc, p.nsDst, p.dstIP+":5201", n, o.window)
			if err != nil {
				return t, err
			}
			tcp[mode] = append(tcp[mode], bps/1e6)
		}
	}
	info, err := w.e.port(ctx, p.nsDst, p.dst)
	if err != nil {
		return t, err
	}
	if !info.Layout.Single {
		return t, fmt.Errorf("%s: still in fragment mode after turning full-page-rx on", p.dst)
	}
	if err := setFlag(false); err != nil { // leave the port as configured
		return t, err
	}
	threadSays := []string{"15-20% below line rate on ARM64 (>16 streams); x86 ~182 Gbps either way", "line rate (180+ Gbps) on ARM64"}
	for mode, v := range variants000 {
		m := modelCells(v)
		t.rows = append(t.rows, row{label: v.label, cells: map[string]cell{colPerPage: m[colPerPage], colMemQueue: m[colMemQueue],
			colTCP: over(tcp[mode]), colBlackout: over(blackout[mode]), colFlip: over(flipMS[mode]), colThread: text(threadSays[mode])}})
	}
	return t, nil
}

// seed002 forwards UDP 1400 B in 4 flows through a node whose ports follow the rule before and
// after the headroom fix, and counts the frames it would have had to pskb_expand_head.
func (w *world) seed002(ctx context.Context, o opts) (table, error) {
	t := table{seed: "002", title: "forwarding appliance, UDP 1400 B, 4 streams, before/after the headroom rule (259c4a519100)",
		columns: []column{{name: colHeadroom, kind: modelled, unit: "B"}, {name: colPerPage, kind: modelled, unit: ""}, {name: colExpandModel, kind: modelled, unit: ""},
			{name: colFwdPPS, kind: measured, unit: "pps", offered: colSent}, {name: colSent, kind: measured, unit: "pps", offer: true}, {name: colFwdGbps, kind: measured, unit: "Gbit/s"}, {name: colShortHR, kind: measured, unit: "frames"}, {name: colShortShare, kind: measured, unit: "%"},
			{name: colThread, kind: thread, unit: ""}},
		notes: []string{"short-headroom frames: the forwarding node's ingress port's counter (PORT_GET, as show-rxbuf shows it) over the window",
			"the kernel copies nothing here: a TAP builds its own skb, so only the counter shows the copy a MANA port would cause; pps differ by manad's own cost only"}}
	n := len(w.fwd)
	pps, gbps, short, share, off := make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float64, n)
	for r := 0; r < o.rounds; r++ {
		for i, a := range w.fwd {
			in0, err := w.e.counters(ctx, a.ns, a.r1)
			if err != nil {
				return t, err
			}
			out0, err := w.e.counters(ctx, a.ns, a.r2)
			if err != nil {
				return t, err
			}
			sent, err := udpFlood(w.nsA, a.ipB+":9100", 1400, 4, o.window)
			if err != nil {
				return t, err
			}
			off[i] = append(off[i], float64(sent)/o.window.Seconds())
			in1, err := w.e.settled(ctx, a.ns, a.r1)
			if err != nil {
				return t, err
			}
			out1, err := w.e.settled(ctx, a.ns, a.r2)
			if err != nil {
				return t, err
			}
			fwd := float64(out1.txPackets-out0.txPackets) / o.window.Seconds()
			pps[i] = append(pps[i], fwd)
			gbps[i] = append(gbps[i], fwd*1400*8/1e9)
			sh := float64(in1.shortHeadroom - in0.shortHeadroom)
			short[i] = append(short[i], sh)
			if rx := float64(in1.rxPackets - in0.rxPackets); rx > 0 {
				share[i] = append(share[i], 100*sh/rx)
			}
		}
	}
	threadSays := []string{"272,830 pps, 3.06 Gbps; pskb_expand_head present", "390,560 pps, 4.37 Gbps (+43%); pskb_expand_head gone"}
	for i, a := range w.fwd {
		m := modelCells(a.v)
		t.rows = append(t.rows, row{label: a.v.label, cells: map[string]cell{colHeadroom: m[colHeadroom], colPerPage: m[colPerPage],
			colExpandModel: m[colExpandModel], colFwdPPS: over(pps[i]), colSent: over(off[i]), colFwdGbps: over(gbps[i]), colShortHR: over(short[i]),
			colShortShare: over(share[i]), colThread: text(threadSays[i])}})
	}
	return t, nil
}

// drop is one drop-rate measurement: frames per second the port under test delivered (into
// the kernel, whose generic XDP program drops them), what the senders offered, and the pages its
// pools took from the allocator per 1000 frames (NaN without a page pool).
type drop struct{ pps, offered, perK float64 }

// dropRate floods p's port under test with frame-byte frames for the window.
func (w *world) dropRate(ctx context.Context, p pair, frame int, window time.Duration) (drop, error) {
	c0, err := w.e.counters(ctx, p.nsDst, p.dst)
	if err != nil {
		return drop{}, err
	}
	sent, err := udpFlood(p.nsSrc, p.dstIP+":9200", frame-udpOverhead, 2, window)
	if err != nil {
		return drop{}, err
	}
	c1, err := w.e.settled(ctx, p.nsDst, p.dst)
	if err != nil {
		return drop{}, err
	}
	frames := float64(c1.rxPackets - c0.rxPackets)
	if frames == 0 {
		return drop{}, fmt.Errorf("%s: no frame arrived", p.dst)
	}
	d := drop{pps: frames / window.Seconds(), offered: float64(sent) / window.Seconds(), perK: math.NaN()}
	if c1.pools > 0 {
		d.perK = 1000 * float64(c1.allocSlow-c0.allocSlow) / frames
	}
	return d, nil
}

// seed003 is the XDP drop test at 64 and 128 B: no page pool, a page-pool page, two fragments.
func (w *world) seed003(ctx context.Context, o opts) (table, error) {
	t := table{seed: "003", title: "XDP drop (generic/skb mode, as xdp-bench in the thread), 1 RX queue, 4K pages: pps",
		columns: []column{{name: colPerPage, kind: modelled, unit: ""}, {name: colMemQueue, kind: modelled, unit: "MiB"}, {name: colDrop64, kind: measured, unit: "pps", offered: colOffered}, {name: colOffered, kind: measured, unit: "pps", offer: true}, {name: colDrop128, kind: measured, unit: "pps"},
			{name: colAllocSlow, kind: measured, unit: "per 1000 frames"}, {name: colThread, kind: thread, unit: "pps at 64 | 128"}},
		notes: []string{"the receiving TAP runs an XDP_DROP program in skb mode; the rate is the frames manad delivered to it (rx_N_packets), A B C A B C over the rounds"}}
	n := len(w.p003)
	d64, d128, alloc, off := make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float64, n)
	for r := 0; r < o.rounds; r++ {
		for i, p := range w.p003 {
			for _, fr := range []int{64, 128} {
				d, err := w.dropRate(ctx, p, fr, o.window)
				if err != nil {
					return t, err
				}
				if fr == 64 {
					d64[i], off[i] = append(d64[i], d.pps), append(off[i], d.offered)
					if !math.IsNaN(d.perK) {
						alloc[i] = append(alloc[i], d.perK)
					}
				} else {
					d128[i] = append(d128[i], d.pps)
				}
			}
		}
	}
	threadSays := []string{"533,158 | 531,618", "530,929 | 529,682", "530,781 | 529,116"}
	for i, p := range w.p003 {
		m := modelCells(p.v)
		pages := over(alloc[i])
		if !pages.ok {
			pages = text("no page pool")
		}
		t.rows = append(t.rows, row{label: p.v.label, cells: map[string]cell{colPerPage: m[colPerPage], colMemQueue: m[colMemQueue],
			colDrop64: over(d64[i]), colOffered: over(off[i]), colDrop128: over(d128[i]), colAllocSlow: pages, colThread: text(threadSays[i])}})
	}
	return t, nil
}

// seed004 is the 64 B drop-rate test with recycling off and on.
func (w *world) seed004(ctx context.Context, o opts) (table, error) {
	t := table{seed: "004", title: "64 B drop-rate test, page recycling off vs on (mvneta \"recycle buffers\")",
		columns: []column{{name: colPagesPer1k, kind: modelled, unit: "per 1000 frames"},
			{name: colDrop, kind: measured, unit: "pps", offered: colOffered}, {name: colOffered, kind: measured, unit: "pps", offer: true},
			{name: colAllocSlow, kind: measured, unit: "per 1000 frames"}, {name: colThread, kind: thread}},
		notes: []string{"one page-pool page per buffer, as mvneta; frames dropped by a generic XDP program on the receiving TAP; pages allocated = the pools' alloc_slow (netdev page-pool-stats) per 1000 frames"}}
	rate, alloc, off := make([][]float64, len(w.p004)), make([][]float64, len(w.p004)), make([][]float64, len(w.p004))
	for r := 0; r < o.rounds; r++ {
		for i, p := range w.p004 {
			d, err := w.dropRate(ctx, p, 64, o.window)
			if err != nil {
				return t, err
			}
			// Page-pool pages in both rows: there is always a pool to count.
			rate[i], alloc[i], off[i] = append(rate[i], d.pps), append(alloc[i], d.perK), append(off[i], d.offered)
		}
	}
	threadSays := []string{"269 kpps", "296 kpps (+10%)"}
	for i, p := range w.p004 {
		m := modelCells(p.v)
		t.rows = append(t.rows, row{label: p.v.label, cells: map[string]cell{colPagesPer1k: m[colPagesPer1k], colDrop: over(rate[i]), colOffered: over(off[i]),
			colAllocSlow: over(alloc[i]), colThread: text(threadSays[i])}})
	}
	return t, nil
}
