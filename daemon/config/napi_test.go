package config

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic"
)

// TestParseNAPIKeys: a port's napi_defer_hard_irqs, gro_flush_timeout and irq_suspend_timeout
// (a duration string, or nanoseconds as sysfs takes them) set every queue's NAPI settings; values
// out of range or of the wrong type are refused with file:line and the key.
func TestParseNAPIKeys(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
		want       vnic.NAPIConfig
		wrong      string // "" when accepted; else what the message says
	}{
		{"none", "", vnic.NAPIConfig{}, ""},
		{"all three", "napi_defer_hard_irqs = 2\ngro_flush_timeout = \"20us\"\nirq_suspend_timeout = \"1ms\"",
			vnic.NAPIConfig{DeferHardIRQs: 2, GROFlushTimeout: 20 * time.Microsecond, IRQSuspendTimeout: time.Millisecond}, ""},
		{"nanoseconds", "gro_flush_timeout = 20000", vnic.NAPIConfig{GROFlushTimeout: 20 * time.Microsecond}, ""},
		{"defer max", fmt.Sprintf("napi_defer_hard_irqs = %d", math.MaxInt32), vnic.NAPIConfig{DeferHardIRQs: math.MaxInt32}, ""},
		{"defer negative", "napi_defer_hard_irqs = -1", vnic.NAPIConfig{}, "test.toml:4: port \"p\": napi_defer_hard_irqs -1 out of range 0..2147483647"},
		{"defer beyond s32", "napi_defer_hard_irqs = 2147483648", vnic.NAPIConfig{}, "test.toml:4: port \"p\": napi_defer_hard_irqs 2147483648 out of range"},
		{"defer a string", "napi_defer_hard_irqs = \"2\"", vnic.NAPIConfig{}, "napi_defer_hard_irqs must be an integer"},
		{"gro negative", "gro_flush_timeout = \"-1us\"", vnic.NAPIConfig{}, "test.toml:4: port \"p\": gro_flush_timeout \"-1us\" out of range: must not be negative"},
		{"gro not a duration", "gro_flush_timeout = \"soon\"", vnic.NAPIConfig{}, "gro_flush_timeout \"soon\" is not a duration"},
		{"irq-suspend a bool", "irq_suspend_timeout = true", vnic.NAPIConfig{}, "irq_suspend_timeout must be a duration string"},
		{"misspelt", "gro_flush_timeot = \"1us\"", vnic.NAPIConfig{}, "did you mean \"gro_flush_timeout\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("test.toml", []byte("[[port]]\nname = \"p\"\nqueues = 2\n"+tc.keys+"\n"))
			if tc.wrong != "" {
				require.ErrorIs(t, err, unix.EINVAL)
				assert.Contains(t, err.Error(), tc.wrong)
				return
			}
			require.NoError(t, err)
			p, _ := cfg.Port("p")
			assert.Equal(t, tc.want, p.NAPI)
			for q, c := range p.NAPIConfigs(3) {
				assert.Equal(t, tc.want, c, "queue %d", q)
			}
		})
	}
}

// TestParseMaxPollers: [daemon] max_pollers takes 0 up to the CPUs manad may use but one;
// anything else is refused with file:line; without the key, the data path's default.
func TestParseMaxPollers(t *testing.T) {
	allowed := max(0, min(runtime.NumCPU(), runtime.GOMAXPROCS(0))-1)
	cfg, err := Parse("test.toml", []byte("[daemon]\n"))
	require.NoError(t, err)
	assert.Equal(t, DefaultMaxPollers, cfg.Daemon.MaxPollers)
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, true}, {allowed, true}, {allowed + 1, false}, {-1, false}} {
		cfg, err := Parse("test.toml", []byte(fmt.Sprintf("[daemon]\nmax_pollers = %d\n", tc.n)))
		if tc.ok {
			require.NoError(t, err, "max_pollers %d", tc.n)
			assert.Equal(t, tc.n, cfg.Daemon.MaxPollers)
			continue
		}
		require.ErrorIs(t, err, unix.EINVAL, "max_pollers %d", tc.n)
		assert.Contains(t, err.Error(), fmt.Sprintf("test.toml:2: daemon: max_pollers %d out of range 0..%d", tc.n, allowed))
	}
	dc := DefaultDaemonConfig()
	dc.MaxPollers = allowed + 1
	require.ErrorIs(t, dc.Validate(), unix.EINVAL)
}

// TestNAPIStateRoundTrip: the per-queue NAPI settings survive Save and LoadState in their
// compact form (the common value and the queues that differ), and Merge gives each queue index
// back its own, over the file's keys; nothing is recorded while every queue has the zero value
// and the file gives none, so that the file's keys still apply.
func TestNAPIStateRoundTrip(t *testing.T) {
	cfg, err := Parse("c.toml", []byte("[[port]]\nname = \"a\"\nmax_queues = 4\nnapi_defer_hard_irqs = 3\n[[port]]\nname = \"b\"\n"))
	require.NoError(t, err)
	a, _ := cfg.Port("a")
	b, _ := cfg.Port("b")
	q2 := vnic.NAPIConfig{DeferHardIRQs: 9, GROFlushTimeout: 3 * time.Second, IRQSuspendTimeout: time.Millisecond, Threaded: true}
	perQueue := []vnic.NAPIConfig{{}, {}, q2, {}}

	psA := NewPortSettings(a.Settings, true)
	psA.SetNAPI(perQueue, a.NAPI)
	require.NotNil(t, psA.NAPI)
	assert.Equal(t, NAPIValues{}, psA.NAPI.All, "the value most queues have")
	require.Len(t, psA.NAPI.Queues, 1)
	assert.Equal(t, 2, psA.NAPI.Queues[0].Queue)

	psB := NewPortSettings(b.Settings, false)
	psB.SetNAPI(make([]vnic.NAPIConfig, 64), b.NAPI)
	assert.Nil(t, psB.NAPI, "all zero, no file keys: nothing to record")

	dir := t.TempDir()
	st := NewState()
	st.RecordSettings("a", psA)
	st.RecordSettings("b", psB)
	require.NoError(t, st.Save(dir))
	got, err := LoadState(dir)
	require.NoError(t, err)
	assert.Equal(t, st, got, "LoadState(Save(s))")

	ports, notes := Merge(cfg, got)
	require.Empty(t, notes)
	require.Len(t, ports, 2)
	assert.Equal(t, perQueue, ports[0].Spec.NAPIConfigs(4), "port a: each queue index's own, not the file's 3")
	assert.Equal(t, make([]vnic.NAPIConfig, 2), ports[1].Spec.NAPIConfigs(2))

	// A hand-edited file with a queue out of range is corrupt.
	bad := NewState()
	psBad := psA.clone()
	psBad.NAPI.Queues[0].Queue = maxNAPIQueues
	bad.RecordSettings("a", psBad)
	require.NoError(t, bad.Save(dir))
	_, err = LoadState(dir)
	require.ErrorIs(t, err, unix.EBADMSG)
	assert.Contains(t, err.Error(), "napi: queue 256 out of range 0..255")
}
