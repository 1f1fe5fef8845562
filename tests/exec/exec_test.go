// Package exec tests `manactl exec` end to end (issue 26): clients nobody on the project wrote —
// Debian's ethtool (netlink, and its ioctl path under manactl exec --no-netlink), the kernel's YNL client and a statically
// linked Go program on github.com/mdlayher/ethtool — run unmodified under manactl exec against
// the real manad binary, with a manad port and a veth in one network namespace. For the veth
// every command prints the same bytes with and without manactl exec; for the port the answers
// are mana's. Everything needs root.
package exec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	if probeBuild.path != "" {
		os.RemoveAll(filepath.Dir(probeBuild.path)) // the probe's build directory
	}
	os.Exit(code)
}

// result is how a command ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("status %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// env is a manad with one port and a veth pair in one namespace.
type env struct {
	d       *harness.Daemon
	ns      string
	port    string
	veth    string
	manactl string
	probe   string
	sockEnv []string
}

var probeBuild struct {
	once sync.Once
	path string
	err  error
}

// probe builds tests/exec/ethtoolprobe statically (CGO_ENABLED=0) once per test binary.
func buildProbe(t testing.TB, dir string) string {
	t.Helper()
	probeBuild.once.Do(func() {
		d, err := os.MkdirTemp("", "manad-probe-")
		if err != nil {
			probeBuild.err = err
			return
		}
		probeBuild.path = filepath.Join(d, "ethtoolprobe")
		cmd := exec.Command("go", "build", "-o", probeBuild.path, "./ethtoolprobe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeBuild.err = fmt.Errorf("build ethtoolprobe: %v: %s", err, out)
		}
	})
	require.NoError(t, probeBuild.err)
	return copyExecutable(t, probeBuild.path, filepath.Join(dir, "ethtoolprobe"))
}

func copyExecutable(t testing.TB, src, dst string) string {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}

func setup(t *testing.T) *env {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.NeedTool(t, "ethtool")
	dir, err := os.MkdirTemp("", "manad-exec-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755)) // the non-admin test runs manactl as nobody
	e := &env{ns: harness.Name("mx", ""), port: harness.Name("mana", ""), veth: harness.Name("ve", "")}
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 4\npersistent = false\n", e.port, e.ns)
	e.d = harness.Start(t, dir, "", ports, e.ns)
	_, mctl := harness.Binaries(t)
	e.manactl = copyExecutable(t, mctl, filepath.Join(dir, "manactl"))
	e.probe = buildProbe(t, dir)
	e.sockEnv = []string{"MANAD_SOCKET=" + e.d.Socket}
	harness.Run(t, "", "ip", "-n", e.ns, "link", "add", e.veth, "type", "veth", "peer", "name", e.veth+"p")
	harness.Run(t, "", "ip", "-n", e.ns, "link", "set", e.veth, "up")
	harness.Run(t, "", "ip", "-n", e.ns, "link", "set", e.port, "up")
	return e
}

// run runs argv in the namespace, under `manactl exec` when bridged.
func (e *env) run(t testing.TB, bridged bool, argv ...string) result {
	t.Helper()
	return e.runAs(t, bridged, nil, argv...)
}

func (e *env) runAs(t testing.TB, bridged bool, prefix []string, argv ...string) result {
	t.Helper()
	if bridged {
		argv = append([]string{e.manactl, "exec", "--"}, argv...)
	}
	if len(argv) > 0 && argv[0] == ioctlOnly {
		argv = append([]string{e.manactl, "exec", "--no-netlink", "--"}, argv[1:]...)
	}
	argv = append(append([]string{"ip", "netns", "exec", e.ns}, prefix...), argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), e.sockEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	require.NoError(t, cmd.Start(), "%s", strings.Join(argv, " "))
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s: hung for 2 minutes\nstdout: %s\nstderr: %s", strings.Join(argv, " "), out.String(), errb.String())
	}
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return r
}

