package manactl

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/xdp/xdptest"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
)

// moduleRoot is the repository root (where the Makefile and systemd/ are).
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// installed is a `make install` into a throw-away prefix.
type installed struct {
	prefix, sysconf string
	bin, manactl    string
	unitDir         string
	rulesDir        string
}

// makeInstall runs `make install PREFIX=… SYSCONFDIR=… BIN=…` into a temporary directory (no
// DESTDIR, so that the paths written into the unit and the rule exist and can be run).
func makeInstall(t *testing.T) *installed {
	t.Helper()
	testenv.NeedTool(t, "make")
	dir := worldDir(t)
	in := &installed{prefix: filepath.Join(dir, "prefix"), sysconf: filepath.Join(dir, "etc")}
	in.bin = filepath.Join(in.prefix, "bin")
	in.manactl = filepath.Join(in.bin, "manactl")
	in.unitDir = filepath.Join(in.prefix, "lib/systemd/system")
	in.rulesDir = filepath.Join(in.prefix, "lib/udev/rules.d")
	cmd := exec.Command("make", "-C", moduleRoot(), "install", "PREFIX="+in.prefix, "SYSCONFDIR="+in.sysconf,
		"BIN="+filepath.Join(dir, "build"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make install: %v\n%s", err, out)
	return in
}

// TestMakeInstall checks what `make install` puts where, with the paths filled in.
func TestMakeInstall(t *testing.T) {
	testenv.RequireRoot(t)
	in := makeInstall(t)
	for _, f := range []struct {
		path string
		mode os.FileMode
		has  string
	}{
		{filepath.Join(in.bin, "manad"), 0o755, ""},
		{in.manactl, 0o755, ""},
		{filepath.Join(in.unitDir, "manad.service"), 0o644,
			"ExecStart=" + filepath.Join(in.bin, "manad") + " --config " + filepath.Join(in.sysconf, "manad/manad.toml") + "\n"},
		{filepath.Join(in.unitDir, "manad.socket"), 0o644, "ListenSequentialPacket=/run/manad/manad.sock\n"},
		{filepath.Join(in.rulesDir, "90-manad.rules"), 0o644, `RUN+="` + in.manactl + ` set-priv-flags $name full-page-rx on"`},
		{filepath.Join(in.prefix, "share/bash-completion/completions/manactl"), 0o644, "__start_manactl"},
		{filepath.Join(in.prefix, "share/doc/manad/manad.toml.example"), 0o644, "[[port]]"},
		{filepath.Join(in.sysconf, "manad/manad.toml"), 0o644, "[[port]]"},
		{filepath.Join(in.prefix, "share/man/man8/manad.8"), 0o644, `.TH "MANAD" "8"`},
		{filepath.Join(in.prefix, "share/man/man8/manactl.8"), 0o644, `.SS manactl set-ring DEV`},
		{filepath.Join(in.prefix, "share/man/man5/manad.toml.5"), 0o644, `.TH "MANAD.TOML" "5"`},
	} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Errorf("not installed: %v", err)
			continue
		}
		assert.Equal(t, f.mode, st.Mode().Perm(), "%s: mode", f.path)
		b, _ := os.ReadFile(f.path)
		assert.Contains(t, string(b), f.has, "%s does not contain %q (or has a placeholder left)", f.path, f.has)
		assert.NotContains(t, string(b), "@BINDIR@", "%s does not contain %q (or has a placeholder left)", f.path, f.has)
		assert.NotContains(t, string(b), "@SYSCONFDIR@", "%s does not contain %q (or has a placeholder left)", f.path, f.has)
	}
	// The installed manad accepts the installed configuration.
	r := run(t, "", nil, filepath.Join(in.bin, "manad"), "--config", filepath.Join(in.sysconf, "manad/manad.toml"), "--check-config")
	assert.Equal(t, 0, r.code, "manad --check-config of the installed configuration: %+v", r)
	assert.Contains(t, r.stdout, "OK, 2 port(s)", "manad --check-config of the installed configuration: %+v", r)
	// A second install keeps an edited configuration.
	conf := filepath.Join(in.sysconf, "manad/manad.toml")
	require.NoError(t, os.WriteFile(conf, []byte("# edited\n"), 0o644))
	cmd := exec.Command("make", "-C", moduleRoot(), "install", "PREFIX="+in.prefix, "SYSCONFDIR="+in.sysconf,
		"BIN="+filepath.Join(filepath.Dir(in.prefix), "build"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "second make install: %v\n%s", err, out)
	b, _ := os.ReadFile(conf)
	assert.Equal(t, "# edited\n", string(b), "make install overwrote %s", conf)
}

// TestSystemdVerify runs systemd-analyze verify on the installed units: it must exit 0 and say
// nothing (it only warns, exit 0, about unknown keys).
func TestSystemdVerify(t *testing.T) {
	testenv.RequireRoot(t)
	analyze := testenv.NeedTool(t, "systemd-analyze")
	in := makeInstall(t)
	r := run(t, "", nil, analyze, "verify", filepath.Join(in.unitDir, "manad.service"), filepath.Join(in.unitDir, "manad.socket"))
	assert.Equal(t, 0, r.code, "systemd-analyze verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	assert.Equal(t, "", r.stdout, "systemd-analyze verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	assert.Equal(t, "", r.stderr, "systemd-analyze verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	// The check is not vacuous: a misspelt key and a relative socket path are reported.
	bad := filepath.Join(worldDir(t), "manad.socket")
	b, _ := os.ReadFile(filepath.Join(in.unitDir, "manad.socket"))
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(string(b), "SocketMode=", "SocketMod=", 1)), 0o644))
	r = run(t, "", nil, analyze, "verify", bad)
	assert.NotEqual(t, "", r.stderr, "systemd-analyze verify accepted a unit with SocketMod=")
}

