// Command report runs every benchmark of the project and every bench/ program, and prints one
// table: each figure over several rounds (median and min–max), the same-run peer it is compared
// with, the ratio between the two (the median of the per-round ratios, and their spread), the
// target the issue that asked for it names (with whether this run met it), and the benchmark or
// program each row comes from. `make bench` runs it; `make bench-readme` rewrites README's
// benchmark section with its Markdown output; `make bench-smoke` (CI) runs everything once, at
// the smallest size, and fails when any benchmark or program fails or a row lost its figures.
//
//	go run ./bench/report [-rounds 5] [-benchtime 1s] [-markdown] [-readme README.md] [-smoke]
//
// Conventions, so that a new benchmark joins without editing this command:
//
//   - Go benchmarks: every Benchmark function of every package runs (go test -bench . ./...,
//     -count = rounds; under -smoke -benchtime 1x -count 1). A benchmark that compares two things
//     measures both in the same invocation, interleaved (A B A B …), and reports both as metrics;
//     each -count run is one round. One that needs root calls tests/testenv.RequireRoot, so it
//     fails rather than skips under CI=true. A benchmark no row names is listed with its raw
//     metrics under "Other benchmarks".
//   - bench/ programs: every package main under bench/ (except this one) must accept -smoke: run
//     once with tiny durations (seconds: the whole smoke stays within a few minutes on a 2-core
//     machine), print its figures, exit non-zero when broken. Under `make bench` it
//     runs with -json -rounds N and prints one JSON object per row (see bench/internal/benchrow.Row: figure, value,
//     min, max, rounds, unit, and optionally baseline, baseline_name, ratio, ratio_min,
//     ratio_max, offered, sender_bound, peer_sender_bound, target; a sender-bound row is
//     flagged in the table). A program that is only a helper of another
//     (bench/taprelay, of bench/udppps) has the line "bench: helper" in its package comment and
//     runs only under -smoke; so does one with the line "bench: smoke-only", whose full run is a
//     make target of its own (bench/seeds: `make seeds` prints the seed threads' tables).
//
// Needs root for the benchmarks that build namespaces and TAP devices; without root they are
// skipped and their rows say "not run" (under CI=true they fail).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/manad/manad/bench/internal/benchrow"
)

// module is the module path the package lines start with.
const module = "github.com/manad/manad"

// row is one line of the report.
type row struct {
	issue    int
	figure   string
	source   string // the benchmark ("./pkg BenchmarkX/sub") or program ("./bench/x") it comes from
	unit     string
	value    stat   // over the rounds
	baseline stat   // the same-run peer, over the rounds; NaN when the figure has none
	baseName string // what the peer is
	ratio    stat   // median and spread of the per-round ratios value/peer
	rounds   int
	target   string
	met      string // "yes", "no" or "" (no target)
	note     string
	missing  bool // the source did not produce the figure
}

// stat is a figure over the rounds.
type stat struct{ med, min, max float64 }

var nan = stat{math.NaN(), math.NaN(), math.NaN()}

