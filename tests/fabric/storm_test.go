package fabric

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/require"
)

// TestStormControlBoundsXDPTxPingPong: two ports whose XDP programs send every frame back
// (XDP_TX) would bounce a broadcast between them forever, as fast as the daemon can forward; the
// segment's storm_pps bounds the floods, the frame beyond the limit is dropped and counted (which
// ends the ping-pong), and the daemon keeps answering.
//
// The limit is low and the ping-pong restarts for 3 s, so that it reaches the limit on a machine
// loaded enough to bounce a frame only every few milliseconds: with 200 pps and one second, a
// run under -race beside a fuzzer bounced 176 frames in its 1.8 s and never hit the limit.
func TestStormControlBoundsXDPTxPingPong(t *testing.T) {
	const limit = 20
	nsA, nsB := harness.Name("fsa", ""), harness.Name("fsb", "")
	pa, pb := harness.Name("fsa", "0"), harness.Name("fsb", "0")
	d := harness.Start(t, "", "", fmt.Sprintf(`
[[segment]]
name = "storm"
storm_pps = %d

[[port]]
name = %q
netns = %q
segment = "storm"
xdp = "tx"

[[port]]
name = %q
netns = %q
segment = "storm"
xdp = "tx"
`, limit, pa, nsA, pb, nsB), nsA, nsB)
	harness.Run(t, nsA, "ip", "addr", "add", "10.79.0.1/24", "dev", pa)
	harness.Run(t, nsA, "ip", "link", "set", pa, "up")
	harness.Run(t, nsB, "ip", "link", "set", pb, "up")
	start := time.Now()
	// The ARP request for a missing neighbour is the broadcast that starts the ping-pong; the
	// kernel sends it again every second while the ping waits (three in all), each a new one.
	harness.RunErr(nsA, "ping", "-c", "1", "-W", "3", "10.79.0.9")
	c := d.Client("")
	_, err := c.Ports(context.Background())
	require.NoError(t, err, "manad stopped answering during the broadcast ping-pong")
	d.Stop()
	elapsed := time.Since(start)
	drops, floods := counter(t, d.Log(), "StormDrops"), counter(t, d.Log(), "Floods")
	require.NotEqual(t, uint64(0), drops, "no storm drops (floods %d): the ping-pong did not start, or was not limited", floods)
	// The limit holds per second of the segment clock: at most limit floods in each second the
	// run touched.
	require.LessOrEqual(t, floods, uint64(limit*(math.Ceil(elapsed.Seconds())+1)), "%d floods in %v, more than %d pps allows", floods, elapsed, limit)
	t.Logf("%v: %d floods, %d storm drops", elapsed, floods, drops)
}
