package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// nobody is the unprivileged uid/gid the security tests run clients as.
const nobody = 65534

// portDef is one [[port]] table of a test configuration, with the address its TAP gets ("" for
// none).
type portDef struct{ name, ns, segment, ip string }

// portsTOML renders the [[port]] tables: small rings and few queues, to keep the suite fast on
// two cores; 16K pages, so that a full-page-rx flip really rebuilds the queues (on 4K pages at
// MTU 1500 mana_set_priv_flags keeps them: one buffer per page either way).
func portsTOML(ports []portDef) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "[[port]]\nname = %q\nnetns = %q\nsegment = %q\npage_size = \"16K\"\n"+
			"queues = 4\nmax_queues = 8\nrx_ring = 128\ntx_ring = 128\n\n", p.name, p.ns, p.segment)
	}
	return b.String()
}

// namespaces lists the distinct namespaces of ports.
func namespaces(ports []portDef) []string {
	var out []string
	for _, p := range ports {
		if p.ns != "" && !slices.Contains(out, p.ns) {
			out = append(out, p.ns)
		}
	}
	return out
}

// addressUp gives each port with an ip its /24 address (once) and brings it up.
func addressUp(t *testing.T, ports []portDef) {
	t.Helper()
	for _, p := range ports {
		if p.ip != "" {
			if out, _ := harness.RunErr(p.ns, "ip", "-4", "addr", "show", "dev", p.name); !strings.Contains(out, p.ip+"/") {
				harness.Run(t, p.ns, "ip", "addr", "add", p.ip+"/24", "dev", p.name)
			}
		}
		harness.Run(t, p.ns, "ip", "link", "set", p.name, "up")
	}
}

// settings is the part of a PortInfo a user configures or that says whether the port serves:
// what must not change when a request fails, and what a restart must restore.
type settings struct {
	Name                                        string
	Index                                       uint32
	MTU, Queues, RxRing, TxRing, PrivFlags      uint32
	XDP                                         string
	AdminUp, Running, Detached, ResetPending    bool
	Faults                                      string
	LayoutSingle                                bool
	LayoutBufSize, LayoutFragCount, LayoutAlloc uint32
}

func settingsOf(p *genl.PortInfo) settings {
	return settings{
		Name: p.Device.Name, Index: p.Device.Index,
		MTU: p.MTU, Queues: p.Queues, RxRing: p.RxRing, TxRing: p.TxRing, PrivFlags: p.PrivFlags, XDP: p.XDP,
		AdminUp: p.AdminUp, Running: p.Running, Detached: p.Detached, ResetPending: p.ResetPending,
		Faults:       fmt.Sprint(p.Faults),
		LayoutSingle: p.Layout.Single, LayoutBufSize: p.Layout.BufSize, LayoutFragCount: p.Layout.FragCount,
		LayoutAlloc: p.Layout.AllocSize,
	}
}

// bg is the context of a test's requests: long enough never to be the reason a test fails on a
// slow machine, short enough to turn a hang into a failure.
func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// portInfo reads a port, failing the test on error.
func portInfo(t testing.TB, c *client.Client, name string) *genl.PortInfo {
	t.Helper()
	info, err := c.Port(bg(t), client.Interface{Name: name})
	require.NoError(t, err, "PORT_GET %s", name)
	return info
}

// snapshot reads the settings of every port, each from a client in its namespace.
func snapshot(t testing.TB, clients map[string]*client.Client, ports []portDef) map[string]settings {
	t.Helper()
	out := map[string]settings{}
	for _, p := range ports {
		out[p.name] = settingsOf(portInfo(t, clients[p.ns], p.name))
	}
	return out
}

// statSum adds up the statistics named prefix*suffix.
func statSum(st []genl.Stat, prefix, suffix string) uint64 {
	var n uint64
	for _, s := range st {
		if strings.HasPrefix(s.Name, prefix) && strings.HasSuffix(s.Name, suffix) {
			n += s.Value
		}
	}
	return n
}

// rxPackets is the port's total of rx_<q>_packets.
func rxPackets(t testing.TB, c *client.Client, name string) uint64 {
	t.Helper()
	st, err := c.Stats(bg(t), client.Interface{Name: name})
	require.NoError(t, err, "STATS_GET %s", name)
	return statSum(st, "rx_", "_packets")
}

// errnoOf returns the errno an error from the client carries (0 for none).
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	errors.As(err, &e)
	return e
}

// extackOf returns the extack message of a client error ("" for none).
func extackOf(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	return ""
}

var numQueuesRE = regexp.MustCompile(`numqueues (\d+)`)

