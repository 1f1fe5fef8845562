package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestParseSegments(t *testing.T) {
	doc := `
[[segment]]
name = "wire0"
uplinks = [{dev = "vx0", netns = "hostA", attach = "af_xdp"}, {dev = "eth1", attach = "auto"}, {dev = "eth2", attach = "af_packet"}]
mtu = 1450
ageing_time = 60
storm_pps = 1000

[[segment]]
name = "lan1"
ageing_time = "5m"

[[segment]]
name = "never"
ageing_time = 0
`
	cfg, err := Parse("t.toml", []byte(doc))
	require.NoError(t, err)
	want := []SegmentSpec{
		{Name: "wire0", Uplinks: []UplinkSpec{{Dev: "vx0", NetNS: "hostA", Attach: "af_xdp"}, {Dev: "eth1", Attach: "auto"}, {Dev: "eth2", Attach: "af_packet"}}, MTU: 1450, AgeingTime: time.Minute, StormPPS: 1000, Line: 2},
		{Name: "lan1", AgeingTime: 5 * time.Minute, Line: 9},
		{Name: "never", Line: 13},
	}
	require.Empty(t, cmp.Diff(want, cfg.Segments), "segments (-want +got)")
	got := cfg.Segment("other")
	require.Equal(t, DefaultAgeingTime, got.AgeingTime, "undescribed segment %+v, want the defaults", got)
	require.Empty(t, got.Uplinks, "undescribed segment %+v, want the defaults", got)
	require.Equal(t, "hostA/vx0", cfg.Segment("wire0").Uplinks[0].String(), "uplink string")
}

