package main

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	opts, err := ethtoolOptions(newRoot(&app{}, func(string) string { return "" }))
	require.NoError(t, err)
	for _, tc := range tests {
		got := rewriteEthtoolArgs(opts, tc.in)
		assert.True(t, slices.Equal(got, tc.want), "rewriteEthtoolArgs(%q) = %q, want %q", tc.in, got, tc.want)
	}
	in := []string{"-g", "eth0"}
	rewriteEthtoolArgs(opts, in)
	assert.Equal(t, "-g", in[0], "rewriteEthtoolArgs modified its argument")
}

// TestEthtoolOptionsDeclaredOnce: an ethtool option is declared by one command; a second
// declaration is an error naming both, and a subcommand's annotation is not an option.
func TestEthtoolOptionsDeclaredOnce(t *testing.T) {
	root := &cobra.Command{Use: "manactl"}
	ring := &cobra.Command{Use: "show-ring", Annotations: ethtoolAlias("-g", "--show-ring")}
	sub := &cobra.Command{Use: "deep", Annotations: ethtoolAlias("-d")}
	ring.AddCommand(sub)
	root.AddCommand(ring)
	m, err := ethtoolOptions(root)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"-g": "show-ring", "--show-ring": "show-ring"}, m)

	root.AddCommand(&cobra.Command{Use: "other", Annotations: ethtoolAlias("-g")})
	_, err = ethtoolOptions(root)
	assert.EqualError(t, err, "ethtool option -g is declared by other and show-ring")
}
