package genl

import (
	"testing"

	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCmdNames: every command a family serves has a metric name of its own.
func TestCmdNames(t *testing.T) {
	s, err := NewServer(ServerConfig{Backend: NewMemBackend().Ops()})
	require.NoError(t, err)
	for _, f := range s.familyList() {
		seen := map[string]bool{}
		for _, o := range f.ops {
			n := f.cmdName(o.cmd)
			if n == "unknown" || seen[n] {
				t.Errorf("%s command %d: name %q (unknown or taken)", f.name, o.cmd, n)
			}
			seen[n] = true
		}
	}
	for cmd, want := range map[uint8]string{wire.CmdPortGet: "port-get", wire.CmdStatsGet: "stats-get", wire.CmdSetOption: "set-option", wire.CmdPortNewNtf: "unknown"} {
		assert.Equal(t, want, s.families[manadID].cmdName(cmd), "manad command %d", cmd)
	}
}
