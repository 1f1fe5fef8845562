// Command fabric measures, in one run, traffic between two simulated hosts joined by a VXLAN
// overlay (issue 12): from a port on host A through its uplink, VXLAN, host B's uplink to a port
// on host B — with manad's ports and segments (two manad processes, one per host), once with the
// uplinks on AF_PACKET and once on AF_XDP, and with the kernel alone (veths into a Linux bridge
// that holds the VXLAN device). It prints UDP packets per second (64 and 1400 bytes) and TCP
// throughput for each, and the ratio manad / kernel against issue 12's target (≥ 0.5×); and UDP
// request/response transactions per second, one in flight (netperf's UDP_RR: the inverse of the
// round-trip time), for which the issue sets no target. No figure is a pass/fail threshold.
//
// The UDP RR test also runs over two more manad paths that poll, on AF_PACKET and on AF_XDP
// (issue 29): their uplinks busy-poll (busy_poll = --busy-poll) and their ports' NAPIs poll
// their TAP queues (napi_defer_hard_irqs × gro_flush_timeout = --port-defer-hard-irqs ×
// --port-gro-flush-timeout, 100 × 20 µs by default; either flag 0 leaves that side parked),
// against issue 29's target for the fabric RR row (≥ 0.6× the kernel-only path), and reports for every path the CPU time one million
// transactions cost: the manad processes' (utime+stime from /proc/PID/stat, both hosts) and the
// sender's and receiver's (whose system calls carry the kernel-only path's work).
//
// A fourth path joins each host's TAP to vx0 with bench/taprelay -uplink: a plain relay, one
// read and one write per frame and direction over the TAP and AF_PACKET interfaces manad uses
// (virtio-net headers, GSO superframes passed whole), nothing else done. For a stream of
// superframes (TCP) that is the least the design costs (manad's RX ring saves system calls only
// for frames that fit its slots), so its rows say how much of the distance to the kernel-only
// path is the interfaces' and how much manad's own: its ratio to the kernel-only path, and
// manad's ratio to it.
//
// The UDP RR test also runs over "taprelay busy-poll", the same with bench/taprelay -poll -uplink
// (issue 29): a model of the floor of a busy-polling forwarder on these interfaces, one thread
// per host polling its TAP and its AF_PACKET socket with a non-blocking system call per look and
// one per frame, yielding its CPU after 20 µs without a frame as manad's poller does. Its rows:
// its ratio to the kernel-only path and its CPU per transaction, and manad busy-poll's ratio to
// it (how far manad's polling is above what any busy-polling forwarder pays here). It spins
// whether frames come or not, so its relays are stopped (SIGSTOP) outside its measurements: they
// would take the CPUs from every other path's.
//
// Each path has its own namespaces, set up once; the paths are measured in turns, round after
// round (the order rotating), and the median of the rounds is reported. Senders and receivers
// are separate processes (this binary re-executed inside a namespace).
//
// Needs root. Usage:
//
//	go run ./bench/fabric [--seconds 2] [--rounds 3] [--only TCP] [--busy-poll 200us] [--port-defer-hard-irqs 100]
//	    [--port-gro-flush-timeout 20us] [--smoke] [--json] [--manad BIN] [--relay BIN]
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/manad/manad/bench/internal/benchrow"
	"github.com/manad/manad/bench/internal/helperproc"
	"github.com/manad/manad/bench/internal/teardown"
)

// target is issue 12's: manad's path carries at least half the kernel-only path's rate;
// rrTarget issue 29's for the UDP RR row with polling on.
const (
	target   = 0.5
	rrTarget = 0.6
)

// mtu is the overlay's (1500 minus VXLAN's 50 bytes); the ports use it too.
const mtu = 1450

type test struct {
	name  string
	proto string // "udp", "tcp" or "rr" (UDP request/response)
	size  int    // UDP payload bytes
	unit  string
}

var tests = []test{
	{"UDP 64 B", "udp", 64, "pps"},
	{"UDP 1400 B", "udp", 1400, "pps"},
	{"TCP", "tcp", 0, "Mbit/s"},
	{"UDP RR 64 B", "rr", 64, "trans/s"},
}

