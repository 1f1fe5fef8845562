package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon"
	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The load test: loadClients concurrent clients send loadRequests mixed GET/SET requests while
// a TCP stream runs between two of the ports.
const (
	loadClients  = 32
	loadRequests = 10000
)

// A settable field of a port, and its value as the load test sets it.
type field int

const (
	fieldFlags    field = iota // PrivFlags: full-page-rx
	fieldRings                 // RxRing, TxRing
	fieldChannels              // Queues
	numFields
)

var fieldNames = [numFields]string{"priv-flags", "rings", "channels"}

type value [2]uint32

// setRecord is one successful SET: what it set, and when it was sent and answered.
type setRecord struct {
	f          field
	v          value
	start, end time.Time
}

// portTrack follows the SETs sent to one port. On a serialised port the test takes mu around
// each SET, so the successful SETs are applied in the order they succeed and last holds the
// expected final value of each field. On the other port SETs race each other; the daemon's
// order is then known only up to overlapping requests, so every successful SET is recorded with
// its interval (see finalCandidates).
type portTrack struct {
	name, ns string
	serial   bool
	initial  [numFields]value

	mu   sync.Mutex
	last [numFields]*value
	sets []setRecord
}

func (p *portTrack) record(r setRecord) {
	if p.serial {
		p.last[r.f] = &r.v // under mu, taken by the caller around the request
		return
	}
	p.mu.Lock()
	p.sets = append(p.sets, r)
	p.mu.Unlock()
}

// finalCandidates returns the values field f may end with on an unserialised port: those of the
// successful SETs that no other successful SET of f certainly followed (one sent after it was
// answered), or the initial value when none succeeded. The daemon applies SETs one at a time
// under its configuration lock, so the last one it applied is among these.
func (p *portTrack) finalCandidates(f field) []value {
	var ok []setRecord
	for _, s := range p.sets {
		if s.f == f {
			ok = append(ok, s)
		}
	}
	if len(ok) == 0 {
		return []value{p.initial[f]}
	}
	var out []value
	for _, s := range ok {
		followed := false
		for _, o := range ok {
			if o.start.After(s.end) {
				followed = true
				break
			}
		}
		if !followed && !slices.Contains(out, s.v) {
			out = append(out, s.v)
		}
	}
	return out
}

// readFields reads a port's three fields through the ethtool family, and checks that the manad
// family's PORT_GET agrees.
func readFields(t testing.TB, c *client.Client, name string) [numFields]value {
	t.Helper()
	ctx, ifi := bg(t), client.Interface{Name: name}
	pf, err := c.PrivateFlags(ctx, ifi)
	require.NoError(t, err)
	rings, err := c.Rings(ctx, ifi)
	require.NoError(t, err)
	ch, err := c.Channels(ctx, ifi)
	require.NoError(t, err)
	var out [numFields]value
	for _, f := range pf.Flags {
		if f.Name == "full-page-rx" && f.On {
			out[fieldFlags][0] = 1
		}
	}
	out[fieldRings] = value{rings.Rx, rings.Tx}
	out[fieldChannels] = value{ch.Combined}
	info := portInfo(t, c, name)
	manad := [numFields]value{{info.PrivFlags & 1}, {info.RxRing, info.TxRing}, {info.Queues}}
	assert.Equal(t, out, manad, "%s: ethtool family says %v, manad family %v", name, out, manad)
	return out
}

// loadResult sums up a load run.
type loadResult struct {
	requests, sets, setsOK, badSets, gets atomic.Int64
	failures                              []string
	mu                                    sync.Mutex
}

func (r *loadResult) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) < 20 {
		r.failures = append(r.failures, fmt.Sprintf(format, args...))
	}
}

