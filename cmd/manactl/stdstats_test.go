package main

import (
	"bytes"
	"testing"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStdStatsFormat: groups with counters and RMON histograms print as ethtool 6.1's
// stats_reply_cb prints them (GROUP-NAME: VALUE; rx-/tx-GROUP-etherStatsPkts…Octets, open
// buckets without a bound), counters without a name are skipped, and --json keeps the reply's
// order; a reply without counters is the header line alone.
func TestStdStatsFormat(t *testing.T) {
	std := []string{"eth-phy", "eth-mac", "eth-ctrl", "rmon", "phydev"}
	v := &stdStatsView{dev: "eth0", std: std, counts: map[uint32][]string{
		18: {"FramesTransmittedOK", "SingleCollisionFrames"},
		20: {"etherStatsUndersizePkts", "etherStatsOversizePkts"},
	}, st: &client.StdStats{Groups: []wire.StatsGroup{
		{ID: 0, SSID: 17},
		{ID: 1, SSID: 18, Stats: []wire.GroupStat{{Index: 0, Value: 902}, {Index: 1, Value: 0}, {Index: 9, Value: 7}}},
		{ID: 3, SSID: 20, Stats: []wire.GroupStat{{Index: 1, Value: 3}},
			HistRx: []wire.HistBucket{{High: 64, Value: 1}, {Low: 65, High: 127, Value: 2}, {Low: 1519, Value: 4}},
			HistTx: []wire.HistBucket{{Low: 64, High: 64, Value: 5}}},
	}}}
	var b bytes.Buffer
	v.write(&b)
	want := `Standard stats for eth0:
eth-mac-FramesTransmittedOK: 902
eth-mac-SingleCollisionFrames: 0
rmon-etherStatsOversizePkts: 3
rx-rmon-etherStatsPkts64Octets: 1
rx-rmon-etherStatsPkts65to127Octets: 2
rx-rmon-etherStatsPkts1519toMaxOctets: 4
tx-rmon-etherStatsPkts64to64Octets: 5
`
	assert.Equal(t, want, b.String(), "text")
	js, err := v.MarshalJSON()
	require.NoError(t, err)
	wantJSON := `{"ifname":"eth0","eth-phy":{},"eth-mac":{"FramesTransmittedOK":902,"SingleCollisionFrames":0},` +
		`"rmon":{"etherStatsOversizePkts":3,"rx-pktsNtoM":[{"low":0,"high":64,"val":1},{"low":65,"high":127,"val":2},{"low":1519,"high":0,"val":4}],` +
		`"tx-pktsNtoM":[{"low":64,"high":64,"val":5}]}}`
	assert.Equal(t, wantJSON, string(js), "json:\n%s\nwant", js)
	empty := &stdStatsView{dev: "mana0", std: std, st: &client.StdStats{Groups: []wire.StatsGroup{{ID: 0, SSID: 17}}}}
	b.Reset()
	empty.write(&b)
	assert.Equal(t, "Standard stats for mana0:\n", b.String(), "no counters")
}