// ioctlOnly, first in a command line, runs it under `manactl exec --no-netlink`: Debian's
// ethtool 6.1 has no --disable-netlink, and takes its ioctl path when generic netlink is missing.
const ioctlOnly = "\x00ioctl"

// TestVethUnchanged: for a kernel device every client prints the same bytes, and exits with the
// same status, with and without manactl exec.
func TestVethUnchanged(t *testing.T) {
	e := setup(t)
	cases := [][]string{
		{"ethtool", e.veth}, {"ethtool", "-i", e.veth}, {"ethtool", "-k", e.veth},
		{"ethtool", "-g", e.veth}, {"ethtool", "-l", e.veth}, {"ethtool", "-c", e.veth},
		{"ethtool", "-x", e.veth}, {"ethtool", "-S", e.veth}, {"ethtool", "--show-priv-flags", e.veth},
		{"ethtool", "-T", e.veth}, {"ethtool", "--json", "-g", e.veth}, {"ethtool", "-P", e.veth},
		{"ethtool", "-i", "nosuchdev0"}, {"ethtool", "-g", "nosuchdev0"},
		{e.probe, "show", e.veth},
	}
	for _, argv := range cases {
		t.Run(strings.Join(argv[1:], " "), func(t *testing.T) {
			plain := e.run(t, false, argv...)
			bridged := e.run(t, true, argv...)
			assert.Equal(t, plain, bridged)
		})
	}
}

