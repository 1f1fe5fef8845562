package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/internal/nsrun"
)

// env is one run's world: a manad process with every table's ports, the namespaces they live
// in, and a control client per namespace. The namespace plumbing (entering a namespace, sockets
// and commands inside one) is internal/nsrun's, which tests/harness uses too; this program has
// no testing.TB, so it starts the daemon itself.
type env struct {
	dir     string
	manad   string // binary
	netns   []string
	cmd     *exec.Cmd
	done    chan error
	clients map[string]*client.Client // by namespace
	closers []func()
}

// newEnv builds (or takes) the manad binary and returns an empty env; close undoes everything.
func newEnv(manadBin string) (*env, error) {
	dir, err := os.MkdirTemp("", "seeds-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, manad: manadBin, clients: map[string]*client.Client{}}
	if e.manad == "" {
		e.manad = filepath.Join(dir, "manad")
		// Without the race detector: rates of an instrumented daemon say little.
		if out, err := exec.Command("go", "build", "-o", e.manad, "./cmd/manad").CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("go build ./cmd/manad: %v\n%s", err, out)
		}
	}
	return e, nil
}

// ns creates a uniquely named network namespace (deleted by close).
func (e *env) ns(suffix string) (string, error) {
	n := nsrun.Name("sd", suffix)
	if _, err := nsrun.Output("", "ip", "netns", "add", n); err != nil {
		return "", err
	}
	e.netns = append(e.netns, n)
	return n, nil
}

// run runs a command inside ns ("" = here), its output in the error.
func run(ns string, args ...string) error {
	if out, err := nsrun.Output(ns, args...); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out))
	}
	return nil
}

// start writes the configuration (ports: [[port]] tables) and starts manad, waiting until it
// answers on its socket and has logged that it is ready.
func (e *env) start(ports string) error {
	sock := filepath.Join(e.dir, "manad.sock")
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\nlog_level = \"info\"\n%s", sock, filepath.Join(e.dir, "state"), ports)
	path := filepath.Join(e.dir, "manad.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	logPath := filepath.Join(e.dir, "manad.log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	e.cmd = exec.Command(e.manad, "--config", path)
	e.cmd.Stdout, e.cmd.Stderr = log, log
	if err := e.cmd.Start(); err != nil {
		log.Close()
		return err
	}
	e.done = make(chan error, 1)
	go func() { e.done <- e.cmd.Wait(); log.Close() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "manad ready") {
			return nil
		}
		select {
		case err := <-e.done:
			e.cmd = nil
			return fmt.Errorf("manad exited during startup: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("manad not ready after 30s\n%s", b)
		}
	}
}

// client returns the control client of namespace ns, dialled from inside it (the daemon
// resolves device names in the caller's namespace).
func (e *env) client(ns string) (*client.Client, error) {
	if c, ok := e.clients[ns]; ok {
		return c, nil
	}
	var c *client.Client
	err := nsrun.In(ns, func() (err error) {
		c, err = client.Dial(filepath.Join(e.dir, "manad.sock"))
		return err
	})
	if err != nil {
		return nil, err
	}
	e.clients[ns] = c
	return c, nil
}

// close stops manad (SIGTERM, then SIGKILL after 20 s), deletes the namespaces and the
// directory. Errors: manad not exiting 0.
func (e *env) close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	for _, c := range e.clients {
		c.Close()
	}
	if e.cmd != nil {
		e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-e.done:
			if err != nil {
				errs = append(errs, fmt.Errorf("manad exited with %v", err))
			}
		case <-time.After(20 * time.Second):
			e.cmd.Process.Kill()
			<-e.done
			errs = append(errs, errors.New("manad did not stop on SIGTERM"))
		}
	}
	for _, n := range e.netns {
		if err := run("", "ip", "netns", "del", n); err != nil {
			errs = append(errs, err)
		}
	}
	os.RemoveAll(e.dir)
	return errors.Join(errs...)
}

