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
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 16<<10)
			for {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
			f.Close()
			return func() {
				if err := os.Remove(fill); err != nil {
					t.Fatal(err)
				}
			}
		}, "no space left on device", "free space on the file system of"},
		{"read-only", func(t *testing.T, stateDir string) func() {
			if err := unix.Mount("", stateDir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := unix.Mount("", stateDir, "", unix.MS_REMOUNT, ""); err != nil {
					t.Fatal(err)
				}
			}
		}, "read-only file system", "read-write"},
	} {
		t.Run(tc.name, func(t *testing.T) { unsavableChange(t, tc.break_, tc.says, tc.fix) })
	}
}

func unsavableChange(t *testing.T, breakDir func(*testing.T, string) func(), says, hint string) {
	dir := worldDir(t)
	stateDir := filepath.Join(dir, "state")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", stateDir, "tmpfs", 0, "size=512k,mode=0755"); err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
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
			if !strings.Contains(r.stderr, want) {
				t.Errorf("manactl %s: stderr %q does not say %q", what, r.stderr, want)
			}
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
	if r := e.mctl(t, "list"); strings.Contains(r.stdout, extra) {
		t.Errorf("refused port add left port %s:\n%s", extra, r.stdout)
	}
	if now, err := os.ReadFile(statePath); err != nil || string(now) != string(saved) {
		t.Errorf("state file changed by refused requests: %v\n%s", err, now)
	}
	if !strings.Contains(d.Log(), "change refused: its state cannot be saved") {
		t.Errorf("the log does not say why the change was refused:\n%s", d.Log())
	}
	if n := metric(t, d, "manad_state_save_failures_total"); n != float64(refused) {
		t.Errorf("manad_state_save_failures_total = %v, want %d (every refused change)", n, refused)
	}
	if n := metric(t, d, "manad_state_unsaved"); n != 0 {
		t.Errorf("manad_state_unsaved = %v, want 0: nothing was changed", n)
	}

	// Fixed: the change goes through and is saved at once; a crash loses nothing.
	fix()
	ok(t, "set-ring after the fix", e.mctl(t, "set-ring", port, "rx", "512"))
	d.Kill9()
	st, err := config.LoadState(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Ports[port].Settings.RxRing; got != 512 {
		t.Errorf("state file has rx_ring %d, want 512", got)
	}
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
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", stateDir, "tmpfs", 0, "size=512k,mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(stateDir, unix.MNT_DETACH) })
	ns := harness.Name("mrn", "")
	port := harness.Name("mrp", "0")
	d := harness.Start(t, dir, `metrics_listen = "127.0.0.1:0"`, fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\npersistent = false\n", port, ns), ns)

	if err := unix.Mount("", stateDir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
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
	if err := unix.Mount("", stateDir, "", unix.MS_REMOUNT, ""); err != nil {
		t.Fatal(err)
	}
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
	if !strings.Contains(d.Log(), "state saved again") {
		t.Errorf("the log does not say the state was saved again:\n%s", d.Log())
	}
	if n := metric(t, d, "manad_state_unsaved"); n != 0 {
		t.Errorf("manad_state_unsaved = %v once saved, want 0", n)
	}
}

var metricsAddrRE = regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)

// metric scrapes manad's /metrics (metrics_listen = "127.0.0.1:0": the address is in its log)
// and returns the value of the unlabelled sample name.
func metric(t *testing.T, d *harness.Daemon, name string) float64 {
	t.Helper()
	m := metricsAddrRE.FindStringSubmatch(d.Log())
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", d.Log())
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
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
	if err := os.Remove(statePath); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(statePath, 0o755); err != nil {
		t.Fatal(err)
	}

	extra := harness.Name("mcx", "1")
	r := e.mctl(t, "port", "add", extra, "--netns", ns, "--segment", "s")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot save state to "+statePath+": ") ||
		!strings.Contains(r.stderr, "; port "+extra+" was not added: "+statePath+" is a directory: remove it, and retry") {
		t.Errorf("port add: exit %d, stderr %q; want it undone, saying why", r.code, r.stderr)
	}
	if r := e.mctl(t, "list"); strings.Contains(r.stdout, extra) {
		t.Errorf("port %s still there after its save failed:\n%s", extra, r.stdout)
	}
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
		if r.code == 0 || !strings.Contains(r.stderr, "; the change was undone: "+statePath+" is a directory: remove it, and retry") {
			t.Errorf("%s: exit %d, stderr %q; want the change undone", what, r.code, r.stderr)
		}
		if after := e.portJSON(t, port); !equalJSON(before, after) {
			t.Errorf("%s: the port kept the change:\nbefore %v\nafter  %v", what, before, after)
		}
	}
	if now := ok(t, "-c", e.mctl(t, "show-coalesce", port)); now != coalesce {
		t.Errorf("coalescing kept the change:\n%s\nwas\n%s", now, coalesce)
	}
	if link := harness.Run(t, ns, "ip", "link", "show", port); !strings.Contains(link, fmt.Sprintf("mtu %v ", before["mtu"])) {
		t.Errorf("the TAP kept the new MTU: %s", link)
	}

	// The cause gone, a retry saves what manad runs.
	if err := os.Remove(statePath); err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Ports[port].Settings; got.RxRing != 256 || got.MTU != 1500 || got.Queues != 2 || len(got.PrivFlags) != 0 || got.XDP != "" {
		t.Errorf("state file holds %+v, want the settings from before the undone changes", got)
	}
	if _, added := st.Ports[extra]; added {
		t.Errorf("state file has port %s, which was undone", extra)
	}
	d.Restart()
	if after := e.portJSON(t, port); !equalJSON(before, after) {
		t.Errorf("after the restart:\n%v\nwant\n%v", after, before)
	}
	if p := e.portJSON(t, extra); p != nil {
		t.Errorf("port %s back after the restart: %v", extra, p)
	}
}
