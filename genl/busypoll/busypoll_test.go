package busypoll_test

import (
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/busypoll"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pair returns the two ends of a SOCK_SEQPACKET socketpair as net.UnixConns (non-blocking,
// on the runtime's poller, as manad's and genl/client's connections are).
func pair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "seqpacket")
		defer f.Close()
		c, err := net.FileConn(f)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

func rawConn(t *testing.T, c *net.UnixConn) syscall.RawConn {
	t.Helper()
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	return rc
}

// reader is a try that reads one datagram into buf, recording its length.
func reader(buf []byte, n *int) func(fd int) bool {
	return func(fd int) bool {
		k, err := unix.Read(fd, buf)
		if err == unix.EAGAIN || err == unix.EINTR {
			return false
		}
		*n = k
		return true
	}
}

func TestPoll(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		// send, when set, runs before the poll starts (sent) or from another goroutine
		// while it polls (late).
		sent, late string
		want       bool
		wantMin    time.Duration // the poll lasts at least this long (it gave up at d)
	}{
		{name: "datagram waiting", d: time.Second, sent: "ready", want: true},
		{name: "datagram arrives while polling", d: 10 * time.Second, late: "late", want: true},
		{name: "nothing within d", d: 2 * time.Millisecond, want: false, wantMin: 2 * time.Millisecond},
		{name: "zero duration", d: 0, sent: "unread", want: false},
		{name: "negative duration", d: -time.Second, sent: "unread", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := pair(t)
			if tt.sent != "" {
				_, err := a.Write([]byte(tt.sent))
				require.NoError(t, err)
			}
			if tt.late != "" {
				go func() {
					time.Sleep(5 * time.Millisecond)
					a.Write([]byte(tt.late))
				}()
			}
			buf, n := make([]byte, 64), -1
			t0 := time.Now()
			got := busypoll.Poll(rawConn(t, b), tt.d, busypoll.Threads, reader(buf, &n))
			took := time.Since(t0)
			require.Equal(t, tt.want, got, "Poll")
			if want := tt.sent + tt.late; got {
				assert.Equal(t, want, string(buf[:n]), "read %q", buf[:n])
			}
			if !got {
				assert.Equal(t, -1, n, "try reported a datagram of %d bytes, yet Poll = false", n)
			}
			assert.GreaterOrEqual(t, took, tt.wantMin, "Poll gave up after %v, before its %v", took, tt.wantMin)
		})
	}
}

// TestPollPeerGone: an end of file is a result (try sees a zero-length read), not a wait.
func TestPollPeerGone(t *testing.T) {
	a, b := pair(t)
	a.Close()
	buf, n := make([]byte, 64), -1
	require.True(t, busypoll.Poll(rawConn(t, b), 10*time.Second, busypoll.Goroutines, reader(buf, &n)), "Poll after the peer closed: read %d bytes, want the end of file (0)", n)
	require.Equal(t, 0, n, "Poll after the peer closed: read %d bytes, want the end of file (0)", n)
}

// TestPollClosed: a connection closed on this side ends the poll without calling try.
func TestPollClosed(t *testing.T) {
	_, b := pair(t)
	rc := rawConn(t, b)
	b.Close()
	called := false
	require.False(t, busypoll.Poll(rc, 10*time.Second, busypoll.Threads, func(int) bool { called = true; return true }), "Poll on a closed connection: called try %v, want false and no call", called)
	require.False(t, called, "Poll on a closed connection: called try %v, want false and no call", called)
}

// TestPollers: half the processors may poll, none on one.
func TestPollers(t *testing.T) {
	for _, tc := range []struct{ procs, want int }{{1, 0}, {2, 1}, {3, 1}, {4, 2}, {16, 8}} {
		old := runtime.GOMAXPROCS(tc.procs)
		got := busypoll.Pollers()
		runtime.GOMAXPROCS(old)
		assert.Equal(t, tc.want, got, "GOMAXPROCS %d: Pollers()", tc.procs)
	}
}
