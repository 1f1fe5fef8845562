package genl_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary doubles as a client "agent" run in another process, to
// get a peer with other credentials (uid 65534) or another network
// namespace: SO_PEERCRED and /proc/<pid>/ns/net describe a process, so an
// in-process goroutine cannot stand in for it.
const agentEnv = "GENL_TEST_AGENT_SOCK"

const activationEnv = "GENL_TEST_ACTIVATION"

func TestMain(m *testing.M) {
	if path := os.Getenv(agentEnv); path != "" {
		os.Exit(runAgent(path))
	}
	if os.Getenv(activationEnv) != "" {
		// systemd sets LISTEN_PID to the child's pid, unknown before exec.
		os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
		l, err := transport.ActivationListener()
		if err != nil {
			fmt.Println("err", err)
			os.Exit(1)
		}
		fmt.Println("ok", l.Addr().Network(), l.Addr().String())
		os.Exit(0)
	}
	// Every server, connection and subscription goroutine must be gone
	// when the tests end.
	goleak.VerifyTestMain(m)
}

// TestActivationListener passes a SOCK_SEQPACKET listener as fd 3 with
// LISTEN_FDS=1, as systemd does, and finds it with ActivationListener.
func TestActivationListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "act.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	defer l.Close()
	f, err := l.File()
	require.NoError(t, err)
	defer f.Close()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), activationEnv+"=1", "LISTEN_FDS=1")
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.Output()
	assert.NoError(t, err, "child: %q", out)
	assert.Equal(t, "ok unixpacket "+path, strings.TrimSpace(string(out)), "child")
	_, err = transport.ActivationListener()
	assert.ErrorIs(t, err, unix.ENOENT, "without activation")
}

// runAgent serves line commands on stdin, one reply line each on stdout.
func runAgent(path string) int {
	c, err := client.Dial(path)
	if err != nil {
		fmt.Println("err dial", err)
		return 1
	}
	defer c.Close()
	ctx := context.Background()
	var sub *client.Subscription
	errno := func(err error) string {
		var e unix.Errno
		if errors.As(err, &e) {
			return strconv.Itoa(int(e))
		}
		if err != nil {
			return "?" + strings.ReplaceAll(err.Error(), " ", "_")
		}
		return "0"
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		var out string
		switch f[0] {
		case "netns":
			var st unix.Stat_t
			if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
				out = "err " + err.Error()
			} else {
				out = fmt.Sprintf("ok %d %d", st.Dev, st.Ino)
			}
		case "get": // get DEV → ok INDEX | err ERRNO
			p, err := c.PrivateFlags(ctx, client.Interface{Name: f[1]})
			if err != nil {
				out = "err " + errno(err)
			} else {
				out = fmt.Sprintf("ok %d", p.Interface.Index)
			}
		case "ports":
			ps, err := c.Ports(ctx)
			var names []string
			for _, p := range ps {
				names = append(names, p.Device.Name)
			}
			out = fmt.Sprintf("ok %s %s", errno(err), strings.Join(names, ","))
		case "admin": // every admin operation on DEV, with its errno
			dev := client.Interface{Name: f[1]}
			u := uint32(2048)
			res := []string{
				"SetPrivateFlags=" + errno(c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: dev, Flags: []client.Flag{{Name: "full-page-rx", On: true}}})),
				"SetRings=" + errno(c.SetRings(ctx, dev, client.RingsUpdate{Rx: &u})),
				"SetChannels=" + errno(c.SetChannels(ctx, dev, client.ChannelsUpdate{Combined: &[]uint32{2}[0]})),
				"SetMTU=" + errno(c.SetMTU(ctx, dev, 4000)),
				"AttachXDP=" + errno(c.AttachXDP(ctx, dev, genl.XDPProgram{Builtin: "drop"})),
				"DetachXDP=" + errno(c.DetachXDP(ctx, dev)),
				"SetFault=" + errno(c.SetFault(ctx, dev, genl.Fault{Point: "attach", Mode: "once"})),
				"CreatePort=" + errno(func() error { _, err := c.CreatePort(ctx, genl.PortSpec{Name: "new0"}); return err }()),
				"DeletePort=" + errno(c.DeletePort(ctx, dev)),
			}
			out = "ok " + strings.Join(res, " ")
		case "set-extack": // SetPrivateFlags on DEV → ok ERRNO MSGLEN OFFSET
			err := c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: client.Interface{Name: f[1]},
				Flags: []client.Flag{{Name: "full-page-rx", On: true}}})
			var ce *client.Error
			if errors.As(err, &ce) {
				out = fmt.Sprintf("ok %s %d %d", errno(err), len(ce.Message), ce.Offset)
			} else {
				out = "ok " + errno(err) + " -1 -1"
			}
		case "subscribe":
			sub, err = c.Subscribe(ctx)
			out = "ok " + errno(err)
		case "next":
			tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			ns, err := sub.Next(tctx)
			cancel()
			if err != nil || len(ns) == 0 {
				out = "err " + errno(err)
			} else {
				out = fmt.Sprintf("ok %s %d %d", ns[0].Kind, ns[0].Interface.Index, ns[0].Sequence)
			}
		case "quit":
			return 0
		default:
			out = "err unknown command"
		}
		fmt.Println(out)
	}
	return 0
}

