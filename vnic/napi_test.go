package vnic

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestNAPIConfigBounds: SetNAPIConfig takes napi-set's ranges (defer-hard-irqs 0..S32_MAX,
// timeouts ≥ 0) for a queue index below the port's maximum, and refuses anything else with
// EINVAL and a message naming the field, leaving the queue's settings as they were.
func TestNAPIConfigBounds(t *testing.T) {
	tp := newTestPort(t, func(c *Config, s *Settings) { c.MaxQueues = 8 })
	prev := NAPIConfig{DeferHardIRQs: 7, GROFlushTimeout: time.Microsecond}
	for _, tc := range []struct {
		name  string
		q     int
		c     NAPIConfig
		wrong string // "" when accepted; else a word of the message
	}{
		{"zero", 0, NAPIConfig{}, ""},
		{"all set", 3, NAPIConfig{DeferHardIRQs: 2, GROFlushTimeout: 20 * time.Microsecond, IRQSuspendTimeout: time.Second, Threaded: true}, ""},
		{"defer max", 7, NAPIConfig{DeferHardIRQs: math.MaxInt32}, ""},
		{"defer beyond s32", 1, NAPIConfig{DeferHardIRQs: math.MaxInt32 + 1}, "defer-hard-irqs"},
		{"gro negative", 1, NAPIConfig{GROFlushTimeout: -1}, "gro-flush-timeout"},
		{"irq-suspend negative", 1, NAPIConfig{IRQSuspendTimeout: -time.Nanosecond}, "irq-suspend-timeout"},
		{"queue negative", -1, NAPIConfig{}, "queue -1"},
		{"queue at max", 8, NAPIConfig{}, "queue 8 out of range 0..7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := max(tc.q, 0) % 8
			require.NoError(t, tp.SetNAPIConfig(q, prev))
			err := tp.SetNAPIConfig(tc.q, tc.c)
			if tc.wrong == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.c, tp.NAPIConfig(tc.q))
				return
			}
			require.ErrorIs(t, err, unix.EINVAL)
			assert.Contains(t, err.Error(), tc.wrong)
			assert.Equal(t, prev, tp.NAPIConfig(q), "a refused change leaves the settings")
		})
	}
	assert.Equal(t, NAPIConfig{}, tp.NAPIConfig(8), "beyond the maximum: the zero value")
}

// TestNAPIConfigPerQueueIndex: a queue's settings outlive its NAPI, as the kernel's
// napi_config: a channel change that removes queue 3 and brings it back (with a new NAPI id)
// finds them, and napi-get's view carries them; SetNAPIConfigAll sets every index.
func TestNAPIConfigPerQueueIndex(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	c := NAPIConfig{DeferHardIRQs: 100, GROFlushTimeout: 50 * time.Microsecond}
	require.NoError(t, tp.SetNAPIConfig(3, c))
	before := tp.NAPIs()
	require.Len(t, before, 4)
	assert.Equal(t, c, before[3].Config)
	assert.Equal(t, NAPIConfig{}, before[2].Config)

	tp.mustLocked("SetChannels 2", func() error { return tp.SetChannels(2) })
	require.Len(t, tp.NAPIs(), 2)
	assert.Equal(t, c, tp.NAPIConfig(3), "kept while queue 3 does not run")
	tp.mustLocked("SetChannels 4", func() error { return tp.SetChannels(4) })
	after := tp.NAPIs()
	require.Len(t, after, 4)
	assert.NotEqual(t, before[3].ID, after[3].ID, "a new NAPI")
	assert.Equal(t, c, after[3].Config, "the new NAPI finds queue 3's settings")

	all := NAPIConfig{IRQSuspendTimeout: time.Millisecond}
	require.NoError(t, tp.SetNAPIConfigAll(all))
	for q, got := range tp.NAPIConfigs() {
		assert.Equal(t, all, got, "queue %d", q)
	}
	require.ErrorIs(t, tp.SetNAPIConfigAll(NAPIConfig{GROFlushTimeout: -1}), unix.EINVAL)
	assert.Equal(t, all, tp.NAPIConfig(0), "a refused SetNAPIConfigAll changes nothing")
}