// runLoad runs the load against the daemon serving socket, whose ports are ports (the first
// two, on one segment with addresses, carry a TCP stream; SETs to the third are not serialised),
// and checks everything the load must leave behind except the daemon's shutdown.
func runLoad(t *testing.T, socket string, ports []portDef, seed uint64) {
	ctx := bg(t)
	dial := func(ns string) *client.Client {
		var c *client.Client
		require.NoError(t, harness.InNetNS(ns, func() (err error) { c, err = client.Dial(socket); return err }))
		return c
	}
	ctl := map[string]*client.Client{}
	for _, ns := range namespaces(ports) {
		ctl[ns] = dial(ns)
	}
	defer func() {
		for _, c := range ctl {
			c.Close()
		}
	}()
	tracks := map[string]*portTrack{}
	byNS := map[string][]*portTrack{}
	for i, p := range ports {
		tr := &portTrack{name: p.name, ns: p.ns, serial: i < 2, initial: readFields(t, ctl[p.ns], p.name)}
		tracks[p.name] = tr
		byNS[p.ns] = append(byNS[p.ns], tr)
	}

	tr, err := harness.StartTransfer(ports[0].ns, ports[1].ns, ports[1].ip+":5301", 0, seed)
	require.NoError(t, err)
	rxBefore := rxPackets(t, ctl[ports[1].ns], ports[1].name)

	clients := make([]*client.Client, loadClients)
	nss := namespaces(ports)
	for i := range clients {
		clients[i] = dial(nss[i%len(nss)])
	}
	var res loadResult
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			mine := byNS[nss[i%len(nss)]]
			for next.Add(1) <= loadRequests {
				res.requests.Add(1)
				p := mine[rng.IntN(len(mine))]
				loadOne(ctx, c, p, rng, &res)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, c := range clients {
		c.Close()
	}
	tr.Stop()
	assert.NoError(t, tr.Check(), "TCP stream during the load")
	rxAfter := rxPackets(t, ctl[ports[1].ns], ports[1].name)
	t.Logf("%d requests from %d clients in %v (%.0f/s): %d GETs, %d SETs (%d succeeded), %d invalid SETs refused; "+
		"TCP stream meanwhile: %d MiB intact, port %s received %d packets",
		res.requests.Load(), loadClients, elapsed.Round(time.Millisecond), float64(res.requests.Load())/elapsed.Seconds(),
		res.gets.Load(), res.sets.Load(), res.setsOK.Load(), res.badSets.Load(), tr.Sent>>20, ports[1].name, rxAfter-rxBefore)
	for _, f := range res.failures {
		t.Error(f)
	}
	assert.Equal(t, int64(loadRequests), res.requests.Load(), "%d requests sent, want %d", res.requests.Load(), loadRequests)
	assert.NotEqual(t, int64(0), res.setsOK.Load(), "the load lacked GETs, successful SETs or refused SETs")
	assert.NotEqual(t, int64(0), res.gets.Load(), "the load lacked GETs, successful SETs or refused SETs")
	assert.NotEqual(t, int64(0), res.badSets.Load(), "the load lacked GETs, successful SETs or refused SETs")

	// Final state: each port's fields equal its last successful SET.
	for _, p := range ports {
		track := tracks[p.name]
		got := readFields(t, ctl[p.ns], p.name)
		for f := field(0); f < numFields; f++ {
			var want []value
			if track.serial {
				want = []value{track.initial[f]}
				if track.last[f] != nil {
					want = []value{*track.last[f]}
				}
			} else {
				want = track.finalCandidates(f)
			}
			assert.True(t, slices.Contains(want, got[f]), "port %s %s is %v, want %v (serialised SETs: %v)", p.name, fieldNames[f], got[f], want, track.serial)
		}
		if !track.serial {
			t.Logf("port %s (concurrent SETs): %d successful SETs; final values %v", p.name, len(track.sets), got)
		}
	}
	// Every port runs, and with the traffic stopped every RX buffer is back in its pool.
	for _, p := range ports {
		c := ctl[p.ns]
		if !poll(10*time.Second, func() bool {
			i := portInfo(t, c, p.name)
			return i.Running && !i.Detached && !i.ResetPending && i.BuffersInFlight == 0
		}) {
			i := portInfo(t, c, p.name)
			t.Errorf("port %s after the load: running %v detached %v reset pending %v, %d buffers in flight",
				p.name, i.Running, i.Detached, i.ResetPending, i.BuffersInFlight)
		}
	}
	waitPing(t, ports[0].ns, ports[1].ip)
}

// loadOne sends one random request to port p and checks its answer.
func loadOne(ctx context.Context, c *client.Client, p *portTrack, rng *rand.Rand, res *loadResult) {
	ifi := client.Interface{Name: p.name}
	want := func(op string, err error, errno unix.Errno) {
		if errnoOf(err) != errno || (err != nil && errno == 0) {
			res.fail("%s %s: %v, want errno %d (%v)", op, p.name, err, errno, errno)
		}
	}
	get := func(op string, err error, sane bool) {
		res.gets.Add(1)
		want(op, err, 0)
		if err == nil && !sane {
			res.fail("%s %s: implausible answer", op, p.name)
		}
	}
	set := func(f field, v value, do func() error) {
		res.sets.Add(1)
		if p.serial {
			p.mu.Lock()
			defer p.mu.Unlock()
		}
		r := setRecord{f: f, v: v, start: time.Now()}
		err := do()
		r.end = time.Now()
		want("SET "+fieldNames[f], err, 0)
		if err == nil {
			res.setsOK.Add(1)
			p.record(r)
		}
	}
	bad := func(op string, err error, errno unix.Errno) {
		res.badSets.Add(1)
		want(op, err, errno)
	}
	switch n := rng.IntN(100); {
	case n < 10:
		pf, err := c.PrivateFlags(ctx, ifi)
		get("PRIVFLAGS_GET", err, err != nil || (len(pf.Flags) == 1 && pf.Flags[0].Name == "full-page-rx"))
	case n < 20:
		r, err := c.Rings(ctx, ifi)
		get("RINGS_GET", err, err != nil || ((r.Rx == 128 || r.Rx == 256) && (r.Tx == 128 || r.Tx == 256) && r.RxMax == 8192))
	case n < 30:
		ch, err := c.Channels(ctx, ifi)
		get("CHANNELS_GET", err, err != nil || (ch.Combined >= 1 && ch.Combined <= 4 && ch.CombinedMax == 8))
	case n < 40:
		i, err := c.Port(ctx, ifi)
		get("PORT_GET", err, err != nil || (i.Device.Name == p.name && i.PageSize == 16384))
	case n < 45:
		all, err := c.Ports(ctx)
		get("PORT_GET dump", err, err != nil || len(all) >= 1)
	case n < 55:
		st, err := c.Stats(ctx, ifi)
		get("STATS_GET", err, err != nil || len(st) > 0)
	case n < 62:
		id, wantN := uint32(ethtool.SSPrivFlags), 1
		if rng.IntN(2) == 0 {
			id, wantN = ethtool.SSStats, 0
		}
		s, err := c.StringSet(ctx, ifi, id)
		get("STRSET_GET", err, err != nil || (wantN == 0 && len(s) > 0) || (wantN == 1 && len(s) == 1 && s[0] == "full-page-rx"))
	case n < 72:
		on := rng.IntN(2) == 0
		v := value{}
		if on {
			v[0] = 1
		}
		set(fieldFlags, v, func() error {
			return c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: ifi, Flags: []client.Flag{{Name: "full-page-rx", On: on}}})
		})
	case n < 82:
		rx, tx := uint32(128<<rng.IntN(2)), uint32(128<<rng.IntN(2))
		set(fieldRings, value{rx, tx}, func() error {
			return c.SetRings(ctx, ifi, client.RingsUpdate{Rx: &rx, Tx: &tx})
		})
	case n < 92:
		comb := uint32(1 + rng.IntN(4))
		set(fieldChannels, value{comb}, func() error {
			return c.SetChannels(ctx, ifi, client.ChannelsUpdate{Combined: &comb})
		})
	case n < 94:
		bad("SET rings rx 64", c.SetRings(ctx, ifi, client.RingsUpdate{Rx: ptr(uint32(64))}), unix.EINVAL)
	case n < 96:
		bad("SET channels combined 9", c.SetChannels(ctx, ifi, client.ChannelsUpdate{Combined: ptr(uint32(9))}), unix.EINVAL)
	case n < 98:
		// ethnl_parse_bit: "bit name not found" is EOPNOTSUPP in the kernel too.
		bad("SET priv-flags no-such-flag", c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: ifi, Flags: []client.Flag{{Name: "no-such-flag", On: true}}}), unix.EOPNOTSUPP)
	default:
		all, err := c.AllRings(ctx)
		get("RINGS_GET dump", err, err != nil || len(all) >= 1)
	}
}

