package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/manad/manad/bench/internal/benchrow"
)

// The TCP figures of issue 14 (offloads): iperf3 with 1 and 8 streams at MTU 1500 and 9000
// along veth, a Linux bridge, taprelay and manad (fragment and full-page, offloads on by
// default), in the same rounds as the UDP figures, each against veth's in the same round; the
// retransmits iperf3 counted; and the CPU seconds manad spent per GB delivered.

var (
	tcpMTUs    = []int{1500, 9000}
	tcpStreams = []int{1, 8}
)

// iperfPort is the port of the iperf3 server.
const iperfPort = "5211"

// tcpPath is a path of the TCP figures and the devices whose MTU a round sets (namespace, device).
type tcpPath struct {
	path
	devs   [][2]string
	manad  bool
	target map[string]float64 // "1500/1", "1500/8", "9000/…": issue 14's ratio to veth
}

// tcpSample is one iperf3 run.
type tcpSample struct {
	bps         float64
	retransmits float64
	cpuPerGB    float64 // manad's CPU seconds per GB received (manad paths)
}

// tcpKey names one figure: MTU and streams.
func tcpKey(mtu, streams int) string { return fmt.Sprintf("%d/%d", mtu, streams) }

// manadPaths returns the manad paths of paths whose UDP figures are compared with veth's, as
// setupTCP names them, for a run without the TCP figures (--udp).
func manadPaths(paths []path) []tcpPath {
	var out []tcpPath
	for _, p := range paths {
		if p.name == "manad fragment" || p.name == "manad full-page" {
			out = append(out, tcpPath{path: p, manad: true})
		}
	}
	return out
}

// setupTCP adds the bridge path (two veths into a Linux bridge in a namespace of its own) and
// names the devices of the others.
func (b *bench) setupTCP(paths []path) ([]tcpPath, error) {
	var out []tcpPath
	manadTarget := map[string]float64{"1500/1": 0.5, "1500/8": 0.5, "9000/1": 0.8, "9000/8": 0.8}
	src := map[string]string{"veth": "va", "taprelay": "ppsra" + b.id, "manad fragment": "eth0", "manad full-page": "eth2"}
	for _, p := range paths {
		if d, ok := src[p.name]; ok {
			tp := tcpPath{path: p, devs: [][2]string{{p.src, d}, {p.dst, p.dstDev}}, manad: p.name != "veth" && p.name != "taprelay"}
			if tp.manad {
				tp.target = manadTarget
			}
			out = append(out, tp)
		}
	}
	ba, err := b.ns("ba")
	if err != nil {
		return nil, err
	}
	bb, err := b.ns("bb")
	if err != nil {
		return nil, err
	}
	br, err := b.ns("br")
	if err != nil {
		return nil, err
	}
	if err := errors.Join(
		run("ip", "-n", br, "link", "add", "br0", "type", "bridge"),
		run("ip", "link", "add", "bra", "netns", ba, "type", "veth", "peer", "name", "bp0", "netns", br),
		run("ip", "link", "add", "brb", "netns", bb, "type", "veth", "peer", "name", "bp1", "netns", br),
		run("ip", "-n", br, "link", "set", "bp0", "master", "br0"),
		run("ip", "-n", br, "link", "set", "bp1", "master", "br0"),
		run("ip", "-n", br, "link", "set", "bp0", "up"),
		run("ip", "-n", br, "link", "set", "bp1", "up"),
		run("ip", "-n", br, "link", "set", "br0", "up"),
		addr(ba, "bra", "10.246.0.1"), addr(bb, "brb", "10.246.0.2")); err != nil {
		return nil, err
	}
	bp := path{"bridge (two veths)", ba, bb, "10.246.0.2", "brb"}
	if err := run("ip", "netns", "exec", ba, "ping", "-c", "2", "-i", "0.2", "-W", "2", bp.dstIP); err != nil {
		return nil, fmt.Errorf("%s does not pass traffic: %w", bp.name, err)
	}
	out = append(out, tcpPath{path: bp, devs: [][2]string{{ba, "bra"}, {br, "bp0"}, {br, "bp1"}, {br, "br0"}, {bb, "brb"}}})
	return out, nil
}

// setMTU sets every TCP path's devices to mtu.
func setMTU(tps []tcpPath, mtu int) error {
	var errs []error
	for _, tp := range tps {
		for _, d := range tp.devs {
			errs = append(errs, run("ip", "-n", d[0], "link", "set", d[1], "mtu", strconv.Itoa(mtu)))
		}
	}
	return errors.Join(errs...)
}

