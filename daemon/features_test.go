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

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/testenv"
)

// TestFeaturesTSOOff: ethtool -K tso off through manad's ethtool family turns the port's TAP
// offloads off (the kernel's TAP then has no TSO and hands over MTU frames), the reply lists the
// features that went with it, and the port stays up with its ifindex and address; tso on brings
// them back.
func TestFeaturesTSOOff(t *testing.T) {
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
	d := runTest(t, doc, Options{})
	ipn := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	ipn("addr", "add", "192.0.2.1/24", "dev", "hf0")
	ipn("link", "set", "hf0", "up")
	running := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		p := d.ports["hf0"]
		return p != nil && p.vp.State().Running
	}
	for deadline := time.Now().Add(30 * time.Second); !running(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the port did not come up")
		}
	}
	tapTSO := func() string { // what the kernel's TAP says, as ethtool -k shows it
		t.Helper()
		return taptest.EthtoolFeature(t, ns, "hf0", "tcp-segmentation-offload")
	}
	// The port is resolved in the caller's namespace: connect from inside ns.
	var c *client.Client
	var err error
	taptest.InNetNS(t, ns, func() { c, err = client.Dial(sock) })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	hf0 := client.Interface{Name: "hf0"}
	ifindex := func() string { return strings.Fields(ipn("-o", "link", "show", "hf0"))[0] }
	idx := ifindex()

	f, err := c.Features(cctx, hf0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"tx-tcp-segmentation", "tx-checksum-ip-generic", "rx-gro"} {
		if !slices.Contains(f.Active, n) || !slices.Contains(f.HW, n) {
			t.Errorf("%s not active and changeable: %+v", n, f)
		}
	}
	if got := tapTSO(); got != "on" {
		t.Fatalf("TAP tcp-segmentation-offload %q with offloads on", got)
	}

	for _, on := range []bool{false, true} {
		ch, err := c.SetFeatures(cctx, hf0, map[string]bool{"tx-tcp-segmentation": on})
		if err != nil {
			t.Fatalf("SetFeatures tso %v: %v", on, err)
		}
		// The features move together: the others that changed are in the reply.
		if ch.Active["tx-tcp-segmentation"] != on || ch.Active["rx-gro"] != on || ch.Active["tx-checksum-ip-generic"] != on {
			t.Errorf("tso %v: active changes %v", on, ch.Active)
		}
		want := map[bool]string{false: "off", true: "on"}[on]
		if got := tapTSO(); got != want {
			t.Errorf("tso %v: the TAP's tcp-segmentation-offload is %q", on, got)
		}
		if !running() {
			t.Errorf("tso %v: port not running", on)
		}
		link := ipn("-o", "link", "show", "hf0")
		if got := ifindex(); got != idx || !strings.Contains(link, "LOWER_UP") {
			t.Errorf("tso %v: link %s (ifindex was %s)", on, link, idx)
		}
		if !strings.Contains(ipn("-o", "addr", "show", "hf0"), "192.0.2.1/24") {
			t.Errorf("tso %v: address lost", on)
		}
		f, err := c.Features(cctx, hf0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(f.Active, "tx-tcp-segmentation") != on {
			t.Errorf("tso %v: FEATURES_GET active %v", on, f.Active)
		}
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
		if err != nil {
			t.Fatalf("SetFeatures rx-udp-gro-forwarding %v: %v", on, err)
		}
		if len(ch.Active) != 1 || ch.Active["rx-udp-gro-forwarding"] != on {
			t.Errorf("rx-udp-gro-forwarding %v: active changes %v, want only it", on, ch.Active)
		}
		want := map[bool]string{false: "off", true: "on"}[on]
		if got := taptest.EthtoolFeature(t, ns, "hf0", "rx-udp-gro-forwarding"); got != want {
			t.Errorf("rx-udp-gro-forwarding %v: the TAP's is %q", on, got)
		}
		if got := tapTSO(); got != "on" {
			t.Errorf("rx-udp-gro-forwarding %v: the TAP's tcp-segmentation-offload is %q", on, got)
		}
		if udpGRO() != on {
			t.Errorf("rx-udp-gro-forwarding %v: UDP receive coalescing %v", on, !on)
		}
		if got := ifindex(); got != idx || !running() {
			t.Errorf("rx-udp-gro-forwarding %v: ifindex %s (was %s), running %v", on, got, idx, running())
		}
		f, err := c.Features(cctx, hf0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(f.Active, "rx-udp-gro-forwarding") != on || !slices.Contains(f.HW, "rx-udp-gro-forwarding") ||
			!slices.Contains(f.HW, "rx-gro-list") || !slices.Contains(f.Active, "tx-tcp-segmentation") {
			t.Errorf("rx-udp-gro-forwarding %v: FEATURES_GET %+v", on, f)
		}
	}
}