// loadPorts are the load test's ports: A and B carry traffic between two namespaces, C shares
// A's namespace on its own segment and gets unserialised SETs.
func loadPorts(prefix string) []portDef {
	nsA, nsB := harness.Name(prefix, "a"), harness.Name(prefix, "b")
	return []portDef{
		{name: harness.Name(prefix, "0"), ns: nsA, segment: prefix + "1", ip: "10.213.0.1"},
		{name: harness.Name(prefix, "1"), ns: nsB, segment: prefix + "1", ip: "10.213.0.2"},
		{name: harness.Name(prefix, "2"), ns: nsA, segment: prefix + "2"},
	}
}

// TestLoadInProcess runs the load against the daemon package running in this process, so that
// after Run returns goleak can check that no goroutine of the daemon, the genl server, the
// datapath or the port model outlived it.
func TestLoadInProcess(t *testing.T) {
	testenv.RequireRoot(t)
	ignore := goleak.IgnoreCurrent()
	ports := loadPorts("rli")
	dir := t.TempDir()
	socket := filepath.Join(dir, "manad.sock")
	cfgText := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n%s", socket, filepath.Join(dir, "state"), portsTOML(ports))
	cfgPath := filepath.Join(dir, "manad.toml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfgText), 0o644))
	t.Cleanup(func() {
		for _, ns := range namespaces(ports) {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err)
	logf, err := os.Create(filepath.Join(dir, "manad.log"))
	require.NoError(t, err)
	defer logf.Close()
	ready := make(chan struct{})
	d, err := daemon.New(daemon.Options{
		Config: cfg, Logger: slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Ready: func() { close(ready) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	select {
	case <-ready:
	case err := <-ran:
		t.Fatalf("daemon.Run returned during startup: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("daemon not ready after a minute")
	}
	addressUp(t, ports)

	runLoad(t, socket, ports, 71)

	cancel()
	select {
	case err := <-ran:
		assert.NoError(t, err, "daemon.Run")
	case <-time.After(time.Minute):
		t.Fatal("daemon.Run did not return a minute after its context ended")
	}
	log, _ := os.ReadFile(logf.Name())
	checkShutdownLog(t, string(log), ports)
	goleak.VerifyNone(t, ignore)
}

// TestLoad runs the load against the real manad binary. Goroutines cannot be counted from
// outside; the same code runs in TestLoadInProcess under goleak. Here the daemon's open file
// descriptors (connections, TAP queues) must come back to what they were before the clients
// connected, and the shutdown must report every RX buffer returned.
func TestLoad(t *testing.T) {
	ports := loadPorts("rlb")
	r := startRig(t, "", "", ports)
	pid := peerPID(t, r.d.Socket)
	// The baseline, once manad has closed its end of peerPID's connection: the count stops
	// changing.
	fdsBefore := openFDs(t, pid)
	poll(5*time.Second, func() bool {
		time.Sleep(50 * time.Millisecond)
		n := openFDs(t, pid)
		stable := n == fdsBefore
		fdsBefore = n
		return stable
	})

	runLoad(t, r.d.Socket, ports, 72)

	if !poll(10*time.Second, func() bool { return openFDs(t, pid) <= fdsBefore }) {
		t.Errorf("manad has %d open file descriptors after the load's clients left, %d before", openFDs(t, pid), fdsBefore)
	}
	r.d.Stop()
	checkShutdownLog(t, r.d.Log(), ports)
}

// checkShutdownLog checks that every port reported all its RX buffers back at shutdown.
func checkShutdownLog(t *testing.T, log string, ports []portDef) {
	t.Helper()
	for _, p := range ports {
		assert.Contains(t, log, `msg="port stopped: every RX buffer returned" port=`+p.name+" ", "no \"every RX buffer returned\" for port %s in the shutdown log", p.name)
	}
	assert.NotContains(t, log, "still in flight", "shutdown with RX buffers in flight:\n%s", lastLines(log, 20))
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
