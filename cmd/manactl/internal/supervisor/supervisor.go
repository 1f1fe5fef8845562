// Package supervisor runs a program under a seccomp user-notification filter so that its
// generic-netlink sockets and its SIOCETHTOOL ioctls reach a bridge instead of the kernel,
// whatever the program is written in and however it is linked: it works at the syscall
// boundary, the technique rootless-container tools use for their network sockets.
//
// The filter (see Filter) traps only socket(AF_NETLINK, *, NETLINK_GENERIC),
// ioctl(*, SIOCETHTOOL, *) and, for descriptors in [FDRangeLo, FDRangeHi), the socket calls a
// netlink socket answers differently from a Unix one. Every other syscall runs at full speed.
//
//   - socket: the supervisor makes socketpair(AF_UNIX, SOCK_SEQPACKET), opens a NetlinkSocket
//     (Config.OpenNetlink) that serves one end, and installs the other in the program at a free
//     descriptor of the range (SECCOMP_IOCTL_NOTIF_ADDFD with SETFD|SEND, honouring
//     SOCK_NONBLOCK and SOCK_CLOEXEC).
//   - sendmsg, sendto: the datagram is read from the program and offered to the NetlinkSocket
//     (Request), which answers it before the send returns, as the kernel does; what it does not
//     take goes on into the pair, as write(2) always does.
//   - bind, connect, getsockname, getpeername, setsockopt, getsockopt: answered by the
//     NetlinkSocket (SOL_SOCKET options go on to the Unix socket itself).
//   - recvmsg, recvfrom: the supervisor reads the datagram from the program's own end (a copy
//     taken with pidfd_getfd for the call), copies it into the program's buffers and fills
//     msg_name with the kernel's sockaddr_nl, as libmnl checks; MSG_PEEK, MSG_TRUNC,
//     MSG_DONTWAIT, O_NONBLOCK and SO_RCVTIMEO behave as on a netlink socket.
//   - ioctl SIOCETHTOOL: Config.Ethtool answers it, or lets the kernel run it.
//
// A descriptor of the range that is not a bridged socket (the program dup2'd something there)
// is recognised by its inode and its call let through (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
// The supervisor authorises nothing: the bridge connects to manad as the caller's user, and
// no_new_privs, which seccomp requires, keeps setuid programs from gaining privileges.
package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// NetlinkSocket is one bridged netlink socket: it serves the supervisor's end of the program's
// socketpair and answers the socket calls the filter traps for it.
type NetlinkSocket interface {
	// Serve moves messages until the program's end is closed in every process or ctx ends,
	// and closes peer and everything else it opened before it returns.
	Serve(ctx context.Context, peer *os.File) error
	Bind(sa *unix.SockaddrNetlink) error
	Connect(sa *unix.SockaddrNetlink) error
	LocalAddr() *unix.SockaddrNetlink
	PeerAddr() *unix.SockaddrNetlink
	// SetOption and Option answer handled=false for an option of the Unix socket itself.
	SetOption(level, name int, val []byte) (handled bool, err error)
	Option(level, name, size int) (val []byte, handled bool, err error)
	// PendingError is the socket error a receive reports once (ENOBUFS after an overrun).
	PendingError() error
	// Origin says where the datagram the program receives (d: at least its first 20 bytes,
	// all that was read of it) came from: its sender's port id (0: the kernel) and the
	// multicast group it was sent to (0: a unicast); and whether the program asked for
	// NETLINK_PKTINFO; consume: the program received it (not a peek).
	Origin(d []byte, consume bool) (from, group uint32, pktinfo bool)
	// Request serves datagram d, which the program is sending, before the send returns (the
	// kernel answers a netlink request inside sendmsg); false: the bridge does not take it
	// here, and the send goes on into the pair. It must not wait for the program.
	Request(d []byte) bool
	// Busy reports whether an answer to the program is on its way (a request of its in
	// flight): a non-blocking receive then waits for it, as on a kernel socket, which answers
	// inside the sender's sendmsg.
	Busy() bool
}

