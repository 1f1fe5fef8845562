package uplink

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/internal/nsrun"
	"github.com/manad/manad/tests/testenv"
)

// testNS is a network namespace with two veth pairs, a0–a1 and b0–b1, all up: the uplinks attach
// to a0 and b0, the test sends and receives on a1 and b1.
func testNS(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t)
	ns := fmt.Sprintf("upl%d%s", os.Getpid()%100000, strings.ReplaceAll(t.Name()[len("Test"):], "/", "")[:4])
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, p := range []string{"a", "b"} {
		run(t, "ip", "-n", ns, "link", "add", p+"0", "type", "veth", "peer", "name", p+"1")
		run(t, "ip", "-n", ns, "link", "set", p+"0", "up")
		run(t, "ip", "-n", ns, "link", "set", p+"1", "up")
	}
	return ns
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	require.NoError(t, err, "%s: %v\n%s", strings.Join(args, " "), err, out)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// rawSocket is a plain packet socket on a device of ns, for injecting and seeing frames.
func rawSocket(t *testing.T, ns, dev string) int {
	t.Helper()
	h, err := netns.GetFromName(ns)
	require.NoError(t, err)
	defer h.Close()
	var fd int
	err = nsrun.InHandle(h, func() (err error) {
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		ifi, err := netIndex(dev)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi}); err != nil {
			return err
		}
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	})
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// netIndex is the ifindex of dev in the calling thread's namespace (not /sys, which shows the
// mount namespace's).
func netIndex(dev string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(dev)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, err
	}
	return int(ifr.Uint32()), nil
}

// testFrame is a broadcast frame of the test's own EtherType, payload bytes long, tagged.
func testFrame(tag byte, payload int) []byte {
	f := make([]byte, 14+payload)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x42})
	f[12], f[13] = 0x88, 0xb5
	f[14] = tag
	return f
}

// sees reports whether the frame tagged tag arrives on fd within a second.
func sees(t *testing.T, fd int, tag byte) bool {
	t.Helper()
	buf := make([]byte, 16<<10)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n, err := unix.Read(fd, buf)
		if err != nil {
			continue
		}
		if n >= 15 && buf[12] == 0x88 && buf[13] == 0xb5 && buf[14] == tag {
			return true
		}
	}
	return false
}