// statOf is the median (the upper one of an even count) and the extremes of v; NaN when v is
// empty.
func statOf(v []float64) stat {
	if len(v) == 0 {
		return nan
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return stat{s[len(s)/2], s[0], s[len(s)-1]}
}

// source says where a row's numbers come from: metrics of one Go benchmark, which measures the
// figure and its peer in the same invocation.
type source struct {
	issue      int
	figure     string
	pkg, bench string  // package and full benchmark name (without the -GOMAXPROCS suffix)
	value      string  // metric holding the value
	scale      float64 // applied to value and baseline
	unit       string  // unit shown
	baseline   string  // metric holding the peer ("" = none, or derived from ratio)
	baseName   string
	ratio      string // metric holding the ratio ("" = value/baseline per round)
	derived    bool   // peer = value / ratio (the benchmark reports only the ratio)
	target     string
	met        func(value, ratio float64) bool
	note       string
	// flags are notes added to the row when the benchmark reports the metric (as 1) in any
	// round: which peer it had to settle for.
	flags map[string]string
	// Where the load came from, to flag a row the sender limited: offered names the metric
	// of what the sender offered (sender-bound when the value reaches 95% of it), surplus the
	// metric of what the path had to drop (sender-bound when it is 0).
	offered, surplus string
}

var sources = slices.Concat([]source{
	{issue: 2, figure: "page pool alloc+free, full-page, owner goroutine", pkg: "./vnic/pagepool", bench: "BenchmarkBiasBaseline/full-page",
		value: "pool-ns/op", scale: 1, unit: "ns", baseline: "bias-ns/op", baseName: "kernel page_pool model, interleaved",
		target: "≤ 15 ns", met: func(v, _ float64) bool { return v <= 15 }},
	{issue: 2, figure: "page pool alloc+free, fragments 31×2112 (64K)", pkg: "./vnic/pagepool", bench: "BenchmarkFragFullRatio/64K-31x2112",
		value: "frag-ns/op", scale: 1, unit: "ns", baseline: "full-ns/op", baseName: "full-page, interleaved", ratio: "frag/full",
		target: "≤ 1.3× full-page", met: func(_, r float64) bool { return r <= 1.3 }},
	{issue: 2, figure: "page pool alloc+free, fragments 2×1856 (4K)", pkg: "./vnic/pagepool", bench: "BenchmarkFragFullRatio/4K-2x1856",
		value: "frag-ns/op", scale: 1, unit: "ns", baseline: "full-ns/op", baseName: "full-page, interleaved", ratio: "frag/full",
		target: "≤ 1.3× full-page", met: func(_, r float64) bool { return r <= 1.3 }},
	{issue: 2, figure: "page pool free from another goroutine (return ring)", pkg: "./vnic/pagepool", bench: "BenchmarkBiasBaseline/remote",
		value: "pool-ns/op", scale: 1, unit: "ns", baseline: "bias-ns/op", baseName: "kernel bias-trick model, interleaved",
		target: "≤ 60 ns", met: func(v, _ float64) bool { return v <= 60 }},
	{issue: 2, figure: "full-page-rx flip, 16 queues × 1024, MTU 1500, 4K", pkg: "./vnic", bench: "BenchmarkPrivFlagFlip/4K",
		value: "ns/op", scale: 1e-6, unit: "ms", baseline: "close+open-ns/op", baseName: "close + open of a twin port, interleaved", ratio: "flip/close+open",
		target: "≤ 20 ms", met: func(v, _ float64) bool { return v <= 20 }},
	{issue: 2, figure: "peak memory during that flip", pkg: "./vnic", bench: "BenchmarkPrivFlagFlip/4K",
		value: "peak-bytes", scale: 1.0 / (1 << 20), unit: "MiB", baseName: "steady rings", ratio: "peak/steady", derived: true,
		target: "reported (old and new rings coexist: 2×)"},
	{issue: 3, figure: "PRIVFLAGS_GET round trip p50, manad binary", pkg: "./tests/integration", bench: "BenchmarkGetRoundTrip/PRIVFLAGS_GET",
		value: "manad-p50-ns", scale: 1e-3, unit: "µs", baseline: "kernel-p50-ns", baseName: "kernel PRIVFLAGS_GET on a veth, alternating",
		ratio: "p50-ratio", target: "≤ 3× the kernel", met: func(_, r float64) bool { return r <= 3 },
		note: "kernel answers EOPNOTSUPP (veth has no private flags)"},
	getRoundTrip("CHANNELS_GET", "CHANNELS_GET", "a veth"),
	getRoundTrip("STRSET_GET (statistics)", "STRSET_GET-stats", "a veth with as many statistics strings"),
	getRoundTrip("RINGS_GET", "RINGS_GET", "the first device here that has ring parameters"),
	getRoundTrip("PRIVFLAGS_GET", "PRIVFLAGS_GET", "a veth"),
	getRoundTrip("LINKINFO_GET", "LINKINFO_GET", "a veth"),
	getRoundTrip("LINKMODES_GET", "LINKMODES_GET", "a veth"),
	getRoundTrip("LINKSTATE_GET", "LINKSTATE_GET", "a veth"),
	getRoundTrip("FEATURES_GET", "FEATURES_GET", "a veth"),
	getRoundTrip("COALESCE_GET", "COALESCE_GET", "the first device here that has coalescing"),
	getRoundTrip("RSS_GET", "RSS_GET", "the first device here that has RSS"),
	getRoundTrip("TSINFO_GET", "TSINFO_GET", "a veth"),
	getRoundTrip("STATS_GET (standard groups)", "STATS_GET", "a veth"),
	{issue: 10, figure: "PORT_GET round trip p50, manad binary", pkg: "./tests/integration", bench: "BenchmarkGetRoundTrip/PORT_GET",
		value: "manad-p50-ns", scale: 1e-3, unit: "µs", baseline: "kernel-p50-ns", baseName: "rtnetlink RTM_GETLINK of a veth (the kernel has no manad family), alternating",
		ratio: "p50-ratio", target: "≤ 2× the kernel", met: func(_, r float64) bool { return r <= 2 }},
	{issue: 26, figure: "PRIVFLAGS_GET round trip p50, static Go program under manactl exec", pkg: "./tests/exec", bench: "BenchmarkExecRoundTrip",
		value: "exec-privflags-p50-ns", scale: 1e-3, unit: "µs", baseline: "kernel-privflags-p50-ns", baseName: "the kernel's on a veth, same program without manactl exec, alternating",
		ratio: "privflags-p50-ratio", target: "≤ 3× the kernel", met: func(_, r float64) bool { return r <= 3 },
		note: "kernel answers EOPNOTSUPP (veth has no private flags)"},
	{issue: 26, figure: "RINGS_GET round trip p50, static Go program under manactl exec", pkg: "./tests/exec", bench: "BenchmarkExecRoundTrip",
		value: "exec-rings-p50-ns", scale: 1e-3, unit: "µs", baseline: "kernel-rings-p50-ns", baseName: "the kernel's on a veth, same program without manactl exec, alternating",
		ratio: "rings-p50-ratio", target: "≤ 3× the kernel", met: func(_, r float64) bool { return r <= 3 },
		note: "kernel answers EOPNOTSUPP (veth has no ring parameters)"},
	{issue: 26, figure: "PRIVFLAGS_GET to a veth under manactl exec (the bridge on the kernel's path)", pkg: "./tests/exec", bench: "BenchmarkExecRoundTrip",
		value: "exec-kernel-privflags-p50-ns", scale: 1e-3, unit: "µs", baseline: "kernel-privflags-p50-ns", baseName: "the same without manactl exec, alternating",
		target: "reported"},
	{issue: 26, figure: "manactl exec start-up (exec -- true)", pkg: "./tests/exec", bench: "BenchmarkExecStartup",
		value: "exec-p50-ns", scale: 1e-6, unit: "ms", baseline: "bare-p50-ns", baseName: "true alone, alternating",
		ratio: "startup-ratio", target: "reported"},
	getRoundTrip("netdev dev-get", "netdev-dev-get", "a veth"),
	getRoundTrip("netdev queue-get", "netdev-queue-get", "a veth"),
	getRoundTrip("netdev qstats-get (dump)", "netdev-qstats-get", "the first device here that has queue statistics"),
	getRoundTrip("netdev page-pool-get (dump)", "netdev-page-pool-get", "a veth: napi-get, 16 NAPIs as the port's 16 pools"),
	{issue: 6, figure: "forwarding appliance (seed 002), full-page mode", pkg: "./tests/scenarios", bench: "BenchmarkForwarding",
		value: "full-fwd-pps", scale: 1, unit: "pps", baseline: "frag-fwd-pps", baseName: "fragment mode, A B B A", ratio: "full/frag",
		target: "reported", offered: "full-offered-pps"},
	{issue: 4, figure: "XDP program run per 1500-B frame", pkg: "./daemon/xdp", bench: "BenchmarkRun/pass",
		value: "run-ns/op", scale: 1e-3, unit: "µs", baseline: "baseline-ns/op", baseName: "cilium Program.Run, interleaved", ratio: "x-baseline"},
	{issue: 4, figure: "UDP 64-B frames through the data path (in-process)", pkg: "./daemon/datapath", bench: "BenchmarkUDPPath/frame=64B",
		value: "manad-pps", scale: 1, unit: "pps", baseline: "relay-pps", baseName: "TAP relay, rotating turns", ratio: "manad/relay",
		target: "≥ 0.9× relay", met: func(_, r float64) bool { return r >= 0.9 }, surplus: "manad-surplus-pps"},
	{issue: 4, figure: "UDP 1400-B frames through the data path (in-process)", pkg: "./daemon/datapath", bench: "BenchmarkUDPPath/frame=1400B",
		value: "manad-pps", scale: 1, unit: "pps", baseline: "relay-pps", baseName: "TAP relay, rotating turns", ratio: "manad/relay",
		target: "≥ 0.9× relay", met: func(_, r float64) bool { return r >= 0.9 }, surplus: "manad-surplus-pps"},
	{issue: 13, figure: "1,000 ports in one netns: manad ready", pkg: "./bench/scale", bench: "BenchmarkPorts/ports=1000",
		value: "ready-ms", scale: 1e-3, unit: "s", target: "≤ 2 s", met: func(v, _ float64) bool { return v <= 2 }},
	{issue: 13, figure: "1,000 ports: all up after one ip -batch", pkg: "./bench/scale", bench: "BenchmarkPorts/ports=1000",
		value: "bringup-ms", scale: 1e-3, unit: "s", baseline: "kernel-bringup-ms", baseName: "same ip -batch, TAPs held by no daemon",
		target: "≤ 10 s", met: func(v, _ float64) bool { return v <= 10 }},
	{issue: 13, figure: "1,000 ports: shutdown", pkg: "./bench/scale", bench: "BenchmarkPorts/ports=1000",
		value: "shutdown-ms", scale: 1e-3, unit: "s", target: "≤ 2 s", met: func(v, _ float64) bool { return v <= 2 }},
	{issue: 13, figure: "100 ports on one shared segment: all up after one ip -batch", pkg: "./bench/scale", bench: "BenchmarkSharedSegment/ports=100",
		value: "bringup-ms", scale: 1e-3, unit: "s", baseline: "bridge-bringup-ms", baseName: "same ip -batch, 100 TAPs on a Linux bridge",
		target: "reported"},
	{issue: 13, figure: "100 ports on one shared segment: shutdown", pkg: "./bench/scale", bench: "BenchmarkSharedSegment/ports=100",
		value: "shutdown-ms", scale: 1e-3, unit: "s", baseline: "bridge-teardown-ms", baseName: "deleting the bridge and its 100 TAPs (one group request)",
		target: "reported"},
	{issue: 12, figure: "frame through a segment whose capture reader is behind (drops, counted)", pkg: "./daemon/datapath", bench: "BenchmarkForwardCapture",
		value: "behind-ns/frame", scale: 1, unit: "ns", baseline: "none-ns/frame", baseName: "the same segment without a capture, alternating", ratio: "behind/none",
		target: "≤ 2× no capture", met: func(_, r float64) bool { return r <= 2 }},
	{issue: 13, figure: "1,000 ports on one shared segment: manad ready", pkg: "./bench/scale", bench: "BenchmarkSharedSegment/ports=1000",
		value: "ready-ms", scale: 1e-3, unit: "s", target: "≤ 2 s", met: func(v, _ float64) bool { return v <= 2 }},
	{issue: 13, figure: "1,000 ports on one shared segment: all up after one ip -batch", pkg: "./bench/scale", bench: "BenchmarkSharedSegment/ports=1000",
		value: "bringup-ms", scale: 1e-3, unit: "s", baseline: "bridge-bringup-ms", baseName: "same ip -batch, 1,000 TAPs on a Linux bridge",
		target: "reported"},
	{issue: 13, figure: "1,000 ports on one shared segment: port list during the flood, slowest", pkg: "./bench/scale", bench: "BenchmarkSharedSegment/ports=1000",
		value: "control-max-ms", scale: 1e-3, unit: "s", target: "a few seconds (≤ 5 s)", met: func(v, _ float64) bool { return v <= 5 },
		note: "median in control-p50-ms"},
	{issue: 13, figure: "1,000 ports on one shared segment: shutdown", pkg: "./bench/scale", bench: "BenchmarkSharedSegment/ports=1000",
		value: "shutdown-ms", scale: 1e-3, unit: "s", baseline: "bridge-teardown-ms", baseName: "deleting the bridge and its 1,000 TAPs (one group request)",
		target: "≤ 2 s", met: func(v, _ float64) bool { return v <= 2 }},
}, binaryRoundTrips("udp"), binaryRoundTrips("icmp"), []source{
	againstFloor("udp"), againstFloor("icmp"),
	roundTripCPU(rrBinary, "udp", "manad-on"), roundTripCPU(rrBinary, "udp", "manad-off"), roundTripCPU(rrBinary, "udp", rrFloor),
	roundTripCPU(rrBinary, "icmp", "manad-on"), roundTripCPU(rrBinary, "icmp", "manad-off"), roundTripCPU(rrBinary, "icmp", rrFloor),
	roundTripSleeps(rrBinary, "udp", "manad-on"), roundTripSleeps(rrBinary, "udp", "manad-off"), roundTripSleeps(rrBinary, "udp", rrFloor),
	// The data path alone, in the benchmark's process (no daemon around it): what the
	// binary's rows owe to the rest of manad.
	roundTrip(rrInProcess, "udp", "manad-on", "p50", "reported", 0),
	roundTrip(rrInProcess, "udp", "manad-off", "p50", "reported", 0),
	roundTripCPU(rrInProcess, "udp", "manad-on"), roundTripCPU(rrInProcess, "udp", "manad-off"),
	{issue: 29, figure: "16 idle ports × 8 queues: CPU (polling off)", pkg: "./daemon/datapath", bench: "BenchmarkIdle16Ports",
		value: "cpu-%", scale: 1, unit: "% of a CPU", target: "< 0.5 %", met: func(v, _ float64) bool { return v < 0.5 }},
})

// rrPaths names BenchmarkRoundTrip's and BenchmarkRoundTripBinary's paths in the report.
var rrPaths = map[string]string{
	"manad-on": "manad ports, polling on", "manad-off": "manad ports, polling off", "relay": "TAP relay", "veth": "veth pair",
	rrFloor: "bench/taprelay -poll (busy-poll floor, a model)",
}

// rrFloor is BenchmarkRoundTripBinary's path through bench/taprelay -poll: the least a
// busy-polling user-space forwarder does (a system call per frame and per empty look), the
// floor that manad's polling is measured against.
const rrFloor = "relay-poll"

// rrKinds names their round trips in the report.
var rrKinds = map[string]string{"udp": "UDP RR 64 B", "icmp": "ping 64 B"}

// rrBench is one of daemon/datapath's round-trip benchmarks (issue 29) and what its rows say of
// where the data path ran.
type rrBench struct{ name, where, relay string }

var (
	// rrBinary runs the manad binary, against bench/taprelay.
	rrBinary = rrBench{"BenchmarkRoundTripBinary", "manad binary", "bench/taprelay"}
	// rrInProcess runs the data path in the benchmark's process, against a relay there.
	rrInProcess = rrBench{"BenchmarkRoundTrip", "in-process data path", "in-process TAP relay"}
)

// binaryRoundTrips are the p50 and p99 rows of kind through the manad binary: polling on against
// issue 29's targets, polling off, bench/taprelay and bench/taprelay -poll (the busy-poll floor)
// reported.
func binaryRoundTrips(kind string) []source {
	const off = "reported (no worse than before polling)"
	return []source{
		roundTrip(rrBinary, kind, "manad-on", "p50", "≤ 3× veth", 3),
		roundTrip(rrBinary, kind, "manad-on", "p99", "≤ 5× veth", 5),
		roundTrip(rrBinary, kind, "manad-off", "p50", off, 0),
		roundTrip(rrBinary, kind, "manad-off", "p99", off, 0),
		roundTrip(rrBinary, kind, "relay", "p50", "reported", 0),
		roundTrip(rrBinary, kind, "relay", "p99", "reported", 0),
		roundTrip(rrBinary, kind, rrFloor, "p50", "reported", 0),
		roundTrip(rrBinary, kind, rrFloor, "p99", "reported", 0),
	}
}

// againstFloor is the row of kind's p50 through manad's ports with polling on against
// bench/taprelay -poll's in the same run (BenchmarkRoundTripBinary's
// manad-on-KIND-p50-vs-relay-poll): how far manad's polling is above the floor of any
// busy-polling forwarder on the machine, where veth's is below what a forwarder can reach.
func againstFloor(kind string) source {
	return source{issue: 29, figure: fmt.Sprintf("%s round trip p50, %s, against bench/taprelay -poll (%s)", rrKinds[kind], rrPaths["manad-on"], rrBinary.where),
		pkg: "./daemon/datapath", bench: rrBinary.name,
		value: "manad-on-" + kind + "-p50-ns", scale: 1e-3, unit: "µs", baseline: rrFloor + "-" + kind + "-p50-ns",
		baseName: rrPaths[rrFloor] + ", interleaved", ratio: "manad-on-" + kind + "-p50-vs-" + rrFloor, target: "reported"}
}

// roundTrip is a latency row of bench: kind's pct round-trip time along path against a veth
// pair's in the same run; limit > 0 makes the target a ratio to veth.
func roundTrip(bench rrBench, kind, path, pct, target string, limit float64) source {
	name := rrPaths[path]
	if path == "relay" {
		name = bench.relay
	}
	src := source{issue: 29, figure: fmt.Sprintf("%s round trip %s, %s (%s)", rrKinds[kind], pct, name, bench.where),
		pkg: "./daemon/datapath", bench: bench.name,
		value: path + "-" + kind + "-" + pct + "-ns", scale: 1e-3, unit: "µs", baseline: "veth-" + kind + "-" + pct + "-ns",
		baseName: "veth pair, interleaved", ratio: path + "-" + kind + "-" + pct + "-ratio", target: target}
	if limit > 0 {
		src.met = func(_, r float64) bool { return r <= limit }
	}
	if kind == "icmp" {
		src.note = "veth's ping never sleeps (the reply is made inside the sender's sendmsg): UDP RR is the fairer figure"
	}
	return src
}

// roundTripCPU is the CPU row of bench for path: the forwarder's CPU seconds per million round
// trips of kind (manad's or the relay's process), against the relay's.
func roundTripCPU(bench rrBench, kind, path string) source {
	return source{issue: 29, figure: fmt.Sprintf("%s: CPU per million round trips, %s (%s)", rrKinds[kind], rrPaths[path], bench.where),
		pkg: "./daemon/datapath", bench: bench.name,
		value: path + "-" + kind + "-cpu-s/Mrt", scale: 1, unit: "s", baseline: "relay-" + kind + "-cpu-s/Mrt",
		baseName: bench.relay + "'s, interleaved", target: "reported"}
}

// roundTripSleeps is the wake-up row of bench for path: the forwarder's threads' sleeps
// (voluntary context switches) per round trip of kind, one per wake-up of a parked thread,
// against the relay's.
func roundTripSleeps(bench rrBench, kind, path string) source {
	return source{issue: 29, figure: fmt.Sprintf("%s: the forwarder's sleeps (wake-ups) per round trip, %s (%s)", rrKinds[kind], rrPaths[path], bench.where),
		pkg: "./daemon/datapath", bench: bench.name,
		value: path + "-" + kind + "-sleeps/rt", scale: 1, unit: "sleeps", baseline: "relay-" + kind + "-sleeps/rt",
		baseName: bench.relay + "'s, interleaved", target: "reported (polling saves the wake-ups)"}
}

// getRoundTrip is the row of tests/integration's BenchmarkGetRoundTrip/sub: msg's round trip to
// the manad binary against the kernel's same message to peer (issue 10: every GET within 2× the
// kernel), and notes for the peers the benchmark had to settle for.
func getRoundTrip(msg, sub, peer string) source {
	return source{issue: 10, figure: msg + " round trip p50, manad binary", pkg: "./tests/integration", bench: "BenchmarkGetRoundTrip/" + sub,
		value: "manad-p50-ns", scale: 1e-3, unit: "µs", baseline: "kernel-p50-ns", baseName: "kernel's on " + peer + ", alternating",
		ratio: "p50-ratio", target: "≤ 2× the kernel", met: func(_, r float64) bool { return r <= 2 },
		flags: map[string]string{
			"kernel-eopnotsupp":  "no device here implements it: the kernel answers EOPNOTSUPP, skipping the driver",
			"kernel-host-device": "veth lacks it: the kernel peer is a device of the host's namespace",
			"kernel-empty-dump":  "the kernel's dump is empty (no driver here lists page pools)",
			"kernel-napi-dump":   "no driver here lists page pools: the kernel peer is the veth's napi-get dump, as many messages",
		}}
}

// result is one run of one benchmark: metric unit → value.
type result map[string]float64

// The toolchain's benchmark line: name-N  iterations  value unit  value unit …
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// The toolchain's line for a skipped benchmark.
var skipLine = regexp.MustCompile(`^\s*--- SKIP: (Benchmark\S+?)(?:-\d+)?(?:\s|$)`)

// parseBench reads go test -bench output and returns "./pkg BenchmarkName" → its runs, the keys
// in the order they first ran, and the benchmarks that skipped.
func parseBench(r io.Reader) (map[string][]result, []string, []string) {
	out := map[string][]result{}
	var order, skipped []string
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = "./" + strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
			continue
		}
		if m := skipLine.FindStringSubmatch(line); m != nil {
			skipped = append(skipped, pkg+" "+m[1])
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		vals := result{}
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				vals[f[i+1]] = v
			}
		}
		key := pkg + " " + m[1]
		if _, seen := out[key]; !seen {
			order = append(order, key)
		}
		out[key] = append(out[key], vals)
	}
	return out, order, skipped
}

