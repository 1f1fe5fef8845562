package vnic

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic/faultpoint"
	"github.com/manad/manad/vnic/privflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// op is one of the five reconfigurations, moving the test port's default settings to a value
// that changes the RX layout or the queue set.
type op struct {
	name       string
	do         func(p *Port) error
	isNew      func(s Settings) bool
	prealloc   string // message of a failed pre-allocation
	detach     string
	attach     string
	wantSingle bool // the new layout is one buffer per page
}

var ops = []op{
	{"priv-flags", func(p *Port) error { return p.SetPrivFlags(privflag.FullPageRx) },
		func(s Settings) bool { return s.PrivFlags == privflag.FullPageRx },
		"Insufficient memory for new allocations", "mana_detach failed", "mana_attach failed", true},
	{"mtu", func(p *Port) error { return p.SetMTU(9000) },
		func(s Settings) bool { return s.MTU == 9000 },
		"Insufficient memory for new MTU", "mana_detach failed", "mana_attach failed", true},
	{"xdp", func(p *Port) error { return p.SetXDP(XDPProgPass) },
		func(s Settings) bool { return s.XDP == XDPProgPass },
		"XDP: Insufficient memory for tx/rx re-config", "XDP: Re-config failed at detach", "XDP: Re-config failed at attach", true},
	{"rings", func(p *Port) error { return p.SetRings(200, 300) },
		func(s Settings) bool { return s.RxRing == 256 && s.TxRing == 512 },
		"Insufficient memory for new allocations", "mana_detach failed", "mana_attach failed", false},
	{"channels", func(p *Port) error { return p.SetChannels(2) },
		func(s Settings) bool { return s.Queues == 2 },
		"Insufficient memory for new allocations", "mana_detach failed", "mana_attach failed", false},
}

// settled checks the invariants of a port at rest: every pool's buffers are posted or back, and
// the memory charged is exactly what the running rings pin.
func settled(t *testing.T, st State) {
	t.Helper()
	assert.Equal(t, 0, st.BuffersInFlight, "buffers in flight %d, releases pending %d; want 0", st.BuffersInFlight, st.ReleasesPending)
	assert.Equal(t, 0, st.ReleasesPending, "buffers in flight %d, releases pending %d; want 0", st.BuffersInFlight, st.ReleasesPending)
	if !st.Running {
		assert.Equal(t, int64(0), st.MemoryInUse, "stopped port still charges %d bytes", st.MemoryInUse)
		return
	}
	assert.Equal(t, st.Settings.Queues*st.Settings.RxRing, st.BuffersPosted, "buffers posted")
	assert.Equal(t, st.Layout.BytesTotal, st.BytesPinned, "pinned %d bytes, memory in use %d, layout says %d", st.BytesPinned, st.MemoryInUse, st.Layout.BytesTotal)
	assert.Equal(t, st.BytesPinned, st.MemoryInUse, "pinned %d bytes, memory in use %d, layout says %d", st.BytesPinned, st.MemoryInUse, st.Layout.BytesTotal)
}

