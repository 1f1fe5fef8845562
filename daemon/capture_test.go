package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/daemon/uplink"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/internal/nsrun"
)

// captureRig is a daemon with two ports on segment wire0, each in a namespace of its own, up and
// addressed (10.78.0.1 and .2), and its socket in a directory other users can reach.
type captureRig struct {
	sock      string
	nsA, nsB  string
	portA, pB string
	d         *Daemon
}

func newCaptureRig(t *testing.T, daemonExtra string) *captureRig {
	t.Helper()
	taptest.Require(t)
	dir, err := os.MkdirTemp("", "mcap")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	r := &captureRig{sock: filepath.Join(dir, "manad.sock"), nsA: taptest.NetNS(t), nsB: taptest.NetNS(t),
		portA: taptest.Name("cpa"), pB: taptest.Name("cpb")}
	doc := fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q
%s

[[port]]
name = %q
netns = %q
segment = "wire0"
queues = 1
persistent = false

[[port]]
name = %q
netns = %q
segment = "wire0"
queues = 1
persistent = false
`, r.sock, filepath.Join(dir, "state"), daemonExtra, r.portA, r.nsA, r.pB, r.nsB)
	r.d = runTest(t, doc, Options{})
	for i, p := range []struct{ ns, name string }{{r.nsA, r.portA}, {r.nsB, r.pB}} {
		taptest.IP(t, p.ns, "addr", "add", fmt.Sprintf("10.78.0.%d/24", i+1), "dev", p.name)
		taptest.IP(t, p.ns, "link", "set", p.name, "up")
	}
	return r
}

// ping pings B from A (count echo requests, -f floods them).
func (r *captureRig) ping(t *testing.T, args ...string) {
	t.Helper()
	args = append([]string{"netns", "exec", r.nsA, "ping", "-q", "-W", "5"}, append(args, "10.78.0.2")...)
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, "ping %v: %v\n%s", args, err, out)
}

func (r *captureRig) dial(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(r.sock)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// icmp returns the ICMP type of an IPv4 ICMP frame, or -1.
func icmp(f []byte) int {
	if len(f) < 35 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 1 {
		return -1
	}
	return int(f[14+int(f[14]&0x0f)*4])
}

// collect reads frames until the ICMP echo request and reply of want have been seen.
func collect(t *testing.T, cp *client.Capture, want func(f wire.CaptureFrame) (req, rep bool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var req, rep bool
	for !req || !rep {
		fs, err := cp.Next(ctx)
		require.NoError(t, err, "capture: %v (echo request seen %v, reply %v)", err, req, rep)
		for _, f := range fs {
			q, p := want(f)
			req, rep = req || q, rep || p
		}
	}
}

// TestCapturePortAndSegment: a port capture sees the port's echo request going out and the reply
// coming in; a segment capture sees both as they enter the segment, from the port that sent
// them; STOP's counters account for every frame the client got.
func TestCapturePortAndSegment(t *testing.T) {
	r := newCaptureRig(t, "")
	c := r.dial(t)
	ctx := context.Background()

	cp, err := c.StartCapture(ctx, wire.CaptureRequest{Target: r.portA})
	require.NoError(t, err)
	info := cp.Info()
	assert.Equal(t, wire.CaptureKindPort, info.Kind, "START reply %+v", info)
	assert.Equal(t, r.portA, info.Target, "START reply %+v", info)
	assert.EqualValues(t, wire.MaxSnaplen, info.Snaplen, "START reply %+v", info)
	got := 0
	r.ping(t, "-c", "2")
	collect(t, cp, func(f wire.CaptureFrame) (bool, bool) {
		got++
		assert.Equal(t, r.portA, f.Member, "frame %+v: want member %s, whole, timestamped", f, r.portA)
		assert.Equal(t, len(f.Data), int(f.OrigLen), "frame %+v: want member %s, whole, timestamped", f, r.portA)
		assert.NotEqual(t, uint64(0), f.Time, "frame %+v: want member %s, whole, timestamped", f, r.portA)
		return icmp(f.Data) == 8 && f.Dir == wire.CaptureOut, icmp(f.Data) == 0 && f.Dir == wire.CaptureIn
	})
	rest, st, err := cp.Stop(ctx)
	require.NoError(t, err)
	got += len(rest)
	assert.Equal(t, uint64(got), st.Sent, "STOP counters %+v; the client got %d frames", st, got)
	assert.Equal(t, st.Sent+st.Dropped, st.Matched, "STOP counters %+v; the client got %d frames", st, got)

	seg, err := c.StartCapture(ctx, wire.CaptureRequest{Target: "wire0", Snaplen: 34})
	require.NoError(t, err)
	defer seg.Close()
	info = seg.Info()
	assert.Equal(t, wire.CaptureKindSegment, info.Kind, "START reply %+v, want segment wire0, snaplen 34", info)
	assert.Equal(t, uint32(34), info.Snaplen, "START reply %+v, want segment wire0, snaplen 34", info)
	r.ping(t, "-c", "2", "-s", "200")
	collect(t, seg, func(f wire.CaptureFrame) (bool, bool) {
		assert.Equal(t, wire.CaptureOut, f.Dir, "segment frame from %s dir %d, %d bytes: want out, at most 34", f.Member, f.Dir, len(f.Data))
		assert.LessOrEqual(t, len(f.Data), 34, "segment frame from %s dir %d, %d bytes: want out, at most 34", f.Member, f.Dir, len(f.Data))
		if len(f.Data) < 34 {
			return false, false
		}
		// Cut at 34 bytes: the ICMP type (byte 34) is gone; the IP protocol is in.
		isICMP := binary.BigEndian.Uint16(f.Data[12:]) == 0x0800 && f.Data[23] == 1 && f.OrigLen == 14+20+8+200
		return isICMP && f.Member == r.portA, isICMP && f.Member == r.pB
	})
}

// TestCaptureSlowReader: a client that reads nothing while a ping flood runs does not slow the
// wire (the flood completes) and gets, when it stops, every frame manad kept for it, with the
// rest counted as dropped.
func TestCaptureSlowReader(t *testing.T) {
	r := newCaptureRig(t, "")
	c := r.dial(t)
	cp, err := c.StartCapture(context.Background(), wire.CaptureRequest{Target: r.portA})
	require.NoError(t, err)
	// 10,000 frames: more than the capture's queue and the socket's buffers hold together.
	r.ping(t, "-f", "-c", "5000")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := 0
	for {
		fs, err := cp.Next(ctx)
		require.NoError(t, err)
		n += len(fs)
		if len(fs) > 0 {
			break
		}
	}
	rest, st, err := cp.Stop(ctx)
	require.NoError(t, err)
	n += len(rest)
	t.Logf("counters %+v, client got %d", st, n)
	assert.GreaterOrEqual(t, st.Matched, uint64(10000), "counters %+v, client got %d: want >= 10000 matched, some dropped, the rest sent", st, n)
	assert.NotEqual(t, uint64(0), st.Dropped, "counters %+v, client got %d: want >= 10000 matched, some dropped, the rest sent", st, n)
	assert.Equal(t, uint64(n), st.Sent, "counters %+v, client got %d: want >= 10000 matched, some dropped, the rest sent", st, n)
	assert.Equal(t, st.Sent+st.Dropped, st.Matched, "counters %+v, client got %d: want >= 10000 matched, some dropped, the rest sent", st, n)
}

// TestCaptureNotIdle: a capturing connection sends no requests, yet the idle timeout does not
// close it: frames still arrive after several idle timeouts without traffic.
func TestCaptureNotIdle(t *testing.T) {
	r := newCaptureRig(t, `idle_timeout = "1s"`)
	c := r.dial(t)
	cp, err := c.StartCapture(context.Background(), wire.CaptureRequest{Target: "wire0"})
	require.NoError(t, err)
	defer cp.Close()
	time.Sleep(3 * time.Second) // three idle timeouts
	r.ping(t, "-c", "1")
	collect(t, cp, func(f wire.CaptureFrame) (bool, bool) {
		return icmp(f.Data) == 8, icmp(f.Data) == 0
	})
}

// TestCaptureEndsWithPort: deleting a port ends its capture: the client gets the frames, then
// the end notice with the reason and the counters, and may start another capture.
func TestCaptureEndsWithPort(t *testing.T) {
	r := newCaptureRig(t, "")
	c := r.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp, err := c.StartCapture(ctx, wire.CaptureRequest{Target: r.portA})
	require.NoError(t, err)
	r.ping(t, "-c", "1")
	var inA *client.Client
	require.NoError(t, nsrun.In(r.nsA, func() (err error) { inA, err = client.Dial(r.sock); return err }))
	defer inA.Close()
	require.NoError(t, inA.DeletePort(ctx, client.Interface{Name: r.portA}))
	n := 0
	for {
		fs, err := cp.Next(ctx)
		if errors.Is(err, client.ErrCaptureEnded) {
			assert.Contains(t, err.Error(), "port "+r.portA+" is gone", "end: %v", err)
			break
		}
		require.NoError(t, err)
		n += len(fs)
	}
	_, st, err := cp.Stop(ctx)
	assert.NoError(t, err, "Stop after the end")
	assert.Equal(t, uint64(n), st.Sent, "Stop after the end: %+v; the client got %d frames", st, n)
	assert.GreaterOrEqual(t, n, 2, "the client got %d frames, want the ping's 2 at least", n)
	seg, err := c.StartCapture(ctx, wire.CaptureRequest{Target: "wire0"})
	require.NoError(t, err, "a capture after the end")
	seg.Close()
}

// TestCaptureUplink: a segment capture sees what an uplink brings in, from "uplink:NS/DEV": a
// port pings an address behind the uplink (a veth whose peer the kernel answers on).
func TestCaptureUplink(t *testing.T) {
	taptest.Require(t)
	upNS, portNS := taptest.NetNS(t), taptest.NetNS(t)
	taptest.IP(t, upNS, "link", "add", "up0", "type", "veth", "peer", "name", "up1")
	taptest.IP(t, upNS, "addr", "add", "10.79.0.9/24", "dev", "up1")
	taptest.IP(t, upNS, "link", "set", "up0", "up")
	taptest.IP(t, upNS, "link", "set", "up1", "up")
	dir := t.TempDir()
	sock, port := filepath.Join(dir, "manad.sock"), taptest.Name("cup")
	d := runTest(t, fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q

[[segment]]
name = "wire0"
uplinks = [{dev = "up0", netns = %q}]

[[port]]
name = %q
netns = %q
segment = "wire0"
queues = 1
persistent = false
`, sock, filepath.Join(dir, "state"), upNS, port, portNS), Options{})
	taptest.IP(t, portNS, "addr", "add", "10.79.0.1/24", "dev", port)
	taptest.IP(t, portNS, "link", "set", port, "up")
	for deadline := time.Now().Add(30 * time.Second); len(d.Uplinks()) != 1 || d.Uplinks()[0].State != uplink.Up; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("uplink never came up: %+v", d.Uplinks())
		}
	}
	c, err := client.Dial(sock)
	require.NoError(t, err)
	defer c.Close()
	cp, err := c.StartCapture(context.Background(), wire.CaptureRequest{Target: "wire0"})
	require.NoError(t, err)
	defer cp.Close()
	out, err := exec.Command("ip", "netns", "exec", portNS, "ping", "-c", "1", "-W", "5", "10.79.0.9").CombinedOutput()
	require.NoError(t, err, "ping through the uplink: %v\n%s", err, out)
	from := "uplink:" + upNS + "/up0"
	collect(t, cp, func(f wire.CaptureFrame) (bool, bool) {
		return icmp(f.Data) == 8 && f.Member == port, icmp(f.Data) == 0 && f.Member == from
	})
}

