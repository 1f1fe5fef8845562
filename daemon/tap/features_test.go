package tap

import (
	"context"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchedTAP opens a one-queue TAP in a namespace of its own and watches it, for the tests that
// need ethtool (skipped, or failed in CI, without it); the watch ends with the test.
func watchedTAP(t *testing.T) (ns, name string, d *Device, ch <-chan LinkEvent) {
	t.Helper()
	taptest.Require(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "needs ethtool: %v", err)
	}
	ns = taptest.NetNS(t)
	name = taptest.Name("mt")
	d = openTest(t, Config{Name: name, Queues: 1, NetNS: ns})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := d.Watch(ctx)
	require.NoError(t, err, "Watch")
	return ns, name, d, ch
}

// TestFeaturesFollowEthtool turns the TAP's rx-udp-gro-forwarding and rx-gro-list on and off with
// ethtool -K, as an administrator would, and checks that Device.Features reads what the kernel
// has and that Watch reports each change (and nothing else changed) as a link event.
func TestFeaturesFollowEthtool(t *testing.T) {
	ns, name, d, ch := watchedTAP(t)
	// A TAP comes with GRO on and the UDP GRO features off (NETIF_F_SOFT_FEATURES_OFF).
	if ev := next(t, ch); ev.Features != FeatureGRO || ev.Features.UDPGRO() {
		t.Fatalf("first event's features %03b, want only rx-gro", ev.Features)
	}
	ethtool := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "ethtool", "-K", name}, args...)...).CombinedOutput()
		require.NoError(t, err, "ethtool -K %v: %v: %s", args, err, out)
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
		assert.Equal(t, step.udp, ev.Features.UDPGRO(), "ethtool -K %v: event %+v, UDPGRO %v", step.args, ev, ev.Features.UDPGRO())
		assert.Equal(t, name, ev.Name, "ethtool -K %v: event %+v, UDPGRO %v", step.args, ev, ev.Features.UDPGRO())
		assert.False(t, ev.Deleted, "ethtool -K %v: event %+v, UDPGRO %v", step.args, ev, ev.Features.UDPGRO())
		f, err := d.Features()
		if err != nil || f != step.want {
			t.Errorf("ethtool -K %v: Features() = %03b, %v; want %03b", step.args, f, err, step.want)
		}
	}
}

// TestSetFeatures turns the TAP's UDP GRO features on and off with Device.SetFeatures and checks
// them against what ethtool -k reads from the kernel, and that Watch reports each change.
func TestSetFeatures(t *testing.T) {
	ns, name, d, ch := watchedTAP(t)
	next(t, ch)
	for _, step := range []struct {
		mask, value, want Features
		fwd, list         string
	}{
		{FeatureGROUDPFwd, FeatureGROUDPFwd, FeatureGRO | FeatureGROUDPFwd, "on", "off"},
		{FeatureGROUDPFwd | FeatureGROList, FeatureGROList, FeatureGRO | FeatureGROList, "off", "on"},
		{FeatureGROList, 0, FeatureGRO, "off", "off"},
	} {
		got, err := d.SetFeatures(step.mask, step.value)
		require.NoError(t, err, "SetFeatures(%03b, %03b) = %03b, %v; want %03b", step.mask, step.value, got, err, step.want)
		require.Equal(t, step.want, got, "SetFeatures(%03b, %03b) = %03b, %v; want %03b", step.mask, step.value, got, err, step.want)
		fwd, list := taptest.EthtoolFeature(t, ns, name, "rx-udp-gro-forwarding"), taptest.EthtoolFeature(t, ns, name, "rx-gro-list")
		assert.Equal(t, step.fwd, fwd, "after SetFeatures(%03b, %03b): ethtool -k shows rx-udp-gro-forwarding %s, rx-gro-list %s; want %s, %s", step.mask, step.value, fwd, list, step.fwd, step.list)
		assert.Equal(t, step.list, list, "after SetFeatures(%03b, %03b): ethtool -k shows rx-udp-gro-forwarding %s, rx-gro-list %s; want %s, %s", step.mask, step.value, fwd, list, step.fwd, step.list)
		waitState(t, ch, "the change's link event", func(e LinkEvent) bool { return e.Features == step.want })
	}
	require.NoError(t, d.Close())
	_, err := d.SetFeatures(FeatureGROList, FeatureGROList)
	assert.ErrorIs(t, err, unix.ENODEV, "SetFeatures after Close: %v, want ENODEV", err)
}

func TestFeatureName(t *testing.T) {
	for _, tt := range []struct {
		f    Features
		want string
	}{
		{FeatureGRO, "rx-gro"}, {FeatureGROUDPFwd, "rx-udp-gro-forwarding"}, {FeatureGROList, "rx-gro-list"},
		{FeatureGRO | FeatureGROList, ""}, {0, ""},
	} {
		assert.Equal(t, tt.want, tt.f.Name(), "Features(%03b).Name()", tt.f)
	}
}
