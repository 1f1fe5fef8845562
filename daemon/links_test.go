package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startTest runs a daemon with n small ports in namespace ns until the test ends.
func startTest(t *testing.T, ns string, n int, opts Options) (*Daemon, []string) {
	t.Helper()
	d, names, stop := startStoppable(t, ns, n, opts)
	t.Cleanup(func() {
		assert.NoError(t, stop(), "Run")
	})
	return d, names
}

// startStoppable is startTest with the stop left to the caller: stop ends Run and returns its
// error (call it exactly once). opts.Logger, when set, receives the daemon's logs.
func startStoppable(t *testing.T, ns string, n int, opts Options) (*Daemon, []string, func() error) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nsocket = %q\nstate_dir = %q\n", dir+"/manad.sock", dir+"/state")
	names := make([]string, n)
	for i := range names {
		names[i] = taptest.Name("dl")
		fmt.Fprintf(&b, "[[port]]\nname = %q\nnetns = %q\nsegment = %[1]q\nqueues = 1\nmax_queues = 1\nrx_ring = 128\ntx_ring = 128\npersistent = false\n", names[i], ns)
	}
	d, stop := runStoppable(t, b.String(), opts)
	return d, names, stop
}

// runStoppable starts a daemon from the configuration text doc and waits until it is ready (30 s
// at most: a daemon that never gets ready fails the test). stop ends Run and returns its error;
// call it exactly once. opts.Logger, when set, receives the daemon's logs.
func runStoppable(t *testing.T, doc string, opts Options) (*Daemon, func() error) {
	t.Helper()
	cfg, err := config.Parse("test.toml", []byte(doc))
	require.NoError(t, err)
	ready := make(chan struct{})
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts.Config, opts.Ready = cfg, func() { close(ready) }
	d, err := New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop := func() error {
		cancel()
		return <-done
	}
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		if err := stop(); err != nil {
			t.Logf("Run: %v", err)
		}
		t.Fatal("the daemon did not get ready")
	}
	return d, stop
}

// runTest is runStoppable with the stop at the test's cleanup.
func runTest(t *testing.T, doc string, opts Options) *Daemon {
	t.Helper()
	d, stop := runStoppable(t, doc, opts)
	t.Cleanup(func() {
		assert.NoError(t, stop(), "Run")
	})
	return d
}

// TestLinkOverrunResync gives the daemon's link watcher the smallest receive buffer and changes
// every port's TAP in bursts until the watcher overruns: the notifications lost must not leave
// any port with a state its TAP does not have.
func TestLinkOverrunResync(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	const n = 32
	d, names := startTest(t, ns, n, Options{LinkReadBuffer: 1})
	d.mu.Lock()
	w := d.watchers[d.ports[names[0]].ns].w
	d.mu.Unlock()
	before := w.Overruns()
	for round := 0; ; round++ {
		require.NotEqual(t, 20, round, "no overrun after 20 bursts")
		up := round%2 == 0
		mtu := 1400 + round
		var cmds []string
		for _, name := range names {
			cmds = append(cmds, fmt.Sprintf("link set %s mtu %d %s", name, mtu, map[bool]string{true: "up", false: "down"}[up]))
		}
		cmd := exec.Command("ip", "-n", ns, "-batch", "-")
		cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "ip -batch: %v: %s", err, out)
		if w.Overruns() == before {
			continue
		}
		// Every port must come to the TAP's state; the wait is a correctness bound.
		deadline := time.Now().Add(time.Minute)
		for {
			var wrong []string
			d.mu.Lock()
			for _, name := range names {
				p := d.ports[name]
				if p == nil {
					wrong = append(wrong, name+" (gone)")
					continue
				}
				if st := p.vp.State(); st.AdminUp != up || st.Settings.MTU != mtu {
					wrong = append(wrong, fmt.Sprintf("%s (up %v, MTU %d)", name, st.AdminUp, st.Settings.MTU))
				}
			}
			d.mu.Unlock()
			if len(wrong) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after an overrun, %d ports not up=%v MTU %d: %v", len(wrong), up, mtu, wrong)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestNetNSNameReused deletes a namespace that still holds a port and creates one of the same
// name: a port created there gets a watcher of the new namespace (not the old one's, which
// tap.Open would refuse), and its TAP lives in the new namespace.
func TestNetNSNameReused(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	d, _ := startTest(t, ns, 1, Options{})
	taptest.IP(t, "", "netns", "del", ns)
	taptest.IP(t, "", "netns", "add", ns)
	name := taptest.Name("dr")
	_, err := (*backend)(d).CreatePort(context.Background(), genl.Caller{Admin: true}, genl.PortSpec{Name: name, NetNS: ns, Segment: name})
	require.NoError(t, err, "port in the re-created namespace %s", ns)
	if l, ok := taptest.ShowLink(t, ns, name); !ok {
		t.Errorf("TAP %s not in the re-created namespace %s", name, ns)
	} else if l.TxQLen != etherTxQueueLen {
		t.Errorf("port %s: txqueuelen %d, want %d (a mana netdev's, from ether_setup)", name, l.TxQLen, etherTxQueueLen)
	}
	d.mu.Lock()
	n := len(d.watchers)
	d.mu.Unlock()
	assert.Equal(t, 2, n, "%d link watchers, want 2 (the old namespace's and the new one's)", n)
}
