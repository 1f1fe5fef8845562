package vnic

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/stretchr/testify/require"
)

// TestCheckCoalesce is mana_set_coalesce's rules, with and without the CQE-8 capability.
func TestCheckCoalesce(t *testing.T) {
	ok := DefaultCoalesce()
	with := func(f func(*Coalesce)) Coalesce { c := ok; f(&c); return c }
	for _, tc := range []struct {
		name string
		cqe8 bool
		c    Coalesce
		msg  string // "" = valid
	}{
		{"default", false, ok, ""},
		{"cqe 4", false, with(func(c *Coalesce) { c.RxCQEFrames = 4 }), ""},
		{"cqe 8 unsupported", false, with(func(c *Coalesce) { c.RxCQEFrames = 8 }), "rx-frames must be 1 or 4, got 8"},
		{"cqe 8 supported", true, with(func(c *Coalesce) { c.RxCQEFrames = 8 }), ""},
		{"cqe 0", false, with(func(c *Coalesce) { c.RxCQEFrames = 0 }), "rx-frames must be 1 or 4, got 0"},
		{"cqe 2 with 8", true, with(func(c *Coalesce) { c.RxCQEFrames = 2 }), "rx-frames must be 1 or 4 or 8, got 2"},
		{"rx usecs max", false, with(func(c *Coalesce) { c.RxUsecs = 1023 }), ""},
		{"rx usecs over", false, with(func(c *Coalesce) { c.RxUsecs = 1024 }), "rx-usecs must be at most 1023, got 1024"},
		{"tx usecs over", false, with(func(c *Coalesce) { c.TxUsecs = 1 << 31 }), "tx-usecs must be at most 1023, got 2147483648"},
		{"rx frames max", false, with(func(c *Coalesce) { c.RxMaxFrames = 255 }), ""},
		{"rx frames over", false, with(func(c *Coalesce) { c.RxMaxFrames = 256 }), "rx-frames must be at most 255, got 256"},
		{"tx frames over", false, with(func(c *Coalesce) { c.TxMaxFrames = 1000 }), "tx-frames must be at most 255, got 1000"},
		{"adaptive", false, with(func(c *Coalesce) { c.AdaptiveRx, c.AdaptiveTx = true, true }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPort(t, func(c *Config, _ *Settings) { c.CQECoalesce8 = tc.cqe8 })
			err := tp.CheckCoalesce(tc.c)
			if tc.msg == "" {
				require.NoError(t, err, "CheckCoalesce")
				return
			}
			var e *nlerr.Error
			require.ErrorAs(t, err, &e, "CheckCoalesce = %v, want EINVAL %q", err, tc.msg)
			require.ErrorIs(t, err, unix.EINVAL, "CheckCoalesce = %v, want EINVAL %q", err, tc.msg)
			require.Equal(t, tc.msg, e.Message, "CheckCoalesce = %v, want EINVAL %q", err, tc.msg)
		})
	}
}

// TestSetCoalesce: a refused change changes nothing; a running port applies at once; a port
// that is down stores the change and applies it at its next attach; rx-cqe-nsecs is kept.
func TestSetCoalesce(t *testing.T) {
	tp := newTestPort(t, nil)
	want := Coalesce{RxUsecs: 10, RxMaxFrames: 20, TxUsecs: 30, TxMaxFrames: 40, RxCQEFrames: 4, RxCQENsecs: 7}
	tp.locked(func() {
		require.Error(t, tp.SetCoalesce(Coalesce{RxCQEFrames: 3}), "SetCoalesce(rx-cqe-frames 3) succeeded")
		require.Equal(t, DefaultCoalesce(), tp.Settings().Coalesce, "after a refused set")
		require.NoError(t, tp.SetCoalesce(want))
		require.Equal(t, Coalesce{}, tp.AppliedCoalesce(), "down port applied")
	})
	want.RxCQENsecs = DefaultRxCQENsecs
	tp.open()
	tp.locked(func() {
		require.Equal(t, want, tp.Settings().Coalesce, "settings")
		require.Equal(t, want, tp.AppliedCoalesce(), "applied at attach")
		want.RxCQEFrames = 1
		require.NoError(t, tp.SetCoalesce(want))
		require.Equal(t, want, tp.AppliedCoalesce(), "running port applied")
	})
}
