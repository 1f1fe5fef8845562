package supervisor

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetNS runs f on an OS thread in the network namespace at path (inode ino): directly when it
// is the supervisor's own, else on a locked thread that enters it (setns needs CAP_SYS_ADMIN
// over the namespace; a program that made its own namespace without it is bridged in the
// supervisor's). The thread goes back to its namespace after f; if that fails, it stays locked
// and the runtime discards it when the goroutine ends.
func inNetNS(path string, ino uint64, f func() error) error {
	var own unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &own); err == nil && (ino == 0 || own.Ino == ino) {
		return f()
	}
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(target)
	runtime.LockOSThread()
	back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open own netns: %w", err)
	}
	defer unix.Close(back)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter the program's network namespace: %w", err)
	}
	ferr := f()
	if err := unix.Setns(back, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("leave the program's network namespace: %w", err) // thread stays locked
	}
	runtime.UnlockOSThread()
	return ferr
}
