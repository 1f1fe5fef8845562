package datapath

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/internal/rrclient"
	binharness "github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/require"
)

// rrEnv puts the test binary in round-trip mode (TestMain): "client,KIND,SRC,DST" (KIND udp or
// icmp) or "echo,ADDR" (a UDP echo server).
const rrEnv = "MANAD_TEST_RR"

// rrPort is the UDP echo server's port.
const rrPort = 7777

// rrPathsFlag limits BenchmarkRoundTrip and BenchmarkRoundTripBinary to some of their paths (a
// comma-separated list of veth, relay, relay-poll (the binary's only), manad-off, manad-on; all
// by default), to look at one with perf.
var rrPathsFlag = flag.String("rr.paths", "", "BenchmarkRoundTrip(Binary): the paths to measure, comma-separated (default all)")

// rrPollConfig is the NAPI setting of the "polling on" ports: defer-hard-irqs 100 ×
// gro-flush-timeout 20 µs, a 2 ms window (what a user sets for busy polling: the kernel's
// documentation suggests gro-flush-timeout in the tens of microseconds).
var rrPollConfig = vnic.NAPIConfig{DeferHardIRQs: 100, GROFlushTimeout: 20 * time.Microsecond}

// runRR is the round-trip helper process; it never returns.
func runRR(spec string) {
	parts := strings.Split(spec, ",")
	var err error
	switch {
	case len(parts) == 4 && parts[0] == "client":
		err = rrClient(parts[1], net.ParseIP(parts[2]).To4(), net.ParseIP(parts[3]).To4())
	case len(parts) == 2 && parts[0] == "echo":
		err = rrEcho(net.ParseIP(parts[1]).To4())
	default:
		err = fmt.Errorf("bad spec %q", spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rr:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// rrEcho answers every UDP datagram to ADDR:rrPort with its payload, blocking in recvfrom as
// netperf's server does.
func rrEcho(addr net.IP) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	sa := &unix.SockaddrInet4{Port: rrPort}
	copy(sa.Addr[:], addr)
	if err := unix.Bind(fd, sa); err != nil {
		return err
	}
	fmt.Println("ready")
	buf := make([]byte, 2048)
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		_ = unix.Sendto(fd, buf[:n], 0, from)
	}
}

// rrClient is the client helper process: rrclient.Serve on its stdin and stdout, in the
// namespace ip netns exec started it in.
func rrClient(kind string, src, dst net.IP) error {
	return rrclient.Serve("", kind, src, dst, rrPort, os.Stdin, os.Stdout)
}

// rrHelper is a running round-trip helper process.
type rrHelper struct {
	rrclient.Client
	cmd *exec.Cmd
	in  io.WriteCloser
}

func startRR(b testing.TB, ns, spec string) *rrHelper {
	b.Helper()
	exe, err := os.Executable()
	require.NoError(b, err)
	cmd := exec.Command("ip", "netns", "exec", ns, exe)
	cmd.Env = append(os.Environ(), rrEnv+"="+spec)
	cmd.Stderr = os.Stderr
	h := &rrHelper{cmd: cmd}
	if h.in, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	h.Client = rrclient.Client{In: h.in, Out: bufio.NewReaderSize(out, 1<<20)}
	require.NoError(b, cmd.Start(), "start %s", spec)
	b.Cleanup(func() {
		h.in.Close()
		if strings.HasPrefix(spec, "echo,") {
			cmd.Process.Kill()
		}
		cmd.Wait()
	})
	return h
}

// rrPath is one way between two namespaces, with its clients and what they measured.
type rrPath struct {
	name    string
	pid     int                        // the forwarder's process (manad's, the relay's); 0: this process
	stopped bool                       // pid is stopped outside the path's turns (taprelay -poll's)
	clients map[string]*rrHelper       // by kind
	lat     map[string][]time.Duration // by kind, over every round
	cpu     map[string]time.Duration   // this process's CPU time during the kind's round trips
	sw      map[string]uint64          // the forwarder's threads' context switches meanwhile
	sleeps  map[string]uint64          // those of them that were a sleep (voluntary)
	n       map[string]int
}

func newRRPath(b testing.TB, name, srcNS, dstNS string, src, dst net.IP) *rrPath {
	echo := startRR(b, dstNS, "echo,"+dst.String())
	if line, err := echo.Out.ReadString('\n'); err != nil || line != "ready\n" {
		b.Fatalf("%s: echo server did not start: %q %v", name, line, err)
	}
	p := &rrPath{name: name, clients: map[string]*rrHelper{}, lat: map[string][]time.Duration{},
		cpu: map[string]time.Duration{}, sw: map[string]uint64{}, sleeps: map[string]uint64{}, n: map[string]int{}}
	for _, k := range rrKinds {
		p.clients[k] = startRR(b, srcNS, fmt.Sprintf("client,%s,%s,%s", k, src, dst))
		if _, err := p.clients[k].RoundTrips(50); err != nil { // ARP, the segment's table, warm caches
			b.Fatalf("%s %s: %v", name, k, err)
		}
	}
	return p
}

var rrKinds = []string{"icmp", "udp"}

// measure makes n round trips of kind and records them with the CPU time the forwarder (p.pid,
// or this process: manad's data path or the relay; nothing for veth) spent meanwhile.
//
// It also counts the context switches of the forwarder's threads meanwhile (every time one
// slept, or was preempted or yielded), and the sleeps among them: a thread woken for a frame, the
// runtime's poller thread or a goroutine's, sleeps again once per wake-up, so the sleeps are the
// forwarder's wake-ups; the rest is the CPU it lost to other tasks (a poller's sched_yield).
func (p *rrPath) measure(b testing.TB, kind string, n int) {
	if p.stopped {
		// SIGSTOP between turns: a process that busy-polls without a window (taprelay -poll)
		// would otherwise take a CPU from every other path's turn.
		require.NoError(b, unix.Kill(p.pid, unix.SIGCONT), "%s: resume the forwarder", p.name)
		defer func() { require.NoError(b, unix.Kill(p.pid, unix.SIGSTOP), "%s: stop the forwarder", p.name) }()
	}
	sw0, sl0 := threadSwitches(b, p.pid)
	cpu0 := processCPU(b, p.pid)
	lat, err := p.clients[kind].RoundTrips(n)
	sw1, sl1 := threadSwitches(b, p.pid)
	cpu1 := processCPU(b, p.pid)
	require.NoError(b, err, "%s %s", p.name, kind)
	p.lat[kind] = append(p.lat[kind], lat...)
	p.cpu[kind] += cpu1 - cpu0
	if sw1 > sw0 && sl1 >= sl0 {
		p.sw[kind] += sw1 - sw0
		p.sleeps[kind] += sl1 - sl0
	}
	p.n[kind] += n
}

// processCPU is the user and system CPU time process pid (0: this one, to the nanosecond) has
// used; another process's is read from /proc/PID/stat, in clock ticks (USER_HZ, 100 a second
// here): coarse for one chunk of round trips, but it counts every thread, ended ones too, and
// its rounding errors average out over the chunks.
func processCPU(b testing.TB, pid int) time.Duration {
	if pid == 0 {
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	// The fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	require.Greater(b, len(f), 12, "/proc/%d/stat: %q", pid, st)
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	stt, err2 := strconv.ParseInt(f[12], 10, 64)
	require.NoError(b, errors.Join(err1, err2), "/proc/%d/stat: %q", pid, st)
	return time.Duration(ut+stt) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux architecture
// Go supports (sysconf(_SC_CLK_TCK) has returned it since 2.6).
const clockTicks = 100

// threadSwitches sums the context switches of process pid's threads (0: this process's;
// /proc/PID/task/*/status: a thread that ended meanwhile takes its count with it, and Go's
// threads rarely end), and the voluntary ones among them (sleeps).
func threadSwitches(b testing.TB, pid int) (all, sleeps uint64) {
	dir := "/proc/self/task/"
	if pid != 0 {
		dir = fmt.Sprintf("/proc/%d/task/", pid)
	}
	tasks, err := os.ReadDir(dir)
	require.NoError(b, err)
	for _, t := range tasks {
		st, err := os.ReadFile(dir + t.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		for _, line := range strings.Split(string(st), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				all += n
				if k == "voluntary_ctxt_switches" {
					sleeps += n
				}
			}
		}
	}
	return all, sleeps
}

// pct returns the q-quantile of v (sorted in place).
func pct(v []time.Duration, q float64) time.Duration {
	slices.Sort(v)
	return v[min(len(v)-1, int(q*float64(len(v))))]
}

// BenchmarkRoundTrip measures request-response latency between two namespaces (issue 29): ping
// (an ICMP echo of 64 bytes, which the destination's kernel answers) and UDP RR 64 B (an echo
// server blocking in recvfrom, as netperf's), each client a process of its own making one round
// trip after the other, through four paths built side by side: a veth pair (the kernel's own;
// its ping reply is made inside the sender's sendmsg, so it never sleeps), a TAP relay (the
// minimal user-space forwarder, as bench/taprelay), and two manad ports on one segment with
// polling off and on (both queues' NAPI settings rrPollConfig; Pollers' default bound). Each
// iteration makes rrChunk round trips of each kind along every path, the order rotating; p50 and
// p99 are over every round trip of the run, and each path's CPU (this process's: the forwarder's,
// 0 for veth) is reported in seconds per million round trips.
func BenchmarkRoundTrip(b *testing.B) {
	offH, onH := newHarness(b), newHarness(b)
	offA, offB := offH.addPort(portOpts{queues: 1, noIPv6: true}), offH.addPort(portOpts{queues: 1, noIPv6: true})
	onA, onB := onH.addPort(portOpts{queues: 1, noIPv6: true}), onH.addPort(portOpts{queues: 1, noIPv6: true})
	for _, tp := range []*testPort{onA, onB} {
		require.NoError(b, tp.port.SetNAPIConfig(0, rrPollConfig))
	}

	// TAP relay
	ra, rb := taptest.NetNS(b), taptest.NetNS(b)
	disableIPv6(b, ra)
	disableIPv6(b, rb)
	relayA, relayB := net.IPv4(10, 79, 0, 1).To4(), net.IPv4(10, 79, 0, 2).To4()
	var taps []*tap.Device
	for i, l := range []struct {
		ns string
		ip net.IP
	}{{ra, relayA}, {rb, relayB}} {
		d, err := tap.Open(tap.Config{Name: "eth0", MAC: relayMAC(i + 1), MTU: 1500, Queues: 1, NetNS: l.ns, Logger: offH.log})
		require.NoError(b, err)
		b.Cleanup(func() { d.Close() })
		taps = append(taps, d)
		taptest.IP(b, l.ns, "addr", "add", l.ip.String()+"/24", "dev", "eth0")
		taptest.IP(b, l.ns, "link", "set", "eth0", "up")
	}
	rel := startRelay(b, taps[0], taps[1])
	b.Cleanup(rel.stop)

	paths := []*rrPath{
		vethRRPath(b),
		newRRPath(b, "relay", ra, rb, relayA, relayB),
		newRRPath(b, "manad-off", offA.ns, offB.ns, offA.ip, offB.ip),
		newRRPath(b, "manad-on", onA.ns, onB.ns, onA.ip, onB.ip),
	}
	measureRR(b, paths)
	var ps PollStats
	for _, s := range onA.ep.PollStats() {
		ps.Polls, ps.Hits, ps.CPUTime = ps.Polls+s.Polls, ps.Hits+s.Hits, ps.CPUTime+s.CPUTime
	}
	for _, s := range onB.ep.PollStats() {
		ps.Polls, ps.Hits, ps.CPUTime = ps.Polls+s.Polls, ps.Hits+s.Hits, ps.CPUTime+s.CPUTime
	}
	b.Logf("polling on: %d polls, %d hits, %v CPU polling; %d round trips per path and kind", ps.Polls, ps.Hits, ps.CPUTime, paths[0].n["udp"])
}

// measureRR measures paths (veth first: the ratios are to it), rrChunk round trips of each kind along
// each path per iteration, the order rotating, and reports p50 and p99 (over every round trip of
// the run), their ratios to veth's, the forwarder's CPU seconds per million round trips and its
// threads' context switches per round trip; and, when relay-poll (rrFloorPath) is among them,
// each polling path's ("…-on") p50 and p99 over relay-poll's (NAME-KIND-p50-vs-relay-poll).
func measureRR(b *testing.B, paths []*rrPath) {
	if *rrPathsFlag != "" {
		want := strings.Split(*rrPathsFlag, ",")
		paths = slices.DeleteFunc(paths, func(p *rrPath) bool { return !slices.Contains(want, p.name) })
		require.NotEmpty(b, paths, "-rr.paths %q names no path", *rrPathsFlag)
	}
	const rrChunk = 1000
	r := 0
	for b.Loop() {
		for _, kind := range rrKinds {
			for i := range paths {
				paths[(i+r)%len(paths)].measure(b, kind, rrChunk)
			}
		}
		r++
	}
	b.StopTimer()
	p50 := map[string]float64{}
	for _, p := range paths {
		for _, kind := range rrKinds {
			lat := p.lat[kind]
			k := p.name + "-" + kind
			p50[k] = float64(pct(lat, 0.5))
			b.ReportMetric(p50[k], k+"-p50-ns")
			b.ReportMetric(float64(pct(lat, 0.99)), k+"-p99-ns")
			b.ReportMetric(float64(pct(lat, 0.01)), k+"-p1-ns") // the path's cost when nothing else is in its way
			// CPU seconds per million round trips: ns per round trip / 1000.
			b.ReportMetric(float64(p.cpu[kind])/float64(p.n[kind])/1e3, k+"-cpu-s/Mrt")
			b.ReportMetric(float64(p.sw[kind])/float64(p.n[kind]), k+"-switches/rt")
			b.ReportMetric(float64(p.sleeps[kind])/float64(p.n[kind]), k+"-sleeps/rt")
		}
	}
	for _, kind := range rrKinds {
		veth := paths[0]
		if veth.name != "veth" {
			break // no ratios without veth
		}
		for _, p := range paths[1:] {
			b.ReportMetric(p50[p.name+"-"+kind]/p50["veth-"+kind], p.name+"-"+kind+"-p50-ratio")
			b.ReportMetric(float64(pct(p.lat[kind], 0.99))/float64(pct(veth.lat[kind], 0.99)), p.name+"-"+kind+"-p99-ratio")
		}
	}
	// Polling on against the busy-poll floor (bench/taprelay -poll): what manad costs above the
	// least any busy-polling forwarder pays, in the same run.
	i := slices.IndexFunc(paths, func(p *rrPath) bool { return p.name == rrFloorPath })
	if i < 0 {
		return
	}
	floor := paths[i]
	for _, p := range paths {
		if !strings.HasSuffix(p.name, "-on") {
			continue
		}
		for _, kind := range rrKinds {
			for _, q := range []struct {
				name string
				q    float64
			}{{"p50", 0.5}, {"p99", 0.99}} {
				b.ReportMetric(float64(pct(p.lat[kind], q.q))/float64(pct(floor.lat[kind], q.q)),
					p.name+"-"+kind+"-"+q.name+"-vs-"+rrFloorPath)
			}
		}
	}
}

// rrFloorPath is the path of bench/taprelay -poll, the busy-poll floor that the polling paths
// ("…-on") are compared with.
const rrFloorPath = "relay-poll"

// vethRRPath is the kernel's own path between two namespaces: a veth pair (10.78.0.1 and .2).
func vethRRPath(b *testing.B) *rrPath {
	va, vb := taptest.NetNS(b), taptest.NetNS(b)
	disableIPv6(b, va)
	disableIPv6(b, vb)
	taptest.IP(b, "", "link", "add", "rrva", "netns", va, "type", "veth", "peer", "name", "rrvb", "netns", vb)
	vethA, vethB := net.IPv4(10, 78, 0, 1).To4(), net.IPv4(10, 78, 0, 2).To4()
	for _, l := range []struct {
		ns, dev string
		ip      net.IP
	}{{va, "rrva", vethA}, {vb, "rrvb", vethB}} {
		taptest.IP(b, l.ns, "addr", "add", l.ip.String()+"/24", "dev", l.dev)
		taptest.IP(b, l.ns, "link", "set", l.dev, "up")
	}
	return newRRPath(b, "veth", va, vb, vethA, vethB)
}

// BenchmarkRoundTripBinary is BenchmarkRoundTrip through the real daemon (issue 29): one manad
// process (the binary, built without the race detector) with two pairs of ports, each port in a
// namespace of its own, one queue each, a pair per segment: "manad-off" with its configuration's
// defaults, "manad-on" with the port keys napi_defer_hard_irqs = 100 and gro_flush_timeout =
// "20us" (rrPollConfig: every queue's NAPI polls for 2 ms after the last frame; max_pollers is the
// default, one on two CPUs). It compares them with a veth pair and with bench/taprelay twice, each
// its own process with two single-queue TAPs: "relay" (the minimal user-space forwarder, parked
// in its reads) and "relay-poll" (taprelay -poll: one thread busy-polling both TAPs with a
// non-blocking read per look and a write per frame, yielding after 20 µs idle as manad's poller
// does; a model of the floor of any busy-polling forwarder on this machine), all in the same run,
// interleaved as BenchmarkRoundTrip's are. Besides every path's p50 and p99 against veth's, it
// reports manad-on's p50 and p99 against relay-poll's (manad-on-KIND-p50-vs-relay-poll): what
// manad polling costs above that floor. The CPU figures are the forwarding process's (manad's,
// taprelay's; read from /proc, in clock ticks), the switches its threads'. With -rr.base, a
// second daemon from that binary (another commit's) runs the same two pairs beside it, as
// "base-off" and "base-on" (base-on also against relay-poll), so that old and new code are
// compared in one run, interleaved.
func BenchmarkRoundTripBinary(b *testing.B) {
	testenv.RequireRoot(b)
	manadBin, _ := binharness.PlainBinaries(b)
	relayBin := buildTapRelay(b)

	paths := []*rrPath{vethRRPath(b), taprelayRRPath(b, relayBin, false), taprelayRRPath(b, relayBin, true)}
	paths = append(paths, manadRRPaths(b, manadBin, "manad", "rr", 80)...)
	if *rrBaseFlag != "" {
		paths = append(paths, manadRRPaths(b, *rrBaseFlag, "base", "rb", 82)...)
	}
	measureRR(b, paths)
}

// rrBaseFlag names a second manad binary (another commit's, built with go build ./cmd/manad) that
// BenchmarkRoundTripBinary measures beside the tree's, as "base-off" and "base-on": old and new
// code in the same run, interleaved.
var rrBaseFlag = flag.String("rr.base", "", "BenchmarkRoundTripBinary: another manad binary to measure beside this tree's (paths base-off, base-on)")

// manadRRPaths starts manad binary bin with two pairs of ports, each port in a namespace of its
// own (named prefix0..3, addresses 10.net.0.1..4), one queue each, a pair per segment: NAME-off
// with the configuration's defaults, NAME-on with the port keys napi_defer_hard_irqs and
// gro_flush_timeout of rrPollConfig; it returns the two paths, their CPU read from the daemon.
func manadRRPaths(b *testing.B, bin, name, prefix string, net4 byte) []*rrPath {
	var nss [4]string
	for i := range nss {
		nss[i] = taptest.NetNS(b)
		disableIPv6(b, nss[i])
	}
	var ports strings.Builder
	for i, ns := range nss {
		seg, extra := prefix+"off", ""
		if i >= 2 {
			seg = prefix + "on"
			extra = fmt.Sprintf("napi_defer_hard_irqs = %d\ngro_flush_timeout = %q\n",
				rrPollConfig.DeferHardIRQs, rrPollConfig.GROFlushTimeout.String())
		}
		fmt.Fprintf(&ports, "[[port]]\nname = \"%s%d\"\nnetns = %q\nsegment = %q\nqueues = 1\npersistent = false\n%s\n", prefix, i, ns, seg, extra)
	}
	d := binharness.StartBinary(b, bin, "", "", ports.String())
	pid := daemonPID(b, d.Config)
	ips := make([]net.IP, 4)
	for i, ns := range nss {
		ips[i] = net.IPv4(10, net4, 0, byte(i+1)).To4()
		taptest.IP(b, ns, "addr", "add", ips[i].String()+"/24", "dev", fmt.Sprint(prefix, i))
		taptest.IP(b, ns, "link", "set", fmt.Sprint(prefix, i), "up")
	}
	off := newRRPath(b, name+"-off", nss[0], nss[1], ips[0], ips[1])
	on := newRRPath(b, name+"-on", nss[2], nss[3], ips[2], ips[3])
	off.pid, on.pid = pid, pid
	return []*rrPath{off, on}
}

// daemonPID finds the manad process started with configuration file cfg.
func daemonPID(b *testing.B, cfg string) int {
	procs, err := os.ReadDir("/proc")
	require.NoError(b, err)
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), cfg) {
			return pid
		}
	}
	b.Fatalf("no manad process runs with --config %s", cfg)
	return 0
}

