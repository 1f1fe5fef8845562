// Command udppps measures, in one run, UDP packets per second between two network namespaces
// (and one TCP stream's throughput) through five paths: a veth pair (the kernel's own), a
// minimal TAP-to-TAP relay (bench/taprelay, the baseline), and manad in fragment mode and in
// full-page mode (with the driver's default 1024-buffer rings, and with 256-buffer rings); and
// the CPU an idle manad with 16 ports uses. It prints the ratios against the relay and the
// target of issue 4 (manad ≥ 0.9× the relay in both modes).
//
// Each path gets its own pair of namespaces, set up once; the paths are then measured in turns,
// round after round (the order rotating every round), and the median, minimum and maximum of the
// rounds are reported; a path's ratio to the relay is the median of the per-round ratios, so a
// noisy neighbour on a shared machine hits every path alike. Sender and sink are separate
// processes (this binary re-executed inside a namespace), so the CPU they use is not charged to
// the path. The sender writes 64 datagrams per sendmmsg call as fast as the socket accepts them
// and reports how many it offered; a path's figure is what reached the destination's UDP layer
// (its namespace's Udp InDatagrams + InErrors: the sink reads nothing, so nearly all are dropped
// at its socket) per second of sending. Not the device's rx_packets: a TAP counts a coalesced
// superframe (manad's receive coalescing writes runs of datagrams as one) as one packet. A path that delivered (nearly) all the sender offered was
// limited by the sender, not by itself: such a figure is a lower bound and is marked
// sender-bound (JSON: sender_bound) — the report flags it.
//
// Each round also runs one TCP stream (64 KiB writes) along every path for the same time, and
// reports the Mbit/s its sink read, against the relay's in the same round; and iperf3 with 1 and
// 8 streams at MTU 1500 and 9000 along veth, a Linux bridge, taprelay and manad (issue 14,
// tcp.go), against veth's, with retransmits and manad's CPU seconds per GB. The UDP figures are
// also measured with rx-udp-gro-forwarding on the destination device of manad's fragment and
// full-page paths and of a second veth pair, against that veth (gro.go).
//
// Needs root. Usage:
//
//	go run ./bench/udppps [--seconds 2] [--rounds 5] [--json] [--smoke] [--udp | --iperf [--mtu N]]
//
// --udp measures only the UDP datagram figures (and manad's against veth), no TCP or idle CPU.
// --iperf measures only the iperf3 figures (--mtu 9000: only that MTU's), for profiling a change.
// --smoke runs one short round of everything (bench-smoke's convention for bench/ programs).
package main

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
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/bench/internal/benchrow"
	"github.com/manad/manad/bench/internal/helperproc"
	"github.com/manad/manad/bench/internal/teardown"
)

// target is issue 4's: manad forwards at least 0.9× the minimal relay's packets per second.
const target = 0.9

var sizes = []int{64, 1400}

