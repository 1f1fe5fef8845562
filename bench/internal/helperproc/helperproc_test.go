package helperproc

import (
	"strings"
	"testing"

	"github.com/manad/manad/bench/internal/teardown"
	"github.com/stretchr/testify/require"
)

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		err    string // "" for ready
	}{
		{"ready on stdout", "echo starting; echo ready; exec sleep 60", ""},
		{"ready on stderr", "echo ready >&2; exec sleep 60", ""},
		{"exits first", "echo starting; exit 3", "exited before it was ready"},
		{"never ready, exits", "echo nearly; exit 0", "exited before it was ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var td teardown.List
			defer td.Run()
			err := Start(&td, "ready", "sh", "-c", tc.script)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Start: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Start: %v, want an error containing %q", err, tc.err)
			}
			require.NotNil(t, td.LastProc(), "the helper was not added to the teardown list")
		})
	}
}

func TestStartMissingBinary(t *testing.T) {
	var td teardown.List
	defer td.Run()
	require.Error(t, Start(&td, "ready", "/nonexistent/helper"), "Start of a missing binary succeeded")
}

func TestBinaryGiven(t *testing.T) {
	got, err := Binary("/usr/local/bin/manad", t.TempDir(), "./cmd/manad")
	require.NoError(t, err, "Binary = %q, %v; want the given path, built nothing", got, err)
	require.Equal(t, "/usr/local/bin/manad", got, "Binary = %q, %v; want the given path, built nothing", got, err)
}