type agent struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startAgent runs the test binary as an agent with the given process
// attributes. The binary is copied to a world-readable place so that other
// uids can execute it.
func startAgent(t *testing.T, path string, attr *syscall.SysProcAttr) *agent {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "genl-agent")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "agent.test")
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), agentEnv+"="+path)
	cmd.SysProcAttr = attr
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "start agent")
	a := &agent{t: t, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		fmt.Fprintln(stdin, "quit")
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return a
}

// do sends a command and returns the reply fields after "ok".
func (a *agent) do(cmdline string) []string {
	a.t.Helper()
	if _, err := fmt.Fprintln(a.stdin, cmdline); err != nil {
		a.t.Fatal(err)
	}
	if !a.out.Scan() {
		a.t.Fatalf("agent died during %q: %v", cmdline, a.out.Err())
	}
	f := strings.Fields(a.out.Text())
	if len(f) == 0 || f[0] != "ok" {
		a.t.Fatalf("agent %q: %s", cmdline, a.out.Text())
	}
	return f[1:]
}

// TestUnprivilegedPeer: every SET/NEW/DEL/attach/fault request from uid
// 65534 fails with EPERM and changes nothing; GETs work.
func TestUnprivilegedPeer(t *testing.T) {
	requireRoot(t)
	ts := startServer(t, nil)
	a := startAgent(t, ts.path, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}})

	if got := a.do("get mana0"); got[0] != strconv.Itoa(int(ts.mana0.Dev.Index)) {
		t.Errorf("GET as nobody: %v", got)
	}
	// EPERM carries no extack, like the kernel's GENL_UNS_ADMIN_PERM check.
	if got := a.do("set-extack mana0"); got[0] != strconv.Itoa(int(unix.EPERM)) || got[1] != "0" || got[2] != "0" {
		t.Errorf("EPERM reply: errno %s, message length %s, offset %s; want EPERM without extack", got[0], got[1], got[2])
	}
	res := a.do("admin mana0")
	require.Len(t, res, 9, "admin results")
	for _, r := range res {
		assert.True(t, strings.HasSuffix(r, "="+strconv.Itoa(int(unix.EPERM))), "%s, want EPERM", r)
	}
	assert.Empty(t, ts.be.Calls(), "backend changed by an unprivileged peer")
	if d := ts.be.Dev(ts.mana0.Dev.Index); d == nil || d.Flags != 0 {
		t.Errorf("mana0 after EPERM: %+v", d)
	}
}

// TestAdminGroupPeer: a non-root peer whose supplementary groups contain the
// configured admin group is an admin (SO_PEERGROUPS).
func TestAdminGroupPeer(t *testing.T) {
	requireRoot(t)
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.AdminGroup = 4242 })
	a := startAgent(t, ts.path, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{4242}}})
	res := a.do("admin mana0")
	for _, r := range res {
		name, v, _ := strings.Cut(r, "=")
		assert.NotEqual(t, strconv.Itoa(int(unix.EPERM)), v, "%s: EPERM for a member of the admin group", name)
	}
	assert.NotEmpty(t, ts.be.Calls(), "no backend call from an admin-group peer")
}

// TestCallerNetNS: lookups, dumps and notifications are scoped by the
// caller's network namespace.
func TestCallerNetNS(t *testing.T) {
	requireRoot(t)
	ts := startServer(t, nil)
	a := startAgent(t, ts.path, &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNET})
	f := a.do("netns")
	dev, _ := strconv.ParseUint(f[0], 10, 64)
	ino, _ := strconv.ParseUint(f[1], 10, 64)
	theirs := genl.NetNS{Dev: dev, Ino: ino}
	require.NotEqual(t, ts.ns, theirs, "agent is in the test's netns")

	// Before the agent's netns has devices: mana0 is not there.
	if out := a.do("ports"); len(out) != 1 || out[0] != "0" {
		t.Errorf("ports in an empty netns: %v", out)
	}
	if _, err := fmt.Fprintln(a.stdin, "get mana0"); err != nil {
		t.Fatal(err)
	}
	a.out.Scan()
	assert.Equal(t, "err "+strconv.Itoa(int(unix.ENODEV)), a.out.Text(), "get mana0 from another netns")

	their0 := ts.be.AddPort(theirs, "mana0")
	if got := a.do("get mana0"); got[0] != strconv.Itoa(int(their0.Dev.Index)) {
		t.Errorf("agent's mana0 index %v, want %d", got, their0.Dev.Index)
	}
	out := a.do("ports")
	assert.Equal(t, "mana0", out[1], "agent's ports: %v", out)

	a.do("subscribe")
	// A change in our netns first, then one in theirs: the agent's first
	// notification must be the second.
	c := dialClient(t, ts.path)
	require.NoError(t, c.SetPrivateFlags(ctxT(t), client.PrivateFlags{Interface: client.Interface{Name: "mana0"},
		Flags: []client.Flag{{Name: "full-page-rx", On: true}}}))
	ts.srv.NotifyChannels(their0.Dev, genl.Channels{CombinedMax: 4, Combined: 1})
	if got := a.do("next"); got[0] != "channels" || got[1] != strconv.Itoa(int(their0.Dev.Index)) {
		t.Errorf("agent's first notification: %v", got)
	}
}
