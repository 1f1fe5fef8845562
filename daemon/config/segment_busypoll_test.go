package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestParseUplinkBusyPoll: an uplink's busy_poll takes a duration string of whole microseconds
// within the [daemon] table's bounds; anything else is refused with the file's line and the
// fix.
func TestParseUplinkBusyPoll(t *testing.T) {
	doc := func(v string) string {
		return "[[segment]]\nname = \"wire0\"\nuplinks = [{dev = \"vx0\", busy_poll = " + v + "}]\n"
	}
	for _, tc := range []struct {
		value string
		want  time.Duration
		fail  string
	}{
		{`"50us"`, 50 * time.Microsecond, ""},
		{`"0"`, 0, ""},
		{`"1ms"`, time.Millisecond, ""},
		{`"1001us"`, 0, `t.toml:3: segment "wire0": uplink busy_poll 1.001ms out of range (0..1ms)`},
		{`"-1us"`, 0, `t.toml:3: segment "wire0": uplink busy_poll -1µs out of range (0..1ms)`},
		{`"1500ns"`, 0, `t.toml:3: segment "wire0": uplink busy_poll 1.5µs is not whole microseconds`},
		{`"soon"`, 0, `t.toml:3: segment "wire0": uplink busy_poll "soon" is not a duration (want e.g. "50us", or "0" for none)`},
		{`50`, 0, `t.toml:3: segment "wire0": uplink busy_poll must be a duration string such as "50us", not the integer 50`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			cfg, err := Parse("t.toml", []byte(doc(tc.value)))
			if tc.fail != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.fail)
				return
			}
			require.NoError(t, err)
			require.Len(t, cfg.Segments, 1)
			assert.Equal(t, []UplinkSpec{{Dev: "vx0", BusyPoll: tc.want}}, cfg.Segments[0].Uplinks)
		})
	}
}

// TestUplinkBusyPollValidate: a runtime uplink (UPLINK_ADD, the state file) is held to the
// file's bounds, with EINVAL.
func TestUplinkBusyPollValidate(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{0, true}, {50 * time.Microsecond, true}, {time.Millisecond, true},
		{time.Millisecond + time.Microsecond, false}, {-time.Microsecond, false}, {1500 * time.Nanosecond, false},
	} {
		err := UplinkSpec{Dev: "vx0", BusyPoll: tc.d}.Validate()
		if tc.ok {
			assert.NoError(t, err, "%v", tc.d)
			continue
		}
		assert.True(t, errors.Is(err, unix.EINVAL), "%v: %v", tc.d, err)
		err = SegmentSpec{Name: "w", Uplinks: []UplinkSpec{{Dev: "vx0", BusyPoll: tc.d}}}.Validate()
		assert.True(t, errors.Is(err, unix.EINVAL), "segment with %v: %v", tc.d, err)
	}
}

// TestUplinkBusyPollPersists: an uplink's busy_poll survives Save and LoadState (a restart) as
// busy_poll_us, absent when off; MergeSegments keeps it, and drops the runtime changes of a
// state file edited out of range.
func TestUplinkBusyPollPersists(t *testing.T) {
	dir := t.TempDir()
	st := NewState()
	spec := SegmentSpec{Name: "wire1", Uplinks: []UplinkSpec{{Dev: "vx0", NetNS: "hostA", BusyPoll: 50 * time.Microsecond}, {Dev: "vx1"}}}
	st.Segments.RecordSegment(spec)
	require.NoError(t, st.Save(dir))
	data, err := os.ReadFile(StatePath(dir))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(data), `"busy_poll_us": 50`), "state file:\n%s", data)
	assert.Equal(t, 1, strings.Count(string(data), `busy_poll_us`), "an uplink without polling has no busy_poll_us:\n%s", data)

	got, err := LoadState(dir)
	require.NoError(t, err)
	assert.Equal(t, spec, got.Segments.Defined["wire1"])
	segs, notes := MergeSegments(&Config{}, got)
	assert.Empty(t, notes)
	require.Len(t, segs, 1)
	assert.Equal(t, spec.Uplinks, segs[0].Uplinks)

	// Edited beyond the bound: the segment is dropped with a note, not started polling for 5 ms.
	edited := strings.Replace(string(data), `"busy_poll_us": 50`, `"busy_poll_us": 5000`, 1)
	require.NoError(t, os.WriteFile(StatePath(dir), []byte(edited), 0o600))
	got, err = LoadState(dir)
	require.NoError(t, err)
	segs, notes = MergeSegments(&Config{}, got)
	assert.Empty(t, segs)
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0].Error(), "busy_poll 5ms out of range")

	// Beyond what a duration holds: the state file is corrupt.
	edited = strings.Replace(string(data), `"busy_poll_us": 50`, `"busy_poll_us": 9223372036854775807`, 1)
	require.NoError(t, os.WriteFile(StatePath(dir), []byte(edited), 0o600))
	_, err = LoadState(dir)
	assert.ErrorIs(t, err, unix.EBADMSG)
}