// Target is the task that made a trapped call.
type Target struct {
	TID int    // the calling thread
	Mem Memory // its address space
	// NetNS identifies the thread's network namespace (the inode of /proc/TID/ns/net);
	// InNetNS runs f on an OS thread in it, where sockets are created in that namespace.
	NetNS   uint64
	InNetNS func(f func() error) error
}

// Config is what Run runs and how calls are answered.
type Config struct {
	Path string   // the program, as found in PATH
	Args []string // its argv (Args[0] included)
	Env  []string // its environment
	// Stdin, Stdout, Stderr are the program's; nil means /dev/null as with os/exec.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// OpenNetlink opens the bridge for a new generic-netlink socket of t. Its error fails the
	// program's socket() with the errno it wraps (ECONNREFUSED when none).
	OpenNetlink func(ctx context.Context, t Target) (NetlinkSocket, error)
	// Ethtool answers ioctl(fd, SIOCETHTOOL, ifr); handled=false lets the kernel run it.
	Ethtool func(ctx context.Context, t Target, ifr uint64) (handled bool, ret int, err error)
	Logger  *slog.Logger
}

// Exit is the program's end: its exit status, or the signal that killed it.
type Exit struct {
	Code   int
	Signal syscall.Signal // non-zero when killed by a signal
}

// Run runs the program under the filter and serves its trapped calls until it exits; it
// forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to it. Errors: ErrUnsupported (wrapped) when the
// kernel cannot do this, or why the program could not be started, in one line; the program's
// own failure is its Exit, not an error.
func Run(ctx context.Context, cfg Config) (Exit, error) {
	if err := CheckKernel(); err != nil {
		return Exit{}, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return Exit{}, fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(pair[0]), "handover")
	theirs := os.NewFile(uintptr(pair[1]), "handover-child")
	defer ours.Close()

	self, err := os.Executable()
	if err != nil {
		theirs.Close()
		return Exit{}, fmt.Errorf("find manactl's own binary: %w", err)
	}
	cmd := exec.Command(self, append([]string{cfg.Path}, cfg.Args...)...)
	cmd.Args[0] = "manactl"
	cmd.Env = append(append([]string(nil), cfg.Env...), ChildEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cfg.Stdin, cfg.Stdout, cfg.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	// The program must not outlive its supervisor: its trapped calls would fail with ENOSYS.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		theirs.Close()
		return Exit{}, fmt.Errorf("start %s: %w", cfg.Path, err)
	}
	theirs.Close()

	// Forward the signals a terminal or a service manager sends; a terminal sends SIGINT to
	// the whole foreground group, so the program may see it twice, as under sudo.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	waited := make(chan error, 1)

	l, err := receiveListener(ours)
	if err != nil {
		// The child failed before execve (it said why) or died: reap it.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return Exit{}, err
	}
	s := &supervisor{cfg: cfg, l: l, socks: make(map[uint64]*bridged), pidfds: make(map[int]int), served: make(map[int]servedSend),
		threads: make(map[int]*threadLock)}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cancel()
		l.close()
		return Exit{}, fmt.Errorf("seccomp listener: %w", err)
	}
	// The program's thread and the answering one swap CPUs at an answer rather than the
	// program's waiting for a wake-up (Linux 6.6; older kernels answer EINVAL, and the
	// hand-over is the scheduler's). The swap reaches a thread waiting in poll(2) on the
	// listener, which is why loop waits there rather than in the runtime's netpoller.
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		s.loop(sctx, stop)
	}()
	// The go-ahead: the program starts now, with its calls served.
	if _, err := ours.Write([]byte{'G'}); err != nil {
		cfg.Logger.Debug("go-ahead", "err", err)
	}
	execErr := make(chan string, 1)
	go func() {
		// EOF: execve closed the child's end and the program runs; 'E': execve failed.
		b := make([]byte, 4096)
		n, _ := ours.Read(b)
		if n > 1 && b[0] == 'E' {
			execErr <- string(b[1:n])
		}
		close(execErr)
	}()
	go func() { waited <- cmd.Wait() }()

	var werr error
