package nlbridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ksock is a kernel NETLINK_GENERIC socket driven by the runtime's poller: raw system calls,
// because the bridge needs what a netlink library hides (the group a datagram was sent to, the
// socket's own ENOBUFS, binding on the program's behalf).
type ksock struct {
	f  *os.File
	rc syscall.RawConn
}

// openKernel creates a non-blocking NETLINK_GENERIC socket in the calling thread's network
// namespace, with NETLINK_PKTINFO on so that every datagram says which group it came to.
func openKernel() (*ksock, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("nlbridge: kernel generic netlink socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_PKTINFO, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nlbridge: NETLINK_PKTINFO: %w", err)
	}
	f := os.NewFile(uintptr(fd), "netlink-generic")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &ksock{f: f, rc: rc}, nil
}

func (k *ksock) Close() error { return k.f.Close() }

// control runs fn on the socket's descriptor.
func (k *ksock) control(fn func(fd int) error) error {
	var ferr error
	if err := k.rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// send sends one datagram to the kernel (nl_pid 0): explicitly addressed, so that a connect(2)
// the program made to another address does not divert the bridge's requests.
func (k *ksock) send(b []byte) error {
	var serr error
	err := k.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	if err != nil {
		return err
	}
	return serr
}

// sendConnected sends b to the address the socket is connected to.
func (k *ksock) sendConnected(b []byte) error {
	var serr error
	err := k.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, nil)
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	if err != nil {
		return err
	}
	return serr
}

// recv reads one datagram, waiting for one (see recvNow).
func (k *ksock) recv() (b []byte, group uint32, err error) {
	for {
		b, group, _, err = k.recvNow()
		if err != unix.EAGAIN {
			return b, group, err
		}
		if err = k.wait(); err != nil {
			return nil, 0, err
		}
	}
}

// wait parks until a datagram (or a socket error) is waiting, consuming nothing but the error:
// ENOBUFS is the socket's overrun (sk_err), which the kernel reports once.
func (k *ksock) wait() error {
	var werr error
	err := k.rc.Read(func(fd uintptr) bool {
		_, _, werr = unix.Recvfrom(int(fd), nil, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return werr != unix.EAGAIN && werr != unix.EINTR
	})
	if err != nil {
		return err
	}
	return werr
}

// recvNow reads one datagram without waiting (EAGAIN when none is queued), sized first with
// MSG_PEEK|MSG_TRUNC so that the buffer is exactly as long as the datagram: the kernel sizes
// later dump datagrams by the longest read it has seen (max_recvmsg_len), and the program, which
// reads what the bridge passes on, may read with a small buffer. group is the multicast group
// the datagram was sent to, 0 for a unicast one; from is the port id of its sender (0: the
// kernel). ENOBUFS is the socket's overrun.
func (k *ksock) recvNow() (b []byte, group, from uint32, err error) {
	var n, got, oobn int
	var buf, oob []byte
	var sa unix.Sockaddr
	err = k.control(func(fd int) error {
		var err error
		for {
			n, _, err = unix.Recvfrom(fd, nil, unix.MSG_PEEK|unix.MSG_TRUNC|unix.MSG_DONTWAIT)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			return err
		}
		buf = make([]byte, max(n, 1))
		oob = make([]byte, unix.CmsgSpace(4))
		for {
			got, oobn, _, sa, err = unix.Recvmsg(fd, buf, oob, unix.MSG_DONTWAIT)
			if err != unix.EINTR {
				return err
			}
		}
	})
	if err != nil {
		return nil, 0, 0, err
	}
	if nl, ok := sa.(*unix.SockaddrNetlink); ok {
		from = nl.Pid
	}
	if cms, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, cm := range cms {
			if cm.Header.Level == unix.SOL_NETLINK && cm.Header.Type == unix.NETLINK_PKTINFO && len(cm.Data) >= 4 {
				group = binary.NativeEndian.Uint32(cm.Data)
			}
		}
	}
	return buf[:got], group, from, nil
}

// setsockopt applies a raw option value, exactly the bytes the program passed.
func (k *ksock) setsockopt(level, name int, val []byte) error {
	return k.control(func(fd int) error {
		var p unsafe.Pointer
		if len(val) > 0 {
			p = unsafe.Pointer(&val[0])
		}
		_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name), uintptr(p), uintptr(len(val)), 0)
		if e != 0 {
			return e
		}
		return nil
	})
}

// getsockopt reads an option into a buffer of size bytes and returns what the kernel wrote
// (its optlen may exceed size, as NETLINK_LIST_MEMBERSHIPS reports the length it needs: then
// the value is size bytes and need says how many it wanted).
func (k *ksock) getsockopt(level, name, size int) (val []byte, need int, err error) {
	if size < 0 {
		return nil, 0, unix.EINVAL
	}
	buf := make([]byte, size)
	err = k.control(func(fd int) error {
		l := uint32(size)
		var p unsafe.Pointer
		if size > 0 {
			p = unsafe.Pointer(&buf[0])
		}
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
		if e != 0 {
			return e
		}
		need = int(l)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return buf[:min(need, size)], need, nil
}

// sockname returns the socket's address (its port id once bound).
func (k *ksock) sockname() (*unix.SockaddrNetlink, error) {
	var sa unix.Sockaddr
	err := k.control(func(fd int) (err error) { sa, err = unix.Getsockname(fd); return err })
	if err != nil {
		return nil, err
	}
	nl, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		return nil, errors.New("nlbridge: getsockname: not a netlink address")
	}
	return nl, nil
}

// peername returns the socket's peer (the kernel, pid 0, unless connected elsewhere).
func (k *ksock) peername() (*unix.SockaddrNetlink, error) {
	var sa unix.Sockaddr
	err := k.control(func(fd int) (err error) { sa, err = unix.Getpeername(fd); return err })
	if err != nil {
		return nil, err
	}
	nl, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		return nil, errors.New("nlbridge: getpeername: not a netlink address")
	}
	return nl, nil
}

// ifindex resolves an interface name in the socket's network namespace (SIOCGIFINDEX on the
// netlink socket: dev_ioctl uses the socket's namespace); 0 when there is no such device.
func (k *ksock) ifindex(name string) uint32 {
	if name == "" || len(name) >= unix.IFNAMSIZ {
		return 0
	}
	var idx uint32
	_ = k.control(func(fd int) error {
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
			return err
		}
		idx = ifr.Uint32()
		return nil
	})
	return idx
}