// TestEthtoolSeesMana: ethtool 6.1 under manactl exec sees the manad port as a mana NIC, by
// netlink and by SIOCETHTOOL, and its changes are manad's.
func TestEthtoolSeesMana(t *testing.T) {
	e := setup(t)
	eth := func(args ...string) string {
		t.Helper()
		bridged := true
		argv := append([]string{"ethtool"}, args...)
		if args[0] == "--disable-netlink" {
			bridged, argv = false, append([]string{ioctlOnly, "ethtool"}, args[1:]...)
		}
		r := e.run(t, bridged, argv...)
		require.Equal(t, 0, r.code, "ethtool %v\n%s", args, r)
		return r.stdout
	}
	mctl := func(args ...string) string {
		t.Helper()
		r := e.run(t, false, append([]string{e.manactl}, args...)...)
		require.Equal(t, 0, r.code, "manactl %v\n%s", args, r)
		return r.stdout
	}
	t.Run("drvinfo", func(t *testing.T) {
		for _, argv := range [][]string{{"-i", e.port}, {"--disable-netlink", "-i", e.port}} {
			out := eth(argv...)
			assert.Contains(t, out, "driver: mana\n", argv)
			assert.Contains(t, out, "supports-priv-flags: yes\n", argv)
			// mana fills neither (no get_drvinfo, no devlink); a TAP has no parent device.
			assert.Contains(t, out, "firmware-version: \n", argv)
			assert.Contains(t, out, "bus-info: \n", argv)
			assert.Contains(t, out, "supports-statistics: yes\n", argv)
		}
	})
	t.Run("link", func(t *testing.T) {
		for _, argv := range [][]string{{e.port}, {"--disable-netlink", e.port}} {
			out := eth(argv...)
			assert.NotContains(t, out, "Twisted Pair", argv)
			assert.Contains(t, out, "Port: Other", argv)
		}
	})
	t.Run("priv-flags", func(t *testing.T) {
		assert.Contains(t, eth("--show-priv-flags", e.port), "full-page-rx: off")
		eth("--set-priv-flags", e.port, "full-page-rx", "on")
		assert.Contains(t, eth("--show-priv-flags", e.port), "full-page-rx: on")
		assert.Contains(t, mctl("show-priv-flags", e.port), "full-page-rx: on")
		eth("--set-priv-flags", e.port, "full-page-rx", "off")
		assert.Contains(t, mctl("show-priv-flags", e.port), "full-page-rx: off")
	})
	t.Run("rings", func(t *testing.T) {
		eth("-G", e.port, "rx", "512")
		assert.Regexp(t, `(?s)Current hardware settings:.*RX:\s+512\n`, mctl("-g", e.port))
		assert.Regexp(t, `(?s)Current hardware settings:.*RX:\s+512\n`, eth("-g", e.port))
		assert.Regexp(t, `(?s)Current hardware settings:.*RX:\s+512\n`, eth("--disable-netlink", "-g", e.port))
		r := e.run(t, true, "ethtool", "-G", e.port, "rx", "100000")
		assert.NotEqual(t, 0, r.code, r.String())
	})
	t.Run("channels", func(t *testing.T) {
		eth("-L", e.port, "combined", "2")
		assert.Regexp(t, `(?s)Current hardware settings:.*Combined:\s+2\n`, mctl("-l", e.port))
		assert.Regexp(t, `(?s)Current hardware settings:.*Combined:\s+2\n`, eth("--disable-netlink", "-l", e.port))
	})
	t.Run("coalesce", func(t *testing.T) {
		eth("-C", e.port, "rx-usecs", "10")
		assert.Regexp(t, `rx-usecs:\s+10\n`, mctl("-c", e.port))
		assert.Regexp(t, `rx-usecs:\s+10\n`, eth("-c", e.port))
	})
	t.Run("stats", func(t *testing.T) {
		names := func(s string) []string {
			var n []string
			for _, m := range regexp.MustCompile(`(?m)^\s+([a-z0-9_]+): \d+$`).FindAllStringSubmatch(s, -1) {
				n = append(n, m[1])
			}
			return n
		}
		want := names(mctl("stats", e.port))
		// mana's 6+27+50 and 20 per queue (163 for the port's 4; the channels step left 2),
		// then manad's 16.
		require.Len(t, want, 83+2*20+16)
		assert.Equal(t, want, names(eth("-S", e.port)))
		assert.Equal(t, want, names(eth("--disable-netlink", "-S", e.port)))
	})
	t.Run("rxfh", func(t *testing.T) {
		assert.Contains(t, eth("-x", e.port), "RX flow hash indirection table for "+e.port)
		eth("-X", e.port, "equal", "2")
		assert.NotRegexp(t, `\s3\s`, strings.SplitN(mctl("-x", e.port), "RSS hash key", 2)[0])
	})
	t.Run("features", func(t *testing.T) {
		assert.Contains(t, eth("-k", e.port), "rx-checksumming:")
		eth("-K", e.port, "tso", "off")
		assert.Regexp(t, `tcp-segmentation-offload: off`, mctl("-k", e.port))
		eth("-K", e.port, "tso", "on")
	})
	t.Run("timestamping", func(t *testing.T) {
		assert.Equal(t, mctl("-T", e.port), eth("-T", e.port))
	})
}

// TestMonitor: ethtool --monitor under manactl exec shows manad's notifications and the
// kernel's.
func TestMonitor(t *testing.T) {
	e := setup(t)
	// stdbuf -oL: ethtool's monitor writes through stdio, which a pipe fully buffers.
	argv := []string{"ip", "netns", "exec", e.ns, e.manactl, "exec", "--", "stdbuf", "-oL", "ethtool", "--monitor"}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), e.sockEnv...)
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	harness.Eventually(t, "monitor listening", func() bool { return strings.Contains(out.String(), "listening") })
	e.run(t, false, e.manactl, "set-priv-flags", e.port, "full-page-rx", "on")
	e.run(t, false, "ethtool", "-K", e.veth, "gro", "on")
	harness.Eventually(t, "manad's and the kernel's notifications", func() bool {
		s := out.String()
		return strings.Contains(s, "Private flags for "+e.port) && strings.Contains(s, "Features for "+e.veth)
	})
	// SIGINT ends it as it ends ethtool: forwarded by manactl exec.
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ethtool --monitor did not end on SIGINT")
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGoProgram: a statically linked Go program on mdlayher/ethtool sees mana's answers for the
// port, the kernel's for the veth, and one merged dump.
func TestGoProgram(t *testing.T) {
	e := setup(t)
	r := e.run(t, true, e.probe, "show", e.port)
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, r.stdout, "privflags: [full-page-rx=false]")
	assert.Contains(t, r.stdout, "linkinfo: port=Other")
	r = e.run(t, true, e.probe, "set-priv", e.port, "full-page-rx", "on")
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, e.run(t, false, e.manactl, "show-priv-flags", e.port).stdout, "full-page-rx: on")
	r = e.run(t, true, e.probe, "dump")
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, r.stdout, e.port+" port=Other\n")
	assert.Contains(t, r.stdout, e.veth+" port=")
	assert.Equal(t, 1, strings.Count(r.stdout, e.port+" "), r.stdout)
}

