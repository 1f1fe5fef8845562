package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// must fails t at once on err.
func must(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err)
}

// TestLoadStateNotRegular: a state file that is not a regular file of at most MaxStateSize bytes
// is refused at once, naming the file and what it is, without blocking on it or reading it, and
// is left where it is.
func TestLoadStateNotRegular(t *testing.T) {
	tests := []struct {
		name  string
		make  func(t *testing.T, path string)
		errno unix.Errno
		what  string
	}{
		{"fifo", func(t *testing.T, path string) {
			must(t, unix.Mkfifo(path, 0o600))
		}, unix.EINVAL, "is a FIFO"},
		{"link to /dev/zero", func(t *testing.T, path string) {
			must(t, os.Symlink("/dev/zero", path))
		}, unix.ELOOP, "is a symbolic link"},
		{"link to a regular file", func(t *testing.T, path string) {
			other := filepath.Join(filepath.Dir(path), "elsewhere.json")
			must(t, os.WriteFile(other, []byte(`{"version": 1}`), 0o600))
			must(t, os.Symlink(other, path))
		}, unix.ELOOP, "is a symbolic link"},
		{"directory", func(t *testing.T, path string) {
			must(t, os.Mkdir(path, 0o700))
		}, unix.EISDIR, "is a directory"},
		{"oversized", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, nil, 0o600))
			must(t, os.Truncate(path, MaxStateSize+1)) // sparse: no disk used
		}, unix.EFBIG, "more than 64 MiB"},
		{"socket", func(t *testing.T, path string) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			must(t, err)
			t.Cleanup(func() { unix.Close(fd) })
			must(t, unix.Bind(fd, &unix.SockaddrUnix{Name: path}))
		}, unix.EINVAL, "is a socket"},
		{"character device", func(t *testing.T, path string) {
			testenv.RequireRoot(t)                                               // mknod
			must(t, unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5)))) // /dev/zero's numbers
		}, unix.EINVAL, "is a device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := StatePath(dir)
			tt.make(t, path)
			before, err := os.Lstat(path)
			must(t, err)

			done := make(chan error, 1)
			go func() {
				_, err := LoadState(dir)
				done <- err
			}()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("LoadState blocked on the state file")
			}
			require.ErrorIs(t, err, ErrStateFile, "LoadState = %v; want ErrStateFile and %v", err, tt.errno)
			require.ErrorIs(t, err, tt.errno, "LoadState = %v; want ErrStateFile and %v", err, tt.errno)
			require.NotErrorIs(t, err, ErrStateNewer, "LoadState = %v; want ErrStateFile and %v", err, tt.errno)
			var ce *Error
			if assert.ErrorAs(t, err, &ce, "LoadState") {
				assert.Equal(t, path, ce.File, "LoadState: the *Error names")
			}
			for _, want := range []string{tt.what, "regular file of at most 64 MiB", "move it away"} {
				assert.Contains(t, err.Error(), want, "LoadState = %q, want it to say", err)
			}
			after, err := os.Lstat(path)
			if assert.NoError(t, err, "the state file") {
				assert.Equal(t, before.Mode(), after.Mode(), "the state file changed")
			}
		})
	}
}

// TestLoadStateAtLimit: a regular file of exactly MaxStateSize bytes is read (and here refused as
// corrupt JSON, not for its size).
func TestLoadStateAtLimit(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(StatePath(dir), nil, 0o600))
	must(t, os.Truncate(StatePath(dir), MaxStateSize))
	_, err := LoadState(dir)
	assert.ErrorIs(t, err, unix.EBADMSG, "LoadState of %d zero bytes = %v, want EBADMSG (corrupt), not ErrStateFile", MaxStateSize, err)
	assert.NotErrorIs(t, err, ErrStateFile, "LoadState of %d zero bytes = %v, want EBADMSG (corrupt), not ErrStateFile", MaxStateSize, err)
}

