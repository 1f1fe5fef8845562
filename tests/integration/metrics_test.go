package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
)

// metricsDaemon is manad started with --metrics-listen (the harness starts manad with a
// configuration file only), with the address it bound.
type metricsDaemon struct {
	cmd     *exec.Cmd
	done    chan error
	log     string
	socket  string
	manactl string
	addr    string // host:port of /metrics, from the "metrics listening" log line
}

// writeConfig writes a configuration with its own socket and state directory under dir, and the
// given [[port]] tables.
func writeConfig(t *testing.T, dir, ports string) (cfg, socket string) {
	t.Helper()
	socket = filepath.Join(dir, "manad.sock")
	cfg = filepath.Join(dir, "manad.toml")
	body := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\nlog_level = \"debug\"\n%s", socket, filepath.Join(dir, "state"), ports)
	require.NoError(t, os.WriteFile(cfg, []byte(body), 0o644))
	return cfg, socket
}

var listeningRE = regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)

// startMetricsDaemon starts manad --config cfg --metrics-listen 127.0.0.1:0, waits until it is
// ready, and stops it (expecting exit 0) and deletes nss at the end of the test.
func startMetricsDaemon(t *testing.T, dir, ports string, nss ...string) *metricsDaemon {
	t.Helper()
	bin, manactl := harness.Binaries(t)
	cfg, socket := writeConfig(t, dir, ports)
	d := &metricsDaemon{done: make(chan error, 1), log: filepath.Join(dir, "manad.log"), socket: socket, manactl: manactl}
	logf, err := os.Create(d.log)
	require.NoError(t, err)
	d.cmd = exec.Command(bin, "--config", cfg, "--metrics-listen", "127.0.0.1:0")
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	require.NoError(t, d.cmd.Start())
	logf.Close()
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-d.done:
			assert.NoError(t, err, "manad exited with %v\n%s", err, d.logText())
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
			t.Errorf("manad did not stop on SIGTERM")
		}
		for _, ns := range nss {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		log := d.logText()
		if m := listeningRE.FindStringSubmatch(log); m != nil && strings.Contains(log, "manad ready") {
			d.addr = m[1]
			return d
		}
		select {
		case err := <-d.done:
			t.Fatalf("manad exited during startup: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("manad did not become ready\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *metricsDaemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// scrape fetches /metrics and parses it with the Prometheus text parser.
func (d *metricsDaemon) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + d.addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET /metrics: %s", resp.Status)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, "parsing /metrics")
	return fams
}

// total sums family name's samples whose labels include want.
func total(fams map[string]*dto.MetricFamily, name string, want map[string]string) (sum float64, n int) {
	f := fams[name]
	if f == nil {
		return 0, 0
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		n++
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, n
}

// TestMetrics starts manad with --metrics-listen, scrapes /metrics over HTTP, checks every
// family is there, then makes port B drop oversize frames (A's MTU raised past B's) and sees
// the drop counter, the reconfiguration, the control requests and manactl stats follow.
func TestMetrics(t *testing.T) {
	testenv.RequireRoot(t)
	nsA, nsB := harness.Name("mxa", ""), harness.Name("mxb", "")
	portA, portB := harness.Name("mxa", "0"), harness.Name("mxb", "0")
	ports := fmt.Sprintf(`
[[port]]
name = %q
netns = %q
segment = "s"
queues = 2
rx_ring = 256

[[port]]
name = %q
netns = %q
segment = "s"
queues = 2
rx_ring = 256
`, portA, nsA, portB, nsB)
	d := startMetricsDaemon(t, t.TempDir(), ports, nsA, nsB)
	for _, x := range []struct{ ns, port, ip string }{{nsA, portA, "10.202.0.1"}, {nsB, portB, "10.202.0.2"}} {
		harness.Run(t, x.ns, "ip", "addr", "add", x.ip+"/24", "dev", x.port)
		harness.Run(t, x.ns, "ip", "link", "set", x.port, "up")
	}
	harness.Run(t, nsA, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.202.0.2")

	// Control requests: one that succeeds, one refused with EINVAL.
	var c *client.Client
	require.NoError(t, harness.InNetNS(nsB, func() (err error) { c, err = client.Dial(d.socket); return err }))
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Rings(ctx, client.Interface{Name: portB}); err != nil {
		t.Fatal(err)
	}
	small := uint32(100)
	err := c.SetRings(ctx, client.Interface{Name: portB}, client.RingsUpdate{Rx: &small})
	require.ErrorIs(t, err, unix.EINVAL, "SetRings rx 100: %v, want EINVAL", err)

	fams := d.scrape(t)
	for _, name := range []string{
		"manad_rx_packets_total", "manad_rx_bytes_total", "manad_tx_packets_total", "manad_tx_bytes_total",
		"manad_rx_dropped_total", "manad_tx_dropped_total", "manad_rx_xdp_tx_total", "manad_rx_inline_total",
		"manad_rx_deferred_total", "manad_rx_ring_posted_buffers", "manad_rx_ring_size_buffers",
		"manad_rx_input_backlog_frames", "manad_page_pool_buffer_allocs_total", "manad_page_pool_buffer_recycles_total",
		"manad_page_pool_buffer_puts_total", "manad_page_pool_ring_overflows_total", "manad_page_pool_page_allocs_total",
		"manad_page_pool_page_releases_total", "manad_page_pool_alloc_failures_total", "manad_page_pool_pages",
		"manad_page_pool_buffers_in_flight", "manad_port_running", "manad_port_admin_up", "manad_memory_pinned_bytes",
		"manad_memory_pinned_pages", "manad_memory_in_use_bytes", "manad_memory_peak_bytes", "manad_memory_budget_bytes",
		"manad_rx_buffers_in_flight", "manad_resets_total", "manad_control_requests_total",
		"manad_subscribers_dropped_total", "manad_control_busy_polls_total",
	} {
		assert.NotNil(t, fams[name], "family %s missing", name)
	}
	// A connection's first answer is followed by a poll (busy_poll's default): it found the
	// next request or nothing.
	if v, n := total(fams, "manad_control_busy_polls_total", map[string]string{}); n != 3 || v < 1 {
		t.Errorf("busy polls: %v over %d outcomes; want hit, miss and skipped, at least one poll", v, n)
	}
	b := map[string]string{"port": portB, "netns": nsB}
	if v, n := total(fams, "manad_rx_packets_total", b); n != 2 || v == 0 {
		t.Errorf("rx packets of %s: %v over %d queues; want 2 queues and the pings", portB, v, n)
	}
	if v, _ := total(fams, "manad_rx_ring_posted_buffers", b); v != 2*256 {
		t.Errorf("posted RX buffers of %s = %v, want 2 full rings of 256", portB, v)
	}
	if v, _ := total(fams, "manad_port_running", b); v != 1 {
		t.Errorf("%s not running: %v", portB, v)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"family": "ethtool", "command": "rings-get", "errno": "0"}, 1},
		{map[string]string{"family": "ethtool", "command": "rings-set", "errno": "EINVAL"}, 1},
	} {
		v, _ := total(fams, "manad_control_requests_total", tc.labels)
		assert.Equal(t, tc.want, v, "control requests %v", tc.labels)
	}
	oversize := map[string]string{"port": portB, "reason": "oversize"}
	if v, n := total(fams, "manad_rx_dropped_total", oversize); v != 0 || n != 2 {
		t.Fatalf("oversize drops before any oversize frame: %v over %d queues", v, n)
	}

	// A's MTU goes to 4000 through ip link (a reconfiguration of A); B stays at 1500, so
	// B's RX buffers cannot hold A's 3000-byte pings.
	harness.Run(t, nsA, "ip", "link", "set", portA, "mtu", "4000")
	a := map[string]string{"port": portA, "op": "mtu", "outcome": "applied"}
	harness.Eventually(t, "the MTU reconfiguration to be counted", func() bool {
		v, _ := total(d.scrape(t), "manad_reconfigurations_total", a)
		return v == 1
	})
	harness.RunErr(nsA, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-M", "dont", "-s", "3000", "10.202.0.2") // no answer expected
	fams = d.scrape(t)
	drops, _ := total(fams, "manad_rx_dropped_total", oversize)
	assert.GreaterOrEqual(t, drops, float64(3), "oversize drops on %s = %v after 3 oversize pings, want at least 3", portB, drops)
	if v, _ := total(fams, "manad_reconfiguration_duration_seconds", map[string]string{"port": portA, "op": "mtu"}); v != 1 {
		t.Errorf("reconfiguration durations observed for %s: %v, want 1", portA, v)
	}

	// An XDP_DROP program on B (an xdp reconfiguration of B): pings from A now die in XDP.
	require.NoError(t, c.AttachXDP(ctx, client.Interface{Name: portB}, genl.XDPProgram{Builtin: "drop"}))
	harness.Run(t, nsA, "ip", "link", "set", portA, "mtu", "1500")
	xdp := map[string]string{"port": portB, "reason": "xdp"}
	before, _ := total(d.scrape(t), "manad_rx_dropped_total", xdp)
	harness.RunErr(nsA, "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.202.0.2") // dropped by XDP
	fams = d.scrape(t)
	after, _ := total(fams, "manad_rx_dropped_total", xdp)
	assert.GreaterOrEqual(t, after, before+3, "XDP drops on %s went from %v to %v after 3 pings, want at least 3 more", portB, before, after)
	if v, _ := total(fams, "manad_reconfigurations_total", map[string]string{"port": portB, "op": "xdp", "outcome": "applied"}); v != 1 {
		t.Errorf("xdp reconfigurations of %s applied: %v, want 1", portB, v)
	}
	v, _ := total(fams, "manad_control_requests_total", map[string]string{"family": "manad", "command": "xdp-attach", "errno": "0"})
	assert.Equal(t, float64(1), v, "manad xdp-attach requests: %v, want 1", v)

	// manactl stats shows the same counter, summed over the queues.
	out := harness.Run(t, nsB, d.manactl, "--socket", d.socket, "stats", portB)
	m := regexp.MustCompile(`(?m)^\s+manad_rx_drop_oversize: (\d+)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "manactl stats has no manad_rx_drop_oversize:\n%s", out)
	n, _ := strconv.ParseFloat(m[1], 64)
	assert.Equal(t, drops, n, "manactl stats manad_rx_drop_oversize = %s, /metrics says", m[1])
}

// TestMetricsListenInUse: an address manad cannot bind is a startup error: exit status 1 and a
// message naming the address, before any port or socket exists.
func TestMetricsListenInUse(t *testing.T) {
	testenv.RequireRoot(t)
	bin, _ := harness.Binaries(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	dir := t.TempDir()
	cfg, socket := writeConfig(t, dir, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config", cfg, "--metrics-listen", busy.Addr().String())
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "manad with a busy metrics address: %v, want exit status 1\n%s", err, out)
	require.Equal(t, 1, ee.ExitCode(), "manad with a busy metrics address: %v, want exit status 1\n%s", err, out)
	assert.Contains(t, string(out), "metrics: listen on "+busy.Addr().String(), "message does not name the address and the reason:\n%s", out)
	assert.Contains(t, string(out), "address already in use", "message does not name the address and the reason:\n%s", out)
	_, err = os.Stat(socket)
	assert.Error(t, err, "control socket %s created by a manad that failed to start", socket)
}
