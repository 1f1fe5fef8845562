package manactl

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// netdevEvent is one line of `manactl --json monitor --netdev` about the netdev family.
type netdevEvent struct {
	Kind     string `json:"kind"`
	Seq      uint32 `json:"seq"`
	IfIndex  int    `json:"ifindex"`
	PagePool *struct {
		ID          uint64 `json:"id"`
		Ifindex     uint32 `json:"ifindex"`
		NAPIID      uint64 `json:"napi_id"`
		Inflight    uint64 `json:"inflight"`
		InflightMem uint64 `json:"inflight_mem"`
		DetachTime  uint64 `json:"detach_time"`
	} `json:"page-pool"`
	Dev *struct {
		Ifindex uint32 `json:"ifindex"`
	} `json:"dev"`
}

// netdevEvents parses a JSON monitor's output, keeping the netdev family's lines.
func netdevEvents(t *testing.T, out string) []netdevEvent {
	t.Helper()
	var evs []netdevEvent
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var e netdevEvent
		require.NoError(t, json.Unmarshal([]byte(l), &e), "monitor line %q", l)
		if strings.HasPrefix(e.Kind, "page-pool-") || strings.HasPrefix(e.Kind, "dev-") {
			evs = append(evs, e)
		}
	}
	return evs
}

// TestMonitorNetdevPagePools: the real manactl monitor --netdev against the real daemon, in the
// port's namespace. Bringing the port up announces one page-pool-add per queue (ifindex, no NAPI,
// nothing in flight, as mana_create_rxq's page_pool_create); flipping full-page-rx on an idle
// port (no frame arrives, so no buffer is out) announces a page-pool-del per old pool, without
// detach-time (page_pool_destroy unlists an idle pool at once), then an add per new pool; down,
// a del per pool. Exactly those, in that order, seq 0, and no page-pool-change and no
// dev-change (mana's xdp-features never change).
func TestMonitorNetdevPagePools(t *testing.T) {
	e := startE2E(t)
	ifi, err := strconv.Atoi(strings.TrimSpace(harness.Run(t, e.ns, "cat", "/sys/class/net/"+e.port+"/ifindex")))
	require.NoError(t, err)
	m := startMonitor(t, e.ns, e.socketEnv, e.bin, "--json", "monitor", "--netdev")
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "up")
	pools := func() []uint64 {
		var ps []pool
		e.jsonOf(t, &ps, "page-pools", e.port)
		var ids []uint64
		for _, p := range ps {
			require.Equal(t, uint64(0), p.DetachTime, "a pool of an idle port is detached: %+v", ps)
			ids = append(ids, p.ID)
		}
		slices.Sort(ids)
		return ids
	}
	harness.Eventually(t, "the port's pools", func() bool { return len(pools()) == int(e.queues) })
	old := pools()
	m.waitFor(t, fmt.Sprintf(`"kind":"page-pool-add","seq":0,"ifname":"","ifindex":%d,"page-pool":{"id":%d,`, ifi, old[len(old)-1]))

	ok(t, "--set-priv-flags", e.mctl(t, "--set-priv-flags", e.port, "full-page-rx", "on"))
	cur := pools()
	require.Len(t, cur, int(e.queues), "pools after full-page-rx %v, want %d new ones (old %v)", cur, e.queues, old)
	require.False(t, slices.Contains(cur, old[0]), "pools after full-page-rx %v, want %d new ones (old %v)", cur, e.queues, old)
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "down")
	harness.Eventually(t, "no pool while down", func() bool { return len(pools()) == 0 })
	m.waitFor(t, fmt.Sprintf(`"kind":"page-pool-del","seq":0,"ifname":"","ifindex":%d,"page-pool":{"id":%d,`, ifi, cur[len(cur)-1]))
	out := m.stop(t)

	type want struct {
		kind string
		id   uint64
	}
	var wants []want
	for _, step := range []struct {
		kind string
		ids  []uint64
	}{{"page-pool-add", old}, {"page-pool-del", old}, {"page-pool-add", cur}, {"page-pool-del", cur}} {
		for _, id := range step.ids {
			wants = append(wants, want{step.kind, id})
		}
	}
	evs := netdevEvents(t, out)
	require.Len(t, evs, len(wants), "%d netdev notifications, want %d (%v):\n%s", len(evs), len(wants), wants, out)
	for i, ev := range evs {
		p := ev.PagePool
		if ev.Kind != wants[i].kind || p == nil || p.ID != wants[i].id || ev.Seq != 0 || ev.IfIndex != ifi ||
			p.Ifindex != uint32(ifi) || p.NAPIID != 0 || p.Inflight != 0 || p.InflightMem != 0 || p.DetachTime != 0 {
			t.Errorf("notification %d: %+v %+v, want %s of pool %d on ifindex %d, no NAPI, nothing in flight, no detach time",
				i, ev, p, wants[i].kind, wants[i].id, ifi)
		}
	}
}

