// Command uringfloor is a model (it runs no manad code) of issue 29's question: can a polled
// ping round trip through a user-space forwarder between two TAPs come within 3× a veth pair's
// when the forwarder's frames cost no system call each? manad's poller pays a read and a writev
// per frame, about 3.3 µs each on this VM (daemon/datapath's doc: Polling); io_uring with an
// SQPOLL thread moves those calls to a kernel thread that polls the submission ring.
//
//	uringfloor [-n N] [-rounds R] [-chunk C] [-v VARIANT,...] [-yield D] [-sqidle D] [-sqcpu N] [-fwdcpu N]
//	uringfloor -smoke
//
// Each variant is two network namespaces, each with an address on one device, and a client
// process in the first pinging the second (ICMP echo, 64 bytes, one round trip after the other,
// as ping -s 56 does; the second's kernel answers):
//
//   - veth: a veth pair, the kernel's own path (its reply is made inside the client's sendto).
//   - poll: a TAP in each namespace, and a forwarder in this process that busy-polls both with
//     non-blocking read(2) and write(2) on one locked thread: what manad's poller does, a system
//     call per frame and per empty look (the baseline model).
//   - uring-sqpoll: the same TAPs and loop, the reads and writes submitted through io_uring with
//     IORING_SETUP_SQPOLL: one READ always in flight on each TAP (armed on its poll queue until a
//     frame comes), a WRITE to the other TAP and the next READ queued on each completion, which
//     the forwarder's thread reads by polling the mapped CQ ring; no system call at all while
//     the SQPOLL thread is awake.
//   - uring-mshot: uring-sqpoll with one multishot read armed on each TAP for good
//     (IORING_OP_READ_MULTISHOT into a provided-buffer ring): no read to queue and arm again per
//     frame; a buffer goes back to the ring when its write completes.
//   - uring-enter: the same without SQPOLL: one io_uring_enter per batch submitted, completions
//     polled as before (the reads' completions run as task work on the forwarder's thread), to
//     tell the ring's effect from the kernel thread's.
//
// The variants take turns in chunks of C round trips (the order rotating), so that every one
// sees the same load; only the variant whose turn it is has its forwarder running (the others'
// threads block, and an SQPOLL thread sleeps sqidle after its last work). Every busy loop yields
// its CPU (sched_yield) after yield without work, as manad's poller does (datapath.YieldAfter). Printed
// per round: p1, p50 and p99 of the round trip, p50 over veth's p50 in the same round, and CPU
// seconds per million round trips: the whole process's (getrusage: the forwarder's thread, the
// SQPOLL thread and the rest), and of it the forwarder's thread and the SQPOLL thread
// (/proc/self/task/TID/schedstat). Needs root; the namespaces go on every way out.
//
// What it showed (the 2-vCPU PVM guest of issue 29, kernel 6.18, load average 2.4–2.6 with this
// program running; 5 rounds of 20,000 pings; veth's p50 6.0–6.4 µs; ratio: p50 over veth's p50 in
// the same round): no variant reached 3× veth in any round. poll: p50 21.8–23.7 µs, 3.57–3.75×
// (median 3.69×), p1 16.8–20.3 µs, p99 75–85 µs, 26–30 CPU s per million round trips (its thread).
// uring-sqpoll: p50 20.3–44.5 µs, 3.27–7.12× (median 3.76×; 6.33× in a second run), p1 17.0–19.3
// µs, p99 113–146 µs, 73–81 s/M (the forwarder's thread 31–43, the SQPOLL thread 34–42: two CPUs
// spinning). uring-mshot: 3.26–7.36× (median 6.89×), the same CPU. uring-enter: 6.86–7.25×, 41–51
// s/M. In other runs the best round of either SQPOLL variant was 3.05–3.21× (never yielding, or
// each thread bound to a CPU of its own), and their p50 jumped between rounds from about 20 µs to
// about 44 µs, where poll's stayed within 2 µs. Taking every system call off the forwarder did not
// lower the floor: the fastest 1 % of io_uring round trips is no faster than poll's, so what keeps
// a forwarded ping above 3× is not the forwarder's system calls but what every forwarder adds to
// veth's path: the client sleeps in its read and another thread wakes it, on a machine whose two
// CPUs both spin; with io_uring each frame also crosses from the forwarder's thread to the SQPOLL
// thread and back (SQ ring, the read's completion as task work, CQ ring). Loaded by another
// benchmark (load average 3.4–5.7), both SQPOLL variants fell apart (p99 1.8–9 ms, p50 up to 7×)
// where poll kept p99 at 120–170 µs; the SQPOLL thread and the forwarder bound to the same CPU
// made every round trip 8 ms (the SQPOLL thread gives the CPU up only at the tick).
//
// bench: smoke-only (a model, not a row of the report)
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/bench/internal/teardown"
	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/internal/nsrun"
	"github.com/manad/manad/internal/rrclient"
)

