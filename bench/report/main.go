// Command report runs every benchmark of the project and the bench/ scripts, and prints one table:
// each figure, its baseline measured in the same run, the ratio between the two, and the target
// the issue that asked for it names (with whether this run met it). `make bench` runs it.
//
// Needs root for the benchmarks that build namespaces and TAP devices (those are skipped, and
// said so in the table, otherwise).
//
//	go run ./bench/report [--benchtime 1s] [--udp-seconds 2] [--udp-rounds 5] [--markdown]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// row is one line of the report.
type row struct {
	issue    int
	figure   string
	value    float64
	unit     string
	baseline float64 // NaN when the figure has none
	baseName string
	ratio    float64 // NaN when the figure has none
	target   string
	met      string // "yes", "no" or "" (no target)
	note     string
}

// source says where a row's numbers come from: a Go benchmark's metrics.
type source struct {
	issue            int
	figure           string
	pkg, bench       string // package and full benchmark name (without the -GOMAXPROCS suffix)
	value            string // metric unit holding the value
	scale            float64
	unit             string // unit shown
	baseline         string // metric holding the baseline ("" = none)
	baseBench        string // benchmark holding the baseline metric, when not bench itself
	baseName         string
	ratio            string // metric holding the ratio ("" = value/baseline)
	target           string
	met              func(value, ratio float64) bool
	derivedBaseline  bool // baseline = value / ratio (the benchmark reports only the ratio)
	scaleBaselineToo bool
}

var sources = []source{
	{issue: 2, figure: "page pool alloc+free, full-page, owner goroutine", pkg: "./vnic/pagepool", bench: "BenchmarkAllocRecycle/full-page",
		value: "ns/op", scale: 1, unit: "ns", baseline: "full-ns/op", baseBench: "BenchmarkBiasBaseline/kernel-frag-vs-full",
		baseName: "kernel page_pool model", target: "≤ 15 ns", met: func(v, _ float64) bool { return v <= 15 }, scaleBaselineToo: true},
	{issue: 2, figure: "page pool alloc+free, fragments 31×2112 (64K)", pkg: "./vnic/pagepool", bench: "BenchmarkFragFullRatio/64K-31x2112",
		value: "frag-ns/op", scale: 1, unit: "ns", baseline: "full-ns/op", baseName: "full-page, same run", ratio: "frag/full",
		target: "≤ 1.3× full-page", met: func(_, r float64) bool { return r <= 1.3 }, scaleBaselineToo: true},
	{issue: 2, figure: "page pool alloc+free, fragments 2×1856 (4K)", pkg: "./vnic/pagepool", bench: "BenchmarkFragFullRatio/4K-2x1856",
		value: "frag-ns/op", scale: 1, unit: "ns", baseline: "full-ns/op", baseName: "full-page, same run", ratio: "frag/full",
		target: "≤ 1.3× full-page", met: func(_, r float64) bool { return r <= 1.3 }, scaleBaselineToo: true},
	{issue: 2, figure: "page pool free from another goroutine (return ring)", pkg: "./vnic/pagepool", bench: "BenchmarkBiasBaseline/remote",
		value: "pool-ns/op", scale: 1, unit: "ns", baseline: "bias-ns/op", baseName: "kernel bias-trick model", target: "≤ 60 ns",
		met: func(v, _ float64) bool { return v <= 60 }, scaleBaselineToo: true},
	{issue: 2, figure: "full-page-rx flip, 16 queues × 1024, MTU 1500, 4K", pkg: "./vnic", bench: "BenchmarkPrivFlagFlip/4K",
		value: "ns/op", scale: 1e-6, unit: "ms", baseName: "close + open", ratio: "flip/close+open", derivedBaseline: true,
		target: "≤ 20 ms", met: func(v, _ float64) bool { return v <= 20 }},
	{issue: 2, figure: "peak memory during that flip", pkg: "./vnic", bench: "BenchmarkPrivFlagFlip/4K",
		value: "peak-bytes", scale: 1.0 / (1 << 20), unit: "MiB", baseName: "steady rings", ratio: "peak/steady", derivedBaseline: true,
		target: "reported (old and new rings coexist: 2×)"},
	{issue: 2, figure: "RX model per frame, fragments (1400 B)", pkg: "./vnic", bench: "BenchmarkReceive/fragment",
		value: "ns/op", scale: 1, unit: "ns", target: "0 allocs/op"},
	{issue: 4, figure: "RSS steering per frame (Toeplitz, table)", pkg: "./vnic", bench: "BenchmarkSteerRx/table",
		value: "ns/op", scale: 1, unit: "ns"},
	{issue: 3, figure: "PRIVFLAGS_GET round trip p50, manad", pkg: "./genl", bench: "BenchmarkPrivFlagsGetRoundTrip",
		value: "manad-privflags-p50-ns", scale: 1e-3, unit: "µs", baseline: "kernel-channels-p50-ns", baseName: "kernel ethtool GET on a veth",
		ratio: "p50-ratio", target: "≤ 3× the kernel", met: func(_, r float64) bool { return r <= 3 }, scaleBaselineToo: true},
	{issue: 6, figure: "forwarding appliance (seed 002), fragment mode", pkg: "./tests/scenarios", bench: "BenchmarkForwarding",
		value: "frag-fwd-pps", scale: 1, unit: "pps", target: "reported"},
	{issue: 6, figure: "forwarding appliance (seed 002), full-page mode", pkg: "./tests/scenarios", bench: "BenchmarkForwarding",
		value: "full-fwd-pps", scale: 1, unit: "pps", baseline: "frag-fwd-pps", baseName: "fragment mode", ratio: "full/frag",
		target: "reported", scaleBaselineToo: true},
	{issue: 4, figure: "XDP program run per 1500-B frame", pkg: "./daemon/xdp", bench: "BenchmarkRun/pass",
		value: "ns/op", scale: 1e-3, unit: "µs", baseline: "baseline-ns/op", baseName: "cilium Program.Run", ratio: "x-baseline", scaleBaselineToo: true},
	{issue: 13, figure: "1,000 ports in one netns: manad ready", pkg: "./bench/scale", bench: "BenchmarkPorts/ports=1000",
		value: "ready-ms", scale: 1e-3, unit: "s", target: "≤ 2 s", met: func(v, _ float64) bool { return v <= 2 }},
	{issue: 13, figure: "1,000 ports: all up after one ip -batch", pkg: "./bench/scale", bench: "BenchmarkPorts/ports=1000",
		value: "bringup-ms", scale: 1e-3, unit: "s", baseline: "kernel-bringup-ms", baseName: "same ip -batch, TAPs held by no daemon",
		target: "≤ 10 s", met: func(v, _ float64) bool { return v <= 10 }, scaleBaselineToo: true},
	{issue: 13, figure: "1,000 ports: shutdown", pkg: "./bench/scale", bench: "BenchmarkPorts/ports=1000",
		value: "shutdown-ms", scale: 1e-3, unit: "s", target: "≤ 2 s", met: func(v, _ float64) bool { return v <= 2 }},
}

