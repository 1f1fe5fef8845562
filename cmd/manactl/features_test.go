package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFeaturesMatchEthtool: on kernel devices (through the kernel fallback) `manactl -k DEV`
// prints what the installed ethtool prints, for a veth and a TAP (fixed, requested and grouped
// features all occur).
func TestFeaturesMatchEthtool(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "no ethtool: %v", err)
	}
	base := fmt.Sprintf("mfk%d", os.Getpid()%100000)
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
	for _, dev := range []string{veth, tap} {
		t.Run(dev, func(t *testing.T) {
			want, err := exec.Command("ethtool", "-k", dev).Output()
			require.NoError(t, err, "ethtool -k")
			code, got, errs := runCLI(t, sock, "-k", dev)
			require.Equal(t, 0, code, "manactl -k: exit %d: %s", code, errs)
			assert.Equal(t, string(want), got, "manactl -k:\n%s\nethtool -k:\n%s", got, want)
			assert.Contains(t, got, "[fixed]", "no fixed feature in")
		})
	}
}

// TestSetFeaturesMatchEthtool: `manactl -K` on one veth and `ethtool -K` on another in the
// same state print the same and exit alike, request after request: as asked (silent), with
// features changed along (Actual changes), and nothing changeable (status 1).
func TestSetFeaturesMatchEthtool(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "no ethtool: %v", err)
	}
	base := fmt.Sprintf("mfK%d", os.Getpid()%100000)
	ours, theirs := base+"m", base+"e"
	for _, dev := range []string{ours, theirs} {
		out, err := exec.Command("ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p").CombinedOutput()
		require.NoError(t, err, "ip link add: %v: %s", err, out)
		t.Cleanup(func() { exec.Command("ip", "link", "del", dev).Run() })
	}
	sock := t.TempDir() + "/manad.sock" // no manad: the kernel answers
	for _, req := range [][]string{
		{"tso", "off"}, {"tso", "on"}, {"sg", "off"}, {"sg", "on"}, {"gro", "on"}, {"gro", "off"},
		{"tx-checksum-ipv4", "on"}, {"tx", "off", "gso", "off"}, {"tx", "on", "gso", "on"},
	} {
		t.Run(strings.Join(req, " "), func(t *testing.T) {
			cmd := exec.Command("ethtool", append([]string{"-K", theirs}, req...)...)
			want, _ := cmd.Output()
			code, got, errs := runCLI(t, sock, append([]string{"-K", ours}, req...)...)
			assert.Equal(t, string(want), got, "manactl: exit %d\n%s%s\nethtool: exit %d\n%s", code, got, errs, cmd.ProcessState.ExitCode(), want)
			assert.Equal(t, cmd.ProcessState.ExitCode(), code, "manactl: exit %d\n%s%s\nethtool: exit %d\n%s", code, got, errs, cmd.ProcessState.ExitCode(), want)
		})
	}
}
