package manactl

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSettingsSurviveRestart: coalescing set with -C (rx-cqe-frames 8, which cqe_coalesce_8
// allows) and offloads turned off with -K survive a kill -9 and a restart of the real manad, read
// back with -c and -k through manactl and on the TAP itself, and the RSS hash key set with -X
// is in the state file and is the one -x shows after the restart.
func TestSettingsSurviveRestart(t *testing.T) {
	dir := worldDir(t)
	ns := harness.Name("mpn", "")
	port := harness.Name("mps", "0")
	other := harness.Name("mps", "1")
	d := harness.Start(t, dir, "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nqueues = 2\ncqe_coalesce_8 = true\n"+
		"[[port]]\nname = %q\nnetns = %q\npersistent = false\n", port, ns, other, ns), ns)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: ns, socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}
	harness.Run(t, ns, "ip", "link", "set", port, "up")

	type coalesce struct {
		RxUsecs     uint32 `json:"rx-usecs"`
		TxFrames    uint32 `json:"tx-frames"`
		RxCQEFrames uint32 `json:"rx-cqe-frames"`
	}
	getCoalesce := func(when string) coalesce {
		t.Helper()
		var js []coalesce
		err := json.Unmarshal([]byte(ok(t, when+": --json -c", e.mctl(t, "--json", "-c", port))), &js)
		require.NoError(t, err, "%s: --json -c: %v %v", when, js, err)
		require.Len(t, js, 1, "%s: --json -c: %v %v", when, js, err)
		return js[0]
	}
	tso := regexp.MustCompile(`(?m)^tcp-segmentation-offload: (on|off)\b`)
	getTSO := func(when string) string {
		t.Helper()
		m := tso.FindStringSubmatch(ok(t, when+": -k", e.mctl(t, "-k", port)))
		require.NotNil(t, m, "%s: -k shows no tcp-segmentation-offload line", when)
		return m[1]
	}
	if c, f := getCoalesce("at start"), getTSO("at start"); c != (coalesce{RxCQEFrames: 1}) || f != "on" {
		t.Fatalf("at start: coalesce %+v, tso %s; want the defaults", c, f)
	}
	// Without cqe_coalesce_8, 8 is refused with mana_set_coalesce's text.
	r := e.mctl(t, "-C", other, "rx-cqe-frames", "8")
	assert.NotEqual(t, 0, r.code, "-C %s rx-cqe-frames 8 without cqe_coalesce_8: exit %d, stderr %q", other, r.code, r.stderr)
	assert.Contains(t, r.stderr, "rx-frames must be 1 or 4, got 8", "-C %s rx-cqe-frames 8 without cqe_coalesce_8: exit %d, stderr %q", other, r.code, r.stderr)
	want := coalesce{RxUsecs: 100, TxFrames: 20, RxCQEFrames: 8}
	ok(t, "-C", e.mctl(t, "-C", port, "rx-usecs", "100", "tx-frames", "20", "rx-cqe-frames", "8"))
	ok(t, "-K", e.mctl(t, "-K", port, "tso", "off", "gro", "off", "tx", "off", "sg", "off"))
	key := make([]byte, vnic.RSSKeySize)
	parts := make([]string, len(key))
	for i := range key {
		key[i] = byte(0x11 * (i%15 + 1))
		parts[i] = fmt.Sprintf("%02x", key[i])
	}
	ok(t, "-X hkey", e.mctl(t, "-X", port, "hkey", strings.Join(parts, ":")))
	if c, f := getCoalesce("after the changes"), getTSO("after the changes"); c != want || f != "off" {
		t.Fatalf("after the changes: coalesce %+v, tso %s", c, f)
	}

	// The change was saved when it was made: a crash loses nothing.
	d.Kill9()
	stateDir := d.Dir + "/state"
	st, err := config.LoadState(stateDir)
	require.NoError(t, err)
	set := st.Ports[port].Settings
	if set.Coalesce == nil || *set.Coalesce != (config.CoalesceSettings{RxUsecs: 100, TxFrames: 20, RxCQEFrames: 8}) ||
		set.Offload == nil || *set.Offload || set.RSSKey != hex.EncodeToString(key) {
		t.Fatalf("state file settings %+v (coalesce %+v offload %v), want the changes and the key -X set", set, set.Coalesce, set.Offload)
	}

	d.Restart()
	harness.Eventually(t, "the port runs", func() bool {
		return strings.Contains(ok(t, "after restart: -x", e.mctl(t, "-x", port)), "with 2 RX ring(s)")
	})
	if c, f := getCoalesce("after restart"), getTSO("after restart"); c != want || f != "off" {
		t.Errorf("after restart: coalesce %+v, tso %s; want %+v, off", c, f, want)
	}
	// The TAP itself came back without its virtio header (IFF_VNET_HDR 0x4000 clear).
	f := strings.TrimSpace(harness.Run(t, ns, "cat", "/sys/class/net/"+port+"/tun_flags"))
	assert.Equal(t, "0x1902", f, "after restart: tun_flags %s, want 0x1902 (no IFF_VNET_HDR)", f)
	assert.Contains(t, ok(t, "-x", e.mctl(t, "-x", port)), "RSS hash key:\n"+strings.Join(parts, ":")+"\n", "after restart -x does not show the saved key %s", strings.Join(parts, ":"))
}