var (
	n        = flag.Int("n", 20000, "round trips per variant and round")
	rounds   = flag.Int("rounds", 3, "rounds: one table each")
	chunk    = flag.Int("chunk", 500, "round trips per turn (the variants take turns)")
	variants = flag.String("v", "veth,poll,uring-sqpoll,uring-mshot,uring-enter", "comma-separated variants")
	yield    = flag.Duration("yield", datapath.YieldAfter, "a busy loop yields its CPU after this long without work (0: never)")
	sqIdle   = flag.Duration("sqidle", 2*time.Millisecond, "the SQPOLL thread sleeps after this long without work")
	sqCPU    = flag.Int("sqcpu", -1, "bind the SQPOLL thread to this CPU (IORING_SETUP_SQ_AFF; -1: not bound)")
	fwdCPU   = flag.Int("fwdcpu", -1, "bind the forwarder's thread to this CPU (-1: not bound)")
	smoke    = flag.Bool("smoke", false, "every variant, one short round")
	client   = flag.String("client", "", "internal: be the ping client NETNS,SRC,DST")
)

// warm is how many round trips of each turn are not counted: the forwarder's and the SQPOLL
// thread's first after their pause.
const warm = 20

// Each variant's two namespaces have the same addresses and MACs; they never meet.
var (
	ipA, ipB   = "10.99.0.1", "10.99.0.2"
	macA, macB = "02:75:66:00:00:01", "02:75:66:00:00:02"
)

func main() {
	flag.Parse()
	var err error
	if *client != "" {
		err = runClient(*client)
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "uringfloor:", err)
		os.Exit(1)
	}
}

// variant is one path between two namespaces, with its forwarder (nil for veth), its client
// and what a round measured.
type variant struct {
	name   string
	nsA    string
	fwd    *forwarder
	client *pinger

	lat               []time.Duration
	proc, thread, sqp time.Duration
	trips             int
	p1, p50, p99      float64
}

