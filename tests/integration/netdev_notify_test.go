package integration

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPagePoolNotificationsDuringTransfer flips full-page-rx 20 times on port B while a TCP
// stream runs into it, with a netdev page-pool subscriber in B's namespace, then brings B down.
// Every pool's notifications must follow the kernel's page_pool_user.c, counted exactly: one
// add per new pool (ifindex, no NAPI, nothing in flight); for each destroyed pool exactly one
// del, preceded by at most one change (detached with buffers out: detach-time, no NAPI) whose
// detach-time the del repeats, a del without change carrying none; nothing after the del; four
// new pools per flip; and no dev change. Whether a pool still had buffers out when its queue
// went is the traffic's business, so the test counts both kinds and checks each against the
// rules.
func TestPagePoolNotificationsDuringTransfer(t *testing.T) {
	p := startPair(t, "", `page_size = "64K"`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	harness.Eventually(t, "port B up", func() bool { return p.info(t, p.clientB, p.portB).Running })
	ifi, err := strconv.Atoi(strings.TrimSpace(harness.Run(t, p.nsB, "cat", "/sys/class/net/"+p.portB+"/ifindex")))
	require.NoError(t, err)
	var sub *client.Subscription
	require.NoError(t, harness.InNetNS(p.nsB, func() (err error) { sub, err = p.clientB.Subscribe(ctx, client.WithNetdev()); return err }))
	defer sub.Close()
	var initial []wire.NetdevPagePool
	require.NoError(t, harness.InNetNS(p.nsB, func() (err error) { initial, err = p.clientB.PagePools(ctx); return err }))
	var mu sync.Mutex
	var got []client.Notification
	readErr := make(chan error, 1)
	go func() {
		for {
			ns, err := sub.Next(ctx)
			if err != nil {
				readErr <- err
				return
			}
			mu.Lock()
			got = append(got, ns...)
			mu.Unlock()
		}
	}()

	tr, err := harness.StartTransfer(p.nsA, p.nsB, p.ipB+":5204", 0, 4)
	require.NoError(t, err)
	const flips = 20
	for i := range flips {
		if err := setFlag(t, p.clientB, p.portB, i%2 == 0); err != nil {
			tr.Stop()
			t.Fatalf("flip %d: %v", i, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	tr.Stop()
	require.NoError(t, tr.Check())
	harness.Eventually(t, "no detached pool left", func() bool {
		var pools []wire.NetdevPagePool
		require.NoError(t, harness.InNetNS(p.nsB, func() (err error) { pools, err = p.clientB.PagePools(ctx); return err }))
		for _, pp := range pools {
			if pp.DetachTime != 0 {
				return false
			}
		}
		return len(pools) == 4
	})
	harness.Run(t, p.nsB, "ip", "link", "set", p.portB, "down")

	// Every pool ever listed is now gone: the initial 4 and 4 per flip, each with its del.
	const pools = 4 * (1 + flips)
	count := func(kind client.NotificationKind) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, x := range got {
			if x.Kind == kind {
				n++
			}
		}
		return n
	}
	harness.Eventually(t, "a del for every pool", func() bool {
		select {
		case err := <-readErr:
			t.Fatalf("subscription: %v", err)
		default:
		}
		return count(client.PagePoolRemoved) >= pools
	})
	sub.Close()
	<-readErr
	mu.Lock()
	defer mu.Unlock()

	type life struct {
		added, changed, removed int
		detach                  uint64
	}
	lives := map[uint64]*life{}
	for _, pp := range initial {
		lives[pp.ID] = &life{added: 1}
	}
	changes := 0
	for i, n := range got {
		if n.Kind == client.NetdevDevChanged || n.Kind == client.NetdevDevAdded || n.Kind == client.NetdevDevRemoved {
			t.Errorf("notification %d: %s %+v: port B was neither created, deleted nor changed in what dev-get shows", i, n.Kind, n.NetdevDev)
			continue
		}
		pp := n.PagePool
		if pp == nil {
			continue // ethtool or manad port events
		}
		l := lives[pp.ID]
		assert.Equal(t, uint32(ifi), pp.Ifindex, "notification %d: %s %+v: want ifindex %d and no NAPI", i, n.Kind, pp, ifi)
		assert.Equal(t, uint64(0), pp.NAPIID, "notification %d: %s %+v: want ifindex %d and no NAPI", i, n.Kind, pp, ifi)
		switch n.Kind {
		case client.PagePoolAdded:
			if l != nil {
				t.Errorf("notification %d: second add of pool %d", i, pp.ID)
				continue
			}
			lives[pp.ID] = &life{added: 1}
			assert.Equal(t, uint64(0), pp.Inflight, "notification %d: add %+v: want nothing in flight, no detach time", i, pp)
			assert.Equal(t, uint64(0), pp.InflightMem, "notification %d: add %+v: want nothing in flight, no detach time", i, pp)
			assert.Equal(t, uint64(0), pp.DetachTime, "notification %d: add %+v: want nothing in flight, no detach time", i, pp)
		case client.PagePoolChanged:
			changes++
			switch {
			case l == nil:
				t.Errorf("notification %d: change of pool %d never added", i, pp.ID)
			case l.changed != 0 || l.removed != 0:
				t.Errorf("notification %d: change of pool %d after %+v", i, pp.ID, *l)
			case pp.DetachTime == 0 || pp.Inflight == 0:
				t.Errorf("notification %d: change %+v: want a detach time and pages in flight", i, pp)
			default:
				l.changed, l.detach = 1, pp.DetachTime
			}
		case client.PagePoolRemoved:
			switch {
			case l == nil:
				t.Errorf("notification %d: del of pool %d never added", i, pp.ID)
			case l.removed != 0:
				t.Errorf("notification %d: second del of pool %d", i, pp.ID)
			case pp.DetachTime != l.detach || pp.Inflight != 0 || pp.InflightMem != 0:
				t.Errorf("notification %d: del %+v after %+v: want detach time %d, nothing in flight", i, pp, *l, l.detach)
			default:
				l.removed = 1
			}
		}
	}
	assert.Len(t, lives, pools, "%d pools seen, want %d (4 initial + 4 per flip)", len(lives), pools)
	for id, l := range lives {
		assert.Equal(t, 1, l.removed, "pool %d: %+v, never deleted", id, *l)
	}
	t.Logf("%d pools: %d detached with buffers out (change, then del), %d destroyed idle (del only)", len(lives), changes, len(lives)-changes)
}
