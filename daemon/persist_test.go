package daemon

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl/nlerr"
)

// TestSaveRefusedAndRetried: with a state directory that cannot be made (its parent is a file:
// ENOTDIR), reserveSave refuses with the errno and a message naming the state file, what happened
// to the change and the fix; a save that cannot be refused (saveState outside a request) leaves
// the state unsaved and is retried until the directory can be made, then saved.
func TestSaveRefusedAndRetried(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "var")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Daemon.StateDir = filepath.Join(blocker, "state")
	var logs lockedBuffer
	d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	d.state = config.NewState()
	d.state.RecordNetNS("x", 7) // something to save

	d.mu.Lock()
	done, err := d.reserveSave()
	d.mu.Unlock()
	var xe *nlerr.Error
	if done != nil || !errors.Is(err, unix.ENOTDIR) || !errors.As(err, &xe) {
		t.Fatalf("reserveSave = %v; want an ENOTDIR *nlerr.Error", err)
	}
	for _, want := range []string{"cannot save state to " + config.StatePath(cfg.Daemon.StateDir), "not a directory",
		"the change was not applied", "check " + cfg.Daemon.StateDir} {
		if !strings.Contains(xe.Message, want) {
			t.Errorf("extack %q does not say %q", xe.Message, want)
		}
	}

	d.mu.Lock()
	d.saveState()
	unsaved, retry := d.unsaved, d.saveRetry != nil
	d.mu.Unlock()
	if !unsaved || !retry {
		t.Fatalf("after a failed save: unsaved %v, retry scheduled %v; want both", unsaved, retry)
	}
	if !strings.Contains(logs.String(), "saving state failed; retrying") {
		t.Errorf("the failed save is not logged:\n%s", logs.String())
	}
	// The cause goes away: a retry saves.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
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
	if err != nil || st.NetNS["x"] != 7 {
		t.Errorf("state file after the retry: %+v, %v", st, err)
	}
	if !strings.Contains(logs.String(), "state saved again") {
		t.Errorf("the successful retry is not logged:\n%s", logs.String())
	}
}
