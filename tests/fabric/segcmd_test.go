package fabric

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// manactl runs the real manactl against d in the test's namespace and returns its exit status,
// stdout and stderr. The race-enabled binary would sleep a second at a successful exit unless
// told otherwise (GORACE atexit_sleep_ms).
func manactl(t *testing.T, d *harness.Daemon, args ...string) (int, string, string) {
	t.Helper()
	_, bin := harness.Binaries(t)
	cmd := exec.Command(bin, append([]string{"--socket", d.Socket}, args...)...)
	cmd.Env = append(cmd.Environ(), "GORACE=atexit_sleep_ms=0")
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("manactl %v: %v", args, err)
	}
	return code, out.String(), errs.String()
}

// manactlOK is manactl that must succeed.
func manactlOK(t *testing.T, d *harness.Daemon, args ...string) string {
	t.Helper()
	code, out, errs := manactl(t, d, args...)
	require.Equal(t, 0, code, "manactl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	return out
}

// manactlFails is manactl that must fail with exit status 1 and stderr containing want.
func manactlFails(t *testing.T, d *harness.Daemon, want string, args ...string) {
	t.Helper()
	code, out, errs := manactl(t, d, args...)
	assert.Equal(t, 1, code, "manactl %s: exit %d, stdout %q, stderr %q; want 1 and %q", strings.Join(args, " "), code, out, errs, want)
	assert.Equal(t, "", out, "manactl %s: exit %d, stdout %q, stderr %q; want 1 and %q", strings.Join(args, " "), code, out, errs, want)
	assert.Contains(t, errs, want, "manactl %s: exit %d, stdout %q, stderr %q; want 1 and %q", strings.Join(args, " "), code, out, errs, want)
}

// segmentJSON is what `manactl --json segment show` prints of a segment (its documented keys).
type segmentJSON struct {
	Name     string   `json:"name"`
	Origin   string   `json:"origin"`
	StormPPS uint64   `json:"storm-pps"`
	AgeingMs uint64   `json:"ageing-ms"`
	Ports    []string `json:"ports"`
	Uplinks  []struct {
		Dev        string `json:"dev"`
		NetNS      string `json:"netns"`
		State      string `json:"state"`
		Kind       string `json:"kind"`
		MTU        uint32 `json:"mtu"`
		MaxPortMTU uint32 `json:"max-port-mtu"`
		RxPackets  uint64 `json:"rx-packets"`
		TxPackets  uint64 `json:"tx-packets"`
		TxDrops    struct {
			MTU uint64 `json:"mtu"`
		} `json:"tx-drops"`
		Attach   string `json:"attach"`
		XDPMode  string `json:"xdp-mode"`
		Fallback string `json:"fallback"`
	} `json:"uplinks"`
}

func showSegment(t *testing.T, d *harness.Daemon, name string) segmentJSON {
	t.Helper()
	out := manactlOK(t, d, "--json", "segment", "show", name)
	var v []segmentJSON
	err := json.Unmarshal([]byte(out), &v)
	require.NoError(t, err, "manactl --json segment show %s: %v\n%s", name, err, out)
	require.Len(t, v, 1, "manactl --json segment show %s: %v\n%s", name, err, out)
	return v[0]
}

var metricsAddrRE = regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)

// uplinkUpMetric scrapes manad_uplink_up of one uplink from d's /metrics ("" when absent).
func uplinkUpMetric(t *testing.T, d *harness.Daemon, seg, dev, netns string) string {
	t.Helper()
	body := []byte(scrape(t, d))
	line := regexp.MustCompile(fmt.Sprintf(`(?m)^manad_uplink_up\{dev="%s",netns="%s",segment="%s"\} (\S+)$`,
		regexp.QuoteMeta(dev), regexp.QuoteMeta(netns), regexp.QuoteMeta(seg))).FindSubmatch(body)
	if line == nil {
		return ""
	}
	return string(line[1])
}