// buildTapRelay builds bench/taprelay into the benchmark's temporary directory.
func buildTapRelay(b *testing.B) string {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // daemon/datapath/ → the module
	bin := filepath.Join(b.TempDir(), "taprelay")
	cmd := exec.Command("go", "build", "-o", bin, "./bench/taprelay")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "go build ./bench/taprelay: %s", out)
	return bin
}

// taprelayRRPath is bench/taprelay between two namespaces: "relay" (10.81.0.1 and .2) or, with
// poll, "relay-poll", taprelay -poll (10.83.0.1 and .2); two single-queue TAPs made in a
// namespace of the relay's own, attached by the relay there, then moved into the client's and
// the server's namespaces, as bench/udppps does.
func taprelayRRPath(b *testing.B, bin string, poll bool) *rrPath {
	name, tapA, tapB, net4 := "relay", "rrta", "rrtb", byte(81)
	args := []string{"netns", "exec", "", bin}
	if poll {
		name, tapA, tapB, net4 = rrFloorPath, "rrpa", "rrpb", 83
		args = append(args, "-poll")
	}
	rns, ra, rb := taptest.NetNS(b), taptest.NetNS(b), taptest.NetNS(b)
	args[2] = rns
	disableIPv6(b, ra)
	disableIPv6(b, rb)
	for _, t := range []string{tapA, tapB} {
		taptest.IP(b, rns, "tuntap", "add", "mode", "tap", "name", t)
	}
	cmd := exec.Command("ip", append(args, tapA, tapB)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start(), "start taprelay")
	b.Cleanup(func() {
		cmd.Process.Signal(unix.SIGTERM)
		cmd.Process.Signal(unix.SIGCONT) // a stopped relay (-poll, between its turns) takes SIGTERM only now
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(b, err, "taprelay did not start")
	require.Equal(b, "ready\n", line)
	relayA, relayB := net.IPv4(10, net4, 0, 1).To4(), net.IPv4(10, net4, 0, 2).To4()
	for _, l := range []struct {
		ns, dev string
		ip      net.IP
	}{{ra, tapA, relayA}, {rb, tapB, relayB}} {
		taptest.IP(b, rns, "link", "set", l.dev, "netns", l.ns)
		taptest.IP(b, l.ns, "addr", "add", l.ip.String()+"/24", "dev", l.dev)
		taptest.IP(b, l.ns, "link", "set", l.dev, "up")
	}
	p := newRRPath(b, name, ra, rb, relayA, relayB)
	// ip netns exec runs the relay in its place (exec), so the command's process is the relay.
	p.pid = cmd.Process.Pid
	if poll {
		// It spins whether frames come or not (no polling window, unlike manad's NAPI
		// setting): it runs only in its turns.
		require.NoError(b, unix.Kill(p.pid, unix.SIGSTOP), "stop taprelay -poll")
		p.stopped = true
	}
	return p
}