func send(t *testing.T, fd int, f []byte) {
	t.Helper()
	_, err := unix.Write(fd, f)
	require.NoError(t, err)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUplinkForwardsAndFollowsTheDevice runs the same traffic, MTU, carrier and re-creation
// checks over each attachment.
func TestUplinkForwardsAndFollowsTheDevice(t *testing.T) {
	for _, mode := range []string{AttachPacket, AttachXDP} {
		t.Run(mode, func(t *testing.T) { testForwardsAndFollows(t, mode) })
	}
}

func testForwardsAndFollows(t *testing.T, mode string) {
	ns := testNS(t)
	seg := datapath.NewSegment("t")
	ua, err := Start(context.Background(), Config{Dev: "a0", NetNS: ns, Segment: seg, Logger: quiet(), Attach: mode})
	require.NoError(t, err)
	defer ua.Close()
	ub, err := Start(context.Background(), Config{Dev: "b0", NetNS: ns, Segment: seg, Logger: quiet(), Attach: mode})
	require.NoError(t, err)
	defer ub.Close()
	for _, u := range []*Uplink{ua, ub} {
		eventually(t, u.cfg.Name()+" up", func() bool { return u.Status().State == Up })
		st := u.Status()
		require.Equal(t, mode, st.Attach, "%s attached with %q (%s)", u.cfg.Name(), st.Attach, st.Err)
	}
	a1, b1 := rawSocket(t, ns, "a1"), rawSocket(t, ns, "b1")

	// Both directions, through the segment.
	send(t, a1, testFrame(1, 100))
	require.True(t, sees(t, b1, 1), "frame from a1 did not reach b1")
	send(t, b1, testFrame(2, 100))
	require.True(t, sees(t, a1, 2), "frame from b1 did not reach a1")
	// Split horizon: what came in through a0 does not go back out through it.
	require.False(t, sees(t, a1, 1), "frame from a1 came back to a1")

	// MTU truth: b0's MTU drops larger frames, counted.
	run(t, "ip", "-n", ns, "link", "set", "b0", "mtu", "1000")
	eventually(t, "b0's MTU followed", func() bool { return ub.Status().MTU == 1000 })
	send(t, a1, testFrame(3, 1001))
	require.False(t, sees(t, b1, 3), "a frame over b0's MTU went out")
	got := ub.Stats().TxMTUDrops
	require.Equal(t, uint64(1), got, "TxMTUDrops %d, want 1", got)
	send(t, a1, testFrame(4, 1000))
	require.True(t, sees(t, b1, 4), "a frame at b0's MTU did not go out")

	// Carrier loss (the peer goes down), then back.
	run(t, "ip", "-n", ns, "link", "set", "b1", "down")
	eventually(t, "b0 down", func() bool { return ub.Status().State == Down })
	send(t, a1, testFrame(5, 100))
	eventually(t, "frame to the down uplink counted", func() bool { return ub.Stats().TxDown >= 1 })
	run(t, "ip", "-n", ns, "link", "set", "b1", "up")
	eventually(t, "b0 up again", func() bool { return ub.Status().State == Up })
	send(t, a1, testFrame(6, 100))
	require.True(t, sees(t, b1, 6), "frame did not flow after the uplink came back")

	// The device disappears and a new one takes its name: re-attached.
	run(t, "ip", "-n", ns, "link", "del", "b0")
	eventually(t, "b0 absent", func() bool { return ub.Status().State == Absent })
	run(t, "ip", "-n", ns, "link", "add", "b0", "type", "veth", "peer", "name", "b1")
	run(t, "ip", "-n", ns, "link", "set", "b0", "up")
	run(t, "ip", "-n", ns, "link", "set", "b1", "up")
	eventually(t, "new b0 attached", func() bool { return ub.Status().State == Up })
	b1 = rawSocket(t, ns, "b1")
	send(t, a1, testFrame(7, 100))
	require.True(t, sees(t, b1, 7), "frame did not reach the re-created device")
	require.Equal(t, uint64(3), ub.Stats().Attaches, "Attaches, want 3 (start, after carrier, after re-creation)")
	st := ua.Stats()
	require.GreaterOrEqual(t, st.RxFrames, uint64(6), "a0 stats %+v, want at least 6 frames received and 1 sent", st)
	require.GreaterOrEqual(t, st.TxFrames, uint64(1), "a0 stats %+v, want at least 6 frames received and 1 sent", st)
}

func TestUplinkStartErrors(t *testing.T) {
	seg := datapath.NewSegment("t")
	_, err := Start(context.Background(), Config{Segment: seg})
	require.ErrorContains(t, err, "needs a device", "no device")
	_, err = Start(context.Background(), Config{Dev: "x"})
	require.Error(t, err, "no segment accepted")
}

// TestUplinkWaitsForItsNetNS: an uplink whose namespace does not exist yet waits for it, then for
// its device, and attaches.
func TestUplinkWaitsForItsNetNS(t *testing.T) {
	testenv.RequireRoot(t)
	ns := fmt.Sprintf("uplw%d", os.Getpid()%100000)
	u, err := Start(context.Background(), Config{Dev: "w0", NetNS: ns, Segment: datapath.NewSegment("t"), Logger: quiet()})
	require.NoError(t, err)
	defer u.Close()
	st := u.Status()
	require.Equal(t, Absent, st.State, "status %+v, want absent, waiting for the namespace", st)
	require.Contains(t, st.Err, "network namespace", "status %+v, want absent, waiting for the namespace", st)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "add", "w0", "type", "veth", "peer", "name", "w1")
	run(t, "ip", "-n", ns, "link", "set", "w1", "up")
	run(t, "ip", "-n", ns, "link", "set", "w0", "up")
	eventually(t, "w0 attached", func() bool { return u.Status().State == Up })
}

