// Package fabric runs segments that leave the machine (issue 12): two manad processes on two
// simulated hosts joined by a VXLAN (or Geneve) overlay, and a segment uplinked to a Linux bridge.
package fabric

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// netns creates a namespace that is deleted when the test ends (after the daemons, which are
// started later and so stopped first).
func netns(t *testing.T, name string) string {
	t.Helper()
	harness.Run(t, "", "ip", "netns", "add", name)
	t.Cleanup(func() { harness.RunErr("", "ip", "netns", "del", name) })
	return name
}

// side is one simulated host: its namespace with the underlay and the overlay device, and a manad
// with one port on segment wire0 uplinked to the overlay device.
type side struct {
	host, pns, port, ip string
	d                   *harness.Daemon
}

// overlayHosts makes two hosts joined by a veth underlay (192.168.77.1 and .2) with an overlay
// device ovl of kind ("vxlan" or "geneve") in each, pointing at the other, MTU 1450. The
// uplinks attach with attach ("af_packet", "af_xdp").
func overlayHosts(t *testing.T, kind, attach string) (a, b *side) {
	t.Helper()
	testenv.RequireRoot(t)
	a = &side{host: harness.Name("fha", ""), pns: harness.Name("fpa", ""), port: harness.Name("fa", "0"), ip: "10.77.0.1"}
	b = &side{host: harness.Name("fhb", ""), pns: harness.Name("fpb", ""), port: harness.Name("fb", "0"), ip: "10.77.0.2"}
	netns(t, a.host)
	netns(t, b.host)
	harness.Run(t, a.host, "ip", "link", "add", "ul", "type", "veth", "peer", "name", "ul", "netns", b.host)
	for i, s := range []*side{a, b} {
		self, other := fmt.Sprintf("192.168.77.%d", i+1), fmt.Sprintf("192.168.77.%d", 2-i)
		harness.Run(t, s.host, "ip", "addr", "add", self+"/24", "dev", "ul")
		harness.Run(t, s.host, "ip", "link", "set", "ul", "up")
		switch kind {
		case "vxlan":
			harness.Run(t, s.host, "ip", "link", "add", "ovl", "mtu", "1450", "type", "vxlan", "id", "42", "dstport", "4789",
				"local", self, "dev", "ul", "nolearning")
			// The static forwarding entry: everything unknown goes to the other host.
			harness.Run(t, s.host, "bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "ovl", "dst", other)
		case "geneve":
			if _, err := harness.RunErr(s.host, "ip", "link", "add", "ovl", "mtu", "1450", "type", "geneve", "id", "42", "remote", other); err != nil {
				t.Skipf("this kernel has no Geneve (ip link add type geneve: %v)", err)
			}
		}
		harness.Run(t, s.host, "ip", "link", "set", "ovl", "up")
	}
	// A second port on host A, local to A's daemon: its traffic with A's first port must not
	// depend on the uplink.
	local := &side{pns: harness.Name("fpx", ""), port: harness.Name("fx", "0"), ip: localIP}
	for _, s := range []*side{a, b} {
		cfg := fmt.Sprintf(`
[[segment]]
name = "wire0"
uplinks = [{dev = "ovl", netns = %q, attach = %q}]

[[port]]
name = %q
netns = %q
segment = "wire0"
mtu = 1450
`, s.host, attach, s.port, s.pns)
		nss := []string{s.pns}
		if s == a {
			cfg += fmt.Sprintf("\n[[port]]\nname = %q\nnetns = %q\nsegment = \"wire0\"\nmtu = 1450\n", local.port, local.pns)
			nss = append(nss, local.pns)
		}
		s.d = harness.Start(t, "", "", cfg, nss...)
		s.up(t)
	}
	local.up(t)
	return a, b
}

// localIP is the address of the second port on host A (see overlayHosts).
const localIP = "10.77.0.3"

// up addresses the port and brings it up (idempotent across restarts).
func (s *side) up(t *testing.T) {
	t.Helper()
	if out, _ := harness.RunErr(s.pns, "ip", "-4", "addr", "show", "dev", s.port); !strings.Contains(out, s.ip) {
		harness.Run(t, s.pns, "ip", "addr", "add", s.ip+"/24", "dev", s.port)
	}
	harness.Run(t, s.pns, "ip", "link", "set", s.port, "up")
}

func ping(t *testing.T, from *side, to string) {
	t.Helper()
	harness.Run(t, from.pns, "ping", "-c", "3", "-i", "0.2", "-W", "2", to)
}

// counter returns the last value of a counter an uplink or segment logged at shutdown
// ("TxMTUDrops:3" inside "stats={...}").
func counter(t *testing.T, log, name string) uint64 {
	t.Helper()
	m := regexp.MustCompile(name+`:(\d+)`).FindAllStringSubmatch(log, -1)
	require.NotNil(t, m, "no %s in the log:\n%s", name, log)
	n, _ := strconv.ParseUint(m[len(m)-1][1], 10, 64)
	return n
}

// uplinkInfo returns SEGMENT_GET's view of the only uplink of segment wire0 on h's manad.
func uplinkInfo(t *testing.T, h *side) wire.UplinkInfo {
	t.Helper()
	seg, err := h.d.Client(h.pns).Segment(context.Background(), "wire0")
	require.NoError(t, err, "SEGMENT_GET wire0")
	require.Len(t, seg.Uplinks, 1, "segment wire0 has %d uplinks, want 1", len(seg.Uplinks))
	return seg.Uplinks[0]
}

func setFullPage(t *testing.T, c *client.Client, port string, on bool) {
	t.Helper()
	require.NoError(t, c.SetPrivateFlags(context.Background(), client.PrivateFlags{
		Interface: client.Interface{Name: port}, Flags: []client.Flag{{Name: "full-page-rx", On: on}},
	}), "full-page-rx %v on %s", on, port)
}

// TestTwoDaemonsOverVXLAN runs the two-daemon test over each uplink attachment.
func TestTwoDaemonsOverVXLAN(t *testing.T) {
	for _, attach := range []string{"af_packet", "af_xdp"} {
		t.Run(attach, func(t *testing.T) { twoDaemons(t, "vxlan", attach) })
	}
}

func TestTwoDaemonsOverGeneve(t *testing.T) { twoDaemons(t, "geneve", "af_packet") }

// twoDaemons: two manad processes, each with a port on segment wire0 uplinked to its host's
// overlay device: ping both ways; a checksummed TCP transfer across a full-page-rx flip on one
// side and a restart of the other daemon; the uplink going down and up; a too-big frame counted.
func twoDaemons(t *testing.T, kind, attach string) {
	a, b := overlayHosts(t, kind, attach)
	for _, s := range []*side{a, b} {
		require.Contains(t, s.d.Log(), "attach="+attach, "the uplink did not attach with %s", attach)
	}
	ping(t, a, b.ip)
	ping(t, b, a.ip)

	tr, err := harness.StartTransfer(a.pns, b.pns, b.ip+":5201", 0, 7)
	require.NoError(t, err)
	// Progress is what B's port received, from the kernel's counters (the transfer's own are
	// its goroutines').
	received := func() int64 {
		out := harness.Run(t, b.pns, "cat", "/sys/class/net/"+b.port+"/statistics/rx_bytes")
		n, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		return n
	}
	progress := func(what string, more int64) {
		t.Helper()
		from := received()
		harness.Eventually(t, what, func() bool { return received() >= from+more })
	}
	progress("the transfer to start", 1<<20)
	ca := a.d.Client(a.pns)
	setFullPage(t, ca, a.port, true)
	progress("the transfer after the flip on", 1<<20)
	setFullPage(t, ca, a.port, false)
	progress("the transfer after the flip off", 1<<20)
	b.d.Stop()
	b.d.Restart()
	b.up(t)
	progress("the transfer after B's restart", 2<<20)
	tr.Stop()
	require.NoError(t, tr.Check(), "transfer across the flip and the restart")
	t.Logf("%s: %d bytes transferred intact", kind, tr.Sent)
	if attach == "af_packet" {
		// SEGMENT_GET reports the superframes that crossed whole: A's port's left its uplink
		// as they came, and the aggregates B's uplink received since its restart reached B's
		// port whole.
		ua := uplinkInfo(t, a)
		assert.NotEqual(t, uint64(0), ua.TxWhole, "A's uplink: TX whole %d, TX aggregates %d; want 0 < whole <= aggregates", ua.TxWhole, ua.TxAggregates)
		assert.LessOrEqual(t, ua.TxWhole, ua.TxAggregates, "A's uplink: TX whole %d, TX aggregates %d; want 0 < whole <= aggregates", ua.TxWhole, ua.TxAggregates)
		ub := uplinkInfo(t, b)
		assert.NotEqual(t, uint64(0), ub.RxWhole, "B's uplink: RX whole %d, RX packets %d; want 0 < whole <= packets", ub.RxWhole, ub.RxPackets)
		assert.LessOrEqual(t, ub.RxWhole, ub.RxPackets, "B's uplink: RX whole %d, RX packets %d; want 0 < whole <= packets", ub.RxWhole, ub.RxPackets)
	}

	// The uplink goes down: reported, frames stop; back up: re-attached, frames flow.
	harness.Run(t, a.host, "ip", "link", "set", "ovl", "down")
	harness.Eventually(t, "A to report its uplink down", func() bool { return strings.Contains(a.d.Log(), "uplink down") })
	_, err = harness.RunErr(a.pns, "ping", "-c", "1", "-W", "1", b.ip)
	require.Error(t, err, "ping crossed a down uplink")
	ping(t, a, localIP) // local ports are not affected
	ups := strings.Count(a.d.Log(), "uplink up")
	harness.Run(t, a.host, "ip", "link", "set", "ovl", "up")
	harness.Eventually(t, "A to re-attach its uplink", func() bool { return strings.Count(a.d.Log(), "uplink up") > ups })
	ping(t, a, b.ip)

	// MTU truth: a port MTU above the overlay's; a full-size frame is dropped and counted.
	harness.Run(t, a.pns, "ip", "link", "set", a.port, "mtu", "1500")
	out, err := harness.RunErr(a.pns, "ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1472", b.ip)
	require.Error(t, err, "a 1500-byte packet crossed a 1450-byte overlay:\n%s", out)
	ping(t, a, b.ip) // smaller ones still do
	a.d.Stop()
	if n := counter(t, a.d.Log(), "TxMTUDrops"); n < 1 {
		t.Fatalf("TxMTUDrops %d after a too-big frame, want ≥ 1", n)
	}
	// The transfer's segments left A's AF_PACKET uplink coalesced, as GSO superframes.
	if n := counter(t, a.d.Log(), "TxAggregates"); n == 0 {
		require.NotEqual(t, "af_packet", attach, "TCP through the AF_PACKET uplink went out frame by frame: no GSO superframe written")
	}
	// The port's TSO superframes went out whole, and arrived at B's port whole (B's first
	// instance logged its counters when it stopped for the restart).
	if attach == "af_packet" {
		require.NotEqual(t, uint64(0), counter(t, a.d.Log(), "TxWhole"), "no TSO superframe of A's port left the uplink whole")
		require.NotEqual(t, uint64(0), counter(t, b.d.Log(), "RxWhole"), "no TCP aggregate reached B's port whole")
	}
	// Nothing stays attached to the device once manad has stopped.
	require.NotContains(t, harness.Run(t, a.host, "ip", "-d", "link", "show", "dev", "ovl"), "xdp", "an XDP program is left on the uplink's device after manad stopped")
}

// TestSegmentUplinkedToBridge: a segment uplinked to a veth whose peer is a port of a Linux
// bridge, with a plain namespace on another bridge port: ping and checksummed TCP both ways. The
// plain namespace's veth offloads checksums and segmentation, which the bridge passes on as
// they are: manad must fill in the checksums and cut the TSO aggregates.
func TestSegmentUplinkedToBridge(t *testing.T) {
	for _, attach := range []string{"af_packet", "af_xdp"} {
		t.Run(attach, func(t *testing.T) { uplinkedToBridge(t, attach) })
	}
}

func uplinkedToBridge(t *testing.T, attach string) {
	testenv.RequireRoot(t)
	br, plain := netns(t, harness.Name("fbr", "")), netns(t, harness.Name("fpl", ""))
	harness.Run(t, br, "ip", "link", "add", "br0", "type", "bridge")
	harness.Run(t, br, "ip", "link", "add", "upl", "type", "veth", "peer", "name", "uplp")
	harness.Run(t, br, "ip", "link", "add", "pvp", "type", "veth", "peer", "name", "pv", "netns", plain)
	for _, dev := range []string{"uplp", "pvp"} {
		harness.Run(t, br, "ip", "link", "set", dev, "master", "br0")
	}
	for _, dev := range []string{"br0", "upl", "uplp", "pvp"} {
		harness.Run(t, br, "ip", "link", "set", dev, "up")
	}
	harness.Run(t, plain, "ip", "addr", "add", "10.78.0.9/24", "dev", "pv")
	harness.Run(t, plain, "ip", "link", "set", "pv", "up")

	s := &side{pns: harness.Name("fpc", ""), port: harness.Name("fc", "0"), ip: "10.78.0.1"}
	s.d = harness.Start(t, "", "", fmt.Sprintf(`
[[segment]]
name = "wire0"
uplinks = [{dev = "upl", netns = %q, attach = %q}]

[[port]]
name = %q
netns = %q
segment = "wire0"
`, br, attach, s.port, s.pns), s.pns)
	s.up(t)
	// An uplink attaches on its own goroutine once it sees its device (it follows the link),
	// which may be after manad is ready: what the port sends before that is not bridged.
	harness.Eventually(t, "the uplink to attach", func() bool {
		seg := showSegment(t, s.d, "wire0")
		return len(seg.Uplinks) == 1 && seg.Uplinks[0].State == "attached"
	})
	ping(t, s, "10.78.0.9")
	harness.Run(t, plain, "ping", "-c", "3", "-i", "0.2", "-W", "2", s.ip)
	for i, dir := range [][3]string{{s.pns, plain, "10.78.0.9:5202"}, {plain, s.pns, s.ip + ":5203"}} {
		tr, err := harness.StartTransfer(dir[0], dir[1], dir[2], 16<<20, uint64(i+1))
		require.NoError(t, err)
		require.NoError(t, tr.Wait(60*time.Second))
		require.NoError(t, tr.Check(), "transfer %s → %s", dir[0], dir[1])
	}
	s.d.Stop()
	require.NotEqual(t, uint64(0), counter(t, s.d.Log(), "RxChecksumFilled"), "no checksum filled in, yet the plain namespace's veth offloads them")
	// The bridge passes the plain namespace's TSO aggregates on whole, and so does manad to
	// its port, whose TAP takes superframes. With AF_XDP there are none: a veth with an XDP
	// program turns its peer's GSO off (veth_xdp_set), so the bridge port segments them
	// before they cross.
	if n := counter(t, s.d.Log(), "RxWhole"); n == 0 {
		require.NotEqual(t, "af_packet", attach, "no TCP aggregate passed to the port whole, yet the plain namespace's veth does TSO")
	}
	n := counter(t, s.d.Log(), "RxOversize")
	require.Equal(t, uint64(0), n, "%d frames from the bridge dropped as oversize", n)
}
