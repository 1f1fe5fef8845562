package daemon

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
)

// napiRunning brings port name's TAP up and waits until the port runs, then returns its NAPIs.
func napiRunning(t *testing.T, d *Daemon, ns, name string) []vnic.NAPI {
	t.Helper()
	taptest.IP(t, ns, "link", "set", name, "up")
	require.Eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		p := d.ports[name]
		return p != nil && p.vp.State().Running
	}, 30*time.Second, 10*time.Millisecond, "%s does not run", name)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ports[name].vp.NAPIs()
}

// TestNAPISetPersists: a port starts with its file's napi_* keys on every queue index;
// napi-set through the backend changes one NAPI's queue index only, napi-get's view shows it,
// and a restart of the daemon (same file, same state directory) brings every queue index's
// settings back, the ones of queues that do not run included. A change whose state cannot be
// saved is refused and leaves the settings, one whose save fails afterwards is undone; an id the
// port has no NAPI of is ENOENT. The
// [daemon] max_pollers key bounds the data path's pollers.
func TestNAPISetPersists(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	dir := t.TempDir()
	maxPollers := 0 // valid on any machine (the default is 1 where there are two CPUs)
	doc := fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q
max_pollers = %d

[[port]]
name = "np0"
netns = %q
persistent = false
queues = 2
max_queues = 4
rx_ring = 128
tx_ring = 128
napi_defer_hard_irqs = 2
gro_flush_timeout = "20us"
`, filepath.Join(dir, "manad.sock"), filepath.Join(dir, "state"), maxPollers, ns)
	file := vnic.NAPIConfig{DeferHardIRQs: 2, GROFlushTimeout: 20 * time.Microsecond}

	d, stop := runStoppable(t, doc, Options{})
	assert.Equal(t, maxPollers, d.segments.Pollers().Max(), "max_pollers")
	napis := napiRunning(t, d, ns, "np0")
	require.Len(t, napis, 2)
	for _, n := range napis {
		assert.Equal(t, file, n.Config, "queue %d starts with the file's keys", n.Queue)
	}
	b := (*backend)(d)
	ctx := context.Background()
	d.mu.Lock()
	dev := d.ports["np0"].device()
	d.mu.Unlock()
	admin := genl.Caller{Admin: true, NetNS: dev.NetNS}
	defer7, suspend := uint32(7), time.Millisecond
	require.NoError(t, b.SetNAPI(ctx, admin, dev, napis[1].ID, genl.NAPISet{DeferHardIRQs: &defer7, IRQSuspendTimeout: &suspend}))
	q1 := vnic.NAPIConfig{DeferHardIRQs: 7, GROFlushTimeout: 20 * time.Microsecond, IRQSuspendTimeout: time.Millisecond}

	view, err := b.NetdevViews(ctx, admin, dev, genl.NetdevViewNAPIs)
	require.NoError(t, err)
	require.Len(t, view.NAPIs, 2)
	assert.Equal(t, wire.NetdevNAPI{ID: napis[1].ID, Ifindex: dev.Index, DeferHardIRQs: 7,
		GROFlushTimeout: uint64(20 * time.Microsecond), IRQSuspendTimeout: uint64(time.Millisecond)}, view.NAPIs[1])
	assert.Equal(t, uint32(2), view.NAPIs[0].DeferHardIRQs, "queue 0 keeps the file's")

	require.ErrorIs(t, b.SetNAPI(ctx, admin, dev, 1, genl.NAPISet{DeferHardIRQs: &defer7}), unix.ENOENT)

	// A state directory that cannot be written: refused before it is applied.
	blocker := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	d.mu.Lock()
	stateDir := d.cfg.Daemon.StateDir
	d.cfg.Daemon.StateDir = filepath.Join(blocker, "state")
	d.mu.Unlock()
	zero := uint32(0)
	err = b.SetNAPI(ctx, admin, dev, napis[1].ID, genl.NAPISet{DeferHardIRQs: &zero})
	require.ErrorIs(t, err, unix.ENOTDIR)
	assert.Contains(t, err.Error(), "the change was not applied")
	d.mu.Lock()
	d.cfg.Daemon.StateDir = stateDir
	assert.Equal(t, q1, d.ports["np0"].vp.NAPIConfig(1), "a refused napi-set changes nothing")
	d.mu.Unlock()

	// state.json replaced by a directory: the reservation succeeds, the write fails after the
	// change was applied, and the change is undone.
	statePath := config.StatePath(stateDir)
	require.NoError(t, os.Remove(statePath))
	require.NoError(t, os.Mkdir(statePath, 0o755))
	err = b.SetNAPI(ctx, admin, dev, napis[1].ID, genl.NAPISet{DeferHardIRQs: &zero})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the change was undone")
	require.NoError(t, os.Remove(statePath))
	d.mu.Lock()
	assert.Equal(t, q1, d.ports["np0"].vp.NAPIConfig(1), "an undone napi-set")
	d.saveState() // the retry, now that the cause is gone
	d.mu.Unlock()

	st, err := config.LoadState(stateDir)
	require.NoError(t, err)
	require.NotNil(t, st.Ports["np0"].Settings.NAPI, "the state file keeps the NAPI settings")
	require.NoError(t, stop())

	// The restart: every queue index as it was, before any queue runs.
	d2, stop2 := runStoppable(t, doc, Options{})
	defer func() { require.NoError(t, stop2()) }()
	d2.mu.Lock()
	got := d2.ports["np0"].vp.NAPIConfigs()
	d2.mu.Unlock()
	assert.Equal(t, []vnic.NAPIConfig{file, q1, file, file}, got, "after the restart")
}

// TestNAPIViewRoundTrip: the comparable form portView keeps of a port's NAPI settings gives back
// every field of every queue index, and holds every field of vnic.NAPIConfig (a field added
// there and not here would let revert miss it).
func TestNAPIViewRoundTrip(t *testing.T) {
	require.Equal(t, 4, reflect.TypeFor[vnic.NAPIConfig]().NumField(), "napiView encodes four fields: add the new one")
	tests := []struct {
		name string
		cs   []vnic.NAPIConfig
	}{
		{"none", nil},
		{"zero", make([]vnic.NAPIConfig, 3)},
		{"every field", []vnic.NAPIConfig{
			{DeferHardIRQs: math.MaxInt32, GROFlushTimeout: 20 * time.Microsecond, IRQSuspendTimeout: time.Hour, Threaded: true},
			{},
			{DeferHardIRQs: 1},
			{GROFlushTimeout: 1},
			{IRQSuspendTimeout: 1},
			{Threaded: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newNAPIView(tt.cs)
			assert.Len(t, v.configs(), len(tt.cs))
			if len(tt.cs) > 0 {
				assert.Equal(t, tt.cs, v.configs())
			}
			for i := range tt.cs {
				other := slices.Clone(tt.cs)
				other[i].Threaded = !other[i].Threaded
				assert.NotEqual(t, v, newNAPIView(other), "queue %d's change must show", i)
			}
		})
	}
}
