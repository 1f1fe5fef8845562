// Package taptest holds helpers for tests that drive real TAPs in real network namespaces: named
// namespaces created with `ip netns add` and removed when the test ends, unique names, and `ip`
// commands run inside a namespace.
package taptest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/internal/testenv"
)

var seq atomic.Int64

// Require skips (or fails in CI) unless the test runs as root on a machine with ip(8) and
// /dev/net/tun.
func Require(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.SkipOrFail(t, "needs ip(8) from iproute2")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		testenv.SkipOrFail(t, "needs /dev/net/tun: %v", err)
	}
}

// Name returns a name unique to this process and call, at most 15 bytes, starting with prefix
// (at most 4 bytes).
func Name(prefix string) string {
	return fmt.Sprintf("%s%d.%d", prefix, os.Getpid()%1000000, seq.Add(1))
}

// NetNS creates a named network namespace with its loopback up and deletes it when the test
// ends.
func NetNS(t testing.TB) string {
	t.Helper()
	name := Name("mtns")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		out, err := exec.Command("ip", "netns", "del", name).CombinedOutput()
		assert.NoError(t, err, "ip netns del %s: %v: %s", name, err, out)
	})
	IP(t, name, "link", "set", "lo", "up")
	return name
}

// IP runs `ip -n ns args...` (plain `ip args...` for ns "") and fails the test on error.
func IP(t testing.TB, ns string, args ...string) string {
	t.Helper()
	out, err := TryIP(ns, args...)
	require.NoError(t, err)
	return out
}

// TryIP runs `ip -n ns args...` and returns its output, or an error with the output.
func TryIP(ns string, args ...string) (string, error) {
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Link is what `ip -j -d link show` reports about a link (the fields tests look at).
type Link struct {
	Index    int      `json:"ifindex"`
	Name     string   `json:"ifname"`
	Flags    []string `json:"flags"`
	MTU      int      `json:"mtu"`
	TxQLen   int      `json:"txqlen"`
	Address  string   `json:"address"`
	Alias    string   `json:"ifalias"`
	LinkInfo struct {
		Kind string `json:"info_kind"`
		Data struct {
			Type        string `json:"type"`
			PI          bool   `json:"pi"`
			VnetHdr     bool   `json:"vnet_hdr"`
			MultiQueue  bool   `json:"multi_queue"`
			NumQueues   int    `json:"numqueues"`
			NumDisabled int    `json:"numdisabled"`
			Persist     bool   `json:"persist"`
		} `json:"info_data"`
	} `json:"linkinfo"`
	Stats64 struct {
		RX struct {
			Packets uint64 `json:"packets"`
			Bytes   uint64 `json:"bytes"`
		} `json:"rx"`
		TX struct {
			Packets uint64 `json:"packets"`
			Bytes   uint64 `json:"bytes"`
		} `json:"tx"`
	} `json:"stats64"`
}

// Up reports whether IFF_UP is among the link's flags.
func (l Link) Up() bool {
	for _, f := range l.Flags {
		if f == "UP" {
			return true
		}
	}
	return false
}

// ShowLink returns iproute2's view of the link, and false when it does not exist.
func ShowLink(t testing.TB, ns, name string) (Link, bool) {
	t.Helper()
	out, err := TryIP(ns, "-j", "-d", "-s", "link", "show", "dev", name)
	if err != nil {
		if strings.Contains(out, "does not exist") {
			return Link{}, false
		}
		t.Fatalf("%v", err)
	}
	var links []Link
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("parse ip -j link show %s: %v: %s", name, err, out)
	}
	return links[0], true
}

// EthtoolFeature returns what `ethtool -k` inside ns shows for the feature named feature of dev
// ("on", "off"; a "[fixed]" after it is left out), failing the test when ethtool fails or does
// not show the feature.
func EthtoolFeature(t testing.TB, ns, dev, feature string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "ethtool", "-k", dev).CombinedOutput()
	require.NoError(t, err, "ethtool -k %s: %v: %s", dev, err, out)
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), feature+":"); ok && len(strings.Fields(v)) > 0 {
			return strings.Fields(v)[0]
		}
	}
	t.Fatalf("ethtool -k %s shows no %s:\n%s", dev, feature, out)
	return ""
}

// InNetNS runs f on an OS thread inside the named namespace, so the sockets f creates (net.Dial,
// net.Listen, unix.Socket) belong to it; they can be used from any goroutine afterwards. The
// thread goes back to the test's namespace when f returns. A failure to enter the namespace fails the test.
func InNetNS(t testing.TB, ns string, f func()) {
	t.Helper()
	nsf, err := os.Open("/run/netns/" + ns)
	require.NoError(t, err, "open netns %s", ns)
	defer nsf.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread goes back to its namespace after f and is unlocked then; a locked
		// goroutine that exits on the main thread would park that thread inside the
		// namespace for good, keeping it alive after ip netns del.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("this thread's netns: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(nsf.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		defer func() {
			if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			errc <- nil
		}()
		f()
	}()
	require.NoError(t, <-errc)
}
