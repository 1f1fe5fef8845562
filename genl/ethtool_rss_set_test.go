package genl_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// TestRSSSetMatchesKernel sends RSS_SET requests about a veth to the kernel and the same
// requests to manad, and requires the same errno, extack message, offset and policy report. A
// veth has neither get_rxfh nor set_rxfh: manad's device without RSS (lo0) must answer as it
// does, a request without a change included (success, nothing to tell the driver). The policy
// and ethnl_rss_set_validate refuse before any device is asked, so those cases go to mana0: a
// context (mana has no contexts), an input transformation or per-flow fields (mana supports
// neither).
func TestRSSSetMatchesKernel(t *testing.T) {
	flows := func(fill func(m *msgBuilder)) func(m *msgBuilder) {
		return func(m *msgBuilder) { n := m.Nest(wire.RSSFlowHash); fill(m); m.EndNest(n) }
	}
	rssMatchesKernel(t, wire.MsgRSSSet, []rssDiffCase{
		{"nothing to change", rssLo0, func(*msgBuilder) {}, 0},
		{"hfunc without rss", rssLo0, func(m *msgBuilder) { m.PutU32(wire.RSSHFunc, 1) }, unix.EOPNOTSUPP},
		{"hfunc whose first byte is 0", rssLo0, func(m *msgBuilder) { m.PutU32(wire.RSSHFunc, 0x100) }, 0},
		{"table without rss", rssLo0, func(m *msgBuilder) { m.Put(wire.RSSIndir, wire.IndirBytes([]uint32{0, 1})) }, unix.EOPNOTSUPP},
		{"odd table without rss", rssLo0, func(m *msgBuilder) { m.Put(wire.RSSIndir, []byte{1, 2, 3}) }, unix.EOPNOTSUPP},
		{"key without rss", rssLo0, func(m *msgBuilder) { m.Put(wire.RSSHKey, make([]byte, 40)) }, unix.EINVAL},
		{"hfunc 0", rssMana0, func(m *msgBuilder) { m.PutU32(wire.RSSHFunc, 0) }, unix.ERANGE},
		{"hfunc u16", rssMana0, func(m *msgBuilder) { m.PutU16(wire.RSSHFunc, 1) }, unix.EINVAL},
		{"empty key", rssMana0, func(m *msgBuilder) { m.Put(wire.RSSHKey, nil) }, unix.ERANGE},
		{"context 1", rssMana0, func(m *msgBuilder) { m.PutU32(wire.RSSContext, 1) }, unix.EOPNOTSUPP},
		{"context 1 with a key", rssMana0, func(m *msgBuilder) { m.Put(wire.RSSHKey, make([]byte, 40)); m.PutU32(wire.RSSContext, 1) }, unix.EOPNOTSUPP},
		{"context 0", rssLo0, func(m *msgBuilder) { m.PutU32(wire.RSSContext, 0) }, 0},
		{"input xfrm", rssMana0, func(m *msgBuilder) { m.PutU32(wire.RSSInputXfrm, 1) }, unix.EOPNOTSUPP},
		{"input xfrm 0", rssLo0, func(m *msgBuilder) { m.PutU32(wire.RSSInputXfrm, 0) }, 0},
		{"input xfrm above sym-or-xor", rssMana0, func(m *msgBuilder) { m.PutU32(wire.RSSInputXfrm, 3) }, unix.ERANGE},
		{"flow hash", rssMana0, flows(func(m *msgBuilder) { m.PutU32(4, wire.RXHIPSrc|wire.RXHIPDst) }), unix.EOPNOTSUPP},
		{"flow hash u64", rssMana0, flows(func(m *msgBuilder) { m.PutU64(3, wire.RXHIP6FL) }), unix.EOPNOTSUPP},
		{"flow hash reserved bit", rssMana0, flows(func(m *msgBuilder) { m.PutU32(4, 1) }), unix.EINVAL},
		{"flow label on ipv4", rssMana0, flows(func(m *msgBuilder) { m.PutU32(2, wire.RXHIP6FL) }), unix.EINVAL},
		{"flow hash u16", rssMana0, flows(func(m *msgBuilder) { m.PutU16(4, 0) }), unix.EINVAL},
		{"flow type 28", rssMana0, flows(func(m *msgBuilder) { m.PutU32(28, 0) }), unix.EINVAL},
		{"flow hash not nested", rssMana0, func(m *msgBuilder) { m.PutU32(wire.RSSFlowHash, 0) }, unix.EINVAL},
		{"start context", rssMana0, func(m *msgBuilder) { m.PutU32(wire.RSSStartContext, 0) }, unix.EINVAL},
		{"attribute 9", rssMana0, func(m *msgBuilder) { m.PutU32(9, 0) }, unix.EINVAL},
	})
}

