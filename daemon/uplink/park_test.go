package uplink

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/internal/epollinfo"
)

// epollEvents returns, for every epoll instance of this process that holds descriptor fd (the
// runtime's netpoller and the parkers among them), the events its entry waits for.
func epollEvents(t *testing.T, fd int) map[int]uint32 {
	t.Helper()
	es, err := epollinfo.Entries()
	require.NoError(t, err)
	out := map[int]uint32{}
	for _, e := range es {
		if e.TFD == fd {
			out[e.EPFD] = e.Events
		}
	}
	return out
}

// rxSocket returns the descriptor of the uplink's (first) RX socket and its parker.
func rxSocket(t *testing.T, u *Uplink) (int, *parker) {
	t.Helper()
	a := u.sock.Load()
	require.NotNil(t, a, "not attached")
	if a.xsk != nil {
		return a.xsk.queues[0].rxFD, a.xsk.queues[0].pk
	}
	return a.pkt.rxFD, a.pkt.pk
}

// armed reports whether the uplink's RX socket is in exactly one epoll instance, its parker's
// (why says otherwise), and whether that entry waits for frames (EPOLLIN) or is disarmed.
func armed(t *testing.T, u *Uplink) (on bool, why string) {
	fd, pk := rxSocket(t, u)
	regs := epollEvents(t, fd)
	if ev, ok := regs[pk.epfd]; ok && len(regs) == 1 {
		return ev&unix.EPOLLIN != 0, ""
	}
	return false, fmt.Sprintf("socket %d in epolls %v, want only in its parker's %d", fd, regs, pk.epfd)
}

// disarmed is a condition that holds once the uplink's RX socket is disarmed in its parker's
// epoll and in no other.
func disarmed(t *testing.T, u *Uplink) func() bool {
	return func() bool { on, why := armed(t, u); return !on && why == "" }
}

// trickle sends a frame from fd every 100 µs (within any busy-poll window) until the returned
// function is called, which waits for the sender to end.
func trickle(t *testing.T, fd int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f := testFrame(99, 100)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Microsecond):
			}
			_, _ = unix.Write(fd, f)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// busyUplink starts a busy-polling (MaxBusyPoll, one slot) uplink of mode on a0, or one that
// parks only (poll false), and waits for it to be up.
func busyUplink(t *testing.T, ns, mode string, poll bool) *Uplink {
	t.Helper()
	pollers := datapath.NewSegments().Pollers()
	require.NoError(t, pollers.SetMax(1))
	cfg := Config{Dev: "a0", NetNS: ns, Segment: datapath.NewSegment("t"), Logger: quiet(), Attach: mode, Pollers: pollers}
	if poll {
		cfg.BusyPoll = MaxBusyPoll
	}
	u, err := Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(u.Close)
	eventually(t, "a0 up", func() bool { return u.Status().State == Up })
	require.Equal(t, mode, u.Status().Attach, u.Status().Err)
	return u
}

// TestUplinkParkerDisarmedWhilePolling checks what makes a busy-polling uplink cost no wake-up
// per frame: its RX socket is in one epoll instance only, its parker's (never the runtime's
// netpoller), and its entry there waits for frames only while the RX loop is parked: disarmed
// while the loop polls its ring through frames that keep coming, armed again once the loop
// parks after a window without frames.
func TestUplinkParkerDisarmedWhilePolling(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("busy polling needs two CPUs (datapath.Pollers allows none on one)")
	}
	for _, mode := range []string{AttachPacket, AttachXDP} {
		t.Run(mode, func(t *testing.T) {
			ns := testNS(t)
			u := busyUplink(t, ns, mode, true)
			parked := func() bool { on, why := armed(t, u); return on && why == "" }
			require.Eventually(t, parked, 2*time.Second, time.Millisecond, "not armed while idle")
			stop := trickle(t, rawSocket(t, ns, "a1"))
			defer stop()
			require.Eventually(t, disarmed(t, u), 5*time.Second, 100*time.Microsecond, "the socket stayed armed while frames kept the loop polling")
			eventually(t, "a poll that found a frame", func() bool { return u.Stats().Polling.Hits > 0 })
			stop()
			require.Eventually(t, parked, 2*time.Second, time.Millisecond, "not armed again once the frames stopped")
		})
	}
}

// receivers counts the running RX loops.
func receivers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			s := string(buf[:n])
			return strings.Count(s, "uplink.(*packetSocket).receive(") + strings.Count(s, "uplink.(*xskQueue).receive(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// openFDs lists this process's open descriptors, with what each refers to.
func openFDs(t *testing.T) map[string]string {
	des, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	out := map[string]string{}
	for _, de := range des {
		if link, err := os.Readlink("/proc/self/fd/" + de.Name()); err == nil {
			out[de.Name()] = link
		}
	}
	return out
}

// newFDs lists the descriptors of now that were not open (to the same file) in before.
func newFDs(before, now map[string]string) []string {
	var out []string
	for fd, link := range now {
		if before[fd] != link {
			out = append(out, fd+" -> "+link)
		}
	}
	return out
}

// TestUplinkClosedUnderReader closes an uplink while its RX loop is parked on its socket, and
// while it polls its ring through frames that keep coming: Close returns promptly either way,
// the RX loop is gone, and the process holds no descriptor it did not hold before the uplink
// started (the socket, its parker's epoll, the rtnetlink sockets and the namespace's are closed).
func TestUplinkClosedUnderReader(t *testing.T) {
	for _, mode := range []string{AttachPacket, AttachXDP} {
		for _, poll := range []bool{false, true} {
			t.Run(mode+map[bool]string{false: "Parked", true: "Polling"}[poll], func(t *testing.T) {
				if poll && runtime.NumCPU() < 2 {
					t.Skip("busy polling needs two CPUs")
				}
				ns := testNS(t)
				a1 := rawSocket(t, ns, "a1")
				loops, fds := receivers(), openFDs(t)
				u := busyUplink(t, ns, mode, poll)
				eventually(t, "an RX loop", func() bool { return receivers() > loops })
				if poll {
					stop := trickle(t, a1)
					defer stop()
					require.Eventually(t, disarmed(t, u), 5*time.Second, 100*time.Microsecond, "the loop never polled")
				} else {
					send(t, a1, testFrame(1, 100))
					eventually(t, "the frame received", func() bool { return u.Stats().RxFrames > 0 })
					require.Eventually(t, func() bool { on, why := armed(t, u); return on && why == "" }, 2*time.Second, time.Millisecond)
				}
				// Close must wake the parked or polling loop; how fast is a benchmark's business,
				// so the bound only tells a hang from a slow machine.
				closed := make(chan struct{})
				go func() { u.Close(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(30 * time.Second):
					t.Fatal("Close did not return: the RX loop was not woken")
				}
				assert.Equal(t, loops, receivers(), "an RX loop outlived Close")
				assert.Empty(t, newFDs(fds, openFDs(t)), "descriptors left open by Close")
			})
		}
	}
}
