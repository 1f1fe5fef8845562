// Command rttfloor measures the floor under tests/integration's BenchmarkGetRoundTrip: the round
// trip of a request/response ping-pong between two processes on this machine over a Unix socket,
// against the kernel's ethtool CHANNELS_GET of a veth (that benchmark's kernel peer) in the same
// run, each iteration one of each, the order alternating. It tells what ratio two processes can
// reach at all, and which side's wake-up costs most.
//
//	rttfloor [-n N] [-rounds R] [-v TYPE/CLIENT/SERVER,...]
//	rttfloor -smoke
//
// A variant is a socket type (seqpacket, stream, dgram: a socketpair, the server a child process
// of this one) and how each side waits for the other's message: netpoll (net.Conn Read, parked
// on the Go runtime's network poller, as manad's server and genl/client do), block (a blocking
// read(2) on a blocking fd) or blocklock (the same on a goroutine locked to its thread). The
// request is 48 bytes and the reply 132, about a CHANNELS_GET's. Printed per variant: the p50 of
// each round trip and the ratio, one table per round. Needs root (the veth lives in a network
// namespace of its own, deleted on exit). Run it under flock /work/wt/bench.lock like any
// benchmark.
//
// What it showed (2 cores shared with other load, p50 over kernel p50 in the same run): seqpacket
// netpoll/netpoll 1.3–1.7×, a blocking server 0.8×, a blocking client 0.85–0.9×, both blocking
// 0.6×. The blocking waits did not carry over to manad and genl/client: in an A/B of the same
// runs (BenchmarkGetRoundTrip's messages, the machine loaded), a ppoll(2) wait on the reading
// goroutine's thread in place of the netpoller made the ratio worse on either side — manad's
// request loop waiting so for 50 ms after each answer: 0.73–1.29× → 0.95–2.97×; genl/client
// waiting so for its reply: 2–60 % worse. Likely because in a runtime with other threads the
// thread back from a blocking syscall has to get a P again (sysmon retakes it after 20 µs),
// where this program's runtime is otherwise idle. What did carry over is polling without
// parking (genl/busypoll): manad's loop polling for the next request and genl/client for its
// reply brought BenchmarkGetRoundTrip's ratios from 1.5-2.6× to 0.6-1.8× in the same runs;
// either side alone did not help.
//
// bench: smoke-only (a model, not a row of the report)
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/internal/nsrun"
)

const reqLen, repLen = 48, 132

var (
	n       = flag.Int("n", 20000, "round trips per variant")
	rounds  = flag.Int("rounds", 1, "rounds: one table each")
	variant = flag.String("v", "", "comma-separated variants TYPE/CLIENT/SERVER (default: all)")
	smoke   = flag.Bool("smoke", false, "run two variants briefly")
	server  = flag.String("server", "", "internal: run the server side, waiting this way, on fd 3")
)

func typeOf(s string) (int, error) {
	switch s {
	case "stream":
		return unix.SOCK_STREAM, nil
	case "seqpacket":
		return unix.SOCK_SEQPACKET, nil
	case "dgram":
		return unix.SOCK_DGRAM, nil
	}
	return 0, fmt.Errorf("unknown socket type %q: %w", s, unix.EINVAL)
}

// serve answers every message read on fd 3 with a repLen one until the peer goes away.
func serve(mode string) error {
	f := os.NewFile(3, "sock")
	buf := make([]byte, 4096)
	rep := make([]byte, repLen)
	switch mode {
	case "netpoll":
		c, err := net.FileConn(f)
		if err != nil {
			return err
		}
		for {
			if _, err := c.Read(buf); err != nil {
				return nil
			}
			if _, err := c.Write(rep); err != nil {
				return nil
			}
		}
	case "block", "blocklock":
		if mode == "blocklock" {
			runtime.LockOSThread()
		}
		fd := int(f.Fd())
		if err := unix.SetNonblock(fd, false); err != nil {
			return err
		}
		for {
			if n, err := unix.Read(fd, buf); err != nil || n == 0 {
				return nil
			}
			if _, err := unix.Write(fd, rep); err != nil {
				return nil
			}
		}
	}
	return fmt.Errorf("unknown wait %q: %w", mode, unix.EINVAL)
}

type roundTrip func() error

