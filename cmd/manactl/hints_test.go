package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
)

// TestUnknownCommandSuggests: a misspelt command, at the top or in a group, is a usage error that
// names the closest commands (cobra's suggestions); a word close to none names none.
func TestUnknownCommandSuggests(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		args    []string
		problem string
		suggest []string // nil: no "Did you mean this?"
		hint    string
	}{
		{[]string{"shwo-ring", "eth0"}, `unknown command "shwo-ring" for "manactl"`, []string{"show-ring"}, "manactl"},
		{[]string{"lst"}, `unknown command "lst" for "manactl"`, []string{"list"}, "manactl"},
		{[]string{"set-ringg", "eth0", "rx", "1"}, `unknown command "set-ringg" for "manactl"`, []string{"set-ring"}, "manactl"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "manactl"`, nil, "manactl"},
		{[]string{"port", "ad", "p0"}, `unknown command "ad" for "manactl port"`, []string{"add"}, "manactl port"},
		{[]string{"segment", "shwo", "s"}, `unknown command "shwo" for "manactl segment"`, []string{"show"}, "manactl segment"},
		{[]string{"segment", "uplink", "dell"}, `unknown command "dell" for "manactl segment uplink"`, []string{"del"}, "manactl segment uplink"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(t, sock, tc.args...)
			want := "manactl: " + tc.problem + "\n"
			if tc.suggest != nil {
				want += "\nDid you mean this?\n\t" + strings.Join(tc.suggest, "\n\t") + "\n"
			}
			want += "Try '" + tc.hint + " --help'.\n"
			assert.Equal(t, exitUsage, code, "exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, out, errs, exitUsage, want)
			assert.Equal(t, "", out, "exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, out, errs, exitUsage, want)
			assert.Equal(t, want, errs, "exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, out, errs, exitUsage, want)
		})
	}
}

// TestErrorLineHints: how the hint errors print, and that they keep the exit status of the error
// they explain.
func TestErrorLineHints(t *testing.T) {
	enodev := &client.Error{Errno: unix.ENODEV, Message: "no device matches name"}
	tests := []struct {
		name string
		cmd  string
		err  error
		line string
		code int
	}{
		{"kernel error, manad down", "show-ring", &kernelError{&client.Error{Errno: unix.EOPNOTSUPP}, "/run/x.sock"},
			"netlink error: Operation not supported\nmanad is not running at /run/x.sock", 1},
		{"kernel error, manad up", "show-ring", &kernelError{enodev, ""},
			"netlink error: no device matches name: No such device", 1},
		{"kernel error keeps set-ring's status", "set-ring", &kernelError{enodev, "/s"},
			"netlink error: no device matches name: No such device\nmanad is not running at /s", 81},
		{"stats ioctl error, manad down", "stats", &kernelError{&errnoError{"Cannot get stats strings information", unix.ENODEV, failStatsStrings}, "/s"},
			"Cannot get stats strings information: No such device\nmanad is not running at /s", 96},
		{"netns hint keeps set-ring's status", "set-ring", &hintError{"p is a manad port in netns n: run …", enodev},
			"p is a manad port in netns n: run …", 81},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.line, errorLine(tc.err), "errorLine")
			assert.Equal(t, tc.code, exitStatus(tc.cmd, tc.err), "exitStatus")
		})
	}
}

func TestShellJoin(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-g", "mana0"}, "-g mana0"},
		{[]string{"--socket=/run/m.sock", "set-priv-flags", "mana0", "full-page-rx", "on"}, "--socket=/run/m.sock set-priv-flags mana0 full-page-rx on"},
		{[]string{"xdp", "mana0", "attach", "my prog.o"}, "xdp mana0 attach 'my prog.o'"},
		{[]string{"a'b", ""}, `'a'\''b' ''`},
		{[]string{"$(rm)", "x;y"}, `'$(rm)' 'x;y'`},
	}
	for _, tc := range tests {
		got := shellJoin(tc.args)
		assert.Equal(t, tc.want, got, "shellJoin(%q)", tc.args)
		// A shell reads it back as the arguments.
		out, err := exec.Command("sh", "-c", `eval "set -- $0"; for a in "$@"; do printf '[%s]' "$a"; done`, got).Output()
		assert.NoError(t, err, "sh reading %q back", got)
		assert.Equal(t, "["+strings.Join(tc.args, "][")+"]", string(out), "sh reads %q back as", got)
	}
}

func TestConfigFlag(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/bin/manad"}, ""},
		{[]string{"manad", "--config", "/etc/manad/manad.toml"}, "/etc/manad/manad.toml"},
		{[]string{"manad", "-config", "a.toml", "--log-level", "debug"}, "a.toml"},
		{[]string{"manad", "--config=/x.toml"}, "/x.toml"},
		{[]string{"manad", "--log-level", "debug", "--config"}, ""},
		{[]string{"manad", "--", "--config", "x"}, ""},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, configFlag(tc.argv), "configFlag(%q)", tc.argv)
	}
}

