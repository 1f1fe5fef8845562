package supervisor

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/tests/testenv"
)

// progEnv names the scenario the re-executed test binary runs as the supervised program.
const progEnv = "SUPERVISOR_TEST_PROGRAM"

func TestMain(m *testing.M) {
	if os.Getenv(ChildEnv) != "" {
		ChildMain()
	}
	if sc := os.Getenv(progEnv); sc != "" {
		if err := programs[sc](); err != nil {
			fmt.Fprintln(os.Stderr, "program:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// seccompData encodes d as the filter sees it. x/net/bpf's VM loads words big-endian (packet
// order), the kernel's seccomp loads them in the machine's order: encode each word big-endian
// so both see the same values.
func (d seccompData) vmBytes() []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(d.Nr))
	binary.BigEndian.PutUint32(b[4:], d.Arch)
	for i, a := range d.Args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

func TestFilter(t *testing.T) {
	f, err := Filter()
	require.NoError(t, err)
	ins := make([]bpf.RawInstruction, len(f))
	for i, s := range f {
		ins[i] = bpf.RawInstruction{Op: s.Code, Jt: s.Jt, Jf: s.Jf, K: s.K}
	}
	dis, ok := bpf.Disassemble(ins)
	require.True(t, ok)
	vm, err := bpf.NewVM(dis)
	require.NoError(t, err)
	arch, err := auditArch()
	require.NoError(t, err)
	const notify, allow = unix.SECCOMP_RET_USER_NOTIF, unix.SECCOMP_RET_ALLOW
	cases := []struct {
		name string
		nr   int
		args [6]uint64
		arch uint32
		want uint32
	}{
		{"genl socket", unix.SYS_SOCKET, [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC}, arch, notify},
		{"rtnetlink socket", unix.SYS_SOCKET, [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, arch, allow},
		{"inet socket", unix.SYS_SOCKET, [6]uint64{unix.AF_INET, unix.SOCK_DGRAM, unix.NETLINK_GENERIC}, arch, allow},
		{"other arch", unix.SYS_SOCKET, [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_GENERIC}, arch ^ 1, allow},
		{"SIOCETHTOOL", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCETHTOOL, 0x1000}, arch, notify},
		{"other ioctl", unix.SYS_IOCTL, [6]uint64{3, unix.SIOCGIFINDEX, 0x1000}, arch, allow},
		{"recvmsg below range", unix.SYS_RECVMSG, [6]uint64{FDRangeLo - 1}, arch, allow},
		{"recvmsg range start", unix.SYS_RECVMSG, [6]uint64{FDRangeLo}, arch, notify},
		{"recvmsg range end", unix.SYS_RECVMSG, [6]uint64{FDRangeHi - 1}, arch, notify},
		{"recvmsg above range", unix.SYS_RECVMSG, [6]uint64{FDRangeHi}, arch, allow},
		{"recvmmsg in range", unix.SYS_RECVMMSG, [6]uint64{FDRangeLo + 1}, arch, notify},
		{"recvmmsg below range", unix.SYS_RECVMMSG, [6]uint64{3}, arch, allow},
		{"bind in range", unix.SYS_BIND, [6]uint64{FDRangeLo + 5}, arch, notify},
		{"getsockopt in range", unix.SYS_GETSOCKOPT, [6]uint64{FDRangeLo + 5}, arch, notify},
		{"sendmsg in range", unix.SYS_SENDMSG, [6]uint64{FDRangeLo + 5}, arch, notify},
		{"sendto in range", unix.SYS_SENDTO, [6]uint64{FDRangeLo + 5}, arch, notify},
		{"sendmsg below range", unix.SYS_SENDMSG, [6]uint64{FDRangeLo - 1}, arch, allow},
		{"write in range", unix.SYS_WRITE, [6]uint64{FDRangeLo + 5}, arch, allow},
		{"sendmmsg in range", unix.SYS_SENDMMSG, [6]uint64{FDRangeLo + 5}, arch, allow},
		{"read in range", unix.SYS_READ, [6]uint64{FDRangeLo + 5}, arch, allow},
		{"close in range", unix.SYS_CLOSE, [6]uint64{FDRangeLo + 5}, arch, allow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := vm.Run(seccompData{Nr: int32(c.nr), Arch: c.arch, Args: c.args}.vmBytes())
			require.NoError(t, err)
			assert.Equal(t, c.want, uint32(got))
		})
	}
}

// echoSocket stands in for the netlink bridge (another package): it answers each datagram the
// program sends with the same bytes, so the test sees what the supervisor does with them.
type echoSocket struct {
	busy     atomic.Bool  // a "slow" datagram is being answered
	requests atomic.Int32 // datagrams echoed inside the send (Request)
	peerFD   atomic.Int32
	mu       sync.Mutex
	bound    *unix.SockaddrNetlink
	opts     map[int][]byte
	pending  error
}

func (e *echoSocket) Serve(ctx context.Context, peer *os.File) error {
	defer peer.Close()
	e.peerFD.Store(int32(peer.Fd()))
	b := make([]byte, 65536)
	for {
		// As the bridge: busy from before a request leaves the queue until it is answered.
		if _, _, err := unix.Recvfrom(int(peer.Fd()), nil, unix.MSG_PEEK); err != nil {
			return err
		}
		e.busy.Store(true)
		n, err := unix.Read(int(peer.Fd()), b)
		if err != nil || n == 0 {
			return err
		}
		if bytes.Equal(b[:n], []byte("slow")) {
			time.Sleep(30 * time.Millisecond) // an answer that takes a while, as manad's
		}
		if bytes.Equal(b[:n], []byte("overrun")) {
			e.mu.Lock()
			e.pending = unix.ENOBUFS
			e.mu.Unlock()
			e.busy.Store(false)
			continue
		}
		_, err = unix.Write(int(peer.Fd()), b[:n])
		e.busy.Store(false)
		if err != nil {
			return err
		}
	}
}
func (e *echoSocket) Bind(sa *unix.SockaddrNetlink) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.bound = sa
	return nil
}
func (e *echoSocket) Connect(*unix.SockaddrNetlink) error { return nil }
func (e *echoSocket) LocalAddr() *unix.SockaddrNetlink {
	return &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: 4242, Groups: 5}
}
func (e *echoSocket) PeerAddr() *unix.SockaddrNetlink {
	return &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
}
func (e *echoSocket) SetOption(level, name int, val []byte) (bool, error) {
	if level != unix.SOL_NETLINK {
		return false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opts[name] = val
	return true, nil
}
func (e *echoSocket) Option(level, name, size int) ([]byte, bool, error) {
	if level != unix.SOL_NETLINK {
		return nil, false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.opts[name]
	if !ok {
		return nil, true, unix.ENOPROTOOPT
	}
	return v, true, nil
}

// Request: a datagram that starts with "sync" is echoed inside the send.
func (e *echoSocket) Request(d []byte) bool {
	if !bytes.HasPrefix(d, []byte("sync")) {
		return false
	}
	peer := int(e.peerFD.Load())
	if peer == 0 {
		return false // Serve has not started: the pair's way
	}
	e.requests.Add(1)
	_, err := unix.Write(peer, d)
	return err == nil
}

func (e *echoSocket) Busy() bool {
	n, err := unix.IoctlGetInt(int(e.peerFD.Load()), unix.SIOCINQ) // a request not read yet
	return err == nil && n > 0 || e.busy.Load()
}

// Origin: an echoed datagram that starts with "ntf" came to group 3, as a notification; one
// that starts with "from99" came from port id 99, another socket.
func (e *echoSocket) Origin(d []byte, _ bool) (uint32, uint32, bool) {
	e.mu.Lock()
	v := e.opts[unix.NETLINK_PKTINFO]
	e.mu.Unlock()
	pktinfo := len(v) >= 4 && binary.NativeEndian.Uint32(v) != 0
	switch {
	case bytes.HasPrefix(d, []byte("ntf")):
		return 0, 3, pktinfo
	case bytes.HasPrefix(d, []byte("from99")):
		return 99, 0, pktinfo
	}
	return 0, 0, pktinfo
}

func (e *echoSocket) PendingError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.pending
	e.pending = nil
	return err
}

// ethtoolFake answers SIOCETHTOOL for the device "fake0" (ETHTOOL_GLINK: link 1, ret 7) and
// lets the kernel answer every other device.
func ethtoolFake(_ context.Context, t Target, ifr uint64) (bool, int, error) {
	var b [40]byte
	if err := t.Mem.ReadAt(b[:], ifr); err != nil {
		return true, 0, err
	}
	if unix.ByteSliceToString(b[:16]) != "fake0" {
		return false, 0, nil
	}
	data := binary.NativeEndian.Uint64(b[16:])
	var v [8]byte
	binary.NativeEndian.PutUint32(v[:], unix.ETHTOOL_GLINK)
	binary.NativeEndian.PutUint32(v[4:], 1)
	return true, 7, t.Mem.WriteAt(v[:], data)
}

func runProgram(t *testing.T, scenario string, extraEnv ...string) (Exit, string, error) {
	t.Helper()
	if err := CheckKernel(); err != nil {
		testenv.SkipOrFail(t, "this kernel cannot supervise: %v", err)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	var out bytes.Buffer
	env := append(append(os.Environ(), progEnv+"="+scenario), extraEnv...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := Run(ctx, Config{
		Path: self, Args: []string{"prog"}, Env: env, Stdout: &out, Stderr: &out,
		OpenNetlink: func(context.Context, Target) (NetlinkSocket, error) {
			return &echoSocket{opts: map[int][]byte{}}, nil
		},
		Ethtool: ethtoolFake,
	})
	return ex, out.String(), err
}

func TestNetlinkSocketCalls(t *testing.T) {
	ex, out, err := runProgram(t, "netlink")
	require.NoError(t, err)
	require.Equal(t, 0, ex.Code, out)
}

func TestSIOCETHTOOL(t *testing.T) {
	ex, out, err := runProgram(t, "ioctl")
	require.NoError(t, err)
	require.Equal(t, 0, ex.Code, out)
}

func TestExitStatusAndSignal(t *testing.T) {
	ex, _, err := runProgram(t, "exit7")
	require.NoError(t, err)
	assert.Equal(t, Exit{Code: 7}, ex)
	ex, _, err = runProgram(t, "killself")
	require.NoError(t, err)
	assert.Equal(t, Exit{Code: 128 + int(syscall.SIGTERM), Signal: syscall.SIGTERM}, ex)
}

// TestReceiveUnderSignals: receives and sends answered inside the call that signals interrupt
// (Go's own preemption signal does, every few milliseconds under GC) neither lose nor repeat a
// datagram.
func TestReceiveUnderSignals(t *testing.T) {
	ex, out, err := runProgram(t, "signals")
	require.NoError(t, err)
	require.Equal(t, 0, ex.Code, out)
}

func TestMissingProgram(t *testing.T) {
	if err := CheckKernel(); err != nil {
		testenv.SkipOrFail(t, "this kernel cannot supervise: %v", err)
	}
	_, err := Run(context.Background(), Config{Path: "/nonexistent/prog", Args: []string{"prog"},
		OpenNetlink: func(context.Context, Target) (NetlinkSocket, error) { return nil, errors.New("unused") }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/prog")
	assert.NotContains(t, err.Error(), "\n")
}

// programs are the scenarios the supervised test binary runs.
var programs = map[string]func() error{
	"netlink": netlinkProgram,
	"ioctl":   ioctlProgram,
	"signals": signalsProgram,
	"exit7":   func() error { os.Exit(7); return nil },
	"killself": func() error {
		return unix.Kill(os.Getpid(), unix.SIGTERM)
	},
}

func check(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func netlinkProgram() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	if err := check(fd >= FDRangeLo && fd < FDRangeHi, "fd %d outside the range", fd); err != nil {
		return err
	}
	fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err := check(fl&unix.FD_CLOEXEC != 0, "SOCK_CLOEXEC not honoured"); err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("getsockname: %w", err)
	}
	nl, ok := sa.(*unix.SockaddrNetlink)
	if err := check(ok && nl.Pid == 4242 && nl.Groups == 5, "getsockname = %#v", sa); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1); err != nil {
		return fmt.Errorf("setsockopt: %w", err)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK); err != nil || v != 1 {
		return fmt.Errorf("getsockopt = %d, %v", v, err)
	}
	// SOL_SOCKET options are the Unix socket's.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<16); err != nil {
		return fmt.Errorf("SO_RCVBUF: %w", err)
	}
	msg := []byte("0123456789abcdef")
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sendto: %w", err)
	}
	// MSG_PEEK|MSG_TRUNC with a small buffer gives the datagram's length, as libnl sizes it.
	small := make([]byte, 4)
	n, _, err := unix.Recvfrom(fd, small, unix.MSG_PEEK|unix.MSG_TRUNC)
	if err := check(err == nil && n == len(msg) && string(small) == "0123", "peek = %d %q %v", n, small, err); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, oobn, flags, from, err := unix.Recvmsg(fd, buf, nil, 0)
	if err != nil {
		return fmt.Errorf("recvmsg: %w", err)
	}
	nl, ok = from.(*unix.SockaddrNetlink)
	if err := check(ok && nl.Pid == 0 && string(buf[:n]) == string(msg) && oobn == 0 && flags == 0,
		"recvmsg = %q from %#v flags %#x", buf[:n], from, flags); err != nil {
		return err
	}
	if err := syncSends(fd); err != nil {
		return err
	}
	// A unicast from another socket: its port id in msg_name, by recvmsg and by recvfrom.
	for _, viaMsg := range []bool{true, false} {
		if err := unix.Sendto(fd, []byte("from99: hello"), 0, nil); err != nil {
			return err
		}
		var from unix.Sockaddr
		var err error
		if viaMsg {
			_, _, _, from, err = unix.Recvmsg(fd, make([]byte, 64), nil, 0)
		} else {
			_, from, err = unix.Recvfrom(fd, make([]byte, 64), 0)
		}
		nl, ok := from.(*unix.SockaddrNetlink)
		if err := check(err == nil && ok && nl.Pid == 99 && nl.Groups == 0, "from another socket (recvmsg %v): %#v, %v", viaMsg, from, err); err != nil {
			return err
		}
	}
	// Truncation: MSG_TRUNC in msg_flags.
	if err := unix.Sendto(fd, msg, 0, nil); err != nil {
		return err
	}
	n, _, flags, _, err = unix.Recvmsg(fd, small, nil, 0)
	if err := check(err == nil && n == 4 && flags&unix.MSG_TRUNC != 0, "truncated recvmsg = %d flags %#x %v", n, flags, err); err != nil {
		return err
	}
	// A notification's group: in msg_name's nl_groups, and with NETLINK_PKTINFO in a control
	// message, whose buffer, when too short, gets MSG_CTRUNC as put_cmsg gives it.
	if err := unix.Sendto(fd, []byte("ntf: a notification"), 0, nil); err != nil {
		return err
	}
	_, oobn, flags, from, err = unix.Recvmsg(fd, buf, make([]byte, 64), 0)
	nl, ok = from.(*unix.SockaddrNetlink)
	if err := check(err == nil && ok && nl.Groups == 1<<2 && oobn == 0 && flags == 0, "notification from %#v oob %d flags %#x: %v", from, oobn, flags, err); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_PKTINFO, 1); err != nil {
		return err
	}
	for _, c := range []struct {
		msg   string
		group uint32
	}{{"ntf: another", 3}, {"an answer", 0}} {
		if err := unix.Sendto(fd, []byte(c.msg), 0, nil); err != nil {
			return err
		}
		oob := make([]byte, 64)
		_, oobn, flags, _, err = unix.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			return err
		}
		cms, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err := check(err == nil && len(cms) == 1 && flags == 0 && oobn == unix.CmsgSpace(4) &&
			cms[0].Header.Level == unix.SOL_NETLINK && cms[0].Header.Type == unix.NETLINK_PKTINFO &&
			len(cms[0].Data) == 4 && binary.NativeEndian.Uint32(cms[0].Data) == c.group,
			"%s: control messages %#v (%d bytes, flags %#x): %v", c.msg, cms, oobn, flags, err); err != nil {
			return err
		}
	}
	if err := unix.Sendto(fd, []byte("ntf: short control buffer"), 0, nil); err != nil {
		return err
	}
	if _, oobn, flags, _, err = unix.Recvmsg(fd, buf, make([]byte, 8), 0); err != nil || oobn != 0 || flags != unix.MSG_CTRUNC {
		return fmt.Errorf("short control buffer: %d bytes, flags %#x, %v", oobn, flags, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_PKTINFO, 0); err != nil {
		return err
	}
	// recvmmsg: one datagram at a time, in the first entry, with the netlink source address.
	for _, m := range []string{"first", "second"} {
		if err := unix.Sendto(fd, []byte(m), 0, nil); err != nil {
			return err
		}
	}
	for _, want := range []string{"first", "second"} {
		type mmsghdr struct {
			hdr unix.Msghdr
			len uint32
			_   [4]byte
		}
		var vec [2]mmsghdr
		var names [2][16]byte
		bufs := [2][]byte{make([]byte, 64), make([]byte, 64)}
		iovs := [2]unix.Iovec{}
		for i := range vec {
			iovs[i] = unix.Iovec{Base: &bufs[i][0], Len: 64}
			vec[i].hdr = unix.Msghdr{Name: &names[i][0], Namelen: 16, Iov: &iovs[i], Iovlen: 1}
			vec[i].len = 0xdead
		}
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&vec[0])), 2, 0, 0, 0)
		if err := check(e == 0 && r == 1 && vec[0].len == uint32(len(want)) && string(bufs[0][:len(want)]) == want &&
			vec[0].hdr.Namelen == 12 && binary.NativeEndian.Uint16(names[0][:]) == unix.AF_NETLINK && vec[1].len == 0xdead,
			"recvmmsg = %d (%v), entry 0: %q len %d namelen %d, entry 1 len %#x", r, e, bufs[0], vec[0].len, vec[0].hdr.Namelen, vec[1].len); err != nil {
			return err
		}
	}
	if r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0); r != 0 || e != 0 {
		return fmt.Errorf("recvmmsg of no entries = %d, %v", r, e)
	}
	// Nothing left: a non-blocking receive says EAGAIN; a blocking one waits for the echo.
	if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != unix.EAGAIN {
		return fmt.Errorf("empty non-blocking recv = %v", err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = unix.Sendto(fd, msg, 0, nil)
	}()
	if n, _, err := unix.Recvfrom(fd, buf, 0); err != nil || n != len(msg) {
		return fmt.Errorf("blocking recv = %d %v", n, err)
	}
	// A non-blocking receive right after a request finds its answer, as on a kernel socket
	// (which answers inside sendmsg), even when the bridge takes a while.
	if err := unix.Sendto(fd, []byte("slow"), 0, nil); err != nil {
		return err
	}
	if n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != nil || string(buf[:n]) != "slow" {
		return fmt.Errorf("non-blocking recv after a request = %q, %v", buf[:max(n, 0)], err)
	}
	// An overrun is reported once, as sk_err.
	if err := unix.Sendto(fd, []byte("overrun"), 0, nil); err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond)
	if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != unix.ENOBUFS {
		return fmt.Errorf("recv after overrun = %v, want ENOBUFS", err)
	}
	// A descriptor dup2'd into the range that is not a bridged socket runs as usual.
	p, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	if err := unix.Dup2(p, FDRangeHi-1); err != nil {
		return err
	}
	if _, err := unix.Getsockname(FDRangeHi - 1); err != nil {
		return fmt.Errorf("getsockname of a plain socket in the range: %w", err)
	}
	if _, _, err := unix.Recvfrom(FDRangeHi-1, buf, unix.MSG_DONTWAIT); err != unix.EAGAIN {
		return fmt.Errorf("recv of a plain socket in the range = %v", err)
	}
	// Non-blocking sockets, and a second one.
	fd2, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, unix.NETLINK_GENERIC)
	if err != nil {
		return fmt.Errorf("second socket: %w", err)
	}
	if err := check(fd2 != fd && fd2 >= FDRangeLo, "second fd %d", fd2); err != nil {
		return err
	}
	if _, _, err := unix.Recvfrom(fd2, buf, 0); err != unix.EAGAIN {
		return fmt.Errorf("SOCK_NONBLOCK recv = %v", err)
	}
	// Other netlink protocols are the kernel's.
	rt, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	if err := check(rt < FDRangeLo, "rtnetlink socket at %d", rt); err != nil {
		return err
	}
	// Children inherit the bridge.
	if os.Getenv("SUPERVISOR_TEST_NOFORK") == "" {
		c := exec.Command("/proc/self/exe")
		c.Env = append(os.Environ(), "SUPERVISOR_TEST_NOFORK=1")
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("child: %v: %s", err, out)
		}
	}
	unix.Close(fd)
	unix.Close(fd2)
	return nil
}