func main() {
	role := flag.String("role", "", "internal: send or sink")
	addr := flag.String("addr", "", "internal: UDP address")
	size := flag.Int("size", 64, "internal: UDP payload bytes")
	seconds := flag.Float64("seconds", 2, "length of one measurement")
	rounds := flag.Int("rounds", 5, "measurements per path and size (median, min and max are reported)")
	asJSON := flag.Bool("json", false, "print JSON lines instead of a table")
	smoke := flag.Bool("smoke", false, "one short round of everything, to check the benchmark works")
	manadBin := flag.String("manad", "", "manad binary (default: go build ./cmd/manad)")
	relayBin := flag.String("relay", "", "taprelay binary (default: go build ./bench/taprelay)")
	udpOnly := flag.Bool("udp", false, "only the UDP datagram figures: no TCP stream, iperf3 or idle CPU")
	iperfOnly := flag.Bool("iperf", false, "only the iperf3 figures (issue 14): no UDP, single TCP stream or idle CPU")
	iperfMTU := flag.Int("mtu", 0, "with --iperf: only this MTU (1500 or 9000; 0 both)")
	flag.Parse()
	idleWindow := 5 * time.Second
	if *smoke {
		*seconds, *rounds, idleWindow = 0.2, 1, 500*time.Millisecond
	}
	dur := time.Duration(*seconds * float64(time.Second))
	switch *role {
	case "send":
		send(*addr, *size, dur)
		return
	case "sink":
		sink(*addr)
		return
	case "tcpsend":
		tcpSend(*addr, dur)
		return
	case "tcpsink":
		tcpSink(*addr)
		return
	}
	if os.Geteuid() != 0 {
		fatal(errors.New("needs root (namespaces, TAP devices)"))
	}
	if *rounds < 1 {
		fatal(errors.New("--rounds must be at least 1"))
	}
	b := &bench{id: strconv.Itoa(os.Getpid() % 100000), dur: dur, udpOnly: *udpOnly, iperfOnly: *iperfOnly}
	defer b.td.OnSignal()()
	if *iperfOnly && *udpOnly {
		fatal(errors.New("--iperf and --udp exclude each other"))
	}
	if *iperfMTU != 0 {
		if !*iperfOnly || !slices.Contains(tcpMTUs, *iperfMTU) {
			fatal(fmt.Errorf("--mtu takes one of %v, with --iperf", tcpMTUs))
		}
		tcpMTUs = []int{*iperfMTU}
	}
	if *smoke {
		tcpMTUs, tcpStreams = tcpMTUs[:1], tcpStreams[:1]
	}
	err := b.run(*manadBin, *relayBin, *rounds, idleWindow, *asJSON)
	b.td.Run()
	if err != nil {
		fatal(err)
	}
}

func (b *bench) run(manadBin, relayBin string, rounds int, idleWindow time.Duration, asJSON bool) error {
	var err error
	if b.dir, err = os.MkdirTemp("", "udppps-"); err != nil {
		return err
	}
	b.td.Dir(b.dir)
	if b.manad, err = helperproc.Binary(manadBin, b.dir, "./cmd/manad"); err != nil {
		return err
	}
	if b.relay, err = helperproc.Binary(relayBin, b.dir, "./bench/taprelay"); err != nil {
		return err
	}
	paths, err := b.setup()
	if err != nil {
		return err
	}
	manadPID := b.td.LastProc().Process.Pid // setup starts manad last
	var tps []tcpPath
	if b.udpOnly {
		tps = manadPaths(paths)
	} else if tps, err = b.setupTCP(paths); err != nil {
		return err
	}
	tcpRes := map[string]map[string][]tcpSample{}
	res := map[string]map[int][]sample{}
	tcp := map[string][]float64{} // bits per second of one TCP stream
	for r := 0; r < rounds; r++ {
		for i := range paths {
			if b.iperfOnly {
				break
			}
			p := paths[(i+r)%len(paths)] // rotate the order so no path always goes first
			for _, sz := range sizes {
				s, err := b.measure(p, sz)
				if err != nil {
					return fmt.Errorf("%s, %d B: %w", p.name, sz, err)
				}
				if s.delivered == 0 {
					return fmt.Errorf("%s, %d B: nothing reached %s (sender offered %.0f pps)", p.name, sz, p.dstDev, s.offered)
				}
				if res[p.name] == nil {
					res[p.name] = map[int][]sample{}
				}
				res[p.name][sz] = append(res[p.name][sz], s)
			}
			if b.udpOnly || groPath(p.name) {
				continue
			}
			bps, err := b.measureTCP(p)
			if err != nil {
				return fmt.Errorf("%s, TCP: %w", p.name, err)
			}
			tcp[p.name] = append(tcp[p.name], bps)
		}
		if b.udpOnly {
			continue
		}
		if err := b.tcpRound(tps, r, tcpMTUs, tcpStreams, manadPID, tcpRes); err != nil {
			return err
		}
	}
	idle := -1.0 // not measured
	if !b.udpOnly && !b.iperfOnly {
		if idle, err = b.idleCPU(16, idleWindow); err != nil {
			return err
		}
	}
	report(paths, res, tcp, idle, rounds, b.dur, asJSON, append(tcpRows(tps, tcpMTUs, tcpStreams, tcpRes, res), groRows(res)...))
	return nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "udppps:", err)
	os.Exit(1)
}