// runBenchmarks runs every benchmark of the module, count times each, and returns their runs,
// the order they ran in, and the ones that skipped. The toolchain's output goes to stderr as it
// comes, so a long run shows progress.
func runBenchmarks(count int, benchtime string) (map[string][]result, []string, []string, error) {
	// -v: without it the toolchain does not say a benchmark skipped.
	args := []string{"test", "-v", "-run", "^$", "-bench", ".", "-benchmem", "-count", strconv.Itoa(count), "-benchtime", benchtime, "./..."}
	cmd := exec.Command("go", args...)
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	res, order, skipped := parseBench(&buf)
	if err != nil {
		return res, order, skipped, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return res, order, skipped, nil
}

// fromSource builds a row from the runs of s's benchmark: one round per run.
func fromSource(s source, runs []result) row {
	r := row{issue: s.issue, figure: s.figure, source: s.pkg + " " + s.bench, unit: s.unit, baseName: s.baseName,
		target: s.target, note: s.note, value: nan, baseline: nan, ratio: nan}
	var vals, bases, ratios []float64
	for _, m := range runs {
		v, ok := m[s.value]
		if !ok {
			continue
		}
		vals = append(vals, v*s.scale)
		var b, x float64 = math.NaN(), math.NaN()
		if s.baseline != "" {
			if bv, ok := m[s.baseline]; ok {
				b = bv * s.scale
			}
		}
		if s.ratio != "" {
			if rv, ok := m[s.ratio]; ok {
				x = rv
			}
		} else if b != 0 {
			x = v * s.scale / b
		}
		if s.derived && x != 0 {
			b = v * s.scale / x
		}
		if !math.IsNaN(b) {
			bases = append(bases, b)
		}
		if !math.IsNaN(x) {
			ratios = append(ratios, x)
		}
	}
	if len(vals) == 0 {
		r.missing = true
		r.note = "not run (see stderr)"
		return r
	}
	r.rounds, r.value, r.baseline, r.ratio = len(vals), statOf(vals), statOf(bases), statOf(ratios)
	if (s.baseline != "" && len(bases) == 0) || (s.ratio != "" && len(ratios) == 0) {
		r.missing = true // the benchmark ran but no longer reports the peer the row names
		r.note = strings.TrimPrefix(r.note+"; peer metric missing", "; ")
	}
	if senderBound(s, runs) {
		r.note = strings.TrimPrefix(r.note+"; sender-bound: the path kept up with the sender, a lower bound", "; ")
	}
	for _, metric := range slices.Sorted(maps.Keys(s.flags)) {
		if slices.ContainsFunc(runs, func(m result) bool { return m[metric] == 1 }) {
			r.note = strings.TrimPrefix(r.note+"; "+s.flags[metric], "; ")
		}
	}
	if s.met != nil {
		r.met = "no"
		if s.met(r.value.med, r.ratio.med) {
			r.met = "yes"
		}
	}
	return r
}

// senderBound reports whether, in the median round, the sender of s's benchmark was the limit:
// the path delivered at least 95% of what was offered, or dropped nothing.
func senderBound(s source, runs []result) bool {
	var fracs, surplus []float64
	for _, m := range runs {
		if o, ok := m[s.offered]; ok && o > 0 {
			fracs = append(fracs, m[s.value]/o)
		}
		if d, ok := m[s.surplus]; ok {
			surplus = append(surplus, d)
		}
	}
	return (len(fracs) > 0 && statOf(fracs).med >= 0.95) || (len(surplus) > 0 && statOf(surplus).med == 0)
}

// rowOf turns a program's JSON row into a report row.
func rowOf(prog string, p benchrow.Row) row {
	r := row{issue: p.Issue, figure: p.Figure, source: prog, unit: p.Unit, rounds: p.Rounds, target: p.Target,
		value: stat{p.Value, p.Min, p.Max}, baseline: nan, ratio: nan}
	if p.Baseline != 0 {
		r.baseline = stat{p.Baseline, p.Baseline, p.Baseline}
		r.baseName = p.BaselineName
		r.ratio = stat{p.Ratio, p.RatioMin, p.RatioMax}
		if p.Ratio == 0 && p.RatioMax == 0 && p.Value != 0 {
			r.ratio = nan // a peer of 0 in every round: no ratio (omitempty dropped it)
		}
	}
	switch {
	case p.Target == benchrow.TargetAtMostBaseline:
		r.target = "≤ " + p.BaselineName + "'s"
		if p.BaselineName != "" {
			r.met = "no"
			if p.Value <= p.Baseline {
				r.met = "yes"
			}
		}
	case strings.HasPrefix(p.Target, "ratio ≥ "):
		t, err := strconv.ParseFloat(strings.TrimPrefix(p.Target, "ratio ≥ "), 64)
		if err == nil {
			r.target = fmt.Sprintf("≥ %g× %s", t, p.BaselineName)
			r.met = "no"
			if p.Ratio >= t {
				r.met = "yes"
			}
		}
	case strings.HasPrefix(p.Target, "< ") && strings.HasSuffix(p.Target, "%"):
		t, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(p.Target, "< "), "%"), 64)
		if err == nil {
			r.met = "no"
			if p.Value < t {
				r.met = "yes"
			}
		}
	}
	var notes []string
	if p.SenderBound {
		// The path kept up with everything the sender offered: the figure is the sender's.
		notes = append(notes, fmt.Sprintf("sender-bound: delivered ≈ offered (%s pps), a lower bound", num(p.Offered)))
	}
	if p.PeerSenderBound {
		notes = append(notes, "peer sender-bound: the ratio is an upper bound")
	}
	r.note = strings.Join(notes, "; ")
	return r
}