func TestReconfigure(t *testing.T) {
	type outcome int
	const (
		applied   outcome = iota // new value, port running
		untouched                // old value, port running, no reset
		reset                    // old value, port detached until the reset work restores it
	)
	faults := []struct {
		name  string
		fault *Fault
		errno unix.Errno
		want  outcome
		fired int // times the fault point fires before the port is running again
	}{
		{"success", nil, 0, applied, 0},
		{"prealloc fails", &Fault{Point: faultpoint.Prealloc, Mode: FaultOnce}, unix.ENOMEM, untouched, 1},
		{"detach fails", &Fault{Point: faultpoint.Detach, Mode: FaultOnce}, unix.EIO, untouched, 1},
		{"attach fails once", &Fault{Point: faultpoint.Attach, Mode: FaultOnce}, unix.EPROTO, reset, 1},
		{"attach fails 3 times", &Fault{Point: faultpoint.Attach, Mode: FaultCount, Count: 3, Errno: unix.EBUSY}, unix.EBUSY, reset, 3},
	}
	for _, o := range ops {
		for _, f := range faults {
			t.Run(o.name+"/"+f.name, func(t *testing.T) {
				tp := newTestPort(t, nil)
				tp.open()
				before := tp.state()
				var err error
				var after State
				tp.locked(func() {
					if f.fault != nil {
						require.NoError(t, tp.SetFault(*f.fault))
					}
					err = o.do(tp.Port)
					after = tp.State() // same critical section: the reset work cannot have run yet
				})
				switch f.want {
				case applied:
					require.NoError(t, err, "err")
					require.True(t, o.isNew(after.Settings), "after success: %+v", after)
					require.True(t, after.Running, "after success: %+v", after)
					require.False(t, after.ResetPending, "after success: %+v", after)
					assert.Equal(t, o.wantSingle, after.Layout.Single, "layout single = %v, want %v (%s)", after.Layout.Single, o.wantSingle, after.Layout.Reason)
				case untouched, reset:
					require.ErrorIs(t, err, f.errno, "err")
					msg := map[faultpoint.Point]string{faultpoint.Prealloc: o.prealloc, faultpoint.Detach: o.detach, faultpoint.Attach: o.attach}[f.fault.Point]
					var e *nlerr.Error
					if !errors.As(err, &e) || !strings.HasPrefix(e.Message, msg) {
						t.Errorf("message = %q, want prefix %q", e.Message, msg)
					}
					if after.Settings != before.Settings {
						t.Errorf("value not reverted: %+v, want %+v", after.Settings, before.Settings)
					}
				}
				switch f.want {
				case untouched:
					if !after.Running || after.ResetPending || after.Layout != before.Layout {
						t.Errorf("port not untouched: running=%v reset=%v", after.Running, after.ResetPending)
					}
				case reset:
					if after.Running || !after.Detached || !after.ResetPending {
						t.Errorf("after a failed attach: running=%v detached=%v reset=%v; want detached with reset pending",
							after.Running, after.Detached, after.ResetPending)
					}
					after = tp.waitFor("the reset work to restore the port", func(s State) bool { return s.Running && !s.ResetPending })
					if after.Settings != before.Settings || after.Layout != before.Layout {
						t.Errorf("reset restored %+v, want the last good %+v", after.Settings, before.Settings)
					}
				}
				if f.fault != nil {
					got := after.Faults[f.fault.Point].Fired
					assert.Equal(t, f.fired, got, "fault fired %d times, want %d", got, f.fired)
				}
				final := tp.waitFor("pools to drain", func(s State) bool { return s.ReleasesPending == 0 })
				settled(t, final)
				// The port passes traffic with whatever layout it ended with.
				assert.Equal(t, RxDelivered, tp.Receive(0, udpFrame(1000, 1, 2)), "Receive after the operation")
			})
		}
	}
}

// TestReconfigureDown checks the port-down shortcut: the value is stored, nothing is allocated,
// no fault point is reached, and the value is used at the next open.
func TestReconfigureDown(t *testing.T) {
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			tp := newTestPort(t, nil)
			tp.locked(func() {
				for _, pt := range faultpoint.Points {
					_ = tp.SetFault(Fault{Point: pt, Mode: FaultAlways})
				}
				require.NoError(t, o.do(tp.Port), "op on a down port")
				st := tp.State()
				require.True(t, o.isNew(st.Settings), "down port: %+v", st)
				require.False(t, st.Running, "down port: %+v", st)
				require.Equal(t, int64(0), st.MemoryInUse, "down port: %+v", st)
				for _, f := range st.Faults {
					assert.Equal(t, 0, f.Fired, "fault %s fired on a down port", f.Point)
					_ = tp.SetFault(Fault{Point: f.Point, Mode: FaultOff})
				}
				require.NoError(t, tp.Open())
				st = tp.State()
				if !o.isNew(st.Settings) || st.Layout.Single != o.wantSingle {
					t.Errorf("open did not apply the stored value: %+v", st)
				}
			})
			settled(t, tp.state())
		})
	}
}

