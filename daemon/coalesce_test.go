package daemon

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
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
	err = set(func(c *genl.Coalesce) { c.RxMaxFrames = 256 })
	assert.ErrorIs(t, err, unix.EINVAL, "rx-frames 256")
	if assert.ErrorAs(t, err, &e, "rx-frames 256") {
		assert.Equal(t, "rx-frames must be at most 255, got 256", e.Message, "rx-frames 256")
	}
	require.NoError(t, set(func(*genl.Coalesce) {})) // no change
	want := genl.Coalesce{RxCQEFrames: 4, TxUsecs: 100, RxCQENsecs: vnic.DefaultRxCQENsecs}
	co, _ = b.Coalesce(ctx, admin, dev)
	assert.Equal(t, want, co, "after SET")
	if assert.Len(t, changed, 1, "Changed calls %+v", changed) {
		assert.Equal(t, want, changed[0], "Changed call")
	}
}