func main() {
	role := flag.String("role", "", "internal: udpsend, udprecv, tcpsend, tcprecv, rrsend or rrrecv")
	addr := flag.String("addr", "", "internal: address")
	size := flag.Int("size", 64, "internal: UDP payload bytes")
	seconds := flag.Float64("seconds", 2, "length of one measurement")
	rounds := flag.Int("rounds", 3, "measurements per path and test (the median is reported)")
	smoke := flag.Bool("smoke", false, "tiny durations and one round: check that the benchmark runs")
	asJSON := flag.Bool("json", false, "print JSON lines instead of a table")
	manadBin := flag.String("manad", "", "manad binary (default: go build ./cmd/manad)")
	relayBin := flag.String("relay", "", "taprelay binary (default: go build ./bench/taprelay)")
	only := flag.String("only", "", "measure only the tests whose name contains this (\"TCP\", \"UDP\")")
	busyPoll := flag.Duration("busy-poll", 200*time.Microsecond, "the busy-polling paths' uplink busy_poll")
	portDefer := flag.Int("port-defer-hard-irqs", 100, "the busy-polling paths' port napi_defer_hard_irqs (0: the ports do not poll)")
	portFlush := flag.Duration("port-gro-flush-timeout", 20*time.Microsecond, "the busy-polling paths' port gro_flush_timeout")
	flag.Parse()
	if *only != "" {
		tests = slices.DeleteFunc(tests, func(tc test) bool { return !strings.Contains(tc.name, *only) })
	}
	if *smoke {
		*seconds, *rounds = 0.3, 1
	}
	dur := time.Duration(*seconds * float64(time.Second))
	switch *role {
	case "udpsend":
		udpSend(*addr, *size, dur)
		return
	case "udprecv":
		udpRecv(*addr, dur, false)
		return
	case "tcpsend":
		tcpSend(*addr, dur)
		return
	case "tcprecv":
		tcpRecv(*addr)
		return
	case "rrsend":
		rrSend(*addr, *size, dur)
		return
	case "rrrecv":
		udpRecv(*addr, dur, true)
		return
	}
	if os.Geteuid() != 0 {
		fatal(errors.New("needs root (namespaces, VXLAN, TAP devices)"))
	}
	b := &bench{id: strconv.Itoa(os.Getpid() % 100000), dur: dur}
	atExit = func() { b.resumeStopped(); b.td.Run() }
	defer b.td.Run()
	defer b.td.OnSignal()()
	defer b.resumeStopped()
	// The teardown's own signal handler stops the processes (SIGINT): a stopped relay takes it
	// only once continued.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() { <-sig; b.resumeStopped() }()
	var err error
	if b.dir, err = os.MkdirTemp("", "fabric-"); err != nil {
		fatal(err)
	}
	b.td.Dir(b.dir)
	if b.manad, err = helperproc.Binary(*manadBin, b.dir, "./cmd/manad"); err != nil {
		fatal(err)
	}
	if b.relay, err = helperproc.Binary(*relayBin, b.dir, "./bench/taprelay"); err != nil {
		fatal(err)
	}
	b.busyPoll, b.portDefer, b.portFlush = *busyPoll, *portDefer, *portFlush
	paths, err := b.setup()
	if err != nil {
		fatal(err)
	}
	res := map[string]map[string][]float64{}
	cpu := map[string]map[string][]cpuCost{}
	for r := 0; r < *rounds; r++ {
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			for _, tc := range tests {
				if p.rrOnly && tc.proto != "rr" {
					continue
				}
				v, c, err := b.measure(p, tc)
				if err != nil {
					fatal(fmt.Errorf("%s, %s: %w", p.name, tc.name, err))
				}
				if res[p.name] == nil {
					res[p.name], cpu[p.name] = map[string][]float64{}, map[string][]cpuCost{}
				}
				res[p.name][tc.name] = append(res[p.name][tc.name], v)
				cpu[p.name][tc.name] = append(cpu[p.name][tc.name], c)
			}
		}
	}
	report(res, cpu, *rounds, dur, *asJSON)
}

// atExit is the running benchmark's cleanup, which fatal must not skip: namespaces and daemons
// would outlive the run.
var atExit = func() {}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "fabric:", err)
	atExit()
	os.Exit(1)
}

// path is one way from namespace src to dst.
type path struct {
	name     string
	src, dst string
	dstIP    string
	pids     []int // the path's manad (or taprelay) processes, whose CPU time is counted
	rrOnly   bool  // measured in the RR test only
	stopped  bool  // pids are stopped (SIGSTOP) but while its sender runs (taprelay -poll's)
}

// cpuCost is the CPU time of one measurement, in seconds per million transactions (RR) or
// datagrams: the path's daemons' and the sender's and receiver's; and the daemons' threads'
// voluntary context switches (each a sleep, and so a wake-up) per transaction or datagram.
type cpuCost struct{ daemons, procs, wakes float64 }

