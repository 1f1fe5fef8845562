// Package flood checks that manad stays responsive under a flood on a shared segment (issue 13):
// many ports on one segment, all brought up at once, so every TAP's IPv6 start-up multicast
// (MLD reports, DAD, router solicitations) is flooded to every other port. Needs root
// (testenv.RequireRoot).
package flood

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// floodPorts is how many ports share the segment: n² frame deliveries per round of start-up
// multicast.
const floodPorts = 200

// settle bounds the wait for the flood to reach a port: a correctness limit, not a target.
const settle = 2 * time.Minute

// TestSIGTERMUnderFlood starts manad with floodPorts ports on one segment, brings every TAP up
// with one `ip -batch`, waits until the flood reaches a port from most of the others, and then
// sends SIGTERM while the flood runs: manad must exit 0 within harness.Daemon.Stop's bound (a
// correctness timeout: a starved signal path took minutes).
func TestSIGTERMUnderFlood(t *testing.T) {
	ns := harness.Name("mfl", "")
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	names := make([]string, floodPorts)
	var cfg, batch strings.Builder
	for i := range names {
		names[i] = fmt.Sprintf("f%d.%d", os.Getpid()%10000, i)
		fmt.Fprintf(&cfg, "[[port]]\nname = %q\nnetns = %q\nsegment = \"flood\"\nqueues = 1\nmax_queues = 1\nrx_ring = 128\ntx_ring = 128\npersistent = false\n\n", names[i], ns)
		fmt.Fprintf(&batch, "link set %s up\n", names[i])
	}
	d := harness.Start(t, "", "", cfg.String(), ns)
	c := d.Client(ns)
	defer c.Close()

	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip -batch: %v: %s", err, out)
	}
	// The flood is under way once the last port has received a frame from at least half the
	// others (each sends several as it comes up).
	last := names[len(names)-1]
	deadline := time.Now().Add(settle)
	for rxPackets(t, c, last) < floodPorts/2 {
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %s has received %d frames of the flood", settle, last, rxPackets(t, c, last))
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	d.Stop()
	t.Logf("manad stopped %v after SIGTERM with %d ports flooding one segment", time.Since(start), floodPorts)
}

// rxPackets returns what port has received on its queue 0 (rx_0_packets).
func rxPackets(t *testing.T, c *client.Client, port string) uint64 {
	t.Helper()
	st, err := c.Stats(context.Background(), client.Interface{Name: port})
	if err != nil {
		t.Fatalf("stats %s: %v", port, err)
	}
	for _, s := range st {
		if s.Name == "rx_0_packets" {
			return s.Value
		}
	}
	t.Fatalf("stats %s have no rx_0_packets", port)
	return 0
}
