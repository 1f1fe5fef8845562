package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSegmentsStateRoundTrip: runtime segments and deleted configuration segments survive Save
// and LoadState, apart from the ports, in a "segments" object.
func TestSegmentsStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st := NewState()
	cfg := &Config{Segments: []SegmentSpec{{Name: "wire0"}}}
	st.Segments.RecordSegment(SegmentSpec{Name: "wire1", MTU: 1450, AgeingTime: 90 * time.Second, StormPPS: 100,
		Uplinks: []UplinkSpec{{Dev: "vx0", NetNS: "hostA"}, {Dev: "upl", Attach: "af_xdp"}}, Line: 7})
	st.Segments.RecordSegment(SegmentSpec{Name: "wire0"})
	st.Segments.RecordSegmentDeleted("wire0", cfg)
	st.Segments.RecordSegmentDeleted("wire0", cfg) // twice: listed once
	st.Segments.RecordSegmentDeleted("nocfg", cfg) // not in the file: not remembered
	require.NoError(t, st.Save(dir))
	got, err := LoadState(dir)
	require.NoError(t, err)
	want := SegmentsState{
		Defined: map[string]SegmentSpec{"wire1": {Name: "wire1", MTU: 1450, AgeingTime: 90 * time.Second, StormPPS: 100,
			Uplinks: []UplinkSpec{{Dev: "vx0", NetNS: "hostA"}, {Dev: "upl", Attach: "af_xdp"}}}},
		Deleted: []string{"wire0"},
	}
	assert.Empty(t, cmp.Diff(want, got.Segments), "segments after a round trip (-want +got)")
	data, _ := os.ReadFile(StatePath(dir))
	assert.Contains(t, string(data), `"segments": {`, "state file:\n%s", data)
	assert.Contains(t, string(data), `"ageing_ms": 90000`, "state file:\n%s", data)
	// Defining a deleted segment again forgets the deletion.
	got.Segments.RecordSegment(SegmentSpec{Name: "wire0"})
	assert.Empty(t, got.Segments.Deleted, "deleted after re-creation")
}

// TestSegmentsStateCorrupt: unusable segment entries make the state file corrupt (EBADMSG).
func TestSegmentsStateCorrupt(t *testing.T) {
	for name, body := range map[string]string{
		"empty name":     `"segments": {"defined": {"": {"mtu": 0, "ageing_ms": 0, "storm_pps": 0, "uplinks": []}}, "deleted": []}`,
		"ageing":         `"segments": {"defined": {"w": {"mtu": 0, "ageing_ms": -1, "storm_pps": 0, "uplinks": []}}, "deleted": []}`,
		"deleted empty":  `"segments": {"defined": {}, "deleted": [""]}`,
		"uplink type":    `"segments": {"defined": {"w": {"mtu": 0, "ageing_ms": 0, "storm_pps": 0, "uplinks": [1]}}, "deleted": []}`,
		"segments array": `"segments": []`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			doc := `{"version": 1, "ports": {}, "deleted": [], ` + body + `}`
			require.NoError(t, os.WriteFile(StatePath(dir), []byte(doc), 0o600))
			_, err := LoadState(dir)
			assert.ErrorIs(t, err, unix.EBADMSG, "LoadState: %v, want EBADMSG", err)
		})
	}
}

