// Package scale benchmarks manad with many ports in one network namespace (issue 13): the real
// daemon is started with 100, 250, 500 and 1,000 ports, every TAP is brought up at once with one
// `ip -batch`, and the daemon is stopped. Each size reports the time until manad is ready, until
// every port reports admin-up, and until manad has exited, and each of those per port, so a
// non-linear cost shows as a per-port figure that grows with the size.
//
// BenchmarkSharedSegment does the same with every port on one segment (100 and 1,000), against a
// Linux bridge, and reports the latency of control requests during the flood.
//
// `go test -short` uses 10 and 25 ports (10 shared); -args -sizes 250,2000 and -shared-sizes 300
// pick others. Needs root.
package scale

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manad/manad/daemon/tap"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// settle bounds how long the benchmark waits for every port to report admin-up: a correctness
// limit (a port stuck down fails the run), not a performance target.
const settle = 2 * time.Minute

// sizesFlag overrides the sizes: go test -bench . ./bench/scale -args -sizes 250,2000.
var sizesFlag = flag.String("sizes", "", "comma-separated port counts (default 100,250,500,1000; 10,25 with -short)")

func sizes(b *testing.B) []int {
	if *sizesFlag != "" {
		return parseSizes(b, *sizesFlag)
	}
	if testing.Short() {
		return []int{10, 25}
	}
	return []int{100, 250, 500, 1000}
}

// parseSizes parses a comma-separated list of port counts.
func parseSizes(b *testing.B, list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "sizes: %q is not a port count", f)
		require.GreaterOrEqual(b, n, 1, "sizes: %q is not a port count", f)
		out = append(out, n)
	}
	return out
}

// BenchmarkPorts starts manad with n small ports (one queue, minimum rings, non-persistent) in one
// namespace, brings them all up with one `ip -batch`, waits until manad reports every port
// admin-up, and stops manad. Each port has a segment of its own: on one shared segment the
// IPv6 multicast every TAP sends as it comes up is flooded to every other port, n² frames that
// measure the wire rather than the daemon.
func BenchmarkPorts(b *testing.B) {
	testenv.RequireRoot(b)
	for _, n := range sizes(b) {
		b.Run(fmt.Sprintf("ports=%d", n), func(b *testing.B) {
			var ready, up, ipTime, kernel, stop time.Duration
			for range b.N {
				kernel += kernelBringUp(b, n)
				r := run(b, n, false)
				ready, up, ipTime, stop = ready+r.ready, up+r.up, ipTime+r.ipTime, stop+r.stop
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) / float64(n) }
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(ready), "ready-ms")
			b.ReportMetric(ms(up), "bringup-ms")
			b.ReportMetric(ms(ipTime), "ipbatch-ms")
			b.ReportMetric(ms(kernel), "kernel-bringup-ms")
			b.ReportMetric(ms(stop), "shutdown-ms")
			b.ReportMetric(per(ready), "ready-µs/port")
			b.ReportMetric(per(up), "bringup-µs/port")
			b.ReportMetric(per(stop), "shutdown-µs/port")
		})
	}
}

// kernelBringUp is the baseline of the bring-up: the same `ip -batch` on n TAPs of the same
// kind (multi-queue, one queue attached, so the carrier is on and the kernel does its IPv6
// start-up as it does for manad's), held by this process rather than by a daemon. It returns the
// time the command takes.
func kernelBringUp(b *testing.B, n int) time.Duration {
	b.Helper()
	ns := harness.Name("msk", "")
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		b.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	devs := make([]*tap.Device, 0, n)
	defer func() {
		// Concurrently, as manad does: each unregistration waits for RCU.
		var wg sync.WaitGroup
		work := make(chan *tap.Device)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for d := range work {
					d.Close()
				}
			}()
		}
		for _, d := range devs {
			work <- d
		}
		close(work)
		wg.Wait()
	}()
	var batch strings.Builder
	for i := range n {
		name := fmt.Sprintf("k%d.%d", os.Getpid()%10000, i)
		d, err := tap.Open(tap.Config{Name: name, Queues: 1, NetNS: ns, Logger: log})
		require.NoError(b, err)
		devs = append(devs, d)
		fmt.Fprintf(&batch, "link set %s up\n", name)
	}
	start := time.Now()
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "ip -batch: %v: %s", err, out)
	return time.Since(start)
}

// sharedFlag overrides the sizes of BenchmarkSharedSegment.
var sharedFlag = flag.String("shared-sizes", "", "comma-separated port counts of BenchmarkSharedSegment (default 100,1000; 10 with -short)")

// BenchmarkSharedSegment is BenchmarkPorts with every port on ONE segment: the IPv6 start-up
// multicast of every TAP (router solicitations, MLD reports, DAD) is flooded to every other
// port, n² frame deliveries, and manad must keep answering control requests while that flood
// runs and stop promptly on SIGTERM. It reports the time until manad is ready, until every port
// is up, and of the shutdown, and the latency of the port-list requests (GET of every port)
// the benchmark polls with during the bring-up: median and slowest. The same-run peer is a Linux
// bridge with n TAPs of the same kind in a namespace: the same `ip -batch` bring-up
// (bridge-bringup-ms) and the deletion of the bridge and its TAPs (bridge-teardown-ms).
func BenchmarkSharedSegment(b *testing.B) {
	testenv.RequireRoot(b)
	ns := []int{100, 1000}
	if testing.Short() {
		ns = []int{10}
	}
	if *sharedFlag != "" {
		ns = parseSizes(b, *sharedFlag)
	}
	for _, n := range ns {
		b.Run(fmt.Sprintf("ports=%d", n), func(b *testing.B) {
			var ready, up, stop, bup, bdown time.Duration
			var lat []time.Duration
			for range b.N {
				u, d := bridgeRun(b, n)
				bup, bdown = bup+u, bdown+d
				r := run(b, n, true)
				ready, up, stop = ready+r.ready, up+r.up, stop+r.stop
				lat = append(lat, r.control...)
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
			slices.Sort(lat)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(ready), "ready-ms")
			b.ReportMetric(ms(up), "bringup-ms")
			b.ReportMetric(ms(stop), "shutdown-ms")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "control-p50-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1e3, "control-max-ms")
			b.ReportMetric(ms(bup), "bridge-bringup-ms")
			b.ReportMetric(ms(bdown), "bridge-teardown-ms")
		})
	}
}

