package privflag

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// TestParse: every declared name parses to its bit and back; an unknown name gives EINVAL and
// lists the names that exist.
func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      []string
		want    uint32
		message string
	}{
		{name: "none", in: nil, want: 0},
		{name: "full-page-rx", in: []string{"full-page-rx"}, want: FullPageRx},
		{name: "twice", in: []string{"full-page-rx", "full-page-rx"}, want: FullPageRx},
		{name: "unknown", in: []string{"full-page-rx", "turbo"}, message: `unknown private flag "turbo" (want full-page-rx)`},
		{name: "case", in: []string{"Full-Page-Rx"}, message: `unknown private flag "Full-Page-Rx" (want full-page-rx)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.message != "" {
				var e *nlerr.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, unix.EINVAL, e.Errno)
				assert.Equal(t, tt.message, e.Message)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestNames: each name is its bit's, NamesOf gives back what Parse read, and unnamed bits are
// refused by Check and left out by NamesOf.
func TestNames(t *testing.T) {
	for i, n := range Names {
		b, ok := Bit(n)
		require.True(t, ok, n)
		assert.Equal(t, uint32(1)<<i, b, n)
		assert.Equal(t, []string{n}, NamesOf(b))
		assert.NoError(t, Check(b))
	}
	assert.Equal(t, []string{}, NamesOf(0))
	assert.Equal(t, []string{"full-page-rx"}, NamesOf(FullPageRx|1<<7))
	err := Check(FullPageRx | 1<<7)
	var e *nlerr.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, unix.EINVAL, e.Errno)
	assert.Equal(t, "unknown private flag bits 0x80", e.Message)
	assert.Equal(t, "full-page-rx", Want())
}
