package fabric

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
)

// pollingHosts makes two hosts joined by a VXLAN overlay over a veth underlay, as overlayHosts
// does, each with a manad whose port is on segment wire0, uplinked to the overlay device with
// attach and busy_poll.
func pollingHosts(t *testing.T, attach, busyPoll string) (a, b *side) {
	t.Helper()
	testenv.RequireRoot(t)
	a = &side{host: harness.Name("fqa", ""), pns: harness.Name("fra", ""), port: harness.Name("fa", "0"), ip: "10.78.0.1"}
	b = &side{host: harness.Name("fqb", ""), pns: harness.Name("frb", ""), port: harness.Name("fb", "0"), ip: "10.78.0.2"}
	netns(t, a.host)
	netns(t, b.host)
	harness.Run(t, a.host, "ip", "link", "add", "ul", "type", "veth", "peer", "name", "ul", "netns", b.host)
	for i, s := range []*side{a, b} {
		self, other := fmt.Sprintf("192.168.78.%d", i+1), fmt.Sprintf("192.168.78.%d", 2-i)
		harness.Run(t, s.host, "ip", "addr", "add", self+"/24", "dev", "ul")
		harness.Run(t, s.host, "ip", "link", "set", "ul", "up")
		harness.Run(t, s.host, "ip", "link", "add", "ovl", "mtu", "1450", "type", "vxlan", "id", "43", "dstport", "4789",
			"local", self, "dev", "ul", "nolearning")
		harness.Run(t, s.host, "bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "ovl", "dst", other)
		harness.Run(t, s.host, "ip", "link", "set", "ovl", "up")
	}
	for _, s := range []*side{a, b} {
		cfg := fmt.Sprintf(`
[[segment]]
name = "wire0"
uplinks = [{dev = "ovl", netns = %q, attach = %q, busy_poll = %q}]

[[port]]
name = %q
netns = %q
segment = "wire0"
mtu = 1450
`, s.host, attach, busyPoll, s.port, s.pns)
		s.d = harness.Start(t, "", "", cfg, s.pns)
		s.up(t)
	}
	return a, b
}

// TestUplinkBusyPollOverVXLAN: with busy-polling uplinks (issue 29) frames cross the overlay
// both ways on each attachment, the uplinks poll (their closing counters say so), and an
// uplink deleted at run time stops: its RX loop is done (Close waited for it) and frames no
// longer cross.
func TestUplinkBusyPollOverVXLAN(t *testing.T) {
	for _, attach := range []string{"af_packet", "af_xdp"} {
		t.Run(attach, func(t *testing.T) { busyPollOverVXLAN(t, attach) })
	}
}

func busyPollOverVXLAN(t *testing.T, attach string) {
	a, b := pollingHosts(t, attach, "200us")
	for _, s := range []*side{a, b} {
		log := s.d.Log()
		require.Contains(t, log, "attach="+attach)
		require.Contains(t, log, "busy_poll=200µs", "the uplink's busy_poll did not reach it")
	}
	// 50 echoes 10 ms apart each way: every frame an uplink receives starts a poll.
	harness.Run(t, a.pns, "ping", "-c", "50", "-i", "0.01", "-W", "2", b.ip)
	harness.Run(t, b.pns, "ping", "-c", "50", "-i", "0.01", "-W", "2", a.ip)

	// SEGMENT_GET reports the window and the counters.
	ctx := context.Background()
	seg, err := a.d.Client(a.pns).Segment(ctx, "wire0")
	require.NoError(t, err)
	require.Len(t, seg.Uplinks, 1)
	assert.Equal(t, uint32(200), seg.Uplinks[0].BusyPollUs)
	assert.NotZero(t, seg.Uplinks[0].Polls, "SEGMENT_GET counts no polls")
	assert.LessOrEqual(t, seg.Uplinks[0].PollHits, seg.Uplinks[0].Polls)

	err = a.d.Client(a.pns).DeleteUplink(ctx, "wire0", wire.UplinkSpec{Dev: "ovl", NetNS: a.host})
	require.NoError(t, err)
	harness.Eventually(t, "A's uplink closed", func() bool { return strings.Contains(a.d.Log(), "uplink closed") })
	assert.NotZero(t, counter(t, a.d.Log(), "Polls"), "A's uplink never polled")
	t.Logf("A's uplink: %d polls, %d hits", counter(t, a.d.Log(), "Polls"), counter(t, a.d.Log(), "Hits"))
	_, err = harness.RunErr(a.pns, "ping", "-c", "2", "-i", "0.2", "-W", "1", b.ip)
	assert.Error(t, err, "frames crossed after A's uplink was deleted")

	// Added back at run time (UPLINK_ADD's BUSY_POLL_US), with another window: it polls again.
	seg, err = a.d.Client(a.pns).AddUplink(ctx, "wire0", wire.UplinkSpec{Dev: "ovl", NetNS: a.host, Attach: attach, BusyPollUs: 100})
	require.NoError(t, err)
	require.Len(t, seg.Uplinks, 1)
	assert.Equal(t, uint32(100), seg.Uplinks[0].BusyPollUs)
	harness.Run(t, a.pns, "ping", "-c", "20", "-i", "0.01", "-W", "2", b.ip)
	_, err = a.d.Client(a.pns).AddUplink(ctx, "wire0", wire.UplinkSpec{Dev: "lo", BusyPollUs: 5000})
	require.ErrorIs(t, err, unix.EINVAL, "a window beyond 1 ms")

	b.d.Stop()
	assert.NotZero(t, counter(t, b.d.Log(), "Polls"), "B's uplink never polled")
}