type bench struct {
	id    string
	dir   string
	dur   time.Duration
	manad string
	relay string // bench/taprelay
	// busyPoll is the busy-polling paths' uplink busy_poll; portDefer and portFlush their
	// ports' NAPI napi_defer_hard_irqs and gro_flush_timeout (the port's TAP queue is polled
	// for their product after the last frame; 0: not).
	busyPoll  time.Duration
	portDefer int
	portFlush time.Duration
	td        teardown.List // the processes, namespaces and directory set up
	stopped   []int         // the processes kept stopped between their turns (path.stopped)
}

func run(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// script is a set-up's commands, run in order by do, which stops at the first that fails (the
// commands after it would fail for want of what it made, and their errors say nothing more).
type script [][]string

// ip adds `ip -n ns args…`.
func (sc *script) ip(ns string, args ...string) {
	*sc = append(*sc, append([]string{"ip", "-n", ns}, args...))
}

// addr adds what gives device dev of ns address cidr and sets it up.
func (sc *script) addr(ns, dev, cidr string) {
	sc.ip(ns, "addr", "add", cidr, "dev", dev)
	sc.ip(ns, "link", "set", dev, "up")
}

func (sc script) do() error {
	for _, args := range sc {
		if err := run(args...); err != nil {
			return err
		}
	}
	return nil
}

// ns adds a network namespace for each of names ("fab", the run's id and the name), deleted at
// the end, and returns their names.
func (b *bench) ns(names ...string) ([]string, error) {
	var out []string
	for _, name := range names {
		n := "fab" + b.id + name
		b.td.NetNS(n)
		if err := run("ip", "netns", "add", n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// hosts makes two host namespaces joined by a veth underlay on subnet net (192.168.N.0/24), each
// with a VXLAN device vx0 (VNI vni, MTU 1450) whose static forwarding entry points at the other;
// and a namespace for each host's port (name "p0" and "p1"). It returns the hosts' and the ports'
// namespaces.
func (b *bench) hosts(name string, subnet, vni int) (hosts, ports [2]string, err error) {
	ns, err := b.ns(name+"ha", name+"hb", name+"p0", name+"p1")
	if err != nil {
		return hosts, ports, err
	}
	hosts, ports = [2]string{ns[0], ns[1]}, [2]string{ns[2], ns[3]}
	var sc script
	sc.ip(hosts[0], "link", "add", "ul", "type", "veth", "peer", "name", "ul", "netns", hosts[1])
	for i, h := range hosts {
		self, other := fmt.Sprintf("192.168.%d.%d", subnet, i+1), fmt.Sprintf("192.168.%d.%d", subnet, 2-i)
		sc.addr(h, "ul", self+"/24")
		sc.ip(h, "link", "add", "vx0", "mtu", strconv.Itoa(mtu), "type", "vxlan", "id", strconv.Itoa(vni),
			"dstport", "4789", "local", self, "dev", "ul", "nolearning")
		sc = append(sc, []string{"ip", "netns", "exec", h, "bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "vx0", "dst", other})
		sc.ip(h, "link", "set", "vx0", "up")
	}
	return hosts, ports, sc.do()
}

// setup builds the two paths.
func (b *bench) setup() ([]path, error) {
	// Kernel only: port namespace —veth— bridge (with vx0) in each host.
	khosts, kports, err := b.hosts("k", 81, 81)
	if err != nil {
		return nil, err
	}
	var sc script
	for i, h := range khosts {
		pn := kports[i]
		sc.ip(h, "link", "add", "br0", "type", "bridge")
		sc.ip(h, "link", "set", "vx0", "master", "br0")
		sc.ip(h, "link", "add", "pv", "mtu", strconv.Itoa(mtu), "type", "veth", "peer", "name", "eth0", "netns", pn)
		sc.ip(h, "link", "set", "pv", "master", "br0")
		sc.ip(h, "link", "set", "pv", "up")
		sc.ip(h, "link", "set", "br0", "up")
		sc.ip(pn, "link", "set", "eth0", "mtu", strconv.Itoa(mtu))
		sc.addr(pn, "eth0", fmt.Sprintf("10.81.0.%d/24", i+1))
	}
	if err := sc.do(); err != nil {
		return nil, err
	}
	// manad: a daemon per host, its port on segment wire0 uplinked to vx0, once per attachment.
	mports, mpids, err := b.manadHosts("m", 82, "af_packet", false)
	if err != nil {
		return nil, err
	}
	xports, xpids, err := b.manadHosts("x", 83, "af_xdp", false)
	if err != nil {
		return nil, err
	}
	rports, rpids, err := b.relayHosts("r", 84, false)
	if err != nil {
		return nil, err
	}
	rpports, rppids, err := b.relayHosts("rp", 87, true)
	if err != nil {
		return nil, err
	}
	pports, ppids, err := b.manadHosts("mp", 85, "af_packet", true)
	if err != nil {
		return nil, err
	}
	qports, qpids, err := b.manadHosts("xp", 86, "af_xdp", true)
	if err != nil {
		return nil, err
	}
	paths := []path{
		{name: kernelPath, src: kports[0], dst: kports[1], dstIP: "10.81.0.2"},
		{name: manadPath, src: mports[0], dst: mports[1], dstIP: "10.82.0.2", pids: mpids},
		{name: xdpPath, src: xports[0], dst: xports[1], dstIP: "10.83.0.2", pids: xpids},
		{name: relayPath, src: rports[0], dst: rports[1], dstIP: "10.84.0.2", pids: rpids},
		{name: pollPath, src: pports[0], dst: pports[1], dstIP: "10.85.0.2", pids: ppids, rrOnly: true},
		{name: xdpPollPath, src: qports[0], dst: qports[1], dstIP: "10.86.0.2", pids: qpids, rrOnly: true},
		{name: relayPollPath, src: rpports[0], dst: rpports[1], dstIP: "10.87.0.2", pids: rppids, rrOnly: true, stopped: true},
	}
	for _, p := range paths {
		if err := run("ip", "netns", "exec", p.src, "ping", "-c", "2", "-i", "0.2", "-W", "2", p.dstIP); err != nil {
			return nil, fmt.Errorf("%s does not pass traffic: %w", p.name, err)
		}
		if p.stopped {
			b.stopped = append(b.stopped, p.pids...)
			if err := signalAll(p.pids, syscall.SIGSTOP); err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}
	return paths, nil
}

// signalAll sends sig to every process of pids. Errors: the first kill's.
func signalAll(pids []int, sig syscall.Signal) error {
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			return fmt.Errorf("kill -%v %d: %w", sig, pid, err)
		}
	}
	return nil
}

// resumeStopped continues the relays kept stopped between their turns (SIGCONT), so that the
// teardown's SIGINT reaches them at once rather than after its 10-s wait; harmless twice, or
// for a process already gone.
func (b *bench) resumeStopped() {
	for _, pid := range b.stopped {
		syscall.Kill(pid, syscall.SIGCONT)
	}
}

// relayHosts makes two hosts (underlay subnet and VNI subnet), a TAP per host (10.SUBNET.0.1 and
// .2 in its own namespace) joined to vx0 by bench/taprelay -uplink (with poll, -poll -uplink),
// and returns the TAPs' namespaces and the relays' process ids. Each TAP is made in its host's
// namespace, where the relay attaches to it and to vx0, then moved to its port namespace: the
// relay's descriptor follows it.
func (b *bench) relayHosts(name string, subnet int, poll bool) (ports [2]string, pids []int, err error) {
	hosts, ports, err := b.hosts(name, subnet, subnet)
	if err != nil {
		return ports, nil, err
	}
	for i, h := range hosts {
		pn := ports[i]
		tap := fmt.Sprint("eth", i)
		if err := run("ip", "-n", h, "tuntap", "add", "mode", "tap", "name", tap); err != nil {
			return ports, nil, err
		}
		args := []string{"ip", "netns", "exec", h, b.relay, "-uplink", tap, "vx0"}
		if poll {
			args = slices.Insert(args, 5, "-poll")
		}
		pid, err := relayPID(b.relay, tap, poll, func() error { return helperproc.Start(&b.td, "ready", args...) })
		if err != nil {
			return ports, nil, err
		}
		pids = append(pids, pid)
		var sc script
		sc.ip(h, "link", "set", tap, "netns", pn)
		sc.ip(pn, "link", "set", tap, "mtu", strconv.Itoa(mtu))
		sc.addr(pn, tap, fmt.Sprintf("10.%d.0.%d/24", subnet, i+1))
		if err := sc.do(); err != nil {
			return ports, nil, err
		}
	}
	return ports, pids, nil
}

// relayPID runs start, which starts a taprelay on tap (with poll, a taprelay -poll), and finds
// the process it started (whose command line names bin and tap, and -poll or not; `ip netns
// exec` execs it in place): its CPU time is counted.
func relayPID(bin, tap string, poll bool, start func() error) (int, error) {
	if err := start(); err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		if args[0] == bin && slices.Contains(args, "-uplink") && slices.Contains(args, tap) && slices.Contains(args, "-poll") == poll && pid != os.Getpid() {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("taprelay on %s: no process found", tap)
}

// manadHosts makes two hosts (underlay subnet and VNI subnet), a manad per host with its port
// (10.SUBNET.0.1 and .2) on segment wire0, uplinked to vx0 with attach, and returns the ports'
// namespaces and the daemons' process ids. With poll, the uplinks busy-poll for b.busyPoll and
// the ports' NAPIs poll by b.portDefer and b.portFlush (either 0: that side does not poll).
func (b *bench) manadHosts(name string, subnet int, attach string, poll bool) (mports [2]string, pids []int, err error) {
	var busyPoll time.Duration
	if poll {
		busyPoll = b.busyPoll
	}
	hosts, mports, err := b.hosts(name, subnet, subnet)
	if err != nil {
		return mports, nil, err
	}
	for i, h := range hosts {
		pn := mports[i]
		dir := filepath.Join(b.dir, fmt.Sprint(name, i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return mports, nil, err
		}
		cfg := fmt.Sprintf(`[daemon]
socket = %q
state_dir = %q
log_level = "warn"

[[segment]]
name = "wire0"
uplinks = [{dev = "vx0", netns = %q, attach = %q, busy_poll = %q}]

[[port]]
name = "eth%d"
netns = %q
segment = "wire0"
mtu = %d
persistent = false
`, filepath.Join(dir, "manad.sock"), filepath.Join(dir, "state"), h, attach, busyPoll.String(), i, pn, mtu)
		if poll && b.portDefer > 0 {
			cfg += fmt.Sprintf("napi_defer_hard_irqs = %d\ngro_flush_timeout = %q\n", b.portDefer, b.portFlush.String())
		}
		cfgPath := filepath.Join(dir, "manad.toml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			return mports, nil, err
		}
		pid, err := b.startManad(cfgPath)
		if err != nil {
			return mports, nil, err
		}
		pids = append(pids, pid)
		// Distinct names: a port's MAC derives from its name, and the two share a segment.
		var sc script
		sc.addr(pn, fmt.Sprint("eth", i), fmt.Sprintf("10.%d.0.%d/24", subnet, i+1))
		if err := sc.do(); err != nil {
			return mports, nil, err
		}
	}
	return mports, pids, nil
}

// startManad starts manad with configuration file cfg and returns its process id once its
// socket answers.
func (b *bench) startManad(cfg string) (int, error) {
	cmd := exec.Command(b.manad, "--config", cfg)
	log, err := os.Create(cfg + ".log")
	if err != nil {
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	b.td.Proc(cmd)
	sock := filepath.Join(filepath.Dir(cfg), "manad.sock")
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unixpacket", sock); err == nil {
			c.Close()
			time.Sleep(200 * time.Millisecond) // ports are created right after the socket opens
			return cmd.Process.Pid, nil
		}
	}
	return 0, errors.New("manad did not open its socket")
}

// cpuTicks is utime+stime of pid, in clock ticks (USER_HZ, 100 a second).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + k, errors.Join(err1, err2)
}

// daemonsWakes is how often the threads of pids have slept so far: the sum of each thread's
// voluntary_ctxt_switches (/proc/PID/task/TID/status; the process's own status has only its
// first thread's). A thread that ended meanwhile takes its count with it.
func daemonsWakes(pids []int) (int64, error) {
	var n int64
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return 0, err
		}
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
			if err != nil {
				continue // the thread ended
			}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
					k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					n += k
				}
			}
		}
	}
	return n, nil
}