// TestPortAddAttributes: `manactl port add` passes offload, rx_alloc, rx_recycle and speed to
// PORT_NEW; the reply, PORT_GET (--json list), the TAP and LINKMODES (`manactl DEV`) show them, a
// kill -9 and a restart keep them, and values the configuration file would refuse are refused
// with the file's message.
func TestPortAddAttributes(t *testing.T) {
	dir := worldDir(t)
	ns := harness.Name("mpa", "")
	cfgPort := harness.Name("mpa", "0")
	d := harness.Start(t, dir, "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\npersistent = false\n", cfgPort, ns), ns)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: ns, socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}
	q := harness.Name("mpq", "0")

	check := func(when string, p map[string]any) {
		t.Helper()
		if p == nil || p["offload"] != false || p["rx-alloc"] != "no-pool" || p["rx-recycle"] != false || p["speed"] != 25000.0 {
			t.Errorf("%s: port %v; want offload false, rx-alloc no-pool, rx-recycle false, speed 25000", when, p)
		}
		f := strings.TrimSpace(harness.Run(t, ns, "cat", "/sys/class/net/"+q+"/tun_flags"))
		assert.Equal(t, "0x1902", f, "%s: tun_flags %s, want 0x1902 (no IFF_VNET_HDR)", when, f)
		assert.Contains(t, ok(t, when+": DEV", e.mctl(t, q)), "\tSpeed: 25000Mb/s\n", "%s: manactl %s does not report the speed", when, q)
	}
	var added []map[string]any
	err := json.Unmarshal([]byte(ok(t, "port add", e.mctl(t, "--json", "port", "add", q, "--netns", ns, "--persistent",
		"--offload=false", "--rx-alloc", "no-pool", "--rx-recycle=false", "--speed", "25000"))), &added)
	require.NoError(t, err, "--json port add: %v %v", added, err)
	require.Len(t, added, 1, "--json port add: %v %v", added, err)
	check("the PORT_NEW reply", added[0])
	check("PORT_GET", e.portJSON(t, q))
	if p := e.portJSON(t, cfgPort); p == nil || p["offload"] != true || p["rx-alloc"] != "page-pool-frag" || p["rx-recycle"] != true || p["speed"] != 0.0 {
		t.Errorf("configuration port with the defaults: %v", p)
	}

	d.Kill9()
	d.Restart()
	check("after a restart", e.portJSON(t, q))

	for _, tc := range []struct{ args, want string }{
		{"--rx-alloc slab", `netlink error: port "mpbad0": unknown rx_alloc "slab" (want page-pool-frag, page-pool-page or no-pool): Invalid argument`},
		{"--speed 4294967295", `netlink error: port "mpbad0": speed 4294967295 out of range 0..2147483647 (Mb/s, 0 = unknown): Invalid argument`},
	} {
		fails(t, "port add "+tc.args, e.mctl(t, append([]string{"port", "add", "mpbad0", "--netns", ns}, strings.Fields(tc.args)...)...), tc.want)
	}
	assert.Nil(t, e.portJSON(t, "mpbad0"), "a refused port was created")
	ok(t, "port del", e.mctl(t, "port", "del", q))
}
