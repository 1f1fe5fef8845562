package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ruleRun returns the value of the rule file's RUN+= assignment that calls manactl, or "".
func ruleRun(rules []byte) string {
	for _, line := range strings.Split(string(rules), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.Index(line, `RUN+="`)
		if i < 0 {
			continue
		}
		v := line[i+len(`RUN+="`):]
		if j := strings.IndexByte(v, '"'); j >= 0 && strings.Contains(v[:j], "@BINDIR@/manactl ") {
			return v[:j]
		}
	}
	return ""
}

// moduleFile returns the path of a file of the repository (the tests run in tests/scenarios).
func moduleFile(t testing.TB, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	require.NoError(t, err)
	return p
}

// findUdevd returns the systemd-udevd binary (Debian package udev), or "".
func findUdevd() string {
	for _, p := range []string{"/lib/systemd/systemd-udevd", "/usr/lib/systemd/systemd-udevd", "/sbin/udevd"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	if p, err := exec.LookPath("systemd-udevd"); err == nil {
		return p
	}
	return ""
}

// udevd is a systemd-udevd the test runs in a mount namespace of its own, so that it sees only
// the rules the test gives it and never touches the host's udev state: there,
//   - /run is a fresh tmpfs (udevd's control socket and database go to /run/udev), with
//     /run/manad/manad.sock bind-mounted from the test daemon's socket, so the rule's RUN command
//     reaches the test's manad at manactl's default socket path, unmodified;
//   - every udev rules directory is an empty tmpfs except /etc/udev/rules.d, which holds only
//     the rule under test.
//
// It shares the host's network namespace, the only one whose uevents reach a udevd (the kernel
// sends a device's uevents to the network namespace it is in), and so it sees the devices every
// other process on the machine creates there too: with only the manad rule loaded, those that
// are not manad TAPs are processed without effect.
type udevd struct {
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan error
}

// lockedBuffer is the udevd's output, written by exec's copier goroutine and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// udevdScript sets up udevd's mount namespace and replaces itself with udevd; $1 is the rule
// file, $2 manad's socket, $3 the udevd binary.
const udevdScript = `set -e
mount -t tmpfs -o mode=0755 manad-test /run
mkdir -p /run/manad /run/udev
touch /run/manad/manad.sock
mount --bind "$2" /run/manad/manad.sock
for d in /etc/udev/rules.d /lib/udev/rules.d /usr/lib/udev/rules.d /usr/local/lib/udev/rules.d; do
	if [ -d "$d" ]; then mount -t tmpfs -o mode=0755 manad-test "$d"; fi
done
cp "$1" /etc/udev/rules.d/90-manad.rules
exec "$3" --debug
`

// startUdevd starts udevd with rule, its RUN commands talking to manad at socket, and stops it
// (SIGTERM to its process, which is udevd itself) at the end of the test.
func startUdevd(t *testing.T, bin, rule, socket string) *udevd {
	t.Helper()
	u := &udevd{log: &lockedBuffer{}, done: make(chan error, 1)}
	u.cmd = exec.Command("sh", "-c", udevdScript, "udevd-sandbox", rule, socket, bin)
	u.cmd.Stdout, u.cmd.Stderr = u.log, u.log
	// A new mount namespace; Go makes its mounts private before exec, so nothing propagates back.
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	require.NoError(t, u.cmd.Start())
	go func() { u.done <- u.cmd.Wait() }()
	t.Cleanup(func() {
		u.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-u.done:
		case <-time.After(10 * time.Second):
			u.cmd.Process.Kill()
			<-u.done
			t.Errorf("systemd-udevd did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("systemd-udevd output:\n%s", u.log.String())
		}
	})
	// udevd listens for uevents before it creates its control socket; its mount namespace is
	// reachable through /proc/PID/root.
	control := fmt.Sprintf("/proc/%d/root/run/udev/control", u.cmd.Process.Pid)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(control); err == nil {
			return u
		}
		select {
		case err := <-u.done:
			t.Fatalf("systemd-udevd exited during startup: %v\n%s", err, u.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd-udevd did not create its control socket\n%s", u.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUdevRuleSetsFlag is scenario 4, from seed 000 (000_aa76980ead4caea0: the flag "must be
// explicitly enabled by the user or udev rule"): a port created while the shipped udev rule is
// installed ends up with full-page-rx on, set by the rule's RUN command.
//
// The rule is systemd/90-manad.rules with @BINDIR@ replaced as `make install` does, pointing at
// the test's manactl. udev only sees devices of the host's network namespace, so the port is
// created in manad's own namespace (netns ""), at runtime (PORT_NEW) while udevd runs. No udevd
// runs in the development VM (and a CI container has none either unless it boots systemd), so the
// test starts systemd-udevd itself, in a private mount namespace with only the manad rule (see
// udevd); `udevadm test` would not do: it only prints the RUN command ("it does not run any
// program specified by a RUN key"). The port's name matches the rule's KERNEL=="mana[0-9]*"
// (its ifalias "manad:<port>" may not be set yet when udev reads it). 16K pages, so that the flag
// visibly changes the layout from 7 buffers per page to one.
//
// The test checks that the port is created with the flag off (PORT_NEW's reply); that the flag
// is then on, with the full-page layout; that udevd ran the rule's RUN command for the port and
// it succeeded; and that the priv-flags change manad logged came from a process udevd spawned
// (manad logs the caller's PID, udevd the PIDs it forks).
func TestUdevRuleSetsFlag(t *testing.T) {
	testenv.RequireRoot(t)
	udevdBin := findUdevd()
	if udevdBin == "" {
		testenv.SkipOrFail(t, "systemd-udevd not found: install the udev package (apt-get install udev)")
	}
	_, manactl := harness.Binaries(t)
	if _, err := os.Stat(manactl); err != nil {
		t.Fatalf("manactl was not built: %v", err)
	}
	src, err := os.ReadFile(moduleFile(t, "systemd/90-manad.rules"))
	require.NoError(t, err, "the shipped udev rule")
	runCmd := ruleRun(src)
	require.NotEqual(t, "", runCmd, "systemd/90-manad.rules has no RUN+=\"@BINDIR@/manactl …\":\n%s", src)
	bindir := filepath.Dir(manactl)
	d := harness.Start(t, "", "", "")
	rule := filepath.Join(d.Dir, "90-manad.rules")
	require.NoError(t, os.WriteFile(rule, bytes.ReplaceAll(src, []byte("@BINDIR@"), []byte(bindir)), 0o644))
	u := startUdevd(t, udevdBin, rule, d.Socket)

	name := harness.Name("mana", "u")
	c := d.Client("")
	ctx := context.Background()
	info, err := c.CreatePort(ctx, genl.PortSpec{Name: name, Segment: "udev", PageSize: 16384, Queues: 2, RxRing: 256})
	require.NoError(t, err, "create port %s", name)
	t.Cleanup(func() { // before manad stops (a non-persistent TAP would go with it anyway)
		assert.NoError(t, c.DeletePort(ctx, client.Interface{Name: name}), "delete port %s", name)
	})
	require.Equal(t, uint32(0), info.PrivFlags, "port %s created with flags %#x, layout single=%v; want the flag off and fragments", name, info.PrivFlags, info.Layout.Single)
	require.False(t, info.Layout.Single, "port %s created with flags %#x, layout single=%v; want the flag off and fragments", name, info.PrivFlags, info.Layout.Single)
	harness.Eventually(t, "udev to set full-page-rx on "+name, func() bool {
		return portInfo(t, c, name).PrivFlags&1 != 0
	})
	got := portInfo(t, c, name)
	if !got.Layout.Single || got.Layout.FragCount != 1 || len(got.PrivFlagNames) != 1 || got.PrivFlagNames[0] != "full-page-rx" {
		t.Errorf("after the udev rule: flags %v, layout %+v", got.PrivFlagNames, got.Layout)
	}

	// udevd --debug logs `Running command "…"` and then `Process '…' succeeded.`
	cmdline := strings.NewReplacer("@BINDIR@", bindir, "$name", name, "%k", name, "$kernel", name).Replace(runCmd)
	harness.Eventually(t, "udevd to report that "+cmdline+" succeeded", func() bool {
		return strings.Contains(u.log.String(), fmt.Sprintf("Process '%s' succeeded.", cmdline))
	})

	// And the change manad made came from that process: manad logs the caller's PID
	// (SO_PEERCRED), udevd the PID of every program it spawns.
	spawned := map[string]bool{}
	for _, m := range regexp.MustCompile(`forked off '\(spawn\)' as PID (\d+)`).FindAllStringSubmatch(u.log.String(), -1) {
		spawned[m[1]] = true
	}
	changes := regexp.MustCompile(`msg=reconfigure port=`+regexp.QuoteMeta(name)+` op=priv-flags .*pid=(\d+) .*result=ok`).
		FindAllStringSubmatch(d.Log(), -1)
	require.NotEmpty(t, changes, "manad logged no priv-flags change of %s:\n%s", name, d.Log())
	first := changes[0][1]
	assert.True(t, spawned[first], "manad's first priv-flags change of %s came from PID %s, not from a program udevd spawned (%v)", name, first, spawned)
}