// daemonsCPU is the CPU time of pids so far, in seconds.
func daemonsCPU(pids []int) (float64, error) {
	var t int64
	for _, pid := range pids {
		n, err := cpuTicks(pid)
		if err != nil {
			return 0, err
		}
		t += n
	}
	const hz = 100 // USER_HZ
	return float64(t) / hz, nil
}

// measure runs one receiver and one sender for b.dur and returns what the receiver counted:
// datagrams per second, or Mbit/s for TCP; and the CPU time it took per million datagrams
// (transactions, for RR; per million packets of 64 KiB for TCP, which nobody reads).
func (b *bench) measure(p path, tc test) (float64, cpuCost, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, cpuCost{}, err
	}
	target := net.JoinHostPort(p.dstIP, "5301")
	secs := strconv.FormatFloat(b.dur.Seconds(), 'f', 3, 64)
	rcv := exec.Command("ip", "netns", "exec", p.dst, self, "-role", tc.proto+"recv", "-addr", target, "-seconds", secs)
	rout, err := rcv.StdoutPipe()
	if err != nil {
		return 0, cpuCost{}, err
	}
	rcv.Stderr = os.Stderr
	d0, err := daemonsCPU(p.pids)
	if err != nil {
		return 0, cpuCost{}, err
	}
	w0, err := daemonsWakes(p.pids)
	if err != nil {
		return 0, cpuCost{}, err
	}
	if err := rcv.Start(); err != nil {
		return 0, cpuCost{}, err
	}
	sc := bufio.NewScanner(rout)
	if !sc.Scan() || sc.Text() != "listening" {
		rcv.Wait()
		return 0, cpuCost{}, errors.New("receiver did not start")
	}
	snd := exec.Command("ip", "netns", "exec", p.src, self, "-role", tc.proto+"send", "-addr", target,
		"-size", strconv.Itoa(tc.size), "-seconds", secs)
	snd.Stderr = os.Stderr
	if p.stopped {
		if err := signalAll(p.pids, syscall.SIGCONT); err != nil {
			rcv.Process.Kill()
			rcv.Wait()
			return 0, cpuCost{}, err
		}
	}
	err = snd.Run()
	if p.stopped {
		err = errors.Join(err, signalAll(p.pids, syscall.SIGSTOP))
	}
	if err != nil {
		rcv.Process.Kill()
		rcv.Wait()
		return 0, cpuCost{}, fmt.Errorf("sender: %w", err)
	}
	if !sc.Scan() {
		rcv.Wait()
		return 0, cpuCost{}, errors.New("receiver printed no count")
	}
	line := sc.Text()
	if err := rcv.Wait(); err != nil {
		return 0, cpuCost{}, fmt.Errorf("receiver: %w", err)
	}
	d1, err := daemonsCPU(p.pids)
	if err != nil {
		return 0, cpuCost{}, err
	}
	w1, err := daemonsWakes(p.pids)
	if err != nil {
		return 0, cpuCost{}, err
	}
	var n int64
	var span float64
	if _, err := fmt.Sscan(line, &n, &span); err != nil || span <= 0 || n <= 0 {
		return 0, cpuCost{}, fmt.Errorf("receiver output %q", line)
	}
	procs := (snd.ProcessState.UserTime() + snd.ProcessState.SystemTime() + rcv.ProcessState.UserTime() + rcv.ProcessState.SystemTime()).Seconds()
	perM := 1e6 / float64(n)
	c := cpuCost{daemons: (d1 - d0) * perM, procs: procs * perM, wakes: float64(w1-w0) / float64(n)}
	if tc.proto == "tcp" {
		return float64(n) * 8 / span / 1e6, c, nil
	}
	return float64(n) / span, c, nil
}

