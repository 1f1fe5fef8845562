package reliability

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
)

// manactlFor copies the manactl binary into a directory every user may enter (the harness builds
// it in a private temporary directory), for running it as another user.
func manactlFor(t *testing.T) string {
	t.Helper()
	_, src := harness.Binaries(t)
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("manactl was not built (cmd/manactl missing?): %v", err)
	}
	dst := filepath.Join(openDir(t), "manactl")
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, data, 0o755))
	return dst
}

// cliResult is one manactl run.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runAs runs a command in namespace ns as uid/gid with groups, and returns its exit status and
// output.
func runAs(t *testing.T, ns string, uid, gid uint32, groups []uint32, args ...string) cliResult {
	t.Helper()
	var res cliResult
	err := asUser(ns, uid, gid, groups, func() error {
		cmd := exec.Command(args[0], args[1:]...)
		// A -race binary sleeps a second at exit unless told otherwise.
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "GORACE=atexit_sleep_ms=0"}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		res.stdout, res.stderr = out.String(), errb.String()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			res.code = ee.ExitCode()
		default:
			return err
		}
		return nil
	})
	require.NoError(t, err, "%s", strings.Join(args, " "))
	return res
}

// TestUnprivilegedCLI runs every manactl show command as uid 65534 (they work) and every change
// command (each fails with EPERM: ethtool's exit status and one clear line on stderr), and
// checks that no port changed.
func TestUnprivilegedCLI(t *testing.T) {
	nsA, nsB := harness.Name("rsa", ""), harness.Name("rsb", "")
	portA := harness.Name("rs", "a")
	ports := []portDef{
		{name: portA, ns: nsA, segment: "rs", ip: "10.216.0.1"},
		{name: harness.Name("rs", "b"), ns: nsB, segment: "rs", ip: "10.216.0.2"},
	}
	r := startRig(t, openDir(t), "", ports)
	manactl := manactlFor(t)
	before := r.snapshot(t)
	as := func(args ...string) cliResult {
		return runAs(t, nsA, nobody, nobody, nil, append([]string{manactl, "--socket", r.d.Socket}, args...)...)
	}

	shows := []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"list"}, portA},
		{[]string{"--json", "list"}, `"` + portA + `"`},
		{[]string{"show-priv-flags", portA}, "Private flags for " + portA + ":"},
		{[]string{"--show-priv-flags", portA}, "full-page-rx"},
		{[]string{"show-ring", portA}, "Ring parameters for " + portA + ":"},
		{[]string{"-g", portA}, "Pre-set maximums:"},
		{[]string{"show-channels", portA}, "Channel parameters for " + portA + ":"},
		{[]string{"-l", portA}, "Combined:"},
		{[]string{"stats", portA}, "NIC statistics:"},
		{[]string{"-S", portA}, "rx_0_packets"},
		{[]string{"show-strings", portA}, "full-page-rx"},
		{[]string{"show-rxbuf", portA}, "16384"},
		{[]string{"--json", "show-rxbuf", portA}, "{"},
		{[]string{"rxbuf-plan", "--page-size", "64K", "--mtu", "1500"}, "31"},
		{[]string{"--json", "show-ring", portA}, "{"},
	}
	for _, s := range shows {
		res := as(s.args...)
		assert.Equal(t, 0, res.code, "manactl %s as uid %d: exit %d, stdout missing %q:\n%s%s", strings.Join(s.args, " "), nobody, res.code, s.want, res.stdout, res.stderr)
		assert.Contains(t, res.stdout, s.want, "manactl %s as uid %d: exit %d, stdout missing %q:\n%s%s", strings.Join(s.args, " "), nobody, res.code, s.want, res.stdout, res.stderr)
	}

	changes := [][]string{
		{"set-priv-flags", portA, "full-page-rx", "on"},
		{"--set-priv-flags", portA, "full-page-rx", "on"},
		{"set-ring", portA, "rx", "256"},
		{"-G", portA, "tx", "256"},
		{"set-channels", portA, "combined", "2"},
		{"-L", portA, "combined", "2"},
		{"set-mtu", portA, "1400"},
		{"xdp", portA, "attach", "drop"},
		{"xdp", portA, "detach"},
		{"fault", portA, "attach", "once"},
		{"port", "add", harness.Name("rs", "z"), "--netns", nsA, "--segment", "rs"},
		{"port", "del", portA},
		{"capture", portA, "-c", "1"},
		{"capture", "rs", "-w", "/dev/null"},
	}
	for _, args := range changes {
		res := as(args...)
		line := strings.TrimSpace(res.stderr)
		code := 1
		if args[0] == "set-ring" || args[0] == "-G" {
			code = 81 // ethtool -G's exit status for a refused change
		}
		if res.code != code || strings.Count(line, "\n") != 0 || !strings.Contains(line, "Operation not permitted") {
			t.Errorf("manactl %s as uid %d: exit %d, stderr %q; want exit %d and one line saying \"Operation not permitted\"",
				strings.Join(args, " "), nobody, res.code, res.stderr, code)
		} else {
			t.Logf("manactl %s: %s", strings.Join(args, " "), line)
		}
	}

	// monitor is a show command too: it subscribes, and prints a change root makes.
	var out lockedBuffer
	mon := exec.Command(manactl, "--socket", r.d.Socket, "monitor")
	mon.Env = []string{"GORACE=atexit_sleep_ms=0"}
	mon.Stdout, mon.Stderr = &out, &out
	require.NoError(t, asUser(nsA, nobody, nobody, nil, func() error { return mon.Start() }))
	defer func() {
		mon.Process.Kill()
		mon.Wait()
	}()
	c, ifi := r.port(portA)
	on := false
	seen := poll(10*time.Second, func() bool {
		// Keep changing until the monitor has subscribed and printed a change.
		on = !on
		require.NoError(t, c.SetPrivateFlags(bg(t), client.PrivateFlags{Interface: ifi, Flags: []client.Flag{{Name: "full-page-rx", On: on}}}))
		return strings.Contains(out.String(), portA)
	})
	mon.Process.Signal(syscall.SIGINT)
	assert.True(t, seen, "manactl monitor as uid %d printed nothing about %s:\n%s", nobody, portA, out.String())
	require.NoError(t, c.SetPrivateFlags(bg(t), client.PrivateFlags{Interface: ifi, Flags: []client.Flag{{Name: "full-page-rx", On: false}}}))

	assert.Empty(t, cmp.Diff(before, r.snapshot(t)), "unprivileged manactl changed a port (-before +after)")
	if ports, err := c.Ports(bg(t)); err != nil || len(ports) != 1 {
		t.Errorf("ports in %s: %d (%v), want only %s", nsA, len(ports), err, portA)
	}
}

