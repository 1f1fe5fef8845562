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
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
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

// onePortBackend serves one vnic port (ifindex 7) through the daemon's netdev conversion; only
// the lookups and NetdevPort are implemented (the embedded nil Backend is never called).
type onePortBackend struct {
	genl.Backend
	vp *vnic.Port
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
	host := &keepHost{}
	vp, err := vnic.New(vnic.Config{Name: "pp0", Lock: &mu, PageSize: 16384, Host: host, Wire: dropWire{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PoolReleaseInterval: 5 * time.Millisecond},
		vnic.Settings{MTU: 1500, Queues: 2, RxRing: 128, TxRing: 128})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		host.release()
		mu.Lock()
		td := vp.Shutdown()
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := td.Wait(ctx); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	vp.SetIfindex(7)
	mu.Lock()
	err = vp.Open()
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if r := vp.Receive(0, frame()); r != vnic.RxDelivered {
		t.Fatalf("Receive: %v", r)
	}

	srv, err := genl.NewServer(genl.ServerConfig{Backend: onePortBackend{vp: vp}, AdminGroup: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "manad.sock")
	l, err := genl.Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	c, err := client.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	before, err := c.PagePools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	napis, err := c.NAPIs(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || len(napis) != 2 {
		t.Fatalf("%d pools and %d NAPIs, want 2 each: %+v %+v", len(before), len(napis), before, napis)
	}
	if before[0].ID < before[1].ID {
		t.Errorf("pools not newest first: %+v", before)
	}
	for _, p := range before {
		if p.Ifindex != 7 || p.NAPIID < vnic.MinNAPIID || p.DetachTime != 0 || p.Inflight == 0 || p.InflightMem != 16384*p.Inflight {
			t.Errorf("running pool %+v", p)
		}
	}

	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	bootBefore := uint64(ts.Sec)
	mu.Lock()
	err = vp.SetMTU(1400)
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	bootAfter := uint64(ts.Sec)

	after, err := c.PagePools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 3 {
		t.Fatalf("%d pools after the rebuild, want 2 new + 1 detached: %+v", len(after), after)
	}
	// Newest first, as the kernel: the new pools, then the old one (queue 0's, which had the
	// lower id of the two before).
	old := after[2]
	if old.ID != before[1].ID || old.NAPIID != 0 || old.Inflight != 1 || old.InflightMem != 16384 ||
		old.DetachTime < bootBefore || old.DetachTime > bootAfter {
		t.Errorf("detached pool %+v, want pool %d, no NAPI, 1 page, detached in [%d, %d]s", old, before[1].ID, bootBefore, bootAfter)
	}
	for _, p := range after[:2] {
		if p.ID == before[0].ID || p.ID == before[1].ID || p.DetachTime != 0 || p.NAPIID == 0 {
			t.Errorf("new pool %+v", p)
		}
	}
	stats, err := c.PagePoolStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || stats[2].Info != (wire.NetdevPagePoolInfo{ID: old.ID, Ifindex: 7}) || stats[2].AllocSlow == 0 {
		t.Errorf("page-pool-stats %+v", stats)
	}

	host.release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pools, err := c.PagePools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pools) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("detached pool still listed after its buffer returned: %+v", pools)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
