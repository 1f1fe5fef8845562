package daemon

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// netnsChildEnv makes the test binary run TestNamedNetNSWithIP's body: in a mount namespace of
// its own, which the parent set up.
const netnsChildEnv = "MANAD_DAEMON_TEST_NETNS_CHILD"

// TestNamedNetNSWithIP (issue 12): after manad created its named namespaces, `ip netns add` and
// `ip netns del` keep working, for unrelated namespaces and for manad's own. Before manad made
// /run/netns a shared mount point as iproute2 does, the first `ip netns add` turned /run/netns
// into a recursive bind mount of itself, which copied manad's namespace mounts; `ip netns del`
// then unmounted only the copy and failed with EBUSY, and manad's namespaces leaked.
//
// The body runs in a child process in a private mount namespace with an empty tmpfs on /run, so
// that /run/netns starts as a plain directory (as on a host where nobody ran `ip netns add`
// since boot) and nothing it mounts reaches the host.
func TestNamedNetNSWithIP(t *testing.T) {
	if os.Getenv(netnsChildEnv) == "" {
		testenv.RequireRoot(t)
		if _, err := exec.LookPath("ip"); err != nil {
			testenv.SkipOrFail(t, "needs ip (iproute2): %v", err)
		}
		exe, err := os.Executable()
		require.NoError(t, err)
		cmd := exec.Command(exe, "-test.run=^TestNamedNetNSWithIP$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), netnsChildEnv+"=1")
		// Go makes / recursively private in the child after unsharing: nothing propagates back.
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "in a private mount namespace: %v\n%s", err, out)
		require.Contains(t, string(out), "--- PASS: TestNamedNetNSWithIP", "in a private mount namespace: %v\n%s", err, out)
		return
	}

	require.NoError(t, unix.Mount("manad-test", "/run", "tmpfs", 0, "mode=0755"), "tmpfs on /run")
	ip := func(args ...string) error {
		out, err := exec.Command("ip", append([]string{"netns"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip netns %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	pid := os.Getpid() % 100000
	own1, own2, other := fmt.Sprintf("mnt%da", pid), fmt.Sprintf("mnt%db", pid), fmt.Sprintf("mnt%du", pid)
	t.Cleanup(func() {
		for _, n := range []string{own1, own2, other} {
			_ = ip("del", n)
		}
	})
	self, err := selfNetNS()
	require.NoError(t, err)
	create := func(name string) {
		t.Helper()
		id, err := namedNetNS(name)
		require.NoError(t, err, "namedNetNS(%q)", name)
		require.NotEqual(t, self, id, "namedNetNS(%q) is the test's own namespace", name)
		if again, err := namedNetNS(name); err != nil || again != id {
			t.Fatalf("namedNetNS(%q) again = %v, %v; want the same namespace %v", name, again, err, id)
		}
	}

	create(own1)
	if err := ip("add", other); err != nil { // the first ip netns add after manad's
		t.Fatal(err)
	}
	create(own2) // manad creating after ip did
	checkSharedMount(t, netnsDir)
	for _, n := range []string{own1, other, own2} {
		assert.NoError(t, ip("del", n), "after manad created its namespaces")
	}
	left, _ := os.ReadDir(netnsDir)
	assert.Empty(t, left, "%s still holds", netnsDir)
	// Deleted, a name can be created again, by manad and by ip, and deleted again.
	create(own1)
	require.NoError(t, ip("add", other))
	for _, n := range []string{other, own1} {
		assert.NoError(t, ip("del", n), "second round")
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil || len(out) != 0 {
		t.Errorf("ip netns list = %q, %v; want nothing", out, err)
	}
}

// checkSharedMount fails t unless dir is a mount point with shared propagation. The mount is
// found by its ID (statx), since mountinfo also lists the mounts that others cover.
func checkSharedMount(t *testing.T, dir string) {
	t.Helper()
	mntID := func(path string) uint64 {
		var st unix.Statx_t
		require.NoError(t, unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_MNT_ID, &st))
		return st.Mnt_id
	}
	id := mntID(dir)
	if id == mntID(filepath.Dir(dir)) {
		t.Errorf("%s is not a mount point", dir)
		return
	}
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		// ID parent major:minor root mountpoint options [optional fields…] - fstype source super
		fields := strings.Fields(s.Text())
		if len(fields) < 7 || fields[0] != strconv.FormatUint(id, 10) {
			continue
		}
		for _, o := range fields[6:] {
			if o == "-" {
				break
			}
			if strings.HasPrefix(o, "shared:") {
				return
			}
		}
		t.Errorf("%s is not a shared mount: %s", dir, s.Text())
		return
	}
	t.Errorf("mount %d of %s not in /proc/self/mountinfo", id, dir)
}