// program is a package main under bench/.
type program struct {
	dir    string // "./bench/x"
	helper bool   // "bench: helper" or "bench: smoke-only" in its package comment: -smoke only
}

// programs lists bench/'s programs other than this one.
func programs() ([]program, error) {
	dirs, err := filepath.Glob("bench/*")
	if err != nil {
		return nil, err
	}
	var out []program
	for _, d := range dirs {
		if filepath.Base(d) == "report" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(d, "*.go"))
		isMain, helper := false, false
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			src := string(b)
			if regexp.MustCompile(`(?m)^package main\b`).MatchString(src) {
				isMain = true
			}
			if regexp.MustCompile(`(?m)^// bench: (helper|smoke-only)\b`).MatchString(src) {
				helper = true
			}
		}
		if isMain {
			out = append(out, program{dir: "./" + filepath.ToSlash(d), helper: helper})
		}
	}
	return out, nil
}

// runProgram runs p with args, its stderr passed through, and returns its stdout.
func runProgram(p program, args ...string) ([]byte, error) {
	cmd := exec.Command("go", append([]string{"run", p.dir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("go run %s %s: %w", p.dir, strings.Join(args, " "), err)
	}
	return out.Bytes(), nil
}

// programRows runs every non-helper program with -json -rounds and decodes its rows.
func programRows(progs []program, rounds int) ([]row, []error) {
	var rows []row
	var errs []error
	for _, p := range progs {
		if p.helper {
			continue
		}
		fmt.Fprintf(os.Stderr, "running %s…\n", p.dir)
		out, err := runProgram(p, "-json", "-rounds", strconv.Itoa(rounds))
		if err != nil {
			errs = append(errs, err)
			rows = append(rows, row{figure: p.dir, source: p.dir, value: nan, baseline: nan, ratio: nan, missing: true, note: "failed (see stderr)"})
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var pr benchrow.Row
			if err := dec.Decode(&pr); err != nil {
				if !errors.Is(err, io.EOF) {
					errs = append(errs, fmt.Errorf("%s: JSON output: %w", p.dir, err))
				}
				break
			}
			rows = append(rows, rowOf(p.dir, pr))
		}
	}
	return rows, errs
}

// smokePrograms runs every program with -smoke; each must succeed and print something.
func smokePrograms(progs []program) []error {
	var errs []error
	for _, p := range progs {
		fmt.Fprintf(os.Stderr, "smoke: %s -smoke\n", p.dir)
		out, err := runProgram(p, "-smoke")
		os.Stdout.Write(out)
		switch {
		case err != nil:
			errs = append(errs, err)
		case len(bytes.TrimSpace(out)) == 0:
			errs = append(errs, fmt.Errorf("%s -smoke printed no figure", p.dir))
		}
	}
	return errs
}

func main() {
	rounds := flag.Int("rounds", 5, "rounds of every benchmark and program (go test -count)")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime of one round")
	markdown := flag.Bool("markdown", false, "print a Markdown table")
	readme := flag.String("readme", "", "rewrite the benchmark section of this file (between "+beginMarker+" and "+endMarker+")")
	smoke := flag.Bool("smoke", false, "run every benchmark once (-benchtime 1x) and every bench/ program with -smoke; fail on any failure")
	flag.Parse()
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "report: -rounds must be at least 1")
		os.Exit(2)
	}
	if *smoke {
		*rounds, *benchtime = 1, "1x"
	}
	// The bench/ programs are found, and go test ./... run, relative to the working directory.
	if _, err := os.Stat("go.mod"); err != nil {
		fmt.Fprintln(os.Stderr, "report: run from the module root (make bench does):", err)
		os.Exit(2)
	}
	var errs []error
	progs, err := programs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}

	results, order, skipped, err := runBenchmarks(*rounds, *benchtime)
	if err != nil {
		errs = append(errs, err)
	}
	for _, k := range skipped {
		// Under CI=true a benchmark may not skip (tests/testenv fails it instead); one that
		// skips on its own would silently leave the smoke.
		if os.Getenv("CI") == "true" {
			errs = append(errs, fmt.Errorf("%s skipped under CI=true", k))
		} else {
			fmt.Fprintf(os.Stderr, "report: %s skipped\n", k)
		}
	}
	used := map[string]bool{}
	var rows []row
	for _, s := range sources {
		key := s.pkg + " " + s.bench
		used[key] = true
		rows = append(rows, fromSource(s, results[key]))
	}
	// Everything can run as root, and must in CI; otherwise the root-only benchmarks skip and
	// the programs (which all need root) fail, which is reported but not an error.
	strict := os.Geteuid() == 0 || os.Getenv("CI") == "true"
	var perrs []error
	if *smoke {
		perrs = smokePrograms(progs)
	} else {
		var prow []row
		prow, perrs = programRows(progs, *rounds)
		rows = append(rows, prow...)
	}
	if strict {
		errs = append(errs, perrs...)
		// A row without figures then means a benchmark or metric it names was renamed or
		// dropped: the report has rotted.
		for _, r := range rows {
			if r.missing {
				errs = append(errs, fmt.Errorf("row %q: %s produced no figure", r.figure, r.source))
			}
		}
	} else if len(perrs) > 0 {
		fmt.Fprintln(os.Stderr, "report: not root: the bench/ programs could not run")
	}

	if *smoke { // one tiny round says nothing about a target
		for i := range rows {
			rows[i].met = ""
		}
	}

	var table bytes.Buffer
	if *markdown || *readme != "" {
		writeMarkdown(&table, rows, results, order, used, *rounds, *benchtime)
	} else {
		writeText(&table, rows, results, order, used)
	}
	os.Stdout.Write(table.Bytes())
	if *readme != "" && len(errs) == 0 {
		if err := rewriteReadme(*readme, table.String()); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(os.Stderr, "report: rewrote the benchmark section of %s\n", *readme)
		}
	}
	for _, r := range rows {
		if r.met == "no" {
			fmt.Fprintf(os.Stderr, "target missed: %s\n", r.figure)
		}
	}
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "report:", e)
		}
		if *readme != "" {
			fmt.Fprintf(os.Stderr, "report: %s left as it was\n", *readme)
		}
		os.Exit(1)
	}
}

