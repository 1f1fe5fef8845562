package genl_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

func TestCoalesce(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}

	co, err := c.Coalesce(ctx, mana0)
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(genl.Coalesce{RxCQEFrames: 1, RxCQENsecs: 2048}, co.Coalesce), "Coalesce (-want +got)")
	assert.Equal(t, "mana0", co.Interface.Name, "Coalesce interface")
	// coalesce_fill_reply writes every supported parameter, zero or not, and nothing else.
	want := map[uint16]uint32{}
	for _, a := range wire.CoalesceSupported {
		want[a] = 0
	}
	want[wire.CoalesceRxCQEFrames], want[wire.CoalesceRxCQENsecs] = 1, 2048
	assert.Empty(t, cmp.Diff(want, co.Attrs), "reply attributes (-want +got)")

	// Only what the request carries changes.
	require.NoError(t, c.SetCoalesce(ctx, mana0, client.CoalesceUpdate{
		U32:  map[uint16]uint32{unix.ETHTOOL_A_COALESCE_RX_USECS: 50, wire.CoalesceRxCQEFrames: 4},
		Bool: map[uint16]bool{unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX: true},
	}))
	wantCo := genl.Coalesce{RxUsecs: 50, AdaptiveTx: true, RxCQEFrames: 4, RxCQENsecs: 2048}
	co, _ = c.Coalesce(ctx, mana0)
	assert.Equal(t, wantCo, co.Coalesce, "after SET")
	assert.Len(t, ts.be.Calls(), 1, "calls")
	// No change: no driver call.
	require.NoError(t, c.SetCoalesce(ctx, mana0, client.CoalesceUpdate{U32: map[uint16]uint32{unix.ETHTOOL_A_COALESCE_RX_USECS: 50}}))
	assert.Empty(t, ts.be.Calls(), "no-op SET called the backend")

	var ce *client.Error
	for _, tc := range []struct {
		name  string
		u     client.CoalesceUpdate
		errno unix.Errno
		msg   string
		off   bool
	}{
		{"rx-usecs-irq", client.CoalesceUpdate{U32: map[uint16]uint32{unix.ETHTOOL_A_COALESCE_RX_USECS_IRQ: 1}},
			unix.EINVAL, "cannot modify an unsupported parameter", true},
		{"cqe mode rx", client.CoalesceUpdate{Bool: map[uint16]bool{unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_RX: true}},
			unix.EINVAL, "cannot modify an unsupported parameter", true},
		{"tx-aggr-max-bytes", client.CoalesceUpdate{U32: map[uint16]uint32{wire.CoalesceTxAggrMaxBytes: 1}},
			unix.EINVAL, "cannot modify an unsupported parameter", true},
		{"supported then unsupported", client.CoalesceUpdate{U32: map[uint16]uint32{unix.ETHTOOL_A_COALESCE_RX_USECS: 7,
			unix.ETHTOOL_A_COALESCE_PKT_RATE_HIGH: 1}}, unix.EINVAL, "cannot modify an unsupported parameter", true},
		{"driver refuses", client.CoalesceUpdate{U32: map[uint16]uint32{wire.CoalesceRxCQEFrames: 3}},
			unix.EINVAL, "rx-frames must be 1 or 4, got 3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.SetCoalesce(ctx, mana0, tc.u)
			assert.ErrorIs(t, err, tc.errno)
			if assert.ErrorAs(t, err, &ce) {
				assert.Equal(t, tc.msg, ce.Message, "extack message")
				assert.Equal(t, tc.off, ce.Offset != 0, "extack offset %d", ce.Offset)
			}
			assert.Empty(t, ts.be.Calls(), "backend called")
		})
	}
	// A parameter in the map of the other kind, or no parameter of COALESCE_SET, is the client's
	// EINVAL: nothing is sent.
	for _, u := range []client.CoalesceUpdate{
		{Bool: map[uint16]bool{unix.ETHTOOL_A_COALESCE_RX_USECS: true}},
		{U32: map[uint16]uint32{unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX: 1}},
		{U32: map[uint16]uint32{wire.CoalesceRxProfile: 1}},
		{U32: map[uint16]uint32{wire.CoalesceMax + 1: 1}},
		{U32: map[uint16]uint32{unix.ETHTOOL_A_COALESCE_HEADER: 1}},
	} {
		err := c.SetCoalesce(ctx, mana0, u)
		assert.ErrorIs(t, err, unix.EINVAL, "%+v", u)
		assert.False(t, errors.As(err, &ce), "%+v: the server answered %v", u, err)
	}
	assert.Empty(t, ts.be.Calls(), "backend called")
	co, _ = c.Coalesce(ctx, mana0)
	assert.Equal(t, wantCo, co.Coalesce, "refused SETs changed the setting")
	// A device without coalescing (no get_coalesce): EOPNOTSUPP.
	_, err = c.Coalesce(ctx, client.Interface{Name: "lo0"})
	assert.ErrorIs(t, err, unix.EOPNOTSUPP, "lo0 GET")
}

// TestCoalesceNotify: exactly one COALESCE_NTF per change, none for a no-op or a refusal, with
// the value after the change.
func TestCoalesceNotify(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	sub, err := c.Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()
	set := func(v uint32) error {
		return c.SetCoalesce(ctx, mana0, client.CoalesceUpdate{U32: map[uint16]uint32{unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES: v}})
	}
	require.NoError(t, set(8))
	_ = set(8)                                                                                                // no-op
	_ = c.SetCoalesce(ctx, mana0, client.CoalesceUpdate{U32: map[uint16]uint32{wire.CoalesceRxCQEFrames: 2}}) // refused
	require.NoError(t, set(9))
	var got []uint32
	var seqs []uint32
	for len(got) < 2 {
		ns, err := sub.Next(ctx)
		require.NoError(t, err)
		for _, n := range ns {
			require.Equal(t, client.CoalesceChanged, n.Kind, "unexpected notification %+v", n)
			require.Equal(t, "mana0", n.Interface.Name, "unexpected notification %+v", n)
			got, seqs = append(got, n.Coalesce.TxMaxFrames), append(seqs, n.Sequence)
		}
	}
	assert.Equal(t, []uint32{8, 9}, got, "NTFs tx-frames")
	if assert.Len(t, seqs, 2, "NTF sequence numbers") {
		assert.Equal(t, seqs[0]+1, seqs[1], "NTF seq %v, want consecutive", seqs)
	}
	// A marker change shows nothing else was queued in between or after.
	rx := uint32(2048)
	require.NoError(t, c.SetRings(ctx, mana0, client.RingsUpdate{Rx: &rx}))
	ns, err := sub.Next(ctx)
	require.NoError(t, err, "after the coalesce NTFs: %v %+v", err, ns)
	require.Len(t, ns, 1, "after the coalesce NTFs: %v %+v", err, ns)
	require.Equal(t, client.RingsChanged, ns[0].Kind, "after the coalesce NTFs: %v %+v", err, ns)
}