// udpSend writes size-byte datagrams to addr as fast as it can for dur.
func udpSend(addr string, size int, dur time.Duration) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		fatal(err)
	}
	buf := make([]byte, size)
	end := time.Now().Add(dur)
	for i := 0; ; i++ {
		if i&255 == 0 && time.Now().After(end) {
			return
		}
		c.Write(buf) // ECONNREFUSED/ENOBUFS: the datagram is lost, as it would be
	}
}

// udpRecv counts datagrams on addr and prints "count seconds", from the first datagram to the
// last. With answer it sends each back to its sender (rrSend's echo) and counts the answers.
func udpRecv(addr string, dur time.Duration, answer bool) {
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		fatal(err)
	}
	c.(*net.UDPConn).SetReadBuffer(8 << 20)
	fmt.Println("listening")
	buf := make([]byte, 2048)
	var n int64
	var first, last time.Time
	c.SetReadDeadline(time.Now().Add(dur + 10*time.Second))
	for {
		k, from, err := c.ReadFrom(buf)
		if err != nil {
			break
		}
		if answer {
			if _, err := c.WriteTo(buf[:k], from); err != nil {
				continue
			}
		}
		last = time.Now()
		if n == 0 {
			first = last
			c.SetReadDeadline(first.Add(dur + 500*time.Millisecond))
		} else {
			c.SetReadDeadline(last.Add(300 * time.Millisecond))
		}
		n++
	}
	fmt.Println(n, last.Sub(first).Seconds())
}

