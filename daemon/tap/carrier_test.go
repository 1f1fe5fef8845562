package tap

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetCarrier turns an up TAP's carrier off and on and reads it back as iproute2 shows it.
func TestSetCarrier(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mc")
	d := openTest(t, Config{Name: name, Queues: 2, NetNS: ns})
	require.NoError(t, d.SetUp(true))
	flags := func() []string {
		l, ok := taptest.ShowLink(t, ns, name)
		require.True(t, ok, "%s gone", name)
		return l.Flags
	}
	for _, tc := range []struct {
		on        bool
		want, not string
	}{{false, "NO-CARRIER", "LOWER_UP"}, {true, "LOWER_UP", "NO-CARRIER"}, {false, "NO-CARRIER", "LOWER_UP"}} {
		require.NoError(t, d.SetCarrier(tc.on), "SetCarrier(%v)", tc.on)
		if f := flags(); !slices.Contains(f, tc.want) || slices.Contains(f, tc.not) {
			t.Errorf("carrier %v: flags %v, want %s and not %s", tc.on, f, tc.want, tc.not)
		}
	}
	require.NoError(t, d.Close())
	err := d.SetCarrier(true)
	assert.ErrorIs(t, err, unix.ENODEV, "SetCarrier after Close: %v, want ENODEV", err)
}
