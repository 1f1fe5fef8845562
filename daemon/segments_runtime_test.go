package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/metrics"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// eventually polls cond every 20 ms until it holds, failing the test after 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantErrno(t *testing.T, what string, err error, errno unix.Errno, msg string) {
	t.Helper()
	var ce *client.Error
	assert.ErrorIs(t, err, errno, what)
	if assert.ErrorAs(t, err, &ce, what) {
		assert.Contains(t, ce.Message, msg, what)
	}
}

// uplinkState returns the state of uplink dev of segment seg as SEGMENT_GET reports it.
func uplinkStateOf(t *testing.T, c *client.Client, seg, dev string) string {
	t.Helper()
	s, err := c.Segment(context.Background(), seg)
	require.NoError(t, err, "Segment %s", seg)
	for _, u := range s.Uplinks {
		if u.Dev == dev {
			return u.State
		}
	}
	t.Fatalf("segment %s has no uplink %s: %+v", seg, dev, s.Uplinks)
	return ""
}

// gauge returns the value of metric name with the given label values from the daemon's segment
// collector, and whether it was there.
func gauge(t *testing.T, d *Daemon, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewSegmentCollector(metrics.SegmentSourceFunc(d.metricsSegments)))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if m.Gauge != nil {
				return m.GetGauge().GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// TestSegmentCommands runs the segment messages against a real daemon over its socket, with
// uplinks on real veths: listing, creation, deletion refused while a port is on the segment,
// uplinks added and removed, errors (ENOENT, EEXIST, EBUSY, EINVAL), an uplink whose device
// disappears (gone, logged once, metrics) and comes back (re-attached), and a restart that keeps
// the runtime segments and the deletion of the configuration's.
func TestSegmentCommands(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	taptest.IP(t, ns, "link", "add", "sa0", "type", "veth", "peer", "name", "sa1")
	taptest.IP(t, ns, "link", "set", "sa0", "up")
	taptest.IP(t, ns, "link", "set", "sa1", "up")
	dir := t.TempDir()
	sock := filepath.Join(dir, "manad.sock")
	port := taptest.Name("ds")
	doc := fmt.Sprintf(`[daemon]
socket = %q
state_dir = %q

[[segment]]
name = "wire0"
uplinks = [{dev = "sa0", netns = %[3]q}]

[[port]]
name = %[4]q
netns = %[3]q
segment = "wire0"
queues = 1
max_queues = 1
rx_ring = 128
tx_ring = 128
`, sock, filepath.Join(dir, "state"), ns, port)
	logs := &lockedBuffer{}
	d, stop := runStoppable(t, doc, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	ctx := context.Background()
	c, err := client.Dial(sock)
	require.NoError(t, err)
	defer c.Close()

	eventually(t, "wire0's uplink to attach", func() bool { return uplinkStateOf(t, c, "wire0", "sa0") == wire.UplinkAttached })
	segs, err := c.Segments(ctx)
	require.NoError(t, err, "Segments: %+v, %v", segs, err)
	require.Len(t, segs, 1, "Segments: %+v, %v", segs, err)
	w0 := segs[0]
	require.Equal(t, "wire0", w0.Name, "wire0: %+v", w0)
	require.Equal(t, "config", w0.Origin, "wire0: %+v", w0)
	require.Equal(t, uint64(300000), w0.AgeingMs, "wire0: %+v", w0)
	require.Len(t, w0.Ports, 1, "wire0: %+v", w0)
	require.Equal(t, port, w0.Ports[0], "wire0: %+v", w0)
	require.Len(t, w0.Uplinks, 1, "wire0: %+v", w0)
	require.Equal(t, ns, w0.Uplinks[0].NetNS, "wire0: %+v", w0)
	require.Equal(t, "veth", w0.Uplinks[0].Kind, "wire0: %+v", w0)
	require.Equal(t, uint32(1500), w0.Uplinks[0].MTU, "wire0: %+v", w0)
	require.Equal(t, uint32(1500), w0.Uplinks[0].MaxPortMTU, "wire0: %+v", w0)
	require.NotEqual(t, uint32(0), w0.Uplinks[0].Ifindex, "wire0: %+v", w0)
	require.Equal(t, uint64(1), w0.Uplinks[0].Attaches, "wire0: %+v", w0)

	wantErrno(t, "delete a segment with a port", c.DeleteSegment(ctx, "wire0"), unix.EBUSY, "segment wire0 has ports: "+port)
	wantErrno(t, "delete an unknown segment", c.DeleteSegment(ctx, "nope"), unix.ENOENT, "no segment nope")
	_, err = c.Segment(ctx, "nope")
	wantErrno(t, "show an unknown segment", err, unix.ENOENT, "no segment nope")
	_, err = c.CreateSegment(ctx, wire.SegmentSpec{Name: "wire0"})
	wantErrno(t, "create a duplicate", err, unix.EEXIST, "segment wire0 already exists")
	_, err = c.CreateSegment(ctx, wire.SegmentSpec{Name: "bad name"})
	wantErrno(t, "create a bad name", err, unix.EINVAL, "may only hold letters")

	w1, err := c.CreateSegment(ctx, wire.SegmentSpec{Name: "wire1", StormPPS: 10, AgeingSet: true})
	require.NoError(t, err, "CreateSegment wire1: %+v, %v", w1, err)
	require.Equal(t, "runtime", w1.Origin, "CreateSegment wire1: %+v, %v", w1, err)
	require.Equal(t, uint64(10), w1.StormPPS, "CreateSegment wire1: %+v, %v", w1, err)
	require.Equal(t, uint64(0), w1.AgeingMs, "CreateSegment wire1: %+v, %v", w1, err)
	require.Empty(t, w1.Uplinks, "CreateSegment wire1: %+v, %v", w1, err)
	if seg := d.segments.Get("wire1"); seg.StormLimit() != 10 || seg.AgeingTime() != 0 {
		t.Errorf("wire1's data path: storm %d ageing %v", seg.StormLimit(), seg.AgeingTime())
	}
	_, err = c.AddUplink(ctx, "wire1", wire.UplinkSpec{Dev: "sa0", NetNS: ns})
	wantErrno(t, "an uplink another segment has", err, unix.EEXIST, "already used by segment wire0")
	_, err = c.AddUplink(ctx, "nope", wire.UplinkSpec{Dev: "sa1", NetNS: ns})
	wantErrno(t, "an uplink of an unknown segment", err, unix.ENOENT, "no segment nope")
	_, err = c.AddUplink(ctx, "wire1", wire.UplinkSpec{Dev: "a:b", NetNS: ns})
	wantErrno(t, "a bad device name", err, unix.EINVAL, "not a valid interface name")
	_, err = c.AddUplink(ctx, "wire1", wire.UplinkSpec{Dev: "sa1", NetNS: ns})
	require.NoError(t, err)
	_, err = c.AddUplink(ctx, "wire1", wire.UplinkSpec{Dev: "later0"})
	require.NoError(t, err)
	eventually(t, "wire1's uplink to attach", func() bool { return uplinkStateOf(t, c, "wire1", "sa1") == wire.UplinkAttached })
	if st := uplinkStateOf(t, c, "wire1", "later0"); st != wire.UplinkGone {
		t.Errorf("uplink to a device that does not exist: %s, want gone", st)
	}
	wantErrno(t, "delete an unknown uplink", c.DeleteUplink(ctx, "wire1", wire.UplinkSpec{Dev: "sa1"}), unix.ENOENT, "has no uplink sa1")
	require.NoError(t, c.DeleteUplink(ctx, "wire1", wire.UplinkSpec{Dev: "later0"}))
	if v, ok := gauge(t, d, "manad_uplink_up", map[string]string{"segment": "wire1", "dev": "sa1", "netns": ns}); !ok || v != 1 {
		t.Errorf("manad_uplink_up for wire1's uplink: %v (present %v), want 1", v, ok)
	}

	// The device disappears: both uplinks report it (gone, once in the log each, metrics),
	// and re-attach when it is back.
	taptest.IP(t, ns, "link", "del", "sa0")
	eventually(t, "the uplinks to report their device gone", func() bool {
		return uplinkStateOf(t, c, "wire0", "sa0") == wire.UplinkGone && uplinkStateOf(t, c, "wire1", "sa1") == wire.UplinkGone
	})
	if v, ok := gauge(t, d, "manad_uplink_up", map[string]string{"segment": "wire0", "dev": "sa0"}); !ok || v != 0 {
		t.Errorf("manad_uplink_up of a gone uplink: %v (present %v), want 0", v, ok)
	}
	if v, ok := gauge(t, d, "manad_uplink_state", map[string]string{"segment": "wire0", "dev": "sa0", "state": "gone"}); !ok || v != 1 {
		t.Errorf("manad_uplink_state{state=gone}: %v (present %v), want 1", v, ok)
	}
	taptest.IP(t, ns, "link", "add", "sa0", "type", "veth", "peer", "name", "sa1")
	taptest.IP(t, ns, "link", "set", "sa0", "up")
	taptest.IP(t, ns, "link", "set", "sa1", "up")
	eventually(t, "the uplinks to re-attach", func() bool {
		return uplinkStateOf(t, c, "wire0", "sa0") == wire.UplinkAttached && uplinkStateOf(t, c, "wire1", "sa1") == wire.UplinkAttached
	})
	n := strings.Count(logs.String(), `msg="uplink absent" uplink=`+ns+`/sa0`)
	assert.Equal(t, 1, n, "uplink %s/sa0 logged absent %d times, want once:\n%s", ns, n, logs.String())

	// Frames cross the uplinks: wire0 → sa0 → veth → sa1 → wire1. A broadcast from the port
	// (an ARP request) must reach wire1's uplink from its device.
	taptest.IP(t, ns, "addr", "add", "10.79.0.1/24", "dev", port)
	taptest.IP(t, ns, "link", "set", port, "up")
	rx := func() uint64 {
		s, err := c.Segment(ctx, "wire1")
		require.NoError(t, err, "wire1: %+v, %v", s, err)
		require.Len(t, s.Uplinks, 1, "wire1: %+v, %v", s, err)
		return s.Uplinks[0].RxPackets
	}
	before := rx()
	taptest.TryIP(ns, "neigh", "flush", "dev", port)
	if out, err := execIn(ns, "ping", "-c", "1", "-W", "1", "10.79.0.2"); err == nil {
		t.Logf("ping answered?\n%s", out)
	}
	eventually(t, "wire1's uplink to receive the port's frames", func() bool { return rx() > before })

	// Delete the port, then its segment; a deleted configuration segment stays deleted.
	d.mu.Lock()
	p := d.ports[port]
	d.mu.Unlock()
	require.NoError(t, (*backend)(d).DeletePort(ctx, genl.Caller{Admin: true, NetNS: p.ns}, p.device()))
	require.NoError(t, c.DeleteSegment(ctx, "wire0"))
	_, err = c.Segment(ctx, "wire0")
	assert.ErrorIs(t, err, unix.ENOENT, "wire0 after delete")
	c.Close()
	stopped = true
	require.NoError(t, stop())
	st, err := config.LoadState(filepath.Join(dir, "state"))
	require.NoError(t, err)
	got := st.Segments.Defined["wire1"]
	require.Equal(t, int64(10), got.StormPPS, "state: %+v", st.Segments)
	require.Equal(t, time.Duration(0), got.AgeingTime, "state: %+v", st.Segments)
	require.Len(t, got.Uplinks, 1, "state: %+v", st.Segments)
	require.Equal(t, config.UplinkSpec{Dev: "sa1", NetNS: ns}, got.Uplinks[0], "state: %+v", st.Segments)
	require.Len(t, st.Segments.Deleted, 1, "state: %+v", st.Segments)
	require.Equal(t, "wire0", st.Segments.Deleted[0], "state: %+v", st.Segments)

	d2 := runTest(t, doc, Options{})
	c2, err := client.Dial(sock)
	require.NoError(t, err)
	defer c2.Close()
	segs, err = c2.Segments(ctx)
	require.NoError(t, err, "after the restart: %+v, %v", segs, err)
	require.Len(t, segs, 1, "after the restart: %+v, %v", segs, err)
	require.Equal(t, "wire1", segs[0].Name, "after the restart: %+v, %v", segs, err)
	require.Equal(t, "runtime", segs[0].Origin, "after the restart: %+v, %v", segs, err)
	require.Equal(t, uint64(10), segs[0].StormPPS, "after the restart: %+v, %v", segs, err)
	require.Equal(t, uint64(0), segs[0].AgeingMs, "after the restart: %+v, %v", segs, err)
	require.Len(t, segs[0].Uplinks, 1, "after the restart: %+v, %v", segs, err)
	eventually(t, "wire1's uplink to attach after the restart", func() bool { return uplinkStateOf(t, c2, "wire1", "sa1") == wire.UplinkAttached })
	seg := d2.segments.Get("wire1")
	assert.Equal(t, int64(10), seg.StormLimit(), "wire1's data path after the restart: storm %d ageing %v", seg.StormLimit(), seg.AgeingTime())
	assert.Equal(t, time.Duration(0), seg.AgeingTime(), "wire1's data path after the restart: storm %d ageing %v", seg.StormLimit(), seg.AgeingTime())
}

// execIn runs a command in network namespace ns.
func execIn(ns string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	return string(out), err
}

// TestImplicitSegment: a segment only ports name is listed (origin ports) and cannot be deleted
// while they are on it; SEGMENT_NEW defines it with settings that apply at once, and UPLINK_ADD
// defines one too; a name nothing uses is ENOENT.
func TestImplicitSegment(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	d, names := startTest(t, ns, 2, Options{})
	ctx := context.Background()
	c, err := client.Dial(d.cfg.Daemon.Socket)
	require.NoError(t, err)
	defer c.Close()
	s, err := c.Segment(ctx, names[0])
	require.NoError(t, err, "implicit segment: %+v, %v", s, err)
	require.Equal(t, "ports", s.Origin, "implicit segment: %+v, %v", s, err)
	require.Len(t, s.Ports, 1, "implicit segment: %+v, %v", s, err)
	require.Equal(t, names[0], s.Ports[0], "implicit segment: %+v, %v", s, err)
	require.Equal(t, uint64(300000), s.AgeingMs, "implicit segment: %+v, %v", s, err)
	require.Empty(t, s.Uplinks, "implicit segment: %+v, %v", s, err)
	wantErrno(t, "delete an implicit segment with a port", c.DeleteSegment(ctx, names[0]), unix.EBUSY, "has ports: "+names[0])
	_, err = c.AddUplink(ctx, "unused", wire.UplinkSpec{Dev: "x0"})
	wantErrno(t, "uplink of a segment nothing uses", err, unix.ENOENT, "no segment unused")

	s, err = c.CreateSegment(ctx, wire.SegmentSpec{Name: names[0], StormPPS: 7})
	require.NoError(t, err, "defining an implicit segment: %+v, %v", s, err)
	require.Equal(t, "runtime", s.Origin, "defining an implicit segment: %+v, %v", s, err)
	require.Equal(t, uint64(7), s.StormPPS, "defining an implicit segment: %+v, %v", s, err)
	require.Len(t, s.Ports, 1, "defining an implicit segment: %+v, %v", s, err)
	got := d.segments.Get(names[0]).StormLimit()
	assert.Equal(t, int64(7), got, "storm limit of the ports' segment %d, want 7 at once", got)
	s, err = c.AddUplink(ctx, names[1], wire.UplinkSpec{Dev: "x1", NetNS: ns})
	require.NoError(t, err, "an uplink for an implicit segment: %+v, %v", s, err)
	require.Equal(t, "runtime", s.Origin, "an uplink for an implicit segment: %+v, %v", s, err)
	require.Len(t, s.Uplinks, 1, "an uplink for an implicit segment: %+v, %v", s, err)
	require.Equal(t, wire.UplinkGone, s.Uplinks[0].State, "an uplink for an implicit segment: %+v, %v", s, err)
	d.mu.Lock()
	defer d.mu.Unlock()
	if defined := d.state.Segments.Defined; len(defined) != 2 || len(defined[names[1]].Uplinks) != 1 ||
		defined[names[1]].Uplinks[0] != (config.UplinkSpec{Dev: "x1", NetNS: ns}) {
		t.Errorf("state: %+v", defined)
	}
}

// startWith runs a daemon (as root) whose configuration is a [daemon] table with a fresh socket
// and state directory followed by what body writes, given a new namespace ns for its ports; it
// returns a client of the daemon, its socket and ns. The daemon stops when the test ends.
func startWith(t *testing.T, body func(doc *strings.Builder, ns string)) (*client.Client, string, string) {
	t.Helper()
	taptest.Require(t)
	ns := taptest.NetNS(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "manad.sock")
	var doc strings.Builder
	fmt.Fprintf(&doc, "[daemon]\nsocket = %q\nstate_dir = %q\n\n", sock, filepath.Join(dir, "state"))
	body(&doc, ns)
	_, stop := runStoppable(t, doc.String(), Options{})
	t.Cleanup(func() { stop() })
	c, err := client.Dial(sock)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, sock, ns
}

// TestSegmentLimit: the segments the configuration and SEGMENT_NEW define together stop at
// config.MaxSegments. Past it SEGMENT_NEW, and UPLINK_ADD for a segment only a port names (which
// would define it), fail with ENOSPC and say so, defining nothing; deleting one makes room.
func TestSegmentLimit(t *testing.T) {
	port := taptest.Name("dl")
	c, _, ns := startWith(t, func(doc *strings.Builder, ns string) {
		for i := range config.MaxSegments - 1 {
			fmt.Fprintf(doc, "[[segment]]\nname = \"s%d\"\n", i)
		}
		fmt.Fprintf(doc, "\n[[port]]\nname = %q\nnetns = %q\nsegment = \"ports-only\"\nqueues = 1\nmax_queues = 1\nrx_ring = 128\ntx_ring = 128\n", port, ns)
	})
	ctx := context.Background()
	var err error

	_, err = c.CreateSegment(ctx, wire.SegmentSpec{Name: "last"})
	require.NoError(t, err, "segment %d of %d", config.MaxSegments, config.MaxSegments)
	full := fmt.Sprintf("%d segments defined, at most %d", config.MaxSegments, config.MaxSegments)
	_, err = c.CreateSegment(ctx, wire.SegmentSpec{Name: "over"})
	wantErrno(t, "a segment past the limit", err, unix.ENOSPC, full)
	_, err = c.AddUplink(ctx, "ports-only", wire.UplinkSpec{Dev: "x0", NetNS: ns})
	wantErrno(t, "an uplink defining a segment past the limit", err, unix.ENOSPC, full)
	segs, err := c.Segments(ctx)
	if err != nil || len(segs) != config.MaxSegments+1 { // the defined ones and ports-only
		t.Fatalf("Segments after the refusals: %d, %v; want %d", len(segs), err, config.MaxSegments+1)
	}
	if s, err := c.Segment(ctx, "ports-only"); err != nil || s.Origin != "ports" || len(s.Uplinks) != 0 {
		t.Errorf("ports-only after the refused uplink: %+v, %v", s, err)
	}

	require.NoError(t, c.DeleteSegment(ctx, "last"))
	_, err = c.AddUplink(ctx, "ports-only", wire.UplinkSpec{Dev: "x0", NetNS: ns})
	require.NoError(t, err, "an uplink once there is room")
	_, err = c.CreateSegment(ctx, wire.SegmentSpec{Name: "over"})
	wantErrno(t, "a segment past the limit again", err, unix.ENOSPC, full)
}

// TestSegmentPortLimit: a segment holds at most config.MaxSegmentPorts ports, as a Linux bridge
// holds BR_MAX_PORTS: with a full segment from the file, PORT_NEW on it fails with ENOSPC and
// says so, while other segments take ports; once a port leaves, the segment takes one again. A
// full segment's SEGMENT_GET reply (every port's name) still fits.
func TestSegmentPortLimit(t *testing.T) {
	prefix := taptest.Name("pl")
	c, sock, ns := startWith(t, func(doc *strings.Builder, ns string) {
		for i := range config.MaxSegmentPorts {
			fmt.Fprintf(doc, "[[port]]\nname = \"%s%d\"\nnetns = %q\nsegment = \"full\"\nqueues = 1\nmax_queues = 1\nrx_ring = 128\ntx_ring = 128\npersistent = false\n", prefix, i, ns)
		}
	})
	ctx := context.Background()
	s, err := c.Segment(ctx, "full")
	require.NoError(t, err, "the full segment: %d ports, %v", len(s.Ports), err)
	require.Len(t, s.Ports, config.MaxSegmentPorts, "the full segment: %d ports, %v", len(s.Ports), err)
	spec := func(name, seg string) wire.PortSpec {
		return wire.PortSpec{Name: name, NetNS: ns, Segment: seg, Queues: 1, MaxQueues: 1, RxRing: 128, TxRing: 128}
	}
	_, err = c.CreatePort(ctx, spec(prefix+"x", "full"))
	wantErrno(t, "a port on a full segment", err, unix.ENOSPC,
		fmt.Sprintf("segment full has %d ports, at most %d", config.MaxSegmentPorts, config.MaxSegmentPorts))
	if _, err := c.CreatePort(ctx, spec(prefix+"y", "other")); err != nil {
		t.Fatalf("a port on another segment: %v", err)
	}
	// A client in the ports' namespace names them there.
	var inNS *client.Client
	taptest.InNetNS(t, ns, func() { inNS, err = client.Dial(sock) })
	require.NoError(t, err)
	defer inNS.Close()
	require.NoError(t, inNS.DeletePort(ctx, client.Interface{Name: prefix + "0"}))
	if _, err := c.CreatePort(ctx, spec(prefix+"x", "full")); err != nil {
		t.Fatalf("a port on the segment once one left: %v", err)
	}
}