// rrSend sends a size-byte request to addr and waits for its answer, one at a time, for dur. A
// request lost on the way is given up after 100 ms. Each request carries its sequence number,
// so a late answer to one given up is skipped, not taken for the answer to the next.
func rrSend(addr string, size int, dur time.Duration) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		fatal(err)
	}
	buf, ans := make([]byte, max(size, 8)), make([]byte, 2048)
	for seq, end := uint64(0), time.Now().Add(dur); time.Now().Before(end); seq++ {
		binary.BigEndian.PutUint64(buf, seq)
		c.Write(buf)
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		for {
			k, err := c.Read(ans)
			if err != nil || k >= 8 && binary.BigEndian.Uint64(ans) == seq {
				break
			}
		}
	}
}

// tcpSend streams to addr for dur.
func tcpSend(addr string, dur time.Duration) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 128<<10)
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		c.SetWriteDeadline(end.Add(5 * time.Second))
		if _, err := c.Write(buf); err != nil {
			fatal(err)
		}
	}
}

// tcpRecv accepts one stream and prints "bytes seconds", from the first byte to the end.
func tcpRecv(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fatal(err)
	}
	fmt.Println("listening")
	c, err := l.Accept()
	if err != nil {
		fatal(err)
	}
	buf := make([]byte, 128<<10)
	var n int64
	var first time.Time
	for {
		k, err := c.Read(buf)
		if n == 0 && k > 0 {
			first = time.Now()
		}
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			fatal(err)
		}
	}
	fmt.Println(n, time.Since(first).Seconds())
}

