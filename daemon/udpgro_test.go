package daemon

import (
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/tests/testenv"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/require"
)

// TestUDPGROFollowsTAPFeatures runs a sender A, a router R (ip_forward on, two ports) and a
// receiver B, every link a manad port, and sends bursts of small UDP datagrams (one sendmmsg
// each, so that manad finds many in one read) from A through R to a socket on B, checking each
// time that B's socket, without UDP_GRO, gets every datagram whole and in order:
//
//   - with the kernel features of every TAP as they come (rx-udp-gro-forwarding and rx-gro-list
//     off), no port coalesces UDP: R forwards every datagram on its own (Ip ForwDatagrams) and B
//     receives plain datagrams;
//   - `ethtool -K` rx-udp-gro-forwarding on B's TAP turns B's UDP coalescing on (its rx coalesced
//     counter moves) while R still forwards datagram by datagram;
//   - on R's ingress TAP, R forwards superframes, fewer than the datagrams, as Linux does behind
//     a NIC with that feature, and B still receives every datagram;
//   - off again, at runtime, nothing more is coalesced.
func TestUDPGROFollowsTAPFeatures(t *testing.T) {
	taptest.Require(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "needs ethtool: %v", err)
	}
	nsA, nsR, nsB := taptest.NetNS(t), taptest.NetNS(t), taptest.NetNS(t)
	a0, r1, r2, b0 := taptest.Name("ga"), taptest.Name("gr"), taptest.Name("gr"), taptest.Name("gb")
	seg1, seg2 := taptest.Name("sg"), taptest.Name("sg")
	dir := t.TempDir()
	doc := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n", filepath.Join(dir, "manad.sock"), filepath.Join(dir, "state"))
	for _, p := range []struct{ name, ns, seg string }{{a0, nsA, seg1}, {r1, nsR, seg1}, {r2, nsR, seg2}, {b0, nsB, seg2}} {
		doc += fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = %q\nqueues = 1\nmax_queues = 1\npersistent = false\n",
			p.name, p.ns, p.seg)
	}
	d := runTest(t, doc, Options{})
	for _, x := range []struct{ ns, dev, ip string }{
		{nsA, a0, "10.78.1.1"}, {nsR, r1, "10.78.1.254"}, {nsR, r2, "10.78.2.254"}, {nsB, b0, "10.78.2.1"},
	} {
		taptest.IP(t, x.ns, "addr", "add", x.ip+"/24", "dev", x.dev)
		taptest.IP(t, x.ns, "link", "set", x.dev, "up")
	}
	taptest.IP(t, nsA, "route", "add", "10.78.2.0/24", "via", "10.78.1.254")
	taptest.IP(t, nsB, "route", "add", "10.78.1.0/24", "via", "10.78.2.254")
	nsRun := func(ns string, args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
		require.NoError(t, err, "%v in %s: %v: %s", args, ns, err, out)
		return string(out)
	}
	nsRun(nsR, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err := exec.Command("ip", "netns", "exec", nsA, "ping", "-c", "1", "-W", "1", "10.78.2.1").Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no ping from A through R to B")
		}
	}
	ep := func(name string) interface {
		UDPGRO() bool
		Stats() []datapath.QueueStats
	} {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.ports[name].ep
	}
	rxCoalesced := slices.Index(vnic.CounterNames(datapath.Counters, 0), vnic.ManadStatPrefix+"rx_coalesced")
	require.GreaterOrEqual(t, rxCoalesced, 0, "no rx_coalesced in datapath.Counters")
	coalesced := func(name string) uint64 { return vnic.CounterValues(datapath.Counters, ep(name).Stats())[rxCoalesced] }
	forwarded := func() uint64 {
		t.Helper()
		var names []string
		for _, l := range strings.Split(nsRun(nsR, "cat", "/proc/net/snmp"), "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || f[0] != "Ip:" {
				continue
			}
			if names == nil {
				names = f
				continue
			}
			for i, n := range names {
				if n == "ForwDatagrams" {
					v, _ := strconv.ParseUint(f[i], 10, 64)
					return v
				}
			}
		}
		t.Fatal("no Ip ForwDatagrams in R's /proc/net/snmp")
		return 0
	}
	setFeature := func(ns, dev string, on bool) {
		t.Helper()
		nsRun(ns, "ethtool", "-K", dev, "rx-udp-gro-forwarding", map[bool]string{false: "off", true: "on"}[on])
		for deadline := time.Now().Add(10 * time.Second); ep(dev).UDPGRO() != on; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: UDP GRO not %v 10 s after ethtool -K rx-udp-gro-forwarding", dev, on)
			}
		}
	}

	var rc *net.UDPConn
	var err error
	taptest.InNetNS(t, nsB, func() { rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 78, 2, 1)}) })
	require.NoError(t, err)
	defer rc.Close()
	rc.SetReadBuffer(4 << 20)
	var fd int
	taptest.InNetNS(t, nsA, func() { fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0) })
	require.NoError(t, err)
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Port: rc.LocalAddr().(*net.UDPAddr).Port, Addr: [4]byte{10, 78, 2, 1}}
	require.NoError(t, unix.Connect(fd, sa))
	const burst, size = 64, 64
	iovs := make([]unix.Iovec, burst)
	msgs := make([]unix.Mmsghdr, burst)
	payloads := make([][]byte, burst)
	for k := range payloads {
		payloads[k] = make([]byte, size)
	}
	next := uint32(0)
	buf := make([]byte, 65536)
	// round sends one burst and reads it at B: every datagram, whole, in order.
	round := func(what string) {
		t.Helper()
		for k, p := range payloads {
			binary.BigEndian.PutUint32(p, next+uint32(k))
			for i := 4; i < size; i++ {
				p[i] = byte(int(next) + k + i)
			}
			iovs[k].Base = &p[0]
			iovs[k].SetLen(size)
			msgs[k].Hdr.Iov = &iovs[k]
			msgs[k].Hdr.SetIovlen(1)
		}
		sent, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), burst, 0, 0, 0)
		if e != 0 || sent != burst {
			t.Fatalf("%s: sendmmsg: %d sent, %v", what, sent, e)
		}
		for k := range burst {
			rc.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := rc.Read(buf)
			require.NoError(t, err, "%s: received %d of %d datagrams", what, k, burst)
			got := binary.BigEndian.Uint32(buf)
			require.Equal(t, size, n, "%s: datagram %d: %d bytes, number %d", what, k, n, got)
			require.Equal(t, next+uint32(k), got, "%s: datagram %d: %d bytes, number %d", what, k, n, got)
			for i := 4; i < n; i++ {
				require.Equal(t, byte(int(next)+k+i), buf[i], "%s: datagram %d differs at byte %d", what, k, i)
			}
		}
		next += burst
	}
	// rounds runs n rounds (or, with until, as many as it takes, up to 50) and returns how many
	// datagrams R forwarded meanwhile.
	rounds := func(what string, n int, until func() bool) (datagrams, fwd uint64) {
		t.Helper()
		f0 := forwarded()
		for r := 0; r < n || until != nil && !until(); r++ {
			require.NotEqual(t, 50, r, "%s: not after 50 bursts", what)
			round(fmt.Sprintf("%s, burst %d", what, r))
			datagrams += burst
		}
		return datagrams, forwarded() - f0
	}

	for _, p := range []string{a0, r1, r2, b0} {
		require.False(t, ep(p).UDPGRO(), "%s: UDP GRO on with the TAP's features as they come", p)
	}
	if n, fwd := rounds("features off", 10, nil); fwd != n || coalesced(r1) != 0 || coalesced(b0) != 0 {
		t.Fatalf("features off: R forwarded %d packets for %d datagrams; coalesced: R %d, B %d", fwd, n, coalesced(r1), coalesced(b0))
	}

	setFeature(nsB, b0, true)
	if n, fwd := rounds("rx-udp-gro-forwarding on B", 0, func() bool { return coalesced(b0) > 0 }); fwd != n || coalesced(r1) != 0 {
		t.Fatalf("rx-udp-gro-forwarding on B: R forwarded %d packets for %d datagrams, coalesced %d", fwd, n, coalesced(r1))
	}

	setFeature(nsR, r1, true)
	if n, fwd := rounds("rx-udp-gro-forwarding on R", 0, func() bool { return coalesced(r1) > 0 }); fwd >= n {
		t.Fatalf("rx-udp-gro-forwarding on R: R forwarded %d packets for %d datagrams", fwd, n)
	}

	setFeature(nsB, b0, false)
	setFeature(nsR, r1, false)
	r, b := coalesced(r1), coalesced(b0)
	n, fwd := rounds("features off again", 10, nil)
	require.Equal(t, n, fwd, "features off again: R forwarded %d packets for %d datagrams; coalesced since: R %d, B %d", fwd, n, coalesced(r1)-r, coalesced(b0)-b)
	require.Equal(t, r, coalesced(r1), "features off again: R forwarded %d packets for %d datagrams; coalesced since: R %d, B %d", fwd, n, coalesced(r1)-r, coalesced(b0)-b)
	require.Equal(t, b, coalesced(b0), "features off again: R forwarded %d packets for %d datagrams; coalesced since: R %d, B %d", fwd, n, coalesced(r1)-r, coalesced(b0)-b)
	t.Logf("coalesced: R %d, B %d", r, b)
}
