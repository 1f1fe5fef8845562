package wire

import (
	"slices"
	"testing"
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
		if got := NetdevXDPActList(tt.v); !slices.Equal(got, tt.want) {
			t.Errorf("NetdevXDPActList(%#x) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
