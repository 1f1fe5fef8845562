package client

import (
	"net"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSocketPollsOnlyWithProcessorsToSpare: a socket polls for its reply (busyPoll) when the
// process has two processors or more, and parks at once on one, where manad needs the CPU the
// poll would hold to send the reply.
func TestSocketPollsOnlyWithProcessorsToSpare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	defer l.Close()
	for _, tc := range []struct {
		procs int
		want  bool // polls
	}{{1, false}, {2, true}, {4, true}} {
		old := runtime.GOMAXPROCS(tc.procs)
		c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			runtime.GOMAXPROCS(old)
			t.Fatal(err)
		}
		s, err := newUnixSocket(c, 1)
		runtime.GOMAXPROCS(old)
		require.NoError(t, err)
		if got := s.poll == busyPoll; got != tc.want || (!tc.want && s.poll != 0) {
			t.Errorf("GOMAXPROCS %d: poll %v, want polling %v (busyPoll %v)", tc.procs, s.poll, tc.want, busyPoll)
		}
		s.Close()
	}
}
