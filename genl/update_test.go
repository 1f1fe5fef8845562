package genl_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
)

// TestRingsSetLostUpdate: a RINGS_SET carrying only rx, held up between its
// parse and the backend, must not write back the tx it would have read before
// a concurrent tx-only RINGS_SET that completes meanwhile (the lost update of
// a read-modify-write outside the configuration lock).
func TestRingsSetLostUpdate(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		pre.be.Hook = func(_ context.Context, op string) error {
			if op == "SetRings" && first.CompareAndSwap(false, true) {
				close(entered)
				<-release
			}
			return nil
		}
	})
	ifi := client.Interface{Name: "mana0"}
	a, b := dialClient(t, ts.path), dialClient(t, ts.path)
	done := make(chan error, 1)
	go func() { done <- a.SetRings(ctxT(t), ifi, client.RingsUpdate{Rx: ptrU32(2048)}) }()
	<-entered
	require.NoError(t, b.SetRings(ctxT(t), ifi, client.RingsUpdate{Tx: ptrU32(4096)}))
	close(release)
	require.NoError(t, <-done)
	rg, err := a.Rings(ctxT(t), ifi)
	require.NoError(t, err)
	assert.Equal(t, uint32(2048), rg.Rx, "rings after rx-only and tx-only sets: rx=%d tx=%d, want rx=2048 tx=4096", rg.Rx, rg.Tx)
	assert.Equal(t, uint32(4096), rg.Tx, "rings after rx-only and tx-only sets: rx=%d tx=%d, want rx=2048 tx=4096", rg.Rx, rg.Tx)
}

// TestOneNotificationPerChange: 32 writers on their own connections change
// rings (rx only or tx only), channels and private flags of one port at once,
// many requests being no-ops. The monitor must see exactly the backend's
// sequence of real changes, each once, in order, each with the state that
// change produced; and no change may undo another's field.
func TestOneNotificationPerChange(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.SendQueue = 8192 })
	ctx := ctxT(t)
	sub, err := dialClient(t, ts.path).Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()
	ts.be.History() // from here on

	const writers, rounds = 32, 12
	ifi := client.Interface{Name: "mana0"}
	sizes := []uint32{256, 512, 1024, 2048}
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		c := dialClient(t, ts.path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(1, uint64(w)))
			for i := range rounds {
				v := sizes[rnd.IntN(len(sizes))]
				var err error
				switch rnd.IntN(4) {
				case 0:
					err = c.SetRings(ctx, ifi, client.RingsUpdate{Rx: ptrU32(v)})
				case 1:
					err = c.SetRings(ctx, ifi, client.RingsUpdate{Tx: ptrU32(v)})
				case 2:
					err = c.SetChannels(ctx, ifi, client.ChannelsUpdate{Combined: ptrU32(1 + rnd.Uint32N(4))})
				case 3:
					err = c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: ifi,
						Flags: []client.Flag{{Name: "full-page-rx", On: rnd.IntN(2) == 0}}})
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := ts.be.History()
	// A sentinel change on another port ends the stream to compare.
	require.NoError(t, dialClient(t, ts.path).SetRings(ctx, client.Interface{Name: "mana1"}, client.RingsUpdate{Rx: ptrU32(4096)}))
	var got []string
	for done := false; !done; {
		ns, err := sub.Next(ctx)
		require.NoError(t, err, "after %d notifications", len(got))
		for _, n := range ns {
			if n.Interface.Name == "mana1" {
				done = true
				break
			}
			got = append(got, describe(n))
		}
	}
	assert.GreaterOrEqual(t, len(want), writers, "only %d real changes; the test does not contend", len(want))
	assert.Empty(t, cmp.Diff(want, got), "notifications differ from the changes (-changes +notifications)")
	// Each rings change is one field's: a change of both is a lost update.
	var prx, ptx uint32 = 1024, 1024
	for _, h := range want {
		var rx, tx uint32
		if _, err := fmt.Sscanf(h, "rings mana0 rx=%d tx=%d", &rx, &tx); err != nil {
			continue
		}
		if rx != prx {
			assert.Equal(t, ptx, tx, "a one-field RINGS_SET changed both: rx %d→%d, tx", prx, rx)
		}
		prx, ptx = rx, tx
	}
}

// describe renders a notification as MemBackend.History renders a change.
func describe(n client.Notification) string {
	switch n.Kind {
	case client.RingsChanged:
		return fmt.Sprintf("rings %s rx=%d tx=%d", n.Interface.Name, n.Rings.Rx, n.Rings.Tx)
	case client.ChannelsChanged:
		return fmt.Sprintf("channels %s combined=%d", n.Interface.Name, n.Channels.Combined)
	case client.PrivateFlagsChanged:
		return fmt.Sprintf("privflags %s %#x", n.Interface.Name, n.PrivateFlags.Bits())
	}
	return n.Kind.String() + " " + n.Interface.Name
}

func ptrU32(v uint32) *uint32 { return &v }

// TestBackendErrorOffset: the one error type's Offset, set by a backend,
// reaches the client as NLMSGERR_ATTR_OFFS with the errno and message.
func TestBackendErrorOffset(t *testing.T) {
	ts := startServer(t, nil)
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) {
		d.SetErr = &genl.Error{Errno: unix.EBUSY, Message: "queue 3 is busy", Offset: 20}
	})
	err := dialClient(t, ts.path).SetRings(ctxT(t), client.Interface{Name: "mana0"}, client.RingsUpdate{Rx: ptrU32(2048)})
	var ce *client.Error
	if !errors.Is(err, unix.EBUSY) || !errors.As(err, &ce) || ce.Message != "queue 3 is busy" || ce.Offset != 20 {
		t.Errorf("backend error: %v (%+v)", err, ce)
	}
}
