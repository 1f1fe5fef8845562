package vnic

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic/rxbuf"
)

// TestCheck: each refused value is named by its field, with the range a configuration words its
// own message from and the driver's message New returns; a field is not judged against a bound
// that is itself refused.
func TestCheck(t *testing.T) {
	type want struct {
		field    Field
		value    int
		min, max int
		maxOf    Field
		msg      string
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config, *Settings)
		want []want
	}{
		{"valid", func(*Config, *Settings) {}, nil},
		{"page size", func(c *Config, _ *Settings) { c.PageSize = 8192 },
			[]want{{FieldPageSize, 0, 0, -1, "", "page size 8192 not supported (want 4096, 16384 or 65536)"}}},
		{"max mtu", func(c *Config, _ *Settings) { c.MaxMTU = rxbuf.MaxMTU + 1 },
			[]want{{FieldMaxMTU, 65536, MinMTU, rxbuf.MaxMTU, "", "max MTU 65536 out of range 68..65535"}}},
		{"max queues", func(c *Config, _ *Settings) { c.MaxQueues = MaxQueues + 1 },
			[]want{{FieldMaxQueues, 257, 1, MaxQueues, "", "max queues 257 out of range 1..256"}}},
		{"rule", func(c *Config, _ *Settings) { c.Rule = rxbuf.RulePreFrag + 1 }, []want{{FieldRule, 0, 0, -1, "", "unknown RX buffer rule 3"}}},
		{"rx alloc", func(c *Config, _ *Settings) { c.RxAlloc = rxbuf.AllocNoPool + 1 }, []want{{FieldRxAlloc, 0, 0, -1, "", "unknown RX allocation mode 3"}}},
		{"rx recycle", func(c *Config, _ *Settings) { c.RxRecycle = RecycleOff + 1 }, []want{{FieldRxRecycle, 0, 0, -1, "", "unknown RX recycling mode 2"}}},
		{"speed negative", func(c *Config, _ *Settings) { c.Speed = -1 },
			[]want{{FieldSpeed, -1, 0, math.MaxInt32, "", "speed -1 out of range 0..2147483647 (Mb/s, 0 = unknown)"}}},
		{"speed above INT_MAX", func(c *Config, _ *Settings) { c.Speed = math.MaxInt32 + 1 },
			[]want{{FieldSpeed, math.MaxInt32 + 1, 0, math.MaxInt32, "", "speed 2147483648 out of range 0..2147483647 (Mb/s, 0 = unknown)"}}},
		{"rss key", func(c *Config, _ *Settings) { c.RSSKey = []byte{1} }, []want{{FieldRSSKey, 0, 0, -1, "", "hash key must be 40 bytes, got 1"}}},
		{"mtu low", func(_ *Config, s *Settings) { s.MTU = 67 },
			[]want{{FieldMTU, 67, MinMTU, DefaultMaxMTU, FieldMaxMTU, "mtu less than device minimum"}}},
		{"mtu high", func(c *Config, s *Settings) { c.MaxMTU = 3000; s.MTU = 3001 },
			[]want{{FieldMTU, 3001, MinMTU, 3000, FieldMaxMTU, "mtu greater than device maximum"}}},
		{"xdp mtu", func(_ *Config, s *Settings) { s.MTU, s.XDP = 9000, XDPProgPass },
			[]want{{FieldMTU, 9000, MinMTU, 3506, FieldXDP, "mtu greater than device maximum (3506 while an XDP program is attached)"}}},
		{"xdp mtu, bad page size", func(c *Config, s *Settings) { c.PageSize, s.MTU, s.XDP = 3, 9000, XDPProgPass },
			[]want{{FieldPageSize, 0, 0, -1, "", "page size 3 not supported (want 4096, 16384 or 65536)"}}},
		{"mtu, bad max", func(c *Config, s *Settings) { c.MaxMTU, s.MTU = 1, 9001 },
			[]want{{FieldMaxMTU, 1, MinMTU, rxbuf.MaxMTU, "", "max MTU 1 out of range 68..65535"}}},
		{"queues zero", func(_ *Config, s *Settings) { s.Queues = 0 },
			[]want{{FieldQueues, 0, 1, DefaultMaxQueues, FieldMaxQueues, "requested channel counts would result in no RX or TX channel being configured"}}},
		{"queues high", func(c *Config, s *Settings) { c.MaxQueues, s.Queues = 8, 9 },
			[]want{{FieldQueues, 9, 1, 8, FieldMaxQueues, "requested channel count exceeds maximum"}}},
		{"queues, bad max", func(c *Config, s *Settings) { c.MaxQueues, s.Queues = 300, 299 },
			[]want{{FieldMaxQueues, 300, 1, MaxQueues, "", "max queues 300 out of range 1..256"}}},
		{"rings", func(_ *Config, s *Settings) { s.RxRing, s.TxRing = MaxRxRing+1, 64 }, []want{
			{FieldTxRing, 64, MinTxRing, MaxTxRing, "", "tx:64 less than the min:128"},
			{FieldRxRing, MaxRxRing + 1, MinRxRing, MaxRxRing, "", "requested ring size exceeds maximum"}}},
		{"zero defaults", func(c *Config, _ *Settings) { *c = Config{} }, []want{
			{FieldPageSize, 0, 0, -1, "", "page size 0 not supported (want 4096, 16384 or 65536)"},
			{FieldMaxMTU, 0, MinMTU, rxbuf.MaxMTU, "", "max MTU 0 out of range 68..65535"},
			{FieldMaxQueues, 0, 1, MaxQueues, "", "max queues 0 out of range 1..256"}}},
		{"priv flags", func(_ *Config, s *Settings) { s.PrivFlags = 6 }, []want{{FieldPrivFlags, 0, 0, -1, "", "unknown private flag bits 0x6"}}},
		{"msix one vector", func(c *Config, _ *Settings) { c.MSIXVectors = 1 }, []want{{FieldMSIX, 1, 2, MaxQueues + 1, "",
			"MSI-X vectors 1 out of range 2..257 (one for the hardware channel, one per queue; 0 = enough)"}}},
		{"msix negative", func(c *Config, _ *Settings) { c.MSIXVectors = -1 }, []want{{FieldMSIX, -1, 2, MaxQueues + 1, "",
			"MSI-X vectors -1 out of range 2..257 (one for the hardware channel, one per queue; 0 = enough)"}}},
		{"msix enough", func(c *Config, s *Settings) { c.MSIXVectors, s.Queues = 17, 16 }, nil},
		{"msix lowers max queues", func(c *Config, s *Settings) { c.MSIXVectors, s.Queues = 9, 9 },
			[]want{{FieldQueues, 9, 1, 8, FieldMSIX, "requested channel count exceeds maximum"}}},
		{"msix above max queues", func(c *Config, s *Settings) { c.MaxQueues, c.MSIXVectors, s.Queues = 4, 64, 5 },
			[]want{{FieldQueues, 5, 1, 4, FieldMaxQueues, "requested channel count exceeds maximum"}}},
		{"queues, bad msix", func(c *Config, s *Settings) { c.MSIXVectors, s.Queues = 1, 40 }, []want{{FieldMSIX, 1, 2, MaxQueues + 1, "",
			"MSI-X vectors 1 out of range 2..257 (one for the hardware channel, one per queue; 0 = enough)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := Config{Hardware: Hardware{PageSize: 4096, MaxMTU: DefaultMaxMTU, MaxQueues: DefaultMaxQueues}}, DefaultSettings()
			tc.mod(&c, &s)
			errs := Check(c, s)
			require.Len(t, errs, len(tc.want), "%v", errs)
			for i, w := range tc.want {
				e := errs[i]
				var ne *nlerr.Error
				require.True(t, errors.As(e, &ne), "%v is not an *nlerr.Error", e)
				assert.Equal(t, unix.EINVAL, ne.Errno)
				assert.Equal(t, w, want{e.Field, e.Value, e.Min, e.Max, e.MaxOf, ne.Message})
			}
		})
	}
}

