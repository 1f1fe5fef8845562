package manactl

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnsavableChangeRefused (issue 28): with the state directory full or read-only, a change
// asked for with manactl is refused before it is applied — a non-zero exit, the file system's
// errno and a message naming the state file, saying the change was not applied and how to fix
// it — and the port keeps what is saved. The next change, once the directory is fixed, is saved;
// after a restart the state on disk and in manad agree. The state directory is a real, small
// tmpfs: filled up by a file, remounted read-only.
func TestUnsavableChangeRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, stateDir string) (fix func())
		says   string // the errno's text in the message
		fix    string // the hint in the message
	}{
		{"full", func(t *testing.T, stateDir string) func() {
			fill := filepath.Join(stateDir, "fill")
			f, err := os.Create(fill)
			require.NoError(t, err)
			buf := make([]byte, 16<<10)
			for {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
			f.Close()
			return func() {
				require.NoError(t, os.Remove(fill))
			}
		}, "no space left on device", "free space on the file system of"},
		{"read-only", func(t *testing.T, stateDir string) func() {
			require.NoError(t, unix.Mount("", stateDir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
			return func() {
				require.NoError(t, unix.Mount("", stateDir, "", unix.MS_REMOUNT, ""))
			}
		}, "read-only file system", "read-write"},
	} {
		t.Run(tc.name, func(t *testing.T) { unsavableChange(t, tc.break_, tc.says, tc.fix) })
	}
}

func unsavableChange(t *testing.T, breakDir func(*testing.T, string) func(), says, hint string) {
	dir := worldDir(t)
	stateDir := filepath.Join(dir, "state")
	require.NoError(t, os.Mkdir(stateDir, 0o755))
	require.NoError(t, unix.Mount("tmpfs", stateDir, "tmpfs", 0, "size=512k,mode=0755"))
	t.Cleanup(func() { _ = unix.Unmount(stateDir, unix.MNT_DETACH) })

	ns := harness.Name("mun", "")
	port := harness.Name("mup", "0")
	d := harness.Start(t, dir, `metrics_listen = "127.0.0.1:0"`, fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\nrx_ring = 256\npersistent = false\n", port, ns), ns)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: ns, socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}
	harness.Run(t, ns, "ip", "link", "set", port, "up")
	statePath := config.StatePath(stateDir)
	harness.Eventually(t, "the port's admin state saved", func() bool { // saved shortly after (saveSoon)
		st, err := config.LoadState(stateDir)
		return err == nil && st.Ports[port].Settings.AdminUp
	})
	saved, err := os.ReadFile(statePath)
	require.NoError(t, err)
	before := e.portJSON(t, port)

	fix := breakDir(t, stateDir)
	extra := harness.Name("mux", "1")
	refused := 0
	for _, argv := range [][]string{
		{"set-ring", port, "rx", "512"},
		{"set-mtu", port, "3000"},
		{"set-priv-flags", port, "full-page-rx", "on"},
		{"set-channels", port, "combined", "1"},
		{"set-coalesce", port, "rx-usecs", "100"},
		{"set-features", port, "tso", "off"},
		{"xdp", port, "attach", "drop"},
		{"port", "add", extra, "--segment", "s"},
		{"port", "del", port},
		{"segment", "add", harness.Name("mus", "")},
	} {
		r := e.mctl(t, argv...)
		refused++
		what := strings.Join(argv, " ")
		if r.code == 0 {
			t.Errorf("manactl %s with the state directory broken: exit 0 (stdout %q)", what, r.stdout)
			continue
		}
		for _, want := range []string{"cannot save state to " + statePath, says, "the change was not applied", hint} {
			assert.Contains(t, r.stderr, want, "manactl %s: stderr %q does not say %q", what, r.stderr, want)
		}
	}
	// A request the policy refuses gets its own error, and one that changes nothing succeeds.
	if r := e.mctl(t, "set-ring", port, "rx", "99999"); r.code == 0 || strings.Contains(r.stderr, "cannot save state") {
		t.Errorf("set-ring rx 99999: exit %d, stderr %q; want the ring-size error", r.code, r.stderr)
	}
	ok(t, "set-ring to the current size", e.mctl(t, "set-ring", port, "rx", "256"))
	// Nothing changed: not the port, not the file.
	if after := e.portJSON(t, port); !equalJSON(before, after) {
		t.Errorf("port changed by refused requests:\nbefore %v\nafter  %v", before, after)
	}
	r := e.mctl(t, "list")
	assert.NotContains(t, r.stdout, extra, "refused port add left port")
	if now, err := os.ReadFile(statePath); err != nil || string(now) != string(saved) {
		t.Errorf("state file changed by refused requests: %v\n%s", err, now)
	}
	assert.Contains(t, d.Log(), "change refused: its state cannot be saved", "the log does not say why the change was refused")
	if n := metric(t, d, "manad_state_save_failures_total"); n != float64(refused) {
		t.Errorf("manad_state_save_failures_total = %v, want %d (every refused change)", n, refused)
	}
	n := metric(t, d, "manad_state_unsaved")
	assert.Equal(t, float64(0), n, "manad_state_unsaved = %v, want 0: nothing was changed", n)

	// Fixed: the change goes through and is saved at once; a crash loses nothing.
	fix()
	ok(t, "set-ring after the fix", e.mctl(t, "set-ring", port, "rx", "512"))
	d.Kill9()
	st, err := config.LoadState(stateDir)
	require.NoError(t, err)
	got := st.Ports[port].Settings.RxRing
	assert.Equal(t, 512, got, "state file has rx_ring %d, want 512", got)
	d.Restart()
	after := e.portJSON(t, port)
	if after["rx-ring"] != float64(512) || after["mtu"] != before["mtu"] || after["queues"] != before["queues"] {
		t.Errorf("after the restart: %v; want rx-ring 512 and the rest as before (%v)", after, before)
	}
}

// TestLinkChangeSaveRetried (issue 28): a change made with ip link, which manad cannot refuse,
// is logged and counted when its save fails, and saved by a retry once the state directory is
// writable again.
func TestLinkChangeSaveRetried(t *testing.T) {
	dir := worldDir(t)
	stateDir := filepath.Join(dir, "state")
	require.NoError(t, os.Mkdir(stateDir, 0o755))
	require.NoError(t, unix.Mount("tmpfs", stateDir, "tmpfs", 0, "size=512k,mode=0755"))
	t.Cleanup(func() { _ = unix.Unmount(stateDir, unix.MNT_DETACH) })
	ns := harness.Name("mrn", "")
	port := harness.Name("mrp", "0")
	d := harness.Start(t, dir, `metrics_listen = "127.0.0.1:0"`, fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\npersistent = false\n", port, ns), ns)

	require.NoError(t, unix.Mount("", stateDir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	harness.Run(t, ns, "ip", "link", "set", port, "mtu", "2200")
	harness.Eventually(t, "the failed save in the log", func() bool {
		return strings.Contains(d.Log(), "saving state failed; retrying")
	})
	if n := metric(t, d, "manad_state_unsaved"); n != 1 {
		t.Errorf("manad_state_unsaved = %v while the save fails, want 1", n)
	}
	if n := metric(t, d, "manad_state_save_failures_total"); n < 1 {
		t.Errorf("manad_state_save_failures_total = %v, want the failed save counted", n)
	}
	require.NoError(t, unix.Mount("", stateDir, "", unix.MS_REMOUNT, ""))
	deadline := time.Now().Add(45 * time.Second) // the retries back off: 1, 2, 4 s, … up to 30 s
	for {
		st, err := config.LoadState(stateDir)
		if err == nil && st.Ports[port].Settings.MTU == 2200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MTU 2200 not saved after the state directory became writable: %+v, %v\n%s", st, err, d.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Contains(t, d.Log(), "state saved again", "the log does not say the state was saved again")
	n := metric(t, d, "manad_state_unsaved")
	assert.Equal(t, float64(0), n, "manad_state_unsaved = %v once saved, want 0", n)
}

var metricsAddrRE = regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)

// metric scrapes manad's /metrics (metrics_listen = "127.0.0.1:0": the address is in its log)
// and returns the value of the unlabelled sample name.
func metric(t *testing.T, d *harness.Daemon, name string) float64 {
	t.Helper()
	m := metricsAddrRE.FindStringSubmatch(d.Log())
	require.NotNil(t, m, "no metrics address in the log:\n%s", d.Log())
	resp, err := http.Get("http://" + m[1] + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, "%s", line)
			return f
		}
	}
	t.Fatalf("no sample %s in /metrics:\n%s", name, body)
	return 0
}

// equalJSON compares the settings of two ports of --json list (not their live counters).
func equalJSON(a, b map[string]any) bool {
	for _, k := range []string{"ifname", "admin-up", "mtu", "queues", "rx-ring", "tx-ring", "priv-flags", "xdp", "offload"} {
		x, _ := json.Marshal(a[k])
		y, _ := json.Marshal(b[k])
		if string(x) != string(y) {
			return false
		}
	}
	return true
}

// TestChangeUndoneWhenSaveFails (issue 28): when the state cannot be written although its
// blocks were reserved (here state.json was replaced by a directory while manad ran, so the
// rename fails), the change is undone and the reply says so: a port add removes the port, a SET
// puts the old value back. Once the cause is gone manad saves again by itself, and the state on
// disk and in manad agree after a restart.
func TestChangeUndoneWhenSaveFails(t *testing.T) {
	dir := worldDir(t)
	ns := harness.Name("mcf", "")
	port := harness.Name("mcp", "0")
	d := harness.Start(t, dir, `metrics_listen = "127.0.0.1:0"`, fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\nrx_ring = 256\npersistent = false\n", port, ns), ns)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: ns, socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}
	harness.Run(t, ns, "ip", "link", "set", port, "up")
	stateDir := filepath.Join(dir, "state")
	statePath := config.StatePath(stateDir)
	harness.Eventually(t, "the port's admin state saved", func() bool {
		st, err := config.LoadState(stateDir)
		return err == nil && st.Ports[port].Settings.AdminUp
	})
	before := e.portJSON(t, port)
	coalesce := ok(t, "-c", e.mctl(t, "show-coalesce", port))
	require.NoError(t, os.Remove(statePath))
	require.NoError(t, os.Mkdir(statePath, 0o755))

	extra := harness.Name("mcx", "1")
	r := e.mctl(t, "port", "add", extra, "--netns", ns, "--segment", "s")
	assert.NotEqual(t, 0, r.code, "port add: exit %d, stderr %q; want it undone, saying why", r.code, r.stderr)
	assert.Contains(t, r.stderr, "cannot save state to "+statePath+": ", "port add: exit %d, stderr %q; want it undone, saying why", r.code, r.stderr)
	assert.Contains(t, r.stderr, "; port "+extra+" was not added: "+statePath+" is a directory: remove it, and retry", "port add: exit %d, stderr %q; want it undone, saying why", r.code, r.stderr)
	r = e.mctl(t, "list")
	assert.NotContains(t, r.stdout, extra, "port %s still there after its save failed:\n%s", extra, r.stdout)
	for _, argv := range [][]string{
		{"set-ring", port, "rx", "512"},
		{"set-mtu", port, "3000"},
		{"set-priv-flags", port, "full-page-rx", "on"},
		{"set-channels", port, "combined", "1"},
		{"set-coalesce", port, "rx-usecs", "100"},
		{"set-features", port, "tso", "off"},
		{"xdp", port, "attach", "drop"},
	} {
		what := strings.Join(argv, " ")
		r := e.mctl(t, argv...)
		assert.NotEqual(t, 0, r.code, "%s: exit %d, stderr %q; want the change undone", what, r.code, r.stderr)
		assert.Contains(t, r.stderr, "; the change was undone: "+statePath+" is a directory: remove it, and retry", "%s: exit %d, stderr %q; want the change undone", what, r.code, r.stderr)
		after := e.portJSON(t, port)
		assert.True(t, equalJSON(before, after), "%s: the port kept the change:\nbefore %v\nafter  %v", what, before, after)
	}
	now := ok(t, "-c", e.mctl(t, "show-coalesce", port))
	assert.Equal(t, coalesce, now, "coalescing kept the change:\n%s\nwas\n%s", now, coalesce)
	assert.Contains(t, harness.Run(t, ns, "ip", "link", "show", port), fmt.Sprintf("mtu %v ", before["mtu"]), "the TAP kept the new MTU")

	// The cause gone, a retry saves what manad runs.
	require.NoError(t, os.Remove(statePath))
	// The retries back off (1 s, 2 s, 4 s, … up to 30 s): the next may be a while.
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(statePath); err == nil && metric(t, d, "manad_state_unsaved") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state was not saved again once state.json could be written\n%s", d.Log())
		}
	}
	d.Kill9()
	st, err := config.LoadState(stateDir)
	require.NoError(t, err)
	if got := st.Ports[port].Settings; got.RxRing != 256 || got.MTU != 1500 || got.Queues != 2 || len(got.PrivFlags) != 0 || got.XDP != "" {
		t.Errorf("state file holds %+v, want the settings from before the undone changes", got)
	}
	_, added := st.Ports[extra]
	assert.False(t, added, "state file has port %s, which was undone", extra)
	d.Restart()
	after := e.portJSON(t, port)
	assert.True(t, equalJSON(before, after), "after the restart:\n%v\nwant\n%v", after, before)
	assert.Nil(t, e.portJSON(t, extra), "port %s back after the restart", extra)
}
