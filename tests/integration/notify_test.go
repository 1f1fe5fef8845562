package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// portState is what the ethtool notifications report of a port.
type portState struct {
	rx, tx, queues, flags uint32
}

// TestOneNotificationPerChange: 32 writers on their own connections change one port's rings (rx
// only or tx only), channels and private flags at once, many requests being no-ops. The
// daemon's port events, sent under the same configuration lock as the ethtool notifications,
// say which changes happened: each change of rings, channels or flags must be followed by
// exactly one RINGS/CHANNELS/PRIVFLAGS_NTF carrying the state it produced, and there must be
// no other ethtool notification. A one-field RINGS_SET must never change both sizes.
func TestOneNotificationPerChange(t *testing.T) {
	p := startPair(t, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	harness.Eventually(t, "port B up", func() bool { return p.info(t, p.clientB, p.portB).Running })
	var sub *client.Subscription
	require.NoError(t, harness.InNetNS(p.nsB, func() (err error) { sub, err = p.clientB.Subscribe(ctx); return err }))
	defer sub.Close()
	info := p.info(t, p.clientB, p.portB)
	start := portState{info.RxRing, info.TxRing, info.Queues, info.PrivFlags}

	// The MTU, which no writer touches, marks the end of the stream.
	const endMTU = 1400
	var got []client.Notification
	readErr := make(chan error, 1)
	go func() {
		for {
			ns, err := sub.Next(ctx)
			if err != nil {
				readErr <- err
				return
			}
			for _, n := range ns {
				if n.Kind == client.PortChanged && n.Port.MTU == endMTU {
					readErr <- nil
					return
				}
				got = append(got, n)
			}
		}
	}()

	const writers, rounds = 32, 5
	ifB := client.Interface{Name: p.portB}
	sizes := []uint32{256, 512, 1024}
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		c := p.d.Client(p.nsB)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(2, uint64(w)))
			for i := range rounds {
				v := sizes[rnd.IntN(len(sizes))]
				var err error
				switch rnd.IntN(4) {
				case 0:
					err = c.SetRings(ctx, ifB, client.RingsUpdate{Rx: ptr(v)})
				case 1:
					err = c.SetRings(ctx, ifB, client.RingsUpdate{Tx: ptr(v)})
				case 2:
					err = c.SetChannels(ctx, ifB, client.ChannelsUpdate{Combined: ptr(1 + rnd.Uint32N(4))})
				case 3:
					err = setFlag(t, c, p.portB, rnd.IntN(2) == 0)
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
	require.NoError(t, p.clientB.SetMTU(ctx, ifB, endMTU))
	require.NoError(t, <-readErr, "monitor after %d notifications", len(got))

	// fail reports a mismatch; after ten the rest of the stream says nothing new.
	failures := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		if failures++; failures == 10 {
			t.Fatalf("stopping after %d mismatches in %d notifications", failures, len(got))
		}
	}
	cur, changes := start, 0
	for i := 0; i < len(got); i++ {
		n := got[i]
		if n.Kind != client.PortChanged {
			fail("notification %d: %s %+v not announced by a port change", i, n.Kind, n)
			continue
		}
		next := portState{n.Port.RxRing, n.Port.TxRing, n.Port.Queues, n.Port.PrivFlags}
		// A port event for another reason (the link, the reset work) has no ethtool twin.
		if next == cur {
			continue
		}
		changes++
		if i+1 == len(got) {
			fail("change %+v → %+v: no ethtool notification follows", cur, next)
			break
		}
		i++
		e, ok := got[i], false
		switch {
		case next.rx != cur.rx || next.tx != cur.tx:
			ok = e.Kind == client.RingsChanged && e.Rings.Rx == next.rx && e.Rings.Tx == next.tx &&
				next.queues == cur.queues && next.flags == cur.flags
			if next.rx != cur.rx && next.tx != cur.tx {
				fail("a one-field RINGS_SET changed both: rx %d→%d, tx %d→%d", cur.rx, next.rx, cur.tx, next.tx)
			}
		case next.queues != cur.queues:
			ok = e.Kind == client.ChannelsChanged && e.Channels.Combined == next.queues && next.flags == cur.flags
		case next.flags != cur.flags && e.Kind == client.PrivateFlagsChanged:
			ok = e.PrivateFlags.Bits() == next.flags
		}
		if !ok {
			fail("change %+v → %+v followed by %s %+v", cur, next, e.Kind, e)
		}
		cur = next
	}
	assert.GreaterOrEqual(t, changes, writers, "only %d real changes; the test does not contend", changes)
	t.Logf("%d notifications, %d changes", len(got), changes)
}