// addr puts ip/24 on dev in ns and brings it up.
func addr(ns, dev, ip string) error {
	return errors.Join(run(ns, "ip", "addr", "add", ip+"/24", "dev", dev), run(ns, "ip", "link", "set", dev, "up"))
}

// portCounters are the counters of one port that the tables use, read over the manad family.
type portCounters struct {
	rxPackets, txPackets, shortHeadroom, allocSlow uint64
	pools                                          int // page pools of the port the netdev family lists
}

// counters reads port dev (in ns): STATS_GET for the packet counters, PORT_GET for the
// short-headroom counter (as show-rxbuf shows it), and the netdev family's page-pool stats for
// the pages the port's pools took from the allocator.
func (e *env) counters(ctx context.Context, ns, dev string) (portCounters, error) {
	c, err := e.client(ns)
	if err != nil {
		return portCounters{}, err
	}
	st, err := c.Stats(ctx, client.Interface{Name: dev})
	if err != nil {
		return portCounters{}, fmt.Errorf("%s: %w", dev, err)
	}
	var pc portCounters
	for _, s := range st {
		// The per-queue counters are rx_N_packets and tx_N_packets (mana_get_strings).
		if q, ok := strings.CutPrefix(s.Name, "rx_"); ok && len(q) > 0 && q[0] >= '0' && q[0] <= '9' && strings.HasSuffix(q, "_packets") {
			pc.rxPackets += s.Value
		}
		if q, ok := strings.CutPrefix(s.Name, "tx_"); ok && len(q) > 0 && q[0] >= '0' && q[0] <= '9' && strings.HasSuffix(q, "_packets") {
			pc.txPackets += s.Value
		}
	}
	p, err := c.Port(ctx, client.Interface{Name: dev})
	if err != nil {
		return portCounters{}, fmt.Errorf("%s: %w", dev, err)
	}
	pc.shortHeadroom = p.RxShortHeadroom
	pools, err := c.PagePoolStats(ctx)
	if err != nil {
		return portCounters{}, fmt.Errorf("page-pool stats: %w", err)
	}
	for _, pp := range pools {
		if pp.Info.Ifindex == p.Device.Index {
			pc.allocSlow += pp.AllocSlow
			pc.pools++
		}
	}
	return pc, nil
}

// settled reads dev's counters once its packet counters have stopped moving (two reads 50 ms
// apart agree): the frames still queued after a sender stopped have been counted. Errors:
// those of counters, or counters still moving after 5 s.
func (e *env) settled(ctx context.Context, ns, dev string) (portCounters, error) {
	last, err := e.counters(ctx, ns, dev)
	if err != nil {
		return last, err
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		now, err := e.counters(ctx, ns, dev)
		if err != nil {
			return now, err
		}
		if now.rxPackets == last.rxPackets && now.txPackets == last.txPackets {
			return now, nil
		}
		last = now
	}
	return last, fmt.Errorf("%s: counters still moving 5s after the sender stopped", dev)
}

// port returns the manad view of port dev in ns.
func (e *env) port(ctx context.Context, ns, dev string) (*wire.PortInfo, error) {
	c, err := e.client(ns)
	if err != nil {
		return nil, err
	}
	return c.Port(ctx, client.Interface{Name: dev})
}

// udpFlood sends payload-byte datagrams to dst from flows sockets in ns (one source port each,
// so RSS spreads them) as fast as they are accepted, for window, and returns how many the
// sockets accepted. A datagram refused with ENOBUFS or ECONNREFUSED is lost, as on a real sender.
func udpFlood(ns, dst string, payload, flows int, window time.Duration) (uint64, error) {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flows {
		c, err := nsrun.Dial(ns, "udp", dst)
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
	}
	var sent atomic.Uint64
	var wg sync.WaitGroup
	end := time.Now().Add(window)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, payload)
			var n uint64
			for i := 0; ; i++ {
				if i&63 == 0 && time.Now().After(end) {
					break
				}
				if _, err := c.Write(buf); err == nil {
					n++
				}
			}
			sent.Add(n)
		}()
	}
	wg.Wait()
	return sent.Load(), nil
}

