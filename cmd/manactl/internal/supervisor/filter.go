package supervisor

import (
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// FDRange is the descriptor range where the supervisor installs a program's bridged netlink
// sockets. The filter traps the socket calls that must be emulated (bind, getsockname,
// setsockopt, recvmsg, …) only for descriptors in this range, so the program's other sockets
// pay nothing; a descriptor in the range that is not a bridged socket (the program dup2'd
// something there) is recognised by its inode and let through unchanged. It stays below 1024,
// the soft RLIMIT_NOFILE most programs run with, where SECCOMP_ADDFD_FLAG_SETFD can place a
// descriptor.
const (
	FDRangeLo = 900
	FDRangeHi = 1000
)

// fdSyscalls are the calls trapped for descriptors in the range. sendmsg and sendto are, so
// that a request is answered inside the send as the kernel answers it (NetlinkSocket.Request);
// what the bridge does not take there goes on into the pair, as write and sendmmsg, which are
// not trapped, always do: a connected SOCK_SEQPACKET socket ignores the destination address
// (unix_seqpacket_sendmsg), so a request reaches the bridge unchanged. read() is not trapped
// either: it returns no address, so the Unix socket's answer is the kernel's.
var fdSyscalls = []uint32{
	unix.SYS_BIND, unix.SYS_CONNECT, unix.SYS_GETSOCKNAME, unix.SYS_GETPEERNAME,
	unix.SYS_SETSOCKOPT, unix.SYS_GETSOCKOPT, unix.SYS_RECVMSG, unix.SYS_RECVFROM, unix.SYS_RECVMMSG,
	unix.SYS_SENDMSG, unix.SYS_SENDTO,
}

// auditArch is the AUDIT_ARCH_* of this build: the filter bridges only programs of the
// supervisor's own architecture (a 32-bit program on a 64-bit kernel uses other syscall numbers
// and struct layouts, and runs unbridged).
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("%w: manactl exec supports amd64 and arm64, not %s", ErrUnsupported, runtime.GOARCH)
}

// seccomp_data offsets: nr at 0, arch at 4, args[i] at 16+8i (low half first: little-endian).
const (
	offNr   = 0
	offArch = 4
)

func offArg(i int) uint32 { return 16 + 8*uint32(i) }

// Filter returns the classic BPF program the supervised process runs on every syscall: it
// answers SECCOMP_RET_USER_NOTIF for socket(AF_NETLINK, *, NETLINK_GENERIC),
// ioctl(*, SIOCETHTOOL, *) and the socket calls of fdSyscalls on a descriptor in
// [FDRangeLo, FDRangeHi), and SECCOMP_RET_ALLOW for everything else. Calls of another
// architecture (and x32's, whose numbers have bit 30 set) are allowed unchanged.
func Filter() ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const (
		allow  = -1 // symbolic targets, resolved below
		notify = -2
	)
	type ins struct {
		i           bpf.Instruction
		tTrue, tFal int // jump targets (instruction index, allow, notify); 0 = next
	}
	var p []ins
	emit := func(i bpf.Instruction) { p = append(p, ins{i: i}) }
	jeq := func(v uint32, t, f int) {
		p = append(p, ins{i: bpf.JumpIf{Cond: bpf.JumpEqual, Val: v}, tTrue: t, tFal: f})
	}
	jge := func(v uint32, t, f int) {
		p = append(p, ins{i: bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: v}, tTrue: t, tFal: f})
	}
	ld := func(off uint32) { emit(bpf.LoadAbsolute{Off: off, Size: 4}) }

	// Dispatch on the syscall number; the blocks' indexes are patched once known.
	ld(offArch)
	jeq(arch, 0, allow)
	ld(offNr)
	socketJ := len(p)
	jeq(unix.SYS_SOCKET, 0, 0)
	ioctlJ := len(p)
	jeq(unix.SYS_IOCTL, 0, 0)
	fdJ := len(p)
	for _, nr := range fdSyscalls {
		jeq(nr, 0, 0)
	}
	emit(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})

	socketB := len(p) // socket(domain, type, protocol)
	ld(offArg(0))
	jeq(unix.AF_NETLINK, 0, allow)
	ld(offArg(2))
	jeq(unix.NETLINK_GENERIC, notify, allow)

	ioctlB := len(p) // ioctl(fd, request, arg)
	ld(offArg(1))
	jeq(unix.SIOCETHTOOL, notify, allow)

	fdB := len(p) // bind/…/recvfrom(fd, …)
	ld(offArg(0))
	jge(FDRangeLo, 0, allow)
	jge(FDRangeHi, allow, notify)

	allowI := len(p)
	emit(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	notifyI := len(p)
	emit(bpf.RetConstant{Val: unix.SECCOMP_RET_USER_NOTIF})

	p[socketJ].tTrue = socketB
	p[ioctlJ].tTrue = ioctlB
	for k := range fdSyscalls {
		p[fdJ+k].tTrue = fdB
	}

	out := make([]bpf.Instruction, len(p))
	for n, in := range p {
		j, ok := in.i.(bpf.JumpIf)
		if !ok {
			out[n] = in.i
			continue
		}
		skip := func(t int) (uint8, error) {
			switch t {
			case 0:
				return 0, nil
			case allow:
				t = allowI
			case notify:
				t = notifyI
			}
			d := t - n - 1
			if d < 0 || d > 255 {
				return 0, fmt.Errorf("filter: jump from %d to %d out of range", n, t)
			}
			return uint8(d), nil
		}
		var err error
		if j.SkipTrue, err = skip(in.tTrue); err != nil {
			return nil, err
		}
		if j.SkipFalse, err = skip(in.tFal); err != nil {
			return nil, err
		}
		out[n] = j
	}
	raw, err := bpf.Assemble(out)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return f, nil
}
