package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/tests/harness"
)

// napiShown is one entry of manactl --json napi show.
type napiShown struct {
	ID                  uint32 `json:"id"`
	Queue               *int   `json:"queue"`
	DeferHardIRQs       uint32 `json:"defer_hard_irqs"`
	GROFlushTimeoutNs   uint64 `json:"gro_flush_timeout_ns"`
	IRQSuspendTimeoutNs uint64 `json:"irq_suspend_timeout_ns"`
	Threaded            bool   `json:"threaded"`
}

// TestNAPISettingsPersist: the real manad and manactl in a namespace. A port starts with its
// file's napi_* keys on every queue; manactl napi set changes one queue's NAPI (napi-set), a
// non-admin is refused with EPERM, a channel change that destroys and recreates the queue
// keeps its settings, and a restart of manad brings them back, as napi-get shows them.
func TestNAPISettingsPersist(t *testing.T) {
	_, ctl := harness.Binaries(t)
	name, ns := harness.Name("mnp", "0"), harness.Name("mnp", "")
	dir, err := os.MkdirTemp("", "manad-napi")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755)) // a non-admin user reaches the socket
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\nmax_queues = 4\n"+
		"rx_ring = 128\ntx_ring = 128\npersistent = false\nnapi_defer_hard_irqs = 2\ngro_flush_timeout = \"20us\"\n", name, ns)
	d := harness.Start(t, dir, "max_pollers = 0\n", ports, ns)
	harness.Run(t, ns, "ip", "link", "set", name, "up")

	show := func() []napiShown {
		t.Helper()
		out := harness.Run(t, ns, ctl, "--socket", d.Socket, "--json", "napi", "show", name)
		var ns []napiShown
		require.NoError(t, json.Unmarshal([]byte(out), &ns), "%s", out)
		return ns
	}
	queues := func(want int) []napiShown {
		t.Helper()
		var got []napiShown
		harness.Eventually(t, fmt.Sprintf("%d NAPIs on %s", want, name), func() bool { got = show(); return len(got) == want })
		for i, n := range got {
			require.NotNil(t, n.Queue, "NAPI %d polls no queue", n.ID)
			require.Equal(t, i, *n.Queue, "NAPIs in queue order")
		}
		return got
	}
	file := napiShown{DeferHardIRQs: 2, GROFlushTimeoutNs: 20_000}
	same := func(t *testing.T, want, got napiShown, what string) {
		t.Helper()
		want.ID, want.Queue = got.ID, got.Queue
		assert.Equal(t, want, got, what)
	}
	for _, n := range queues(2) {
		same(t, file, n, "the file's keys")
	}

	harness.Run(t, ns, ctl, "--socket", d.Socket, "napi", "set", name, "--queue", "1", "--defer-hard-irqs", "7", "--irq-suspend-timeout", "1ms", "--threaded", "on")
	q1 := napiShown{DeferHardIRQs: 7, GROFlushTimeoutNs: 20_000, IRQSuspendTimeoutNs: 1_000_000, Threaded: true}
	got := queues(2)
	same(t, file, got[0], "queue 0 as the file set it")
	same(t, q1, got[1], "queue 1 after napi set")

	out, err := harness.RunErr(ns, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		ctl, "--socket", d.Socket, "napi", "set", name, "--defer-hard-irqs", "0")
	require.Error(t, err, "a non-admin's napi set: %s", out)
	assert.Contains(t, out, "Operation not permitted")
	out, err = harness.RunErr(ns, ctl, "--socket", d.Socket, "napi", "set", name, "--id", "1", "--defer-hard-irqs", "0")
	require.Error(t, err)
	assert.Contains(t, out, "no such file or directory")

	// A channel change destroys queue 1's NAPI and creates a new one: the settings stay.
	old1 := got[1].ID
	harness.Run(t, ns, ctl, "--socket", d.Socket, "set-channels", name, "combined", "1")
	queues(1)
	harness.Run(t, ns, ctl, "--socket", d.Socket, "set-channels", name, "combined", "2")
	got = queues(2)
	assert.NotEqual(t, old1, got[1].ID, "a new NAPI")
	same(t, q1, got[1], "queue 1 after the channel change")

	d.Stop()
	d.Restart()
	harness.Run(t, ns, "ip", "link", "set", name, "up")
	got = queues(2)
	same(t, file, got[0], "queue 0 after the restart")
	same(t, q1, got[1], "queue 1 after the restart")

	text := harness.Run(t, ns, ctl, "--socket", d.Socket, "napi", "show", name)
	assert.True(t, strings.HasPrefix(text, "NAPIs of "+name+":\nID"), "%s", text)
	assert.Contains(t, text, "7                20µs               1ms                  on")
}