// TestReserveCommit: a reservation holds a temporary file with its blocks allocated; Commit
// turns it into the state file (the same bytes Save writes), Abort leaves nothing behind.
func TestReserveCommit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state") // created by Reserve
	st := sampleState()

	r, err := Reserve(dir, ReserveSlack)
	must(t, err)
	temps := stateTemps(t, dir)
	require.Len(t, temps, 1, "temporary files after Reserve: %v, want one", temps)
	var sb unix.Stat_t
	must(t, unix.Stat(temps[0], &sb))
	assert.GreaterOrEqual(t, sb.Blocks*512, int64(ReserveSlack), "reservation has %d bytes allocated, want at least %d", sb.Blocks*512, ReserveSlack)

	n, err := r.Commit(st)
	must(t, err)
	data, err := os.ReadFile(StatePath(dir))
	must(t, err)
	assert.Equal(t, int64(len(data)), n, "Commit = %d, the file has %d bytes", n, len(data))
	got, err := LoadState(dir)
	must(t, err)
	assert.True(t, reflect.DeepEqual(got, st), "LoadState(Commit(s)) = %+v, want %+v", got, st)
	_, err = r.Commit(st)
	assert.ErrorIs(t, err, unix.EINVAL, "Commit of a spent reservation = %v, want EINVAL", err)
	assert.Empty(t, stateTemps(t, dir), "temporary files after Commit")

	// Save writes the same bytes.
	other := t.TempDir()
	must(t, st.Save(other))
	saved, err := os.ReadFile(StatePath(other))
	assert.NoError(t, err, "reading what Save wrote")
	assert.Equal(t, string(data), string(saved), "Save wrote, Commit")

	// Abort: the state file is untouched, no temporary file is left.
	r, err = Reserve(dir, ReserveSlack)
	must(t, err)
	r.Abort()
	r.Abort()
	assertOnlyState(t, dir, data)
}

// TestReserveReadOnlyAndFull: on a full or a read-only file system Reserve (and Save) fail with
// the file system's errno before anything is changed, and the state file keeps what it had. Real
// file systems: a small tmpfs, filled up, then remounted read-only.
func TestReserveReadOnlyAndFull(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	must(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })

	st := sampleState()
	must(t, st.Save(dir))
	want, err := os.ReadFile(StatePath(dir))
	must(t, err)

	// Full: a file of its own fills the file system.
	fill, err := os.Create(filepath.Join(dir, "fill"))
	must(t, err)
	buf := make([]byte, 16<<10)
	for {
		if _, err := fill.Write(buf); err != nil {
			require.ErrorIs(t, err, unix.ENOSPC)
			break
		}
	}
	must(t, fill.Close())
	_, err = Reserve(dir, ReserveSlack)
	assert.ErrorIs(t, err, unix.ENOSPC, "Reserve on a full file system = %v, want ENOSPC", err)
	err = st.Save(dir)
	assert.ErrorIs(t, err, unix.ENOSPC, "Save on a full file system = %v, want ENOSPC", err)
	assertOnlyState(t, dir, want)

	// Read-only.
	must(t, os.Remove(filepath.Join(dir, "fill")))
	must(t, unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	_, err = Reserve(dir, ReserveSlack)
	assert.ErrorIs(t, err, unix.EROFS, "Reserve on a read-only file system = %v, want EROFS", err)
	err = st.Save(dir)
	assert.ErrorIs(t, err, unix.EROFS, "Save on a read-only file system = %v, want EROFS", err)
	assertOnlyState(t, dir, want)
}

// stateTemps lists dir's temporary state files.
func stateTemps(t *testing.T, dir string) []string {
	t.Helper()
	temps, err := filepath.Glob(filepath.Join(dir, stateTempPattern))
	must(t, err)
	return temps
}

// assertOnlyState checks that dir holds the state file with want and no temporary file.
func assertOnlyState(t *testing.T, dir string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(StatePath(dir))
	assert.NoError(t, err, "state file")
	assert.Equal(t, string(want), string(got), "state file")
	assert.Empty(t, stateTemps(t, dir), "temporary files left")
}

// TestSaveDuringReservation: a Save made while a reservation is held (a port add records the
// namespace it is about to create) leaves the reservation's file alone, so its Commit works.
func TestSaveDuringReservation(t *testing.T) {
	dir := t.TempDir()
	st := NewState()
	r, err := Reserve(dir, 4096)
	require.NoError(t, err)
	st.RecordSettings("mana0", PortSettings{MTU: 1400})
	require.NoError(t, st.Save(dir))
	st.RecordSettings("mana0", PortSettings{MTU: 1500})
	_, err = r.Commit(st)
	require.NoError(t, err, "Commit after a Save during the reservation")
	got, err := LoadState(dir)
	require.NoError(t, err)
	mtu := got.Ports["mana0"].Settings.MTU
	assert.Equal(t, 1500, mtu, "MTU = %d, want the committed 1500", mtu)
}
