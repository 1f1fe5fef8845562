package daemon

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRSSKeyRecorded: a hash key changed through the backend's one reconfiguration path
// (changeLocked, which RSS_SET uses like every other set) is written to the state file at once;
// the indirection table is not kept, and a port created from that state starts with the key.
func TestRSSKeyRecorded(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	doc := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n\n[[port]]\nname = \"hk0\"\nnetns = %q\npersistent = false\nqueues = 2\n",
		filepath.Join(dir, "manad.sock"), stateDir, ns)
	d := runTest(t, doc, Options{})
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "hk0", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set up: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d.mu.Lock()
		up := d.ports["hk0"] != nil && d.ports["hk0"].vp.State().Running
		d.mu.Unlock()
		if up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("port did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	key := bytes.Repeat([]byte{0x3c}, vnic.RSSKeySize)
	b := (*backend)(d)
	d.mu.Lock()
	dev := d.ports["hk0"].device()
	d.mu.Unlock()
	indir := make([]uint32, vnic.RSSIndirSize) // every entry queue 0
	require.NoError(t, b.change(genl.Caller{}, dev, "rss", "key", func(p *port) error {
		return p.vp.SetRSS(vnic.RSSUpdate{Key: key, Indir: indir})
	}))
	st, err := config.LoadState(stateDir)
	require.NoError(t, err)
	got := st.Ports["hk0"].Settings.RSSKey
	require.Equal(t, hex.EncodeToString(key), got, "state file rss_key %q, want %x", got, key)

	// What the next start creates from that state: the key, and mana's default table.
	ports, notes := config.Merge(d.cfg, st)
	require.Empty(t, notes, "Merge: %+v, notes %v", ports, notes)
	require.Len(t, ports, 1, "Merge: %+v, notes %v", ports, notes)
	require.Equal(t, key, ports[0].Spec.RSSKey, "Merge: %+v, notes %v", ports, notes)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removePort(d.ports["hk0"])
	p, err := d.createPort(ports[0].Spec, true, false)
	require.NoError(t, err)
	r := p.vp.RSS()
	assert.Equal(t, key, r.Key[:], "recreated port's key %x", r.Key)
	for i, q := range r.Indir {
		require.Equal(t, uint32(i%2), q, "recreated port's table entry %d = %d, want the default spread over 2 queues", i, q)
	}
}
