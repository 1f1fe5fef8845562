package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/tests/testenv"
)

// The floor model (BenchmarkFloor): what a request/response round trip costs on this machine
// for designs that cross to another process, without any manad or bridge logic. The program
// makes each round trip as mdlayher/netlink does (sendmsg, recvmsg with MSG_PEEK|MSG_TRUNC to
// size the buffer, recvmsg), on:
//
//   - kernel: a NETLINK_ROUTE socket, RTM_GETLINK of lo (the kernel answers inside sendmsg);
//   - one-hop: a Unix seqpacket socket to an echo process;
//   - two-hops: a Unix seqpacket socket to a relay (the benchmark process) that forwards to the
//     echo process and back: three processes, two hops, as program → bridge → manad;
//   - trapped-inline: a bridged socket (all three calls trapped by the supervisor), answered
//     inside the sendmsg with no hop: the cost of the seccomp emulation alone;
//   - trapped-hop: the same, the answer fetched from the echo process inside the sendmsg:
//     the least a bridge at the syscall boundary can cost with its answers in another process.
//
// The echo process busy-polls its socket for floorPoll after each answer, as manad's request
// loop does (busy_poll's default, 200 µs); the relay and the supervisor wait in poll(2), as the
// bridge does.
const floorPoll = 200 * time.Microsecond

// floorEnv holds the paths of the echo and relay sockets for the floor program.
const (
	floorEchoEnv  = "SUPERVISOR_FLOOR_ECHO"
	floorRelayEnv = "SUPERVISOR_FLOOR_RELAY"
	floorNEnv     = "SUPERVISOR_FLOOR_N"
)

var floorRows = []string{"kernel", "one-hop", "two-hops", "trapped-inline", "trapped-hop"}

// floorMsg is the request of the model: a 36-byte datagram, the size of an ethtool GET.
var floorMsg = bytes.Repeat([]byte{'r'}, 36)

// echoProgram answers every datagram of every connection on the socket at $floorEchoEnv with
// itself, polling for the next one for floorPoll after each answer before it blocks.
func echoProgram() error {
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: os.Getenv(floorEchoEnv), Net: "unixpacket"})
	if err != nil {
		return err
	}
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return err
		}
		f, err := blockingFile(c)
		if err != nil {
			return err
		}
		go func() {
			runtime.LockOSThread()
			defer f.Close()
			fd := int(f.Fd())
			buf := make([]byte, 1<<16)
			for {
				n, err := unix.Read(fd, buf)
				if err != nil || n == 0 {
					return
				}
				if _, err := unix.Write(fd, buf[:n]); err != nil {
					return
				}
				// Poll for the next request before blocking for it.
				end := time.Now().Add(floorPoll)
				for time.Now().Before(end) {
					if _, _, err := unix.Recvfrom(fd, nil, unix.MSG_PEEK|unix.MSG_DONTWAIT); err != unix.EAGAIN {
						break
					}
				}
			}
		}()
	}
}

// floorProgram times the model's round trips, rows interleaved, and prints each row's p50.
func floorProgram() error {
	n, err := strconv.Atoi(os.Getenv(floorNEnv))
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	dial := func(path string) (int, error) {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		return fd, unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	}
	fds := map[string]int{}
	if fds["kernel"], err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE); err != nil {
		return err
	}
	if fds["one-hop"], err = dial(os.Getenv(floorEchoEnv)); err != nil {
		return fmt.Errorf("dial the echo: %w", err)
	}
	if fds["two-hops"], err = dial(os.Getenv(floorRelayEnv)); err != nil {
		return fmt.Errorf("dial the relay: %w", err)
	}
	bridged, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return err
	}
	fds["trapped-inline"], fds["trapped-hop"] = bridged, bridged
	getlink := make([]byte, 32) // nlmsghdr + ifinfomsg: RTM_GETLINK of ifindex 1
	putU32(getlink[0:], 32)
	getlink[4], getlink[6] = unix.RTM_GETLINK, unix.NLM_F_REQUEST
	putU32(getlink[20:], 1)
	msgs := map[string][]byte{
		"kernel": getlink, "one-hop": floorMsg, "two-hops": floorMsg,
		"trapped-inline": append([]byte("sync"), floorMsg...), "trapped-hop": append([]byte("synchop"), floorMsg...),
	}
	kernelAddr := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	buf := make([]byte, 1<<16)
	rtt := func(row string) (time.Duration, error) {
		fd, m := fds[row], msgs[row]
		var to unix.Sockaddr
		if strings.HasPrefix(row, "trapped") || row == "kernel" {
			to = kernelAddr
		}
		t0 := time.Now()
		if err := unix.Sendmsg(fd, m, nil, to, 0); err != nil {
			return 0, fmt.Errorf("%s: sendmsg: %w", row, err)
		}
		if _, _, _, _, err := unix.Recvmsg(fd, buf[:16], nil, unix.MSG_PEEK|unix.MSG_TRUNC); err != nil {
			return 0, fmt.Errorf("%s: peek: %w", row, err)
		}
		if _, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0); err != nil {
			return 0, fmt.Errorf("%s: recvmsg: %w", row, err)
		}
		return time.Since(t0), nil
	}
	times := map[string][]time.Duration{}
	const batch = 50 // rows interleave by batches of round trips, as a loop of one kind runs
	for i := 0; i < n+batch; i += batch {
		for _, row := range floorRows {
			for range batch {
				d, err := rtt(row)
				if err != nil {
					return err
				}
				if i >= batch { // the first batch warms up
					times[row] = append(times[row], d)
				}
			}
		}
	}
	for _, row := range floorRows {
		slices.Sort(times[row])
		fmt.Printf("%s p50=%d\n", row, times[row][len(times[row])/2].Nanoseconds())
	}
	return nil
}

