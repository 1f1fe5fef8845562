package nlbridge

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/require"
)

// BenchmarkBridgeRoundTrip measures, in the same run and in alternation, a PRIVFLAGS_GET round
// trip for a manad port through the bridge (program → bridge → manad → bridge → program)
// against the kernel's CHANNELS_GET round trip for a veth on a plain kernel socket (the veth has
// no rings: its RINGS_GET is an EOPNOTSUPP, not a reply), and the same CHANNELS_GET through the
// bridge (the cost of the bridge on the kernel's path), and PRIVFLAGS_GET straight to manad's
// socket (the cost of the bridge on manad's path). It reports each path's median
// (p50-ns) and the ratios to the kernel's.
func BenchmarkBridgeRoundTrip(b *testing.B) {
	manad, _ := harness.PlainBinaries(b)
	w := &world{ns: harness.Name("nbb", ""), port: harness.Name("nbq", "0"), veth: harness.Name("nbu", "0")}
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\npersistent = false\n", w.port, w.ns)
	w.d = harness.StartBinary(b, manad, "", "", ports, w.ns)
	harness.Run(b, "", "ip", "-n", w.ns, "link", "add", w.veth, "type", "veth", "peer", "name", harness.Name("nbt", "0"))

	s, err := Open(context.Background(), Options{ManadPath: w.d.Socket, InNetNS: w.inNS})
	require.NoError(b, err)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(b, err)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(context.Background(), os.NewFile(uintptr(fds[0]), "peer")) }()
	// The program's end on the runtime's poller: a blocking read would hold one of the
	// benchmark process's processors while the bridge, in the same process, needs them (a real
	// program is another process).
	pf := os.NewFile(uintptr(fds[1]), "program")
	pc, err := net.FileConn(pf)
	pf.Close()
	require.NoError(b, err)
	defer func() { pc.Close(); <-errc }()
	var k *ksock
	require.NoError(b, w.inNS(func() (err error) { k, err = openKernel(); return err }))
	defer k.Close()

	var mc *net.UnixConn
	require.NoError(b, w.inNS(func() (err error) {
		mc, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: w.d.Socket, Net: "unixpacket"})
		return err
	}))
	defer mc.Close()
	hdr := func(name string) func(*nlattr.Builder) { return devHeader(0, name) }
	priv := buildReq(s.kEthtool, 0, 1, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, hdr(w.port))
	chans := buildReq(s.kEthtool, 0, 2, 0, unix.ETHTOOL_MSG_CHANNELS_GET, 1, hdr(w.veth))
	buf := make([]byte, 1<<16)
	viaBridge := func(m []byte) time.Duration {
		t0 := time.Now()
		if _, err := pc.Write(m); err != nil {
			b.Fatal(err)
		}
		n, err := pc.Read(buf)
		if err != nil || n < nlattr.MsgHdrLen || msgType(buf) != s.kEthtool {
			b.Fatalf("bridge answer: %v, %d bytes", err, n)
		}
		return time.Since(t0)
	}
	direct := func(m []byte) time.Duration {
		t0 := time.Now()
		if err := k.send(m); err != nil {
			b.Fatal(err)
		}
		d, _, err := k.recv()
		if err != nil || len(d) < nlattr.MsgHdrLen || msgType(d) != s.kEthtool {
			b.Fatalf("kernel answer: %v", err)
		}
		return time.Since(t0)
	}
	mpriv := buildReq(s.mEthtool, 0, 3, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, hdr(w.port))
	toManad := func(m []byte) time.Duration {
		t0 := time.Now()
		if _, err := mc.Write(m); err != nil {
			b.Fatal(err)
		}
		n, err := mc.Read(buf)
		if err != nil || n < nlattr.MsgHdrLen || msgType(buf) != s.mEthtool {
			b.Fatalf("manad answer: %v", err)
		}
		return time.Since(t0)
	}
	var bp, kc, bc, mp []time.Duration
	for range 100 { // warm up: caches, the first lookups, the runtime's threads
		viaBridge(priv)
		direct(chans)
	}
	b.ResetTimer()
	for range b.N {
		bp = append(bp, viaBridge(priv))
		kc = append(kc, direct(chans))
		bc = append(bc, viaBridge(chans))
		mp = append(mp, toManad(mpriv))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	mb, mk, mcb, mm := p50(bp), p50(kc), p50(bc), p50(mp)
	p90 := func(d []time.Duration) float64 { return float64(d[len(d)*9/10].Nanoseconds()) } // sorted by p50
	b.ReportMetric(p90(bp), "bridge-privflags-p90-ns")
	b.ReportMetric(p90(mp), "manad-privflags-p90-ns")
	b.ReportMetric(p90(kc), "kernel-channels-p90-ns")
	b.ReportMetric(mb, "bridge-privflags-p50-ns")
	b.ReportMetric(mk, "kernel-channels-p50-ns")
	b.ReportMetric(mcb, "bridge-channels-p50-ns")
	b.ReportMetric(mm, "manad-privflags-p50-ns")
	b.ReportMetric(mb/mk, "privflags-vs-kernel-x")
	b.ReportMetric(mcb/mk, "kernel-path-via-bridge-x")
	b.ReportMetric(mb/mm, "bridge-vs-manad-direct-x")
}

// BenchmarkOpen measures what a program's socket(2) costs under the bridge (Open: the kernel's
// and manad's family lists, manad's options and group, its ports; then Close), against a plain
// NETLINK_GENERIC socket's creation and one GETFAMILY round trip (what a program does first),
// in alternation in the same run.
func BenchmarkOpen(b *testing.B) {
	manad, _ := harness.PlainBinaries(b)
	w := &world{ns: harness.Name("nbo", ""), port: harness.Name("nbo", "0")}
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\npersistent = false\n", w.port, w.ns)
	w.d = harness.StartBinary(b, manad, "", "", ports, w.ns)
	getFamily := buildReq(unix.GENL_ID_CTRL, 0, 1, 0, unix.CTRL_CMD_GETFAMILY, 1, func(b *nlattr.Builder) {
		b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "ethtool")
	})
	var bo, ko []time.Duration
	for range b.N {
		t0 := time.Now()
		s, err := Open(context.Background(), Options{ManadPath: w.d.Socket, InNetNS: w.inNS})
		require.NoError(b, err)
		s.Close()
		bo = append(bo, time.Since(t0))
		t0 = time.Now()
		require.NoError(b, w.inNS(func() error {
			k, err := openKernel()
			if err != nil {
				return err
			}
			defer k.Close()
			if err := k.send(getFamily); err != nil {
				return err
			}
			_, _, err = k.recv()
			return err
		}))
		ko = append(ko, time.Since(t0))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	b.ReportMetric(p50(bo), "open-p50-ns")
	b.ReportMetric(p50(ko), "kernel-socket-getfamily-p50-ns")
}