// path is one way from namespace src to dst.
type path struct {
	name     string
	src, dst string
	dstIP    string
	dstDev   string // the destination's device
}

type bench struct {
	id           string
	dir          string
	dur          time.Duration
	manad, relay string
	td           teardown.List // the processes, namespaces, TAPs and directory set up
	udpOnly      bool          // --udp
	iperfOnly    bool          // --iperf
}

func run(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (b *bench) ns(name string) (string, error) {
	n := "pps" + b.id + name
	b.td.NetNS(n)
	return n, run("ip", "netns", "add", n)
}

// addr puts ip/24 on dev in ns and brings it up.
func addr(ns, dev, ip string) error {
	if err := run("ip", "-n", ns, "addr", "add", ip+"/24", "dev", dev); err != nil {
		return err
	}
	return run("ip", "-n", ns, "link", "set", dev, "up")
}

// setup builds the paths, each in its own pair of namespaces.
func (b *bench) setup() ([]path, error) {
	var paths []path
	pair := func(name string) (string, string, error) {
		a, err := b.ns(name + "a")
		if err != nil {
			return "", "", err
		}
		z, err := b.ns(name + "b")
		return a, z, err
	}

	// veth
	va, vb, err := pair("v")
	if err != nil {
		return nil, err
	}
	if err := run("ip", "link", "add", "va", "netns", va, "type", "veth", "peer", "name", "vb", "netns", vb); err != nil {
		return nil, err
	}
	if err := errors.Join(addr(va, "va", "10.241.0.1"), addr(vb, "vb", "10.241.0.2")); err != nil {
		return nil, err
	}
	paths = append(paths, path{"veth", va, vb, "10.241.0.2", "vb"})

	// taprelay: the TAPs are made in this namespace, attached by the relay, then moved.
	ra, rb, err := pair("r")
	if err != nil {
		return nil, err
	}
	ta, tb := "ppsra"+b.id, "ppsrb"+b.id
	for _, t := range []string{ta, tb} {
		if err := run("ip", "tuntap", "add", "mode", "tap", "name", t); err != nil {
			return nil, err
		}
		b.td.Link(t)
	}
	if err := helperproc.Start(&b.td, "ready", b.relay, ta, tb); err != nil {
		return nil, err
	}
	if err := errors.Join(run("ip", "link", "set", ta, "netns", ra), run("ip", "link", "set", tb, "netns", rb)); err != nil {
		return nil, err
	}
	if err := errors.Join(addr(ra, ta, "10.242.0.1"), addr(rb, tb, "10.242.0.2")); err != nil {
		return nil, err
	}
	paths = append(paths, path{"taprelay", ra, rb, "10.242.0.2", tb})

	// manad: one daemon, a fragment-mode pair and a full-page pair on separate segments. The
	// ports model the host of the full-page-rx thread (seed 000): 4K pages and the driver of that
	// time (rule pre-headroom), where MTU 1500 means two 1856-byte buffers per page unless the
	// flag gives each its own page.
	fa, fb, err := pair("f")
	if err != nil {
		return nil, err
	}
	pa, pb, err := pair("p")
	if err != nil {
		return nil, err
	}
	// The same full-page pair with 256-buffer rings: a ring of 1024 one-page buffers (4 MiB per
	// queue) no longer fits in the CPU's caches, and every frame's "DMA" lands in a cold buffer
	// (as a real NIC's does); this shows how much of full-page mode's cost that is.
	sa, sb, err := pair("s")
	if err != nil {
		return nil, err
	}
	// The fragment and full-page pairs again, their destination TAPs with rx-udp-gro-forwarding
	// on (gro.go).
	ga, gb, err := pair("fg")
	if err != nil {
		return nil, err
	}
	qa, qb, err := pair("pg")
	if err != nil {
		return nil, err
	}
	port := func(name, ns, seg, flags string, ring int) string {
		return fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = %q\npage_size = \"4K\"\nrule = \"pre-headroom\"\nrx_ring = %d\npersistent = false\npriv_flags = [%s]\n",
			name, ns, seg, ring, flags)
	}
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\nlog_level = \"warn\"\n%s%s%s%s%s%s%s%s%s%s",
		filepath.Join(b.dir, "manad.sock"), filepath.Join(b.dir, "state"),
		port("eth0", fa, "frag", "", 1024), port("eth1", fb, "frag", "", 1024),
		port("eth2", pa, "full", `"full-page-rx"`, 1024), port("eth3", pb, "full", `"full-page-rx"`, 1024),
		port("eth4", sa, "small", `"full-page-rx"`, 256), port("eth5", sb, "small", `"full-page-rx"`, 256),
		port("eth6", ga, "fraggro", "", 1024), port("eth7", gb, "fraggro", "", 1024),
		port("eth8", qa, "fullgro", `"full-page-rx"`, 1024), port("eth9", qb, "fullgro", `"full-page-rx"`, 1024))
	cfgPath := filepath.Join(b.dir, "manad.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := b.startManad(cfgPath); err != nil {
		return nil, err
	}
	if err := errors.Join(addr(fa, "eth0", "10.243.0.1"), addr(fb, "eth1", "10.243.0.2"),
		addr(pa, "eth2", "10.244.0.1"), addr(pb, "eth3", "10.244.0.2"),
		addr(sa, "eth4", "10.245.0.1"), addr(sb, "eth5", "10.245.0.2"),
		addr(ga, "eth6", "10.248.0.1"), addr(gb, "eth7", "10.248.0.2"),
		addr(qa, "eth8", "10.249.0.1"), addr(qb, "eth9", "10.249.0.2")); err != nil {
		return nil, err
	}
	paths = append(paths, path{"manad fragment", fa, fb, "10.243.0.2", "eth1"}, path{"manad full-page", pa, pb, "10.244.0.2", "eth3"},
		path{"manad full-page, 256-buffer rings", sa, sb, "10.245.0.2", "eth5"})
	gro, err := b.setupGRO(path{groFragment, ga, gb, "10.248.0.2", "eth7"}, path{groFullPage, qa, qb, "10.249.0.2", "eth9"})
	if err != nil {
		return nil, err
	}
	paths = append(paths, gro...)

	// Let ARP and the segments' MAC tables settle on every path.
	for _, p := range paths {
		if err := run("ip", "netns", "exec", p.src, "ping", "-c", "2", "-i", "0.2", "-W", "2", p.dstIP); err != nil {
			return nil, fmt.Errorf("%s does not pass traffic: %w", p.name, err)
		}
	}
	return paths, nil
}

