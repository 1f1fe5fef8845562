package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// netnsStateDaemon is a Daemon with only what the namespace bookkeeping uses: a configuration
// whose state directory is stateDir, a logger and an empty state.
func netnsStateDaemon(t *testing.T, stateDir string) *Daemon {
	cfg := config.Default()
	cfg.Daemon.StateDir = stateDir
	return &Daemon{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), state: config.NewState()}
}

// ipNetNSAdd adds namespace name with ip and deletes it (if still there) when the test ends; it
// returns its inode.
func ipNetNSAdd(t *testing.T, name string) uint64 {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	id, err := nsIDOf(filepath.Join(netnsDir, name))
	require.NoError(t, err)
	return id.Ino
}

// emptyNetNSFile makes /run/netns/name an empty file with nothing mounted on it, as a crash
// between creating and mounting leaves it, modified age ago; it is removed when the test ends.
func emptyNetNSFile(t *testing.T, name string, age time.Duration) {
	t.Helper()
	path := filepath.Join(netnsDir, name)
	require.NoError(t, os.WriteFile(path, nil, 0))
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	then := time.Now().Add(-age)
	require.NoError(t, os.Chtimes(path, then, then))
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil {
		require.ErrorIs(t, err, os.ErrNotExist)
	}
	return err == nil
}

// TestReconcileNetNS: at start, each namespace the state says manad created is kept only while
// /run/netns names that very namespace; an interrupted creation (inode 0) is undone whatever step
// it reached; an empty file is removed; what is dropped is saved.
func TestReconcileNetNS(t *testing.T) {
	testenv.RequireRoot(t)
	require.NoError(t, shareNetNSDir(netnsDir))
	pid := os.Getpid() % 100000
	tests := []struct {
		name     string
		setup    func(t *testing.T, ns string) uint64 // makes /run/netns/ns; returns the inode to record
		kept     bool                                 // the entry stays
		fileLeft bool                                 // /run/netns/ns is still there
	}{
		{name: "gone", setup: func(*testing.T, string) uint64 { return 4026530000 }},
		{name: "intent-missing", setup: func(*testing.T, string) uint64 { return 0 }},
		{name: "same", kept: true, fileLeft: true, setup: ipNetNSAdd},
		{name: "re-added", fileLeft: true, setup: func(t *testing.T, ns string) uint64 { return ipNetNSAdd(t, ns) + 1 }},
		{name: "intent-mounted", setup: func(t *testing.T, ns string) uint64 { ipNetNSAdd(t, ns); return 0 }},
		{name: "intent-empty", setup: func(t *testing.T, ns string) uint64 { emptyNetNSFile(t, ns, 0); return 0 }},
		{name: "recorded-empty", setup: func(t *testing.T, ns string) uint64 { emptyNetNSFile(t, ns, 0); return 4026530001 }},
	}
	dir := t.TempDir()
	d := netnsStateDaemon(t, dir)
	names := map[string]string{}
	for i, tt := range tests {
		ns := fmt.Sprintf("mrc%d%c", pid, 'a'+i)
		names[tt.name] = ns
		d.state.RecordNetNS(ns, tt.setup(t, ns))
	}
	d.reconcileNetNS()
	saved, err := config.LoadState(dir)
	require.NoError(t, err)
	for _, tt := range tests {
		ns := names[tt.name]
		_, kept := d.state.NetNS[ns]
		_, keptOnDisk := saved.NetNS[ns]
		assert.Equal(t, tt.kept, kept, "%s: entry kept %v (saved: %v), want %v", tt.name, kept, keptOnDisk, tt.kept)
		assert.Equal(t, tt.kept, keptOnDisk, "%s: entry kept %v (saved: %v), want %v", tt.name, kept, keptOnDisk, tt.kept)
		assert.Equal(t, tt.fileLeft, exists(t, filepath.Join(netnsDir, ns)), "%s: /run/netns/%s there", tt.name, ns)
	}
}

// TestPortNetNS: a port's namespace is created with its intent saved first; an empty file a
// crash left is replaced once it is older than an `ip netns add` under way could make it, and
// refused (EINVAL, saying how to remove it) before; with a state directory that cannot be written
// nothing is created (the state file's errno).
func TestPortNetNS(t *testing.T) {
	testenv.RequireRoot(t)
	pid := os.Getpid() % 100000
	dir := t.TempDir()
	d := netnsStateDaemon(t, dir)

	ns := fmt.Sprintf("mpn%da", pid)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	id, created, err := d.portNetNS(ns)
	require.NoError(t, err, "portNetNS(%s) = %v, %v, %v; want it created", ns, id, created, err)
	require.True(t, created, "portNetNS(%s) = %v, %v, %v; want it created", ns, id, created, err)
	ino := d.state.NetNS[ns]
	assert.Equal(t, id.Ino, ino, "recorded inode %d, want %d", ino, id.Ino)
	assert.NotEqual(t, uint64(0), ino, "recorded inode %d, want %d", ino, id.Ino)
	if saved, err := config.LoadState(dir); assert.NoError(t, err, "saved state") {
		v, ok := saved.NetNS[ns]
		assert.True(t, ok, "the intent was not saved")
		assert.Equal(t, uint64(0), v, "saved state %+v: want the intent (inode 0) saved before the creation", saved)
	}
	again, created, err := d.portNetNS(ns)
	assert.NoError(t, err, "portNetNS(%s) again", ns)
	assert.False(t, created, "portNetNS(%s) again created a namespace", ns)
	assert.Equal(t, id, again, "portNetNS(%s) again, want the same namespace", ns)

	leftover := fmt.Sprintf("mpn%db", pid)
	emptyNetNSFile(t, leftover, 0)
	_, _, err = d.portNetNS(leftover)
	assert.ErrorIs(t, err, unix.EINVAL, "a fresh empty file: %v, want EINVAL saying how to remove it", err)
	assert.Contains(t, err.Error(), "ip netns del "+leftover, "a fresh empty file: %v, want EINVAL saying how to remove it", err)
	emptyNetNSFile(t, leftover, time.Minute)
	id, created, err = d.portNetNS(leftover)
	require.NoError(t, err, "an old empty file: %v, %v, %v; want it replaced by a namespace", id, created, err)
	require.True(t, created, "an old empty file: %v, %v, %v; want it replaced by a namespace", id, created, err)
	_, mounted, err := inspectNetNSFile(filepath.Join(netnsDir, leftover))
	assert.NoError(t, err, "%s after the repair", leftover)
	assert.True(t, mounted, "%s after the repair: not mounted", leftover)

	unsaved := fmt.Sprintf("mpn%dc", pid)
	bad := netnsStateDaemon(t, "/dev/null/state")
	_, _, err = bad.portNetNS(unsaved)
	assert.ErrorIs(t, err, unix.ENOTDIR, "unsaveable intent: %v, want ENOTDIR (the state file's), not created", err)
	assert.Contains(t, err.Error(), "not created", "unsaveable intent: %v, want ENOTDIR (the state file's), not created", err)
	if exists(t, filepath.Join(netnsDir, unsaved)) {
		_ = exec.Command("ip", "netns", "del", unsaved).Run()
		t.Errorf("namespace %s created although its intent could not be saved", unsaved)
	}
	_, ok := bad.state.NetNS[unsaved]
	assert.False(t, ok, "intent of %s kept in memory although it could not be saved", unsaved)
}