// The toolchain's benchmark line: name-N  iterations  value unit  value unit …
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// result is one benchmark's metrics, unit → value.
type result map[string]float64

// runAll runs every benchmark of the module (go test -bench . ./...) and returns
// "./pkg/path BenchmarkName" → metrics, in the order they ran. The toolchain's output goes to
// stderr as it comes, so a long run shows progress.
func runAll(benchtime string) (map[string]result, []string, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "1", "-benchtime", benchtime, "./...")
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	out := map[string]result{}
	var order []string
	pkg := ""
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = "./" + strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
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
		out[key] = vals
		order = append(order, key)
	}
	if err != nil {
		return out, order, fmt.Errorf("go test -bench . ./...: %w", err)
	}
	return out, order, nil
}

// module is the module path the package lines start with.
const module = "github.com/manad/manad"

func main() {
	benchtime := flag.String("benchtime", "1s", "go test -benchtime for the Go benchmarks")
	udpSeconds := flag.Float64("udp-seconds", 2, "length of one UDP measurement (bench/udppps)")
	udpRounds := flag.Int("udp-rounds", 5, "UDP rounds per path (bench/udppps)")
	markdown := flag.Bool("markdown", false, "print a Markdown table (for README)")
	flag.Parse()

	var rows []row
	results, order, err := runAll(*benchtime)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	used := map[string]bool{}
	for _, s := range sources {
		key, baseKey := s.pkg+" "+s.bench, s.pkg+" "+s.bench
		if s.baseBench != "" {
			baseKey = s.pkg + " " + s.baseBench
		}
		used[key], used[baseKey] = true, true
		rows = append(rows, fromSource(s, results[key], results[baseKey]))
	}

	fmt.Fprintln(os.Stderr, "running bench/udppps…")
	rows = append(rows, udppps(*udpSeconds, *udpRounds)...)

	printRows(rows, *markdown)
	printOthers(results, order, used, *markdown)
	for _, r := range rows {
		if r.met == "no" {
			fmt.Fprintf(os.Stderr, "target missed: %s\n", r.figure)
		}
	}
}