// bridgeUplink makes namespace br with a Linux bridge br0, a veth upl whose peer uplp is a bridge
// port, and a veth pv into namespace plain (address ip) on another bridge port.
func bridgeUplink(t *testing.T, br, plain, ip string) {
	t.Helper()
	harness.Run(t, br, "ip", "link", "add", "br0", "type", "bridge")
	harness.Run(t, br, "ip", "link", "add", "pvp", "type", "veth", "peer", "name", "pv", "netns", plain)
	harness.Run(t, br, "ip", "link", "set", "pvp", "master", "br0")
	for _, dev := range []string{"br0", "pvp"} {
		harness.Run(t, br, "ip", "link", "set", dev, "up")
	}
	uplinkVeth(t, br)
	harness.Run(t, plain, "ip", "addr", "add", ip+"/24", "dev", "pv")
	harness.Run(t, plain, "ip", "link", "set", "pv", "up")
}

// uplinkVeth (re)creates the veth upl, its peer uplp a port of br0.
func uplinkVeth(t *testing.T, br string) {
	t.Helper()
	harness.Run(t, br, "ip", "link", "add", "upl", "type", "veth", "peer", "name", "uplp")
	harness.Run(t, br, "ip", "link", "set", "uplp", "master", "br0")
	harness.Run(t, br, "ip", "link", "set", "uplp", "up")
	harness.Run(t, br, "ip", "link", "set", "upl", "up")
}

