package supervisor

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ChildEnv marks the re-executed manactl that becomes the supervised program: with it set,
// manactl's main calls ChildMain before anything else. Its value is unused; the variable is
// removed before the program starts, so the program's environment is the caller's.
const ChildEnv = "_MANACTL_EXEC_CHILD"

// childFD is where the re-executed manactl finds its end of the hand-over socket (ExtraFiles[0]).
const childFD = 3

// ChildMain is the re-executed manactl of Run: on its one locked thread it sets no_new_privs,
// installs the filter with SECCOMP_FILTER_FLAG_NEW_LISTENER, hands the listener to the
// supervisor over the hand-over socket, waits for its go-ahead and execve(2)s the program
// (os.Args[1] is its path, os.Args[2:] its argv). Both the filter and no_new_privs belong to
// that thread, and execve keeps them for the program and everything it starts. It never
// returns: a failure before execve is reported on the hand-over socket (the supervisor prints
// it) and ends the process with status 1, or 126/127 as a shell's for a program it cannot
// run.
func ChildMain() {
	runtime.LockOSThread()
	if len(os.Args) < 3 {
		childFail(1, "manactl exec: internal error: no program to run")
	}
	path, argv := os.Args[1], os.Args[2:]
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, ChildEnv+"=") {
			env = append(env, kv)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		childFail(1, fmt.Sprintf("manactl exec: prctl(PR_SET_NO_NEW_PRIVS): %v", err))
	}
	l, err := installFilter()
	if err != nil {
		childFail(1, fmt.Sprintf("manactl exec: %v", err))
	}
	rights := unix.UnixRights(l)
	if err := unix.Sendmsg(childFD, []byte{'L'}, rights, nil, 0); err != nil {
		childFail(1, fmt.Sprintf("manactl exec: hand the seccomp listener over: %v", err))
	}
	unix.Close(l)
	// The go-ahead: the supervisor has the listener and serves it, so the program's first
	// trapped call is answered.
	var b [1]byte
	if n, err := unix.Read(childFD, b[:]); n != 1 || err != nil {
		os.Exit(1) // the supervisor is gone; it reports why
	}
	// execve closes the hand-over socket (the supervisor reads its end's EOF as "started") and
	// the program inherits no descriptor of manactl's.
	unix.CloseOnExec(childFD)
	err = syscall.Exec(path, argv, env)
	status := 126
	if err == unix.ENOENT {
		status = 127
	}
	childFail(status, fmt.Sprintf("manactl exec: %s: %v", path, err))
}

// childFail reports msg to the supervisor (an 'E' datagram) and to stderr when the supervisor
// already let the program start, and exits with status.
func childFail(status int, msg string) {
	if _, err := unix.Write(childFD, append([]byte{'E'}, msg...)); err != nil {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(status)
}

// installFilter sets the calling thread's seccomp filter and returns the listener.
func installFilter() (int, error) {
	f, err := Filter()
	if err != nil {
		return -1, err
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f)
	if e != 0 {
		return -1, fmt.Errorf("%w: seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): %v", ErrUnsupported, e)
	}
	return int(r), nil
}