// TestSocketModeAndAdminGroup checks the socket's documented mode and group: by default 0666
// (anyone connects and reads; only root changes ports); with admin_group the socket's group is
// that group and its members — by primary or supplementary group — may change ports; with
// socket_mode 0660 others cannot even connect.
func TestSocketModeAndAdminGroup(t *testing.T) {
	const admin = 4242 // a gid no one has; admin_group accepts a bare gid
	setFlag := func(c *client.Client, port string, on bool) error {
		return c.SetPrivateFlags(bg(t), client.PrivateFlags{Interface: client.Interface{Name: port}, Flags: []client.Flag{{Name: "full-page-rx", On: on}}})
	}
	for _, tc := range []struct {
		name, extra string
		mode        os.FileMode
		gid         uint32
	}{
		{"default", "", 0o666, 0},
		{"admin group", fmt.Sprintf("admin_group = %d\n", admin), 0o666, admin},
		{"admin group 0660", fmt.Sprintf("admin_group = %d\nsocket_mode = \"0660\"\n", admin), 0o660, admin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.Name("rg", "")
			port := harness.Name("rg", "0")
			r := startRig(t, openDir(t), tc.extra, []portDef{{name: port, ns: ns, segment: "rg"}})
			var st unix.Stat_t
			require.NoError(t, unix.Stat(r.d.Socket, &st))
			assert.Equal(t, tc.mode, os.FileMode(st.Mode&0o7777), "socket mode %#o group %d, want a socket with mode %#o group %d", st.Mode&0o7777, st.Gid, tc.mode, tc.gid)
			assert.Equal(t, tc.gid, st.Gid, "socket mode %#o group %d, want a socket with mode %#o group %d", st.Mode&0o7777, st.Gid, tc.mode, tc.gid)
			assert.Equal(t, uint32(unix.S_IFSOCK), st.Mode&unix.S_IFMT, "socket mode %#o group %d, want a socket with mode %#o group %d", st.Mode&0o7777, st.Gid, tc.mode, tc.gid)

			// Not in the admin group.
			c, err := dialAs(t, r.d.Socket, ns, nobody, nobody, nil)
			if tc.mode&0o006 == 0 {
				assert.ErrorIs(t, err, unix.EACCES, "uid %d outside the group connected to a %#o socket", nobody, tc.mode)
			} else {
				require.NoError(t, err)
				if _, err := c.Port(bg(t), client.Interface{Name: port}); err != nil {
					t.Errorf("GET as uid %d: %v", nobody, err)
				}
				err := setFlag(c, port, true)
				assert.ErrorIs(t, err, unix.EPERM, "SET as uid %d outside the admin group: %v, want EPERM", nobody, err)
			}
			if tc.gid == 0 {
				return
			}
			// Members of the admin group, by supplementary and by primary group.
			for _, m := range []struct {
				what   string
				gid    uint32
				groups []uint32
			}{{"supplementary", nobody, []uint32{admin}}, {"primary", admin, nil}} {
				c, err := dialAs(t, r.d.Socket, ns, nobody, m.gid, m.groups)
				require.NoError(t, err, "uid %d with admin group as %s group", nobody, m.what)
				for _, on := range []bool{true, false} {
					assert.NoError(t, setFlag(c, port, on), "SET as uid %d with the admin group as %s group", nobody, m.what)
				}
				i := portInfo(t, c, port)
				assert.Equal(t, uint32(0), i.PrivFlags, "flags %#x after the admin group member turned full-page-rx off", i.PrivFlags)
			}
			// And through manactl.
			manactl := manactlFor(t)
			res := runAs(t, ns, nobody, nobody, []uint32{admin}, manactl, "--socket", r.d.Socket, "set-priv-flags", port, "full-page-rx", "on")
			assert.Equal(t, 0, res.code, "manactl set-priv-flags as an admin group member: exit %d\n%s%s", res.code, res.stdout, res.stderr)
			i := portInfo(t, r.clients[ns], port)
			assert.NotEqual(t, uint32(0), i.PrivFlags&1, "full-page-rx not set by the admin group member's manactl")
		})
	}
}

