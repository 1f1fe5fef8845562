package tap

import (
	"context"
	"os/exec"
	"testing"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/tests/testenv"
)

// TestFeaturesFollowEthtool turns the TAP's rx-udp-gro-forwarding and rx-gro-list on and off with
// ethtool -K, as an administrator would, and checks that Device.Features reads what the kernel
// has and that Watch reports each change (and nothing else changed) as a link event.
func TestFeaturesFollowEthtool(t *testing.T) {
	taptest.Require(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "needs ethtool: %v", err)
	}
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	d := openTest(t, Config{Name: name, Queues: 1, NetNS: ns})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := d.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	// A TAP comes with GRO on and the UDP GRO features off (NETIF_F_SOFT_FEATURES_OFF).
	if ev := next(t, ch); ev.Features != FeatureGRO || ev.Features.UDPGRO() {
		t.Fatalf("first event's features %03b, want only rx-gro", ev.Features)
	}
	ethtool := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "ethtool", "-K", name}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ethtool -K %v: %v: %s", args, err, out)
		}
	}
	for _, step := range []struct {
		args []string
		want Features
		udp  bool
	}{
		{[]string{"rx-udp-gro-forwarding", "on"}, FeatureGRO | FeatureGROUDPFwd, true},
		{[]string{"gro", "off"}, FeatureGROUDPFwd, false},
		{[]string{"gro", "on", "rx-udp-gro-forwarding", "off", "rx-gro-list", "on"}, FeatureGRO | FeatureGROList, true},
		{[]string{"rx-gro-list", "off"}, FeatureGRO, false},
	} {
		ethtool(step.args...)
		ev := waitState(t, ch, "features after ethtool -K "+step.args[0], func(e LinkEvent) bool { return e.Features == step.want })
		if ev.Features.UDPGRO() != step.udp || ev.Name != name || ev.Deleted {
			t.Errorf("ethtool -K %v: event %+v, UDPGRO %v", step.args, ev, ev.Features.UDPGRO())
		}
		f, err := d.Features()
		if err != nil || f != step.want {
			t.Errorf("ethtool -K %v: Features() = %03b, %v; want %03b", step.args, f, err, step.want)
		}
	}
}