wait:
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case werr = <-waited:
			break wait
		}
	}
	// The program is gone; what it started may still run with the filter, and loses the
	// bridge now (its trapped calls fail with ENOSYS once the listener is closed).
	_, _ = unix.Write(stop, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	<-loopDone
	cancel()
	s.wg.Wait()
	unix.Close(stop)
	l.close() // what still runs under the filter gets ENOSYS from now on
	s.closeAll()
	if msg, ok := <-execErr; ok && msg != "" {
		return Exit{}, errors.New(msg)
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return Exit{}, werr
	}
	st := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if st.Signaled() {
		return Exit{Code: 128 + int(st.Signal()), Signal: st.Signal()}, nil
	}
	return Exit{Code: st.ExitStatus()}, nil
}

// receiveListener reads the listener the child sends, or the child's error.
func receiveListener(f *os.File) (listener, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(int(f.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return listener{}, fmt.Errorf("receive the seccomp listener: %w", err)
		}
		if n == 0 {
			return listener{}, errors.New("manactl exec: the program's process ended before it started")
		}
		if buf[0] == 'E' {
			return listener{}, errors.New(string(buf[1:n]))
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return listener{}, fmt.Errorf("receive the seccomp listener: no descriptor")
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			return listener{}, fmt.Errorf("receive the seccomp listener: no descriptor")
		}
		return listener{fd: fds[0]}, nil
	}
}

// bridged is one socket the supervisor installed in the program.
type bridged struct {
	sock NetlinkSocket
	ino  uint64 // inode of the program's end
	// rmu is held by the receive being answered from its look at the next datagram until the
	// datagram is consumed (see finish): two receives never deliver the same datagram.
	rmu sync.Mutex
}

type supervisor struct {
	cfg Config
	l   listener
	wg  sync.WaitGroup

	mu     sync.Mutex
	socks  map[uint64]*bridged // by the inode of the program's end
	pidfds map[int]int         // thread id → pidfd, for pidfd_getfd

	served map[int]servedSend // under mu: the last send the bridge served, by thread (see send)

	threads map[int]*threadLock // under mu: the ioctls being served, by thread (see ioctl)
}

// threadLock serialises the ioctls of one thread; users counts who holds or waits for it.
type threadLock struct {
	sync.Mutex
	users int
}

// lockThread takes tid's lock and returns what releases it.
func (s *supervisor) lockThread(tid int) func() {
	s.mu.Lock()
	l := s.threads[tid]
	if l == nil {
		l = &threadLock{}
		s.threads[tid] = l
	}
	l.users++
	s.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.threads, tid)
		}
		s.mu.Unlock()
	}
}

// waitingMemory is a task's memory whose writes are made only while waiting() says that the
// call they answer still waits (see ioctl); otherwise they fail with EINTR, and nothing is
// written.
type waitingMemory struct {
	Memory
	waiting func() bool
}

func (m waitingMemory) WriteAt(p []byte, addr uint64) error {
	if !m.waiting() {
		return fmt.Errorf("write %d bytes at %#x: the call ended: %w", len(p), addr, unix.EINTR)
	}
	return m.Memory.WriteAt(p, addr)
}