// bridgeGroup is the netdev group of the peer's TAPs, deleted in one request as manad deletes its
// own (the namespace is the peer's alone).
const bridgeGroup = 0x6d00b000

// bridgeRun is the peer of a shared segment: n multi-queue TAPs with one queue attached (held by
// this process, which reads nothing) enslaved to one Linux bridge in a namespace of their own,
// all brought up with one `ip -batch`; then the bridge and the TAPs are deleted (the TAPs with one
// request, tap.DeleteGroup, as manad's shutdown does). It returns the
// time of the bring-up command and of the teardown.
func bridgeRun(b *testing.B, n int) (up, teardown time.Duration) {
	b.Helper()
	ns := harness.Name("msb", "")
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		b.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	br := fmt.Sprintf("b%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "-n", ns, "link", "add", br, "type", "bridge").CombinedOutput(); err != nil {
		b.Fatalf("ip link add bridge: %v: %s", err, out)
	}
	devs := make([]*tap.Device, 0, n)
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		for _, d := range devs {
			d.Close()
		}
	}
	defer closeAll()
	var batch strings.Builder
	for i := range n {
		name := fmt.Sprintf("b%d.%d", os.Getpid()%10000, i)
		d, err := tap.Open(tap.Config{Name: name, Queues: 1, NetNS: ns, Logger: log, Group: bridgeGroup})
		require.NoError(b, err)
		devs = append(devs, d)
		fmt.Fprintf(&batch, "link set %s master %s up\n", name, br)
	}
	fmt.Fprintf(&batch, "link set %s up\n", br)
	start := time.Now()
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("ip -batch: %v: %s", err, out)
	}
	up = time.Since(start)
	start = time.Now()
	out, err := exec.Command("ip", "-n", ns, "link", "del", br).CombinedOutput()
	require.NoError(b, err, "ip link del bridge: %v: %s", err, out)
	require.NoError(b, tap.DeleteGroup(bridgeGroup, devs))
	closeAll()
	return up, time.Since(start)
}

// runResult is one start, bring-up and stop of manad.
type runResult struct {
	ready, up, ipTime, stop time.Duration
	// control holds the latency of each port-list request made while waiting for every port
	// to come up: control requests during the bring-up (and, on a shared segment, its flood).
	control []time.Duration
}

// run does one start, bring-up and stop of manad with n ports and returns the durations: until
// ready, until every port is up, of the `ip -batch` command alone (the kernel's part of the
// bring-up, a baseline), and of the shutdown, and the latency of the control requests that
// waited for the ports.
func run(b *testing.B, n int, shared bool) (r runResult) {
	b.Helper()
	bin, _ := harness.PlainBinaries(b)
	ns := harness.Name("msc", "")
	names := make([]string, n)
	var cfg strings.Builder
	for i := range n {
		names[i] = fmt.Sprintf("s%d.%d", os.Getpid()%10000, i)
		segment := names[i]
		if shared {
			segment = "shared"
		}
		fmt.Fprintf(&cfg, "[[port]]\nname = %q\nnetns = %q\nsegment = %q\nqueues = 1\nmax_queues = 1\nrx_ring = 128\ntx_ring = 128\npersistent = false\n\n", names[i], ns, segment)
	}
	start := time.Now()
	d := harness.StartBinary(b, bin, "", "", cfg.String(), ns)
	r.ready = time.Since(start)

	c := d.Client(ns)
	var batch strings.Builder
	for _, name := range names {
		fmt.Fprintf(&batch, "link set %s up\n", name)
	}
	// The requests that wait for the ports start with the bring-up, so that they are answered
	// while the kernel brings TAPs up (and, on a shared segment, the flood runs).
	start = time.Now()
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	ipDone := make(chan error, 1)
	go func() {
		out, err := cmd.CombinedOutput()
		r.ipTime = time.Since(start)
		if err != nil {
			err = fmt.Errorf("ip -batch: %v: %s", err, out)
		}
		ipDone <- err
	}()
	deadline := time.Now().Add(settle)
	ipRunning := true
	for {
		if ipRunning {
			select {
			case err := <-ipDone:
				require.NoError(b, err)
				ipRunning = false
			default:
			}
		}
		t0 := time.Now()
		ports, err := c.Ports(context.Background())
		require.NoError(b, err)
		r.control = append(r.control, time.Since(t0))
		nup := 0
		for _, p := range ports {
			if p.AdminUp {
				nup++
			}
		}
		if len(ports) == n && nup == n && !ipRunning {
			break
		}
		if time.Now().After(deadline) {
			if ipRunning {
				cmd.Process.Kill()
				<-ipDone
			}
			b.Fatalf("after %v, %d of %d ports admin-up (%d listed)", settle, nup, len(ports), len(ports))
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.up = time.Since(start)
	c.Close()

	start = time.Now()
	d.Stop()
	r.stop = time.Since(start)
	out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput()
	require.NoError(b, err, "ip netns del %s: %v: %s", ns, err, out)
	return r
}