// The markers around README's generated benchmark section.
const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
)

// replaceSection returns doc with the text between its one beginMarker line and its one
// endMarker line replaced by body; an error when the markers are missing, repeated or out of
// order.
func replaceSection(doc, body string) (string, error) {
	b, e := strings.Count(doc, beginMarker), strings.Count(doc, endMarker)
	if b != 1 || e != 1 {
		return "", fmt.Errorf("want one %s and one %s, found %d and %d", beginMarker, endMarker, b, e)
	}
	i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	if j < i {
		return "", fmt.Errorf("%s comes before %s", endMarker, beginMarker)
	}
	start := i + len(beginMarker)
	return doc[:start] + "\n" + strings.TrimSpace(body) + "\n" + doc[j:], nil
}

func rewriteReadme(path, table string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := replaceSection(string(doc), table)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// machine describes where the figures were measured: date, kernel, CPUs, Go.
func machine() string {
	kernel := "unknown kernel"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(b))
	}
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = " (" + strings.TrimSpace(v) + ")"
				break
			}
		}
	}
	return fmt.Sprintf("%s, %s, %d CPUs%s, %s", time.Now().UTC().Format("2006-01-02"), kernel, runtime.NumCPU(), cpu, runtime.Version())
}

func writeMarkdown(w io.Writer, rows []row, results map[string][]result, order []string, used map[string]bool, rounds int, benchtime string) {
	fmt.Fprintf(w, "Generated by `make bench-readme` on %s; %d rounds of each benchmark (-benchtime %s) and of each bench/ program.\n\n",
		machine(), rounds, benchtime)
	fmt.Fprintln(w, "| issue | figure | rounds | median [min–max] | same-run peer (median) | ratio, median [min–max] | target | met | source |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | `%s` |\n", issue(r), r.figure, roundsOf(r), value(r), peer(r),
			ratio(r), r.target, met(r), r.source)
	}
	others(w, results, order, used, "\nOther benchmarks (raw metrics, median of the rounds):\n\n", "- ")
}

