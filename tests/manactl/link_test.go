package manactl

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// manaLink is `ethtool DEV` of a MANA port: speed %s, link detected %s.
const manaLink = `Settings for %s:
	Supported ports: [  ]
	Supported link modes:   Not reported
	Supported pause frame use: No
	Supports auto-negotiation: No
	Supported FEC modes: Not reported
	Advertised link modes:  Not reported
	Advertised pause frame use: No
	Advertised auto-negotiation: No
	Advertised FEC modes: Not reported
	Speed: %s
	Duplex: Full
	Auto-negotiation: off
	Port: Other
	PHYAD: 0
	Transceiver: internal
	Link detected: %s
`

// TestLinkCommands: against the real daemon, `manactl PORT` shows the configured speed (and
// Unknown! for a port without one) and a link that follows the port going up and down;
// `manactl -T PORT` shows software receive time stamps only; LINKINFO/LINKMODES SETs do not exist
// in manactl, and the GETs work for an unprivileged user.
func TestLinkCommands(t *testing.T) {
	dir := worldDir(t)
	ns := harness.Name("mln", "")
	fast, plain := harness.Name("mlf", "0"), harness.Name("mlu", "0")
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nspeed = 100000\npersistent = false\n\n[[port]]\nname = %q\nnetns = %q\npersistent = false\n",
		fast, ns, plain, ns)
	d := harness.Start(t, dir, "", ports, ns)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: ns, socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}

	link := func(dev string) string { return ok(t, dev, e.mctl(t, dev)) }
	harness.Run(t, ns, "ip", "link", "set", fast, "up")
	harness.Eventually(t, "link detected", func() bool { return link(fast) == fmt.Sprintf(manaLink, fast, "100000Mb/s", "yes") })
	harness.Run(t, ns, "ip", "link", "set", fast, "down")
	harness.Eventually(t, "link gone", func() bool { return link(fast) == fmt.Sprintf(manaLink, fast, "100000Mb/s", "no") })
	assert.Equal(t, fmt.Sprintf(manaLink, plain, "Unknown!", "no"), link(plain), "port without speed")
	assert.Equal(t, fmt.Sprintf(manaLink, fast, "100000Mb/s", "no"), ok(t, "show-link as nobody", e.mctlAs(t, "show-link", fast)), "show-link as nobody")

	var js []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(t, "--json", e.mctl(t, "--json", fast))), &js))
	if len(js) != 1 || js[0]["speed"] != 100000.0 || js[0]["port"] != "Other" || js[0]["link-detected"] != false {
		t.Errorf("--json %s: %v", fast, js)
	}

	wantT := fmt.Sprintf("Time stamping parameters for %s:\nCapabilities:\n\tsoftware-receive\n\tsoftware-system-clock\n"+
		"PTP Hardware Clock: none\nHardware Transmit Timestamp Modes: none\nHardware Receive Filter Modes: none\n", fast)
	assert.Equal(t, wantT, ok(t, "-T", e.mctl(t, "-T", fast)), "-T")
	assert.Contains(t, ok(t, "--json -T", e.mctl(t, "--json", "-T", fast)), `"phc-index": null`, "--json -T")
}
