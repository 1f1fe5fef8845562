package wire

import (
	"slices"
	"testing"

	"github.com/manad/manad/genl/nlattr"
	"github.com/stretchr/testify/assert"
)

func TestNetdevXDPActList(t *testing.T) {
	for _, tt := range []struct {
		v    uint64
		want []string
	}{
		{0, []string{}},
		{1, []string{"basic"}},
		{1 | 2 | 32, []string{"basic", "redirect", "rx-sg"}}, // a veth's
		{NetdevXDPActXSKZeroCopy, []string{"xsk-zerocopy"}},  // bit 3
		{1<<6 | 1<<7 | 1<<63, []string{"ndo-xmit-sg", "bit 7", "bit 63"}},
	} {
		got := NetdevXDPActList(tt.v)
		assert.True(t, slices.Equal(got, tt.want), "NetdevXDPActList(%#x) = %q, want %q", tt.v, got, tt.want)
	}
}

// TestNetdevNAPIRoundTrip: every napi-get attribute reads back as written, a timeout beyond
// 32 bits as nla_put_uint's 8 bytes.
func TestNetdevNAPIRoundTrip(t *testing.T) {
	for _, want := range []NetdevNAPI{
		{ID: 8193, Ifindex: 7},
		{ID: 8194, Ifindex: 7, Threaded: NetdevNAPIThreadedEnabled, DeferHardIRQs: 2, IRQSuspendTimeout: 20_000_000, GROFlushTimeout: 1 << 40},
	} {
		var b nlattr.Builder
		NetdevNAPITable.Put(&b, &want)
		var got NetdevNAPI
		if err := NetdevNAPITable.Decode(b.B, &got); err != nil || got != want {
			t.Errorf("round trip of %+v: %+v, %v", want, got, err)
		}
	}
}