func ioctlProgram() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		dev     string
		wantRet uintptr
	}{{"fake0", 7}, {"lo", 0}} {
		v := struct{ Cmd, Data uint32 }{Cmd: unix.ETHTOOL_GLINK} // struct ethtool_value
		var ifr [40]byte
		copy(ifr[:], c.dev)
		binary.NativeEndian.PutUint64(ifr[16:], uint64(uintptr(unsafe.Pointer(&v))))
		r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		if e != 0 {
			return fmt.Errorf("%s: %v", c.dev, e)
		}
		if r != c.wantRet || v.Data != 1 {
			return fmt.Errorf("%s: ret %d link %d", c.dev, r, v.Data)
		}
	}
	if !strings.HasPrefix(os.Args[0], "prog") {
		return fmt.Errorf("argv[0] = %q", os.Args[0])
	}
	return nil
}

// syncSends checks the sends the bridge answers inside the call (the fake's Request takes
// datagrams that start with "sync"): the answer is readable when the send returns, whether the
// datagram came by sendto or sendmsg (several iovecs, the kernel's address or none); a
// destination other than the kernel, or control data, takes the pair's way and still comes back.
func syncSends(fd int) error {
	readable := func() bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0) // poll is not trapped: this is the socket's own state
		return err == nil && n == 1 && pfd[0].Revents&unix.POLLIN != 0
	}
	kernel := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	other := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: 77}
	cred := unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	buf := make([]byte, 64)
	for _, c := range []struct {
		name   string
		send   func() (int, error)
		want   string
		inside bool
	}{
		{"sendto", func() (int, error) { return 11, unix.Sendto(fd, []byte("sync sendto"), 0, nil) }, "sync sendto", true},
		{"sendto to the kernel", func() (int, error) { return 9, unix.Sendto(fd, []byte("sync dest"), 0, kernel) }, "sync dest", true},
		{"sendmsg, two iovecs", func() (int, error) {
			return unix.SendmsgBuffers(fd, [][]byte{[]byte("sync "), []byte("two iovecs")}, nil, kernel, 0)
		}, "sync two iovecs", true},
		{"sendmsg to another socket", func() (int, error) {
			return unix.SendmsgN(fd, []byte("sync other"), nil, other, 0)
		}, "sync other", false},
		{"sendmsg with control data", func() (int, error) {
			return unix.SendmsgN(fd, []byte("sync cred"), cred, nil, 0)
		}, "sync cred", false},
	} {
		n, err := c.send()
		if err != nil || n != len(c.want) {
			return fmt.Errorf("%s: sent %d bytes: %v", c.name, n, err)
		}
		if c.inside && !readable() {
			return fmt.Errorf("%s: the answer is not there when the send returns", c.name)
		}
		got, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || string(buf[:got]) != c.want {
			return fmt.Errorf("%s: received %q, %v", c.name, buf[:max(got, 0)], err)
		}
	}
	return nil
}