func (b *bench) startManad(cfg string) error {
	// manad logs at warn here, so "ready" comes from its stdout-less startup: wait for the
	// socket instead.
	cmd := exec.Command(b.manad, "--config", cfg)
	log, err := os.Create(cfg + ".log")
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	b.td.Proc(cmd)
	sock := filepath.Join(filepath.Dir(cfg), "manad.sock")
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unixpacket", sock); err == nil {
			c.Close()
			time.Sleep(200 * time.Millisecond) // ports are created right after the socket opens
			return nil
		}
	}
	return errors.New("manad did not open its socket")
}

// sample is one measurement of one path: datagrams per second the sender offered and the
// destination device received, over the sender's sending time.
type sample struct{ offered, delivered float64 }

// senderBound is how close to the offered rate a path must deliver to count as limited by the
// sender rather than by itself.
const senderBound = 0.95

// measure starts a sink in the destination namespace, runs one sender for b.dur and returns the
// offered and delivered rates.
func (b *bench) measure(p path, size int) (sample, error) {
	self, err := os.Executable()
	if err != nil {
		return sample{}, err
	}
	target := net.JoinHostPort(p.dstIP, "9")
	snk := exec.Command("ip", "netns", "exec", p.dst, self, "-role", "sink", "-addr", target)
	sout, err := snk.StdoutPipe()
	if err != nil {
		return sample{}, err
	}
	sin, err := snk.StdinPipe() // the sink exits when this closes
	if err != nil {
		return sample{}, err
	}
	snk.Stderr = os.Stderr
	if err := snk.Start(); err != nil {
		return sample{}, err
	}
	defer func() { sin.Close(); snk.Wait() }()
	if sc := bufio.NewScanner(sout); !sc.Scan() || sc.Text() != "listening" {
		return sample{}, errors.New("sink did not start")
	}
	rx0, err := udpReceived(p.dst)
	if err != nil {
		return sample{}, err
	}
	secs := strconv.FormatFloat(b.dur.Seconds(), 'f', 3, 64)
	out, err := exec.Command("ip", "netns", "exec", p.src, self, "-role", "send", "-addr", target,
		"-size", strconv.Itoa(size), "-seconds", secs).Output()
	if err != nil {
		return sample{}, fmt.Errorf("sender: %w", err)
	}
	time.Sleep(20 * time.Millisecond) // the frames still in flight
	rx1, err := udpReceived(p.dst)
	if err != nil {
		return sample{}, err
	}
	var sent int64
	var span float64
	if _, err := fmt.Sscan(string(out), &sent, &span); err != nil || span <= 0 {
		return sample{}, fmt.Errorf("sender output %q", out)
	}
	return sample{offered: float64(sent) / span, delivered: float64(rx1-rx0) / span}, nil
}