// TestSegmentCommandsEndToEnd: the segment commands of the real manactl against the real manad:
// a segment created at runtime, uplinked at runtime to a veth into a Linux bridge, a port added
// on it pings a plain namespace behind the bridge; the uplink's device deleted shows gone (show,
// log, metrics) and, recreated, attached again with traffic flowing; a restart keeps it all;
// deletion is refused while the port is on the segment, then everything is deleted.
func TestSegmentCommandsEndToEnd(t *testing.T) {
	testenv.RequireRoot(t)
	br, plain := netns(t, harness.Name("fsb", "")), netns(t, harness.Name("fsp", ""))
	pns, port := harness.Name("fsq", ""), harness.Name("fs", "0")
	const portIP, plainIP = "10.81.0.1", "10.81.0.9"
	bridgeUplink(t, br, plain, plainIP)
	d := harness.Start(t, "", `metrics_listen = "127.0.0.1:0"`, "", pns)

	if out := manactlOK(t, d, "segment", "list"); !strings.HasPrefix(out, "NAME") || strings.Count(out, "\n") != 1 {
		t.Fatalf("segment list of a daemon without segments:\n%s", out)
	}
	manactlOK(t, d, "segment", "add", "wire5", "--storm-pps", "5000", "--ageing", "90s")
	manactlFails(t, d, "netlink error: segment wire5 already exists: File exists", "segment", "add", "wire5")
	manactlFails(t, d, "invalid --ageing 'soon'", "segment", "add", "wire6", "--ageing", "soon")
	manactlFails(t, d, "netlink error: no segment nope: No such file or directory", "segment", "show", "nope")
	manactlOK(t, d, "segment", "uplink", "add", "wire5", "upl", "--netns", br)
	manactlFails(t, d, "already used by segment wire5: File exists", "segment", "uplink", "add", "wire5", "upl", "--netns", br)
	manactlOK(t, d, "port", "add", port, "--netns", pns, "--segment", "wire5")
	harness.Run(t, pns, "ip", "addr", "add", portIP+"/24", "dev", port)
	harness.Run(t, pns, "ip", "link", "set", port, "up")

	harness.Eventually(t, "the uplink to attach", func() bool {
		s := showSegment(t, d, "wire5")
		return len(s.Uplinks) == 1 && s.Uplinks[0].State == "attached"
	})
	s := showSegment(t, d, "wire5")
	require.Equal(t, "runtime", s.Origin, "segment show: %+v", s)
	require.Equal(t, uint64(5000), s.StormPPS, "segment show: %+v", s)
	require.Equal(t, uint64(90000), s.AgeingMs, "segment show: %+v", s)
	require.Len(t, s.Ports, 1, "segment show: %+v", s)
	require.Equal(t, port, s.Ports[0], "segment show: %+v", s)
	require.Equal(t, "upl", s.Uplinks[0].Dev, "segment show: %+v", s)
	require.Equal(t, br, s.Uplinks[0].NetNS, "segment show: %+v", s)
	require.Equal(t, "veth", s.Uplinks[0].Kind, "segment show: %+v", s)
	require.Equal(t, uint32(1500), s.Uplinks[0].MaxPortMTU, "segment show: %+v", s)
	harness.Run(t, pns, "ping", "-c", "3", "-i", "0.2", "-W", "2", plainIP)
	if s := showSegment(t, d, "wire5"); s.Uplinks[0].RxPackets == 0 || s.Uplinks[0].TxPackets == 0 {
		t.Errorf("uplink counters after a ping: %+v", s.Uplinks[0])
	}
	if v := uplinkUpMetric(t, d, "wire5", "upl", br); v != "1" {
		t.Errorf("manad_uplink_up = %q, want 1", v)
	}
	// Bash completion offers the segments manad has.
	assert.Contains(t, manactlOK(t, d, "__complete", "segment", "show", ""), "wire5\n", "completion of segment show")
	text := manactlOK(t, d, "segment", "show", "wire5")
	for _, want := range []string{"Segment wire5:", "Ports:", port, "Uplink " + br + "/upl:", "State:", "attached (veth, ifindex"} {
		assert.Contains(t, text, want, "segment show lacks")
	}

	// The device disappears (deleting upl deletes its peer too) and comes back.
	harness.Run(t, br, "ip", "link", "del", "upl")
	harness.Eventually(t, "show to say gone", func() bool { return showSegment(t, d, "wire5").Uplinks[0].State == "gone" })
	v := uplinkUpMetric(t, d, "wire5", "upl", br)
	assert.Equal(t, "0", v, "manad_uplink_up of a gone uplink = %q, want 0", v)
	_, err := harness.RunErr(pns, "ping", "-c", "1", "-W", "1", plainIP)
	assert.Error(t, err, "ping crossed an uplink whose device is gone")
	uplinkVeth(t, br)
	harness.Eventually(t, "show to say attached", func() bool { return showSegment(t, d, "wire5").Uplinks[0].State == "attached" })
	harness.Run(t, pns, "ping", "-c", "3", "-i", "0.2", "-W", "2", plainIP)
	n := strings.Count(d.Log(), `msg="uplink absent" uplink=`+br+`/upl`)
	assert.Equal(t, 1, n, "the device's disappearance logged %d times, want once", n)

	// A restart keeps the runtime segment, its uplink and the port on it.
	d.Stop()
	d.Restart()
	// The port's TAP is not persistent: it comes back without its address.
	if out, _ := harness.RunErr(pns, "ip", "-4", "addr", "show", "dev", port); !strings.Contains(out, portIP) {
		harness.Run(t, pns, "ip", "addr", "add", portIP+"/24", "dev", port)
	}
	harness.Run(t, pns, "ip", "link", "set", port, "up")
	harness.Eventually(t, "the uplink to attach after the restart", func() bool {
		s := showSegment(t, d, "wire5")
		return len(s.Uplinks) == 1 && s.Uplinks[0].State == "attached"
	})
	s = showSegment(t, d, "wire5")
	require.Equal(t, uint64(5000), s.StormPPS, "after the restart: %+v", s)
	require.Equal(t, uint64(90000), s.AgeingMs, "after the restart: %+v", s)
	require.Len(t, s.Ports, 1, "after the restart: %+v", s)
	harness.Run(t, pns, "ping", "-c", "3", "-i", "0.2", "-W", "2", plainIP)

	// Deletion: refused while the port is on the segment, then the uplink, the port, the segment.
	manactlFails(t, d, "netlink error: segment wire5 has ports: "+port+": Device or resource busy", "segment", "del", "wire5")
	manactlOK(t, d, "segment", "uplink", "del", "wire5", "upl", "--netns", br)
	manactlFails(t, d, "has no uplink", "segment", "uplink", "del", "wire5", "upl", "--netns", br)
	harness.Run(t, br, "ip", "link", "show", "upl") // an uplink's device outlives it
	// Devices are looked up in the caller's namespace: the port is deleted from inside pns.
	_, bin := harness.Binaries(t)
	harness.Run(t, pns, "env", "GORACE=atexit_sleep_ms=0", bin, "--socket", d.Socket, "port", "del", port)
	manactlOK(t, d, "segment", "del", "wire5")
	manactlFails(t, d, "no segment wire5", "segment", "show", "wire5")
	d.Stop()
	d.Restart()
	assert.NotContains(t, manactlOK(t, d, "segment", "list"), "wire5", "a deleted segment came back after a restart")
}

