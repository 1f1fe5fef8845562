package wire_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// TestStatsGroupRoundTrip: a group with counters and RMON histogram buckets (open at either end)
// decodes to what was put, and a group without any to its id and string set.
func TestStatsGroupRoundTrip(t *testing.T) {
	for _, g := range []wire.StatsGroup{
		{ID: 3, SSID: 20},
		{ID: 1, SSID: 18, Stats: []wire.GroupStat{{Index: 0, Value: 1}, {Index: 7, Value: 1 << 40}}},
		{ID: 3, SSID: 20, Stats: []wire.GroupStat{{Index: 2, Value: 5}},
			HistRx: []wire.HistBucket{{Low: 0, High: 64, Value: 1}, {Low: 65, High: 127, Value: 2}, {Low: 1519, Value: 3}},
			HistTx: []wire.HistBucket{{Low: 64, High: 64, Value: 4}}},
	} {
		var b nlattr.Builder
		wire.PutStatsGroup(&b, &g)
		it := nlattr.NewIter(b.B, 0, len(b.B))
		require.True(t, it.Next(), "PutStatsGroup wrote no ETHTOOL_A_STATS_GRP")
		require.Equal(t, uint16(wire.StatsGrp), it.Attr().Type(), "PutStatsGroup wrote no ETHTOOL_A_STATS_GRP")
		got, err := wire.DecodeStatsGroup(it.Attr().Data)
		require.NoError(t, err)
		assert.Empty(t, cmp.Diff(g, got), "round trip (-put +decoded)")
	}
}

// TestStatsGroupMalformed: a counter that is not one u64, a bucket without a value, a short id
// and trailing bytes are errors, never a panic or a silent zero.
func TestStatsGroupMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		put  func(b *nlattr.Builder)
		want string
	}{
		{"short id", func(b *nlattr.Builder) { b.Put(wire.StatsGrpID, []byte{1, 2}) }, "2 bytes, want 4"},
		{"empty counter", func(b *nlattr.Builder) { n := b.Nest(wire.StatsGrpStat); b.EndNest(n) }, "empty counter nest"},
		{"u32 counter", func(b *nlattr.Builder) { n := b.Nest(wire.StatsGrpStat); b.PutU32(1, 5); b.EndNest(n) }, "counter 1: malformed"},
		{"two counters", func(b *nlattr.Builder) {
			n := b.Nest(wire.StatsGrpStat)
			b.PutU64(1, 5)
			b.PutU64(2, 6)
			b.EndNest(n)
		}, "malformed"},
		{"bucket without value", func(b *nlattr.Builder) {
			n := b.Nest(wire.StatsGrpHistRx)
			b.PutU32(wire.StatsGrpHistBktLo, 1)
			b.EndNest(n)
		}, "malformed histogram bucket"},
		{"trailing", func(b *nlattr.Builder) { b.PutU32(wire.StatsGrpID, 1); b.B = append(b.B, 1, 2) }, "trailing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b nlattr.Builder
			tc.put(&b)
			_, err := wire.DecodeStatsGroup(b.B)
			assert.ErrorContains(t, err, tc.want, "DecodeStatsGroup = %v, want an error saying %q", err, tc.want)
		})
	}
}