// signalsProgram echoes datagrams through a bridged socket while another thread sends the
// receiving thread SIGUSR1 (a handler with SA_RESTART, as Go installs) as fast as it can: every
// datagram must come back once, in order, whichever receive a signal interrupts. (Signals
// spaced by less than an answer takes, which is hundreds of microseconds on a loaded machine,
// would interrupt every try of a call for ever: they come 0.1 to 1.9 ms apart, and stop after
// 20 s, which fails the run rather than hang it.)
func signalsProgram() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	// A lost datagram fails the receive after 5 s instead of hanging it.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGUSR1)
	defer signal.Stop(sigs)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := unix.Getpid(), unix.Gettid()
	stop := make(chan struct{})
	end := time.Now().Add(20 * time.Second)
	var sent atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(end) {
			select {
			case <-stop:
				return
			case <-sigs:
			default:
			}
			_ = unix.Tgkill(pid, tid, unix.SIGUSR1)
			// Some land before the call is trapped, some while the supervisor answers
			// it, some after.
			time.Sleep(100*time.Microsecond + time.Duration(sent.Add(1)%7)*300*time.Microsecond)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	buf := make([]byte, 64)
	for i := range 3000 {
		if time.Now().After(end) {
			return fmt.Errorf("%d echoes in 20 s: the signals outpaced the answers", i)
		}
		msg := []byte(fmt.Sprintf("datagram %d", i))
		if i%4 >= 2 {
			// Answered inside the send: a send a signal interrupts after the answer is
			// restarted, and must not be answered twice.
			msg = []byte(fmt.Sprintf("sync datagram %d", i))
		}
		if err := unix.Sendto(fd, msg, 0, nil); err != nil {
			return fmt.Errorf("sendto %d: %w", i, err)
		}
		flags := 0
		if i%2 == 1 {
			flags = unix.MSG_DONTWAIT // served while the echo is on its way (Busy)
		}
		var n int
		for {
			n, _, err = unix.Recvfrom(fd, buf, flags)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("receive %d (after %d signals): %w", i, sent.Load(), err)
		}
		if !bytes.Equal(buf[:n], msg) {
			return fmt.Errorf("receive %d = %q, want %q", i, buf[:n], msg)
		}
	}
	if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != unix.EAGAIN {
		return fmt.Errorf("a datagram left over: %v", err)
	}
	return nil
}
