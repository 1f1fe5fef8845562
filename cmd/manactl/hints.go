package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
)

// Errors that point at the fix (issue 28): where a bare errno leaves a newcomer guessing, manactl
// says what to do. Each hint keeps the error it explains (errors.Is/As see through it), so the
// exit status stays ethtool's for the same failure.

// hintError prints as line instead of the error it wraps.
type hintError struct {
	line string
	err  error
}

func (e *hintError) Error() string { return e.line }
func (e *hintError) Unwrap() error { return e.err }

// kernelError is the answer of the kernel's ethtool netlink to a request ethtoolDo sent there.
// When manad was not running (manadDown is its socket), a failure prints the kernel's error and
// then "manad is not running at PATH": the kernel's "Operation not supported" for a manad port's
// TAP says nothing of the daemon that would have answered.
type kernelError struct {
	err       error
	manadDown string
}

func (e *kernelError) Error() string { return e.err.Error() }
func (e *kernelError) Unwrap() error { return e.err }

// fromKernel reports whether err is the kernel's answer rather than manad's.
func fromKernel(err error) bool {
	var ke *kernelError
	return errors.As(err, &ke)
}

// withHints replaces a runtime error of cmd by one that says how to fix it, when manactl can
// tell: a device that is a manad port in another network namespace (ENODEV), a change manad
// refused to a caller that is not root (EPERM without an extack message: the admin check; root
// can only get an EPERM manad itself met, which says nothing of root or the group). Other errors
// are returned as they are.
func (a *app) withHints(ctx context.Context, cmd *cobra.Command, err error) error {
	switch {
	case errors.Is(err, unix.ENODEV):
		if args := cmd.Flags().Args(); len(args) > 0 {
			if h := a.netnsHint(ctx, args[0], err); h != nil {
				return h
			}
		}
	case errors.Is(err, unix.EPERM) && !fromKernel(err) && os.Geteuid() != 0:
		var ce *client.Error
		if errors.As(err, &ce) && ce.Message == "" {
			what := "changes need"
			if strings.HasPrefix(commandName(cmd), "capture") {
				what = "capture needs"
			}
			return &hintError{"netlink error: " + what + " root or the admin_group (" + a.adminGroupHint() + "): " +
				strerror(unix.EPERM), err}
		}
	}
	return err
}

// commandName is cmd's path without "manactl ", e.g. "set-ring" or "port add".
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// netnsHint returns the error "DEV is a manad port in netns NS: run ip netns exec NS manactl
// ARGS…" (ARGS: manactl's arguments; err's exit status) when dev, which the caller's namespace
// does not have, is a manad port in another named namespace; nil when manactl cannot tell (manad
// not running, or the caller may only see its own namespace's ports, as a non-admin does).
// manad's port list (list) knows every port's namespace: it is asked only once a lookup failed.
func (a *app) netnsHint(ctx context.Context, dev string, err error) error {
	c, derr := client.Dial(a.socket)
	if derr != nil {
		return nil
	}
	defer c.Close()
	ports, perr := c.Ports(ctx)
	if perr != nil {
		return nil
	}
	var self unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &self) != nil {
		return nil
	}
	here := wire.NetNS{Dev: self.Dev, Ino: self.Ino}
	for _, p := range ports {
		if p.Device.Name == dev && p.Device.NetNS != here && p.NetNSName != "" {
			return &hintError{fmt.Sprintf("%s is a manad port in netns %s: run ip netns exec %s manactl %s",
				dev, p.NetNSName, p.NetNSName, shellJoin(a.argv)), err}
		}
	}
	return nil
}