// TestUplinkWaitsForItsDevice: an uplink started before its device exists attaches once the
// device is created and up.
func TestUplinkWaitsForItsDevice(t *testing.T) {
	ns := testNS(t)
	u, err := Start(context.Background(), Config{Dev: "c0", NetNS: ns, Segment: datapath.NewSegment("t"), Logger: quiet()})
	require.NoError(t, err)
	defer u.Close()
	require.Equal(t, Absent, u.Status().State, "state before the device exists")
	run(t, "ip", "-n", ns, "link", "add", "c0", "type", "veth", "peer", "name", "c1")
	run(t, "ip", "-n", ns, "link", "set", "c1", "up")
	eventually(t, "c0 down (created, not up)", func() bool { return u.Status().State == Down })
	run(t, "ip", "-n", ns, "link", "set", "c0", "up")
	eventually(t, "c0 attached", func() bool { return u.Status().State == Up })
	st := u.Status()
	require.NotEqual(t, 0, st.Index, "status %+v, want an ifindex, MTU 1500, 2 changes", st)
	require.Equal(t, 1500, st.MTU, "status %+v, want an ifindex, MTU 1500, 2 changes", st)
	require.Equal(t, uint64(2), st.Changes, "status %+v, want an ifindex, MTU 1500, 2 changes", st)
}

// TestUplinkKeepsVLANTags: the kernel takes a received frame's 802.1Q tag off into metadata;
// the uplink puts it back, so a tagged frame crosses the segment tagged.
func TestUplinkKeepsVLANTags(t *testing.T) {
	for _, mode := range []string{AttachPacket, AttachXDP} {
		t.Run(mode, func(t *testing.T) { testKeepsVLANTags(t, mode) })
	}
}

func testKeepsVLANTags(t *testing.T, mode string) {
	ns := testNS(t)
	seg := datapath.NewSegment("t")
	for _, dev := range []string{"a0", "b0"} {
		u, err := Start(context.Background(), Config{Dev: dev, NetNS: ns, Segment: seg, Logger: quiet(), Attach: mode})
		require.NoError(t, err)
		defer u.Close()
		eventually(t, dev+" up", func() bool { return u.Status().State == Up })
	}
	a1, b1 := rawSocket(t, ns, "a1"), rawSocket(t, ns, "b1")
	require.NoError(t, unix.SetsockoptInt(b1, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1))
	f := testFrame(9, 100)
	tagged := append(append(append([]byte(nil), f[:12]...), 0x81, 0x00, 0x00, 0x2a), f[12:]...) // VLAN 42
	send(t, a1, tagged)
	buf, oob := make([]byte, 2048), make([]byte, 256)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n, oobn, _, _, err := unix.Recvmsg(b1, buf, oob, 0)
		if err != nil || n < 15 || buf[12] != 0x88 || buf[13] != 0xb5 || buf[14] != 9 {
			continue
		}
		cms, err := unix.ParseSocketControlMessage(oob[:oobn])
		require.NoError(t, err)
		for _, cm := range cms {
			if cm.Header.Level == unix.SOL_PACKET && cm.Header.Type == unix.PACKET_AUXDATA && len(cm.Data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
				aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&cm.Data[0]))
				require.NotEqual(t, uint32(0), aux.Status&unix.TP_STATUS_VLAN_VALID, "frame arrived with auxdata %+v, want VLAN 42", *aux)
				require.Equal(t, uint16(42), aux.Vlan_tci&0xfff, "frame arrived with auxdata %+v, want VLAN 42", *aux)
				return
			}
		}
		t.Fatal("frame arrived untagged")
	}
	t.Fatal("tagged frame did not arrive")
}

