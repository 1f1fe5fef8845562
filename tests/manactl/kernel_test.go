package manactl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelVeth runs show-priv-flags, show-ring, show-channels and stats against a kernel veth
// through the kernel's ethtool family (and ioctl, for -S) and compares each with what ethtool
// itself prints for the same device: stdout, stderr and exit status, byte for byte. It does so
// three ways: with --kernel, with manad not running, and with manad running but answering "no
// device matches name" because the veth is not its port.
func TestKernelVeth(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.NeedTool(t, "ethtool")
	dir := worldDir(t)
	bin := manactlIn(t, dir)
	ns, other := harness.Name("mck", ""), harness.Name("mco", "")
	harness.Run(t, "", "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	harness.Run(t, ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb", "numrxqueues", "4", "numtxqueues", "4")
	harness.Run(t, ns, "ethtool", "-L", "vb", "rx", "3", "tx", "2")

	require.NoError(t, os.Mkdir(filepath.Join(dir, "manad"), 0o755))
	d := harness.Start(t, filepath.Join(dir, "manad"), "",
		fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\npersistent = false\n", harness.Name("mcv", "0"), other), other)

	none := filepath.Join(dir, "none.sock")
	modes := []struct {
		name string
		env  []string
		pre  []string
		down string // a failure's second line: manad is not running (issue 28)
	}{
		{"--kernel", []string{"MANAD_SOCKET=" + d.Socket}, []string{"--kernel"}, ""},
		{"manad-not-running", []string{"MANAD_SOCKET=" + none}, nil, "manad is not running at " + none + "\n"},
		{"manad-enodev", []string{"MANAD_SOCKET=" + d.Socket}, nil, ""},
	}
	for _, opt := range []string{"--show-priv-flags", "-g", "-l", "-S"} {
		want := run(t, ns, nil, "ethtool", opt, "vb")
		t.Logf("ethtool %s vb: exit %d\n%s%s", opt, want.code, want.stdout, want.stderr)
		for _, m := range modes {
			t.Run(opt+"/"+m.name, func(t *testing.T) {
				got := run(t, ns, m.env, append(append([]string{bin}, m.pre...), opt, "vb")...)
				want := want
				if want.code != 0 {
					want.stderr += m.down
				}
				assert.Equal(t, want, got, "manactl %s vb: exit %d\nstdout %q\nstderr %q\nethtool: exit %d\nstdout %q\nstderr %q", opt, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
			})
		}
	}
	assert.Contains(t, d.Log(), "manad ready", "manad did not serve")

	// A refused change: ethtool prints the extack message (with its offset) and perror's errno
	// text on two lines, manactl both on one.
	want := run(t, ns, nil, "ethtool", "-L", "vb", "rx", "5")
	got := run(t, ns, modes[2].env, bin, "-L", "vb", "rx", "5")
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(want.stderr), "\n") {
		parts = append(parts, regexp.MustCompile(` \(offset \d+\)$`).ReplaceAllString(strings.TrimPrefix(l, "netlink error: "), ""))
	}
	assert.Equal(t, 1, want.code, "-L vb rx 5: manactl exit %d %q, ethtool exit %d %q", got.code, got.stderr, want.code, want.stderr)
	assert.Equal(t, 1, got.code, "-L vb rx 5: manactl exit %d %q, ethtool exit %d %q", got.code, got.stderr, want.code, want.stderr)
	assert.Equal(t, "netlink error: "+strings.Join(parts, ": ")+"\n", got.stderr, "-L vb rx 5: manactl exit %d %q, ethtool exit %d %q", got.code, got.stderr, want.code, want.stderr)
	// An accepted change, made by manactl through the kernel, as ethtool sees it.
	r := run(t, ns, modes[2].env, bin, "-L", "vb", "rx", "1", "tx", "4")
	require.Equal(t, 0, r.code, "manactl -L vb rx 1 tx 4: %+v", r)
	require.Equal(t, "", r.stderr, "manactl -L vb rx 1 tx 4: %+v", r)
	assert.Contains(t, run(t, ns, nil, "ethtool", "-l", "vb").stdout, "Current hardware settings:\nRX:\t\t1\nTX:\t\t4\n", "ethtool -l after manactl -L")
}

// TestKernelMonitor runs `manactl --kernel monitor` next to `ethtool --monitor` while a veth's
// channels change: both must print the same text.
func TestKernelMonitor(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.NeedTool(t, "ethtool")
	testenv.NeedTool(t, "stdbuf")
	dir := worldDir(t)
	bin := manactlIn(t, dir)
	ns := harness.Name("mcm", "")
	harness.Run(t, "", "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	harness.Run(t, ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb", "numrxqueues", "4", "numtxqueues", "4")

	// stdbuf: ethtool's stdout is a pipe, fully buffered, and SIGINT would lose the buffer.
	eth := startMonitor(t, ns, nil, "stdbuf", "-oL", "ethtool", "--monitor")
	mctl := startMonitor(t, ns, nil, bin, "--kernel", "monitor")
	harness.Run(t, ns, "ethtool", "-L", "vb", "rx", "2", "tx", "3")
	harness.Run(t, ns, "ethtool", "-L", "vb", "rx", "4")
	block := "\nChannel parameters for vb:\nPre-set maximums:\nRX:\t\t4\nTX:\t\t4\nOther:\t\tn/a\nCombined:\tn/a\n" +
		"Current hardware settings:\nRX:\t\t4\nTX:\t\t3\nOther:\t\tn/a\nCombined:\tn/a\n"
	eth.waitFor(t, block)
	mctl.waitFor(t, block)
	want, _ := eth.interrupt(t) // ethtool does not catch SIGINT
	got := mctl.stop(t)
	t.Logf("ethtool --monitor printed:\n%s", want)
	assert.Equal(t, want, got, "manactl --kernel monitor printed\n%q\nethtool --monitor printed\n%q", got, want)
}

// TestKernelExitStatus runs failing commands through the kernel's ethtool netlink (and ioctl, for
// -S) next to ethtool itself: an unknown device, a flag the device does not have, a refused
// value, a device without statistics, and changes made by a non-admin (EPERM). manactl must exit
// with ethtool's status each time (1, 81 for -G, 96 and 94 for -S) and say the same thing, on
// one line where ethtool uses two, then that manad is not running.
func TestKernelExitStatus(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.NeedTool(t, "ethtool")
	dir := worldDir(t)
	bin := manactlIn(t, dir)
	ns := harness.Name("mce", "")
	harness.Run(t, "", "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	harness.Run(t, ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb", "numrxqueues", "4", "numtxqueues", "4")
	none := filepath.Join(dir, "none.sock")
	env := []string{"MANAD_SOCKET=" + none} // manad not running: the kernel answers
	nobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}
	const nodev = "mcenodev0"
	tests := []struct {
		as   []string
		args []string
		code int // what ethtool 6.1 exits with, checked against the installed ethtool
	}{
		{nil, []string{"-g", nodev}, 1},
		{nil, []string{"-G", nodev, "rx", "512"}, 81},
		{nil, []string{"-l", nodev}, 1},
		{nil, []string{"-L", nodev, "combined", "1"}, 1},
		{nil, []string{"--show-priv-flags", nodev}, 1},
		{nil, []string{"--set-priv-flags", nodev, "full-page-rx", "on"}, 1},
		{nil, []string{"-S", nodev}, 96},
		{nil, []string{"-S", "lo"}, 94},
		{nil, []string{"--set-priv-flags", "vb", "bogus", "on"}, 1},
		{nil, []string{"-G", "vb", "rx", "512"}, 81},
		{nil, []string{"-L", "vb", "rx", "5"}, 1},
		{nobody, []string{"-G", "vb", "rx", "512"}, 81},
		{nobody, []string{"-L", "vb", "rx", "2"}, 1},
		{nobody, []string{"--set-priv-flags", "vb", "full-page-rx", "on"}, 1},
	}
	offset := regexp.MustCompile(` \(offset \d+\)$`)
	for _, tc := range tests {
		name := strings.Join(append(append([]string{}, tc.as...), tc.args...), " ")
		want := run(t, ns, nil, append(append(append([]string{}, tc.as...), "ethtool"), tc.args...)...)
		got := run(t, ns, env, append(append(append([]string{}, tc.as...), bin), tc.args...)...)
		var parts []string
		for _, l := range strings.Split(strings.TrimSpace(want.stderr), "\n") {
			parts = append(parts, offset.ReplaceAllString(strings.TrimPrefix(l, "netlink error: "), ""))
		}
		line := strings.Join(parts, ": ")
		if strings.HasPrefix(want.stderr, "netlink error: ") {
			line = "netlink error: " + line
		}
		// manad is not running: manactl says so on a second line (issue 28).
		if want.code != tc.code || got.code != want.code || got.stdout != "" || got.stderr != line+"\nmanad is not running at "+none+"\n" {
			t.Errorf("%s: manactl exit %d %q, ethtool exit %d %q (want %d)", name, got.code, got.stderr, want.code, want.stderr, tc.code)
		} else {
			t.Logf("%s: exit %d, %s", name, got.code, line)
		}
	}
}
