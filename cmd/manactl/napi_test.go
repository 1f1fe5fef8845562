package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/wire"
)

// TestWriteNAPIs: napi show's table (timeouts as durations, "-" for a NAPI no queue names) and
// its JSON (nanoseconds, no queue when none).
func TestWriteNAPIs(t *testing.T) {
	ns := []napiInfo{
		{NetdevNAPI: wire.NetdevNAPI{ID: 8193, Ifindex: 7, DeferHardIRQs: 100, GROFlushTimeout: uint64(200 * time.Microsecond)}, Queue: 0},
		{NetdevNAPI: wire.NetdevNAPI{ID: 8194, Ifindex: 7, IRQSuspendTimeout: uint64(20 * time.Millisecond),
			Threaded: wire.NetdevNAPIThreadedEnabled}, Queue: -1},
	}
	var b bytes.Buffer
	writeNAPIs(&b, "mana0", ns)
	assert.Equal(t, "NAPIs of mana0:\n"+
		"ID    QUEUE  DEFER-HARD-IRQS  GRO-FLUSH-TIMEOUT  IRQ-SUSPEND-TIMEOUT  THREADED\n"+
		"8193  0      100              200µs              0s                   off\n"+
		"8194  -      0                0s                 20ms                 on\n", b.String())
	j, err := json.Marshal(napisToJSON("mana0", ns))
	require.NoError(t, err)
	assert.JSONEq(t, `[{"dev":"mana0","ifindex":7,"id":8193,"queue":0,"defer_hard_irqs":100,"gro_flush_timeout_ns":200000,"irq_suspend_timeout_ns":0,"threaded":false},
		{"dev":"mana0","ifindex":7,"id":8194,"defer_hard_irqs":0,"gro_flush_timeout_ns":0,"irq_suspend_timeout_ns":20000000,"threaded":true}]`, string(j))

	// A device that is down has no NAPI: one line that says why and what to do, not a bare header.
	b.Reset()
	writeNAPIs(&b, "mana0", nil)
	assert.Equal(t, "NAPIs of mana0: none (a device that is down has none; ip link set mana0 up)\n", b.String())
}

// TestNAPISetUsage: napi set's command line is checked before anything is sent: a usage error and
// what is wrong.
func TestNAPISetUsage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"napi"}, "napi needs a subcommand: show or set"},
		{[]string{"napi", "frob"}, `unknown command "frob"`},
		{[]string{"napi", "show"}, "napi show needs a device name"},
		{[]string{"napi", "set", "lo"}, "napi set: nothing to change"},
		{[]string{"napi", "set", "lo", "--queue", "1", "--id", "8193", "--defer-hard-irqs", "1"}, "--queue and --id name the NAPI two ways"},
		{[]string{"napi", "set", "lo", "--defer-hard-irqs", "2147483648"}, "invalid --defer-hard-irqs 2147483648 (want 0..2147483647)"},
		{[]string{"napi", "set", "lo", "--defer-hard-irqs", "-1"}, "invalid argument"},
		{[]string{"napi", "set", "lo", "--gro-flush-timeout", "-1us"}, "invalid --gro-flush-timeout '-1us'"},
		{[]string{"napi", "set", "lo", "--irq-suspend-timeout", "soon"}, "invalid --irq-suspend-timeout 'soon'"},
		{[]string{"napi", "set", "lo", "--threaded", "yes"}, "invalid --threaded 'yes' (want on or off)"},
		{[]string{"napi", "set", "lo", "--queue", "-1", "--threaded", "on"}, "invalid --queue or --id"},
	} {
		code, out, errs := runCLI(t, sock, tc.args...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errs, tc.msg, "%v", tc.args)
	}
	d, err := parseNAPITimeout("x", "20000")
	require.NoError(t, err)
	assert.Equal(t, 20*time.Microsecond, d, "an integer is nanoseconds, as sysfs")
}
