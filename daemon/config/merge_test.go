package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/privflag"
)

func mergeConfig(t *testing.T) *Config {
	t.Helper()
	c, err := Parse("m.toml", []byte(`
[[port]]
name = "a"
max_mtu = 4000
queues = 4
[[port]]
name = "b"
[[port]]
name = "c"
`))
	require.NoError(t, err)
	return c
}

func errorTexts(errs []error) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestMerge(t *testing.T) {
	cfg := mergeConfig(t)
	a, _ := cfg.Port("a")
	b, _ := cfg.Port("b")
	c, _ := cfg.Port("c")
	with := func(s PortSpec, f func(*PortSpec)) PortSpec { s = s.clone(); f(&s); return s }
	runtime := DefaultPortSpec("rt")
	runtime.Segment = "lab"

	for _, tc := range []struct {
		name  string
		state func(*State)
		want  []Port
		notes []string
	}{{
		name: "no state",
		want: []Port{{Spec: a}, {Spec: b}, {Spec: c}},
	}, {
		name: "settings restored",
		state: func(st *State) {
			st.RecordSettings("b", PortSettings{MTU: 3000, Queues: 2, RxRing: 200, TxRing: 128, PrivFlags: []string{"full-page-rx"}, XDP: "pass", AdminUp: true})
			st.RecordSettings("c", PortSettings{MTU: 1500, Queues: 16, RxRing: 1024, TxRing: 256})
		},
		want: []Port{{Spec: a}, {Spec: with(b, func(s *PortSpec) {
			s.MTU, s.Queues, s.RxRing, s.TxRing, s.PrivFlags, s.XDP = 3000, 2, 256, 128, privflag.FullPageRx, vnic.XDPProgPass
		}), AdminUp: true, Restored: true}, {Spec: c, Restored: true}},
	}, {
		name: "invalid for the current file",
		state: func(st *State) {
			st.RecordSettings("a", PortSettings{MTU: 9000, Queues: 4, RxRing: 1024, TxRing: 256, AdminUp: true}) // max_mtu is now 4000
			st.RecordSettings("b", PortSettings{MTU: 1500, Queues: 16, RxRing: 1024, TxRing: 256, PrivFlags: []string{"warp"}})
		},
		want: []Port{{Spec: a, AdminUp: true}, {Spec: b}, {Spec: c}},
		notes: []string{
			`state: port "a": saved settings not applied: port "a": mtu 9000 greater than max_mtu 4000: invalid argument`,
			`state: port "b": saved settings not applied: unknown private flag "warp" (want full-page-rx): invalid argument`,
		},
	}, {
		name: "eBPF program not restored",
		state: func(st *State) {
			st.RecordSettings("a", PortSettings{MTU: 2000, Queues: 1, RxRing: 1024, TxRing: 256, XDP: "ebpf:fw"})
		},
		want:  []Port{{Spec: with(a, func(s *PortSpec) { s.MTU, s.Queues = 2000, 1 }), Restored: true}, {Spec: b}, {Spec: c}},
		notes: []string{`state: port "a": XDP program "ebpf:fw" not restored (only built-in programs persist)`},
	}, {
		name: "deleted at runtime",
		state: func(st *State) {
			st.RecordDeleted("b", cfg)
		},
		want: []Port{{Spec: a}, {Spec: c}},
	}, {
		name: "deleted then created again with the same hardware",
		state: func(st *State) {
			st.RecordDeleted("b", cfg)
			st.RecordCreated(b, PortSettings{MTU: 1500, Queues: 3, RxRing: 1024, TxRing: 256})
		},
		want: []Port{{Spec: a}, {Spec: with(b, func(s *PortSpec) { s.Queues = 3 }), Restored: true}, {Spec: c}},
	}, {
		name: "created at runtime, then defined differently in the file",
		state: func(st *State) {
			st.RecordCreated(with(c, func(s *PortSpec) { s.PageSize = 65536 }), PortSettings{MTU: 1500, Queues: 5, RxRing: 1024, TxRing: 256})
		},
		want:  []Port{{Spec: a}, {Spec: b}, {Spec: with(c, func(s *PortSpec) { s.Queues = 5 }), Restored: true}},
		notes: []string{`state: port "c" was created at runtime but m.toml now defines it differently; using the file's definition`},
	}, {
		name: "runtime ports",
		state: func(st *State) {
			st.RecordCreated(runtime, PortSettings{MTU: 1400, Queues: 2, RxRing: 512, TxRing: 512, AdminUp: true})
			bad := DefaultPortSpec("rt-bad")
			bad.PageSize = 8192
			st.RecordCreated(bad, PortSettings{MTU: 1500, Queues: 1, RxRing: 1024, TxRing: 256})
			clash := DefaultPortSpec("rt-clash")
			clash.MAC = a.MAC
			st.RecordCreated(clash, PortSettings{MTU: 1500, Queues: 1, RxRing: 1024, TxRing: 256})
			st.RecordSettings("gone", PortSettings{MTU: 1500})
		},
		want: []Port{{Spec: a}, {Spec: b}, {Spec: c}, {Spec: with(runtime, func(s *PortSpec) {
			s.MTU, s.Queues, s.RxRing, s.TxRing = 1400, 2, 512, 512
		}), AdminUp: true, Runtime: true, Restored: true}},
		notes: []string{
			`state: settings of port "gone" ignored: m.toml has no such port`,
			`state: port "rt-bad" created at runtime dropped: port "rt-bad": page_size 8192 not supported (want 4096, 16384 or 65536, or "4K", "16K", "64K"): invalid argument`,
			`state: port "rt-clash" created at runtime dropped: its mac ` + a.MAC.String() + ` is port "a"'s`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewState()
			if tc.state != nil {
				tc.state(st)
			}
			// Merge reads the state as LoadState returns it, so go through the file.
			dir := t.TempDir()
			require.NoError(t, st.Save(dir))
			loaded, err := LoadState(dir)
			require.NoError(t, err)
			cfgBefore, stBefore := *cfg, cloneState(loaded)
			got, notes := Merge(cfg, loaded)
			assert.Empty(t, cmp.Diff(tc.want, got), "ports (-want +got)")
			assert.Empty(t, cmp.Diff(tc.notes, errorTexts(notes), cmp.Transformer("nil", func(s []string) []string {
				if s == nil {
					return []string{}
				}
				return s
			})), "notes (-want +got)")
			assert.Empty(t, cmp.Diff(&cfgBefore, cfg), "Merge changed the config")
			assert.Empty(t, cmp.Diff(stBefore, loaded), "Merge changed the state")
			// The result shares no memory with the inputs.
			for _, p := range got {
				p.Spec.MAC[5] ^= 0xff
			}
			assert.Empty(t, cmp.Diff(&cfgBefore, cfg), "the merged ports share memory with the config")
		})
	}
}

