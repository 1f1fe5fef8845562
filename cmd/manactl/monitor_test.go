package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMonitorCoalesceAndRSS: monitor prints COALESCE_NTF and RSS_NTF, in text as -c and -x do
// (RSS under its own header: the notification has no ring count) and in --json with the same
// objects as show-coalesce and show-rxfh.
func TestMonitorCoalesceAndRSS(t *testing.T) {
	ifi := client.Interface{Index: 7, Name: "mana0"}
	co := client.Notification{Kind: client.CoalesceChanged, Sequence: 3, Interface: ifi,
		Coalesce: &client.Coalesce{Attrs: map[uint16]uint32{unix.ETHTOOL_A_COALESCE_RX_USECS: 100}}}
	rss := client.Notification{Kind: client.RSSChanged, Sequence: 4, Interface: ifi,
		RSS: &client.RSS{RSS: wire.RSS{HFunc: 1, Indir: []uint32{0, 1, 0, 1}, HKey: []byte{0xab, 0x01}}}}
	for _, tc := range []struct {
		name string
		n    client.Notification
		text []string // lines the text output must hold
		key  string   // the --json object's payload key
	}{
		{"coalesce", co, []string{"Coalesce parameters for mana0:", "rx-usecs: 100"}, "coalesce"},
		{"rss", rss, []string{"RSS settings for mana0:", "    0:      0     1     0     1", "RSS hash key:", "ab:01", "    toeplitz: on"}, "rss"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, writeNotification(&app{stdout: &b}, tc.n))
			for _, l := range tc.text {
				assert.Contains(t, b.String(), l+"\n", "text output lacks %q", l)
			}
			b.Reset()
			require.NoError(t, writeNotification(&app{stdout: &b, json: true}, tc.n))
			var obj map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(b.Bytes(), &obj), "%s", b.String())
			var payload map[string]any
			assert.NoError(t, json.Unmarshal(obj[tc.key], &payload), "--json %q payload %s", tc.key, obj[tc.key])
			assert.Equal(t, "mana0", payload["ifname"], "--json %q payload %s", tc.key, obj[tc.key])
		})
	}
}
