package daemon

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNetdevIdentity: the daemon gives its ports one id source, so page-pool and NAPI ids are
// unique among all of them, and every port reports its TAP's ifindex; a port's rx_alloc reaches
// its model (a no-pool port lists no page pool).
func TestNetdevIdentity(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	dir := t.TempDir()
	doc := fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q

[[port]]
name = "hp0"
netns = %q
persistent = false
queues = 2

[[port]]
name = "hp1"
netns = %q
persistent = false
queues = 3

[[port]]
name = "hp2"
netns = %q
persistent = false
queues = 1
rx_alloc = "no-pool"
`, filepath.Join(dir, "manad.sock"), filepath.Join(dir, "state"), ns, ns, ns)
	d := runTest(t, doc, Options{})

	// Ports start down; bring the TAPs up as an administrator would and let the link watchers
	// open the ports.
	names := []string{"hp0", "hp1", "hp2"}
	for _, name := range names {
		out, err := exec.Command("ip", "-n", ns, "link", "set", name, "up").CombinedOutput()
		require.NoError(t, err, "ip link set %s up: %v: %s", name, err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d.mu.Lock()
		up := 0
		for _, name := range names {
			if p := d.ports[name]; p != nil && p.vp.State().Running {
				up++
			}
		}
		d.mu.Unlock()
		if up == len(names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d ports came up", up, len(names))
		}
		time.Sleep(10 * time.Millisecond)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	pools, napis := map[uint32]string{}, map[uint32]string{}
	for _, name := range names {
		p := d.ports[name]
		got := p.vp.Ifindex()
		assert.NotEqual(t, 0, got, "%s: ifindex %d, TAP's %d", name, got, p.index)
		assert.Equal(t, int(p.index), got, "%s: ifindex %d, TAP's %d", name, got, p.index)
		for _, n := range p.vp.NAPIs() {
			other, dup := napis[n.ID]
			assert.False(t, dup, "NAPI id %d of %s is also %s's", n.ID, name, other)
			napis[n.ID] = name
		}
		pps := p.vp.PagePools()
		want := map[string]int{"hp0": 2, "hp1": 3, "hp2": 0}[name]
		assert.Len(t, pps, want, "%s: %d page pools, want %d", name, len(pps), want)
		for _, pp := range pps {
			other, dup := pools[pp.ID]
			assert.False(t, dup, "page-pool id %d of %s is also %s's", pp.ID, name, other)
			pools[pp.ID] = name
		}
	}
	assert.Len(t, napis, 6, "%d NAPIs, want 6", len(napis))
}
