// Package scenarios runs the user scenarios of issue 6 against the real manad and manactl
// binaries in network namespaces, with traffic generated in Go: a forwarding appliance
// (seed 002), a 64K-page host (seed 001), many TCP streams across queues (seed 000) and the
// shipped udev rule. Each test's doc comment names the seed thread it comes from
// (/work/shared/seeds/).
//
// Every test needs root (testenv.RequireRoot: a skip for a developer, a failure under CI=true).
// Rates are reported with t.Logf, never asserted; BenchmarkForwarding reports them as metrics.
package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// Constants of the upstream RX buffer rule that the expected layouts are computed from
// (mana_get_rxbuf_cfg after the headroom fix of seed 002).
const (
	rxBufPad = 334 // MANA_RXBUF_PAD: SKB_DATA_ALIGN(sizeof(struct skb_shared_info)) + ETH_HLEN
	headroom = 256 // LL_RESERVED_SPACE of a MANA port: what ip_forward's skb_cow asks for
)

// fragsPerPage is how many MTU-sized buffers the upstream rule carves from one page: PAGE_SIZE /
// ALIGN(SKB_DATA_ALIGN(mtu + MANA_RXBUF_PAD + headroom), 64) — 31 for MTU 1500 on 64K pages,
// 7 on 16K pages (and 1, i.e. single-buffer, on 4K pages).
func fragsPerPage(pageSize, mtu int) int {
	buf := (mtu + rxBufPad + headroom + 63) / 64 * 64
	return pageSize / buf
}

// portInfo returns a port's state through the Go client.
func portInfo(t testing.TB, c *client.Client, port string) *genl.PortInfo {
	t.Helper()
	info, err := c.Port(context.Background(), client.Interface{Name: port})
	require.NoError(t, err, "port %s", port)
	return info
}

// setFlag turns full-page-rx on or off (ETHTOOL_MSG_PRIVFLAGS_SET) and fails the test on error.
func setFlag(t testing.TB, c *client.Client, port string, on bool) {
	t.Helper()
	err := c.SetPrivateFlags(context.Background(), client.PrivateFlags{
		Interface: client.Interface{Name: port}, Flags: []client.Flag{{Name: "full-page-rx", On: on}},
	})
	require.NoError(t, err, "set full-page-rx %v on %s", on, port)
}

// stats returns a port's driver statistics (ethtool -S) by name.
func stats(t testing.TB, c *client.Client, port string) map[string]uint64 {
	t.Helper()
	st, err := c.Stats(context.Background(), client.Interface{Name: port})
	require.NoError(t, err, "stats %s", port)
	m := make(map[string]uint64, len(st))
	for _, s := range st {
		m[s.Name] = s.Value
	}
	return m
}

var perQueueStat = regexp.MustCompile(`^(rx|tx)_(\d+)_(packets|bytes)$`)

// perQueue extracts the per-queue counters dir_<q>_what ("rx", "packets") indexed by queue.
func perQueue(m map[string]uint64, dir, what string) []uint64 {
	var out []uint64
	for k, v := range m {
		sm := perQueueStat.FindStringSubmatch(k)
		if sm == nil || sm[1] != dir || sm[3] != what {
			continue
		}
		q, _ := strconv.Atoi(sm[2])
		for len(out) <= q {
			out = append(out, 0)
		}
		out[q] = v
	}
	return out
}

// total sums the per-queue counters dir_<q>_what.
func total(m map[string]uint64, dir, what string) uint64 {
	var n uint64
	for _, v := range perQueue(m, dir, what) {
		n += v
	}
	return n
}

