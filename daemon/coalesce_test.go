package daemon

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/require"
)

// TestCoalesceBackend runs COALESCE through the daemon's backend onto a real port: the request
// applied to the current value, mana's rules from vnic with the driver's text, the result read
// back, and Changed called once per change with the value produced.
func TestCoalesceBackend(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	d, names := startTest(t, ns, 1, Options{})
	b := (*backend)(d)
	ctx := context.Background()
	d.mu.Lock()
	dev := d.ports[names[0]].device()
	d.mu.Unlock()
	admin := genl.Caller{Admin: true, NetNS: dev.NetNS}

	co, err := b.Coalesce(ctx, admin, dev)
	require.NoError(t, err, "Coalesce = %+v, %v; want the probe's defaults", co, err)
	require.Equal(t, genl.Coalesce(vnic.DefaultCoalesce()), co, "Coalesce = %+v, %v; want the probe's defaults", co, err)
	var changed []genl.Coalesce
	set := func(f func(*genl.Coalesce)) error {
		return b.SetCoalesce(ctx, admin, dev, genl.Update[genl.Coalesce]{
			Apply: func(cur genl.Coalesce) (genl.Coalesce, bool, error) {
				next := cur
				f(&next)
				return next, next != cur, nil
			},
			Changed: func(c genl.Coalesce) { changed = append(changed, c) },
		})
	}
	require.NoError(t, set(func(c *genl.Coalesce) { c.RxCQEFrames, c.TxUsecs = 4, 100 }))
	var e *nlerr.Error
	if err := set(func(c *genl.Coalesce) { c.RxMaxFrames = 256 }); !errors.Is(err, unix.EINVAL) || !errors.As(err, &e) ||
		e.Message != "rx-frames must be at most 255, got 256" {
		t.Errorf("rx-frames 256: %v", err)
	}
	if err := set(func(*genl.Coalesce) {}); err != nil { // no change
		t.Fatal(err)
	}
	want := genl.Coalesce{RxCQEFrames: 4, TxUsecs: 100, RxCQENsecs: vnic.DefaultRxCQENsecs}
	if co, _ = b.Coalesce(ctx, admin, dev); co != want {
		t.Errorf("after SET: %+v, want %+v", co, want)
	}
	if len(changed) != 1 || changed[0] != want {
		t.Errorf("Changed calls %+v, want one with %+v", changed, want)
	}
}
