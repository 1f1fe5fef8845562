package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAgeing(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true}, {"300", 300 * time.Second, true}, {"90s", 90 * time.Second, true}, {"5m", 5 * time.Minute, true},
		{"1.5s", 1500 * time.Millisecond, true}, {"-1s", 0, false}, {"-5", 0, false}, {"soon", 0, false}, {"1ns", 0, false}, {"", 0, false},
	} {
		got, err := parseAgeing(tt.in)
		assert.Equal(t, tt.ok, err == nil, "parseAgeing(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		assert.Equal(t, tt.want, got, "parseAgeing(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
	}
}

// TestSegmentUsageErrors: wrong segment command lines fail before anything is sent (nothing
// listens on the socket: a request would fail with a connect error instead).
func TestSegmentUsageErrors(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"segment"}, "segment needs a subcommand"},
		{[]string{"segment", "show"}, "segment show needs a segment name"},
		{[]string{"segment", "show", "a", "b"}, "segment show: wrong number of arguments (want SEG)"},
		{[]string{"segment", "add", "w", "--ageing", "soon"}, "invalid --ageing 'soon'"},
		{[]string{"segment", "add", "w", "--mtu", "x"}, `invalid argument "x" for "--mtu"`},
		{[]string{"segment", "uplink"}, "segment uplink needs a subcommand"},
		{[]string{"segment", "uplink", "add", "w"}, "segment uplink add: wrong number of arguments (want SEG DEV)"},
		{[]string{"segment", "uplink", "del", "w", ""}, "segment uplink del needs DEV"},
		{[]string{"segment", "uplink", "add", "w", "vx0", "--attach", "xdp"}, `--attach "xdp": want af_packet, af_xdp or auto`},
		{[]string{"segment", "uplink", "del", "w", "vx0", "--attach", "auto"}, "unknown flag: --attach"},
		{[]string{"segment", "uplink", "add", "w", "vx0", "--busy-poll", "2ms"}, "--busy-poll 2ms: want 0 (off) to 1ms"},
		{[]string{"segment", "uplink", "add", "w", "vx0", "--busy-poll", "-1us"}, "--busy-poll -1µs: want 0 (off) to 1ms"},
		{[]string{"segment", "uplink", "add", "w", "vx0", "--busy-poll", "1500ns"}, "--busy-poll 1.5µs: want whole microseconds"},
		{[]string{"segment", "uplink", "del", "w", "vx0", "--busy-poll", "50us"}, "unknown flag: --busy-poll"},
		{[]string{"--kernel", "segment", "list"}, "segment list is a manad command: --kernel does not apply"},
	} {
		code, out, errs := runCLI(t, sock, tt.args...)
		assert.Equal(t, exitUsage, code, "%v: exit %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errs, exitUsage, tt.msg)
		assert.Equal(t, "", out, "%v: exit %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errs, exitUsage, tt.msg)
		assert.Contains(t, errs, tt.msg, "%v: exit %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errs, exitUsage, tt.msg)
	}
	// A well-formed command gets as far as connecting.
	code, _, errs := runCLI(t, sock, "segment", "list")
	assert.Equal(t, exitFailure, code, "segment list without manad: exit %d, stderr %q", code, errs)
	assert.Contains(t, errs, "cannot connect to manad", "segment list without manad: exit %d, stderr %q", code, errs)
}

var sampleSegment = genl.SegmentInfo{
	Name: "wire0", Origin: "config", StormPPS: 500, AgeingMs: 300000, Ports: []string{"mana0", "mana1"}, Learnt: 3,
	Floods: 12, StormDrops: 1,
	Uplinks: []genl.UplinkInfo{
		{Dev: "vx0", NetNS: "hostA", State: "attached", Kind: "vxlan", Ifindex: 7, MTU: 1450, MaxPortMTU: 1450,
			RxPackets: 10, RxBytes: 1000, TxPackets: 20, TxBytes: 2000, TxMTUDrops: 2, Attaches: 1, Changes: 1, Attach: "af_xdp"},
		{Dev: "upl", State: "reattaching", Error: "bind: no such device"},
	},
}

func TestWriteSegments(t *testing.T) {
	var b bytes.Buffer
	writeSegments(&b, []genl.SegmentInfo{sampleSegment, {Name: "default", Origin: "ports", AgeingMs: 0}})
	want := `NAME     ORIGIN  MTU  STORM  AGEING  PORTS        LEARNT  UPLINKS
wire0    config  -    500    5m0s    mana0,mana1  3       hostA/vx0=attached,upl=reattaching
default  ports   -    -      never   -            0       -
`
	assert.Equal(t, want, b.String(), "segment list")
	b.Reset()
	writeSegment(&b, sampleSegment)
	for _, line := range []string{
		"Segment wire0:\n", "Storm limit (pps): 500\n", "Ageing time:       5m0s\n", "Ports:             mana0, mana1\n",
		"Uplink hostA/vx0:\n", "  State:               attached (vxlan, ifindex 7)\n", "  Attachment:          af_xdp\n", "  Attachment:          -\n", "  Max port MTU:        1450\n",
		"  TX drops:            device 0, down 0, mtu 2\n", "Uplink upl:\n", "  State:               reattaching\n",
		"  Error:               bind: no such device\n",
	} {
		assert.Contains(t, b.String(), line, "segment show lacks")
	}
}

// TestSegmentJSON: the documented keys, arrays never null.
func TestSegmentJSON(t *testing.T) {
	b, err := json.Marshal(segmentToJSON(genl.SegmentInfo{Name: "w"}))
	require.NoError(t, err)
	want := `{"name":"w","origin":"","mtu":0,"storm-pps":0,"ageing-ms":0,"ports":[],"learnt-macs":0,"floods":0,"storm-drops":0,"uplinks":[]}`
	assert.Equal(t, want, string(b), "JSON %s\nwant", b)
	j := segmentToJSON(sampleSegment)
	if u := j.Uplinks[0]; u.MaxPortMTU != 1450 || u.TxDrops.MTU != 2 || u.StateChanges != 1 || u.Attach != "af_xdp" || j.Uplinks[1].Error == "" {
		t.Errorf("uplink JSON %+v", j.Uplinks)
	}
}

// TestSegmentEvents: monitor prints segment notifications, as text and as JSON lines.
func TestSegmentEvents(t *testing.T) {
	var b bytes.Buffer
	a := &app{stdout: &b}
	require.NoError(t, writeNotification(a, client.Notification{Kind: client.SegmentChanged, Sequence: 4, Segment: &sampleSegment}))
	want := "\nSegment wire0 changed:\norigin config, MTU -, storm limit 500, ageing 5m0s, ports mana0,mana1, uplinks hostA/vx0=attached,upl=reattaching\n"
	assert.Equal(t, want, b.String(), "monitor text")
	b.Reset()
	a.json = true
	require.NoError(t, writeNotification(a, client.Notification{Kind: client.SegmentRemoved, Sequence: 5, Segment: &genl.SegmentInfo{Name: "w"}}))
	var ev struct {
		Kind    string `json:"kind"`
		Seq     uint32 `json:"seq"`
		Segment *struct {
			Name string `json:"name"`
		} `json:"segment"`
	}
	if err := json.Unmarshal(b.Bytes(), &ev); err != nil || ev.Kind != "segment-del" || ev.Seq != 5 || ev.Segment == nil || ev.Segment.Name != "w" {
		t.Errorf("monitor JSON %s: %+v, %v", b.String(), ev, err)
	}
}
