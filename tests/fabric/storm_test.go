package fabric

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStormControlBoundsXDPTxPingPong: two ports whose XDP programs send every frame back
// (XDP_TX) would bounce a broadcast between them forever, as fast as the daemon can forward; the
// segment's storm_pps bounds the floods, the frame beyond the limit is dropped and counted (which
// ends the ping-pong), and the daemon keeps answering.
//
// The limit is low, so that the ping-pong reaches it on a machine loaded enough to bounce a frame
// only every few milliseconds: with 200 pps and one second, a run under -race beside a fuzzer
// bounced 176 frames in its 1.8 s and never hit the limit. The ping starts once manad runs both
// ports (it brings a port up when it sees its link go up, which took 1.5 s a port, one after the
// other, under load: a broadcast the ports' kernels sent before was dropped by the port not yet
// running, and no ping-pong started), and pings again until the segment counts a storm drop.
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
	c := d.Client("")
	ctx := context.Background()
	// Every flood comes after this: a port floods only once it runs, after its link is up.
	start := time.Now()
	harness.Run(t, nsA, "ip", "addr", "add", "10.79.0.1/24", "dev", pa)
	harness.Run(t, nsA, "ip", "link", "set", pa, "up")
	harness.Run(t, nsB, "ip", "link", "set", pb, "up")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ports, err := c.Ports(ctx)
		require.NoError(ct, err, "port list")
		var running []string
		for _, p := range ports {
			if p.Running {
				running = append(running, p.Device.Name)
			}
		}
		assert.ElementsMatch(ct, []string{pa, pb}, running, "running ports")
	}, time.Minute, 20*time.Millisecond, "manad to run both ports once their links are up")
	// The ARP request for a missing neighbour is the broadcast that starts the ping-pong; the
	// kernel sends it again every second while the ping waits (three in all), each a new one.
	pings := 0
	for {
		pings++
		harness.RunErr(nsA, "ping", "-c", "1", "-W", "3", "10.79.0.9")
		seg, err := c.Segment(ctx, "storm")
		require.NoError(t, err, "manad stopped answering during the broadcast ping-pong")
		if seg.StormDrops > 0 {
			break
		}
		require.Less(t, pings, 10, "%d pings and no storm drop (floods %d): the ping-pong did not start, or was not limited", pings, seg.Floods)
	}
	_, err := c.Ports(ctx)
	require.NoError(t, err, "manad stopped answering during the broadcast ping-pong")
	d.Stop()
	elapsed := time.Since(start)
	drops, floods := counter(t, d.Log(), "StormDrops"), counter(t, d.Log(), "Floods")
	require.NotEqual(t, uint64(0), drops, "no storm drops (floods %d): the ping-pong did not start, or was not limited", floods)
	// The limit holds per second of the segment clock: at most limit floods in each second the
	// run touched.
	require.LessOrEqual(t, floods, uint64(limit*(math.Ceil(elapsed.Seconds())+1)), "%d floods in %v, more than %d pps allows", floods, elapsed, limit)
	t.Logf("%v: %d floods, %d storm drops, %d pings", elapsed, floods, drops, pings)
}
