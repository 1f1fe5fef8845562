package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/manad/manad/tests/testenv"
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
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
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
			if err != nil {
				t.Fatalf("ethtool -k: %v", err)
			}
			code, got, errs := runCLI(t, sock, "-k", dev)
			if code != 0 {
				t.Fatalf("manactl -k: exit %d: %s", code, errs)
			}
			if got != string(want) {
				t.Errorf("manactl -k:\n%s\nethtool -k:\n%s", got, want)
			}
			if !strings.Contains(got, "[fixed]") {
				t.Errorf("no fixed feature in %s", got)
			}
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
		if out, err := exec.Command("ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p").CombinedOutput(); err != nil {
			t.Fatalf("ip link add: %v: %s", err, out)
		}
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
			if got != string(want) || code != cmd.ProcessState.ExitCode() {
				t.Errorf("manactl: exit %d\n%s%s\nethtool: exit %d\n%s", code, got, errs, cmd.ProcessState.ExitCode(), want)
			}
		})
	}
}
