package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// manaLinkText is `ethtool DEV` for a mana port; %s is the speed.
const manaLinkText = `Settings for mana0:
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

// TestWriteLink: the mana port's link settings in ethtool's layout; no MDI-X line (not twisted
// pair), Unknown! for an unknown speed, the link from the link state.
func TestWriteLink(t *testing.T) {
	for _, tc := range []struct {
		speed uint32
		link  bool
		want  string
	}{
		{200000, true, fmt.Sprintf(manaLinkText, "200000Mb/s", "yes")},
		{wire.SpeedUnknown, false, fmt.Sprintf(manaLinkText, "Unknown!", "no")},
	} {
		var b bytes.Buffer
		ls := &client.LinkSettings{LinkSettings: wire.LinkSettings{Speed: tc.speed, Duplex: wire.DuplexFull, Port: wire.PortOther}}
		writeLink(&b, "mana0", ls, &client.LinkState{LinkState: wire.LinkState{Link: tc.link}})
		assert.Equal(t, tc.want, b.String(), "speed %d link %v", tc.speed, tc.link)
	}
	var b bytes.Buffer
	writeTSInfo(&b, "mana0", &client.TSInfo{Timestamping: []string{"software-receive", "software-system-clock"}, PHCIndex: -1})
	want := "Time stamping parameters for mana0:\nCapabilities:\n\tsoftware-receive\n\tsoftware-system-clock\n" +
		"PTP Hardware Clock: none\nHardware Transmit Timestamp Modes: none\nHardware Receive Filter Modes: none\n"
	assert.Equal(t, want, b.String(), "tsinfo")
}

// TestLinkMatchesEthtool: on kernel devices (through the kernel fallback) `manactl DEV` and
// `manactl -T DEV` print what the installed ethtool prints, for a veth and a TAP. ethtool's
// message-level line (DEBUG_GET, which manactl does not ask; mana has no msglevel) is left out of
// the comparison.
func TestLinkMatchesEthtool(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "no ethtool: %v", err)
	}
	base := fmt.Sprintf("mctl%d", os.Getpid()%100000)
	veth, tap := base+"v", base+"t"
	for _, args := range [][]string{
		{"link", "add", veth, "type", "veth", "peer", "name", veth + "p"},
		{"tuntap", "add", "dev", tap, "mode", "tap"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %v: %s", args, err, out)
		dev := args[2]
		if args[0] == "tuntap" {
			dev = args[3]
		}
		t.Cleanup(func() { exec.Command("ip", "link", "del", dev).Run() })
	}
	sock := t.TempDir() + "/manad.sock" // no manad: the kernel answers
	dropMsgLevel := func(s string) string {
		var out []string
		lines := strings.Split(s, "\n")
		for i := 0; i < len(lines); i++ {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "Current message level:") {
				i++ // and its continuation line of flag names
				continue
			}
			out = append(out, lines[i])
		}
		return strings.Join(out, "\n")
	}
	for _, dev := range []string{veth, tap} {
		for _, opt := range [][]string{nil, {"-T"}} {
			args := append(append([]string(nil), opt...), dev)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				want, err := exec.Command("ethtool", args...).Output()
				require.NoError(t, err, "ethtool %v", args)
				code, got, errs := runCLI(t, sock, args...)
				require.Equal(t, 0, code, "manactl %v: exit %d: %s", args, code, errs)
				assert.Equal(t, dropMsgLevel(string(want)), dropMsgLevel(got), "manactl %v:\n%s\nethtool:\n%s", args, got, want)
			})
		}
	}
}