// TestYNL: the kernel's spec-driven client (tools/net/ynl from Debian's linux-source) on the
// ethtool and netdev specs.
func TestYNL(t *testing.T) {
	e := setup(t)
	ynl := ynlDir(t)
	py := testenv.NeedTool(t, "/usr/bin/python3")
	cli := filepath.Join(ynl, "tools/net/ynl/cli.py")
	spec := func(n string) string { return filepath.Join(ynl, "Documentation/netlink/specs", n+".yaml") }
	r := e.run(t, true, py, cli, "--spec", spec("ethtool"), "--do", "rings-get",
		"--json", fmt.Sprintf(`{"header": {"dev-name": %q}}`, e.port))
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, r.stdout, "'rx-max': 8192")
	r = e.run(t, true, py, cli, "--spec", spec("ethtool"), "--do", "privflags-get",
		"--json", fmt.Sprintf(`{"header": {"dev-name": %q}}`, e.port))
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, r.stdout, "full-page-rx")
	for _, argv := range [][]string{
		{py, cli, "--spec", spec("ethtool"), "--do", "rings-get", "--json", fmt.Sprintf(`{"header": {"dev-name": %q}}`, e.veth)},
		{py, cli, "--spec", spec("ethtool"), "--do", "linkinfo-get", "--json", fmt.Sprintf(`{"header": {"dev-name": %q}}`, e.veth)},
	} {
		assert.Equal(t, e.run(t, false, argv...), e.run(t, true, argv...), argv)
	}
	r = e.run(t, true, py, cli, "--spec", spec("netdev"), "--dump", "dev-get")
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, r.stdout, "'xdp-features': {")
}