// TestMonitorNetdevPortLifecycle: `manactl port add` (which brings the port up) and `port del`
// seen by the real manactl monitor --netdev: the dev add first, as register_netdevice comes
// before the open whose page pools announce themselves, then one page-pool-add per queue; at
// the delete a page-pool-del per pool (nothing in flight), then the dev del. Exactly those.
func TestMonitorNetdevPortLifecycle(t *testing.T) {
	e := startE2E(t)
	m := startMonitor(t, e.ns, e.socketEnv, e.bin, "--json", "monitor", "--netdev")
	q := harness.Name("mcl", "0")
	ok(t, "port add", e.mctl(t, "port", "add", q, "--netns", e.ns, "--queues", "3"))
	ifi, err := strconv.Atoi(strings.TrimSpace(harness.Run(t, e.ns, "cat", "/sys/class/net/"+q+"/ifindex")))
	require.NoError(t, err)
	var ps []pool
	harness.Eventually(t, "the new port's pools", func() bool {
		e.jsonOf(t, &ps, "page-pools", q)
		return len(ps) == 3
	})
	ids := []uint64{ps[0].ID, ps[1].ID, ps[2].ID}
	slices.Sort(ids)
	ok(t, "port del", e.mctl(t, "port", "del", q))
	m.waitFor(t, fmt.Sprintf(`"kind":"dev-del","seq":0,"ifname":"","ifindex":%d,`, ifi))
	evs := netdevEvents(t, m.stop(t))
	var got []string
	for _, ev := range evs {
		switch {
		case ev.Dev != nil:
			got = append(got, fmt.Sprintf("%s %d", ev.Kind, ev.Dev.Ifindex))
		case ev.PagePool != nil:
			p := ev.PagePool
			got = append(got, fmt.Sprintf("%s %d %d napi=%d inflight=%d detach=%d", ev.Kind, p.ID, p.Ifindex, p.NAPIID, p.Inflight, p.DetachTime))
		}
	}
	want := []string{fmt.Sprintf("dev-add %d", ifi)}
	for _, id := range ids {
		want = append(want, fmt.Sprintf("page-pool-add %d %d napi=0 inflight=0 detach=0", id, ifi))
	}
	for _, id := range ids {
		want = append(want, fmt.Sprintf("page-pool-del %d %d napi=0 inflight=0 detach=0", id, ifi))
	}
	want = append(want, fmt.Sprintf("dev-del %d", ifi))
	assert.True(t, slices.Equal(got, want), "netdev notifications\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
}

// TestMonitorNetdevKernel: manactl --kernel monitor --netdev subscribes to the kernel's own
// netdev family: a veth pair created and deleted in the namespace shows as the kernel's dev-add
// and dev-del of both ends (seq 0, as manad's).
func TestMonitorNetdevKernel(t *testing.T) {
	e := startE2E(t)
	m := startMonitor(t, e.ns, e.socketEnv, e.bin, "--kernel", "--json", "monitor", "--netdev")
	a, b := harness.Name("mkv", "0"), harness.Name("mkv", "1")
	harness.Run(t, e.ns, "ip", "link", "add", a, "type", "veth", "peer", "name", b)
	var ifis []int
	for _, n := range []string{a, b} {
		ifi, err := strconv.Atoi(strings.TrimSpace(harness.Run(t, e.ns, "cat", "/sys/class/net/"+n+"/ifindex")))
		require.NoError(t, err)
		ifis = append(ifis, ifi)
	}
	harness.Run(t, e.ns, "ip", "link", "del", a)
	for _, ifi := range ifis {
		for _, kind := range []string{"dev-add", "dev-del"} {
			m.waitFor(t, fmt.Sprintf(`"kind":%q,"seq":0,"ifname":"","ifindex":%d,"dev":{"dev":`, kind, ifi))
		}
	}
	m.stop(t)
}

// TestMonitorNetdevNoDevChange: XDP attach and detach, an MTU change and set-channels rebuild
// the port's queues, but change nothing dev-get shows (mana's xdp-features are fixed at probe,
// so the kernel's NETDEV_XDP_FEAT_CHANGE never fires for it): no dev notification at all, and
// every pool seen is added once and deleted once (down at the end).
func TestMonitorNetdevNoDevChange(t *testing.T) {
	e := startE2E(t)
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "up")
	harness.Eventually(t, "the port's pools", func() bool {
		var ps []pool
		e.jsonOf(t, &ps, "page-pools", e.port)
		return len(ps) == int(e.queues)
	})
	var before []pool
	e.jsonOf(t, &before, "page-pools", e.port)
	m := startMonitor(t, e.ns, e.socketEnv, e.bin, "--json", "monitor", "--netdev")
	for _, args := range [][]string{
		{"xdp", e.port, "attach", "pass"}, {"set-mtu", e.port, "1400"}, {"xdp", e.port, "detach"}, {"-L", e.port, "combined", "2"},
	} {
		ok(t, args[0], e.mctl(t, args...))
	}
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "down")
	var last []pool
	harness.Eventually(t, "no pool while down", func() bool {
		e.jsonOf(t, &last, "page-pools", e.port)
		return len(last) == 0
	})
	// The last rebuild's pools (2 queues) are deleted by the down; wait for as many dels as
	// pools were ever added, plus the initial ones.
	count := func(out, kind string) int { return strings.Count(out, `"kind":"`+kind+`"`) }
	harness.Eventually(t, "every pool's del", func() bool {
		out := m.output()
		return count(out, "page-pool-del") == count(out, "page-pool-add")+len(before)
	})
	out := m.stop(t)
	adds, dels := map[uint64]int{}, map[uint64]int{}
	for _, p := range before {
		adds[p.ID]++
	}
	for _, ev := range netdevEvents(t, out) {
		switch ev.Kind {
		case "page-pool-add":
			adds[ev.PagePool.ID]++
		case "page-pool-del":
			dels[ev.PagePool.ID]++
		default:
			t.Errorf("unexpected %s: %+v", ev.Kind, ev)
		}
	}
	assert.GreaterOrEqual(t, len(adds), len(before)+2, "only %d pools seen: the rebuilds made no new ones", len(adds))
	for id, n := range adds {
		if n != 1 || dels[id] != 1 {
			t.Errorf("pool %d: %d adds, %d dels; want one each", id, n, dels[id])
		}
	}
	for id := range dels {
		assert.NotEqual(t, 0, adds[id], "del of pool %d, never added nor listed", id)
	}
}