// TestCaptureRefused: what CAPTURE_START refuses, with its errno and a message.
func TestCaptureRefused(t *testing.T) {
	r := newCaptureRig(t, "")
	c := r.dial(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		req   wire.CaptureRequest
		errno unix.Errno
	}{
		{"unknown target", wire.CaptureRequest{Target: "no-such-seg"}, unix.ENOENT},
		{"direction on a segment", wire.CaptureRequest{Target: "wire0", Direction: wire.CaptureIn}, unix.EINVAL},
		{"no target", wire.CaptureRequest{}, unix.EINVAL},
		{"bad direction", wire.CaptureRequest{Target: r.portA, Direction: 3}, unix.ERANGE},
		{"snaplen too long", wire.CaptureRequest{Target: r.portA, Snaplen: wire.MaxSnaplen + 1}, unix.ERANGE},
	} {
		cp, err := c.StartCapture(ctx, tc.req)
		var ce *client.Error
		assert.ErrorIs(t, err, tc.errno, tc.name)
		if assert.ErrorAs(t, err, &ce, tc.name) {
			assert.NotEmpty(t, ce.Message, "%s: %v, want a message", tc.name, err)
		}
		if cp != nil {
			cp.Close()
		}
	}

	// Not an admin: EPERM, as for every admin command.
	err := asUID(65534, func() error {
		uc, err := client.Dial(r.sock)
		if err != nil {
			return err
		}
		defer uc.Close()
		_, err = uc.StartCapture(ctx, wire.CaptureRequest{Target: "wire0"})
		return err
	})
	assert.ErrorIs(t, err, unix.EPERM, "capture by uid 65534: %v, want EPERM", err)

	// At most MaxCapturesPerUID per uid; a stopped capture frees its slot.
	var caps []*client.Capture
	for i := range genl.MaxCapturesPerUID {
		cp, err := c.StartCapture(ctx, wire.CaptureRequest{Target: "wire0"})
		require.NoError(t, err, "capture %d", i)
		caps = append(caps, cp)
	}
	_, err = c.StartCapture(ctx, wire.CaptureRequest{Target: "wire0"})
	assert.ErrorIs(t, err, unix.EUSERS, "capture past the limit: %v, want EUSERS", err)
	_, _, err = caps[0].Stop(ctx)
	require.NoError(t, err)
	cp, err := c.StartCapture(ctx, wire.CaptureRequest{Target: "wire0"})
	require.NoError(t, err, "capture after one stopped")
	caps = append(caps[1:], cp)
	for _, cp := range caps {
		cp.Close()
	}

	// One capture per connection (EBUSY), and STOP without one is ENOENT.
	rc := dialRawManad(t, r.sock)
	assert.Equal(t, unix.ENOENT, rc.do(t, wire.CmdCaptureStop, nil), "STOP without a capture")
	start := func(b *nlattr.Builder) { b.PutString(wire.AttrCaptureTarget, "wire0") }
	require.Equal(t, unix.Errno(0), rc.do(t, wire.CmdCaptureStart, start), "START")
	assert.Equal(t, unix.EBUSY, rc.do(t, wire.CmdCaptureStart, start), "second START on the connection")
	assert.Equal(t, unix.Errno(0), rc.do(t, wire.CmdCaptureStop, nil), "STOP")
	assert.Equal(t, unix.Errno(0), rc.do(t, wire.CmdCaptureStart, start), "START after STOP")
}