// tapState reads a TAP's MTU and number of attached queues as the kernel reports them.
func tapState(t testing.TB, ns, name string) (mtu, queues int) {
	t.Helper()
	out := harness.Run(t, ns, "ip", "-d", "link", "show", "dev", name)
	m := regexp.MustCompile(`mtu (\d+)`).FindStringSubmatch(out)
	q := numQueuesRE.FindStringSubmatch(out)
	require.NotNil(t, m, "cannot read MTU and numqueues of %s from:\n%s", name, out)
	require.NotNil(t, q, "cannot read MTU and numqueues of %s from:\n%s", name, out)
	mtu, _ = strconv.Atoi(m[1])
	queues, _ = strconv.Atoi(q[1])
	return mtu, queues
}

// pingOnce reports whether one ping from ns to ip is answered within a second.
func pingOnce(ns, ip string) bool {
	_, err := harness.RunErr(ns, "ping", "-c", "1", "-W", "1", ip)
	return err == nil
}

// waitPing waits (up to 10 tries) for ns to reach ip.
func waitPing(t testing.TB, ns, ip string) {
	t.Helper()
	for i := 0; i < 10; i++ {
		if pingOnce(ns, ip) {
			return
		}
	}
	t.Fatalf("no ping reply from %s in namespace %s", ip, ns)
}

// asUser runs f on an OS thread that has entered network namespace ns ("" = the test's own) and
// then switched its own credentials (only this thread's: raw setresuid and friends, not the
// process-wide wrappers) to uid, gid and the supplementary groups. Sockets f connects carry those
// credentials (SO_PEERCRED, SO_PEERGROUPS); processes it starts inherit them and the namespace.
// The thread is discarded afterwards.
func asUser(ns string, uid, gid uint32, groups []uint32, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		errc <- func() error {
			if ns != "" {
				h, err := netns.GetFromName(ns)
				if err != nil {
					return fmt.Errorf("netns %s: %w", ns, err)
				}
				defer h.Close()
				if err := netns.Set(h); err != nil {
					return fmt.Errorf("setns %s: %w", ns, err)
				}
			}
			gs := make([]uint32, len(groups)+1) // one spare element, so that &gs[0] exists
			copy(gs, groups)
			if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&gs[0])), 0); e != 0 {
				return fmt.Errorf("setgroups: %w", e)
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
				return fmt.Errorf("setresgid: %w", e)
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
				return fmt.Errorf("setresuid: %w", e)
			}
			return f()
		}()
	}()
	return <-errc
}

// dialAs connects a client to socket from namespace ns with the given credentials.
func dialAs(t testing.TB, socket, ns string, uid, gid uint32, groups []uint32) (*client.Client, error) {
	var c *client.Client
	err := asUser(ns, uid, gid, groups, func() (err error) {
		c, err = client.Dial(socket)
		return err
	})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// peerPID returns the PID of the process serving socket (SO_PEERCRED of a connection to it).
func peerPID(t testing.TB, socket string) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Connect(fd, &unix.SockaddrUnix{Name: socket}), "connect %s", socket)
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	require.NoError(t, err)
	return int(cred.Pid)
}

// openFDs counts the open file descriptors of process pid.
func openFDs(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return len(ents)
}

// poll waits up to timeout for cond, polling every 10ms; it reports whether cond became true.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// rig is a running manad with its ports addressed and up, and a root client in each namespace.
type rig struct {
	d       *harness.Daemon
	ports   []portDef
	clients map[string]*client.Client // by namespace
}

// startRig starts manad (harness.Start) with ports, gives them their addresses and brings them
// up. extraNS are more namespaces to delete at the end.
func startRig(t *testing.T, dir, daemonExtra string, ports []portDef, extraNS ...string) *rig {
	t.Helper()
	r := &rig{ports: ports}
	r.d = harness.Start(t, dir, daemonExtra, portsTOML(ports), append(namespaces(ports), extraNS...)...)
	addressUp(t, ports)
	r.connect(t)
	return r
}

// connect (re)opens the root clients, e.g. after a restart.
func (r *rig) connect(t *testing.T) {
	t.Helper()
	r.clients = map[string]*client.Client{}
	for _, ns := range namespaces(r.ports) {
		r.clients[ns] = r.d.Client(ns)
	}
}

// port returns the client of the port's namespace and the port's name as an Interface.
func (r *rig) port(name string) (*client.Client, client.Interface) {
	for _, p := range r.ports {
		if p.name == name {
			return r.clients[p.ns], client.Interface{Name: name}
		}
	}
	panic("no port " + name)
}

func (r *rig) snapshot(t testing.TB) map[string]settings { return snapshot(t, r.clients, r.ports) }

// openDir returns a new directory (removed at the end of the test) that every user may enter,
// for a socket the unprivileged clients must reach; t.TempDir's directories are 0700.
func openDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "manad-rel-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}