// shellJoin joins args into a command line a shell reads back as args.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, s := range args {
		if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@+%") == "" {
			q[i] = s
		} else {
			q[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// adminGroupHint says which group may make changes besides root, as far as manactl can learn it:
// the group of manad's socket (manad sets it to admin_group), else admin_group in the
// configuration file manad was started with (its --config, read from /proc/PID/cmdline of the
// socket's peer), else where admin_group is configured.
func (a *app) adminGroupHint() string {
	const where = "admin_group in the [daemon] table of manad's configuration file"
	var st unix.Stat_t
	if unix.Stat(a.socket, &st) == nil && st.Gid != 0 {
		return groupName(int(st.Gid))
	}
	pid := peerPID(a.socket)
	if pid <= 0 {
		return where
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return where
	}
	path := configFlag(strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"))
	if path == "" {
		return "none: manad runs its embedded default configuration; set admin_group in the [daemon] table of a --config file"
	}
	group, err := configAdminGroup(path)
	switch {
	case err != nil:
		return "admin_group in the [daemon] table of " + path
	case group == "":
		return "none is configured: set admin_group in the [daemon] table of " + path
	}
	return group
}

// configAdminGroup reads admin_group from the [daemon] table of the configuration file at path:
// the group's name ("" when none is set; a gid, as a number or a string of digits, is named when
// the group has a name). manactl reads the key itself rather than with manad's configuration
// package: it talks to manad only through genl, and needs nothing else of the file.
func configAdminGroup(path string) (string, error) {
	var f struct {
		Daemon struct {
			AdminGroup any `toml:"admin_group"`
		} `toml:"daemon"`
	}
	if _, err := toml.DecodeFile(path, &f); err != nil {
		return "", err
	}
	switch g := f.Daemon.AdminGroup.(type) {
	case nil:
		return "", nil
	case int64:
		return groupName(int(g)), nil
	case string:
		if gid, err := strconv.Atoi(g); err == nil {
			return groupName(gid), nil
		}
		return g, nil
	default:
		return "", fmt.Errorf("%s: admin_group is neither a group name nor a gid", path)
	}
}

// groupName is the name of group gid, or its number when it has none.
func groupName(gid int) string {
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

// peerPID is the process ID of whoever listens on the socket at path (SO_PEERCRED), 0 if unknown
// (in another PID namespace, say).
func peerPID(path string) int {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return 0
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var cred *unix.Ucred
	if cerr := rc.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); cerr != nil || err != nil {
		return 0
	}
	return int(cred.Pid)
}

// configFlag is the value of manad's --config in its argv ("" when not given).
func configFlag(argv []string) string {
	path := ""
	for i := 1; i < len(argv); i++ {
		switch a := argv[i]; {
		case a == "--":
			return path
		case a == "--config" || a == "-config":
			if i+1 < len(argv) {
				path = argv[i+1]
				i++
			}
		case strings.HasPrefix(a, "--config="), strings.HasPrefix(a, "-config="):
			path = a[strings.Index(a, "=")+1:]
		}
	}
	return path
}

// privFlagHint turns the "bit name not found" a SET of private flags got (EOPNOTSUPP) into the
// name that was not found and the device's valid ones, read from the same server (manad or the
// kernel) as ETH_SS_PRIV_FLAGS. It returns err as it is when it cannot tell.
func privFlagHint(ctx context.Context, c *client.Client, dev string, asked []client.Flag, err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) || !errors.Is(err, unix.EOPNOTSUPP) || ce.Message != "bit name not found" {
		return err
	}
	ss, serr := c.StringSets(ctx, &client.Interface{Name: dev}, []uint32{ethtool.SSPrivFlags}, false)
	if serr != nil {
		return err
	}
	var valid []string
	for _, s := range ss.Sets {
		if s.ID == ethtool.SSPrivFlags {
			valid = s.Strings
		}
	}
	for _, f := range asked {
		if slices.Contains(valid, f.Name) {
			continue
		}
		msg := fmt.Sprintf("unknown private flag '%s' (%s has none)", f.Name, dev)
		if len(valid) > 0 {
			msg = fmt.Sprintf("unknown private flag '%s' (%s has: %s)", f.Name, dev, strings.Join(valid, ", "))
		}
		return &client.Error{Errno: ce.Errno, Message: msg, Offset: ce.Offset}
	}
	return err
}

// unknownCommand is the usage error for a word that is not one of cmd's subcommands, with cobra's
// suggestions of the closest ones (Levenshtein distance ≤ SuggestionsMinimumDistance, or a prefix).
func unknownCommand(cmd *cobra.Command, word string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "unknown command %q for %q", word, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which only its own lookup sets
	}
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		b.WriteString("\n\nDid you mean this?\n")
		for _, n := range s {
			fmt.Fprintf(&b, "\t%s\n", n)
		}
		return errors.New(strings.TrimSuffix(b.String(), "\n"))
	}
	return errors.New(b.String())
}