// TestAdminGroupHint: the group is learnt from the socket's group, else from the listener's
// --config (here the test binary, which has none: the embedded default), else manactl says where
// it is configured.
func TestAdminGroupHint(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "m.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	defer l.Close()
	check := func(what, got, want string) {
		t.Helper()
		assert.Equal(t, want, got, "%s", what)
	}
	a := &app{socket: sock}
	var st unix.Stat_t
	require.NoError(t, unix.Stat(sock, &st))
	if st.Gid == 0 {
		check("a listener without --config", a.adminGroupHint(),
			"none: manad runs its embedded default configuration; set admin_group in the [daemon] table of a --config file")
	}
	if os.Geteuid() == 0 {
		// manad sets its socket's group to admin_group.
		require.NoError(t, os.Chown(sock, -1, 4242))
		want := "4242"
		if g, err := user.LookupGroupId("4242"); err == nil {
			want = g.Name
		}
		check("the socket's group", a.adminGroupHint(), want)
	}
	a.socket = filepath.Join(dir, "none.sock")
	check("no listener", a.adminGroupHint(), "admin_group in the [daemon] table of manad's configuration file")
	check("gid 0", groupName(0), "root")
}

// TestEPERMHint: manad's bare EPERM (the admin check) becomes the root-or-admin_group hint for a
// caller that is not root, and only then: root's EPERM is something else (manad itself refused),
// an EPERM with manad's own message keeps it, and the kernel's EPERM is not manad's to explain.
func TestEPERMHint(t *testing.T) {
	a := &app{socket: filepath.Join(t.TempDir(), "none.sock")}
	cmd := &cobra.Command{Use: "set-ring"}
	bare := &client.Error{Errno: unix.EPERM}
	want := "netlink error: changes need root or the admin_group (admin_group in the [daemon] table of manad's configuration file): Operation not permitted"
	if os.Geteuid() == 0 {
		want = "netlink error: Operation not permitted"
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"manad's bare EPERM", failed(bare), want},
		{"manad's EPERM with a message", failed(&client.Error{Errno: unix.EPERM, Message: "netns busy"}), "netlink error: netns busy: Operation not permitted"},
		{"the kernel's EPERM", failed(&kernelError{bare, ""}), "netlink error: Operation not permitted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := a.withHints(context.Background(), cmd, tc.err)
			assert.Equal(t, tc.want, errorLine(got), "errorLine")
			assert.ErrorIs(t, got, unix.EPERM, "the hint lost the error it explains: %v, exit %d", got, exitStatus("set-ring", got))
			assert.Equal(t, 81, exitStatus("set-ring", got), "the hint lost the error it explains: %v, exit %d", got, exitStatus("set-ring", got))
		})
	}
}

func TestConfigAdminGroup(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		toml string
		want string
		err  bool
	}{
		{"[daemon]\nsocket = \"/x\"\n", "", false},
		{"", "", false},
		{"[daemon]\nadmin_group = \"netdev\"\n", "netdev", false},
		{"[daemon]\nadmin_group = 0\n", "root", false},
		{"[daemon]\nadmin_group = \"0\"\n", "root", false},
		{"[daemon]\nadmin_group = 4242\n[[port]]\nname = \"mana0\"\n", groupName(4242), false},
		{"[daemon]\nadmin_group = true\n", "", true},
		{"[daemon\n", "", true},
	}
	for i, tc := range tests {
		path := filepath.Join(dir, fmt.Sprintf("%d.toml", i))
		require.NoError(t, os.WriteFile(path, []byte(tc.toml), 0o644))
		got, err := configAdminGroup(path)
		assert.Equal(t, tc.want, got, "%q: %q, %v; want %q, error %v", tc.toml, got, err, tc.want, tc.err)
		assert.Equal(t, tc.err, err != nil, "%q: %q, %v; want %q, error %v", tc.toml, got, err, tc.want, tc.err)
	}
	_, err := configAdminGroup(filepath.Join(dir, "missing.toml"))
	assert.Error(t, err, "a missing file: no error")
}

// TestNetNSExists: list --netns accepts manad's own namespace and any that ip netns knows; a name
// that is not one, or cannot be one, is an error that says how to list them.
func TestNetNSExists(t *testing.T) {
	for _, ns := range []string{"-", ""} {
		assert.NoError(t, netnsExists(ns), "netnsExists(%q)", ns)
	}
	for _, ns := range []string{"mctl-no-such-netns", "a/b", "..", "."} {
		err := netnsExists(ns)
		want := "network namespace " + ns + " does not exist (ip netns list shows those that do)"
		if assert.Error(t, err, "netnsExists(%q)", ns) {
			assert.Equal(t, want, errorLine(err), "netnsExists(%q)", ns)
			assert.ErrorIs(t, err, unix.ENOENT, "netnsExists(%q)", ns)
		}
	}
	if ents, err := os.ReadDir(netnsDir); err == nil && len(ents) > 0 {
		assert.NoError(t, netnsExists(ents[0].Name()), "netnsExists(%q), listed in %s", ents[0].Name(), netnsDir)
	}
}
