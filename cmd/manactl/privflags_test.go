package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic/privflag"
)

// TestParsePrivFlags: port add's --priv-flags reads the port's declared flags (privflag), so
// every flag the daemon has is accepted here under the same name, and nothing else.
func TestParsePrivFlags(t *testing.T) {
	all, want := []string{}, uint32(0)
	for i, n := range privflag.Names {
		got, err := parsePrivFlags(n)
		require.NoError(t, err, n)
		assert.Equal(t, uint32(1)<<i, got, n)
		all, want = append(all, n), want|1<<i
	}
	got, err := parsePrivFlags(strings.Join(all, " , ") + ",")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = parsePrivFlags("full-page-rx,turbo")
	assert.EqualError(t, err, "unknown private flag 'turbo' (want full-page-rx)")
}
