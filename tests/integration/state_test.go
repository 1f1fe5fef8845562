package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statePort is the one-port configuration of the state file tests: its MTU (2000) is not the
// default, so a port running with it was built from the configuration.
func statePort(name, ns string) string {
	return fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nmtu = 2000\n", name, ns)
}

// TestUnusableStateFile (issue 13): a state file manad cannot use is kept as state.json.bad-<time>,
// byte for byte, the reason and the copy's path are logged, and manad starts from the
// configuration and saves a fresh state.
func TestUnusableStateFile(t *testing.T) {
	name, ns := harness.Name("msf", "0"), harness.Name("msf", "")
	good := fmt.Sprintf(`{"version": 1, "ports": {%q: {"settings": {"mtu": 3000, "queues": 4, "rx_ring": 1024, "tx_ring": 256, "priv_flags": [], "xdp": "", "admin_up": true}}}, "deleted": []}`, name)
	for _, tc := range []struct {
		name, data string
		reason     string // in the logged error
	}{
		{"bad JSON", strings.Replace(good, `"ports": {`, `"ports": {,`, 1), "invalid character ','"},
		{"wrong type", strings.Replace(good, `"mtu": 3000`, `"mtu": "3000"`, 1), "cannot unmarshal string"},
		{"truncated", good[:len(good)/2], "unexpected end of JSON input"},
		{"no version", strings.Replace(good, `"version": 1, `, "", 1), "no version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			stateDir := filepath.Join(dir, "state")
			require.NoError(t, os.MkdirAll(stateDir, 0o700))
			statePath := config.StatePath(stateDir)
			require.NoError(t, os.WriteFile(statePath, []byte(tc.data), 0o600))
			d := harness.Start(t, dir, "", statePort(name, ns), ns)

			kept, _ := filepath.Glob(statePath + ".bad-*")
			require.Len(t, kept, 1, "kept copies %q, want one state.json.bad-<time>\n%s", kept, d.Log())
			if got, err := os.ReadFile(kept[0]); err != nil || string(got) != tc.data {
				t.Errorf("kept copy %s = %q, %v; want the file as it was, %q", kept[0], got, err, tc.data)
			}
			var line string
			for l := range strings.Lines(d.Log()) {
				if strings.Contains(l, "state file unusable") {
					line = l
				}
			}
			if line == "" || !strings.Contains(line, "level=ERROR") || !strings.Contains(line, kept[0]) ||
				!strings.Contains(line, statePath) || !strings.Contains(line, tc.reason) {
				t.Errorf("no ERROR naming the file, the reason %q and the copy %s; log:\n%s", tc.reason, kept[0], d.Log())
			}

			// Started from the configuration: the port exists with the file's MTU, not the
			// 3000 the unusable state held.
			info, err := d.Client(ns).Port(context.Background(), client.Interface{Name: name})
			require.NoError(t, err)
			assert.Equal(t, uint32(2000), info.MTU, "port MTU %d, want the configuration's 2000", info.MTU)
			// And a fresh, usable state replaces the bad one.
			if _, err := config.LoadState(stateDir); err != nil {
				t.Errorf("state file after the start: %v", err)
			}
		})
	}
}

// TestNewerStateFile (issue 13): a state file of a newer format (a newer version, or a field this
// manad does not know in a file of its version: a newer manad adds fields without a new version)
// is refused with a clear message: manad exits with status 2 (which systemd does not restart)
// before it creates anything, and the file stays exactly as it was, so that the newer manad finds
// it again.
func TestNewerStateFile(t *testing.T) {
	bin, _ := harness.Binaries(t)
	for _, tc := range []struct {
		name, data string
		says       []string // in the log, whose text form escapes quotes
	}{
		{"version", `{"version": 2, "ports": {"x": {"settings": {"mtu": "a string, in version 2"}}}, "tunnels": []}`, []string{"version 2 was written by a newer manad"}},
		{"field", `{"version": 1, "ports": {"x": {"settings": {"mtu": 1500, "wake_on_lan": true}}}, "deleted": []}`, []string{"wake_on_lan", "is unknown to this manad (state version 1): written by a newer manad?"}},
	} {
		t.Run(tc.name, func(t *testing.T) { newerStateFile(t, bin, []byte(tc.data), tc.says) })
	}
}

func newerStateFile(t *testing.T, bin string, data []byte, says []string) {
	name, ns := harness.Name("msn", "0"), harness.Name("msn", "")
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	require.NoError(t, os.MkdirAll(stateDir, 0o700))
	statePath := config.StatePath(stateDir)
	require.NoError(t, os.WriteFile(statePath, data, 0o600))
	before, err := os.Stat(statePath)
	require.NoError(t, err)
	cfg := filepath.Join(dir, "manad.toml")
	sock := filepath.Join(dir, "manad.sock")
	text := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n%s", sock, stateDir, statePort(name, ns))
	require.NoError(t, os.WriteFile(cfg, []byte(text), 0o644))
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() }) // only if manad wrongly made it

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config", cfg)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "manad with a newer state file: %v, want exit status 2\n%s", err, out.String())
	require.Equal(t, 2, ee.ExitCode(), "manad with a newer state file: %v, want exit status 2\n%s", err, out.String())
	for _, want := range append([]string{statePath, "move the file away"}, says...) {
		assert.Contains(t, out.String(), want, "message does not say")
	}
	if got, err := os.ReadFile(statePath); err != nil || !bytes.Equal(got, data) {
		t.Errorf("newer state file changed: %q, %v", got, err)
	}
	if after, err := os.Stat(statePath); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("newer state file rewritten (mtime %v, was %v): %v", after.ModTime(), before.ModTime(), err)
	}
	entries, _ := os.ReadDir(stateDir)
	assert.Len(t, entries, 1, "state directory holds %v, want only state.json", entries)
	_, err = os.Stat(sock)
	assert.ErrorIs(t, err, os.ErrNotExist, "socket left behind")
	_, err = os.Stat(filepath.Join("/run/netns", ns))
	assert.ErrorIs(t, err, os.ErrNotExist, "manad created namespace %s before refusing to start", ns)
}
