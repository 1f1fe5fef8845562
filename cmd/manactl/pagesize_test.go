package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePageSize: manactl reads a page size as the configuration file does (one parser,
// rxbuf.ParsePageSize), so "4KiB", which the file accepts, is accepted here too (issue 27).
func TestParsePageSize(t *testing.T) {
	for in, want := range map[string]uint32{
		"4K": 4096, "4k": 4096, "4KiB": 4096, "4kib": 4096, "4KB": 4096, " 16K ": 16384,
		"64K": 65536, "4096": 4096, "65536": 65536,
	} {
		got, err := parsePageSize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "K", "0", "-4K", "4M", "four", "99999999999K"} {
		_, err := parsePageSize(in)
		assert.Error(t, err, in)
	}
}
