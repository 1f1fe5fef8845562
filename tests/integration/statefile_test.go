package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIrregularStateFile (issue 28): a state file that is not a regular file of at most 64 MiB
// — a FIFO (which would block the read), a link to /dev/zero (which never ends), a directory, a
// huge file — stops manad at once with exit status 2 and a message naming the file, what it is
// and what to do; manad creates nothing and leaves the file where it is.
func TestIrregularStateFile(t *testing.T) {
	testenv.RequireRoot(t)
	bin, _ := harness.Binaries(t)
	for _, tc := range []struct {
		name string
		make func(path string) error
		says string
	}{
		{"fifo", func(path string) error { return unix.Mkfifo(path, 0o600) }, "is a FIFO"},
		{"link to /dev/zero", func(path string) error { return os.Symlink("/dev/zero", path) }, "is a symbolic link"},
		{"directory", func(path string) error { return os.Mkdir(path, 0o700) }, "is a directory"},
		{"oversized", func(path string) error {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				return err
			}
			return os.Truncate(path, config.MaxStateSize+1) // sparse
		}, "more than 64 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, ns := harness.Name("mif", "0"), harness.Name("mif", "")
			dir := t.TempDir()
			stateDir := filepath.Join(dir, "state")
			require.NoError(t, os.MkdirAll(stateDir, 0o700))
			statePath := config.StatePath(stateDir)
			require.NoError(t, tc.make(statePath))
			before, err := os.Lstat(statePath)
			require.NoError(t, err)
			cfg := filepath.Join(dir, "manad.toml")
			sock := filepath.Join(dir, "manad.sock")
			text := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n%s", sock, stateDir, statePort(name, ns))
			require.NoError(t, os.WriteFile(cfg, []byte(text), 0o644))
			t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() }) // only if manad wrongly made it

			// Well within the minute: a manad that blocks or reads without end is killed here.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--config", cfg)
			cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err = cmd.Run()
			var ee *exec.ExitError
			require.NoError(t, ctx.Err(), "manad with a state file that %s: %v (timed out: %v), want exit status 2\n%s", tc.says, err, ctx.Err() != nil, out.String())
			require.ErrorAs(t, err, &ee, "manad with a state file that %s: %v (timed out: %v), want exit status 2\n%s", tc.says, err, ctx.Err() != nil, out.String())
			require.Equal(t, 2, ee.ExitCode(), "manad with a state file that %s: %v (timed out: %v), want exit status 2\n%s", tc.says, err, ctx.Err() != nil, out.String())
			for _, want := range []string{statePath, tc.says, "regular file of at most 64 MiB", "move it away"} {
				assert.Contains(t, out.String(), want, "message does not say")
			}
			after, err := os.Lstat(statePath)
			if err != nil || after.Mode() != before.Mode() || after.Size() != before.Size() {
				t.Errorf("state file changed: %v, %v (was %v, %d bytes)", after, err, before.Mode(), before.Size())
			}
			entries, _ := os.ReadDir(stateDir)
			assert.Len(t, entries, 1, "state directory holds %v, want only state.json", entries)
			if _, err := os.Stat(filepath.Join("/run/netns", ns)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("manad created namespace %s before refusing to start", ns)
			}
		})
	}
}