// unitCaps reads CapabilityBoundingSet from systemd/manad.service as setpriv's syntax
// ("-all,+net_admin,…").
func unitCaps(t *testing.T) (setpriv string, mask uint64) {
	t.Helper()
	f, err := os.Open(filepath.Join(moduleRoot(), "systemd/manad.service"))
	require.NoError(t, err)
	defer f.Close()
	names := map[string]uint{"CAP_NET_ADMIN": unix.CAP_NET_ADMIN, "CAP_SYS_ADMIN": unix.CAP_SYS_ADMIN,
		"CAP_BPF": unix.CAP_BPF, "CAP_PERFMON": unix.CAP_PERFMON, "CAP_SYS_PTRACE": unix.CAP_SYS_PTRACE,
		"CAP_NET_RAW": unix.CAP_NET_RAW, "CAP_SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "CAP_IPC_LOCK": unix.CAP_IPC_LOCK}
	s := bufio.NewScanner(f)
	for s.Scan() {
		v, ok := strings.CutPrefix(s.Text(), "CapabilityBoundingSet=")
		if !ok {
			continue
		}
		setpriv = "-all"
		for _, c := range strings.Fields(v) {
			bit, known := names[c]
			require.True(t, known, "unit has %s, unknown to this test", c)
			setpriv += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
			mask |= 1 << bit
		}
		return setpriv, mask
	}
	t.Fatal("no CapabilityBoundingSet= in systemd/manad.service")
	return "", 0
}

// capDaemon is manad started under setpriv with a restricted capability set.
type capDaemon struct {
	cmd    *exec.Cmd
	socket string
	log    string
	done   chan error
}

func startCapDaemon(t *testing.T, caps, dir, ports string) *capDaemon {
	t.Helper()
	manad, _ := harness.Binaries(t)
	d := &capDaemon{socket: filepath.Join(dir, "manad.sock"), log: filepath.Join(dir, "manad.log"), done: make(chan error, 1)}
	cfg := filepath.Join(dir, "manad.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n%s", d.socket, filepath.Join(dir, "state"), ports)), 0o644))
	logf, err := os.Create(d.log)
	require.NoError(t, err)
	d.cmd = exec.Command("setpriv", "--no-new-privs", "--bounding-set", caps, "--inh-caps=-all", "--", manad, "--config", cfg)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(), raceEnv())
	require.NoError(t, d.cmd.Start())
	logf.Close()
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(unix.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(20 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	harness.Eventually(t, "manad under setpriv to serve", func() bool {
		b, _ := os.ReadFile(d.log)
		return strings.Contains(string(b), "manad ready")
	})
	return d
}

func (d *capDaemon) logText() string { b, _ := os.ReadFile(d.log); return string(b) }

// TestCapabilityBoundingSet runs manad with exactly the unit's CapabilityBoundingSet (as systemd
// would: root, bounding set, no new privileges) and checks what manad needs them for: a port in a
// pre-created named namespace (setns), its TAP, uplinks (AF_PACKET and AF_XDP), a client in that namespace seeing its port
// (SIOCGSKNS), a reconfiguration, and an eBPF XDP program. Then it drops CAP_NET_ADMIN and
// CAP_SYS_ADMIN in turn and checks that the port cannot be made without each.
func TestCapabilityBoundingSet(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.NeedTool(t, "setpriv")
	caps, mask := unitCaps(t)
	dir := worldDir(t)
	bin := manactlIn(t, dir)
	ns := harness.Name("mcc", "")
	harness.Run(t, "", "ip", "netns", "add", ns) // under ProtectSystem=strict namespaces are made beforehand
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	port := harness.Name("mcc", "0")
	// An uplink (an AF_PACKET socket: CAP_NET_RAW) on a veth in the same namespace.
	// Two uplinks on veths in the same namespace: an AF_PACKET socket (CAP_NET_RAW) and an
	// AF_XDP one (its UMEM is locked memory: CAP_IPC_LOCK past RLIMIT_MEMLOCK).
	upl, xupl := harness.Name("mcu", "0"), harness.Name("mcx", "0")
	for _, dev := range []string{upl, xupl} {
		harness.Run(t, ns, "ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p")
		harness.Run(t, ns, "ip", "link", "set", dev, "up")
		harness.Run(t, ns, "ip", "link", "set", dev+"p", "up")
	}
	ports := fmt.Sprintf("[[segment]]\nname = \"capseg\"\nuplinks = [{dev = %q, netns = %q}, {dev = %q, netns = %q, attach = \"af_xdp\"}]\n\n"+
		"[[port]]\nname = %q\nnetns = %q\nsegment = \"capseg\"\nqueues = 2\nrx_ring = 128\npersistent = false\n",
		upl, ns, xupl, ns, port, ns)

	d := startCapDaemon(t, caps, dir, ports)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	require.NoError(t, err)
	// setpriv has exec'd manad by the time it logs; its effective set is the bounding set.
	m := regexp.MustCompile(`(?m)^CapEff:\s+([0-9a-f]+)$`).FindStringSubmatch(string(status))
	eff, _ := strconv.ParseUint(m[1], 16, 64)
	require.NotNil(t, m, "manad's CapEff %v, want %x", m, mask)
	require.Equal(t, mask, eff, "manad's CapEff %v, want %x", m, mask)
	for deadline := time.Now().Add(10 * time.Second); strings.Count(d.logText(), "uplink up") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("uplink not attached under the unit's capabilities; manad log:\n%s", d.logText())
		}
		time.Sleep(10 * time.Millisecond)
	}
	env := []string{"MANAD_SOCKET=" + d.socket}
	out := ok(t, "list", run(t, ns, env, bin, "list"))
	require.Contains(t, out, port+"  "+ns, "list under the unit's capabilities:\n%s\nmanad log:\n%s", out, d.logText())
	harness.Run(t, ns, "ip", "link", "set", port, "up")
	ok(t, "set-priv-flags", run(t, ns, env, bin, "set-priv-flags", port, "full-page-rx", "on"))
	obj, err := xdptest.BuildELF(elf.EM_BPF, "GPL", xdptest.Prog{Section: "xdp", Name: "pass_all",
		Insns: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	require.NoError(t, err)
	objPath := filepath.Join(dir, "pass.o")
	require.NoError(t, os.WriteFile(objPath, obj, 0o644))
	ok(t, "xdp attach FILE.o", run(t, ns, env, bin, "xdp", port, "attach", objPath))
	assert.Contains(t, ok(t, "list", run(t, ns, env, bin, "list")), "ebpf:pass_all", "eBPF program not attached")

	for _, drop := range []string{"net_admin", "sys_admin"} {
		t.Run("without-"+drop, func(t *testing.T) {
			sub := filepath.Join(dir, drop)
			require.NoError(t, os.Mkdir(sub, 0o755))
			p := harness.Name("mcd"+drop[:1], "0")
			d := startCapDaemon(t, strings.Replace(caps, ",+"+drop, "", 1), sub,
				fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nqueues = 2\nrx_ring = 128\npersistent = false\n", p, ns))
			var names []string
			err := harness.InNetNS(ns, func() error {
				nc, err := client.Dial(d.socket)
				if err != nil {
					return err
				}
				defer nc.Close()
				ps, err := nc.Ports(context.Background())
				for _, p := range ps {
					names = append(names, p.Device.Name)
				}
				return err
			})
			for _, l := range strings.Split(d.logText(), "\n") {
				if strings.Contains(l, "port not created") {
					t.Logf("without CAP_%s: %s", strings.ToUpper(drop), l)
				}
			}
			if err != nil || len(names) != 0 || !strings.Contains(d.logText(), "port not created") {
				t.Errorf("without CAP_%s: ports %v (%v), log:\n%s", strings.ToUpper(drop), names, err, d.logText())
			}
		})
	}
}

// udevadmTest runs `udevadm test --action=add` on a network device of namespace ns, with the
// installed 90-manad.rules as the only rule file, in a private mount namespace (ip netns exec
// makes one): the system's rule directories are covered and /run is a fresh tmpfs, so udevadm's
// database writes go nowhere.
func udevadmTest(t *testing.T, ns, rulesDir, dev string) string {
	t.Helper()
	empty := worldDir(t)
	script := `set -e
mount -t tmpfs tmpfs /run
mount --bind "$1" /etc/udev/rules.d
for d in /usr/lib/udev/rules.d /usr/local/lib/udev/rules.d /lib/udev/rules.d; do
	[ ! -d "$d" ] || mount --bind "$2" "$d"
done
exec udevadm test --action=add "/sys/class/net/$3" 2>&1`
	r := run(t, ns, nil, "sh", "-c", script, "sh", rulesDir, empty, dev)
	require.Equal(t, 0, r.code, "udevadm test %s: exit %d\n%s%s", dev, r.code, r.stdout, r.stderr)
	return r.stdout + r.stderr
}

// TestUdevRule runs `udevadm test` on real manad TAPs (and on TAPs that are not manad's) with the
// installed rule: it must match manad's ports and print the exact RUN command; running that
// command must succeed and turn full-page-rx on.
func TestUdevRule(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.NeedTool(t, "udevadm")
	if st, err := os.Stat("/etc/udev/rules.d"); err != nil || !st.IsDir() {
		testenv.SkipOrFail(t, "no /etc/udev/rules.d to cover with the rule under test: %v", err)
	}
	in := makeInstall(t)
	dir := worldDir(t)
	ns := harness.Name("mcu", "")
	byAlias, byName := harness.Name("mcu", "0"), harness.Name("mana", "")
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\npersistent = false\n[[port]]\nname = %q\nnetns = %q\npersistent = true\n",
		byAlias, ns, byName, ns)
	d := harness.Start(t, dir, "", ports, ns)
	env := []string{"MANAD_SOCKET=" + d.Socket}

	// TAPs that are not manad's: multi-queue without the alias, and single-queue with a manad-like name.
	plainMQ, singleQ := harness.Name("mcw", "0"), harness.Name("mana", "9")
	harness.Run(t, ns, "ip", "tuntap", "add", "dev", plainMQ, "mode", "tap", "multi_queue")
	harness.Run(t, ns, "ip", "tuntap", "add", "dev", singleQ, "mode", "tap")
	runLine := regexp.MustCompile(`(?m)^run: '([^']*)'$`)
	for _, dev := range []string{plainMQ, singleQ} {
		out := udevadmTest(t, ns, in.rulesDir, dev)
		if regexp.MustCompile(`(?m)^`+dev+`: \S*90-manad.rules:\d+ RUN `).MatchString(out) || runLine.MatchString(out) {
			t.Errorf("the rule matched %s, which is not manad's:\n%s", dev, out)
		}
	}

	for _, port := range []string{byAlias, byName} {
		t.Run(port, func(t *testing.T) {
			out := udevadmTest(t, ns, in.rulesDir, port)
			ruleLine := port + `: ` + regexp.QuoteMeta(filepath.Join(in.rulesDir, "90-manad.rules")) + `:\d+ RUN '` +
				regexp.QuoteMeta(in.manactl+" set-priv-flags $name full-page-rx on") + `'`
			assert.True(t, regexp.MustCompile(`(?m)^`+ruleLine+`$`).MatchString(strings.ReplaceAll(out, "/etc/udev/rules.d", in.rulesDir)), "udevadm test %s shows no match of 90-manad.rules:\n%s", port, out)
			m := runLine.FindAllStringSubmatch(out, -1)
			want := in.manactl + " set-priv-flags " + port + " full-page-rx on"
			require.Len(t, m, 1, "udevadm test %s: RUN commands %q, want exactly %q\n%s", port, m, want, out)
			require.Equal(t, want, m[0][1], "udevadm test %s: RUN commands %q, want exactly %q\n%s", port, m, want, out)
			t.Logf("udevadm test %s: run: '%s'", port, m[0][1])
			// Run the command exactly as printed (udev runs it without a shell, split on spaces).
			if r := run(t, ns, env, strings.Fields(m[0][1])...); r.code != 0 || r.stderr != "" {
				t.Fatalf("%s: exit %d, stderr %q", m[0][1], r.code, r.stderr)
			}
			r := run(t, ns, env, in.manactl, "--show-priv-flags", port)
			assert.Equal(t, 0, r.code, "after the RUN command: %+v", r)
			assert.Equal(t, fmt.Sprintf("Private flags for %s:\nfull-page-rx: on\n", port), r.stdout, "after the RUN command: %+v", r)
		})
	}
}