// udpReceived returns the datagrams the UDP layer of namespace ns took in: InDatagrams (read by
// a socket) plus InErrors (dropped: a full receive buffer, a bad checksum), from /proc/net/snmp.
func udpReceived(ns string) (uint64, error) {
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").Output()
	if err != nil {
		return 0, fmt.Errorf("/proc/net/snmp in %s: %w", ns, err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		var n uint64
		for i, name := range names {
			if i < len(f) && (name == "InDatagrams" || name == "InErrors") {
				v, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("/proc/net/snmp in %s: %s %q: %w", ns, name, f[i], err)
				}
				n += v
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("/proc/net/snmp in %s: no Udp counters", ns)
}

// sendBatch is how many datagrams one sendmmsg call offers.
const sendBatch = 64

// send writes size-byte datagrams to addr for dur, sendBatch per sendmmsg call, and prints
// "datagrams seconds": how many the socket accepted and over how long.
func send(addr string, size int, dur time.Duration) {
	ua, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		fatal(err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fatal(err)
	}
	sa := &unix.SockaddrInet4{Port: ua.Port}
	copy(sa.Addr[:], ua.IP.To4())
	if err := unix.Connect(fd, sa); err != nil {
		fatal(err)
	}
	payload := make([]byte, size)
	iov := unix.Iovec{Base: &payload[0]}
	iov.SetLen(len(payload))
	msgs := make([]unix.Mmsghdr, sendBatch)
	for i := range msgs {
		msgs[i].Hdr.Iov = &iov
		msgs[i].Hdr.SetIovlen(1)
	}
	var sent int64
	start := time.Now()
	end := start.Add(dur)
	for i := 0; ; i++ {
		if i&15 == 0 && time.Now().After(end) {
			break
		}
		// ENOBUFS or ECONNREFUSED: the batch is lost, as it would be; only what the socket
		// accepted counts as offered.
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), sendBatch, 0, 0, 0)
		if e == 0 {
			sent += int64(n)
		}
	}
	fmt.Println(sent, time.Since(start).Seconds())
}

// sink binds addr with the smallest receive buffer and never reads, so datagrams are dropped at
// the socket (the receiving side costs the same on every path, and no ICMP port-unreachable flows
// back); it prints "listening" and exits when its standard input closes.
func sink(addr string) {
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		fatal(err)
	}
	c.(*net.UDPConn).SetReadBuffer(0)
	fmt.Println("listening")
	io.Copy(io.Discard, os.Stdin)
	c.Close()
}

// tcpPort is the port of the TCP measurement's sink.
const tcpPort = "5201"

