package supervisor

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp user-notification uAPI (include/uapi/linux/seccomp.h). golang.org/x/sys has the
// constants and ioctl numbers but not the structs, so they are declared here with the kernel's
// layout (the ioctl numbers encode their sizes: 0x50 for seccomp_notif, 0x18 for the response
// and for seccomp_notif_addfd).

// seccompData is struct seccomp_data.
type seccompData struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

// notif is struct seccomp_notif.
type notif struct {
	ID    uint64
	PID   uint32
	Flags uint32
	Data  seccompData
}

// notifResp is struct seccomp_notif_resp.
type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// notifAddFD is struct seccomp_notif_addfd.
type notifAddFD struct {
	ID         uint64
	Flags      uint32
	SrcFD      uint32
	NewFD      uint32
	NewFDFlags uint32
}

var (
	_ [80]byte = [unsafe.Sizeof(notif{})]byte{}
	_ [24]byte = [unsafe.Sizeof(notifResp{})]byte{}
	_ [24]byte = [unsafe.Sizeof(notifAddFD{})]byte{}
)

// listener is the seccomp notification file descriptor (SECCOMP_FILTER_FLAG_NEW_LISTENER).
type listener struct{ fd int }

// recv waits for the next notification (SECCOMP_IOCTL_NOTIF_RECV). ENOENT means the target
// died between the notification and its reception; the caller polls the fd first so that the
// call does not block once no task uses the filter.
func (l listener) recv(n *notif) error {
	*n = notif{} // the kernel insists on a zeroed struct
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(n)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// respond answers notification id: the syscall returns val, or fails with errno when errno is
// not zero. ENOENT from the kernel means the syscall was interrupted (a signal, or the task
// died): the answer is lost, as the syscall will be restarted or never return.
func (l listener) respond(id uint64, val int64, errno unix.Errno) error {
	r := notifResp{ID: id, Val: val}
	if errno != 0 {
		r.Error = -int32(errno)
		r.Val = 0
	}
	return l.send(&r)
}

// continueSyscall lets the kernel run the syscall as if it had not been trapped
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE): for a descriptor that is not a bridged socket, or an
// ioctl on a device that is not a manad port.
func (l listener) continueSyscall(id uint64) error {
	return l.send(&notifResp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE})
}

func (l listener) send(r *notifResp) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(r)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// valid reports whether notification id is still pending (SECCOMP_IOCTL_NOTIF_ID_VALID): false
// once the target's syscall was interrupted or the target died.
func (l listener) valid(id uint64) bool {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return e == 0
}

// addFD installs srcfd in the target of notification id at descriptor newfd (replacing nothing:
// the caller picks a free one) and answers the syscall with it (SECCOMP_ADDFD_FLAG_SETFD |
// SECCOMP_ADDFD_FLAG_SEND, Linux 5.14: atomic, so a signal cannot leave the descriptor installed
// in a process whose socket() failed). cloexec sets O_CLOEXEC on the new descriptor.
func (l listener) addFD(id uint64, srcfd, newfd int, cloexec bool) (int, error) {
	a := notifAddFD{
		ID:    id,
		Flags: unix.SECCOMP_ADDFD_FLAG_SETFD | unix.SECCOMP_ADDFD_FLAG_SEND,
		SrcFD: uint32(srcfd),
		NewFD: uint32(newfd),
	}
	if cloexec {
		a.NewFDFlags = unix.O_CLOEXEC
	}
	for {
		r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_ADDFD, uintptr(unsafe.Pointer(&a)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

func (l listener) close() error { return unix.Close(l.fd) }

// ErrUnsupported is returned when the kernel cannot supervise a program this way: no seccomp,
// no user notification (Linux < 5.0), or no atomic descriptor hand-over (Linux < 5.14).
var ErrUnsupported = errors.New("seccomp user notification is not available")

// CheckKernel reports whether this kernel has what the supervisor needs: seccomp filters with
// SECCOMP_RET_USER_NOTIF (SECCOMP_GET_ACTION_AVAIL) and SECCOMP_ADDFD_FLAG_SEND (Linux 5.14;
// checked from the release, as no call probes it without a pending notification). The error
// wraps ErrUnsupported and says what is missing.
func CheckKernel() error {
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if e != 0 {
		return fmt.Errorf("%w: seccomp(SECCOMP_GET_ACTION_AVAIL, SECCOMP_RET_USER_NOTIF): %v (needs Linux 5.14 or later built with CONFIG_SECCOMP_FILTER)", ErrUnsupported, e)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err != nil {
		return fmt.Errorf("%w: cannot read the kernel release %q", ErrUnsupported, rel)
	}
	if major < 5 || (major == 5 && minor < 14) {
		return fmt.Errorf("%w: kernel %s is older than 5.14 (SECCOMP_ADDFD_FLAG_SEND)", ErrUnsupported, rel)
	}
	return nil
}