func run() error {
	names := strings.Split(*variants, ",")
	if *smoke {
		*n, *rounds, *chunk = 300, 1, 100
	}
	if *n < 1 || *chunk < 1 || *rounds < 1 {
		return fmt.Errorf("-n, -chunk and -rounds must be positive: %w", unix.EINVAL)
	}
	var td teardown.List
	defer td.Run()
	stop := td.OnSignal()
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var vs []*variant
	for _, name := range names {
		v, err := setup(&td, exe, name)
		if errors.Is(err, errRingUnavailable) {
			fmt.Printf("%s: skipped: %v\n", name, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		vs = append(vs, v)
	}
	defer func() {
		for _, v := range vs {
			if v.fwd != nil {
				v.fwd.close()
			}
		}
	}()
	if len(vs) == 0 || vs[0].name != "veth" {
		return fmt.Errorf("the first variant must be veth, the ratios' peer: %w", unix.EINVAL)
	}
	fmt.Printf("uringfloor: a model (no manad code); ping 64 B namespace to namespace, %d round trips per variant and round, in turns of %d\n", *n, *chunk)
	ratios := map[string][]float64{}
	for r := range *rounds {
		if err := measureRound(vs, r); err != nil {
			return err
		}
		fmt.Printf("round %d (load average %s)\n", r+1, loadavg())
		fmt.Printf("%-13s %7s %7s %7s %8s %11s %11s %11s\n", "variant", "p1-µs", "p50-µs", "p99-µs", "p50/veth", "proc-s/M", "thread-s/M", "sqpoll-s/M")
		for _, v := range vs {
			ratio := v.p50 / vs[0].p50
			ratios[v.name] = append(ratios[v.name], ratio)
			per := func(d time.Duration) string {
				return fmt.Sprintf("%.2f", d.Seconds()*1e6/float64(v.trips))
			}
			sqp := "-"
			if v.fwd != nil && v.fwd.sqpTID != 0 {
				sqp = per(v.sqp)
			}
			th := "-"
			if v.fwd != nil {
				th = per(v.thread)
			}
			fmt.Printf("%-13s %7.1f %7.1f %7.1f %8.2f %11s %11s %11s\n", v.name, v.p1, v.p50, v.p99, ratio, per(v.proc), th, sqp)
		}
	}
	if *rounds > 1 {
		fmt.Printf("p50/veth over %d rounds: median (min–max)\n", *rounds)
		for _, v := range vs[1:] {
			s := slices.Sorted(slices.Values(ratios[v.name]))
			fmt.Printf("%-13s %.2f (%.2f–%.2f)\n", v.name, s[len(s)/2], s[0], s[len(s)-1])
		}
	}
	for _, v := range vs {
		if v.fwd != nil && v.fwd.drops > 0 {
			fmt.Printf("%s: %d frames dropped (a failed TAP write)\n", v.name, v.fwd.drops)
		}
	}
	if w := ioWorkers(); w > 0 {
		fmt.Printf("io_uring punted to %d io-wq worker threads (a READ or WRITE that could not be done or armed inline)\n", w)
	}
	return nil
}

// measureRound makes n round trips of every variant, chunk by chunk, the order rotating, and
// sets each variant's figures.
func measureRound(vs []*variant, round int) error {
	for _, v := range vs {
		v.lat, v.proc, v.thread, v.sqp, v.trips = v.lat[:0], 0, 0, 0, 0
	}
	for turn := 0; turn*(*chunk) < *n; turn++ {
		k := min(*chunk, *n-turn*(*chunk))
		for i := range vs {
			v := vs[(i+turn+round)%len(vs)]
			if err := v.turn(k); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
		}
	}
	for _, v := range vs {
		slices.Sort(v.lat)
		q := func(p float64) float64 {
			return float64(v.lat[min(len(v.lat)-1, int(p*float64(len(v.lat))))]) / 1e3
		}
		v.p1, v.p50, v.p99 = q(0.01), q(0.5), q(0.99)
	}
	return nil
}

// turn runs v's forwarder for k counted round trips (after warm uncounted ones) and adds them
// and the CPU they took to v's figures.
func (v *variant) turn(k int) error {
	if v.fwd != nil {
		v.fwd.resume()
	}
	_, err := v.client.RoundTrips(warm)
	var lat []time.Duration
	p0, t0, s0 := processCPU(), v.fwd.threadCPU(), v.fwd.sqpCPU()
	if err == nil {
		lat, err = v.client.RoundTrips(k)
	}
	p1, t1, s1 := processCPU(), v.fwd.threadCPU(), v.fwd.sqpCPU()
	if v.fwd != nil {
		err = errors.Join(err, v.fwd.pause())
	}
	if err != nil {
		return err
	}
	v.lat = append(v.lat, lat...)
	v.proc += p1 - p0
	v.thread += t1 - t0
	v.sqp += s1 - s0
	v.trips += k
	return nil
}

// setup builds variant name's namespaces, devices, forwarder and client.
func setup(td *teardown.List, exe, name string) (*variant, error) {
	v := &variant{name: name, nsA: fmt.Sprintf("uf%d-%s-a", os.Getpid(), name)}
	nsB := fmt.Sprintf("uf%d-%s-b", os.Getpid(), name)
	var devA, devB string
	switch name {
	case "veth", "poll", "uring-sqpoll", "uring-mshot", "uring-enter":
	default:
		return nil, fmt.Errorf("unknown variant (veth, poll, uring-sqpoll, uring-mshot, uring-enter): %w", unix.EINVAL)
	}
	for _, ns := range []string{v.nsA, nsB} {
		td.NetNS(ns)
		if err := cmd("ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		// No IPv6: no router solicitation or DAD frame crosses the path while it is timed.
		_ = cmd("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	if name == "veth" {
		devA, devB = "v0", "v1"
		if err := cmd("ip", "link", "add", devA, "netns", v.nsA, "type", "veth", "peer", "name", devB, "netns", nsB); err != nil {
			return nil, err
		}
	} else {
		devA, devB = "t0", "t1"
		nonblock := name == "poll"
		a, err := openTAP(v.nsA, devA, nonblock)
		if err != nil {
			return nil, err
		}
		b, err := openTAP(nsB, devB, nonblock)
		if err != nil {
			unix.Close(a)
			return nil, err
		}
		if v.fwd, err = newForwarder(name, [2]int{a, b}); err != nil {
			return nil, err
		}
	}
	for _, s := range []struct{ ns, dev, mac, ip, peerIP, peerMAC string }{
		{v.nsA, devA, macA, ipA, ipB, macB}, {nsB, devB, macB, ipB, ipA, macA},
	} {
		// Permanent neighbours: no ARP frame crosses the path either.
		if err := errors.Join(
			cmd("ip", "-n", s.ns, "link", "set", s.dev, "address", s.mac, "up"),
			cmd("ip", "-n", s.ns, "addr", "add", s.ip+"/24", "dev", s.dev),
			cmd("ip", "-n", s.ns, "neigh", "replace", s.peerIP, "lladdr", s.peerMAC, "dev", s.dev, "nud", "permanent"),
		); err != nil {
			v.fwd.close()
			return nil, err
		}
	}
	var err error
	if v.client, err = startPinger(td, exe, v.nsA); err != nil {
		v.fwd.close()
		return nil, err
	}
	return v, nil
}

// cmd runs a command and returns its output in the error when it fails.
func cmd(a ...string) error {
	if out, err := exec.Command(a[0], a[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(a, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// openTAP creates TAP name (one queue, no packet information, no virtio-net header) in
// namespace ns and returns its file descriptor, non-blocking when nonblock is set. The TAP goes
// when the descriptor is closed or the namespace deleted.
func openTAP(ns, name string, nonblock bool) (int, error) {
	fd := -1
	err := nsrun.In(ns, func() error {
		flags := unix.O_RDWR | unix.O_CLOEXEC
		if nonblock {
			flags |= unix.O_NONBLOCK
		}
		var err error
		if fd, err = unix.Open("/dev/net/tun", flags, 0); err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		var ifr [unix.IFNAMSIZ + 64]byte
		copy(ifr[:], name)
		*(*uint16)(unsafe.Pointer(&ifr[unix.IFNAMSIZ])) = unix.IFF_TAP | unix.IFF_NO_PI
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", name, e)
		}
		return nil
	})
	return fd, err
}

// loadavg returns /proc/loadavg's three load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// processCPU is the user and system CPU time of this process, every thread of it (the SQPOLL
// thread, a thread of the process, too).
func processCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// taskCPU is the CPU time of thread tid of this process (schedstat's first field, in ns); 0
// when it cannot be read.
func taskCPU(tid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}

// tasksNamed returns the threads of this process whose name starts with prefix.
func tasksNamed(prefix string) []int {
	ents, _ := os.ReadDir("/proc/self/task")
	var out []int
	for _, e := range ents {
		comm, err := os.ReadFile("/proc/self/task/" + e.Name() + "/comm")
		if err != nil || !strings.HasPrefix(string(comm), prefix) {
			continue
		}
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, tid)
		}
	}
	return out
}

// ioWorkers counts io_uring's io-wq worker threads of this process.
func ioWorkers() int { return len(tasksNamed("iou-wrk")) }

// pinger is a running client process (runClient), in a namespace of its own.
type pinger = rrclient.Client

// startPinger starts the ping client in namespace ns, pinging ipB from ipA, and adds it to td.
func startPinger(td *teardown.List, exe, ns string) (*pinger, error) {
	c := exec.Command(exe, "-client", ns+","+ipA+","+ipB)
	c.Stderr = os.Stderr
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	td.Proc(c)
	return &pinger{In: in, Out: bufio.NewReaderSize(out, 1<<20)}, nil
}

// runClient is the client process of spec NETNS,SRC,DST: ICMP echo round trips from SRC to DST
// (rrclient.Serve), counts read from stdin and latencies written to stdout.
func runClient(spec string) error {
	p := strings.Split(spec, ",")
	if len(p) != 3 {
		return fmt.Errorf("client spec %q is not NETNS,SRC,DST: %w", spec, unix.EINVAL)
	}
	src, dst := net.ParseIP(p[1]).To4(), net.ParseIP(p[2]).To4()
	if src == nil || dst == nil {
		return fmt.Errorf("client spec %q: bad address: %w", spec, unix.EINVAL)
	}
	return rrclient.Serve(p[0], rrclient.ICMP, src, dst, 0, os.Stdin, os.Stdout)
}

// forwarder moves frames between two TAPs on one goroutine locked to its thread, in turns:
// resume starts it polling, pause stops it (its thread blocks until the next resume).
type forwarder struct {
	fds       [2]int
	pass      func() (bool, error) // one look at both TAPs; true when it moved a frame
	ring      *ring                // the io_uring variants'
	closeRing func()               // closes it and its buffer ring
	bufs      []byte               // their buffers, mmap'd
	tid       int                  // the forwarder's thread
	sqpTID    int                  // the ring's SQPOLL thread, 0 without one
	drops     uint64

	stop    atomic.Bool
	resumeC chan struct{}
	pausedC chan error
}

// newForwarder starts the forwarder of variant name between the TAPs fds, paused. It owns fds
// from then on, and closes them when it fails.
func newForwarder(name string, fds [2]int) (*forwarder, error) {
	f := &forwarder{fds: fds, resumeC: make(chan struct{}), pausedC: make(chan error)}
	if name != "poll" {
		if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) == "2" {
			f.close()
			return nil, fmt.Errorf("kernel.io_uring_disabled is 2: %w", errRingUnavailable)
		}
	}
	var init func() error
	switch name {
	case "poll":
		buf := make([]byte, 65536)
		f.pass = func() (bool, error) { return f.pollPass(buf) }
	case "uring-sqpoll", "uring-enter", "uring-mshot":
		sqpoll := name != "uring-enter"
		var before []int
		if sqpoll {
			before = tasksNamed("iou-sqp")
		}
		var err error
		if f.ring, err = newRing(64, sqpoll, *sqIdle, *sqCPU); err != nil {
			f.close()
			return nil, err
		}
		// The SQPOLL thread names itself once it runs: wait for it.
		for deadline := time.Now().Add(time.Second); sqpoll && f.sqpTID == 0 && time.Now().Before(deadline); {
			for _, t := range tasksNamed("iou-sqp") {
				if !slices.Contains(before, t) {
					f.sqpTID = t
				}
			}
			time.Sleep(time.Millisecond)
		}
		u := &uringState{f: f}
		f.closeRing = func() {
			f.ring.close()
			if u.br != nil {
				u.br.close()
			}
		}
		if err := u.init(name == "uring-mshot"); err != nil {
			f.close()
			return nil, err
		}
		f.pass, init = u.pass, u.start
		if u.br != nil {
			f.pass, init = u.passMultishot, u.startMultishot
		}
	}
	ready := make(chan error)
	go f.loop(init, ready)
	if err := <-ready; err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// loop is the forwarder's goroutine. Its thread stays locked to it to the end (the ring's task
// work, without SQPOLL, runs on the thread that submitted).
func (f *forwarder) loop(init func() error, ready chan<- error) {
	runtime.LockOSThread()
	f.tid = unix.Gettid()
	if *fwdCPU >= 0 {
		var set unix.CPUSet
		set.Set(*fwdCPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			ready <- fmt.Errorf("bind the forwarder to CPU %d: %w", *fwdCPU, err)
			return
		}
	}
	if init != nil {
		if err := init(); err != nil {
			ready <- err
			return
		}
	}
	ready <- nil
	for range f.resumeC {
		f.pausedC <- f.spin()
	}
}

// spin runs passes until pause, yielding the CPU after yield without work (as manad's poller:
// datapath.YieldAfter).
func (f *forwarder) spin() error {
	last := time.Now()
	for !f.stop.Load() {
		found, err := f.pass()
		if err != nil {
			return err
		}
		now := time.Now()
		if found {
			last = now
		} else if *yield > 0 && now.Sub(last) >= *yield {
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			last = now
		}
	}
	return nil
}

func (f *forwarder) resume() { f.resumeC <- struct{}{} }

// pause stops the forwarder and returns the error that stopped it, if any. With SQPOLL it
// waits until the SQPOLL thread sleeps (sqidle after its last work), so that it does not spin
// into the next variant's turn.
func (f *forwarder) pause() error {
	f.stop.Store(true)
	err := <-f.pausedC
	f.stop.Store(false)
	if f.ring != nil && f.ring.sqpoll {
		for deadline := time.Now().Add(time.Second + *sqIdle); f.ring.sqFlags.Load()&sqNeedWakeup == 0; {
			if time.Now().After(deadline) {
				return errors.Join(err, fmt.Errorf("the SQPOLL thread did not sleep within %v of its last work", time.Second+*sqIdle))
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return err
}

// close ends the forwarder (paused) and closes its ring and TAPs; f may be nil.
func (f *forwarder) close() {
	if f == nil {
		return
	}
	close(f.resumeC)
	if f.closeRing != nil {
		f.closeRing()
	}
	if f.bufs != nil {
		_ = unix.Munmap(f.bufs)
	}
	unix.Close(f.fds[0])
	unix.Close(f.fds[1])
}

// threadCPU and sqpCPU are the CPU times of f's thread and SQPOLL thread; 0 for a nil f.
func (f *forwarder) threadCPU() time.Duration {
	if f == nil {
		return 0
	}
	return taskCPU(f.tid)
}

func (f *forwarder) sqpCPU() time.Duration {
	if f == nil || f.sqpTID == 0 {
		return 0
	}
	return taskCPU(f.sqpTID)
}

// pollPass reads each TAP once (non-blocking) and writes what it read to the other one: the
// reply the kernel makes inside the write to the second TAP is read in the same pass.
func (f *forwarder) pollPass(buf []byte) (bool, error) {
	found := false
	for s := range 2 {
		k, err := unix.Read(f.fds[s], buf)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			return found, fmt.Errorf("read: %w", err)
		}
		found = true
		if _, err := unix.Write(f.fds[1-s], buf[:k]); err != nil {
			f.drops++ // a full TAP queue drops the frame, as a wire would
		}
	}
	return found, nil
}

// The io_uring forwarder's SQE tags (user_data): a write's, or a read's with its side; the low
// 16 bits are the buffer's index.
const (
	tagWrite = 1 << 63
	tagSide1 = 1 << 16
)

// ringBufs is how many frame buffers the io_uring forwarder has: one read in flight on each TAP
// and the writes of the frames before (each done inside its submission).
const ringBufs, bufSize = 32, 2048

// uringState is the io_uring forwarder's: its buffers and which are free, or with multishot
// reads the provided-buffer ring they are in.
type uringState struct {
	f    *forwarder
	free []uint16
	br   *bufRing
}

// init maps the buffers (outside the Go heap: the kernel writes them whenever a read
// completes); with multishot, it puts them all in a provided-buffer ring, group 0.
func (u *uringState) init(multishot bool) error {
	var err error
	u.f.bufs, err = unix.Mmap(-1, 0, ringBufs*bufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap buffers: %w", err)
	}
	if multishot {
		if u.br, err = u.f.ring.registerBufRing(ringBufs, 0); err != nil {
			return err
		}
		for i := range uint16(ringBufs) {
			u.br.add(u.buf(i), i)
		}
		u.br.publish()
		return nil
	}
	for i := range ringBufs {
		u.free = append(u.free, uint16(i))
	}
	return nil
}

func (u *uringState) buf(i uint16) []byte { return u.f.bufs[int(i)*bufSize : int(i+1)*bufSize] }

// push queues an SQE, submitting what is queued while the SQ ring is full.
func (u *uringState) push(op uint8, fd int, buf []byte, tag uint64) error {
	for !u.f.ring.queue(op, fd, buf, tag) {
		if err := u.f.ring.submit(); err != nil {
			return err
		}
	}
	return nil
}

// read queues a read on side s into a free buffer.
func (u *uringState) read(s int) error {
	b := u.free[len(u.free)-1]
	u.free = u.free[:len(u.free)-1]
	return u.readInto(s, b)
}

func (u *uringState) readInto(s int, b uint16) error {
	return u.push(opRead, u.f.fds[s], u.buf(b), uint64(s)*tagSide1|uint64(b))
}

// start puts a read in flight on each TAP, from the forwarder's thread.
func (u *uringState) start() error {
	if err := errors.Join(u.read(0), u.read(1)); err != nil {
		return err
	}
	return u.f.ring.submit()
}

// pass handles every completion posted: a frame read on one side is written to the other and
// the side's next read queued; a write gives its buffer back. What it queued is submitted at
// the end, as one batch.
func (u *uringState) pass() (bool, error) {
	r := u.f.ring
	head, tail := r.completions()
	if head == tail {
		return false, nil
	}
	for i := head; i != tail; i++ {
		c := r.cqe(i)
		b := uint16(c.userData)
		if c.userData&tagWrite != 0 {
			if c.res < 0 {
				u.f.drops++
			}
			u.free = append(u.free, b)
			continue
		}
		s := int(c.userData / tagSide1 & 1)
		switch {
		case c.res > 0 && len(u.free) > 0:
			err := errors.Join(
				u.push(opWrite, u.f.fds[1-s], u.buf(b)[:c.res], tagWrite|uint64(b)),
				u.read(s))
			if err != nil {
				return true, err
			}
		case c.res > 0: // no buffer free: drop the frame, read into its buffer again
			u.f.drops++
			fallthrough
		case c.res == 0 || c.res == -int32(unix.EAGAIN) || c.res == -int32(unix.EINTR):
			if err := u.readInto(s, b); err != nil {
				return true, err
			}
		default:
			return true, fmt.Errorf("read: %w", unix.Errno(-c.res))
		}
	}
	r.done(tail)
	return true, r.submit()
}

// startMultishot arms a multishot read on each TAP, from the forwarder's thread.
func (u *uringState) startMultishot() error {
	if err := errors.Join(u.readMultishot(0), u.readMultishot(1)); err != nil {
		return err
	}
	return u.f.ring.submit()
}

func (u *uringState) readMultishot(s int) error {
	for !u.f.ring.queueMultishot(u.f.fds[s], 0, uint64(s)*tagSide1) {
		if err := u.f.ring.submit(); err != nil {
			return err
		}
	}
	return nil
}

// passMultishot is pass with multishot reads: a frame's completion names the buffer the kernel
// took from the ring, which is written to the other side and goes back to the ring when the
// write completes; a read that ended (no IORING_CQE_F_MORE: the ring ran out of buffers, or an
// error) is armed again.
func (u *uringState) passMultishot() (bool, error) {
	r := u.f.ring
	head, tail := r.completions()
	if head == tail {
		return false, nil
	}
	added := false
	for i := head; i != tail; i++ {
		c := r.cqe(i)
		if c.userData&tagWrite != 0 {
			if c.res < 0 {
				u.f.drops++
			}
			b := uint16(c.userData)
			u.br.add(u.buf(b), b)
			added = true
			continue
		}
		s := int(c.userData / tagSide1 & 1)
		switch {
		case c.res > 0 && c.flags&cqeFBuffer != 0:
			b := uint16(c.flags >> cqeBufferShift)
			if err := u.push(opWrite, u.f.fds[1-s], u.buf(b)[:c.res], tagWrite|uint64(b)); err != nil {
				return true, err
			}
		case c.res == -int32(unix.ENOBUFS):
			u.f.drops++ // every buffer in a write: the frame stays queued on the TAP
		case c.res < 0 && c.res != -int32(unix.EAGAIN) && c.res != -int32(unix.EINTR):
			return true, fmt.Errorf("multishot read: %w", unix.Errno(-c.res))
		}
		if c.flags&cqeFMore == 0 {
			if err := u.readMultishot(s); err != nil {
				return true, err
			}
		}
	}
	if added {
		u.br.publish()
	}
	r.done(tail)
	return true, r.submit()
}
