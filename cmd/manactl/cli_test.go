package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/cmd/internal/buildinfo"
	"github.com/manad/manad/genl/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCLI runs manactl in-process with MANAD_SOCKET pointing at socket.
func runCLI(t *testing.T, socket string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == "MANAD_SOCKET" {
			return socket
		}
		return ""
	}
	code = run(context.Background(), args, env, &out, &errb)
	return code, out.String(), errb.String()
}

// TestUsageErrors: a wrong command line exits 2 with the problem and a hint, before anything is
// sent anywhere.
func TestUsageErrors(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		args []string
		msg  string
	}{
		{nil, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"--bogus", "list"}, "unknown flag: --bogus"},
		{[]string{"list", "extra"}, "unknown command"},
		{[]string{"-g"}, "show-ring needs a device name"},
		{[]string{"show-ring", "a", "b"}, "wrong number of arguments"},
		{[]string{"-G", "eth0"}, "wrong number of arguments"},
		{[]string{"-G", "eth0", "rx", "1", "tx"}, "ring parameter 'tx' needs a value"},
		{[]string{"-G", "eth0", "bogus", "1"}, "unknown ring parameter 'bogus'"},
		{[]string{"-G", "eth0", "rx", "4294967296"}, "invalid value '4294967296' for parameter 'rx'"},
		{[]string{"-G", "eth0", "rx", "-1"}, "unknown shorthand flag"},
		{[]string{"-G", "eth0", "rx", "1", "rx", "2"}, "ring parameter 'rx' given twice"},
		{[]string{"-G", "eth0", "tx-push", "maybe"}, "invalid value 'maybe' for parameter 'tx-push'"},
		{[]string{"-G", "eth0", "tcp-data-split", "x"}, "want auto, off or on"},
		{[]string{"-L", "eth0", "combined", "many"}, "invalid value 'many' for parameter 'combined'"},
		{[]string{"-L", "eth0", "queues", "2"}, "unknown channel parameter 'queues'"},
		{[]string{"--set-priv-flags", "eth0", "full-page-rx"}, "wrong number of arguments"},
		{[]string{"--set-priv-flags", "eth0", "full-page-rx", "on", "x"}, "private flag 'x' needs a value"},
		{[]string{"--set-priv-flags", "eth0", "full-page-rx", "yes"}, "invalid value 'yes' for parameter 'full-page-rx'"},
		{[]string{"show-strings", "eth0", "nosuchset"}, "unknown string set 'nosuchset'"},
		{[]string{"rxbuf-plan", "--mtu", "1500"}, `required flag(s) "page-size" not set`},
		{[]string{"rxbuf-plan", "--page-size", "4K"}, `required flag(s) "mtu" not set`},
		{[]string{"rxbuf-plan", "--page-size", "lots", "--mtu", "1500"}, "invalid page size 'lots'"},
		{[]string{"rxbuf-plan", "--page-size", "4K", "--mtu", "1500", "--rule", "upstream,bogus"}, "unknown rule 'bogus'"},
		{[]string{"rxbuf-plan", "--page-size", "4K", "--mtu", "1500", "--rx-alloc", "slab"}, "unknown rx-alloc mode 'slab'"},
		{[]string{"set-mtu", "eth0"}, "wrong number of arguments"},
		{[]string{"set-mtu", "eth0", "big"}, "invalid value 'big' for parameter 'mtu'"},
		{[]string{"xdp", "eth0"}, "wrong number of arguments"},
		{[]string{"xdp", "eth0", "attach"}, "xdp attach needs a program"},
		{[]string{"xdp", "eth0", "frob"}, "unknown xdp action 'frob'"},
		{[]string{"xdp", "eth0", "detach", "pass"}, "xdp detach takes no program"},
		{[]string{"xdp", "eth0", "detach", "--section", "s"}, "--section and --name apply to xdp attach"},
		{[]string{"xdp", "eth0", "attach", "pass", "--name", "n"}, "not to built-in"},
		{[]string{"xdp", "eth0", "attach", "nosuchprogram"}, "unknown XDP program 'nosuchprogram'"},
		{[]string{"port"}, "port needs a subcommand"},
		{[]string{"port", "add"}, "port add needs one port name"},
		{[]string{"port", "add", "p0", "--mac", "zz"}, "invalid --mac 'zz'"},
		{[]string{"port", "add", "p0", "--priv-flags", "turbo"}, "unknown private flag 'turbo'"},
		{[]string{"port", "add", "p0", "--memory-budget", "lots"}, "invalid value 'lots' for --memory-budget"},
		{[]string{"port", "add", "p0", "--page-size", "0"}, "invalid page size '0'"},
		{[]string{"port", "del"}, "port del needs a device name"},
		{[]string{"fault", "eth0", "attach", "0"}, "invalid fault mode '0'"},
		{[]string{"fault", "eth0", "attach", "off", "--errno", "EIO"}, "--errno does not apply to off"},
		{[]string{"fault", "eth0", "attach", "once", "--errno", "EBOGUS"}, "invalid errno 'EBOGUS'"},
		{[]string{"monitor", "a", "b"}, "accepts at most 1 arg(s)"},
		{[]string{"--kernel", "list"}, "list is a manad command: --kernel does not apply"},
		{[]string{"--kernel", "show-rxbuf", "eth0"}, "show-rxbuf is a manad command"},
		{[]string{"--kernel", "port", "del", "p0"}, "port del is a manad command"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(t, sock, tc.args...)
			require.Equal(t, exitUsage, code, "exit status %d, want %d; stderr %q", code, exitUsage, errs)
			assert.Equal(t, "", out, "stdout %q, want nothing", out)
			lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "manactl: ") || !strings.Contains(lines[0], tc.msg) ||
				!strings.HasPrefix(lines[1], "Try 'manactl") || !strings.HasSuffix(lines[1], " --help'.") {
				t.Errorf("stderr %q, want \"manactl: …%s…\" and a --help hint", errs, tc.msg)
			}
		})
	}
}

