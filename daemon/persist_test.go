package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl/nlerr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSaveRefusedAndRetried: with a state directory that cannot be made (its parent is a file:
// ENOTDIR), reserveSave refuses with the errno and a message naming the state file, what happened
// to the change and the fix; a save that cannot be refused (saveState outside a request) leaves
// the state unsaved and is retried until the directory can be made, then saved.
func TestSaveRefusedAndRetried(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "var")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	cfg := config.Default()
	cfg.Daemon.StateDir = filepath.Join(blocker, "state")
	var logs lockedBuffer
	d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	d.state = config.NewState()
	d.state.RecordNetNS("x", 7) // something to save

	d.mu.Lock()
	done, err := d.reserveSave()
	d.mu.Unlock()
	var xe *nlerr.Error
	require.Nil(t, done, "reserveSave = %v; want an ENOTDIR *nlerr.Error", err)
	require.ErrorIs(t, err, unix.ENOTDIR, "reserveSave = %v; want an ENOTDIR *nlerr.Error", err)
	require.ErrorAs(t, err, &xe, "reserveSave = %v; want an ENOTDIR *nlerr.Error", err)
	for _, want := range []string{"cannot save state to " + config.StatePath(cfg.Daemon.StateDir), "not a directory",
		"the change was not applied", "check " + cfg.Daemon.StateDir} {
		assert.Contains(t, xe.Message, want, "extack %q does not say %q", xe.Message, want)
	}

	d.mu.Lock()
	d.saveState()
	unsaved, retry := d.unsaved, d.saveRetry != nil
	d.mu.Unlock()
	require.True(t, unsaved, "after a failed save: unsaved %v, retry scheduled %v; want both", unsaved, retry)
	require.True(t, retry, "after a failed save: unsaved %v, retry scheduled %v; want both", unsaved, retry)
	assert.Contains(t, logs.String(), "saving state failed; retrying", "the failed save is not logged")
	// The cause goes away: a retry saves.
	require.NoError(t, os.Remove(blocker))
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		unsaved = d.unsaved
		d.mu.Unlock()
		if !unsaved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not saved by a retry:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := config.LoadState(cfg.Daemon.StateDir)
	if assert.NoError(t, err, "state file after the retry") {
		assert.Equal(t, uint64(7), st.NetNS["x"], "state file after the retry: %+v", st)
	}
	assert.Contains(t, logs.String(), "state saved again", "the successful retry is not logged")
}