func writeText(w io.Writer, rows []row, results map[string][]result, order []string, used map[string]bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ISSUE\tFIGURE\tROUNDS\tMEDIAN [MIN–MAX]\tSAME-RUN PEER\tRATIO [MIN–MAX]\tTARGET\tMET\tSOURCE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", issue(r), r.figure, roundsOf(r), value(r), peer(r), ratio(r), r.target, met(r), r.source)
	}
	tw.Flush()
	others(w, results, order, used, "\nOTHER BENCHMARKS (median of the rounds)\n", "")
}

// others lists the benchmarks no row is made of, with the median of every metric they report,
// so that the report shows every benchmark of the project.
func others(w io.Writer, results map[string][]result, order []string, used map[string]bool, title, prefix string) {
	var rest []string
	for _, k := range order {
		if !used[k] {
			rest = append(rest, k)
		}
	}
	if len(rest) == 0 {
		return
	}
	fmt.Fprint(w, title)
	for _, k := range rest {
		units := map[string][]float64{}
		for _, run := range results[k] {
			for u, v := range run {
				units[u] = append(units[u], v)
			}
		}
		var ms []string
		for _, u := range slices.Sorted(maps.Keys(units)) {
			ms = append(ms, num(statOf(units[u]).med)+" "+u)
		}
		fmt.Fprintf(w, "%s%s: %s\n", prefix, k, strings.Join(ms, ", "))
	}
}