// ynlDir extracts tools/net/ynl and the netlink specs from Debian's linux-source-6.12 once
// (into the system's temporary directory, kept for later runs).
func ynlDir(t testing.TB) string {
	t.Helper()
	const tarball = "/usr/src/linux-source-6.12.tar.xz"
	dir := filepath.Join(os.TempDir(), "manad-linux-source-6.12")
	top := filepath.Join(dir, "linux-source-6.12")
	if _, err := os.Stat(filepath.Join(top, "tools/net/ynl/cli.py")); err == nil {
		return top
	}
	if _, err := os.Stat(tarball); err != nil {
		testenv.SkipOrFail(t, "the kernel's YNL client needs Debian's linux-source-6.12: %v", err)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	out, err := exec.Command("tar", "-xJf", tarball, "-C", dir,
		"linux-source-6.12/tools/net/ynl", "linux-source-6.12/Documentation/netlink").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return top
}

// TestFailurePaths: manad stopping mid-run, forks, a non-admin SET, start-up refusals and
// exit statuses.
func TestFailurePaths(t *testing.T) {
	e := setup(t)
	t.Run("fork", func(t *testing.T) {
		r := e.run(t, true, "sh", "-c", fmt.Sprintf("ethtool -i %s && ethtool --show-priv-flags %[1]s", e.port))
		require.Equal(t, 0, r.code, r.String())
		assert.Contains(t, r.stdout, "driver: mana")
		assert.Contains(t, r.stdout, "full-page-rx: off")
	})
	t.Run("exit status", func(t *testing.T) {
		assert.Equal(t, 5, e.run(t, true, "sh", "-c", "exit 5").code)
		assert.Equal(t, 127, e.run(t, true, "no-such-program-xyz").code)
		r := e.run(t, true, "sh", "-c", "kill -TERM $$")
		assert.Equal(t, 128+15, r.code, r.String())
	})
	t.Run("non-admin SET", func(t *testing.T) {
		nobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}
		r := e.runAs(t, true, nobody, "ethtool", "--set-priv-flags", e.port, "full-page-rx", "on")
		assert.NotEqual(t, 0, r.code, r.String())
		assert.Contains(t, r.stderr, "Operation not permitted")
		assert.Contains(t, e.run(t, false, e.manactl, "show-priv-flags", e.port).stdout, "full-page-rx: off")
		r = e.runAs(t, false, nobody, ioctlOnly, "ethtool", "-G", e.port, "rx", "256")
		assert.NotEqual(t, 0, r.code, r.String())
		// Reading is open to anyone.
		r = e.runAs(t, true, nobody, "ethtool", "--show-priv-flags", e.port)
		assert.Equal(t, 0, r.code, r.String())
	})
	t.Run("manad not running", func(t *testing.T) {
		argv := []string{"ip", "netns", "exec", e.ns, e.manactl, "--socket", "/nonexistent/manad.sock", "exec", "--", "true"}
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, 1, ee.ExitCode())
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(out)), "\n")+1, "one line: %s", out)
		assert.Contains(t, string(out), "/nonexistent/manad.sock")
	})
	// One manactl exec, two ethtool -i runs with a manad restart between them: the ioctl path
	// (GDRVINFO) reaches the new manad, whether manactl exec runs in the port's namespace or the
	// program enters it below manactl (the client, redialled after the restart, still resolves
	// the port's name there). The program waits for the restart on a file, not on a clock.
	for _, tc := range []struct {
		name string
		argv func(script string) []string
	}{
		{"manad restarts mid-run", func(script string) []string {
			return []string{"ip", "netns", "exec", e.ns, e.manactl, "exec", "--", "sh", "-c", script}
		}},
		{"manad restarts under a program in another namespace", func(script string) []string {
			return []string{e.manactl, "exec", "--", "ip", "netns", "exec", e.ns, "sh", "-c", script}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restarted := filepath.Join(t.TempDir(), "restarted")
			argv := tc.argv(fmt.Sprintf("ethtool -i %s && while [ ! -e %s ]; do sleep 0.1; done && ethtool -i %[1]s",
				e.port, restarted))
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), e.sockEnv...)
			var out safeBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			harness.Eventually(t, "the first ethtool -i", func() bool { return strings.Contains(out.String(), "driver: mana") })
			e.d.Stop()
			e.d.Restart()
			require.NoError(t, os.WriteFile(restarted, nil, 0o644))
			require.NoError(t, cmd.Wait(), out.String())
			assert.Equal(t, 2, strings.Count(out.String(), "driver: mana\n"), out.String())
		})
	}
	t.Run("manad stops mid-run", func(t *testing.T) {
		argv := []string{"ip", "netns", "exec", e.ns, e.manactl, "exec", "--", e.probe, "loop", e.port, "60"}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), e.sockEnv...)
		var out safeBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		// manad stops once the program's loop runs (a loaded machine may take seconds to
		// start it), so that it is the bridge's connection that breaks under it.
		harness.Eventually(t, "the probe's loop", func() bool { return strings.Contains(out.String(), "looping") })
		e.d.Stop()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("the program hung after manad stopped: %s", out.String())
		}
		assert.Contains(t, out.String(), "error:")
	})
}