// The paths, as the rows name them.
const (
	kernelPath = "kernel (veth, bridge, VXLAN)"
	manadPath  = "manad (port, uplink, VXLAN)"
	xdpPath    = "manad AF_XDP (port, uplink, VXLAN)"
	relayPath  = "taprelay (TAP, AF_PACKET, VXLAN)"
	// The busy-polling paths (RR only).
	pollPath    = "manad busy-poll (port, uplink, VXLAN)"
	xdpPollPath = "manad AF_XDP busy-poll (port, uplink, VXLAN)"
	// bench/taprelay -poll -uplink: the busy-poll floor on these interfaces (RR only).
	relayPollPath = "taprelay busy-poll (TAP, AF_PACKET, VXLAN)"
)

// against returns the row of path's figure for tc compared with peer's (named peerName), the
// median of the per-round ratios: rounds interleave the paths, so round i of one is compared
// with round i of the other.
func against(res map[string]map[string][]float64, tc test, figure string, path, peer, peerName, goal string) benchrow.Row {
	ms, ps := res[path][tc.name], res[peer][tc.name]
	var ratios []float64
	for i := range min(len(ps), len(ms)) {
		if ps[i] > 0 {
			ratios = append(ratios, ms[i]/ps[i])
		}
	}
	m, p, r := benchrow.StatOf(ms), benchrow.StatOf(ps), benchrow.StatOf(ratios)
	return benchrow.Row{Issue: 12, Figure: figure, Value: m.Median, Min: m.Min, Max: m.Max,
		Rounds: len(ms), Unit: tc.unit, Baseline: p.Median, BaselineName: peerName,
		Ratio: r.Median, RatioMin: r.Min, RatioMax: r.Max, Target: goal}
}

// cpuRows are the CPU rows of RR test tc: per path, the CPU seconds a million transactions
// took (daemons, sender and receiver), against the kernel-only path's; and the daemons' part.
func cpuRows(cpu map[string]map[string][]cpuCost, tc test) []benchrow.Row {
	var out []benchrow.Row
	total := func(path string) []float64 {
		var v []float64
		for _, c := range cpu[path][tc.name] {
			v = append(v, c.daemons+c.procs)
		}
		return v
	}
	ks := total(kernelPath)
	for _, path := range []string{kernelPath, manadPath, pollPath, xdpPath, xdpPollPath, relayPath, relayPollPath} {
		vs := total(path)
		if len(vs) == 0 {
			continue
		}
		var ratios, daemons []float64
		for i := range min(len(vs), len(ks)) {
			if ks[i] > 0 {
				ratios = append(ratios, vs[i]/ks[i])
			}
		}
		for _, c := range cpu[path][tc.name] {
			daemons = append(daemons, c.daemons)
		}
		v, r := benchrow.StatOf(vs), benchrow.StatOf(ratios)
		row := benchrow.Row{Issue: 29, Figure: tc.name + ", CPU per 1M trans, " + path, Value: v.Median, Min: v.Min, Max: v.Max,
			Rounds: len(vs), Unit: "CPU s"}
		if path != kernelPath {
			row.Baseline, row.BaselineName, row.Ratio, row.RatioMin, row.RatioMax = benchrow.StatOf(ks).Median, "kernel-only path", r.Median, r.Min, r.Max
		}
		out = append(out, row)
		if path != kernelPath {
			d := benchrow.StatOf(daemons)
			out = append(out, benchrow.Row{Issue: 29, Figure: tc.name + ", CPU per 1M trans, its daemons, " + path, Value: d.Median, Min: d.Min, Max: d.Max,
				Rounds: len(daemons), Unit: "CPU s"})
			var wakes []float64
			for _, c := range cpu[path][tc.name] {
				wakes = append(wakes, c.wakes)
			}
			w := benchrow.StatOf(wakes)
			out = append(out, benchrow.Row{Issue: 29, Figure: tc.name + ", its daemons' sleeps per trans, " + path, Value: w.Median, Min: w.Min, Max: w.Max,
				Rounds: len(wakes), Unit: "sleeps"})
		}
	}
	return out
}