// TestRoundRing: roundup_pow_of_two.
func TestRoundRing(t *testing.T) {
	for in, want := range map[int]int{-5: 1, 0: 1, 1: 1, 2: 2, 3: 4, 128: 128, 129: 256, 8191: 8192} {
		assert.Equal(t, want, RoundRing(in), "RoundRing(%d)", in)
	}
}

// TestMSIXVectorsLowerMaxQueues: a port whose adapter has 5 MSI-X vectors has at most 4 queues
// (mana_gd_query_max_resources), what its state reports and what SetChannels is held to; New
// refuses more queues to start with, as Check does.
func TestMSIXVectorsLowerMaxQueues(t *testing.T) {
	tp := newTestPort(t, func(c *Config, s *Settings) { c.MaxQueues, c.MSIXVectors, s.Queues = 16, 5, 2 })
	assert.Equal(t, 4, tp.state().MaxQueues)
	tp.locked(func() {
		require.NoError(t, tp.SetChannels(4))
		err := tp.SetChannels(5)
		var ne *nlerr.Error
		require.ErrorAs(t, err, &ne)
		assert.Equal(t, unix.EINVAL, ne.Errno)
		assert.Equal(t, "requested channel count exceeds maximum", ne.Message)
	})
	tp.locked(func() { assert.Equal(t, 4, tp.Settings().Queues) })

	_, err := New(Config{Name: "eth1", Lock: tp.mu, Hardware: Hardware{MSIXVectors: 3}, Host: tp.host, Wire: tp.wire},
		Settings{MTU: 1500, Queues: 3, RxRing: 128, TxRing: 128})
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, FieldQueues, fe.Field)
	assert.Equal(t, 2, fe.Max)
}