// loop receives notifications until stop (an eventfd) is written (Run does when the program
// has ended) or no task uses the filter any more (POLLHUP), and answers each.
//
// It runs on a thread of its own that waits in poll(2) on the listener: a trapped call then
// wakes it on the caller's CPU (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP), and the answers loop
// gives inline (a receive that finds its datagram, getsockname) go back the same way, two
// switches on one CPU per call. The runtime's netpoller would add a wake-up of whichever
// thread waits in epoll and, often, a hand-over of the goroutine to another thread: on a
// virtual machine each costs more than the call. The thread holds no processor while it
// waits (poll is an ordinary blocking syscall to the runtime).
func (s *supervisor) loop(ctx context.Context, stop int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pfd := []unix.PollFd{{Fd: int32(s.l.fd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
	for {
		var n notif
		pfd[0].Revents, pfd[1].Revents = 0, 0
		if _, err := unix.Poll(pfd, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			s.cfg.Logger.Error("wait for a seccomp notification", "err", err)
			return
		}
		if pfd[1].Revents != 0 {
			return // the program ended
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			if pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				return // no task uses the filter
			}
			continue
		}
		// Ready: RECV does not block (a notification withdrawn meanwhile gives ENOENT).
		if err := s.l.recv(&n); err != nil {
			if err == unix.ENOENT {
				continue // the caller died or was interrupted
			}
			s.cfg.Logger.Error("receive a seccomp notification", "err", err)
			return
		}
		// A receive that finds its datagram, and getsockname, are answered here: a goroutine
		// hand-off would cost the round trip a wake-up. The rest may wait (a blocking receive,
		// the bridge asking manad) and get a goroutine each.
		if nr := int(n.Data.Nr); nr != unix.SYS_SOCKET && nr != unix.SYS_IOCTL {
			if err := s.socketCall(ctx, &n, false); !errors.Is(err, errWouldBlock) {
				continue
			}
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(ctx, &n)
		}()
	}
}

// serve answers one notification.
func (s *supervisor) serve(ctx context.Context, n *notif) {
	var err error
	switch int(n.Data.Nr) {
	case unix.SYS_SOCKET:
		err = s.socket(ctx, n)
	case unix.SYS_IOCTL:
		err = s.ioctl(ctx, n)
	default:
		err = s.socketCall(ctx, n, true)
	}
	if err != nil && err != unix.ENOENT {
		s.cfg.Logger.Debug("answer a trapped call", "nr", n.Data.Nr, "pid", n.PID, "err", err)
	}
}

func (s *supervisor) target(n *notif) Target {
	tid := int(n.PID)
	t := Target{TID: tid, Mem: procMemory{pid: tid}}
	path := fmt.Sprintf("/proc/%d/ns/net", tid)
	var st unix.Stat_t
	if unix.Stat(path, &st) == nil {
		t.NetNS = st.Ino
	}
	t.InNetNS = func(f func() error) error { return inNetNS(path, t.NetNS, f) }
	return t
}

// answer sends errno for a failed call, or val.
func (s *supervisor) answer(n *notif, val int64, err error) error {
	if err == nil {
		return s.l.respond(n.ID, val, 0)
	}
	return s.l.respond(n.ID, 0, errnoOf(err))
}

// errnoOf is the errno a handler's error carries, EIO when it carries none.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	return unix.EIO
}

// socket serves socket(AF_NETLINK, type, NETLINK_GENERIC).
func (s *supervisor) socket(ctx context.Context, n *notif) error {
	typ := int(n.Data.Args[1])
	switch typ &^ (unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC) {
	case unix.SOCK_RAW, unix.SOCK_DGRAM:
	default:
		return s.l.respond(n.ID, 0, unix.ESOCKTNOSUPPORT) // netlink_create
	}
	t := s.target(n)
	sock, err := s.cfg.OpenNetlink(ctx, t)
	if err != nil {
		var e unix.Errno
		if errors.Is(err, unix.EPROTONOSUPPORT) {
			s.cfg.Logger.Debug("netlink socket refused", "pid", t.TID, "err", err)
		} else {
			s.cfg.Logger.Warn("bridge a netlink socket", "pid", t.TID, "err", err)
		}
		if !errors.As(err, &e) || e == 0 {
			e = unix.ECONNREFUSED
		}
		return s.l.respond(n.ID, 0, e)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return s.l.respond(n.ID, 0, errnoOf(err))
	}
	prog, peer := pair[0], os.NewFile(uintptr(pair[1]), "netlink-bridge")
	defer unix.Close(prog)
	var st unix.Stat_t
	if err := unix.Fstat(prog, &st); err != nil {
		peer.Close()
		return s.l.respond(n.ID, 0, errnoOf(err))
	}
	if typ&unix.SOCK_NONBLOCK != 0 {
		if err := unix.SetNonblock(prog, true); err != nil {
			peer.Close()
			return s.l.respond(n.ID, 0, errnoOf(err))
		}
	}
	newfd, err := freeFD(t.TID)
	if err != nil {
		peer.Close()
		return s.l.respond(n.ID, 0, unix.EMFILE)
	}
	b := &bridged{sock: sock, ino: st.Ino}
	s.mu.Lock()
	s.socks[st.Ino] = b
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := sock.Serve(ctx, peer); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Debug("bridged socket ended", "err", err)
		}
		s.mu.Lock()
		delete(s.socks, b.ino)
		s.mu.Unlock()
	}()
	if _, err := s.l.addFD(n.ID, prog, newfd, typ&unix.SOCK_CLOEXEC != 0); err != nil {
		if err == unix.EBADF || err == unix.EMFILE {
			// The program's RLIMIT_NOFILE is below the range.
			return s.l.respond(n.ID, 0, unix.EMFILE)
		}
		return err // interrupted: closing prog ends the bridge (peer reads EOF)
	}
	return nil
}