// TestVXLANUplinkMTU: a VXLAN uplink reports as the largest port MTU it carries what its lower
// device leaves after the encapsulation (50 bytes of overhead over IPv4, 70 over IPv6), also once
// the lower device's MTU shrank below what the VXLAN device was created with (the kernel leaves
// the VXLAN device's MTU as it was); deleted, it is gone, and recreated, attached.
func TestVXLANUplinkMTU(t *testing.T) {
	testenv.RequireRoot(t)
	host := netns(t, harness.Name("fvh", ""))
	harness.Run(t, host, "ip", "link", "add", "ul", "type", "veth", "peer", "name", "ulp")
	harness.Run(t, host, "ip", "addr", "add", "192.168.79.1/24", "dev", "ul")
	harness.Run(t, host, "ip", "-6", "addr", "add", "fd79::1/64", "dev", "ul", "nodad")
	for _, dev := range []string{"ul", "ulp"} {
		harness.Run(t, host, "ip", "link", "set", dev, "up")
	}
	vxlan := func(name, local string) {
		harness.Run(t, host, "ip", "link", "add", name, "type", "vxlan", "id", "7", "dstport", "4789", "local", local, "dev", "ul")
		harness.Run(t, host, "ip", "link", "set", name, "up")
	}
	vxlan("vx4", "192.168.79.1")
	vxlan("vx6", "fd79::1")
	d := harness.Start(t, "", "", "")
	manactlOK(t, d, "segment", "add", "wire7")
	manactlOK(t, d, "segment", "uplink", "add", "wire7", "vx4", "--netns", host)
	manactlOK(t, d, "segment", "uplink", "add", "wire7", "vx6", "--netns", host)
	overhead := map[string]uint32{"vx4": 50, "vx6": 70}
	check := func(lower uint32) {
		t.Helper()
		harness.Eventually(t, fmt.Sprintf("the VXLAN uplinks to report a lower MTU of %d", lower), func() bool {
			s := showSegment(t, d, "wire7")
			if len(s.Uplinks) != 2 {
				return false
			}
			for _, u := range s.Uplinks {
				if u.State != "attached" || u.Kind != "vxlan" || u.MaxPortMTU != min(u.MTU, lower-overhead[u.Dev]) {
					return false
				}
			}
			return true
		})
	}
	check(1500)
	if s := showSegment(t, d, "wire7"); s.Uplinks[0].MTU != 1450 || s.Uplinks[1].MTU != 1430 {
		t.Errorf("VXLAN uplink MTUs %d and %d, want the kernel's defaults 1450 and 1430", s.Uplinks[0].MTU, s.Uplinks[1].MTU)
	}
	harness.Run(t, host, "ip", "link", "set", "ul", "mtu", "1400")
	check(1400)
	t.Logf("after the lower device's MTU shrank: %+v", showSegment(t, d, "wire7").Uplinks)
	// What the lower device cannot carry is dropped and counted at the uplink, not fragmented:
	// a port on the segment sends a 1400-byte frame into vx4 (MTU 1450, room for 1350).
	pns, port := harness.Name("fvp", ""), harness.Name("fv", "0")
	manactlOK(t, d, "port", "add", port, "--netns", pns, "--segment", "wire7")
	t.Cleanup(func() { harness.RunErr("", "ip", "netns", "del", pns) })
	harness.Run(t, pns, "ip", "addr", "add", "10.82.0.1/24", "dev", port)
	harness.Run(t, pns, "ip", "link", "set", port, "up")
	harness.Run(t, pns, "ip", "neigh", "add", "10.82.0.2", "lladdr", "02:00:00:00:00:02", "dev", port)
	harness.RunErr(pns, "ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1372", "10.82.0.2")
	harness.Eventually(t, "the too-big frame to be counted", func() bool { return showSegment(t, d, "wire7").Uplinks[0].TxDrops.MTU > 0 })
	// A frame the lower device carries goes out.
	before := showSegment(t, d, "wire7").Uplinks[0].TxPackets
	harness.RunErr(pns, "ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1300", "10.82.0.2")
	harness.Eventually(t, "a frame that fits to go out", func() bool { return showSegment(t, d, "wire7").Uplinks[0].TxPackets > before })
	_, bin := harness.Binaries(t)
	harness.Run(t, pns, "env", "GORACE=atexit_sleep_ms=0", bin, "--socket", d.Socket, "port", "del", port)

	harness.Run(t, host, "ip", "link", "del", "vx4")
	harness.Eventually(t, "the deleted VXLAN device to show gone", func() bool {
		return showSegment(t, d, "wire7").Uplinks[0].State == "gone"
	})
	vxlan("vx4", "192.168.79.1")
	harness.Eventually(t, "the recreated VXLAN device to show attached", func() bool {
		return showSegment(t, d, "wire7").Uplinks[0].State == "attached"
	})
	manactlOK(t, d, "segment", "del", "wire7")
}