// TestNotRunning: with nothing listening on the socket, manad-only commands fail with the
// connect error (exit 1); the socket comes from MANAD_SOCKET unless --socket overrides it.
func TestNotRunning(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "manad.sock")
	other := filepath.Join(dir, "other.sock")
	tests := [][]string{
		{"list"}, {"show-rxbuf", "eth0"},
		{"set-mtu", "eth0", "9000"}, {"xdp", "eth0", "attach", "drop"}, {"xdp", "eth0", "detach"},
		{"port", "add", "p0"}, {"port", "del", "p0"}, {"fault", "eth0", "attach", "once"}, {"monitor"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errs := runCLI(t, sock, args...)
			want := "cannot connect to manad at " + sock + ": "
			assert.Equal(t, exitFailure, code, "exit status; stderr %q", errs)
			assert.Equal(t, "", out, "stdout")
			assert.True(t, strings.HasPrefix(errs, want), "stderr %q, want one line starting %q", errs, want)
			assert.Equal(t, 1, strings.Count(errs, "\n"), "stderr %q, want one line", errs)
		})
	}
	code, _, errs := runCLI(t, sock, "--socket", other, "list")
	assert.Equal(t, exitFailure, code, "--socket does not override MANAD_SOCKET: exit %d, %q", code, errs)
	assert.True(t, strings.HasPrefix(errs, "cannot connect to manad at "+other+": "), "--socket does not override MANAD_SOCKET: exit %d, %q", code, errs)
	// An object file that cannot be read is a runtime error too.
	code, _, errs = runCLI(t, sock, "xdp", "eth0", "attach", filepath.Join(dir, "missing.o"))
	assert.Equal(t, exitFailure, code, "missing object: exit %d, %q", code, errs)
	assert.Contains(t, errs, "no such file or directory", "missing object: exit %d, %q", code, errs)
}