// TestNoChange checks that setting the current value does nothing at all.
func TestNoChange(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	tp.locked(func() {
		require.NoError(t, tp.SetRings(256, 256))
		_ = tp.SetFault(Fault{Point: faultpoint.Prealloc, Mode: FaultAlways})
		s := tp.Settings()
		for name, err := range map[string]error{
			"flags":    tp.SetPrivFlags(s.PrivFlags),
			"mtu":      tp.SetMTU(s.MTU),
			"xdp":      tp.SetXDP(nil),
			"rings":    tp.SetRings(s.RxRing, s.TxRing),
			"rounded":  tp.SetRings(200, 150), // rounds up to the current 256/256
			"channels": tp.SetChannels(s.Queues),
		} {
			assert.NoError(t, err, "%s", name)
		}
		f := tp.Faults()[faultpoint.Prealloc]
		assert.Equal(t, 0, f.Fired, "a no-change request reached pre-allocation")
	})
}

// TestPrivFlagsLayoutShortcut checks mana_set_priv_flags' shortcut: when one buffer per page is
// forced anyway (jumbo MTU or XDP) the flag is stored without a detach/attach.
func TestPrivFlagsLayoutShortcut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mod     func(*Config, *Settings)
		rebuild bool
	}{
		{"16K jumbo", func(c *Config, s *Settings) { s.MTU = 9000 }, false},
		{"16K XDP", func(c *Config, s *Settings) { s.XDP = XDPProgDrop }, false},
		{"16K default MTU", nil, true},
		// The driver's test predates the headroom rule: on 4K pages at MTU 1500 the layout is
		// single either way, but the flip still rebuilds the queues (sashiko review of 259c4a519100).
		{"4K MTU 1500", func(c *Config, s *Settings) { c.PageSize = 4096 }, true},
		{"4K MTU 1715", func(c *Config, s *Settings) { c.PageSize = 4096; s.MTU = 1715 }, false},
		{"pre-frag rule", func(c *Config, s *Settings) { c.Rule = 2 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPort(t, tc.mod)
			tp.open()
			tp.locked(func() {
				_ = tp.SetFault(Fault{Point: faultpoint.Prealloc, Mode: FaultAlways})
				err := tp.SetPrivFlags(privflag.FullPageRx)
				require.Equal(t, err != nil, tc.rebuild, "rebuild")
				if !tc.rebuild {
					assert.Equal(t, privflag.FullPageRx, tp.Settings().PrivFlags, "flag not stored")
				}
			})
		})
	}
}

func TestValidation(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	cases := []struct {
		name  string
		do    func() error
		errno unix.Errno
		msg   string
	}{
		{"unknown flag", func() error { return tp.SetPrivFlags(2) }, unix.EINVAL, "unknown private flag bits 0x2"},
		{"mtu low", func() error { return tp.SetMTU(67) }, unix.EINVAL, "mtu less than device minimum"},
		{"mtu high", func() error { return tp.SetMTU(9001) }, unix.EINVAL, "mtu greater than device maximum"},
		{"rx min", func() error { return tp.SetRings(64, 256) }, unix.EINVAL, "rx:64 less than the min:128"},
		{"tx min", func() error { return tp.SetRings(256, 100) }, unix.EINVAL, "tx:100 less than the min:128"},
		{"rx max", func() error { return tp.SetRings(8193, 256) }, unix.EINVAL, "requested ring size exceeds maximum"},
		{"tx max", func() error { return tp.SetRings(256, 16385) }, unix.EINVAL, "requested ring size exceeds maximum"},
		{"no channels", func() error { return tp.SetChannels(0) }, unix.EINVAL, "requested channel counts would result in no RX or TX channel being configured"},
		{"too many channels", func() error { return tp.SetChannels(65) }, unix.EINVAL, "requested channel count exceeds maximum"},
		{"bad fault", func() error { return tp.SetFault(Fault{Point: 7}) }, unix.EINVAL, "unknown fault point 7"},
		{"count without count", func() error { return tp.SetFault(Fault{Point: faultpoint.Attach, Mode: FaultCount}) }, unix.EINVAL, "fault mode count needs a count of at least 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp.locked(func() {
				before := tp.State()
				err := c.do()
				require.ErrorIs(t, err, c.errno, "err")
				assert.Equal(t, c.msg, err.(*nlerr.Error).Message, "message")
				after := tp.State()
				if after.Settings != before.Settings || !after.Running || after.Layout != before.Layout {
					t.Errorf("a rejected request changed the port")
				}
			})
		})
	}
}