// TestMergeSegments: the configuration's segments in file order with the state's specs winning
// and the deleted ones left out, then the runtime ones by name; what cannot be used is noted.
func TestMergeSegments(t *testing.T) {
	vx := UplinkSpec{Dev: "vx0", NetNS: "hostA"}
	cfg := &Config{File: "m.toml", Segments: []SegmentSpec{
		{Name: "b", AgeingTime: DefaultAgeingTime, Uplinks: []UplinkSpec{vx}, Line: 3},
		{Name: "a", AgeingTime: DefaultAgeingTime, Line: 9},
		{Name: "gone", Line: 12},
	}}
	tests := []struct {
		name  string
		state SegmentsState
		want  []SegmentSpec
		notes []string
	}{
		{"no state", SegmentsState{}, cfg.Segments, nil},
		{"changed, deleted, created", SegmentsState{
			Defined: map[string]SegmentSpec{
				"a":  {Name: "a", StormPPS: 5, Uplinks: []UplinkSpec{{Dev: "x0"}}},
				"zz": {Name: "zz", AgeingTime: time.Second},
				"rt": {Name: "rt", Uplinks: []UplinkSpec{{Dev: "y0"}}},
			},
			Deleted: []string{"gone"},
		}, []SegmentSpec{
			cfg.Segments[0],
			{Name: "a", StormPPS: 5, Uplinks: []UplinkSpec{{Dev: "x0"}}, Line: 9},
			{Name: "rt", Uplinks: []UplinkSpec{{Dev: "y0"}}},
			{Name: "zz", AgeingTime: time.Second},
		}, nil},
		{"invalid runtime specs", SegmentsState{Defined: map[string]SegmentSpec{
			"a":      {Name: "a", MTU: 10},
			"bad!":   {Name: "bad!"},
			"stolen": {Name: "stolen", Uplinks: []UplinkSpec{vx, {Dev: "z0"}}},
		}}, []SegmentSpec{
			cfg.Segments[0], cfg.Segments[1], cfg.Segments[2],
			{Name: "stolen", Uplinks: []UplinkSpec{{Dev: "z0"}}},
		}, []string{
			`state: segment "a": runtime changes not applied: segment a: mtu 10 out of range 68..65535: invalid argument`,
			`state: segment "bad!" created at runtime dropped: segment name "bad!" may only hold letters, digits, '.', '_' and '-': invalid argument`,
			`state: segment "stolen": uplink hostA/vx0 dropped: segment "b" uses it`,
		}},
	}
	// A state holding as many runtime segments as MaxSegments allows, beside the
	// configuration's three: the first by name fill the bound, the last three are dropped.
	full := SegmentsState{Defined: map[string]SegmentSpec{}}
	wantFull := slices.Clone(cfg.Segments)
	var fullNotes []string
	for i := range MaxSegments {
		name := fmt.Sprintf("r%04d", i)
		full.Defined[name] = SegmentSpec{Name: name}
		if i < MaxSegments-len(cfg.Segments) {
			wantFull = append(wantFull, SegmentSpec{Name: name})
		} else {
			fullNotes = append(fullNotes, fmt.Sprintf("state: segment %q created at runtime dropped: %d segments defined, at most %d", name, MaxSegments, MaxSegments))
		}
	}
	tests = append(tests, struct {
		name  string
		state SegmentsState
		want  []SegmentSpec
		notes []string
	}{"more than MaxSegments", full, wantFull, fullNotes})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := NewState()
			st.Segments = tt.state
			got, notes := MergeSegments(cfg, st)
			assert.Empty(t, cmp.Diff(tt.want, got), "segments (-want +got)")
			var ns []string
			for _, n := range notes {
				ns = append(ns, n.Error())
			}
			assert.Empty(t, cmp.Diff(tt.notes, ns), "notes (-want +got)")
		})
	}
}

// TestSegmentSpecValidate: the runtime checks of a segment match a [[segment]] table's bounds.
func TestSegmentSpecValidate(t *testing.T) {
	ok := DefaultSegmentSpec("wire0")
	many := ok
	for i := range MaxUplinks + 1 {
		many.Uplinks = append(many.Uplinks, UplinkSpec{Dev: "u" + string(rune('a'+i))})
	}
	for _, tt := range []struct {
		name  string
		spec  SegmentSpec
		errno unix.Errno
	}{
		{"defaults", ok, 0},
		{"mtu low", SegmentSpec{Name: "w", MTU: 67}, unix.EINVAL},
		{"mtu high", SegmentSpec{Name: "w", MTU: 65536}, unix.EINVAL},
		{"mtu edge", SegmentSpec{Name: "w", MTU: 68}, 0},
		{"negative storm", SegmentSpec{Name: "w", StormPPS: -1}, unix.EINVAL},
		{"negative ageing", SegmentSpec{Name: "w", AgeingTime: -1}, unix.EINVAL},
		{"empty name", SegmentSpec{}, unix.EINVAL},
		{"long name", SegmentSpec{Name: strings.Repeat("w", MaxSegmentName+1)}, unix.EINVAL},
		{"too many uplinks", many, unix.ENOSPC},
		{"uplink twice", SegmentSpec{Name: "w", Uplinks: []UplinkSpec{{Dev: "a"}, {Dev: "a"}}}, unix.EEXIST},
		{"uplink twice, other attach", SegmentSpec{Name: "w", Uplinks: []UplinkSpec{{Dev: "a"}, {Dev: "a", Attach: "af_xdp"}}}, unix.EEXIST},
		{"attach modes", SegmentSpec{Name: "w", Uplinks: []UplinkSpec{{Dev: "a", Attach: "af_xdp"}, {Dev: "b", Attach: "auto"}, {Dev: "c", Attach: "af_packet"}}}, 0},
		{"bad attach", SegmentSpec{Name: "w", Uplinks: []UplinkSpec{{Dev: "a", Attach: "xdp"}}}, unix.EINVAL},
		{"bad dev", SegmentSpec{Name: "w", Uplinks: []UplinkSpec{{Dev: "a/b"}}}, unix.EINVAL},
		{"long dev", SegmentSpec{Name: "w", Uplinks: []UplinkSpec{{Dev: strings.Repeat("d", 16)}}}, unix.EINVAL},
		{"bad netns", SegmentSpec{Name: "w", Uplinks: []UplinkSpec{{Dev: "a", NetNS: ".."}}}, unix.EINVAL},
	} {
		err := tt.spec.Validate()
		if tt.errno == 0 {
			assert.NoError(t, err, tt.name)
		} else {
			assert.ErrorIs(t, err, tt.errno, tt.name)
		}
	}
}
