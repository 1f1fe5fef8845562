package datapath

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestPollersBound(t *testing.T) {
	p := newPollers()
	allowed := maxPollersAllowed()
	for _, tc := range []struct {
		n  int
		ok bool
	}{{-1, false}, {0, true}, {allowed, true}, {allowed + 1, false}} {
		err := p.SetMax(tc.n)
		if tc.ok {
			require.NoError(t, err, "SetMax(%d)", tc.n)
			assert.Equal(t, tc.n, p.Max())
		} else {
			require.ErrorIs(t, err, unix.EINVAL, "SetMax(%d)", tc.n)
		}
	}
	require.NoError(t, p.SetMax(0))
	assert.False(t, p.TryAcquire(), "no slot with a bound of 0")
	if allowed == 0 {
		t.Skip("one CPU: no poller may run (the bound's range is 0..0)")
	}
	require.NoError(t, p.SetMax(1))
	require.True(t, p.TryAcquire())
	assert.False(t, p.TryAcquire(), "a second slot beyond a bound of 1")
	assert.Equal(t, 1, p.InUse())
	p.Release()
	assert.True(t, p.TryAcquire())
	p.Release()
	assert.Zero(t, p.InUse())
}
