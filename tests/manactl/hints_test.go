package manactl

import (
	"fmt"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
)

// eperm is what manactl prints when manad refuses a change by a non-admin, for this test's manad:
// started with a --config (readable by everyone) that sets no admin_group.
func (e *e2e) eperm() string {
	return "netlink error: changes need root or the admin_group (none is configured: set admin_group in the [daemon] table of " +
		e.d.Config + "): Operation not permitted"
}

// netnsHint is what manactl prints, run on the host with args, for the port that lives in e.ns.
func (e *e2e) netnsHint(args string) string {
	return fmt.Sprintf("%s is a manad port in netns %s: run ip netns exec %s manactl %s", e.port, e.ns, e.ns, args)
}

// TestErrorsPointAtTheFix (issue 28): the errors a newcomer meets in the first hour say what to
// do, with the real binaries: a port looked up from the wrong namespace names its namespace and
// the command to run; with manad stopped, the kernel's error is followed by a line that says so;
// EPERM names root and the admin group; an unknown private flag lists the valid ones; an unknown
// command suggests the closest; list --netns of a namespace that does not exist fails.
func TestErrorsPointAtTheFix(t *testing.T) {
	e := startE2E(t)
	none := filepath.Join(e.dir, "none.sock")
	missingNS := harness.Name("mhm", "")
	emptyNS := harness.Name("mhe", "")
	harness.Run(t, "", "ip", "netns", "add", emptyNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", emptyNS).Run() })
	nobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}

	tests := []struct {
		name   string
		ns     string // "" = the host
		asUser bool   // as uid/gid 65534, not an admin
		args   []string
		code   int
		stderr string // exact, without the last newline
	}{
		// The port lives in e.ns; asked from the host, manad and the kernel both answer ENODEV.
		{"-g from the host", "", false, []string{"-g", e.port}, 1, e.netnsHint("-g " + e.port)},
		{"-G from the host keeps -G's status", "", false, []string{"-G", e.port, "rx", "512"}, 81, e.netnsHint("-G " + e.port + " rx 512")},
		{"plain DEV from the host", "", false, []string{e.port}, 1, e.netnsHint(e.port)},
		{"a manad command from the host", "", false, []string{"show-rxbuf", e.port}, 1, e.netnsHint("show-rxbuf " + e.port)},
		{"the hint repeats the options", "", false, []string{"--socket", e.d.Socket, "show-priv-flags", e.port}, 1,
			e.netnsHint("--socket " + e.d.Socket + " show-priv-flags " + e.port)},
		// A non-admin on the host sees only the host's ports: manactl cannot tell, and does not guess.
		{"-g from the host as a non-admin", "", true, []string{"-g", e.port}, 1, "netlink error: no device matches name: No such device"},

		{"manad stopped: -g", e.ns, false, []string{"--socket", none, "-g", e.port}, 1,
			"netlink error: Operation not supported\nmanad is not running at " + none},
		{"manad stopped: -G", e.ns, false, []string{"--socket", none, "-G", e.port, "rx", "512"}, 81,
			"netlink error: Operation not supported\nmanad is not running at " + none},
		{"manad stopped: a missing device", e.ns, false, []string{"--socket", none, "-l", e.unknownDev}, 1,
			"netlink error: no device matches name: No such device\nmanad is not running at " + none},
		{"--kernel asks the kernel: nothing about manad", e.ns, false, []string{"--kernel", "-g", e.port}, 1,
			"netlink error: Operation not supported"},

		{"EPERM: -G", e.ns, true, []string{"-G", e.port, "rx", "256"}, 81, e.eperm()},
		{"EPERM: set-priv-flags", e.ns, true, []string{"set-priv-flags", e.port, "full-page-rx", "on"}, 1, e.eperm()},
		{"EPERM: a manad command", e.ns, true, []string{"set-mtu", e.port, "1500"}, 1, e.eperm()},
		{"EPERM: capture", e.ns, true, []string{"capture", e.port, "-c", "1"}, 1,
			strings.Replace(e.eperm(), "changes need", "capture needs", 1)},

		{"unknown private flag", e.ns, false, []string{"--set-priv-flags", e.port, "turbo", "on"}, 1,
			"netlink error: unknown private flag 'turbo' (" + e.port + " has: full-page-rx): Operation not supported"},
		{"unknown private flag after a valid one", e.ns, false, []string{"set-priv-flags", e.port, "full-page-rx", "on", "fullpage-rx", "off"}, 1,
			"netlink error: unknown private flag 'fullpage-rx' (" + e.port + " has: full-page-rx): Operation not supported"},

		{"unknown command", e.ns, false, []string{"shwo-ring", e.port}, 1,
			"manactl: unknown command \"shwo-ring\" for \"manactl\"\n\nDid you mean this?\n\tshow-ring\nTry 'manactl --help'."},
		{"unknown subcommand", "", false, []string{"port", "dle", "x"}, 1,
			"manactl: unknown command \"dle\" for \"manactl port\"\n\nDid you mean this?\n\tdel\nTry 'manactl port --help'."},

		{"list --netns of a missing namespace", "", false, []string{"list", "--netns", missingNS}, 1,
			"network namespace " + missingNS + " does not exist (ip netns list shows those that do)"},
		{"list --netns of a missing namespace, as a non-admin", "", true, []string{"list", "--netns", missingNS}, 1,
			"network namespace " + missingNS + " does not exist (ip netns list shows those that do)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			argv := append([]string{e.bin}, tc.args...)
			if tc.asUser {
				argv = append(append([]string{}, nobody...), argv...)
			}
			r := run(t, tc.ns, e.socketEnv, argv...)
			assert.Equal(t, tc.code, r.code, "manactl %s: exit %d, stdout %q, stderr %q;\nwant exit %d, stderr %q", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr, tc.code, tc.stderr+"\n")
			assert.Equal(t, "", r.stdout, "manactl %s: exit %d, stdout %q, stderr %q;\nwant exit %d, stderr %q", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr, tc.code, tc.stderr+"\n")
			assert.Equal(t, tc.stderr+"\n", r.stderr, "manactl %s: exit %d, stdout %q, stderr %q;\nwant exit %d, stderr %q", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr, tc.code, tc.stderr+"\n")
		})
	}

	// list --netns of a namespace that exists still succeeds, with or without ports in it.
	assert.Contains(t, ok(t, "list --netns "+e.ns, run(t, "", e.socketEnv, e.bin, "list", "--netns", e.ns)), "\n"+e.port+" ", "list --netns %s", e.ns)
	out := ok(t, "list --netns "+emptyNS, run(t, "", e.socketEnv, e.bin, "list", "--netns", emptyNS))
	assert.Equal(t, 1, strings.Count(out, "\n"), "list --netns of an empty namespace: want the header only, got:\n%s", out)
	assert.True(t, strings.HasPrefix(out, "NAME "), "list --netns of an empty namespace: want the header only, got:\n%s", out)
}

