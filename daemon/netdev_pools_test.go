package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/transport"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keepHost holds on to every delivered buffer until release, as a socket queue would.
type keepHost struct {
	mu   sync.Mutex
	kept []*pagepool.Buffer
}

func (h *keepHost) Deliver(q int, frame []byte, buf *pagepool.Buffer) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kept = append(h.kept, buf)
	return true
}

func (h *keepHost) release() {
	h.mu.Lock()
	kept := h.kept
	h.kept = nil
	h.mu.Unlock()
	for _, b := range kept {
		b.Pool().Put(b)
	}
}

type dropWire struct{}

func (dropWire) Send(int, []byte) {}

// onePortBackend serves one vnic port (ifindex 7) through the daemon's netdev conversion; it has
// only the lookups and NetdevPort (ops() leaves every other op nil: unsupported).
type onePortBackend struct {
	vp *vnic.Port
}

func (b onePortBackend) ops() genl.Backend {
	return genl.Backend{Devices: b.Devices, DeviceByIndex: b.DeviceByIndex, DeviceByName: b.DeviceByName, NetdevPort: b.NetdevPort}
}

func (b onePortBackend) dev(c genl.Caller) genl.Device {
	return genl.Device{Index: 7, Name: "pp0", NetNS: c.NetNS}
}
func (b onePortBackend) Devices(_ context.Context, c genl.Caller) ([]genl.Device, error) {
	return []genl.Device{b.dev(c)}, nil
}
func (b onePortBackend) DeviceByIndex(_ context.Context, c genl.Caller, i uint32) (genl.Device, error) {
	if i != 7 {
		return genl.Device{}, unix.ENODEV
	}
	return b.dev(c), nil
}
func (b onePortBackend) DeviceByName(_ context.Context, c genl.Caller, name string) (genl.Device, error) {
	if name != "pp0" {
		return genl.Device{}, unix.ENODEV
	}
	return b.dev(c), nil
}
func (b onePortBackend) NetdevPort(_ context.Context, _ genl.Caller, d genl.Device) (genl.NetdevPort, error) {
	return netdevPort(d.Index, b.vp, genl.NetdevViewAll), nil
}

func frame() []byte {
	f := make([]byte, 100)
	copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5}) // local experimental ethertype
	return f
}