func report(res map[string]map[string][]float64, cpu map[string]map[string][]cpuCost, rounds int, dur time.Duration, asJSON bool) {
	var out []benchrow.Row
	for _, tc := range tests {
		ks := res[kernelPath][tc.name]
		k := benchrow.StatOf(ks)
		out = append(out, benchrow.Row{Issue: 12, Figure: tc.name + ", " + kernelPath, Value: k.Median, Min: k.Min, Max: k.Max,
			Rounds: len(ks), Unit: tc.unit})
		goal := fmt.Sprintf("ratio ≥ %.1f", target)
		if tc.proto == "rr" {
			goal = "" // the issue sets no latency target
		}
		for _, manad := range []string{manadPath, xdpPath} {
			out = append(out, against(res, tc, tc.name+", "+manad, manad, kernelPath, "kernel-only path", goal))
		}
		// The floor: what the interfaces allow, and how close manad comes to it.
		out = append(out,
			against(res, tc, tc.name+", "+relayPath, relayPath, kernelPath, "kernel-only path", ""),
			against(res, tc, tc.name+", "+manadPath+" against taprelay", manadPath, relayPath, "taprelay", ""))
		if tc.proto != "rr" {
			continue
		}
		// Issue 29: the uplinks busy-poll; against the kernel-only path, and against the
		// same attachment without polling (which must not have lost by the change).
		for _, pp := range [][2]string{{pollPath, manadPath}, {xdpPollPath, xdpPath}} {
			r := against(res, tc, tc.name+", "+pp[0], pp[0], kernelPath, "kernel-only path", fmt.Sprintf("ratio ≥ %.1f", rrTarget))
			r.Issue = 29
			o := against(res, tc, tc.name+", "+pp[0]+" against polling off", pp[0], pp[1], "polling off", "")
			o.Issue = 29
			out = append(out, r, o)
		}
		// The busy-poll floor (bench/taprelay -poll): what a forwarder that polls these
		// interfaces and does nothing else reaches, and how close manad's polling comes.
		f := against(res, tc, tc.name+", "+relayPollPath, relayPollPath, kernelPath, "kernel-only path", "")
		m := against(res, tc, tc.name+", "+pollPath+" against taprelay busy-poll", pollPath, relayPollPath, "taprelay busy-poll", "")
		f.Issue, m.Issue = 29, 29
		out = append(out, f, m)
		out = append(out, cpuRows(cpu, tc)...)
	}
	if asJSON {
		if err := benchrow.Encode(os.Stdout, out); err != nil {
			fmt.Fprintln(os.Stderr, "fabric:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("Port → uplink → VXLAN → uplink → port across two simulated hosts: median of %d rounds of %v; baseline = the kernel-only path, or taprelay where the row says so\n\n", rounds, dur)
	fmt.Printf("%-90s %16s %12s %8s  %s\n", "figure", "value", "baseline", "ratio", "target")
	for _, r := range out {
		base, ratio, prec := "", "", 0
		if r.Unit == "CPU s" || r.Unit == "sleeps" {
			prec = 2
		}
		if r.Baseline != 0 {
			base, ratio = fmt.Sprintf("%.*f", prec, r.Baseline), fmt.Sprintf("%.2f", r.Ratio)
		}
		fmt.Printf("%-90s %16s %12s %8s  %s\n", r.Figure, fmt.Sprintf("%.*f %s", prec, r.Value, r.Unit), base, ratio, r.Target)
	}
}