// freeFD is the lowest descriptor of the range that tid's process does not use.
func freeFD(tid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", tid))
	if err != nil {
		return -1, err
	}
	used := make(map[int]bool, len(ents))
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			used[fd] = true
		}
	}
	for fd := FDRangeLo; fd < FDRangeHi; fd++ {
		if !used[fd] {
			return fd, nil
		}
	}
	return -1, unix.EMFILE
}

// lookup is the bridged socket at descriptor fd of task tid, nil when fd is something else.
func (s *supervisor) lookup(tid, fd int) *bridged {
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", tid, fd))
	if err != nil {
		return nil
	}
	rest, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return nil
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.socks[ino]
}

// ioctl serves ioctl(fd, SIOCETHTOOL, ifr).
//
// The handler writes its results into the program's memory as it goes (copy_to_user), and a
// signal may interrupt the program's call meanwhile: restarted (SA_RESTART), the call comes
// back as a new notification with the same buffers; failed with EINTR, the program moves on
// and its buffers (often its stack) become something else. So the calls of one thread are
// served one at a time (the restarted call waits for the first to end), and a write is made
// only while the call still waits for its answer (stillWaiting, as for receives): a call that
// ended gets no late write. The kernel's window between that check and the write remains.
func (s *supervisor) ioctl(ctx context.Context, n *notif) error {
	if s.cfg.Ethtool == nil {
		return s.l.continueSyscall(n.ID)
	}
	unlock := s.lockThread(int(n.PID))
	defer unlock()
	t := s.target(n)
	t.Mem = waitingMemory{Memory: t.Mem, waiting: func() bool { return s.l.valid(n.ID) }}
	handled, ret, err := s.cfg.Ethtool(ctx, t, n.Data.Args[2])
	if !handled {
		return s.l.continueSyscall(n.ID)
	}
	return s.answer(n, int64(ret), err)
}

