package main

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRewriteEthtoolArgs(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"-g", "eth0"}, []string{"show-ring", "eth0"}},
		{[]string{"--show-ring", "eth0"}, []string{"show-ring", "eth0"}},
		{[]string{"-G", "eth0", "rx", "512"}, []string{"set-ring", "eth0", "rx", "512"}},
		{[]string{"-l", "eth0"}, []string{"show-channels", "eth0"}},
		{[]string{"-L", "eth0", "combined", "2"}, []string{"set-channels", "eth0", "combined", "2"}},
		{[]string{"-S", "eth0"}, []string{"stats", "eth0"}},
		{[]string{"--statistics", "eth0"}, []string{"stats", "eth0"}},
		{[]string{"--show-priv-flags", "eth0"}, []string{"show-priv-flags", "eth0"}},
		{[]string{"--set-priv-flags", "eth0", "full-page-rx", "on"}, []string{"set-priv-flags", "eth0", "full-page-rx", "on"}},
		{[]string{"--monitor"}, []string{"monitor"}},
		// Global options may come first, as ethtool's --json does.
		{[]string{"--json", "-g", "eth0"}, []string{"--json", "show-ring", "eth0"}},
		{[]string{"--kernel", "--json", "-l", "eth0"}, []string{"--kernel", "--json", "show-channels", "eth0"}},
		{[]string{"--socket", "/x.sock", "-S", "eth0"}, []string{"--socket", "/x.sock", "stats", "eth0"}},
		{[]string{"--socket=/x.sock", "-S", "eth0"}, []string{"--socket=/x.sock", "stats", "eth0"}},
		// Only the command position is rewritten.
		{[]string{"show-ring", "-g"}, []string{"show-ring", "-g"}},
		{[]string{"list", "-l"}, []string{"list", "-l"}},
		{[]string{"--socket", "-g", "list"}, []string{"--socket", "-g", "list"}},
		{[]string{"-h"}, []string{"-h"}},
		{nil, nil},
	}
	for _, tc := range tests {
		got := rewriteEthtoolArgs(tc.in)
		assert.True(t, slices.Equal(got, tc.want), "rewriteEthtoolArgs(%q) = %q, want %q", tc.in, got, tc.want)
	}
	in := []string{"-g", "eth0"}
	rewriteEthtoolArgs(in)
	assert.Equal(t, "-g", in[0], "rewriteEthtoolArgs modified its argument")
}