func TestParseSegmentErrors(t *testing.T) {
	seg := func(body string) string { return "[[segment]]\nname = \"wire0\"\n" + body + "\n" }
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[[segment]]\nname = \"s%d\"\n", i)
		}
		return b.String()
	}
	c, err := Parse("t.toml", []byte(many(MaxSegments)))
	require.NoError(t, err, "%d [[segment]] tables", MaxSegments)
	require.Len(t, c.Segments, MaxSegments, "%d [[segment]] tables parsed", MaxSegments)
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"not an array", "[segment]\nname = \"a\"\n", `t.toml:1: segment must be an array of tables ([[segment]]), not a table`},
		{"too many", many(MaxSegments + 1), fmt.Sprintf(`t.toml:%d: segment #%d: %d [[segment]] tables, at most %d`, 2*MaxSegments+1, MaxSegments+1, MaxSegments+1, MaxSegments)},
		{"name missing", "[[segment]]\nmtu = 1500\n", `t.toml:1: segment #1: name missing`},
		{"bad name", "[[segment]]\nname = \"a b\"\n", `t.toml:2: segment #1: name "a b" may only hold letters, digits, '.', '_' and '-'`},
		{"duplicate", seg("") + seg(""), `t.toml:5: segment "wire0": duplicate name (first defined at line 2)`},
		{"unknown key", seg("uplink = []"), `t.toml:3: segment "wire0": unknown key "uplink" (did you mean "uplinks"?)`},
		{"mtu low", seg("mtu = 10"), `t.toml:3: segment "wire0": mtu 10 out of range 68..65535`},
		{"mtu type", seg(`mtu = "big"`), `t.toml:3: segment "wire0": mtu must be an integer, not the string "big"`},
		{"ageing negative", seg("ageing_time = -1"), `t.toml:3: segment "wire0": ageing_time -1 out of range (seconds, 0 for never)`},
		{"ageing string", seg(`ageing_time = "soon"`), `t.toml:3: segment "wire0": ageing_time "soon" invalid (want seconds or a duration like "5m")`},
		{"storm negative", seg("storm_pps = -5"), `t.toml:3: segment "wire0": storm_pps -5 negative (0 means no limit)`},
		{"uplinks type", seg(`uplinks = "vx0"`), `t.toml:3: segment "wire0": uplinks must be an array of tables like [{dev = "vx0", netns = "hostA"}], not the string "vx0"`},
		{"uplink scalar", seg("uplinks = [\n  1,\n]"), `t.toml:4: segment "wire0": uplink #1 must be a table like {dev = "vx0"}, not the integer 1`},
		{"uplink dev missing", seg("uplinks = [\n  {netns = \"a\"},\n]"), `t.toml:4: segment "wire0": uplink #1: dev missing`},
		{"uplink dev bad", seg(`uplinks = [{dev = "a/b"}]`), `t.toml:3: segment "wire0": uplink dev "a/b" is not a valid interface name (no '/', ':' or whitespace)`},
		{"uplink netns bad", seg(`uplinks = [{dev = "vx0", netns = ".."}]`), `t.toml:3: segment "wire0": uplink netns ".." is not a valid network namespace name (a file name in /run/netns)`},
		{"uplink unknown key", seg(`uplinks = [{dev = "vx0", netn = "a"}]`), `t.toml:3: segment "wire0": uplink #1: unknown key "netn" (did you mean "netns"?)`},
		{"uplink twice", seg("uplinks = [\n {dev = \"vx0\"},\n {dev = \"vx0\"},\n]"), `t.toml:5: segment "wire0": uplink vx0 listed twice`},
		{"uplink twice, other attach", seg("uplinks = [\n {dev = \"vx0\"},\n {dev = \"vx0\", attach = \"af_xdp\"},\n]"), `t.toml:5: segment "wire0": uplink vx0 listed twice`},
		{"uplink attach bad", seg(`uplinks = [{dev = "vx0", attach = "xdp"}]`), `t.toml:3: segment "wire0": uplink attach "xdp" is not one of "auto", "af_packet", "af_xdp"`},
		{"uplink attach type", seg(`uplinks = [{dev = "vx0", attach = 1}]`), `t.toml:3: segment "wire0": uplink attach must be a string, not the integer 1`},
		{"uplink in two segments", seg(`uplinks = [{dev = "vx0", netns = "h"}]`) + "[[segment]]\nname = \"b\"\nuplinks = [{dev = \"vx0\", netns = \"h\"}]\n",
			`t.toml:6: segment "b": uplink h/vx0 already used by segment "wire0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(tc.doc))
			require.Error(t, err, "no error, want %q", tc.want)
			require.Equal(t, tc.want, err.Error(), "error\n  %s\nwant", err)
			require.ErrorIs(t, err, unix.EINVAL, "error %v is not EINVAL", err)
		})
	}
}

// TestParseSegmentPortLimit: a segment takes MaxSegmentPorts [[port]] tables, and the next one
// on it is an error at its table, as a Linux bridge refuses a port past BR_MAX_PORTS; ports of
// other segments are not counted.
func TestParseSegmentPortLimit(t *testing.T) {
	doc := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[[port]]\nname = \"p%d\"\nsegment = \"full\"\n", i)
		}
		b.WriteString("[[port]]\nname = \"q\"\nsegment = \"other\"\n")
		return b.String()
	}
	c, err := Parse("t.toml", []byte(doc(MaxSegmentPorts)))
	require.NoError(t, err, "%d ports on a segment", MaxSegmentPorts)
	require.Len(t, c.Ports, MaxSegmentPorts+1, "%d ports on a segment", MaxSegmentPorts)
	_, err = Parse("t.toml", []byte(doc(MaxSegmentPorts+1)))
	want := fmt.Sprintf(`t.toml:%d: port "p%d": segment "full" has %d ports already, at most %d (as a Linux bridge)`,
		3*MaxSegmentPorts+1, MaxSegmentPorts, MaxSegmentPorts, MaxSegmentPorts)
	require.Error(t, err, "error\n  %v\nwant\n  %s", err, want)
	require.Equal(t, want, err.Error(), "error\n  %v\nwant\n  %s", err, want)
	require.ErrorIs(t, err, unix.EINVAL, "error\n  %v\nwant\n  %s", err, want)
}