// TestEPERMNamesTheAdminGroup: with admin_group set, a non-admin's refused change names it
// (manad gives its socket that group).
func TestEPERMNamesTheAdminGroup(t *testing.T) {
	dir := worldDir(t)
	ns, port := harness.Name("mhg", ""), harness.Name("mhg", "0")
	const gid = 4242 // no user of the test is in it
	d := harness.Start(t, dir, fmt.Sprintf("admin_group = %d\n", gid),
		fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\npersistent = false\n", port, ns), ns)
	group := fmt.Sprint(gid)
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	bin := manactlIn(t, dir)
	r := run(t, ns, []string{"MANAD_SOCKET=" + d.Socket},
		"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin, "-G", port, "rx", "256")
	want := "netlink error: changes need root or the admin_group (" + group + "): Operation not permitted\n"
	assert.Equal(t, 81, r.code, "-G as a non-admin: exit %d, stderr %q; want 81, %q", r.code, r.stderr, want)
	assert.Equal(t, want, r.stderr, "-G as a non-admin: exit %d, stderr %q; want 81, %q", r.code, r.stderr, want)
	// A member of the group may change the port.
	r = run(t, ns, []string{"MANAD_SOCKET=" + d.Socket},
		"setpriv", "--reuid=65534", "--regid=65534", "--groups="+fmt.Sprint(gid), "--", bin, "-G", port, "rx", "256")
	assert.Equal(t, 0, r.code, "-G as a member of admin_group: exit %d, stderr %q", r.code, r.stderr)
	assert.Equal(t, "", r.stderr, "-G as a member of admin_group: exit %d, stderr %q", r.code, r.stderr)
}