// tcpStreams runs n TCP streams from src to addr (a listener in dst) for window and returns the
// bits per second the receivers read, over the window.
func tcpStreams(src, dst, addr string, n int, window time.Duration) (float64, error) {
	l, err := nsrun.Listen(dst, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	accepted := make(chan net.Conn, n)
	go func() {
		for range n {
			c, err := l.Accept()
			if err != nil {
				return // the listener closed: a dial failed
			}
			accepted <- c
		}
	}()
	var conns, peers []net.Conn
	defer func() {
		for _, c := range append(conns, peers...) {
			c.Close()
		}
	}()
	for range n {
		c, err := nsrun.Dial(src, "tcp", addr)
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
	}
	for range n {
		select {
		case c := <-accepted:
			peers = append(peers, c)
		case <-time.After(10 * time.Second):
			return 0, fmt.Errorf("%d of %d TCP streams to %s accepted after 10s", len(peers), n, addr)
		}
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	for _, c := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			for {
				k, err := c.Read(buf)
				got.Add(int64(k))
				if err != nil {
					return // EOF once the sender closes, or the deferred Close
				}
			}
		}()
	}
	t0 := time.Now()
	end := t0.Add(window)
	var swg sync.WaitGroup
	for _, c := range conns {
		swg.Add(1)
		go func() {
			defer swg.Done()
			buf := make([]byte, 64<<10)
			c.SetWriteDeadline(end)
			for {
				if _, err := c.Write(buf); err != nil {
					return // the deadline
				}
			}
		}()
	}
	swg.Wait()
	bits := float64(got.Load()) * 8 / time.Since(t0).Seconds()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	if bits == 0 {
		return 0, fmt.Errorf("%d TCP streams to %s carried nothing", n, addr)
	}
	return bits, nil
}

// attachGenericDrop attaches an XDP program that drops every frame to dev in ns in generic
// (skb) mode — what the seed 003 thread's `xdp-bench drop` in skb-mode does: the kernel runs it
// on each skb after the driver (here manad, through the TAP) built it. The link is closed by
// e.close.
func (e *env) attachGenericDrop(ns, dev string) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "seeds_drop", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1 /* XDP_DROP */), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("load XDP drop program: %w", err)
	}
	var l link.Link
	err = nsrun.In(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifi.Index, Flags: link.XDPGenericMode})
		return err
	})
	if err != nil {
		prog.Close()
		return fmt.Errorf("attach generic XDP to %s: %w", dev, err)
	}
	e.closers = append(e.closers, func() { l.Close(); prog.Close() })
	return nil
}

// arrivals receives datagrams on a socket in ns and records the longest gap between two
// consecutive ones in each marked interval: the blackout of a flip under load.
type arrivals struct {
	c        net.PacketConn
	mu       sync.Mutex
	last     time.Time
	marking  bool
	maxGap   time.Duration
	received atomic.Uint64
	done     chan struct{}
}

func newArrivals(ns, addr string) (*arrivals, error) {
	c, err := nsrun.ListenPacket(ns, addr)
	if err != nil {
		return nil, err
	}
	c.(*net.UDPConn).SetReadBuffer(4 << 20)
	a := &arrivals{c: c, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			now := time.Now()
			a.received.Add(1)
			a.mu.Lock()
			if a.marking && !a.last.IsZero() && now.Sub(a.last) > a.maxGap {
				a.maxGap = now.Sub(a.last)
			}
			a.last = now
			a.mu.Unlock()
		}
	}()
	return a, nil
}

// mark starts (on) or ends (off) an interval; ending it returns the longest gap seen in it,
// counting the one still open at its end.
func (a *arrivals) mark(on bool) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.marking = on
	if on {
		a.maxGap = 0
		return 0
	}
	if open := time.Since(a.last); open > a.maxGap {
		a.maxGap = open
	}
	return a.maxGap
}

func (a *arrivals) close() { a.c.Close(); <-a.done }
