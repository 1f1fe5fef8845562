package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashAtEnv makes manad kill itself with SIGKILL at one step of creating a port's namespace
// (daemon/netns.go, crashPointEnv): for this test only.
const crashAtEnv = "MANAD_INTERNAL_TEST_CRASH_AT"

// TestPortAddNetNSCrash (issue 28 item 3): manad killed as kill -9 would at each step of a port
// add that creates its namespace — the intent saved, the empty /run/netns file made, the
// namespace mounted, the port made but not saved — and restarted leaves nothing half-made: no
// /run/netns file, no netns_created entry, no port; the same port add then succeeds, and `port
// del --netns-too` deletes the namespace. Killed once the port add was answered, the restarted
// manad has the port in its namespace, and --netns-too deletes that.
func TestPortAddNetNSCrash(t *testing.T) {
	for i, step := range []string{"netns-intent", "netns-file", "netns-mount", "netns-port", ""} {
		name := step
		if name == "" {
			name = "answered"
		}
		t.Run(name, func(t *testing.T) { testPortAddNetNSCrash(t, step, string(rune('a'+i))) })
	}
}

func testPortAddNetNSCrash(t *testing.T, step, suffix string) {
	ns, port := harness.Name("mcr", suffix), harness.Name("mcr", suffix+"0")
	path := filepath.Join("/run/netns", ns)
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("namespace %s exists before the test", ns)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", port).Run() })
	if step != "" {
		t.Setenv(crashAtEnv, step)
	}
	d := harness.Start(t, "", "", "", ns)
	os.Unsetenv(crashAtEnv) // for the restart
	ctx := context.Background()
	spec := wire.PortSpec{Name: port, NetNS: ns, Segment: "s", Persistent: true}
	_, err := d.Client("").CreatePort(ctx, spec)
	if step != "" {
		require.Error(t, err, "port add answered although manad was to be killed at %s", step)
	}
	if step == "" {
		require.NoError(t, err, "port add")
	}
	d.Kill9()
	d.Restart()

	recorded := func() (uint64, bool) {
		t.Helper()
		st, err := config.LoadState(filepath.Join(d.Dir, "state"))
		require.NoError(t, err)
		ino, ok := st.NetNS[ns]
		return ino, ok
	}
	c := d.Client("")
	if step != "" {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after a crash at %s and a restart, %s: %v; want it gone\n%s", step, path, err, d.Log())
		}
		ino, ok := recorded()
		assert.False(t, ok, "netns_created still has %s (inode %d)", ns, ino)
		if ports, err := c.Ports(ctx); err != nil || strings.Contains(strings.Join(portNames(ports), " "), port) {
			t.Errorf("ports after the restart: %v, %v; want no %s", portNames(ports), err, port)
		}
		if out, err := exec.Command("ip", "-o", "link", "show").CombinedOutput(); err != nil || strings.Contains(string(out), port) {
			t.Errorf("TAP %s left in manad's namespace: %v\n%s", port, err, out)
		}
		// Nothing in the way of the same port add.
		_, err := c.CreatePort(ctx, spec)
		require.NoError(t, err, "port add after the restart")
	}
	ino, ok := recorded()
	require.True(t, ok, "netns_created has %s with inode %d (%v), want its inode", ns, ino, ok)
	require.NotEqual(t, uint64(0), ino, "netns_created has %s with inode %d (%v), want its inode", ns, ino, ok)
	res, err := d.Client(ns).DeletePortNetNS(ctx, client.Interface{Name: port})
	require.NoError(t, err, "port del --netns-too: %+v, %v; want the namespace deleted", res, err)
	require.True(t, res.NetNSDeleted, "port del --netns-too: %+v, %v; want the namespace deleted", res, err)
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "%s after port del --netns-too", path)
	_, ok = recorded()
	assert.False(t, ok, "netns_created still has %s after port del --netns-too", ns)
}

func portNames(ports []wire.PortInfo) []string {
	var out []string
	for _, p := range ports {
		out = append(out, p.Device.Name)
	}
	return out
}