// TestNetdevDetachedPools: over the real socket, a port's page pools are listed with their
// NAPI; after a reconfiguration the new pools have new ids and the old pool whose buffer the
// host still holds stays listed — no napi-id, detach-time in CLOCK_BOOTTIME seconds, its
// inflight page — until that buffer returns.
func TestNetdevDetachedPools(t *testing.T) {
	var mu sync.Mutex
	vp, host := newModelPort(t, &mu, vnic.Config{Name: "pp0", Hardware: vnic.Hardware{PageSize: 16384}}, vnic.Settings{MTU: 1500, Queues: 2, RxRing: 128, TxRing: 128})
	vp.SetIfindex(7)
	mu.Lock()
	err := vp.Open()
	mu.Unlock()
	require.NoError(t, err)
	require.Equal(t, vnic.RxDelivered, vp.Receive(0, frame()), "Receive")

	srv, err := genl.NewServer(genl.ServerConfig{Backend: onePortBackend{vp: vp}.ops(), Transport: transport.Config{AdminGroup: -1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, c := serveOnePort(t, srv)

	before, err := c.PagePools(ctx)
	require.NoError(t, err)
	napis, err := c.NAPIs(ctx, 7)
	require.NoError(t, err)
	require.Len(t, before, 2, "%d pools and %d NAPIs, want 2 each: %+v %+v", len(before), len(napis), before, napis)
	require.Len(t, napis, 2, "%d pools and %d NAPIs, want 2 each: %+v %+v", len(before), len(napis), before, napis)
	assert.GreaterOrEqual(t, before[0].ID, before[1].ID, "pools not newest first: %+v", before)
	for _, p := range before {
		assert.Equal(t, uint32(7), p.Ifindex, "running pool %+v", p)
		assert.GreaterOrEqual(t, p.NAPIID, uint64(vnic.MinNAPIID), "running pool %+v", p)
		assert.Equal(t, uint64(0), p.DetachTime, "running pool %+v", p)
		assert.NotEqual(t, uint64(0), p.Inflight, "running pool %+v", p)
		assert.Equal(t, 16384*p.Inflight, p.InflightMem, "running pool %+v", p)
	}

	var ts unix.Timespec
	require.NoError(t, unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts))
	bootBefore := uint64(ts.Sec)
	mu.Lock()
	err = vp.SetMTU(1400)
	mu.Unlock()
	require.NoError(t, err)
	require.NoError(t, unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts))
	bootAfter := uint64(ts.Sec)

	after, err := c.PagePools(ctx)
	require.NoError(t, err)
	require.Len(t, after, 3, "%d pools after the rebuild, want 2 new + 1 detached: %+v", len(after), after)
	// Newest first, as the kernel: the new pools, then the old one (queue 0's, which had the
	// lower id of the two before).
	old := after[2]
	assert.Equal(t, before[1].ID, old.ID, "detached pool %+v, want pool %d, no NAPI, 1 page, detached in [%d, %d]s", old, before[1].ID, bootBefore, bootAfter)
	assert.Equal(t, uint64(0), old.NAPIID, "detached pool %+v, want pool %d, no NAPI, 1 page, detached in [%d, %d]s", old, before[1].ID, bootBefore, bootAfter)
	assert.Equal(t, uint64(1), old.Inflight, "detached pool %+v, want pool %d, no NAPI, 1 page, detached in [%d, %d]s", old, before[1].ID, bootBefore, bootAfter)
	assert.Equal(t, uint64(16384), old.InflightMem, "detached pool %+v, want pool %d, no NAPI, 1 page, detached in [%d, %d]s", old, before[1].ID, bootBefore, bootAfter)
	assert.GreaterOrEqual(t, old.DetachTime, bootBefore, "detached pool %+v, want pool %d, no NAPI, 1 page, detached in [%d, %d]s", old, before[1].ID, bootBefore, bootAfter)
	assert.LessOrEqual(t, old.DetachTime, bootAfter, "detached pool %+v, want pool %d, no NAPI, 1 page, detached in [%d, %d]s", old, before[1].ID, bootBefore, bootAfter)
	for _, p := range after[:2] {
		if p.ID == before[0].ID || p.ID == before[1].ID || p.DetachTime != 0 || p.NAPIID == 0 {
			t.Errorf("new pool %+v", p)
		}
	}
	stats, err := c.PagePoolStats(ctx)
	require.NoError(t, err)
	if len(stats) != 3 || stats[2].Info != (wire.NetdevPagePoolInfo{ID: old.ID, Ifindex: 7}) || stats[2].AllocSlow == 0 {
		t.Errorf("page-pool-stats %+v", stats)
	}

	host.release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pools, err := c.PagePools(ctx)
		require.NoError(t, err)
		if len(pools) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("detached pool still listed after its buffer returned: %+v", pools)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// notifications reads a subscription in the background; take waits for the next n.
type notifications struct {
	ch   chan client.Notification
	errc chan error
}

func readNotifications(ctx context.Context, sub *client.Subscription) *notifications {
	n := &notifications{ch: make(chan client.Notification, 64), errc: make(chan error, 1)}
	go func() {
		for {
			ns, err := sub.Next(ctx)
			if err != nil {
				n.errc <- err
				return
			}
			for _, x := range ns {
				n.ch <- x
			}
		}
	}()
	return n
}

// take returns the next n notifications. The deadline only guards against a hang.
func (n *notifications) take(t *testing.T, what string, count int) []client.Notification {
	t.Helper()
	var out []client.Notification
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
	for len(out) < count {
		select {
		case x := <-n.ch:
			out = append(out, x)
		case err := <-n.errc:
			t.Fatalf("%s: subscription ended after %v: %v", what, out, err)
		case <-guard.C:
			t.Fatalf("%s: gave up waiting after %d of %d notifications: %+v", what, len(out), count, out)
		}
	}
	return out
}

// TestNetdevPagePoolNotifications: over the real socket, a page-pool subscriber sees each pool
// as the kernel announces it: an add per new pool (no NAPI, nothing in flight); at a full-page-rx
// flip a change for the old pool whose buffer the host holds (detach time, its page), a del for
// the old pool with nothing out, adds for the new ones; the held pool's del once its buffer is
// back. At the port's deletion with a buffer held: the change and del of its queues' pools, then
// page_pool_unreg_netdev's change without ifindex, and the del without ifindex once the buffer
// is back. Exactly those, in that order: each batch starts where the last ended. The events go
// through the daemon's own OnPagePool handler (notifyNetdevPool).
func TestNetdevPagePoolNotifications(t *testing.T) {
	var mu sync.Mutex
	ns, err := selfNetNS()
	require.NoError(t, err)
	d := &Daemon{}
	p := &port{ns: ns}
	vp, host := newModelPort(t, &mu, vnic.Config{Name: "pp0", Hardware: vnic.Hardware{PageSize: 16384},
		OnPagePool: func(_ *vnic.Port, ev vnic.PagePoolEvent) { d.notifyNetdevPool(p, ev) }},
		vnic.Settings{MTU: 1500, Queues: 2, RxRing: 128, TxRing: 128})
	p.vp = vp
	vp.SetIfindex(7)
	srv, err := genl.NewServer(genl.ServerConfig{Backend: onePortBackend{vp: vp}.ops(), Transport: transport.Config{AdminGroup: -1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	d.srv = srv
	ctx, c := serveOnePort(t, srv)
	sub, err := c.Subscribe(ctx, client.WithNetdev())
	require.NoError(t, err)
	t.Cleanup(func() { sub.Close() })
	ntfs := readNotifications(ctx, sub)
	type ntf struct {
		kind client.NotificationKind
		pool wire.NetdevPagePool
	}
	check := func(what string, got []client.Notification, want []ntf) {
		t.Helper()
		for i, n := range got {
			if n.PagePool == nil || n.Kind != want[i].kind || *n.PagePool != want[i].pool || n.Interface.Index != int(want[i].pool.Ifindex) {
				t.Errorf("%s: notification %d is %v %+v, want %v %+v", what, i, n.Kind, n.PagePool, want[i].kind, want[i].pool)
			}
		}
	}

	mu.Lock()
	err = vp.Open()
	mu.Unlock()
	require.NoError(t, err)
	old := vp.PagePools()
	got := ntfs.take(t, "open", 2)
	check("open", got, []ntf{{client.PagePoolAdded, wire.NetdevPagePool{ID: uint64(old[0].ID), Ifindex: 7}},
		{client.PagePoolAdded, wire.NetdevPagePool{ID: uint64(old[1].ID), Ifindex: 7}}})
	require.Equal(t, vnic.RxDelivered, vp.Receive(0, frame()), "Receive")

	var ts unix.Timespec
	require.NoError(t, unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts))
	bootBefore := uint64(ts.Sec)
	mu.Lock()
	err = vp.SetPrivFlags(1) // full-page-rx: a rebuild at MTU 1500 on 16K pages
	mu.Unlock()
	require.NoError(t, err)
	require.NoError(t, unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts))
	now := vp.PagePools()
	require.Len(t, now, 3, "pools after the flip %+v, want 2 new + 1 detached", now)
	got = ntfs.take(t, "full-page-rx on", 4)
	detach := got[0].PagePool.DetachTime
	assert.GreaterOrEqual(t, detach, bootBefore, "change's detach-time %d outside [%d, %d]", detach, bootBefore, ts.Sec)
	assert.LessOrEqual(t, detach, uint64(ts.Sec), "change's detach-time %d outside [%d, %d]", detach, bootBefore, ts.Sec)
	check("full-page-rx on", got, []ntf{
		{client.PagePoolChanged, wire.NetdevPagePool{ID: uint64(old[0].ID), Ifindex: 7, Inflight: 1, InflightMem: 16384, DetachTime: detach}},
		{client.PagePoolRemoved, wire.NetdevPagePool{ID: uint64(old[1].ID), Ifindex: 7}},
		{client.PagePoolAdded, wire.NetdevPagePool{ID: uint64(now[0].ID), Ifindex: 7}},
		{client.PagePoolAdded, wire.NetdevPagePool{ID: uint64(now[1].ID), Ifindex: 7}},
	})

	host.release()
	got = ntfs.take(t, "buffer back", 1)
	check("buffer back", got, []ntf{{client.PagePoolRemoved, wire.NetdevPagePool{ID: uint64(old[0].ID), Ifindex: 7, DetachTime: detach}}})
	if pools, err := c.PagePools(ctx); err != nil || len(pools) != 2 {
		t.Errorf("after the del, page-pool-get dump %+v (%v), want the 2 new pools", pools, err)
	}

	// The port's deletion (removePort: teardown, then unregisterNetdevPools before the dev
	// del) with a buffer of queue 0 held.
	require.Equal(t, vnic.RxDelivered, vp.Receive(0, frame()), "Receive")
	mu.Lock()
	td := vp.Shutdown()
	d.unregisterNetdevPools(p)
	mu.Unlock()
	got = ntfs.take(t, "delete", 3)
	detach = got[0].PagePool.DetachTime
	held := wire.NetdevPagePool{ID: uint64(now[0].ID), Ifindex: 7, Inflight: 1, InflightMem: 16384, DetachTime: detach}
	gone := held
	gone.Ifindex = 0
	check("delete", got, []ntf{{client.PagePoolChanged, held},
		{client.PagePoolRemoved, wire.NetdevPagePool{ID: uint64(now[1].ID), Ifindex: 7}},
		{client.PagePoolChanged, gone}})
	host.release()
	got = ntfs.take(t, "deleted port's buffer back", 1)
	check("deleted port's buffer back", got, []ntf{{client.PagePoolRemoved, wire.NetdevPagePool{ID: uint64(now[0].ID), DetachTime: detach}}})
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	assert.NoError(t, td.Wait(wctx))
}

// newModelPort returns a vnic port on a keepHost (its buffers held until the test ends) and a
// wire that drops what it sends, locked by mu; cfg's Name, PageSize and callbacks are the
// caller's, the rest is filled in. The port is shut down, and its teardown awaited, when the
// test ends, after the host let go of its buffers.
func newModelPort(t *testing.T, mu *sync.Mutex, cfg vnic.Config, set vnic.Settings) (*vnic.Port, *keepHost) {
	t.Helper()
	host := &keepHost{}
	cfg.Lock, cfg.Host, cfg.Wire = mu, host, dropWire{}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.PoolReleaseInterval == 0 {
		cfg.PoolReleaseInterval = 5 * time.Millisecond
	}
	vp, err := vnic.New(cfg, set)
	require.NoError(t, err)
	t.Cleanup(func() {
		host.release()
		mu.Lock()
		td := vp.Shutdown()
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, td.Wait(ctx), "teardown")
	})
	return vp, host
}

// serveOnePort serves srv on a fresh Unix socket until the test ends and returns a client
// connected to it, with the context the server runs under.
func serveOnePort(t *testing.T, srv *genl.Server) (context.Context, *client.Client) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manad.sock")
	l, err := transport.Listen(path, 0o600, -1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "Serve")
	})
	c, err := client.Dial(path)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return ctx, c
}