func init() {
	programs["floor"] = floorProgram
	programs["echo"] = echoProgram
}

// blockingFile turns c into a blocking descriptor of its own (closing c).
func blockingFile(c *net.UnixConn) (*os.File, error) {
	f, err := c.File()
	c.Close()
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// hopSocket is echoSocket whose Request also takes "synchop" datagrams: it fetches their answer
// from the echo process (one hop), waiting in poll(2) as the bridge waits for manad.
type hopSocket struct {
	echoSocket
	echo int
	buf  []byte
}

func (h *hopSocket) Serve(ctx context.Context, peer *os.File) error {
	defer unix.Close(h.echo)
	return h.echoSocket.Serve(ctx, peer)
}

func (h *hopSocket) Request(d []byte) bool {
	if !bytes.HasPrefix(d, []byte("synchop")) {
		return h.echoSocket.Request(d)
	}
	if _, err := unix.Write(h.echo, d); err != nil {
		return false
	}
	pfd := []unix.PollFd{{Fd: int32(h.echo), Events: unix.POLLIN}}
	if _, err := unix.Poll(pfd, 1000); err != nil {
		return false
	}
	n, err := unix.Read(h.echo, h.buf)
	if err != nil {
		return false
	}
	peer := int(h.peerFD.Load())
	if peer == 0 {
		return false
	}
	_, err = unix.Write(peer, h.buf[:n])
	return err == nil
}

// relay forwards each connection of l to the echo at echoPath and back, on a thread of its own
// per connection, waiting in blocking syscalls as a bridge's thread would.
func relay(l *net.UnixListener, echoPath string) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		go func() {
			runtime.LockOSThread()
			f, err := blockingFile(c)
			if err != nil {
				return
			}
			defer f.Close()
			e, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: echoPath, Net: "unixpacket"})
			if err != nil {
				return
			}
			ef, err := blockingFile(e)
			if err != nil {
				return
			}
			defer ef.Close()
			buf := make([]byte, 1<<16)
			for {
				n, err := unix.Read(int(f.Fd()), buf)
				if err != nil || n == 0 {
					return
				}
				if _, err := unix.Write(int(ef.Fd()), buf[:n]); err != nil {
					return
				}
				if n, err = unix.Read(int(ef.Fd()), buf); err != nil {
					return
				}
				if _, err := unix.Write(int(f.Fd()), buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

var floorLine = regexp.MustCompile(`(?m)^([\w-]+) p50=(\d+)$`)

// BenchmarkFloor runs the floor model (see floorRows) and reports each row's p50 and its ratio
// to the kernel's row; each -count run is one round. Plain `go test -bench Floor` (no -race)
// gives the figures that mean something.
func BenchmarkFloor(b *testing.B) {
	testenv.RequireRoot(b)
	if err := CheckKernel(); err != nil {
		testenv.SkipOrFail(b, "this kernel cannot supervise: %v", err)
	}
	n := 2000
	if testing.Short() {
		n = 200
	}
	dir, err := os.MkdirTemp("", "floor-")
	require.NoError(b, err)
	b.Cleanup(func() { os.RemoveAll(dir) })
	echoPath, relayPath := filepath.Join(dir, "echo"), filepath.Join(dir, "relay")
	self, err := os.Executable()
	require.NoError(b, err)
	echo := exec.Command(self)
	echo.Env = append(os.Environ(), progEnv+"=echo", floorEchoEnv+"="+echoPath)
	echo.Stderr = os.Stderr
	require.NoError(b, echo.Start())
	b.Cleanup(func() { _ = echo.Process.Kill(); _ = echo.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(echoPath); err == nil {
			break
		}
		require.Less(b, i, 500, "the echo process did not listen")
		time.Sleep(10 * time.Millisecond)
	}
	rl, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: relayPath, Net: "unixpacket"})
	require.NoError(b, err)
	b.Cleanup(func() { rl.Close() })
	go relay(rl, echoPath)

	p50s := map[string][]float64{}
	for b.Loop() {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		ex, err := Run(ctx, Config{
			Path: self, Args: []string{"prog"}, Stdout: &out, Stderr: &out,
			Env: append(os.Environ(), progEnv+"=floor", floorNEnv+"="+strconv.Itoa(n),
				floorEchoEnv+"="+echoPath, floorRelayEnv+"="+relayPath),
			OpenNetlink: func(context.Context, Target) (NetlinkSocket, error) {
				fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return nil, err
				}
				if err := unix.Connect(fd, &unix.SockaddrUnix{Name: echoPath}); err != nil {
					unix.Close(fd)
					return nil, err
				}
				return &hopSocket{echoSocket: echoSocket{opts: map[int][]byte{}}, echo: fd, buf: make([]byte, 1<<16)}, nil
			},
		})
		cancel()
		require.NoError(b, err)
		require.Equal(b, 0, ex.Code, out.String())
		for _, m := range floorLine.FindAllStringSubmatch(out.String(), -1) {
			v, _ := strconv.ParseFloat(m[2], 64)
			p50s[m[1]] = append(p50s[m[1]], v)
		}
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			b.Fatal(errors.New("no figures"))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	k := med(p50s["kernel"])
	for _, row := range floorRows {
		m := med(p50s[row])
		b.ReportMetric(m, row+"-p50-ns")
		if row != "kernel" {
			b.ReportMetric(m/k, row+"-x")
		}
	}
}
