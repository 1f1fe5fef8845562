package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteRSS checks ethtool -x's layout: eight entries a row behind a "%5u: " index, the key
// as colon-separated hex, one line per hash function.
func TestWriteRSS(t *testing.T) {
	r := &client.RSS{RSS: wire.RSS{HFunc: 1, Indir: make([]uint32, 10), HKey: []byte{0x6d, 0x5a, 0x01}}}
	for i := range r.Indir {
		r.Indir[i] = uint32(i % 3)
	}
	var b bytes.Buffer
	writeRSS(&b, "mana0", 3, r)
	want := "RX flow hash indirection table for mana0 with 3 RX ring(s):\n" +
		"    0:      0     1     2     0     1     2     0     1\n" +
		"    8:      2     0\n" +
		"RSS hash key:\n6d:5a:01\n" +
		"RSS hash function:\n    toeplitz: on\n    xor: off\n    crc32: off\n"
	assert.Equal(t, want, b.String())
	b.Reset()
	writeRSS(&b, "veth0", 1, &client.RSS{})
	assert.Contains(t, b.String(), "ring(s):\nOperation not supported\nRSS hash key:\nOperation not supported\n", "no table, no key")
	j, err := json.Marshal(rssToJSON("mana0", r))
	require.NoError(t, err)
	assert.Equal(t, `{"ifname":"mana0","rss-indirection-table":[0,1,2,0,1,2,0,1,2,0],"rss-hash-key":"6d:5a:01","rss-hash-function":"toeplitz"}`, string(j), "json %s", j)
}

// TestParseRxfh: set-rxfh's grammar as ethtool's nl_srss (srss_params, srss_validate_cmd), every
// refusal a usage error.
func TestParseRxfh(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string // "" = accepted
	}{
		{[]string{"equal", "2"}, ""},
		{[]string{"equal", "2", "start", "1", "hkey", "00:01", "hfunc", "toeplitz", "context", "0"}, ""},
		{[]string{"weight", "1", "0", "2", "start", "1"}, ""},
		{[]string{"default"}, ""},
		{[]string{"default", "context", "0"}, ""},
		{[]string{"hfunc", "toeplitz"}, ""},
		{[]string{"xfrm", "none"}, ""},
		{[]string{"context", "new", "equal", "2"}, ""},
		{[]string{"context", "3", "delete"}, ""},
		{nil, "set-rxfh: parameters missing"},
		{[]string{"equal"}, "set-rxfh: parameter 'equal' needs a value"},
		{[]string{"equal", "x"}, "invalid value 'x' for parameter 'equal'"},
		{[]string{"equal", "0"}, "set-rxfh: invalid 'equal' value"},
		{[]string{"equal", "2147483648"}, "set-rxfh: invalid 'equal' value"},
		{[]string{"equal", "2", "start", "2147483648"}, "set-rxfh: invalid 'start' value"},
		{[]string{"equal", "2", "equal", "3"}, "set-rxfh: parameter 'equal' given twice"},
		{[]string{"equal", "2", "weight", "1"}, "set-rxfh: 'equal' and 'weight' are mutually exclusive"},
		{[]string{"default", "equal", "2"}, "set-rxfh: 'default' and 'equal' are mutually exclusive"},
		{[]string{"weight"}, "set-rxfh: 'weight' requires at least one value"},
		{[]string{"weight", "hkey", "00"}, "set-rxfh: 'weight' requires at least one value"},
		{[]string{"weight", "1x"}, "invalid value '1x' for parameter 'weight'"},
		{[]string{"start", "1"}, "set-rxfh: start must be used with equal or weight options"},
		{[]string{"default", "start", "1"}, "set-rxfh: start and default options are mutually exclusive"},
		{[]string{"default", "context", "1"}, "set-rxfh: default and context options are mutually exclusive"},
		{[]string{"delete"}, "set-rxfh: delete option requires context option"},
		{[]string{"delete", "context", "new"}, "set-rxfh: delete and 'context new' are mutually exclusive"},
		{[]string{"delete", "context", "1", "hkey", "00"}, "set-rxfh: delete and hkey options are mutually exclusive"},
		{[]string{"context", "-1"}, "set-rxfh: invalid 'context' value"},
		{[]string{"xfrm", "sym"}, "invalid value 'sym' for parameter 'xfrm'"},
		{[]string{"indir", "2"}, "set-rxfh: unknown parameter 'indir'"},
	} {
		_, err := parseRxfh(tc.args)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%q: %v, want %q", tc.args, err, tc.err)
		case err != nil && errors.As(err, new(*runtimeError)):
			t.Errorf("%q: %v is not a usage error", tc.args, err)
		}
	}
}