// TestSegmentUplinkAttachModes: `segment uplink add --attach` through the real manactl and
// manad: af_xdp on a veth into a bridge carries a ping and is what show, --json and the metrics
// report, also after a restart (the state file keeps the mode); auto on a veth, which offers no
// AF_XDP zero-copy, takes AF_PACKET and logs why once; a bad mode is refused; deleting the
// uplink and stopping manad leave no XDP program on the devices.
func TestSegmentUplinkAttachModes(t *testing.T) {
	testenv.RequireRoot(t)
	br, plain := netns(t, harness.Name("fxb", "")), netns(t, harness.Name("fxp", ""))
	pns, port := harness.Name("fxq", ""), harness.Name("fx", "0")
	const portIP, plainIP = "10.84.0.1", "10.84.0.9"
	bridgeUplink(t, br, plain, plainIP)
	harness.Run(t, br, "ip", "link", "add", "big", "mtu", "9000", "type", "veth", "peer", "name", "bigp")
	harness.Run(t, br, "ip", "link", "set", "bigp", "up")
	harness.Run(t, br, "ip", "link", "set", "big", "up")
	d := harness.Start(t, "", `metrics_listen = "127.0.0.1:0"`, "", pns)

	manactlFails(t, d, `--attach "xdp": want af_packet, af_xdp or auto`, "segment", "uplink", "add", "wire8", "upl", "--netns", br, "--attach", "xdp")
	manactlOK(t, d, "segment", "add", "wire8")
	manactlOK(t, d, "segment", "uplink", "add", "wire8", "upl", "--netns", br, "--attach", "af_xdp")
	manactlOK(t, d, "segment", "add", "wire9")
	manactlOK(t, d, "segment", "uplink", "add", "wire9", "big", "--netns", br, "--attach", "auto")
	manactlOK(t, d, "port", "add", port, "--netns", pns, "--segment", "wire8")
	harness.Run(t, pns, "ip", "addr", "add", portIP+"/24", "dev", port)
	harness.Run(t, pns, "ip", "link", "set", port, "up")

	attached := func(seg, want string) {
		t.Helper()
		harness.Eventually(t, seg+"'s uplink to attach", func() bool {
			s := showSegment(t, d, seg)
			return len(s.Uplinks) == 1 && s.Uplinks[0].State == "attached"
		})
		require.Equal(t, want, showSegment(t, d, seg).Uplinks[0].Attach, "%s's uplink attached with", seg)
	}
	attached("wire8", "af_xdp")
	attached("wire9", "af_packet")
	harness.Run(t, pns, "ping", "-c", "3", "-i", "0.2", "-W", "2", plainIP)
	// A veth runs XDP natively, copying (it has no AF_XDP zero-copy).
	assert.Contains(t, manactlOK(t, d, "segment", "show", "wire8"), "Attachment:          af_xdp (native copy)", "segment show does not say af_xdp (native copy)")
	assert.Contains(t, manactlOK(t, d, "segment", "show", "wire9"), "Attachment:          af_packet (auto: big offers no AF_XDP zero-copy", "segment show does not say why auto took af_packet")
	if u := showSegment(t, d, "wire8").Uplinks[0]; u.XDPMode != "native copy" || u.Fallback != "" {
		t.Errorf("--json of the af_xdp uplink: xdp-mode %q, fallback %q", u.XDPMode, u.Fallback)
	}
	u := showSegment(t, d, "wire9").Uplinks[0]
	assert.Equal(t, "", u.XDPMode, "--json of the auto uplink: xdp-mode %q, fallback %q", u.XDPMode, u.Fallback)
	assert.Contains(t, u.Fallback, "no AF_XDP zero-copy", "--json of the auto uplink: xdp-mode %q, fallback %q", u.XDPMode, u.Fallback)
	assert.Contains(t, d.Log(), `msg="uplink falls back to AF_PACKET"`, "auto's fallback not logged with its reason:\n%s", d.Log())
	assert.Contains(t, d.Log(), "big offers no AF_XDP zero-copy (xdp-features basic,redirect", "auto's fallback not logged with its reason:\n%s", d.Log())
	assert.Contains(t, scrape(t, d), `manad_uplink_attachment_info{attach="af_xdp",dev="upl",netns="`+br+`",segment="wire8"} 1`, "no manad_uplink_attachment_info for the af_xdp uplink")
	require.Contains(t, harness.Run(t, br, "ip", "-d", "link", "show", "dev", "upl"), "prog/xdp", "no XDP program on upl while attached with af_xdp")

	d.Stop()
	for _, dev := range []string{"upl", "big"} {
		require.NotContains(t, harness.Run(t, br, "ip", "-d", "link", "show", "dev", dev), "xdp", "an XDP program is left on %s after manad stopped", dev)
	}
	d.Restart()
	attached("wire8", "af_xdp")
	if out, _ := harness.RunErr(pns, "ip", "-4", "addr", "show", "dev", port); !strings.Contains(out, portIP) {
		harness.Run(t, pns, "ip", "addr", "add", portIP+"/24", "dev", port)
	}
	harness.Run(t, pns, "ip", "link", "set", port, "up")
	harness.Run(t, pns, "ping", "-c", "3", "-i", "0.2", "-W", "2", plainIP)
	manactlOK(t, d, "segment", "uplink", "del", "wire8", "upl", "--netns", br)
	require.NotContains(t, harness.Run(t, br, "ip", "-d", "link", "show", "dev", "upl"), "xdp", "an XDP program is left on upl after uplink del")
}

// scrape returns d's /metrics page.
func scrape(t *testing.T, d *harness.Daemon) string {
	t.Helper()
	m := metricsAddrRE.FindAllStringSubmatch(d.Log(), -1)
	require.NotNil(t, m, "no metrics address in the log:\n%s", d.Log())
	resp, err := http.Get("http://" + m[len(m)-1][1] + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}
