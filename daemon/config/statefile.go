package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MaxStateSize bounds the state file LoadState reads: 64 MiB, far above what 1,000 ports and
// their segments take (about 1 MiB), far below what would hurt manad's memory.
const MaxStateSize = 64 << 20

// ErrStateFile is what LoadState's error matches (errors.Is) when the state file is not a
// regular file of at most MaxStateSize bytes: a FIFO, a device, a directory, a symbolic link (to
// /dev/zero, say) or a huge file. manad neither reads such a file (a FIFO blocks, /dev/zero never
// ends) nor sets it aside (it is not manad's): it refuses to start, naming the file. The error
// matches the errno too: EINVAL (not a regular file), EISDIR, ELOOP (a symbolic link) or EFBIG.
var ErrStateFile = errors.New("the state file must be a regular file")

// readStateFile reads path, the state file, without following a symbolic link, without opening
// anything that is not a regular file (Lstat first; then the opened file is checked again with
// fstat, in case it was replaced meanwhile) and never more than MaxStateSize bytes. O_NONBLOCK
// keeps the open of a FIFO swapped in between the two checks from blocking.
//
// Errors: fs.ErrNotExist when there is no file; an *Error naming path that matches
// ErrStateFile and its errno for a file of the wrong type or size; the os error otherwise.
func readStateFile(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if err := checkStateFile(path, fi); err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) { // replaced by a link since the Lstat
			return nil, stateFileError(path, "is a symbolic link", unix.ELOOP)
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkStateFile(path, fi); err != nil {
		return nil, err
	}
	// The file may grow after the fstat: the limit holds whatever it does.
	data, err := io.ReadAll(io.LimitReader(f, MaxStateSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxStateSize {
		return nil, stateFileError(path, fmt.Sprintf("grew beyond %d MiB while read", MaxStateSize>>20), unix.EFBIG)
	}
	return data, nil
}

// checkStateFile says what is wrong with a state file that fi describes, or nil.
func checkStateFile(path string, fi fs.FileInfo) error {
	switch t := fi.Mode().Type(); {
	case t&fs.ModeSymlink != 0:
		return stateFileError(path, "is a symbolic link", unix.ELOOP)
	case t&fs.ModeDir != 0:
		return stateFileError(path, "is a directory", unix.EISDIR)
	case t&fs.ModeNamedPipe != 0:
		return stateFileError(path, "is a FIFO", unix.EINVAL)
	case t&fs.ModeSocket != 0:
		return stateFileError(path, "is a socket", unix.EINVAL)
	case t&fs.ModeDevice != 0:
		return stateFileError(path, "is a device", unix.EINVAL)
	case t != 0:
		return stateFileError(path, "is not a regular file", unix.EINVAL)
	case fi.Size() > MaxStateSize:
		return stateFileError(path, fmt.Sprintf("has %d bytes, more than %d MiB", fi.Size(), MaxStateSize>>20), unix.EFBIG)
	}
	return nil
}

// stateFileError is the *Error of a state file of the wrong type or size: what it is, what manad
// wants instead and how to get there.
func stateFileError(path, what string, errno unix.Errno) error {
	return &Error{File: path, Msg: fmt.Sprintf("%s: %s of at most %d MiB (manad replaces it on every save); "+
		"remove or move it away to start from the configuration", what, ErrStateFile, MaxStateSize>>20),
		Err: stateFileErr{errno}}
}

// stateFileErr is the cause an *Error of stateFileError carries: it matches ErrStateFile and the
// errno.
type stateFileErr struct{ errno unix.Errno }

func (e stateFileErr) Error() string   { return ErrStateFile.Error() + ": " + e.errno.Error() }
func (e stateFileErr) Unwrap() []error { return []error{ErrStateFile, e.errno} }

// ReserveSlack is what Reserve's caller adds to the state's last size: room for what one change
// adds (a port created at runtime takes about 1 KiB, a segment less).
const ReserveSlack = 64 << 10

// Reservation is the next write of the state file, prepared before a change is applied so that
// a state directory that is read-only or full refuses the change rather than losing it: the
// temporary file Save would write exists and has its blocks allocated. Commit then writes the
// state into it and renames it over the state file; Abort removes it. A Reservation is used by one
// goroutine (the daemon holds its configuration lock from Reserve to Commit or Abort).
type Reservation struct {
	dir     string
	f       *os.File
	created bool // dir did not exist: its parent is fsynced too at Commit
}

// Reserve prepares the next save of the state in dir: it creates dir (0755) when missing,
// removes the temporary files an earlier crash left behind, creates the temporary file and
// allocates size bytes to it (fallocate; zeros written where the file system has no fallocate),
// so that the write at Commit does not run out of space. size is what the next state takes at
// most: the last one's size (Commit's result) plus ReserveSlack.
//
// Errors: the os error of the step that failed (errors.Is with unix.EROFS, unix.ENOSPC,
// unix.EDQUOT, unix.EACCES, …); nothing is then left behind and the state file is untouched.
func Reserve(dir string, size int64) (*Reservation, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	removeStaleTemps(dir)
	f, err := os.CreateTemp(dir, stateTempPattern)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	// The lock marks the file as a live reservation: removeStaleTemps (another Reserve or Save
	// while this one is held, as when a port add records its new namespace) leaves it alone.
	// A crashed process's lock is gone with it.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("state: lock %s: %w", f.Name(), err)
	}
	if err := allocate(f, size); err != nil {
		f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("state: reserving %d bytes in %s: %w", size, f.Name(), err)
	}
	return &Reservation{dir: dir, f: f, created: errors.Is(statErr, fs.ErrNotExist)}, nil
}

// allocate gives f size bytes of disk: fallocate, or zeros where the file system does not
// support it.
func allocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	zeros := make([]byte, 32<<10)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			return err
		}
	}
	return f.Sync()
}

// Commit writes s into the reserved file, fsyncs it, renames it over the state file and fsyncs
// the directory, as Save does, and returns the file's size; the Reservation is then spent.
//
// Errors: the os error of the step that failed (a write beyond the reservation may still meet
// unix.ENOSPC; an I/O error is unix.EIO); the previous state file is then untouched.
func (r *Reservation) Commit(s *State) (int64, error) {
	if r.f == nil {
		return 0, fmt.Errorf("state: reservation already used: %w", unix.EINVAL)
	}
	f := r.f
	r.f = nil
	data, err := s.marshal()
	if err != nil {
		f.Close()
		_ = os.Remove(f.Name())
		return 0, fmt.Errorf("state: %w", err)
	}
	return int64(len(data)), r.write(f, data)
}

// write is Commit with the state's bytes.
func (r *Reservation) write(f *os.File, data []byte) error {
	tmp := f.Name()
	_, err := f.WriteAt(data, 0)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("state: writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, StatePath(r.dir)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("state: %w", err)
	}
	// The rename is durable only once the directory entry is (and, for a directory created
	// just now, the directory's own entry in its parent).
	if err := syncDir(r.dir); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if r.created {
		if err := syncDir(filepath.Dir(r.dir)); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	return nil
}

// Abort gives the reservation up: the temporary file is removed, the state file untouched. Abort
// after Commit (or twice) does nothing.
func (r *Reservation) Abort() {
	if r == nil || r.f == nil {
		return
	}
	r.f.Close()
	_ = os.Remove(r.f.Name())
	r.f = nil
}
