package daemon

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer safe for the daemon's concurrent log writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestShutdownDeletesTAPsByGroup: the daemon's non-persistent TAPs carry its netdev group, and
// shutdown deletes them with one request per namespace; when someone put a device of their own
// into the group, shutdown leaves that device alone and deletes the TAPs one by one.
func TestShutdownDeletesTAPsByGroup(t *testing.T) {
	taptest.Require(t)
	for _, foreign := range []bool{false, true} {
		t.Run(map[bool]string{false: "group", true: "foreign member"}[foreign], func(t *testing.T) {
			ns := taptest.NetNS(t)
			var logs lockedBuffer
			d, names, stop := startStoppable(t, ns, 8, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			g := strconv.FormatUint(uint64(d.group), 10)
			assert.Equal(t, uint32(0x6d), d.group>>24, "TAP group %#x, want 0x6d000001..0x6dffffff", d.group)
			assert.NotEqual(t, uint32(0x6d<<24), d.group, "TAP group %#x, want 0x6d000001..0x6dffffff", d.group)
			members := taptest.IP(t, ns, "-o", "link", "show", "group", g)
			for _, name := range names {
				assert.Contains(t, members, " "+name+": ", "%s not in the daemon's group %s", name, g)
			}
			veth := taptest.Name("dv")
			if foreign {
				taptest.IP(t, ns, "link", "add", veth, "group", g, "type", "veth", "peer", "name", taptest.Name("dw"))
			}
			require.NoError(t, stop(), "Run")
			for _, name := range names {
				_, ok := taptest.ShowLink(t, ns, name)
				assert.False(t, ok, "%s still exists after shutdown", name)
			}
			batched := strings.Contains(logs.String(), "TAPs deleted by group")
			assert.NotEqual(t, foreign, batched, "deleted by group: %v, want %v; logs:\n%s", batched, !foreign, logs.String())
			if _, ok := taptest.ShowLink(t, ns, veth); foreign {
				assert.True(t, ok, "the foreign member %s of the group was deleted", veth)
			}
		})
	}
}