// TestKernelFallback: with manad not running, the ethtool-family commands ask the kernel, whose
// answer for a device that does not exist reads as ethtool's, with ethtool's exit status (an
// empty want: a change, which the kernel may refuse with EPERM first when not run as root), and
// a second line says that manad is not running (not with --kernel: the kernel was asked for).
func TestKernelFallback(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "manad.sock")
	const dev = "mctlnodev0"
	const noDev = "netlink error: no device matches name: No such device\n"
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-g", dev}, 1, noDev},
		{[]string{"-l", dev}, 1, noDev},
		{[]string{"--show-priv-flags", dev}, 1, noDev},
		{[]string{"show-strings", dev}, 1, noDev},
		{[]string{"-S", dev}, 96, "Cannot get stats strings information: No such device\n"},
		{[]string{"--kernel", "-g", dev}, 1, noDev},
		{[]string{"-T", dev}, 1, noDev},
		{[]string{"show-link", dev}, 75, noDev},
		{[]string{"-G", dev, "rx", "512"}, 81, ""},
		{[]string{"-L", dev, "combined", "1"}, 1, ""},
		{[]string{"--set-priv-flags", dev, "full-page-rx", "on"}, 1, ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(t, sock, tc.args...)
			kernelLine, manadLine, _ := strings.Cut(errs, "\n")
			wantManad := "manad is not running at " + sock + "\n"
			if tc.args[0] == "--kernel" {
				wantManad = ""
			}
			if code != tc.code || out != "" || (tc.want != "" && kernelLine+"\n" != tc.want) ||
				strings.Contains(kernelLine, "manad") || manadLine != wantManad {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, %q then %q", code, out, errs, tc.code, tc.want, wantManad)
			}
		})
	}
}

// TestExitStatus: each failure gives ethtool's exit status for it (exitStatuses), 1 otherwise.
func TestExitStatus(t *testing.T) {
	nlErr := func(e unix.Errno) error { return &client.Error{Errno: e, Message: "x"} }
	connect := &connectError{fmt.Errorf("cannot connect to manad at /x: %w", unix.ECONNREFUSED)}
	tests := []struct {
		cmd  string
		err  error
		want int
	}{
		{"set-ring", nlErr(unix.EINVAL), 81},
		{"set-ring", nlErr(unix.EPERM), 81},
		{"set-ring", nlErr(unix.ENODEV), 81},
		{"set-ring", connect, 1},
		{"show-ring", nlErr(unix.EOPNOTSUPP), 1},
		{"set-priv-flags", nlErr(unix.EOPNOTSUPP), 1},
		{"show-priv-flags", nlErr(unix.ENODEV), 1},
		{"set-channels", nlErr(unix.EINVAL), 1},
		{"show-channels", nlErr(unix.ENODEV), 1},
		{"stats", &errnoError{"Cannot get control socket", unix.EMFILE, failStatsSocket}, 70},
		{"stats", &errnoError{"Cannot get stats strings information", unix.ENODEV, failStatsStrings}, 96},
		{"stats", errNoStats{}, 94},
		{"stats", &errnoError{"Cannot get stats information", unix.EIO, failStatsValues}, 97},
		{"stats", nlErr(unix.EIO), 96},
		{"stats", connect, 1},
		{"monitor", connect, 1},
		{"list", connect, 1},
		{"port add", nlErr(unix.EEXIST), 1},
		{"xdp", &errnoError{"big.o does not fit", unix.EMSGSIZE, failRequest}, 1},
		{"rxbuf-plan", &errnoError{"XDP: mtu too large", unix.EOPNOTSUPP, failRequest}, 1},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, exitStatus(tc.cmd, tc.err), "%s failing with %v: exit", tc.cmd, tc.err)
	}
	// The table names real commands, once per failure.
	root := newRoot(&app{}, func(string) string { return "" })
	seen := map[string]bool{}
	for _, e := range exitStatuses {
		c, _, err := root.Find([]string{e.cmd})
		assert.NoError(t, err, "exitStatuses names %q, which is not a command", e.cmd)
		assert.NotSame(t, root, c, "exitStatuses names %q, which is not a command", e.cmd)
		k := fmt.Sprint(e.cmd, e.failure)
		assert.False(t, seen[k], "exitStatuses lists %s failure %d twice", e.cmd, e.failure)
		seen[fmt.Sprint(e.cmd, e.failure)] = true
	}
}

// TestHelp: every command has --help with an example, exit status 0.
func TestHelp(t *testing.T) {
	a := &app{}
	root := newRoot(a, func(string) string { return "" })
	var paths [][]string
	for _, c := range root.Commands() {
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	require.GreaterOrEqual(t, len(paths), 16, "only %d commands", len(paths))
	for _, p := range append(paths, []string{}) {
		args := append(append([]string{}, p...), "--help")
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errs := runCLI(t, "", args...)
			require.Equal(t, exitOK, code, "exit %d, stderr %q", code, errs)
			require.Equal(t, "", errs, "exit %d, stderr %q", code, errs)
			if len(p) > 0 && p[0] != "completion" && p[0] != "help" {
				assert.Contains(t, out, "Examples:\n  manactl ", "no example in")
			}
		})
	}
	// ethtool-style help works too.
	code, out, _ := runCLI(t, "", "-g", "--help")
	assert.Equal(t, 0, code, "manactl -g --help: exit %d\n%s", code, out)
	assert.Contains(t, out, "manactl show-ring DEV", "manactl -g --help: exit %d\n%s", code, out)
}