// TestXDPMTUInterlock checks MANA_XDP_MTU_MAX both ways: no program above it, and no MTU above it
// while a program is attached.
func TestXDPMTUInterlock(t *testing.T) {
	tp := newTestPort(t, func(c *Config, s *Settings) { c.PageSize = 4096; s.MTU = 4000 })
	tp.open()
	tp.locked(func() {
		err := tp.SetXDP(XDPProgPass)
		require.ErrorIs(t, err, unix.EOPNOTSUPP, "attach at MTU 4000 on 4K pages: %v", err)
		require.Equal(t, "XDP: mtu too large", err.(*nlerr.Error).Message, "attach at MTU 4000 on 4K pages: %v", err)
		require.NoError(t, tp.SetMTU(3506))
		require.NoError(t, tp.SetXDP(XDPProgPass))
		st := tp.State()
		assert.Equal(t, 3506, st.MaxMTU, "with XDP: max MTU %d, layout %+v", st.MaxMTU, st.Layout)
		assert.Equal(t, 256, st.Layout.Headroom, "with XDP: max MTU %d, layout %+v", st.MaxMTU, st.Layout)
		assert.True(t, st.Layout.Single, "with XDP: max MTU %d, layout %+v", st.MaxMTU, st.Layout)
		assert.ErrorIs(t, tp.SetMTU(3507), unix.EINVAL, "SetMTU(3507) with XDP")
		require.NoError(t, tp.SetXDP(nil))
		if st := tp.State(); st.MaxMTU != DefaultMaxMTU {
			t.Errorf("max MTU after detach = %d", st.MaxMTU)
		}
	})
}

// TestMemoryBudget makes pre-allocation fail for real: the budget holds the fragment-mode rings
// but not the full-page ones.
func TestMemoryBudget(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	tp.locked(func() {
		before := tp.State()
		tp.SetMemoryBudget(before.MemoryInUse + 1<<20)
		err := tp.SetPrivFlags(privflag.FullPageRx)
		require.ErrorIs(t, err, unix.ENOMEM, "err = %v", err)
		require.True(t, strings.HasPrefix(err.(*nlerr.Error).Message, "Insufficient memory for new allocations"), "err = %v", err)
		after := tp.State()
		if after.Settings != before.Settings || !after.Running || after.MemoryInUse != before.MemoryInUse {
			t.Errorf("ENOMEM changed the port: %+v", after)
		}
		tp.SetMemoryBudget(0)
		require.NoError(t, tp.SetPrivFlags(privflag.FullPageRx))
		st := tp.State()
		// 4 queues × 128 one-per-page 16K buffers, against 4 × 19 pages of 7 fragments.
		assert.Equal(t, int64(4*128*16384), st.MemoryInUse, "memory in use %d (was %d)", st.MemoryInUse, before.MemoryInUse)
		assert.Equal(t, int64(4*19*16384), before.MemoryInUse, "memory in use %d (was %d)", st.MemoryInUse, before.MemoryInUse)
		assert.GreaterOrEqual(t, st.MemoryPeak, st.MemoryInUse+before.MemoryInUse, "peak %d: the pre-allocation must coexist with the old rings", st.MemoryPeak)
	})
	settled(t, tp.state())
}