// rssTable returns n entries of the spread i % q.
func rssTable(n int, q uint32) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(i) % q
	}
	return t
}

// TestRSSSet: each rule of RSS_SET on a MANA-like port (64 entries, a 40-byte key, 4 queues,
// Toeplitz): the ethtool core's (a table of the device's size or one dividing it, repeated; an
// empty one for the default; entries below the RX ring count; a key of exactly the device's
// size) with the kernel's messages, and the driver's (Toeplitz only). A refused request
// changes nothing.
func TestRSSSet(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	key := make([]byte, 40)
	for i := range key {
		key[i] = byte(0xa0 + i)
	}
	def := rssTable(64, 4)
	for _, tc := range []struct {
		name      string
		set       wire.RSSSet
		errno     unix.Errno
		msg       string
		wantIndir []uint32 // after the request; nil = unchanged
		wantKey   []byte
	}{
		{name: "full table", set: wire.RSSSet{Indir: rssTable(64, 3)}, wantIndir: rssTable(64, 3)},
		{name: "equal 2 repeated", set: wire.RSSSet{Indir: []uint32{0, 1}}, wantIndir: rssTable(64, 2)},
		{name: "one entry", set: wire.RSSSet{Indir: []uint32{3}}, wantIndir: slices.Repeat([]uint32{3}, 64)},
		{name: "default", set: wire.RSSSet{Indir: []uint32{}}, wantIndir: def},
		{name: "key", set: wire.RSSSet{HKey: key}, wantKey: key},
		{name: "toeplitz", set: wire.RSSSet{HFunc: 1}},
		{name: "xor", set: wire.RSSSet{HFunc: 2}, errno: unix.EOPNOTSUPP},
		{name: "crc32", set: wire.RSSSet{HFunc: 4, Indir: rssTable(64, 1)}, errno: unix.EOPNOTSUPP},
		{name: "table of 3", set: wire.RSSSet{Indir: []uint32{0, 1, 2}}, errno: unix.EINVAL,
			msg: "size (3) mismatch with device indir table (64)"},
		{name: "table of 128", set: wire.RSSSet{Indir: rssTable(128, 1)}, errno: unix.EINVAL,
			msg: "size (128) mismatch with device indir table (64)"},
		{name: "queue 4 of 4", set: wire.RSSSet{Indir: []uint32{0, 1, 2, 4}}, errno: unix.EINVAL,
			msg: "entry 3: queue out of range (4)"},
		{name: "queue -1", set: wire.RSSSet{Indir: []uint32{0, 0xffffffff}}, errno: unix.EINVAL,
			msg: "entry 1: queue out of range (-1)"},
		{name: "short key", set: wire.RSSSet{HKey: key[:39]}, errno: unix.EINVAL},
		{name: "long key", set: wire.RSSSet{HKey: append(slices.Clone(key), 0)}, errno: unix.EINVAL},
		{name: "bad key with a good table", set: wire.RSSSet{Indir: []uint32{1}, HKey: key[:8]}, errno: unix.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := c.RSS(ctx, mana0)
			require.NoError(t, err)
			err = c.SetRSS(ctx, mana0, tc.set)
			var ce *client.Error
			switch {
			case tc.errno == 0 && err != nil:
				t.Fatalf("SetRSS: %v", err)
			case tc.errno != 0 && !errors.Is(err, tc.errno):
				t.Fatalf("SetRSS: %v, want %v", err, tc.errno)
			case tc.errno != 0 && (!errors.As(err, &ce) || ce.Message != tc.msg):
				t.Errorf("SetRSS: %v (%+v), want message %q", err, ce, tc.msg)
			}
			after, err := c.RSS(ctx, mana0)
			require.NoError(t, err)
			want := before.RSS
			if tc.errno == 0 && tc.wantIndir != nil {
				want.Indir = tc.wantIndir
			}
			if tc.errno == 0 && tc.wantKey != nil {
				want.HKey = tc.wantKey
			}
			assert.Empty(t, cmp.Diff(want, after.RSS), "RSS after the request (-want +got)")
		})
	}
}

