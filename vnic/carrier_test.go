package vnic

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic/faultpoint"
)

// carrierLog records OnCarrier calls.
type carrierLog struct {
	mu  sync.Mutex
	log []bool
}

func (c *carrierLog) record(_ *Port, on bool) {
	c.mu.Lock()
	c.log = append(c.log, on)
	c.mu.Unlock()
}

// take returns and forgets what was recorded.
func (c *carrierLog) take() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.log
	c.log = nil
	return l
}

// TestCarrier follows the carrier through a port's life: on at Open, off and on around a
// reconfiguration, off while a failed attach leaves the port detached and on again when the
// reset work restores it, off at Close; no call where nothing changes.
func TestCarrier(t *testing.T) {
	cl := new(carrierLog)
	tp := newTestPort(t, func(c *Config, _ *Settings) { c.OnCarrier = cl.record })
	const on, off = true, false
	for _, step := range []struct {
		name string
		do   func(p *Port)
		want []bool
	}{
		{"open", func(p *Port) { _ = p.Open() }, []bool{on}},
		{"open again", func(p *Port) { _ = p.Open() }, nil},
		{"reconfigure", func(p *Port) { _ = p.SetMTU(4000) }, []bool{off, on}},
		{"no change", func(p *Port) { _ = p.SetMTU(4000) }, nil},
		{"prealloc fault", func(p *Port) {
			_ = p.SetFault(Fault{Point: faultpoint.Prealloc, Mode: FaultOnce})
			_ = p.SetMTU(1500)
		}, nil},
		{"detach fault", func(p *Port) {
			_ = p.SetFault(Fault{Point: faultpoint.Detach, Mode: FaultOnce})
			_ = p.SetMTU(1500)
		}, nil},
		{"attach fault", func(p *Port) {
			_ = p.SetFault(Fault{Point: faultpoint.Attach, Mode: FaultAlways})
			_ = p.SetMTU(1500)
		}, []bool{off}},
	} {
		tp.locked(func() { step.do(tp.Port) })
		got := cl.take()
		require.True(t, slices.Equal(got, step.want), "%s: carrier calls %v, want %v", step.name, got, step.want)
	}
	st := tp.state()
	require.False(t, st.Running, "after the attach fault: %+v", st)
	require.True(t, st.ResetPending, "after the attach fault: %+v", st)
	// The reset work keeps failing: still no carrier.
	tp.waitFor("failed resets", func(State) bool {
		var ok, failed uint64
		tp.locked(func() { ok, failed = tp.Resets() })
		return ok == 0 && failed >= 2
	})
	if got := cl.take(); len(got) != 0 {
		t.Fatalf("failing resets: carrier calls %v, want none", got)
	}
	tp.locked(func() { _ = tp.SetFault(Fault{Point: faultpoint.Attach, Mode: FaultOff}) })
	tp.waitFor("the reset to restore the port", func(s State) bool { return s.Running })
	if got := cl.take(); !slices.Equal(got, []bool{on}) {
		t.Fatalf("restoring reset: carrier calls %v, want [true]", got)
	}
	tp.locked(func() { tp.Close() })
	tp.locked(func() { tp.Close() })
	got := cl.take()
	require.True(t, slices.Equal(got, []bool{off}), "close: carrier calls %v, want [false]", got)
}
