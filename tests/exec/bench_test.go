package exec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
)

// benchEnv is setup with the plain (not race-instrumented) binaries: rates of a race build say
// little.
func benchEnv(b *testing.B) *env {
	b.Helper()
	testenv.RequireRoot(b)
	dir, err := os.MkdirTemp("", "manad-exec-bench-")
	require.NoError(b, err)
	b.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{ns: harness.Name("mxb", ""), port: harness.Name("mana", ""), veth: harness.Name("ve", "")}
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\npersistent = false\n", e.port, e.ns)
	manad, mctl := harness.PlainBinaries(b)
	e.d = harness.StartBinary(b, manad, dir, "", ports, e.ns)
	e.manactl = mctl
	e.probe = buildProbe(b, dir)
	e.sockEnv = []string{"MANAD_SOCKET=" + e.d.Socket}
	harness.Run(b, "", "ip", "-n", e.ns, "link", "add", e.veth, "type", "veth", "peer", "name", e.veth+"p")
	return e
}

var p50Line = regexp.MustCompile(`(?m)^(\w+) p50=(\d+) p99=(\d+)$`)

// probeP50s runs the probe's bench of n round trips per message on dev and returns each
// message's p50 in ns.
func (e *env) probeP50s(b *testing.B, bridged bool, n int, dev string) map[string]float64 {
	b.Helper()
	r := e.run(b, bridged, e.probe, "bench", strconv.Itoa(n), dev)
	require.Equal(b, 0, r.code, r.String())
	out := map[string]float64{}
	for _, m := range p50Line.FindAllStringSubmatch(r.stdout, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] = v
	}
	require.Len(b, out, 2, r.stdout)
	return out
}

// BenchmarkExecRoundTrip: PRIVFLAGS_GET and RINGS_GET from one statically linked Go program
// (mdlayher/ethtool, genetlink): to a manad port under manactl exec, against the kernel's same
// message on a veth from the same program without manactl exec (the kernel answers EOPNOTSUPP
// for both there: a veth has neither private flags nor ring parameters, so the kernel's
// figure is its floor for the message), and to that veth under manactl exec (the cost of the
// bridge on the kernel's path). The runs alternate; each -count run is one round (issue 26:
// p50 within 3× the kernel's).
func BenchmarkExecRoundTrip(b *testing.B) {
	e := benchEnv(b)
	n := 2000
	if testing.Short() || b.N == 1 {
		n = 200
	}
	var bridged, kernel, bridgedKernel []map[string]float64
	for b.Loop() {
		bridged = append(bridged, e.probeP50s(b, true, n, e.port))
		kernel = append(kernel, e.probeP50s(b, false, n, e.veth))
		bridgedKernel = append(bridgedKernel, e.probeP50s(b, true, n, e.veth))
	}
	med := func(ms []map[string]float64, k string) float64 {
		v := make([]float64, len(ms))
		for i, m := range ms {
			v[i] = m[k]
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	for _, k := range []string{"privflags", "rings"} {
		b.ReportMetric(med(bridged, k), "exec-"+k+"-p50-ns")
		b.ReportMetric(med(kernel, k), "kernel-"+k+"-p50-ns")
		b.ReportMetric(med(bridgedKernel, k), "exec-kernel-"+k+"-p50-ns")
		b.ReportMetric(med(bridged, k)/med(kernel, k), k+"-p50-ratio")
	}
}

// BenchmarkExecStartup: `manactl exec -- true` against `true`, alternating: what the supervisor
// costs a program's start (the re-exec, the filter, the hand-over).
func BenchmarkExecStartup(b *testing.B) {
	testenv.RequireRoot(b)
	dir := b.TempDir()
	manad, mctl := harness.PlainBinaries(b)
	d := harness.StartBinary(b, manad, dir, "", "")
	truePath, err := exec.LookPath("true")
	require.NoError(b, err)
	timeIt := func(argv ...string) time.Duration {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "MANAD_SOCKET="+d.Socket)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		require.NoError(b, err, "%s", out)
		return time.Since(t0)
	}
	var bare, bridged []time.Duration
	for b.Loop() {
		bare = append(bare, timeIt(truePath))
		bridged = append(bridged, timeIt(filepath.Clean(mctl), "exec", "--", truePath))
	}
	slices.Sort(bare)
	slices.Sort(bridged)
	b.ReportMetric(float64(bridged[len(bridged)/2].Nanoseconds()), "exec-p50-ns")
	b.ReportMetric(float64(bare[len(bare)/2].Nanoseconds()), "bare-p50-ns")
	b.ReportMetric(float64(bridged[len(bridged)/2])/float64(bare[len(bare)/2]), "startup-ratio")
}