// rxBufJSON is what `manactl --json show-rxbuf DEV` prints for one port (the fields the
// scenarios check; the names are manactl's documented JSON names).
type rxBufJSON struct {
	IfName string `json:"ifname"`
	Layout struct {
		Rule          string `json:"rule"`
		PageSize      uint32 `json:"page-size"`
		MTU           uint32 `json:"mtu"`
		FullPageRx    bool   `json:"full-page-rx"`
		Mode          string `json:"mode"`
		Reason        string `json:"reason"`
		Headroom      uint32 `json:"headroom"`
		FragCount     uint32 `json:"frag-count"`
		RingSize      uint32 `json:"ring-size"`
		Queues        uint32 `json:"queues"`
		PagesPerQueue uint32 `json:"pages-per-queue"`
		BytesPerQueue uint64 `json:"bytes-per-queue"`
		BytesTotal    uint64 `json:"bytes-total"`
	} `json:"layout"`
	PagesPinned     uint64 `json:"pages-pinned"`
	BytesPinned     uint64 `json:"bytes-pinned"`
	BuffersInFlight uint64 `json:"buffers-in-flight"`
}

// manactlRun runs the real manactl inside ns against d and returns its output; it fails the test
// when manactl fails. The harness builds manactl with -race, whose runtime sleeps a second before
// a successful exit (GORACE atexit_sleep_ms, default 1000) unless told otherwise.
func manactlRun(t testing.TB, d *harness.Daemon, ns string, args ...string) string {
	t.Helper()
	_, manactl := harness.Binaries(t)
	argv := append([]string{"env", "GORACE=atexit_sleep_ms=0", manactl, "--socket", d.Socket}, args...)
	out, err := harness.RunErr(ns, argv...)
	require.NoError(t, err, "manactl %s: %v\n%s", strings.Join(args, " "), err, out)
	return out
}

// showRxBuf runs the real `manactl --json show-rxbuf port` inside ns against d.
func showRxBuf(t testing.TB, d *harness.Daemon, ns, port string) rxBufJSON {
	t.Helper()
	out := manactlRun(t, d, ns, "--json", "show-rxbuf", port)
	var v []rxBufJSON
	err := json.Unmarshal([]byte(out), &v)
	require.NoError(t, err, "manactl --json show-rxbuf %s: %v\n%s", port, err, out)
	require.Len(t, v, 1, "manactl --json show-rxbuf %s: %v\n%s", port, err, out)
	return v[0]
}

// snmpCounter reads one counter of /proc/net/snmp ("Ip", "ForwDatagrams") inside ns.
func snmpCounter(t testing.TB, ns, proto, name string) uint64 {
	t.Helper()
	out := harness.Run(t, ns, "cat", "/proc/net/snmp")
	var header []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != proto+":" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, h := range header {
			if h == name && i < len(f) {
				v, err := strconv.ParseUint(f[i], 10, 64)
				require.NoError(t, err, "/proc/net/snmp %s %s: %q", proto, name, f[i])
				return v
			}
		}
	}
	t.Fatalf("/proc/net/snmp in %s has no %s %s:\n%s", ns, proto, name, out)
	return 0
}

// deltas returns after-before per queue.
func deltas(before, after []uint64) []uint64 {
	out := make([]uint64, len(after))
	for i := range after {
		out[i] = after[i]
		if i < len(before) {
			out[i] -= before[i]
		}
	}
	return out
}

// nonZero counts the non-zero entries.
func nonZero(v []uint64) int {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	return n
}

// median of a non-empty slice.
func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mode names a layout for messages.
func mode(single bool) string {
	if single {
		return "full-page"
	}
	return "fragment"
}

// portTOML is one [[port]] table.
func portTOML(name, ns, segment string, extra ...string) string {
	s := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = %q\npersistent = false\n", name, ns, segment)
	for _, e := range extra {
		s += e + "\n"
	}
	return s
}

// sysfsCounter reads one of dev's kernel statistics (/sys/class/net/DEV/statistics/NAME) inside
// ns, where ip netns exec mounts that namespace's sysfs.
func sysfsCounter(t testing.TB, ns, dev, name string) uint64 {
	t.Helper()
	out := strings.TrimSpace(harness.Run(t, ns, "cat", "/sys/class/net/"+dev+"/statistics/"+name))
	v, err := strconv.ParseUint(out, 10, 64)
	require.NoError(t, err, "%s statistics/%s in %s: %q", dev, name, ns, out)
	return v
}