// tcpRound measures every TCP figure once, path order rotated by round r, and leaves the MTU at
// 1500 (the UDP figures' MTU). manadPID is the daemon the manad paths run through.
func (b *bench) tcpRound(tps []tcpPath, r int, mtus, streams []int, manadPID int, res map[string]map[string][]tcpSample) error {
	defer setMTU(tps, 1500) // on an error; applyMTU below sets it and waits otherwise
	for _, mtu := range mtus {
		if err := applyMTU(tps, mtu); err != nil {
			return err
		}
		for i := range tps {
			tp := tps[(i+r)%len(tps)]
			for _, n := range streams {
				s, err := b.iperf(tp, n, manadPID)
				if err != nil {
					return fmt.Errorf("%s, TCP %d streams, MTU %d: %w", tp.name, n, mtu, err)
				}
				if res[tp.name] == nil {
					res[tp.name] = map[string][]tcpSample{}
				}
				k := tcpKey(mtu, n)
				res[tp.name][k] = append(res[tp.name][k], s)
			}
		}
	}
	return applyMTU(tps, 1500)
}

// applyMTU sets every path's devices to mtu and waits until each path carries it: manad's ports
// rebuild their queues for a new MTU (mana_change_mtu's detach and attach), longer on a loaded
// machine, and a measurement that starts before a port is back meets it rebuilding (an iperf3
// that moves nothing), so the wait is for a full-size frame to cross rather than a fixed time.
func applyMTU(tps []tcpPath, mtu int) error {
	if err := setMTU(tps, mtu); err != nil {
		return fmt.Errorf("MTU %d: %w", mtu, err)
	}
	for _, tp := range tps {
		if err := waitMTU(tp, mtu); err != nil {
			return err
		}
	}
	return nil
}

// mtuWait bounds waitMTU: a correctness limit (a port that never carries the new MTU), not a
// target.
const mtuWait = 30 * time.Second