// fromSource builds a row from the value benchmark's metrics m and the baseline benchmark's
// metrics base (the same map unless the baseline comes from another benchmark).
func fromSource(s source, m, base map[string]float64) row {
	r := row{issue: s.issue, figure: s.figure, unit: s.unit, baseName: s.baseName, target: s.target,
		baseline: math.NaN(), ratio: math.NaN(), value: math.NaN()}
	v, ok := m[s.value]
	if !ok {
		r.note = "not run (see stderr)"
		return r
	}
	r.value = v * s.scale
	if s.baseline != "" {
		if b, ok := base[s.baseline]; ok {
			r.baseline = b
			if s.scaleBaselineToo {
				r.baseline = b * s.scale
			}
		}
	}
	if s.ratio != "" {
		if x, ok := m[s.ratio]; ok {
			r.ratio = x
		}
	} else if !math.IsNaN(r.baseline) && r.baseline != 0 {
		r.ratio = r.value / r.baseline
	}
	if s.derivedBaseline && !math.IsNaN(r.ratio) && r.ratio != 0 {
		r.baseline = r.value / r.ratio
	}
	if s.met != nil {
		r.met = "no"
		if s.met(r.value, r.ratio) {
			r.met = "yes"
		}
	}
	return r
}

// udppps runs bench/udppps and turns its JSON lines into rows.
func udppps(seconds float64, rounds int) []row {
	cmd := exec.Command("go", "run", "./bench/udppps", "--json",
		"--seconds", strconv.FormatFloat(seconds, 'f', -1, 64), "--rounds", strconv.Itoa(rounds))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return []row{{issue: 4, figure: "UDP pps (bench/udppps)", value: math.NaN(), baseline: math.NaN(), ratio: math.NaN(),
			note: "not run: " + strings.TrimSpace(lastLine(errb.String()))}}
	}
	var rows []row
	dec := json.NewDecoder(&out)
	for {
		var r struct {
			Figure   string  `json:"figure"`
			Value    float64 `json:"value"`
			Unit     string  `json:"unit"`
			Baseline float64 `json:"baseline"`
			Ratio    float64 `json:"ratio"`
			Target   string  `json:"target"`
		}
		if err := dec.Decode(&r); err != nil {
			break
		}
		x := row{issue: 4, figure: r.Figure, value: r.Value, unit: r.Unit, baseline: math.NaN(), ratio: math.NaN(), target: r.Target}
		if r.Baseline != 0 {
			x.baseline, x.ratio, x.baseName = r.Baseline, r.Ratio, "taprelay"
		}
		switch {
		case strings.HasPrefix(r.Target, "ratio ≥ "):
			t, _ := strconv.ParseFloat(strings.TrimPrefix(r.Target, "ratio ≥ "), 64)
			x.target = fmt.Sprintf("≥ %.1f× taprelay", t)
			x.met = "no"
			if r.Ratio >= t {
				x.met = "yes"
			}
		case r.Unit == "% of one CPU":
			x.met = "no"
			if r.Value < 0.5 {
				x.met = "yes" // under half a percent of one CPU: nothing a user could measure
			}
			x.target = "no measurable CPU (< 0.5%)"
		}
		rows = append(rows, x)
	}
	return rows
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func printRows(rows []row, markdown bool) {
	if markdown {
		fmt.Println("| issue | figure | value | baseline (same run) | ratio | target | met |")
		fmt.Println("|---|---|---|---|---|---|---|")
		for _, r := range rows {
			fmt.Printf("| %d | %s | %s %s | %s | %s | %s | %s |\n", r.issue, r.figure, num(r.value), r.unit,
				baseline(r), ratio(r), r.target, met(r))
		}
		return
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ISSUE\tFIGURE\tVALUE\tBASELINE (same run)\tRATIO\tTARGET\tMET")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%s\t%s %s\t%s\t%s\t%s\t%s\n", r.issue, r.figure, num(r.value), r.unit, baseline(r), ratio(r), r.target, met(r))
	}
	w.Flush()
}

// printOthers lists the benchmarks no row is made of, with every metric they report, so that
// `make bench` shows every benchmark of the project.
func printOthers(results map[string]result, order []string, used map[string]bool, markdown bool) {
	var rest []string
	for _, k := range order {
		if !used[k] {
			rest = append(rest, k)
		}
	}
	if len(rest) == 0 {
		return
	}
	fmt.Println()
	if markdown {
		fmt.Println("Other benchmarks:")
		fmt.Println()
	} else {
		fmt.Println("OTHER BENCHMARKS")
	}
	for _, k := range rest {
		var ms []string
		for _, unit := range slices.Sorted(maps.Keys(results[k])) {
			ms = append(ms, num(results[k][unit])+" "+unit)
		}
		prefix := ""
		if markdown {
			prefix = "- "
		}
		fmt.Printf("%s%s: %s\n", prefix, k, strings.Join(ms, ", "))
	}
}

func baseline(r row) string {
	if math.IsNaN(r.baseline) {
		return "–"
	}
	return fmt.Sprintf("%s %s (%s)", num(r.baseline), r.unit, r.baseName)
}

func ratio(r row) string {
	if math.IsNaN(r.ratio) {
		return "–"
	}
	return num(r.ratio) + "×"
}

func met(r row) string {
	if r.note != "" {
		return r.note
	}
	return r.met
}