func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "–"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.01 || a == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

func issue(r row) string {
	if r.issue == 0 {
		return "–"
	}
	return strconv.Itoa(r.issue)
}

func roundsOf(r row) string {
	if r.rounds == 0 {
		return "–"
	}
	return strconv.Itoa(r.rounds)
}

func spread(s stat) string {
	if math.IsNaN(s.med) {
		return "–"
	}
	return fmt.Sprintf("%s [%s–%s]", num(s.med), num(s.min), num(s.max))
}

func value(r row) string {
	if math.IsNaN(r.value.med) {
		return "–"
	}
	return spread(r.value) + " " + r.unit
}

func peer(r row) string {
	if math.IsNaN(r.baseline.med) {
		if r.baseName != "" {
			return r.baseName
		}
		return "–"
	}
	return fmt.Sprintf("%s %s (%s)", num(r.baseline.med), r.unit, r.baseName)
}

func ratio(r row) string {
	if math.IsNaN(r.ratio.med) {
		return "–"
	}
	return fmt.Sprintf("%s× [%s–%s]", num(r.ratio.med), num(r.ratio.min), num(r.ratio.max))
}

func met(r row) string {
	switch {
	case r.note != "" && r.met != "":
		return r.met + "; " + r.note
	case r.note != "":
		return r.note
	}
	return r.met
}
