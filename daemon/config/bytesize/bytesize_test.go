package bytesize

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"unlimited", Unlimited, true}, {" Unlimited ", Unlimited, true},
		{"1048576", 1 << 20, true}, {"2G", 2 << 30, true}, {"2gib", 2 << 30, true}, {"512MiB", 512 << 20, true},
		{"3 K", 3 << 10, true}, {"7B", 7, true}, {"1T", 1 << 40, true},
		{"", 0, false}, {"0", 0, false}, {"-1", 0, false}, {"lots", 0, false}, {"1.5G", 0, false},
		{"8388608T", 0, false}, // 2^23 TiB = 2^63: overflows int64
	} {
		got, ok := Parse(tc.in)
		assert.Equal(t, tc.ok, ok, "Parse(%q)", tc.in)
		assert.Equal(t, tc.want, got, "Parse(%q)", tc.in)
	}
}

func TestFormatParsesBack(t *testing.T) {
	for _, b := range []int64{Unlimited, 1, 1000, 1 << 10, 1536 << 20, 2 << 30, 3 << 40} {
		got, ok := Parse(Format(b))
		assert.True(t, ok, "Parse(Format(%d) = %q)", b, Format(b))
		assert.Equal(t, b, got, "Parse(Format(%d) = %q)", b, Format(b))
	}
	assert.Equal(t, "2GiB", Format(2<<30))
	assert.Equal(t, "1536MiB", Format(1536<<20))
	assert.Equal(t, "unlimited", Format(Unlimited))
}