// TestCompletion: the bash completion script is cobra's, generated by manactl itself.
func TestCompletion(t *testing.T) {
	code, out, errs := runCLI(t, "", "completion", "bash")
	require.Equal(t, 0, code, "exit %d, stderr %q, script %.200q", code, errs, out)
	require.Equal(t, "", errs, "exit %d, stderr %q, script %.200q", code, errs, out)
	require.Contains(t, out, "# bash completion V2 for manactl", "exit %d, stderr %q, script %.200q", code, errs, out)
	require.Contains(t, out, "__start_manactl", "exit %d, stderr %q, script %.200q", code, errs, out)
	// Dynamic completion of a device name lists the kernel's netdevs (manad is not running).
	code, out, _ = runCLI(t, filepath.Join(t.TempDir(), "none.sock"), "__complete", "show-ring", "")
	assert.Equal(t, 0, code, "__complete show-ring: exit %d\n%s", code, out)
	assert.Contains(t, out, "lo\n", "__complete show-ring: exit %d\n%s", code, out)
}

// TestRxBufPlanWithoutDaemon: rxbuf-plan computes the layouts itself (nothing listens on the
// socket) and prints what manad's LAYOUT_PLAN answer printed (the goldens); bad parameters fail
// with the model's message and errno, as manad's extack said them.
func TestRxBufPlanWithoutDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args   []string
		golden string
	}{
		{[]string{"rxbuf-plan", "--page-size", "4K", "--mtu", "1500"}, "manactl/rxbuf-plan.txt"},
		{[]string{"--json", "rxbuf-plan", "--page-size", "4096", "--mtu", "1500"}, "json/rxbuf-plan.json"},
	} {
		code, out, errs := runCLI(t, sock, tc.args...)
		require.Equal(t, exitOK, code, "%v: exit %d, stderr %q", tc.args, code, errs)
		require.Equal(t, "", errs, "%v: exit %d, stderr %q", tc.args, code, errs)
		checkGolden(t, tc.golden, []byte(out))
	}
	// --rx-alloc changes the memory the layouts pin, and says so in their reasons.
	code, out, errs := runCLI(t, sock, "rxbuf-plan", "--page-size", "16K", "--mtu", "1500", "--rule", "upstream", "--rx-alloc", "no-pool")
	assert.Equal(t, exitOK, code, "--rx-alloc no-pool: exit status; stderr %q", errs)
	assert.Equal(t, "", errs, "--rx-alloc no-pool: stderr")
	assert.Contains(t, out, "rx_alloc no-pool", "--rx-alloc no-pool: stdout")
	assert.Regexp(t, `(?m)^Buffers per page +1$`, out, "--rx-alloc no-pool: stdout")
	assert.Regexp(t, `(?m)^Buffer size +2112$`, out, "--rx-alloc no-pool: stdout")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rxbuf-plan", "--page-size", "8K", "--mtu", "1500"}, "page size 8192 not supported (want 4096, 16384 or 65536): Invalid argument\n"},
		{[]string{"rxbuf-plan", "--page-size", "4K", "--mtu", "9000", "--xdp"}, "XDP: mtu too large: Operation not supported\n"},
		{[]string{"rxbuf-plan", "--page-size", "4K", "--mtu", "20"}, "MTU 20 less than device minimum 68: Invalid argument\n"},
	} {
		code, out, errs := runCLI(t, sock, tc.args...)
		assert.Equal(t, exitFailure, code, "%v: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, out, errs, tc.want)
		assert.Equal(t, "", out, "%v: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, out, errs, tc.want)
		assert.Equal(t, tc.want, errs, "%v: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, out, errs, tc.want)
	}
}

// TestVersion: --version prints the build information (cmd/internal/buildinfo), exit status 0.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		code, out, errs := runCLI(t, "", args...)
		assert.Equal(t, exitOK, code, "%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		assert.Equal(t, "", errs, "%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		assert.Equal(t, buildinfo.Version("manactl"), out, "%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		assert.True(t, strings.HasPrefix(out, "manactl "), "%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
	}
}