// socketCall serves the calls trapped for descriptors in the range. With mayBlock false (the
// notification loop itself), it serves only what cannot wait and returns errWouldBlock, having
// answered nothing, for the rest.
func (s *supervisor) socketCall(ctx context.Context, n *notif, mayBlock bool) error {
	tid, fd := int(n.PID), int(int32(n.Data.Args[0]))
	if nr := int(n.Data.Nr); nr != unix.SYS_SENDMSG && nr != unix.SYS_SENDTO && !mayBlock {
		s.forgetSend(tid) // the thread moved on: its next send is not a restart
	}
	switch int(n.Data.Nr) {
	case unix.SYS_RECVMSG, unix.SYS_RECVFROM, unix.SYS_RECVMMSG:
		// The copy a receive reads through also tells which socket it is.
		cfd, err := s.threadFD(tid, fd)
		if err != nil {
			return s.l.continueSyscall(n.ID) // the kernel answers EBADF, or nobody
		}
		defer unix.Close(cfd)
		var st unix.Stat_t
		if err := unix.Fstat(cfd, &st); err != nil {
			return s.l.continueSyscall(n.ID)
		}
		s.mu.Lock()
		b := s.socks[st.Ino]
		s.mu.Unlock()
		if b == nil {
			return s.l.continueSyscall(n.ID)
		}
		switch int(n.Data.Nr) {
		case unix.SYS_RECVMSG:
			return s.recvmsg(ctx, n, b, procMemory{pid: tid}, cfd, mayBlock)
		case unix.SYS_RECVMMSG:
			return s.recvmmsg(ctx, n, b, procMemory{pid: tid}, cfd, mayBlock)
		}
		return s.recvfrom(ctx, n, b, procMemory{pid: tid}, cfd, mayBlock)
	case unix.SYS_SENDMSG, unix.SYS_SENDTO:
		return s.send(n)
	case unix.SYS_GETSOCKNAME, unix.SYS_GETPEERNAME:
	default:
		if !mayBlock {
			return errWouldBlock // the bridge may ask manad
		}
	}
	b := s.lookup(tid, fd)
	if b == nil {
		return s.l.continueSyscall(n.ID)
	}
	m := procMemory{pid: tid}
	a := n.Data.Args
	switch int(n.Data.Nr) {
	case unix.SYS_BIND, unix.SYS_CONNECT:
		sa, err := readSockaddrNL(m, a[1], uint32(a[2]))
		if err == nil {
			if int(n.Data.Nr) == unix.SYS_BIND {
				err = b.sock.Bind(sa)
			} else {
				err = b.sock.Connect(sa)
			}
		}
		return s.answer(n, 0, err)
	case unix.SYS_GETSOCKNAME, unix.SYS_GETPEERNAME:
		sa := b.sock.LocalAddr()
		if int(n.Data.Nr) == unix.SYS_GETPEERNAME {
			sa = b.sock.PeerAddr()
		}
		return s.answer(n, 0, writeSockaddrNL(m, a[1], a[2], sa))
	case unix.SYS_SETSOCKOPT:
		level, name, optlen := int(int32(a[1])), int(int32(a[2])), int(int32(a[4]))
		if optlen < 0 || optlen > maxOptLen {
			return s.answer(n, 0, unix.EINVAL)
		}
		val := make([]byte, optlen)
		if err := m.ReadAt(val, a[3]); err != nil {
			return s.answer(n, 0, err)
		}
		handled, err := b.sock.SetOption(level, name, val)
		if !handled {
			return s.l.continueSyscall(n.ID)
		}
		return s.answer(n, 0, err)
	case unix.SYS_GETSOCKOPT:
		level, name := int(int32(a[1])), int(int32(a[2]))
		size, err := readU32(m, a[4])
		if err != nil {
			return s.answer(n, 0, err)
		}
		if int32(size) < 0 {
			return s.answer(n, 0, unix.EINVAL)
		}
		val, handled, err := b.sock.Option(level, name, int(min(size, maxOptLen)))
		if !handled {
			return s.l.continueSyscall(n.ID)
		}
		if err != nil {
			return s.answer(n, 0, err)
		}
		full := len(val) // netlink_getsockopt reports the length it has (NETLINK_LIST_MEMBERSHIPS: the one it needs)
		if len(val) > int(size) {
			val = val[:size]
		}
		if err := m.WriteAt(val, a[3]); err != nil {
			return s.answer(n, 0, err)
		}
		return s.answer(n, 0, writeU32(m, a[4], uint32(full)))
	}
	return s.l.continueSyscall(n.ID)
}

// maxOptLen bounds a socket option's value: netlink's are ints; the program's length is
// hostile input.
const maxOptLen = 4096

const sizeofSockaddrNL = 12

func readSockaddrNL(m Memory, addr uint64, n uint32) (*unix.SockaddrNetlink, error) {
	if n < sizeofSockaddrNL {
		return nil, unix.EINVAL // netlink_bind
	}
	var b [sizeofSockaddrNL]byte
	if err := m.ReadAt(b[:], addr); err != nil {
		return nil, err
	}
	sa := decodeSockaddrNL(b[:])
	if sa.Family != unix.AF_NETLINK && sa.Family != unix.AF_UNSPEC {
		return nil, unix.EINVAL
	}
	return sa, nil
}