// client returns one round trip over fd, waiting as mode says, and its closer; it owns fd.
func client(mode string, fd int) (roundTrip, func(), error) {
	req := make([]byte, reqLen)
	buf := make([]byte, 4096)
	switch mode {
	case "netpoll":
		f := os.NewFile(uintptr(fd), "c")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		return func() error {
			if _, err := c.Write(req); err != nil {
				return err
			}
			_, err := c.Read(buf)
			return err
		}, func() { c.Close() }, nil
	case "block", "blocklock":
		if err := unix.SetNonblock(fd, false); err != nil {
			unix.Close(fd)
			return nil, nil, err
		}
		return func() error {
			if _, err := unix.Write(fd, req); err != nil {
				return err
			}
			_, err := unix.Read(fd, buf)
			return err
		}, func() { unix.Close(fd) }, nil
	}
	unix.Close(fd)
	return nil, nil, fmt.Errorf("unknown wait %q: %w", mode, unix.EINVAL)
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// kernelPeer makes a namespace with a 16-queue veth and returns a CHANNELS_GET of it over
// generic netlink and the cleanup that deletes the namespace.
func kernelPeer() (roundTrip, func(), error) {
	ns := fmt.Sprintf("rttfloor%d", os.Getpid())
	run := func(a ...string) error {
		if out, err := exec.Command(a[0], a[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(a, " "), err, out)
		}
		return nil
	}
	if err := run("ip", "netns", "add", ns); err != nil {
		return nil, nil, err
	}
	var c *genetlink.Conn
	cleanup := func() {
		if c != nil {
			c.Close()
		}
		_ = run("ip", "netns", "del", ns)
	}
	fail := func(err error) (roundTrip, func(), error) { cleanup(); return nil, nil, err }
	if err := run("ip", "-n", ns, "link", "add", "rt0", "numrxqueues", "16", "numtxqueues", "16",
		"type", "veth", "peer", "name", "rt1", "numrxqueues", "16", "numtxqueues", "16"); err != nil {
		return fail(err)
	}
	if err := nsrun.In(ns, func() (err error) { c, err = genetlink.Dial(&netlink.Config{Strict: true}); return err }); err != nil {
		return fail(err)
	}
	fam, err := c.GetFamily("ethtool")
	if err != nil {
		return fail(err)
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_CHANNELS_HEADER, func(n *netlink.AttributeEncoder) error {
		n.String(unix.ETHTOOL_A_HEADER_DEV_NAME, "rt0")
		return nil
	})
	data, err := ae.Encode()
	if err != nil {
		return fail(err)
	}
	m := genetlink.Message{Header: genetlink.Header{Command: unix.ETHTOOL_MSG_CHANNELS_GET, Version: fam.Version}, Data: data}
	return func() error {
		_, err := c.Execute(m, fam.ID, netlink.Request)
		return err
	}, cleanup, nil
}

// measure runs one variant: n round trips of it and of kern, alternating, after a warm-up.
func measure(v string, kern roundTrip, n int) (pm, pk time.Duration, err error) {
	p := strings.Split(v, "/")
	if len(p) != 3 {
		return 0, 0, fmt.Errorf("variant %q is not TYPE/CLIENT/SERVER: %w", v, unix.EINVAL)
	}
	typ, err := typeOf(p[0])
	if err != nil {
		return 0, 0, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("socketpair: %w", err)
	}
	sf := os.NewFile(uintptr(fds[1]), "s")
	cmd := exec.Command("/proc/self/exe", "-server", p[2])
	cmd.ExtraFiles = []*os.File{sf}
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	sf.Close()
	if err != nil {
		unix.Close(fds[0])
		return 0, 0, err
	}
	defer func() {
		_ = cmd.Process.Kill() // a datagram socket sees no end of file
		_ = cmd.Wait()
	}()
	if p[1] == "blocklock" {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	c, closeC, err := client(p[1], fds[0])
	if err != nil {
		return 0, 0, err
	}
	defer closeC()
	const warm = 200
	var tm, tk []time.Duration
	timed := func(f roundTrip, into *[]time.Duration) error {
		t0 := time.Now()
		if err := f(); err != nil {
			return err
		}
		*into = append(*into, time.Since(t0))
		return nil
	}
	for i := range n + warm {
		if i%2 == 0 {
			err = errors.Join(timed(c, &tm), timed(kern, &tk))
		} else {
			err = errors.Join(timed(kern, &tk), timed(c, &tm))
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return p50(tm[warm:]), p50(tk[warm:]), nil
}

func run() error {
	var all []string
	for _, t := range []string{"seqpacket", "stream", "dgram"} {
		for _, cm := range []string{"netpoll", "block", "blocklock"} {
			for _, sm := range []string{"netpoll", "block", "blocklock"} {
				all = append(all, t+"/"+cm+"/"+sm)
			}
		}
	}
	if *variant != "" {
		all = strings.Split(*variant, ",")
	}
	if *smoke {
		all, *n, *rounds = []string{"seqpacket/netpoll/netpoll", "seqpacket/block/block"}, 500, 1
	}
	kern, cleanup, err := kernelPeer()
	if err != nil {
		return err
	}
	defer cleanup()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGTERM, unix.SIGINT)
	go func() { <-sig; cleanup(); os.Exit(1) }()
	for range *rounds {
		fmt.Printf("%-30s %9s %9s %7s\n", "type/client/server", "p50-µs", "kernel-µs", "ratio")
		for _, v := range all {
			pm, pk, err := measure(v, kern, *n)
			if err != nil {
				return fmt.Errorf("%s: %w", v, err)
			}
			fmt.Printf("%-30s %9.1f %9.1f %7.2f\n", v, float64(pm)/1e3, float64(pk)/1e3, float64(pm)/float64(pk))
		}
	}
	return nil
}

func main() {
	flag.Parse()
	var err error
	if *server != "" {
		err = serve(*server)
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rttfloor:", err)
		os.Exit(1)
	}
}
