package manactl

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/manad/manad/internal/testenv"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckConfigTAPName: manad --check-config refuses a port name the TAP would refuse (a
// '%' template, which the kernel's own devices may use), with the file and line, rather than
// passing the check and failing at start in tap.Open (issue 27).
func TestCheckConfigTAPName(t *testing.T) {
	manad, _ := harness.Binaries(t)
	conf := filepath.Join(t.TempDir(), "manad.toml")
	require.NoError(t, os.WriteFile(conf, []byte("[[port]]\nname = \"eth%d\"\n"), 0o644))
	r := run(t, "", nil, manad, "--config", conf, "--check-config")
	assert.NotEqual(t, 0, r.code, "manad --check-config accepted eth%%d: %+v", r)
	assert.Contains(t, r.stderr, conf+`:2: port "eth%d": name "eth%d" is not a valid interface name (no '/', ':', '%' or whitespace)`)
	assert.NotContains(t, r.stdout, "OK")
}

// TestRxBufPlanPageSizeUnits: manactl reads a page size as the configuration file does, so
// rxbuf-plan takes "4KiB" as page_size = "4KiB" is taken (issue 27).
func TestRxBufPlanPageSizeUnits(t *testing.T) {
	_, manactl := harness.Binaries(t)
	env := []string{"MANAD_SOCKET=" + filepath.Join(t.TempDir(), "no-manad.sock")}
	for _, size := range []string{"4KiB", "4K", "4096"} {
		r := run(t, "", env, manactl, "rxbuf-plan", "--page-size", size, "--mtu", "1500")
		assert.Equal(t, 0, r.code, "rxbuf-plan --page-size %s: %+v", size, r)
		assert.Contains(t, r.stdout, "page size 4096, MTU 1500", "rxbuf-plan --page-size %s", size)
	}
	r := run(t, "", env, manactl, "rxbuf-plan", "--page-size", "4MiB", "--mtu", "1500")
	assert.NotEqual(t, 0, r.code, "rxbuf-plan --page-size 4MiB accepted: %+v", r)
}

// TestPortSchemaLive: the real manad reports a configuration file's port keys in the port reply
// as the file gave them (manactl --json list, whose keys are the file's in kebab case), the NAPI
// ones reach every NAPI (napi show), and a restart keeps them (issue 27: port schema; the
// napi_threaded key is the port attribute added through it).
func TestPortSchemaLive(t *testing.T) {
	testenv.RequireRoot(t)
	_, ctl := harness.Binaries(t)
	dir := worldDir(t)
	name, ns := harness.Name("mps", "0"), harness.Name("mps", "")
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\nmax_queues = 4\n"+
		"rx_ring = 128\ntx_ring = 128\npersistent = false\nrule = \"pre-frag\"\ncqe_coalesce_8 = true\n"+
		"rx_cqe_frames = 8\nrx_recycle = false\nnapi_threaded = true\nnapi_defer_hard_irqs = 3\n"+
		"gro_flush_timeout = \"20us\"\n", name, ns)
	d := harness.Start(t, dir, "max_pollers = 0\n", ports, ns)
	harness.Run(t, ns, "ip", "link", "set", name, "up")
	want := map[string]any{
		"rule": "pre-frag", "cqe-coalesce-8": true, "rx-cqe-frames": 8, "rx-recycle": false,
		"napi-threaded": true, "napi-defer-hard-irqs": 3, "gro-flush-timeout": 20000, "irq-suspend-timeout": 0,
	}
	check := func(when string) {
		t.Helper()
		out := harness.Run(t, ns, ctl, "--socket", d.Socket, "--json", "list")
		var list []map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(out), &list), "%s", out)
		require.Len(t, list, 1, "%s", out)
		for k, v := range want {
			b, _ := json.Marshal(v)
			assert.JSONEq(t, string(b), string(list[0][k]), "%s: %s", when, k)
		}
		var co struct {
			RxCQEFrames uint32 `json:"rx-cqe-frames"`
		}
		require.NoError(t, json.Unmarshal(list[0]["coalesce"], &co), "%s", out)
		assert.Equal(t, uint32(8), co.RxCQEFrames, "%s: coalesce", when)
		var key string
		require.NoError(t, json.Unmarshal(list[0]["rss-hash-key"], &key))
		assert.Len(t, key, 40*3-1, "%s: rss-hash-key %q", when, key)

		var napis []struct {
			DeferHardIRQs uint32 `json:"defer_hard_irqs"`
			Threaded      bool   `json:"threaded"`
		}
		harness.Eventually(t, "2 NAPIs on "+name, func() bool {
			out := harness.Run(t, ns, ctl, "--socket", d.Socket, "--json", "napi", "show", name)
			return json.Unmarshal([]byte(out), &napis) == nil && len(napis) == 2
		})
		for i, n := range napis {
			assert.True(t, n.Threaded, "%s: NAPI %d not threaded", when, i)
			assert.Equal(t, uint32(3), n.DeferHardIRQs, "%s: NAPI %d", when, i)
		}
	}
	check("at start")
	d.Stop()
	d.Restart()
	harness.Run(t, ns, "ip", "link", "set", name, "up")
	check("after a restart")
}

// TestMSIXVectorsLive: a port whose adapter has 4 MSI-X vectors has at most 3 queues in the real
// manad (mana_gd_query_max_resources: one vector is the hardware channel's): show-channels
// reports that maximum, set-channels beyond it is refused with the ethtool core's message,
// --json list shows the key, and a restart keeps it. It is the config key added through the
// port schema in issue 27's step (one vnic rule, one schema row, one wire row, the doc).
func TestMSIXVectorsLive(t *testing.T) {
	testenv.RequireRoot(t)
	_, ctl := harness.Binaries(t)
	dir := worldDir(t)
	name, ns := harness.Name("mmx", "0"), harness.Name("mmx", "")
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\nmax_queues = 8\n"+
		"msix_vectors = 4\nrx_ring = 128\ntx_ring = 128\npersistent = false\n", name, ns)
	d := harness.Start(t, dir, "max_pollers = 0\n", ports, ns)
	check := func(when string) {
		t.Helper()
		out := harness.Run(t, ns, ctl, "--socket", d.Socket, "show-channels", name)
		assert.Regexp(t, `(?s)Pre-set maximums:.*Combined:\s+3\n.*Current hardware settings:.*Combined:\s+2\n`, out, when)
		out = harness.Run(t, ns, ctl, "--socket", d.Socket, "--json", "list")
		var list []map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(out), &list), "%s", out)
		require.Len(t, list, 1, "%s", out)
		assert.JSONEq(t, "4", string(list[0]["msix-vectors"]), "%s: msix-vectors", when)
	}
	check("at start")
	r := run(t, ns, nil, ctl, "--socket", d.Socket, "set-channels", name, "combined", "4")
	assert.NotEqual(t, 0, r.code, "set-channels combined 4 accepted with 4 vectors: %+v", r)
	assert.Contains(t, r.stderr, "requested channel count exceeds maximum")
	harness.Run(t, ns, ctl, "--socket", d.Socket, "set-channels", name, "combined", "3")
	d.Stop()
	d.Restart()
	out := harness.Run(t, ns, ctl, "--socket", d.Socket, "show-channels", name)
	assert.Regexp(t, `(?s)Current hardware settings:.*Combined:\s+3\n`, out, "after a restart")
	check2 := harness.Run(t, ns, ctl, "--socket", d.Socket, "--json", "list")
	assert.Contains(t, check2, `"msix-vectors": 4`, "after a restart")
}