// waitMTU waits until tp carries a frame of mtu bytes: an ICMP echo of that size with DF set
// (ping -M do) from its source namespace answered by its destination.
func waitMTU(tp tcpPath, mtu int) error {
	deadline := time.Now().Add(mtuWait)
	for {
		out, err := exec.Command("ip", "netns", "exec", tp.src, "ping", "-n", "-q", "-c", "1", "-W", "1",
			"-M", "do", "-s", strconv.Itoa(mtu-28), tp.dstIP).CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %d-byte frame crossed in %v after the MTU change: %v: %s", tp.name, mtu, mtuWait, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// iperfResult is the part of iperf3 -J's report the figures use.
type iperfResult struct {
	End struct {
		SumSent struct {
			Retransmits float64 `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			Bytes float64 `json:"bytes"`
			Bps   float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// iperf runs one iperf3 client with n streams along tp for b.dur (whole seconds, at least 1)
// against a one-off server, both outside manad's accounting; for a manad path it also reads
// manad's CPU time around the run.
func (b *bench) iperf(tp tcpPath, n, manadPID int) (tcpSample, error) {
	srv := exec.Command("ip", "netns", "exec", tp.dst, "iperf3", "-s", "-1", "-p", iperfPort)
	if err := srv.Start(); err != nil {
		return tcpSample{}, err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	secs := strconv.Itoa(max(1, int(math.Round(b.dur.Seconds()))))
	var t0 int64
	var out []byte
	var err error
	var res iperfResult
	for try := 0; try < 50; try++ { // until the server listens
		if tp.manad {
			if t0, err = cpuTicks(manadPID); err != nil {
				return tcpSample{}, err
			}
		}
		out, err = exec.Command("ip", "netns", "exec", tp.src, "iperf3", "-c", tp.dstIP, "-p", iperfPort,
			"-t", secs, "-P", strconv.Itoa(n), "-J").Output()
		res = iperfResult{}
		if jerr := json.Unmarshal(out, &res); jerr != nil && err == nil {
			err = jerr
		}
		if err == nil && res.End.SumReceived.Bps > 0 {
			break
		}
		if err == nil && res.Error != "" && !strings.Contains(res.Error, "Connection refused") {
			// It reached the server (a one-off: it is gone now) and failed there: say so
			// rather than retry against a server that no longer listens.
			return tcpSample{}, fmt.Errorf("iperf3: %s", res.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return tcpSample{}, fmt.Errorf("iperf3: %w %s", err, res.Error)
	}
	s := tcpSample{bps: res.End.SumReceived.Bps, retransmits: res.End.SumSent.Retransmits}
	if tp.manad {
		t1, err := cpuTicks(manadPID)
		if err != nil {
			return tcpSample{}, err
		}
		const hz = 100 // USER_HZ
		if gb := res.End.SumReceived.Bytes / 1e9; gb > 0 {
			s.cpuPerGB = float64(t1-t0) / hz / gb
		}
	}
	if s.bps == 0 {
		return tcpSample{}, fmt.Errorf("iperf3 moved nothing (its last report: %q)", res.Error)
	}
	return s, nil
}

// tcpRows turns the TCP samples into rows: throughput against veth's, retransmits against
// veth's, manad's CPU per GB; and the UDP delivery of manad's paths against veth's.
func tcpRows(tps []tcpPath, mtus, streams []int, res map[string]map[string][]tcpSample, udp map[string]map[int][]sample) []benchrow.Row {
	var out []benchrow.Row
	pick := func(ss []tcpSample, f func(tcpSample) float64) []float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		return v
	}
	ratio := func(a, b []float64) []float64 {
		var v []float64
		for i := range a {
			if i < len(b) && b[i] > 0 {
				v = append(v, a[i]/b[i])
			}
		}
		return v
	}
	mbps := func(s tcpSample) float64 { return s.bps / 1e6 }
	retr := func(s tcpSample) float64 { return s.retransmits }
	for _, mtu := range mtus {
		for _, n := range streams {
			k := tcpKey(mtu, n)
			veth := res["veth"][k]
			for _, tp := range tps {
				ss := res[tp.name][k]
				if len(ss) == 0 {
					continue // --udp
				}
				what := fmt.Sprintf("TCP %d stream(s), MTU %d, %s", n, mtu, tp.name)
				v := benchrow.StatOf(pick(ss, mbps))
				x := benchrow.Row{Issue: 14, Figure: what, Value: v.Median, Min: v.Min, Max: v.Max, Rounds: len(ss), Unit: "Mbit/s"}
				rv := benchrow.StatOf(pick(ss, retr))
				y := benchrow.Row{Issue: 14, Figure: "retransmits, " + what, Value: rv.Median, Min: rv.Min, Max: rv.Max, Rounds: len(ss), Unit: "segments"}
				if tp.name != "veth" {
					r := benchrow.StatOf(ratio(pick(ss, mbps), pick(veth, mbps)))
					x.Baseline, x.BaselineName, x.Ratio, x.RatioMin, x.RatioMax = benchrow.StatOf(pick(veth, mbps)).Median, "veth", r.Median, r.Min, r.Max
					y.Baseline, y.BaselineName = benchrow.StatOf(pick(veth, retr)).Median, "veth"
					// Per-round ratios where veth retransmitted at all; none: no ratio.
					if rr := benchrow.StatOf(ratio(pick(ss, retr), pick(veth, retr))); rr != (benchrow.Stat{}) {
						y.Ratio, y.RatioMin, y.RatioMax = rr.Median, rr.Min, rr.Max
					}
				}
				if t, ok := tp.target[k]; ok {
					x.Target = fmt.Sprintf("ratio ≥ %.1f", t)
					y.Target = benchrow.TargetAtMostBaseline
				}
				out = append(out, x, y)
				if tp.manad {
					c := benchrow.StatOf(pick(ss, func(s tcpSample) float64 { return s.cpuPerGB }))
					out = append(out, benchrow.Row{Issue: 14, Figure: "manad CPU per GB, " + what, Value: c.Median, Min: c.Min, Max: c.Max,
						Rounds: len(ss), Unit: "CPU s/GB"})
				}
			}
		}
	}
	for _, tp := range tps {
		if !tp.manad {
			continue
		}
		for _, sz := range sizes {
			if len(udp[tp.name][sz]) == 0 {
				continue // --iperf
			}
			var del, veth []float64
			for _, s := range udp[tp.name][sz] {
				del = append(del, s.delivered)
			}
			for _, s := range udp["veth"][sz] {
				veth = append(veth, s.delivered)
			}
			r := benchrow.StatOf(ratio(del, veth))
			v := benchrow.StatOf(del)
			x := benchrow.Row{Issue: 14, Figure: fmt.Sprintf("UDP %d B delivered, %s vs veth", sz, tp.name), Value: v.Median, Min: v.Min, Max: v.Max,
				Rounds: len(del), Unit: "pps", Baseline: benchrow.StatOf(veth).Median, BaselineName: "veth", Ratio: r.Median, RatioMin: r.Min, RatioMax: r.Max}
			if sz == 64 {
				x.Target = "ratio ≥ 0.8"
			}
			out = append(out, x)
		}
	}
	return out
}