// TestRxfhTable: fill_indir_table's equal, weight and default over a 64-entry table, and its
// refusals (exit status 2).
func TestRxfhTable(t *testing.T) {
	rep := func(pattern ...uint32) []uint32 {
		var out []uint32
		for len(out) < 64 {
			out = append(out, pattern...)
		}
		return out[:64]
	}
	fill := func(q uint32, n int) []uint32 { return slices.Repeat([]uint32{q}, n) }
	for _, tc := range []struct {
		args []string
		want []uint32
		err  string
	}{
		{[]string{"equal", "2"}, rep(0, 1), ""},
		{[]string{"equal", "3", "start", "1"}, rep(1, 2, 3), ""},
		{[]string{"weight", "1", "1"}, append(fill(0, 32), fill(1, 32)...), ""},
		{[]string{"weight", "1", "0", "3", "start", "2"}, append(fill(2, 16), fill(4, 48)...), ""},
		{[]string{"default"}, []uint32{}, ""},
		{[]string{"weight", "0", "0"}, nil, "At least one weight must be non-zero"},
		{[]string{"weight", "60", "5"}, nil, "Total weight exceeds the size of the indirection table"},
	} {
		r, err := parseRxfh(tc.args)
		require.NoError(t, err, "%q", tc.args)
		got, err := rxfhTable(r, 64)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err || exitStatus("set-rxfh", err) != 2 {
				t.Errorf("%q: %v (exit %d), want %q, exit 2", tc.args, err, exitStatus("set-rxfh", err), tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) || got == nil {
			t.Errorf("%q: %v, %v; want %v", tc.args, got, err, tc.want)
		}
	}
}

// TestRxfhKey: convert_string_to_hashkey's format and sizes, with ethtool's messages and exit
// status 2; a device without a key is a plain request failure (exit 1).
func TestRxfhKey(t *testing.T) {
	k, err := rxfhKey("6d:5A:00", 3)
	if err != nil || !bytes.Equal(k, []byte{0x6d, 0x5a, 0}) {
		t.Errorf("6d:5A:00: %x, %v", k, err)
	}
	for _, tc := range []struct {
		s    string
		size int
		err  string
		exit int
	}{
		{"00:01", 3, "Key is too short for device (2 < 3)", 2},
		{"00:01:02:03", 3, "Key is too long for device (4 > 3)", 2},
		{"0:01:02", 3, "Invalid RSS hash key format", 2},
		{"00-01-02", 3, "Invalid RSS hash key format", 2},
		{"00:01:zz", 3, "Invalid RSS hash key format", 2},
		{"00:01:", 3, "Key is too short for device (2 < 3)", 2},
		{"", 3, "Invalid RSS hash key format", 2},
		{"00", 0, "Cannot set RX flow hash configuration: Hash key setting not supported", 1},
	} {
		_, err := rxfhKey(tc.s, tc.size)
		if err == nil || err.Error() != tc.err || exitStatus("set-rxfh", err) != tc.exit {
			t.Errorf("%q size %d: %v (exit %d), want %q, exit %d", tc.s, tc.size, err, exitStatus("set-rxfh", err), tc.err, tc.exit)
		}
	}
}