// TestNetNSIsolation: a client resolves devices in its own network namespace only. From another
// namespace a port cannot be read, changed or listed, by name or by ifindex (ENODEV), even by
// root; manactl there fails cleanly.
func TestNetNSIsolation(t *testing.T) {
	testenv.RequireRoot(t)
	nsA, nsB, nsC := harness.Name("rna", ""), harness.Name("rnb", ""), harness.Name("rnc", "")
	portA, portB := harness.Name("rn", "a"), harness.Name("rn", "b")
	// Give nsA's port a higher ifindex than anything in nsB, so that "by ifindex" really names
	// a device that exists only in nsA.
	t.Cleanup(func() {
		for _, ns := range []string{nsA, nsC} {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	harness.Run(t, "", "ip", "netns", "add", nsA)
	harness.Run(t, nsA, "ip", "link", "add", "rnv0", "type", "veth", "peer", "name", "rnv1")
	harness.Run(t, "", "ip", "netns", "add", nsC)
	ports := []portDef{
		{name: portA, ns: nsA, segment: "rn", ip: "10.217.0.1"},
		{name: portB, ns: nsB, segment: "rn", ip: "10.217.0.2"},
	}
	r := startRig(t, openDir(t), "", ports, nsC)
	ca, _ := r.port(portA)
	infoA := portInfo(t, ca, portA)
	idxA := int(infoA.Device.Index)
	idxB := int(portInfo(t, r.clients[nsB], portB).Device.Index)
	require.NotEqual(t, idxB, idxA, "ports have the same ifindex %d; the test needs them different", idxA)
	before := r.snapshot(t)
	var rootClient *client.Client
	rootClient, err := client.Dial(r.d.Socket)
	require.NoError(t, err)
	defer rootClient.Close()
	outsiders := map[string]*client.Client{nsB: r.clients[nsB], nsC: r.d.Client(nsC), "(the test's own)": rootClient}

	for where, c := range outsiders {
		for _, ifi := range []client.Interface{{Name: portA}, {Index: idxA}, {Name: portA, Index: idxA}} {
			ctx := bg(t)
			what := fmt.Sprintf("from %s, %+v", where, ifi)
			_, e1 := c.Port(ctx, ifi)
			_, e2 := c.PrivateFlags(ctx, ifi)
			_, e3 := c.Rings(ctx, ifi)
			_, e4 := c.Stats(ctx, ifi)
			e5 := c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: ifi, Flags: []client.Flag{{Name: "full-page-rx", On: true}}})
			e6 := c.SetMTU(ctx, ifi, 1400)
			e7 := c.SetFault(ctx, ifi, genl.Fault{Point: "attach", Mode: "always"})
			e8 := c.DeletePort(ctx, ifi)
			for k, err := range []error{e1, e2, e3, e4, e5, e6, e7, e8} {
				assert.ErrorIs(t, err, unix.ENODEV, "%s: request %d: %v, want ENODEV", what, k+1, err)
			}
		}
		all, err := c.Ports(bg(t))
		require.NoError(t, err)
		// Root in manad's own namespace (the test's) is shown every port, with its namespace
		// (manactl list on the host); nobody else sees another namespace's ports.
		shown := false
		for _, p := range all {
			if p.Device.Name == portA {
				shown = true
				assert.Same(t, rootClient, c, "from %s the port dump shows %s (netns %q)", where, portA, p.NetNSName)
				assert.Equal(t, nsA, p.NetNSName, "from %s the port dump shows %s (netns %q)", where, portA, p.NetNSName)
			}
		}
		if c == rootClient {
			assert.True(t, shown, "from %s (root, manad's namespace) the port dump lacks %s", where, portA)
		}
		dumps, err := c.AllPrivateFlags(bg(t))
		require.NoError(t, err)
		for _, d := range dumps {
			assert.NotEqual(t, portA, d.Interface.Name, "from %s the PRIVFLAGS dump shows %+v", where, d.Interface)
			assert.NotEqual(t, idxA, d.Interface.Index, "from %s the PRIVFLAGS dump shows %+v", where, d.Interface)
		}
	}
	// From nsB, B's own ifindex is B.
	if i, err := r.clients[nsB].Port(bg(t), client.Interface{Index: idxB}); err != nil || i.Device.Name != portB {
		t.Errorf("from %s ifindex %d: %+v, %v", nsB, idxB, i, err)
	}

	// manactl in nsB: the ethtool-style command falls back to the kernel, which has no such
	// device either; the manad-only one fails with manad's ENODEV.
	manactl := manactlFor(t)
	for _, args := range [][]string{{"show-priv-flags", portA}, {"show-rxbuf", portA}, {"set-priv-flags", portA, "full-page-rx", "on"}} {
		res := runAs(t, nsB, 0, 0, nil, append([]string{manactl, "--socket", r.d.Socket}, args...)...)
		if res.code != 1 || !strings.Contains(strings.ToLower(res.stderr), "no such device") && !strings.Contains(res.stderr, "no device") {
			t.Errorf("manactl %s in %s: exit %d, stderr %q; want exit 1 and a no-device message", strings.Join(args, " "), nsB, res.code, res.stderr)
		} else {
			t.Logf("manactl %s in %s: %s", strings.Join(args, " "), nsB, strings.TrimSpace(res.stderr))
		}
	}

	assert.Empty(t, cmp.Diff(before, r.snapshot(t)), "a port changed through another namespace (-before +after)")
}

// lockedBuffer is a bytes.Buffer a child process writes into while the test reads it.
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