// TestRSSSetNotify: 32 writers on their own connections set tables, keys and no-op requests on
// one port at once. The monitor must see exactly one RSS_NTF per real change, in the order of
// the changes, each with the state that change produced, and none for a no-op or a refusal.
func TestRSSSetNotify(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	sub, err := dialClient(t, ts.path).Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()
	ts.be.History()

	const writers, rounds = 32, 8
	mana0 := client.Interface{Name: "mana0"}
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		c := dialClient(t, ts.path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(2, uint64(w)))
			for i := range rounds {
				var u wire.RSSSet
				refused := false
				switch rnd.IntN(5) {
				case 0:
					u.Indir = rssTable(1<<rnd.IntN(7), 1+rnd.Uint32N(4)) // 1..64 entries
				case 1:
					u.Indir = []uint32{}
				case 2:
					u.HKey = make([]byte, 40)
					u.HKey[0] = byte(rnd.IntN(3))
				case 3:
					u.HFunc = 1 // always a no-op: the port is Toeplitz
				case 4:
					u.Indir, refused = []uint32{0, 9}, true
				}
				err := c.SetRSS(ctx, mana0, u)
				if (err != nil) != refused {
					errs <- fmt.Errorf("writer %d round %d: %+v: %v", w, i, u, err)
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
	require.NoError(t, dialClient(t, ts.path).SetRSS(ctx, client.Interface{Name: "mana1"}, wire.RSSSet{Indir: []uint32{1}}))
	var got []string
	for done := false; !done; {
		ns, err := sub.Next(ctx)
		require.NoError(t, err, "after %d notifications", len(got))
		for _, n := range ns {
			require.Equal(t, client.RSSChanged, n.Kind, "unexpected notification %+v", n)
			if n.Interface.Name == "mana1" {
				done = true
				break
			}
			got = append(got, fmt.Sprintf("rss %s %v %x", n.Interface.Name, n.RSS.Indir, n.RSS.HKey))
		}
	}
	assert.GreaterOrEqual(t, len(want), writers, "only %d real changes; the test does not contend", len(want))
	assert.Empty(t, cmp.Diff(want, got), "notifications differ from the changes (-changes +notifications)")
}

// TestRSSSetChannels: while the user's table is in force (IFF_RXFH_CONFIGURED, set by any
// RSS_SET with a table, even one equal to the current table), CHANNELS_SET refuses a queue
// count that the table's highest entry would not fit, with the kernel's message; the default
// table (an empty one) clears the flag.
func TestRSSSetChannels(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	setCh := func(n uint32) error { return c.SetChannels(ctx, mana0, client.ChannelsUpdate{Combined: &n}) }
	require.NoError(t, setCh(2), "channels 2 before any table")
	require.NoError(t, setCh(4))
	require.NoError(t, c.SetRSS(ctx, mana0, wire.RSSSet{Indir: []uint32{0, 3}}))
	var ce *client.Error
	err := setCh(3)
	assert.ErrorIs(t, err, unix.EINVAL, "channels 3 under a table naming queue 3")
	if assert.ErrorAs(t, err, &ce, "channels 3 under a table naming queue 3") {
		assert.Equal(t, "requested channel counts are too low for existing indirection table (3)", ce.Message, "channels 3 under a table naming queue 3")
	}
	assert.NoError(t, setCh(5), "channels 5")
	require.NoError(t, c.SetRSS(ctx, mana0, wire.RSSSet{Indir: []uint32{}}))
	assert.NoError(t, setCh(1), "channels 1 after the default table")
	require.NoError(t, setCh(4))
	// The default table asked for again as a table: nothing changes, but the table counts as
	// the user's from now on.
	sub, err := c.Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, c.SetRSS(ctx, mana0, wire.RSSSet{Indir: rssTable(64, 4)}))
	err = setCh(3)
	assert.ErrorIs(t, err, unix.EINVAL, "channels 3 under the default table given as a table: %v, want EINVAL", err)
	// The no-op sent no RSS_NTF: the first notification is the marker's.
	require.NoError(t, setCh(6))
	ns, err := sub.Next(ctx)
	assert.NoError(t, err, "first notification after a no-op RSS_SET")
	if assert.NotEmpty(t, ns, "first notification after a no-op RSS_SET") {
		assert.Equal(t, client.ChannelsChanged, ns[0].Kind, "first notification after a no-op RSS_SET: %+v", ns)
	}
}