func cloneState(st *State) *State {
	out := NewState()
	for k, v := range st.Ports {
		v.Settings = v.Settings.clone()
		if v.Spec != nil {
			s := v.Spec.clone()
			v.Spec = &s
		}
		out.Ports[k] = v
	}
	out.Deleted = append([]string(nil), st.Deleted...)
	return out
}

// TestRestartCycle runs what the daemon does across a crash: start from the default
// configuration, change ports at runtime, save, "restart" (load and merge), and get the same
// ports with their last settings back.
func TestRestartCycle(t *testing.T) {
	dir := t.TempDir()
	cfg := Default()

	st, err := LoadState(dir)
	require.NoError(t, err)
	ports, notes := Merge(cfg, st)
	require.Empty(t, notes, "first start: %d ports, notes %v", len(ports), notes)
	require.Len(t, ports, 2, "first start: %d ports, notes %v", len(ports), notes)
	// Runtime changes, recorded as the daemon records them from the port model.
	mana0 := ports[0].Spec.Settings
	mana0.MTU, mana0.PrivFlags, mana0.XDP, mana0.RxRing = 3000, privflag.FullPageRx, vnic.XDPProgTx, 4096
	st.RecordSettings("mana0", NewPortSettings(mana0, true))
	extra := DefaultPortSpec("mana2")
	extra.NetNS, extra.Segment = "manaC", "wire0"
	st.RecordCreated(extra, NewPortSettings(extra.Settings, false))
	st.RecordDeleted("mana1", cfg)
	require.NoError(t, st.Save(dir))

	// Restart.
	st2, err := LoadState(dir)
	require.NoError(t, err)
	ports2, notes := Merge(Default(), st2)
	assert.Empty(t, notes, "restart notes")
	var got []string
	for _, p := range ports2 {
		got = append(got, p.Spec.Name)
	}
	require.Equal(t, "mana0,mana2", strings.Join(got, ","), "ports after restart: %v, want mana0,mana2", got)
	assert.Equal(t, mana0, ports2[0].Spec.Settings, "mana0 after restart: settings")
	assert.True(t, ports2[0].AdminUp, "mana0 after restart: down, want up")
	assert.True(t, ports2[1].Runtime, "mana2 after restart: %+v, want a runtime port", ports2[1])
	assert.Equal(t, "manaC", ports2[1].Spec.NetNS, "mana2 after restart: netns")
}