// TestUplinkTakesFramesBeyondASlot: frames too large for a ring slot (jumbo frames on a
// 9000-byte MTU) come through the socket's queue whole, interleaved with small ones in the
// order they were sent, byte for byte; a VLAN tag the kernel took off a large frame is put back.
func TestUplinkTakesFramesBeyondASlot(t *testing.T) {
	ns := testNS(t)
	for _, dev := range []string{"a0", "a1", "b0", "b1"} {
		run(t, "ip", "-n", ns, "link", "set", dev, "mtu", "9000")
	}
	seg := datapath.NewSegment("t")
	var ups []*Uplink
	for _, dev := range []string{"a0", "b0"} {
		u, err := Start(context.Background(), Config{Dev: dev, NetNS: ns, Segment: seg, Logger: quiet(), Attach: AttachPacket})
		require.NoError(t, err)
		defer u.Close()
		eventually(t, dev+" up at MTU 9000", func() bool { return u.Status().State == Up && u.Status().MTU == 9000 })
		ups = append(ups, u)
	}
	a1, b1 := rawSocket(t, ns, "a1"), rawSocket(t, ns, "b1")
	require.NoError(t, unix.SetsockoptInt(b1, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1))
	type sent struct {
		frame []byte
		vlan  bool
	}
	var want []sent
	for i, size := range []int{100, 1900, 2100, 8986, 60, 5000, 1400, 8986, 3000, 100} {
		f := testFrame(byte(20+i), size)
		for j := 15; j < len(f); j++ {
			f[j] = byte(j*7 + i)
		}
		s := sent{frame: f}
		if i%3 == 2 {
			s.vlan = true
			f = append(append(append([]byte(nil), f[:12]...), 0x81, 0x00, 0x00, 0x2a), f[12:]...) // VLAN 42
		}
		send(t, a1, f)
		want = append(want, s)
	}
	buf, oob := make([]byte, 16<<10), make([]byte, 256)
	deadline := time.Now().Add(2 * time.Second)
	for len(want) > 0 && time.Now().Before(deadline) {
		n, oobn, _, _, err := unix.Recvmsg(b1, buf, oob, 0)
		if err != nil || n < 15 || buf[12] != 0x88 || buf[13] != 0xb5 {
			continue
		}
		w := want[0]
		want = want[1:]
		require.Equal(t, w.frame[14], buf[14], "frame %d: got tag %d, %d bytes; want tag %d, %d bytes, the same bytes", w.frame[14]-20, buf[14], n, w.frame[14], len(w.frame))
		require.Equal(t, string(w.frame), string(buf[:n]), "frame %d: got tag %d, %d bytes; want tag %d, %d bytes, the same bytes", w.frame[14]-20, buf[14], n, w.frame[14], len(w.frame))
		tagged := false
		cms, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, cm := range cms {
			if cm.Header.Level == unix.SOL_PACKET && cm.Header.Type == unix.PACKET_AUXDATA && len(cm.Data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
				aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&cm.Data[0]))
				tagged = aux.Status&unix.TP_STATUS_VLAN_VALID != 0 && aux.Vlan_tci&0xfff == 42
			}
		}
		require.Equal(t, w.vlan, tagged, "frame %d (%d bytes): tagged", w.frame[14]-20, n)
	}
	if len(want) > 0 {
		t.Fatalf("%d frames did not arrive, the first tag %d", len(want), want[0].frame[14])
	}
	// At least: the namespace's own stack may send a1 a frame of its own (IPv6 neighbour
	// discovery) besides the test's.
	st := ups[0].Stats()
	require.Equal(t, uint64(0), st.RxTruncated, "a0 stats %+v, want 10 frames received at least, none truncated or oversize", st)
	require.Equal(t, uint64(0), st.RxOversize, "a0 stats %+v, want 10 frames received at least, none truncated or oversize", st)
	require.GreaterOrEqual(t, st.RxFrames, uint64(10), "a0 stats %+v, want 10 frames received at least, none truncated or oversize", st)
}

// TestPacketSocketDrainsABacklog: frames waiting in the ring when the RX loop starts (more than
// several passes' budget, and nothing after them to wake the poller again) all reach it.
func TestPacketSocketDrainsABacklog(t *testing.T) {
	ns := testNS(t)
	h, err := netns.GetFromName(ns)
	require.NoError(t, err)
	defer h.Close()
	var ifindex int
	require.NoError(t, nsrun.InHandle(h, func() (err error) { ifindex, err = netIndex("a0"); return err }))
	s, err := openPacket(h, ifindex)
	require.NoError(t, err)
	a1 := rawSocket(t, ns, "a1")
	const backlog = 5*frameBudget + 3
	for i := range backlog {
		f := testFrame(byte(i), 100)
		f[15] = byte(i >> 8)
		send(t, a1, f)
	}
	got := make(chan int, backlog+16)
	done := make(chan error, 1)
	go func() {
		done <- s.receive(func(frame []byte, _ int, _ uint32, _ uint32, _ uint16, _ vnetHdr) {
			if len(frame) > 15 && frame[12] == 0x88 && frame[13] == 0xb5 {
				got <- int(frame[15])<<8 | int(frame[14])
			}
		}, func() {})
	}()
	defer func() {
		s.close()
		assert.NoError(t, <-done)
		s.release()
	}()
	timeout := time.After(2 * time.Second)
	for want := range backlog {
		select {
		case i := <-got:
			require.Equal(t, want, i, "frame %d arrived where %d was due", i, want)
		case <-timeout:
			t.Fatalf("%d of %d waiting frames reached the RX loop", want, backlog)
		}
	}
}
