package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// TestCoalesceGolden feeds the formatter the values of the captured ethtool 6.1 -c of a
// virtio_net NIC (adaptive-rx off, rx/tx-usecs 0, rx/tx-frames 1, nothing else) and compares
// byte for byte.
func TestCoalesceGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/ethtool-6.1/virtio-coalesce.txt")
	if err != nil {
		t.Fatal(err)
	}
	co := &client.Coalesce{Attrs: map[uint16]uint32{
		unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX: 0,
		unix.ETHTOOL_A_COALESCE_RX_USECS:        0, unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES: 1,
		unix.ETHTOOL_A_COALESCE_TX_USECS: 0, unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES: 1,
	}}
	var b bytes.Buffer
	writeCoalesce(&b, "eth0", co)
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("ethtool -c layout (-ethtool +manactl):\n%s", diff)
	}
}

// TestCoalesceJSON: ifname, then the reported parameters in ethtool's order, booleans as
// booleans; absent ones left out.
func TestCoalesceJSON(t *testing.T) {
	co := &client.Coalesce{Attrs: map[uint16]uint32{
		unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX: 1, unix.ETHTOOL_A_COALESCE_RX_USECS: 50,
		wire.CoalesceRxCQEFrames: 4, wire.CoalesceRxCQENsecs: 2048,
	}}
	var b bytes.Buffer
	if err := writeJSON(&b, []coalesceJSON{{"mana0", co}}); err != nil {
		t.Fatal(err)
	}
	want := `[
    {
        "ifname": "mana0",
        "adaptive-tx": true,
        "rx-usecs": 50,
        "rx-cqe-frames": 4,
        "rx-cqe-nsecs": 2048
    }
]
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("--json (-want +got):\n%s", diff)
	}
}

func TestParseCoalesceUpdate(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		u32   map[uint16]uint32
		bools map[uint16]bool
		err   bool
	}{
		{args: []string{"rx-usecs", "50", "adaptive-rx", "on"},
			u32: map[uint16]uint32{unix.ETHTOOL_A_COALESCE_RX_USECS: 50}, bools: map[uint16]bool{unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX: true}},
		{args: []string{"rx-cqe-frames", "4", "rx-frames-low", "2"},
			u32: map[uint16]uint32{wire.CoalesceRxCQEFrames: 4, unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES_LOW: 2}, bools: map[uint16]bool{}},
		{args: []string{"cqe-mode-tx", "off"}, u32: map[uint16]uint32{}, bools: map[uint16]bool{unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_TX: false}},
		{args: []string{"rx-usecs"}, err: true},
		{args: []string{"rx-usecs", "-1"}, err: true},
		{args: []string{"adaptive-rx", "yes"}, err: true},
		{args: []string{"rx-frame-low", "1"}, err: true}, // -c's label, not an -C name
		{args: []string{"bogus", "1"}, err: true},
		{args: nil, err: true},
	} {
		u, err := parseCoalesceUpdate(tc.args)
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v", tc.args, err)
			continue
		}
		if !tc.err && (!cmp.Equal(u.U32, tc.u32) || !cmp.Equal(u.Bool, tc.bools)) {
			t.Errorf("%q: %+v", tc.args, u)
		}
	}
}