// measureTCP runs one TCP stream along p for b.dur and returns the bits per second the sink
// received, from its first byte to the end of the stream.
func (b *bench) measureTCP(p path) (float64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	target := net.JoinHostPort(p.dstIP, tcpPort)
	snk := exec.Command("ip", "netns", "exec", p.dst, self, "-role", "tcpsink", "-addr", target)
	sout, err := snk.StdoutPipe()
	if err != nil {
		return 0, err
	}
	snk.Stderr = os.Stderr
	if err := snk.Start(); err != nil {
		return 0, err
	}
	defer func() { snk.Process.Kill(); snk.Wait() }() // a no-op after a normal end
	sc := bufio.NewScanner(sout)
	if !sc.Scan() || sc.Text() != "listening" {
		return 0, errors.New("TCP sink did not start")
	}
	secs := strconv.FormatFloat(b.dur.Seconds(), 'f', 3, 64)
	if out, err := exec.Command("ip", "netns", "exec", p.src, self, "-role", "tcpsend", "-addr", target, "-seconds", secs).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("TCP sender: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if !sc.Scan() {
		return 0, errors.New("TCP sink printed no count")
	}
	var n int64
	var span float64
	if _, err := fmt.Sscan(sc.Text(), &n, &span); err != nil || span <= 0 || n == 0 {
		return 0, fmt.Errorf("TCP sink output %q", sc.Text())
	}
	return float64(n) * 8 / span, nil
}

// tcpSend connects to addr and writes 64 KiB buffers for dur.
func tcpSend(addr string, dur time.Duration) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fatal(err)
	}
	buf := make([]byte, 64<<10)
	c.SetWriteDeadline(time.Now().Add(dur))
	for {
		if _, err := c.Write(buf); err != nil {
			break // the deadline
		}
	}
	c.Close()
}

// tcpSink accepts one connection on addr, reads it to the end and prints "bytes seconds", the
// seconds from the first byte to the end of the stream.
func tcpSink(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fatal(err)
	}
	fmt.Println("listening")
	l.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	c, err := l.Accept()
	if err != nil {
		fatal(err)
	}
	buf := make([]byte, 256<<10)
	var n int64
	var first time.Time
	for {
		k, err := c.Read(buf)
		if k > 0 && n == 0 {
			first = time.Now()
		}
		n += int64(k)
		if err != nil {
			break
		}
	}
	fmt.Println(n, time.Since(first).Seconds())
}

// idleCPU starts a second manad with ports TAPs up and no traffic, and returns the share of one
// CPU it used over window.
func (b *bench) idleCPU(ports int, window time.Duration) (float64, error) {
	ns, err := b.ns("idle")
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(b.dir, "idle")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, err
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[daemon]\nsocket = %q\nstate_dir = %q\nlog_level = \"warn\"\n", filepath.Join(dir, "manad.sock"), filepath.Join(dir, "state"))
	for i := 0; i < ports; i++ {
		fmt.Fprintf(&cfg, "[[port]]\nname = \"idle%d\"\nnetns = %q\nsegment = \"s%d\"\npersistent = false\n", i, ns, i/2)
	}
	path := filepath.Join(dir, "manad.toml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		return 0, err
	}
	if err := b.startManad(path); err != nil {
		return 0, err
	}
	pid := b.td.LastProc().Process.Pid
	for i := 0; i < ports; i++ {
		if err := run("ip", "-n", ns, "link", "set", fmt.Sprintf("idle%d", i), "up"); err != nil {
			return 0, err
		}
	}
	time.Sleep(time.Second) // let the ports come up and IPv6 autoconfiguration settle
	t0, err := cpuTicks(pid)
	if err != nil {
		return 0, err
	}
	time.Sleep(window)
	t1, err := cpuTicks(pid)
	if err != nil {
		return 0, err
	}
	const hz = 100 // USER_HZ
	return float64(t1-t0) / hz / window.Seconds(), nil
}

// cpuTicks is utime+stime of pid, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