// asUID runs f on a thread of its own whose credentials are uid's (raw setresuid: only that
// thread's), so that the sockets it connects carry them. The thread is discarded afterwards.
func asUID(uid uint32, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		errc <- func() error {
			var none [1]uint32
			if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, uintptr(unsafe.Pointer(&none[0])), 0); e != 0 {
				return fmt.Errorf("setgroups: %w", e)
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
				return fmt.Errorf("setresgid: %w", e)
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
				return fmt.Errorf("setresuid: %w", e)
			}
			return f()
		}()
	}()
	return <-errc
}

// rawManad sends manad-family requests on one connection and reads their ACKs, skipping
// everything else (the frames of a capture).
type rawManad struct {
	uc  *net.UnixConn
	fam uint16
	seq uint32
}

func dialRawManad(t *testing.T, sock string) *rawManad {
	t.Helper()
	gc, err := client.DialGenetlink(sock)
	require.NoError(t, err)
	f, err := gc.GetFamily(wire.FamilyName)
	gc.Close()
	require.NoError(t, err)
	uc, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	t.Cleanup(func() { uc.Close() })
	return &rawManad{uc: uc, fam: f.ID}
}

// do sends command cmd with NLM_F_ACK and returns the ACK's errno.
func (r *rawManad) do(t *testing.T, cmd uint8, attrs func(*nlattr.Builder)) unix.Errno {
	t.Helper()
	r.seq++
	var b nlattr.Builder
	start := b.BeginMsg(r.fam, nlattr.FlagRequest|nlattr.FlagAck, r.seq, 0)
	b.Genl(cmd, wire.FamilyVersion)
	if attrs != nil {
		attrs(&b)
	}
	b.EndMsg(start)
	_, err := r.uc.Write(b.B)
	require.NoError(t, err)
	buf := make([]byte, 256<<10)
	_ = r.uc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		n, err := r.uc.Read(buf)
		require.NoError(t, err, "reading the ACK of command %d", cmd)
		for d := buf[:n]; len(d) >= nlattr.MsgHdrLen; {
			h, _ := nlattr.ReadHeader(d)
			require.GreaterOrEqual(t, h.Len, uint32(nlattr.MsgHdrLen), "malformed message from manad: %x", d)
			require.LessOrEqual(t, int(h.Len), len(d), "malformed message from manad: %x", d)
			if h.Type == unix.NLMSG_ERROR && h.Seq == r.seq && h.Len >= nlattr.MsgHdrLen+4 {
				return unix.Errno(-int32(binary.NativeEndian.Uint32(d[nlattr.MsgHdrLen:])))
			}
			d = d[min(nlattr.Align(int(h.Len)), len(d)):]
		}
	}
}
