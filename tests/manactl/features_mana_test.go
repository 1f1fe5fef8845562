package manactl

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/tests/harness"
)

// featureLines parses `ethtool -k` output (manactl -k prints the same) into name → "on",
// "off", "on [fixed]", … for every line, the legacy group lines included.
func featureLines(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range regexp.MustCompile(`(?m)^\s*([a-z0-9-]+): (on|off)( \[fixed\])?`).FindAllStringSubmatch(out, -1) {
		m[l[1]] = l[2] + l[3]
	}
	require.NotEmpty(t, m, "no feature lines in:\n%s", out)
	return m
}

// TestFeaturesShowMana: against the real daemon, `manactl -k PORT` shows what `ethtool -k` shows
// for a mana netdev: mana_probe_port's features (changeable ones without [fixed], the VLAN
// offloads on [fixed]), what register_netdevice gives every netdev (GSO and GRO on, GRO list,
// UDP GRO forwarding, nocache copy and TSO mangleid changeable), and every other feature off
// [fixed]. After `manactl -K PORT tso off` (and on), the kernel's `ethtool -k` of the port's TAP
// agrees on what the TAP carries out.
func TestFeaturesShowMana(t *testing.T) {
	dir := worldDir(t)
	ns := harness.Name("mfn", "")
	port := harness.Name("mfk", "0")
	d := harness.Start(t, dir, "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nqueues = 2\npersistent = false\n", port, ns), ns)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: ns, socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}
	harness.Run(t, ns, "ip", "link", "set", port, "up")

	mana := map[string]string{
		// mana_probe_port: hw_features, all on.
		"tx-scatter-gather": "on", "tx-checksum-ipv4": "on", "tx-checksum-ipv6": "on", "rx-checksumming": "on",
		"tx-tcp-segmentation": "on", "tx-tcp6-segmentation": "on", "receive-hashing": "on",
		// features only: on [fixed].
		"tx-vlan-offload": "on [fixed]", "rx-vlan-offload": "on [fixed]",
		// register_netdevice.
		"generic-segmentation-offload": "on", "generic-receive-offload": "on", "rx-gro-list": "off",
		"rx-udp-gro-forwarding": "off", "tx-nocache-copy": "off", "tx-tcp-mangleid-segmentation": "off",
	}
	// The legacy group lines ethtool prints above their features.
	groups := map[string]bool{"tx-checksumming": true, "scatter-gather": true, "tcp-segmentation-offload": true}
	got := featureLines(t, ok(t, "-k", e.mctl(t, "-k", port)))
	for name, want := range mana {
		assert.Equal(t, want, got[name], "manactl -k: %s", name)
	}
	for name, v := range got {
		if _, ok := mana[name]; !ok && !groups[name] {
			assert.Equal(t, "off [fixed]", v, "manactl -k: %s, which a mana netdev does not have", name)
		}
	}

	// What the port's TAP carries out, as the kernel reports it for the TAP (tun's names).
	toTAP := map[string]string{"tx-checksum-ipv4": "tx-checksum-ip-generic", "tx-tcp-segmentation": "tx-tcp-segmentation",
		"tx-tcp6-segmentation": "tx-tcp6-segmentation", "tx-scatter-gather": "tx-scatter-gather",
		"generic-segmentation-offload": "generic-segmentation-offload"}
	onOff := func(v string) string { return regexp.MustCompile(` .*`).ReplaceAllString(v, "") }
	for _, tso := range []string{"off", "on"} {
		ok(t, "-K tso "+tso, e.mctl(t, "-K", port, "tso", tso))
		ours := featureLines(t, ok(t, "-k", e.mctl(t, "-k", port)))
		tap := featureLines(t, harness.Run(t, ns, "ethtool", "-k", port))
		assert.Equal(t, tso, onOff(ours["tx-tcp-segmentation"]), "tso %s: manactl -k", tso)
		for m, k := range toTAP {
			assert.Equal(t, onOff(tap[k]), onOff(ours[m]), "tso %s: manad's %s against the TAP's %s", tso, m, k)
		}
	}
}
