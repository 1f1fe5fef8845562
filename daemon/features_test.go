package daemon

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/testenv"
)

// featuresPort is a running daemon with one up port, hf0, in its own namespace, and a client
// of manad's socket and one of the kernel's ethtool family, both in that namespace.
type featuresPort struct {
	d       *Daemon
	ns      string
	c, kc   *client.Client
	ctx     context.Context
	hf0     client.Interface
	running func() bool
	ipn     func(args ...string) string
}

func startFeaturesPort(t *testing.T) *featuresPort {
	t.Helper()
	taptest.Require(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "needs ethtool: %v", err)
	}
	ns := taptest.NetNS(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "manad.sock")
	doc := fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q

[[port]]
name = "hf0"
netns = %q
persistent = false
queues = 2
`, sock, filepath.Join(dir, "state"), ns)
	fp := &featuresPort{d: runTest(t, doc, Options{}), ns: ns, hf0: client.Interface{Name: "hf0"}}
	d := fp.d
	fp.ipn = func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		require.NoError(t, err, "ip %v: %v: %s", args, err, out)
		return string(out)
	}
	fp.ipn("addr", "add", "192.0.2.1/24", "dev", "hf0")
	fp.ipn("link", "set", "hf0", "up")
	fp.running = func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		p := d.ports["hf0"]
		return p != nil && p.vp.State().Running
	}
	for deadline := time.Now().Add(30 * time.Second); !fp.running(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the port did not come up")
		}
	}
	// The port is resolved in the caller's namespace: connect from inside ns.
	var err, kerr error
	taptest.InNetNS(t, ns, func() {
		fp.c, err = client.Dial(sock)
		fp.kc, kerr = client.DialKernel()
	})
	require.NoError(t, err, "dial manad: %v; dial the kernel: %v", err, kerr)
	require.NoError(t, kerr, "dial manad: %v; dial the kernel: %v", err, kerr)
	t.Cleanup(func() { fp.c.Close(); fp.kc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	fp.ctx = ctx
	return fp
}

// TestFeaturesTSOOff: ethtool -K tso off through manad's ethtool family turns the port's TAP
// offloads off (the kernel's TAP then has no TSO and hands over MTU frames), the reply lists the
// features that went with it, and the port stays up with its ifindex and address; tso on brings
// them back.
func TestFeaturesTSOOff(t *testing.T) {
	fp := startFeaturesPort(t)
	d, ns, c, cctx, hf0, running, ipn := fp.d, fp.ns, fp.c, fp.ctx, fp.hf0, fp.running, fp.ipn
	tapTSO := func() string { // what the kernel's TAP says, as ethtool -k shows it
		t.Helper()
		return taptest.EthtoolFeature(t, ns, "hf0", "tcp-segmentation-offload")
	}
	ifindex := func() string { return strings.Fields(ipn("-o", "link", "show", "hf0"))[0] }
	idx := ifindex()

	f, err := c.Features(cctx, hf0)
	require.NoError(t, err)
	for _, n := range []string{"tx-tcp-segmentation", "tx-checksum-ipv4", "rx-gro"} {
		assert.Contains(t, f.Active, n, "%s not active: %+v", n, f)
		assert.Contains(t, f.HW, n, "%s not changeable: %+v", n, f)
	}
	require.Equal(t, "on", tapTSO(), "TAP tcp-segmentation-offload with offloads on")

	for _, on := range []bool{false, true} {
		ch, err := c.SetFeatures(cctx, hf0, map[string]bool{"tx-tcp-segmentation": on})
		require.NoError(t, err, "SetFeatures tso %v", on)
		// The features move together: the others that changed are in the reply.
		for _, n := range []string{"tx-tcp-segmentation", "rx-gro", "tx-checksum-ipv4"} {
			assert.Equal(t, on, ch.Active[n], "tso %v: active changes %v lack %s", on, ch.Active, n)
		}
		want := map[bool]string{false: "off", true: "on"}[on]
		assert.Equal(t, want, tapTSO(), "tso %v: the TAP's tcp-segmentation-offload is", on)
		assert.True(t, running(), "tso %v: port not running", on)
		link := ipn("-o", "link", "show", "hf0")
		got := ifindex()
		assert.Equal(t, idx, got, "tso %v: link %s (ifindex was %s)", on, link, idx)
		assert.Contains(t, link, "LOWER_UP", "tso %v: link %s (ifindex was %s)", on, link, idx)
		assert.Contains(t, ipn("-o", "addr", "show", "hf0"), "192.0.2.1/24", "tso %v: address lost", on)
		f, err := c.Features(cctx, hf0)
		require.NoError(t, err)
		assert.Equal(t, on, slices.Contains(f.Active, "tx-tcp-segmentation"), "tso %v: FEATURES_GET active %v", on, f.Active)
	}

	// rx-udp-gro-forwarding is the TAP's kernel feature: -K changes it there alone, without
	// touching the offloads, and with it whether the RX coalescer merges UDP.
	udpGRO := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.ports["hf0"].ep.UDPGRO()
	}
	for _, on := range []bool{true, false} {
		ch, err := c.SetFeatures(cctx, hf0, map[string]bool{"rx-udp-gro-forwarding": on})
		require.NoError(t, err, "SetFeatures rx-udp-gro-forwarding %v", on)
		assert.Equal(t, map[string]bool{"rx-udp-gro-forwarding": on}, ch.Active, "rx-udp-gro-forwarding %v: active changes, want only it", on)
		want := map[bool]string{false: "off", true: "on"}[on]
		assert.Equal(t, want, taptest.EthtoolFeature(t, ns, "hf0", "rx-udp-gro-forwarding"), "rx-udp-gro-forwarding %v: the TAP's is", on)
		assert.Equal(t, "on", tapTSO(), "rx-udp-gro-forwarding %v: the TAP's tcp-segmentation-offload is", on)
		assert.Equal(t, on, udpGRO(), "rx-udp-gro-forwarding %v: UDP receive coalescing %v", on, !on)
		got, up := ifindex(), running()
		assert.Equal(t, idx, got, "rx-udp-gro-forwarding %v: ifindex %s (was %s), running %v", on, got, idx, up)
		assert.True(t, up, "rx-udp-gro-forwarding %v: ifindex %s (was %s), running %v", on, got, idx, up)
		f, err := c.Features(cctx, hf0)
		require.NoError(t, err)
		assert.Equal(t, on, slices.Contains(f.Active, "rx-udp-gro-forwarding"), "rx-udp-gro-forwarding %v: FEATURES_GET %+v", on, f)
		assert.Contains(t, f.HW, "rx-udp-gro-forwarding", "rx-udp-gro-forwarding %v: FEATURES_GET %+v", on, f)
		assert.Contains(t, f.HW, "rx-gro-list", "rx-udp-gro-forwarding %v: FEATURES_GET %+v", on, f)
		assert.Contains(t, f.Active, "tx-tcp-segmentation", "rx-udp-gro-forwarding %v: FEATURES_GET %+v", on, f)
	}
}

// TestFeaturesAsMana: FEATURES_GET of a port is what a mana netdev reports (mana_probe_port's
// hw_features and features, plus what register_netdevice gives every netdev): the same
// changeable features, the same ones on, and no [fixed] bit a mana netdev lacks; and after each
// -K through manad, the features the port's TAP carries out are what the kernel's FEATURES_GET
// says for the TAP.
func TestFeaturesAsMana(t *testing.T) {
	fp := startFeaturesPort(t)
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	// mana_probe_port: SG, IP_CSUM, IPV6_CSUM, RXCSUM, TSO, TSO6, RXHASH; register_netdevice:
	// GSO, GRO, GRO_FRAGLIST, GRO_UDP_FWD, NOCACHE_COPY, TSO_MANGLEID.
	manaHW := sorted([]string{"tx-scatter-gather", "tx-checksum-ipv4", "tx-checksum-ipv6", "rx-checksum",
		"tx-tcp-segmentation", "tx-tcp6-segmentation", "rx-hashing", "tx-generic-segmentation", "rx-gro",
		"rx-gro-list", "rx-udp-gro-forwarding", "tx-nocache-copy", "tx-tcp-mangleid-segmentation"})
	// features = hw_features | HW_VLAN_CTAG_TX | HW_VLAN_CTAG_RX, then GSO | GRO.
	manaOn := sorted([]string{"tx-scatter-gather", "tx-checksum-ipv4", "tx-checksum-ipv6", "rx-checksum",
		"tx-tcp-segmentation", "tx-tcp6-segmentation", "rx-hashing", "tx-vlan-hw-insert", "rx-vlan-hw-parse",
		"tx-generic-segmentation", "rx-gro"})
	f, err := fp.c.Features(fp.ctx, fp.hf0)
	require.NoError(t, err)
	assert.Equal(t, manaHW, sorted(f.HW), "changeable features")
	assert.Equal(t, manaOn, sorted(f.Active), "active features")
	assert.Equal(t, sorted(f.Active), sorted(f.Wanted), "wanted features")
	var fixedOn []string
	for _, n := range f.Active {
		if !slices.Contains(f.HW, n) {
			fixedOn = append(fixedOn, n)
		}
	}
	assert.Equal(t, []string{"rx-vlan-hw-parse", "tx-vlan-hw-insert"}, sorted(fixedOn), "on and [fixed]")

	// What the TAP carries out, by the TAP's (tun's) feature names.
	toTAP := map[string]string{"tx-scatter-gather": "tx-scatter-gather", "tx-checksum-ipv4": "tx-checksum-ip-generic",
		"tx-checksum-ipv6": "tx-checksum-ip-generic", "tx-tcp-segmentation": "tx-tcp-segmentation",
		"tx-tcp6-segmentation": "tx-tcp6-segmentation", "tx-generic-segmentation": "tx-generic-segmentation",
		"rx-gro-list": "rx-gro-list", "rx-udp-gro-forwarding": "rx-udp-gro-forwarding"}
	agree := func(step string) {
		t.Helper()
		f, err := fp.c.Features(fp.ctx, fp.hf0)
		require.NoError(t, err, step)
		k, err := fp.kc.Features(fp.ctx, fp.hf0)
		require.NoError(t, err, step)
		for mana, tun := range toTAP {
			assert.Equal(t, slices.Contains(k.Active, tun), slices.Contains(f.Active, mana),
				"%s: manad's %s against the TAP's %s (manad %v, kernel %v)", step, mana, tun, f.Active, k.Active)
		}
	}
	agree("at start")
	for _, step := range []struct {
		name string
		want map[string]bool
	}{
		{"tso off", map[string]bool{"tx-tcp-segmentation": false}},
		{"tso on", map[string]bool{"tx-tcp-segmentation": true}},
		{"tx-checksum-ipv6 off", map[string]bool{"tx-checksum-ipv6": false}},
		{"all on", map[string]bool{"tx-checksum-ipv4": true, "tx-checksum-ipv6": true}},
		{"rx-gro-list on", map[string]bool{"rx-gro-list": true}},
		{"rx-gro-list off", map[string]bool{"rx-gro-list": false}},
	} {
		_, err := fp.c.SetFeatures(fp.ctx, fp.hf0, step.want)
		require.NoError(t, err, step.name)
		agree(step.name)
		require.True(t, fp.running(), "%s: port not running", step.name)
	}

	// GSO is the kernel's: the request is answered as by a driver that does not make the
	// change, and neither manad nor the TAP turns it off.
	ch, err := fp.c.SetFeatures(fp.ctx, fp.hf0, map[string]bool{"tx-generic-segmentation": false})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"tx-generic-segmentation": false}, ch.Wanted, "wanted and not active")
	assert.Empty(t, ch.Active, "active changes")
	agree("gso off")
	f, err = fp.c.Features(fp.ctx, fp.hf0)
	require.NoError(t, err)
	assert.Equal(t, manaOn, sorted(f.Active), "active features at the end")
}