// decodeSockaddrNL reads struct sockaddr_nl from b (at least sizeofSockaddrNL bytes).
func decodeSockaddrNL(b []byte) *unix.SockaddrNetlink {
	return &unix.SockaddrNetlink{
		Family: uint16(b[0]) | uint16(b[1])<<8,
		Pid:    uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24,
		Groups: uint32(b[8]) | uint32(b[9])<<8 | uint32(b[10])<<16 | uint32(b[11])<<24,
	}
}

// encodeSockaddrNL is struct sockaddr_nl.
func encodeSockaddrNL(sa *unix.SockaddrNetlink) []byte {
	b := make([]byte, sizeofSockaddrNL)
	b[0], b[1] = byte(unix.AF_NETLINK), byte(unix.AF_NETLINK>>8)
	putU32(b[4:], sa.Pid)
	putU32(b[8:], sa.Groups)
	return b
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// writeSockaddrNL writes sa at addr, truncated to *lenp as the kernel's move_addr_to_user,
// and the full length at lenp.
func writeSockaddrNL(m Memory, addr, lenp uint64, sa *unix.SockaddrNetlink) error {
	l, err := readU32(m, lenp)
	if err != nil {
		return err
	}
	if int32(l) < 0 {
		return unix.EINVAL
	}
	b := encodeSockaddrNL(sa)
	if int(l) < len(b) {
		b = b[:l]
	}
	if err := m.WriteAt(b, addr); err != nil {
		return err
	}
	return writeU32(m, lenp, sizeofSockaddrNL)
}

// closeAll closes the cached pidfds.
func (s *supervisor) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fd := range s.pidfds {
		unix.Close(fd)
	}
	clear(s.pidfds)
}

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd of the thread itself, not its process.
const pidfdThread = unix.O_EXCL

// threadFD returns a copy of descriptor fd of thread tid (pidfd_getfd), to be closed by the
// caller. It holds no reference beyond the call, so the bridge still sees the program's close.
// The thread's pidfd is cached; a stale one (the thread died, its id was reused) fails with
// ESRCH and is opened again.
func (s *supervisor) threadFD(tid, fd int) (int, error) {
	for range 2 {
		s.mu.Lock()
		pfd, ok := s.pidfds[tid]
		s.mu.Unlock()
		if !ok {
			var err error
			if pfd, err = openThreadPidfd(tid); err != nil {
				return -1, err
			}
			s.mu.Lock()
			if len(s.pidfds) >= maxPidfds {
				for _, f := range s.pidfds {
					unix.Close(f)
				}
				clear(s.pidfds)
			}
			if old, ok := s.pidfds[tid]; ok {
				unix.Close(pfd)
				pfd = old
			} else {
				s.pidfds[tid] = pfd
			}
			s.mu.Unlock()
		}
		cfd, err := unix.PidfdGetfd(pfd, fd, 0)
		if err != unix.ESRCH {
			return cfd, err
		}
		s.mu.Lock()
		if s.pidfds[tid] == pfd {
			delete(s.pidfds, tid)
			unix.Close(pfd)
		}
		s.mu.Unlock()
	}
	return -1, unix.ESRCH
}

// openThreadPidfd opens a pidfd of thread tid: PIDFD_THREAD where the kernel has it, else one of
// its process (whose descriptor table the thread shares).
func openThreadPidfd(tid int) (int, error) {
	pfd, err := unix.PidfdOpen(tid, pidfdThread)
	if err != unix.EINVAL && err != unix.ENOENT {
		return pfd, err
	}
	tgid, err := threadGroup(tid)
	if err != nil {
		return -1, err
	}
	return unix.PidfdOpen(tgid, 0)
}

const maxPidfds = 256

// threadGroup is the process id (Tgid) of thread tid.
func threadGroup(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0, err
	}
	_, rest, ok := bytes.Cut(b, []byte("\nTgid:"))
	if !ok {
		return 0, unix.ESRCH
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	return strconv.Atoi(strings.TrimSpace(string(line)))
}

// recvPoll is how often a blocked receive checks that the program still waits for it.
const recvPoll = 100 * time.Millisecond
