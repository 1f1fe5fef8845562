package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/manad/manad/bench/internal/benchrow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatOf(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want stat
	}{
		{[]float64{3}, stat{3, 3, 3}},
		{[]float64{5, 1, 3}, stat{3, 1, 5}},
		{[]float64{4, 1, 3, 2}, stat{3, 1, 4}}, // even count: the upper median
		{[]float64{2, 2, 9, 2, 1}, stat{2, 1, 9}},
	} {
		if got := statOf(tc.in); got != tc.want {
			t.Errorf("statOf(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := statOf(nil); !math.IsNaN(got.med) || !math.IsNaN(got.min) || !math.IsNaN(got.max) {
		t.Errorf("statOf(nil) = %v, want NaNs", got)
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
pkg: github.com/manad/manad/vnic/pagepool
BenchmarkFragFullRatio/64K-31x2112-2   	 1000	 2331 ns/op	 824.0 frag-ns/op	 0.8142 frag/full	 1012 full-ns/op	 0 B/op
BenchmarkFragFullRatio/64K-31x2112-2   	 1000	 2000 ns/op	 800.0 frag-ns/op	 0.8 frag/full	 1000 full-ns/op	 0 B/op
--- BENCH: BenchmarkFragFullRatio/64K-31x2112-2
pkg: github.com/manad/manad/tests/scenarios
BenchmarkForwarding
    forwarding_test.go:354: round 0, fragment mode: forwarded 48567 pps
BenchmarkForwarding-2   	       1	5330490763 ns/op	     74490 frag-fwd-pps	     70602 full-fwd-pps	         0.9478 full/frag
BenchmarkForwarding
pkg: github.com/manad/manad/genl
--- SKIP: BenchmarkPrivFlagsGetRoundTrip-2
    harness_test.go:24: needs root (uid 0): run the suite with sudo, as CI does
--- SKIP: BenchmarkSomething
`
	res, order, skipped := parseBench(strings.NewReader(out))
	wantSkipped := []string{"./genl BenchmarkPrivFlagsGetRoundTrip", "./genl BenchmarkSomething"}
	assert.Equal(t, strings.Join(wantSkipped, ","), strings.Join(skipped, ","), "skipped = %q, want %q", skipped, wantSkipped)
	wantOrder := []string{"./vnic/pagepool BenchmarkFragFullRatio/64K-31x2112", "./tests/scenarios BenchmarkForwarding"}
	require.Equal(t, strings.Join(wantOrder, ","), strings.Join(order, ","), "order = %q, want %q", order, wantOrder)
	if runs := res[wantOrder[0]]; len(runs) != 2 || runs[1]["frag-ns/op"] != 800 || runs[0]["frag/full"] != 0.8142 {
		t.Errorf("pagepool runs = %v", runs)
	}
	if runs := res[wantOrder[1]]; len(runs) != 1 || runs[0]["full/frag"] != 0.9478 {
		t.Errorf("forwarding runs = %v", runs)
	}
}

func TestFromSource(t *testing.T) {
	s := source{figure: "f", pkg: "./p", bench: "BenchmarkX", value: "v", scale: 1, unit: "ns", baseline: "b", baseName: "peer",
		target: "≤ 2×", met: func(_, r float64) bool { return r <= 2 }}
	runs := []result{{"v": 10, "b": 5}, {"v": 30, "b": 10}, {"v": 12, "b": 12}}
	r := fromSource(s, runs)
	if r.rounds != 3 || r.value != (stat{12, 10, 30}) || r.baseline != (stat{10, 5, 12}) {
		t.Errorf("row = %+v", r)
	}
	// The ratio is the median of the per-round ratios (2, 3, 1), not a ratio of medians.
	if r.ratio != (stat{2, 1, 3}) || r.met != "yes" {
		t.Errorf("ratio = %v, met %q", r.ratio, r.met)
	}
	if r := fromSource(s, []result{{"other": 1}}); !r.missing || r.rounds != 0 {
		t.Errorf("a run without the value metric: %+v", r)
	}
	r = fromSource(s, []result{{"v": 1}})
	assert.True(t, r.missing, "a run without the peer metric is not flagged: %+v", r)
	d := source{value: "ns/op", scale: 1e-6, ratio: "x", derived: true}
	r = fromSource(d, []result{{"ns/op": 4e6, "x": 2}})
	assert.Equal(t, float64(2), r.baseline.med, "derived peer: %+v", r)
	assert.Equal(t, float64(4), r.value.med, "derived peer: %+v", r)
}

func TestReplaceSection(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
		fail            bool
	}{
		{name: "replaces", doc: "a\n" + beginMarker + "\nold\n" + endMarker + "\nz\n", want: "a\n" + beginMarker + "\nnew\n" + endMarker + "\nz\n"},
		{name: "empty section", doc: beginMarker + endMarker, want: beginMarker + "\nnew\n" + endMarker},
		{name: "no markers", doc: "a\n", fail: true},
		{name: "no end", doc: beginMarker + "\n", fail: true},
		{name: "two begins", doc: beginMarker + beginMarker + endMarker, fail: true},
		{name: "reversed", doc: endMarker + "\n" + beginMarker, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replaceSection(tc.doc, "\nnew\n\n")
			if tc.fail {
				require.Error(t, err, "no error, got %q", got)
				return
			}
			require.NoError(t, err, "got %q, %v; want %q", got, err, tc.want)
			require.Equal(t, tc.want, got, "got %q, %v; want %q", got, err, tc.want)
		})
	}
}

// benchmarkExists reports whether package dir (relative to the module root) declares the top
// level benchmark function of name ("BenchmarkX/sub/…") in one of its test files.
func benchmarkExists(t *testing.T, dir, name string) bool {
	t.Helper()
	fn, _, _ := strings.Cut(name, "/")
	files, err := filepath.Glob(filepath.Join("..", "..", dir, "*_test.go"))
	require.NoError(t, err)
	decl := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(fn) + `\(b \*testing\.B\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if decl.Match(b) {
			return true
		}
	}
	return false
}

// TestSourcesExist checks, without running anything, that every benchmark a row is made of is
// still declared, so a rename breaks this test and not only the next root run.
func TestSourcesExist(t *testing.T) {
	for _, s := range sources {
		assert.True(t, benchmarkExists(t, s.pkg, s.bench), "row %q: %s declares no %s", s.figure, s.pkg, s.bench)
	}
}

// TestReadmeSection checks README's generated benchmark section: one pair of markers, the
// header make bench-readme writes, and a source on every row that names a benchmark or program
// that exists.
func TestReadmeSection(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	doc := string(b)
	n, m := strings.Count(doc, beginMarker), strings.Count(doc, endMarker)
	require.Equal(t, 1, n, "README.md has %d %s and %d %s, want one each", n, beginMarker, m, endMarker)
	require.Equal(t, 1, m, "README.md has %d %s and %d %s, want one each", n, beginMarker, m, endMarker)
	i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	require.GreaterOrEqual(t, j, i, "%s before %s", endMarker, beginMarker)
	section := doc[i+len(beginMarker) : j]
	assert.Contains(t, section, "Generated by `make bench-readme` on ", "the section does not say it was generated by make bench-readme")
	progs, err := os.ReadDir(filepath.Join("..", "..", "bench"))
	require.NoError(t, err)
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| issue |") {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		src := strings.Trim(cells[len(cells)-1], "`")
		pkg, bench, isBench := strings.Cut(src, " ")
		switch {
		case isBench:
			assert.True(t, benchmarkExists(t, pkg, bench), "row %q: source %q names no benchmark", cells[1], src)
		case strings.HasPrefix(src, "./bench/"):
			found := false
			for _, p := range progs {
				found = found || "./bench/"+p.Name() == src
			}
			assert.True(t, found, "row %q: source %q names no bench/ program", cells[1], src)
		default:
			t.Errorf("row %q has no source (last cell %q)", cells[1], src)
		}
	}
	assert.NotEqual(t, 0, rows, "the section has no table rows:\n%s", section)
}

func TestSenderBound(t *testing.T) {
	off := source{value: "v", offered: "o"}
	sur := source{value: "v", surplus: "d"}
	for _, tc := range []struct {
		name string
		s    source
		runs []result
		want bool
	}{
		{"delivered all offered", off, []result{{"v": 99, "o": 100}, {"v": 100, "o": 100}, {"v": 50, "o": 100}}, true},
		{"path the limit", off, []result{{"v": 60, "o": 100}, {"v": 100, "o": 100}, {"v": 50, "o": 100}}, false},
		{"nothing dropped", sur, []result{{"v": 1, "d": 0}, {"v": 1, "d": 0}, {"v": 1, "d": 5}}, true},
		{"surplus dropped", sur, []result{{"v": 1, "d": 3}, {"v": 1, "d": 0}, {"v": 1, "d": 5}}, false},
		{"no sender metric", source{value: "v"}, []result{{"v": 1}}, false},
	} {
		assert.Equal(t, tc.want, senderBound(tc.s, tc.runs), "%s: senderBound", tc.name)
	}
}

// TestProgramsSmokeOnly: bench/seeds is in the smoke (every program is) but not in the full
// report (`make seeds` is its full run), and the measuring programs are in both.
func TestProgramsSmokeOnly(t *testing.T) {
	t.Chdir("../..") // programs() looks under bench/ of the working directory, the module root
	progs, err := programs()
	require.NoError(t, err)
	got := map[string]bool{}
	for _, p := range progs {
		got[p.dir] = p.helper
	}
	for dir, smokeOnly := range map[string]bool{"./bench/seeds": true, "./bench/taprelay": true, "./bench/udppps": false, "./bench/fabric": false} {
		if h, ok := got[dir]; !ok || h != smokeOnly {
			t.Errorf("%s: listed %v, smoke-only %v; want listed, smoke-only %v", dir, ok, h, smokeOnly)
		}
	}
}

// TestFromSourceFlags: a flag metric reported in any round adds its note to the row; absent or 0
// in every round, it adds nothing.
func TestFromSourceFlags(t *testing.T) {
	s := getRoundTrip("RINGS_GET", "RINGS_GET", "a veth")
	for _, tc := range []struct {
		name string
		runs []result
		want string
	}{
		{"veth answers", []result{{"manad-p50-ns": 20e3, "kernel-p50-ns": 10e3, "p50-ratio": 2}}, ""},
		{"host device in one round", []result{
			{"manad-p50-ns": 20e3, "kernel-p50-ns": 10e3, "p50-ratio": 2},
			{"manad-p50-ns": 20e3, "kernel-p50-ns": 10e3, "p50-ratio": 2, "kernel-host-device": 1}},
			s.flags["kernel-host-device"]},
		{"eopnotsupp and empty", []result{{"manad-p50-ns": 20e3, "kernel-p50-ns": 10e3, "p50-ratio": 2,
			"kernel-eopnotsupp": 1, "kernel-empty-dump": 1}},
			s.flags["kernel-empty-dump"] + "; " + s.flags["kernel-eopnotsupp"]},
		{"flag 0", []result{{"manad-p50-ns": 20e3, "kernel-p50-ns": 10e3, "p50-ratio": 2, "kernel-eopnotsupp": 0}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fromSource(s, tc.runs)
			assert.Equal(t, tc.want, r.note, "note")
			assert.Equal(t, "yes", r.met, "row %+v", r)
			assert.Equal(t, float64(20), r.value.med, "row %+v", r)
			assert.Equal(t, float64(10), r.baseline.med, "row %+v", r)
		})
	}
}

// TestRowOfAtMostBaseline: a program row whose figure must not exceed its peer's (retransmits)
// says whether it did, and shows no ratio where the peer had none in any round.
func TestRowOfAtMostBaseline(t *testing.T) {
	for _, tc := range []struct {
		name              string
		in                benchrow.Row
		met, ratio, label string
	}{
		{"fewer", benchrow.Row{Value: 4, Baseline: 7, BaselineName: "veth", Ratio: 0.5, RatioMin: 0.4, RatioMax: 0.6}, "yes", "0.50× [0.40–0.60]", "≤ veth's"},
		{"more", benchrow.Row{Value: 9674, Baseline: 7834, BaselineName: "veth", Ratio: 1.2, RatioMin: 0.9, RatioMax: 2.5}, "no", "1.20× [0.90–2.50]", "≤ veth's"},
		{"none where the peer had some", benchrow.Row{Value: 0, Baseline: 355, BaselineName: "veth"}, "yes", "0.00× [0.00–0.00]", "≤ veth's"},
		{"peer never retransmitted", benchrow.Row{Value: 3, BaselineName: "veth"}, "no", "–", "≤ veth's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Issue, tc.in.Figure, tc.in.Unit, tc.in.Rounds, tc.in.Target = 14, "retransmits", "segments", 5, benchrow.TargetAtMostBaseline
			r := rowOf("./bench/udppps", tc.in)
			assert.Equal(t, tc.met, r.met, "met %q target %q, want %q %q", r.met, r.target, tc.met, tc.label)
			assert.Equal(t, tc.label, r.target, "met %q target %q, want %q %q", r.met, r.target, tc.met, tc.label)
			assert.Equal(t, tc.ratio, ratio(r), "ratio")
		})
	}
}

// TestRoundTripBinaryRows reads a real run of BenchmarkRoundTripBinary (testdata, one iteration,
// captured when its relay-poll path came) and checks that every row made of it finds its value,
// peer and ratio metrics there, so that a row naming a metric the benchmark does not report fails
// here and not only in the next root run; and that the busy-poll floor's rows are among them.
func TestRoundTripBinaryRows(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "roundtripbinary.txt"))
	require.NoError(t, err)
	defer f.Close()
	res, _, _ := parseBench(f)
	runs := res["./daemon/datapath "+rrBinary.name]
	require.Len(t, runs, 1, "testdata has no %s run", rrBinary.name)
	var floor, against int
	for _, s := range sources {
		if s.bench != rrBinary.name {
			continue
		}
		r := fromSource(s, runs)
		assert.False(t, r.missing, "row %q: %s", s.figure, r.note)
		if strings.Contains(s.value, rrFloor) {
			floor++
		}
		if strings.HasSuffix(s.ratio, "-vs-"+rrFloor) {
			against++
		}
	}
	assert.Equal(t, 7, floor, "relay-poll rows (p50 and p99 of both kinds, CPU of both, sleeps of UDP RR)")
	assert.Equal(t, 2, against, "manad-on against relay-poll rows (p50 of both kinds)")
}