func report(paths []path, res map[string]map[int][]sample, tcp map[string][]float64, idle float64, rounds int, dur time.Duration, asJSON bool, extra []benchrow.Row) {
	var out []benchrow.Row
	for _, p := range paths {
		for _, sz := range sizes {
			ss, relay := res[p.name][sz], res["taprelay"][sz]
			if len(ss) == 0 {
				continue // --iperf
			}
			var del, off, ratios, bound, relayBound []float64
			for i, s := range ss {
				relayBound = append(relayBound, relay[i].delivered/relay[i].offered)
				del, off = append(del, s.delivered), append(off, s.offered)
				ratios = append(ratios, s.delivered/relay[i].delivered)
				bound = append(bound, s.delivered/s.offered)
			}
			v, o, r := benchrow.StatOf(del), benchrow.StatOf(off), benchrow.StatOf(ratios)
			x := benchrow.Row{Issue: 4, BaselineName: "taprelay", Figure: fmt.Sprintf("UDP %d B, %s", sz, p.name), Value: v.Median, Min: v.Min, Max: v.Max, Rounds: len(ss),
				Unit: "pps", Baseline: benchrow.StatOf(relayDelivered(relay)).Median, Ratio: r.Median, RatioMin: r.Min, RatioMax: r.Max,
				Offered: o.Median, SenderBound: benchrow.StatOf(bound).Median >= senderBound,
				PeerSenderBound: p.name != "taprelay" && benchrow.StatOf(relayBound).Median >= senderBound}
			if p.name == "taprelay" { // the peer of the others; against itself it says nothing
				x.Baseline, x.BaselineName, x.Ratio, x.RatioMin, x.RatioMax = 0, "", 0, 0, 0
			}
			if p.name == "manad fragment" || p.name == "manad full-page" { // issue 4's two modes
				x.Target = fmt.Sprintf("ratio ≥ %.1f", target)
			}
			out = append(out, x)
		}
	}
	for _, p := range paths {
		if len(tcp[p.name]) == 0 {
			continue // --udp
		}
		var mbps, ratios []float64
		for i, v := range tcp[p.name] {
			mbps = append(mbps, v/1e6)
			ratios = append(ratios, v/tcp["taprelay"][i])
		}
		v, r := benchrow.StatOf(mbps), benchrow.StatOf(ratios)
		x := benchrow.Row{Issue: 4, Figure: "TCP stream, " + p.name, Value: v.Median, Min: v.Min, Max: v.Max, Rounds: len(mbps), Unit: "Mbit/s"}
		if p.name != "taprelay" {
			x.Baseline, x.BaselineName = benchrow.StatOf(tcp["taprelay"]).Median/1e6, "taprelay"
			x.Ratio, x.RatioMin, x.RatioMax = r.Median, r.Min, r.Max
		}
		out = append(out, x)
	}
	if idle >= 0 {
		out = append(out, benchrow.Row{Issue: 4, Figure: "idle manad, 16 ports", Value: idle * 100, Min: idle * 100, Max: idle * 100, Rounds: 1,
			Unit: "% of one CPU", Target: "< 0.5%"}) // under half a percent of one CPU: nothing a user could measure
	}
	out = append(out, extra...)
	if asJSON {
		if err := benchrow.Encode(os.Stdout, out); err != nil {
			fmt.Fprintln(os.Stderr, "udppps:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("UDP packets per second between two namespaces: median [min–max] of %d rounds of %v; baseline = taprelay\n\n", rounds, dur)
	fmt.Printf("%-44s %26s %10s %8s %10s  %s\n", "figure", "value", "baseline", "ratio", "offered", "target")
	for _, r := range out {
		base, ratio, off := "", "", ""
		if r.Baseline != 0 {
			base = fmt.Sprintf("%.0f", r.Baseline)
		}
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		if r.Offered != 0 {
			off = fmt.Sprintf("%.0f", r.Offered)
		}
		val := fmt.Sprintf("%.0f [%.0f–%.0f] %s", r.Value, r.Min, r.Max, r.Unit)
		if r.Unit == "CPU s/GB" {
			val = fmt.Sprintf("%.2f [%.2f–%.2f] %s", r.Value, r.Min, r.Max, r.Unit)
		}
		if r.Unit == "% of one CPU" {
			val = fmt.Sprintf("%.3f%s", r.Value, r.Unit[:1])
		}
		if r.SenderBound {
			off += " (sender-bound)"
		}
		fmt.Printf("%-44s %26s %10s %8s %10s  %s\n", r.Figure, val, base, ratio, off, r.Target)
	}
}

func relayDelivered(ss []sample) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = s.delivered
	}
	return out
}