// TestOpenNoMemory checks that a port that cannot allocate its rings stays down and holds nothing.
func TestOpenNoMemory(t *testing.T) {
	tp := newTestPort(t, func(c *Config, s *Settings) { c.MemoryBudget = 1 << 20 })
	tp.locked(func() {
		err := tp.Open()
		require.ErrorIs(t, err, unix.ENOMEM, "Open = %v, want ENOMEM", err)
		st := tp.State()
		if st.Running || st.AdminUp || st.MemoryInUse != 0 {
			t.Errorf("after a failed open: %+v", st)
		}
	})
}

// TestResetRespectsAdminDown: after a failed attach the administrator takes the port down; the
// reset work must not bring it back behind their back.
func TestResetRespectsAdminDown(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	tp.locked(func() {
		_ = tp.SetFault(Fault{Point: faultpoint.Attach, Mode: FaultAlways})
		require.Error(t, tp.SetPrivFlags(privflag.FullPageRx), "attach fault did not fail the operation")
		tp.Close()
		_ = tp.SetFault(Fault{Point: faultpoint.Attach, Mode: FaultOff})
	})
	st := tp.waitFor("the reset to stand down", func(s State) bool { return !s.ResetPending })
	require.False(t, st.Running, "reset brought a port the admin took down back up: %+v", st)
	require.False(t, st.AdminUp, "reset brought a port the admin took down back up: %+v", st)
	settled(t, st)
	tp.open()
	settled(t, tp.state())
}

// TestResetAppliesStoredValue: a value set while the port is detached is what the reset applies.
func TestResetAppliesStoredValue(t *testing.T) {
	tp := newTestPort(t, nil)
	tp.open()
	tp.locked(func() {
		_ = tp.SetFault(Fault{Point: faultpoint.Attach, Mode: FaultOnce})
		require.Error(t, tp.SetChannels(2), "no error")
		// Detached now: the MTU change is stored.
		require.NoError(t, tp.SetMTU(9000))
	})
	st := tp.waitFor("the reset", func(s State) bool { return s.Running })
	assert.Equal(t, 9000, st.Settings.MTU, "reset applied %+v", st.Settings)
	assert.Equal(t, 4, st.Settings.Queues, "reset applied %+v", st.Settings)
}

func TestAssertLocked(t *testing.T) {
	tp := newTestPort(t, nil)
	defer func() {
		assert.NotNil(t, recover(), "SetMTU without the configuration lock did not panic")
	}()
	_ = tp.SetMTU(1400)
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config, *Settings)
		msg  string
	}{
		{"page size", func(c *Config, s *Settings) { c.PageSize = 8192 }, "page size 8192 not supported (want 4096, 16384 or 65536)"},
		{"no name", func(c *Config, s *Settings) { c.Name = "" }, "port needs a name"},
		{"queues", func(c *Config, s *Settings) { s.Queues = 65 }, "requested channel count exceeds maximum"},
		{"ring", func(c *Config, s *Settings) { s.RxRing = 100 }, "rx:100 less than the min:128"},
		{"xdp mtu", func(c *Config, s *Settings) { c.PageSize = 4096; s.MTU = 9000; s.XDP = XDPProgPass }, "mtu greater than device maximum (3506 while an XDP program is attached)"},
		{"flags", func(c *Config, s *Settings) { s.PrivFlags = 4 }, "unknown private flag bits 0x4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Name: "x", Lock: new(sync.Mutex), Host: new(testHost), Wire: new(testWire)}
			s := DefaultSettings()
			tc.mod(&cfg, &s)
			_, err := New(cfg, s)
			var e *nlerr.Error
			if !errors.As(err, &e) || e.Errno != unix.EINVAL || e.Message != tc.msg {
				t.Errorf("New = %v, want EINVAL %q", err, tc.msg)
			}
		})
	}
}
