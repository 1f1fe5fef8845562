package genl_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// TestNetdevMessages: every netdev GET, over the real socket through the client, returns the
// backend's views in the kernel's order; the plain device (no netdev views) is skipped by dumps.
func TestNetdevMessages(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := context.Background()
	want0, err := ts.be.NetdevPort(ctx, genl.Caller{NetNS: ts.ns}, ts.mana0.Dev)
	require.NoError(t, err)
	want1, err := ts.be.NetdevPort(ctx, genl.Caller{NetNS: ts.ns}, ts.mana1.Dev)
	require.NoError(t, err)
	i0 := ts.mana0.Dev.Index
	// Each device's pools newest (highest id) first, as the kernel lists them.
	pools := func(ps ...genl.NetdevPort) (pp []wire.NetdevPagePool, st []wire.NetdevPagePoolStats) {
		for _, p := range ps {
			xs := slices.Clone(p.Pools)
			slices.SortFunc(xs, func(a, b genl.NetdevPool) int { return int(b.Pool.ID) - int(a.Pool.ID) })
			for _, x := range xs {
				pp, st = append(pp, x.Pool), append(st, x.Stats)
			}
		}
		return pp, st
	}
	wantPools, wantStats := pools(want0, want1)
	for _, tc := range []struct {
		name string
		get  func() (any, error)
		want any
	}{
		{"dev-get dump", func() (any, error) { return c.NetdevDevs(ctx) }, []wire.NetdevDev{want0.Dev, want1.Dev}},
		{"queue-get dump", func() (any, error) { return c.Queues(ctx, 0) }, append(slices.Clone(want0.Queues), want1.Queues...)},
		{"queue-get dump ifindex", func() (any, error) { return c.Queues(ctx, i0) }, want0.Queues},
		{"napi-get dump ifindex", func() (any, error) { return c.NAPIs(ctx, i0) }, reversed(want0.NAPIs)},
		{"page-pool-get dump", func() (any, error) { return c.PagePools(ctx) }, wantPools},
		{"page-pool-stats-get dump", func() (any, error) { return c.PagePoolStats(ctx) }, wantStats},
		{"qstats-get device", func() (any, error) { return c.QStats(ctx, 0, false) }, []wire.NetdevQStats{want0.Device, want1.Device}},
		{"qstats-get queue ifindex", func() (any, error) { return c.QStats(ctx, i0, true) }, want0.QueueStats},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.get()
			require.NoError(t, err)
			assert.Empty(t, cmp.Diff(tc.want, got, cmpopts.IgnoreFields(wire.NetdevQStats{}, "Present")), "(-want +got)")
		})
	}
	// A detached pool has no napi-id and a detach-time; an attached one the reverse.
	for _, p := range wantPools {
		assert.NotEqual(t, p.NAPIID == 0, p.DetachTime == 0, "pool %d: napi-id %d, detach-time %d", p.ID, p.NAPIID, p.DetachTime)
	}
}

func reversed[T any](s []T) []T {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// netdevReq builds a netdev-family request for family id fam.
func netdevReq(fam uint16, flags uint16, cmd uint8, build func(m *msgBuilder)) []byte {
	m := newMsg(fam, nlattr.FlagRequest|nlattr.FlagAck|flags, 7, cmd, wire.NetdevFamilyVersion)
	if build != nil {
		build(m)
	}
	return m.done()
}

// TestNetdevDoReplies: each do request answers the one object asked for, byte-identical to
// the corresponding dump message, or the kernel's error.
func TestNetdevDoReplies(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	fam := manadFamilyID(t, rc, wire.NetdevFamilyName)
	p, err := ts.be.NetdevPort(context.Background(), genl.Caller{NetNS: ts.ns}, ts.mana1.Dev)
	require.NoError(t, err)
	i1 := ts.mana1.Dev.Index
	put := func(f func(b *nlattr.Builder)) []byte { var b nlattr.Builder; f(&b); return b.B }
	pool := p.Pools[1]
	for _, tc := range []struct {
		name  string
		cmd   uint8
		build func(m *msgBuilder)
		want  []byte // reply attributes; nil: an error
		errno unix.Errno
		msg   string
	}{
		{"dev-get", wire.NetdevCmdDevGet, func(m *msgBuilder) { m.PutU32(wire.NetdevADevIfindex, i1) },
			put(func(b *nlattr.Builder) { wire.NetdevDevTable.Put(b, &p.Dev) }), 0, ""},
		{"dev-get lo0", wire.NetdevCmdDevGet, func(m *msgBuilder) { m.PutU32(wire.NetdevADevIfindex, ts.lo0.Dev.Index) }, nil, unix.EOPNOTSUPP, ""},
		{"dev-get ifindex 0", wire.NetdevCmdDevGet, func(m *msgBuilder) { m.PutU32(wire.NetdevADevIfindex, 0) }, nil, unix.ERANGE, "integer out of range"},
		{"queue-get tx 1", wire.NetdevCmdQueueGet, func(m *msgBuilder) {
			m.PutU32(wire.NetdevAQueueIfindex, i1)
			m.PutU32(wire.NetdevAQueueType, wire.NetdevQueueTypeTX)
			m.PutU32(wire.NetdevAQueueID, 1)
		}, put(func(b *nlattr.Builder) { wire.NetdevQueueTable.Put(b, &p.Queues[len(p.Queues)/2+1]) }), 0, ""},
		{"queue-get rx beyond", wire.NetdevCmdQueueGet, func(m *msgBuilder) {
			m.PutU32(wire.NetdevAQueueIfindex, i1)
			m.PutU32(wire.NetdevAQueueType, wire.NetdevQueueTypeRX)
			m.PutU32(wire.NetdevAQueueID, 99)
		}, nil, unix.EINVAL, ""},
		{"queue-get type 2", wire.NetdevCmdQueueGet, func(m *msgBuilder) {
			m.PutU32(wire.NetdevAQueueIfindex, i1)
			m.PutU32(wire.NetdevAQueueType, 2)
			m.PutU32(wire.NetdevAQueueID, 0)
		}, nil, unix.ERANGE, "integer out of range"},
		{"napi-get", wire.NetdevCmdNAPIGet, func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIID, p.NAPIs[2].ID) },
			put(func(b *nlattr.Builder) { wire.NetdevNAPITable.Put(b, &p.NAPIs[2]) }), 0, ""},
		{"page-pool-get", wire.NetdevCmdPagePoolGet, func(m *msgBuilder) { m.PutU32(wire.NetdevAPagePoolID, uint32(pool.Pool.ID)) },
			put(func(b *nlattr.Builder) { wire.NetdevPagePoolTable.Put(b, &pool.Pool) }), 0, ""},
		{"page-pool-get u64 id", wire.NetdevCmdPagePoolGet, func(m *msgBuilder) { m.PutU64(wire.NetdevAPagePoolID, pool.Pool.ID) },
			put(func(b *nlattr.Builder) { wire.NetdevPagePoolTable.Put(b, &pool.Pool) }), 0, ""},
		{"page-pool-stats-get", wire.NetdevCmdPagePoolStatsGet, func(m *msgBuilder) {
			n := m.Nest(wire.NetdevAPagePoolStatsInfo)
			m.PutU32(wire.NetdevAPagePoolID, uint32(pool.Pool.ID))
			m.EndNest(n)
		}, put(func(b *nlattr.Builder) { wire.NetdevPagePoolStatsTable.Put(b, &pool.Stats) }), 0, ""},
		{"page-pool-stats-get by ifindex", wire.NetdevCmdPagePoolStatsGet, func(m *msgBuilder) {
			n := m.Nest(wire.NetdevAPagePoolStatsInfo)
			m.PutU32(wire.NetdevAPagePoolID, uint32(pool.Pool.ID))
			m.PutU32(wire.NetdevAPagePoolIfindex, i1)
			m.EndNest(n)
		}, nil, unix.EINVAL, "selecting by ifindex not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc.send(netdevReq(fam, 0, tc.cmd, tc.build))
			msgs := rc.recv()
			if tc.want == nil {
				a := decodeAck(t, msgs[0])
				assert.Equal(t, tc.errno, a.errno, "got %v %q, want %v %q", a.errno, a.msg, tc.errno, tc.msg)
				assert.Equal(t, tc.msg, a.msg, "got %v %q, want %v %q", a.errno, a.msg, tc.errno, tc.msg)
				return
			}
			require.GreaterOrEqual(t, len(msgs), 1, "reply %+v", msgs)
			require.Equal(t, fam, msgs[0].h.Type, "reply %+v", msgs)
			got := msgs[0].data[4:]
			assert.Equal(t, string(tc.want), string(got), "reply attributes\n got % x\nwant % x", got, tc.want)
			if len(msgs) == 1 {
				msgs = rc.recv()
			} else {
				msgs = msgs[1:]
			}
			a := decodeAck(t, msgs[0])
			assert.Equal(t, unix.Errno(0), a.errno, "ACK")
		})
	}
}

// TestNetdevDumpManyPorts: a dump over more ports than fit in one datagram lists every queue
// of every port once, in order.
func TestNetdevDumpManyPorts(t *testing.T) {
	ts := startServer(t, nil)
	for i := range 200 {
		ts.be.AddPort(ts.ns, fmt.Sprintf("many%d", i))
	}
	c := dialClient(t, ts.path)
	qs, err := c.Queues(context.Background(), 0)
	require.NoError(t, err)
	if want := 202 * 8; len(qs) != want {
		t.Fatalf("%d queues, want %d", len(qs), want)
	}
	pps, err := c.PagePools(context.Background())
	require.NoError(t, err)
	seen := map[uint64]bool{}
	for _, p := range pps {
		if seen[p.ID] {
			t.Errorf("pool %d listed twice", p.ID)
		}
		seen[p.ID] = true
	}
	want := 202 * (4 + genl.MemDetachedPools)
	assert.Len(t, pps, want, "%d pools, want %d", len(pps), want)
}

// TestNetdevDevNotifications: a "mgmt" subscriber gets dev add/del notifications (seq 0, as
// genl_info_init_ntf) of its
// namespace's devices, with dev-get's attributes; others in the family's other group do not.
func TestNetdevDevNotifications(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	other := dialRaw(t, ts.path)
	mf := manadFamilyID(t, rc, wire.FamilyName)
	nd := manadFamilyID(t, rc, wire.NetdevFamilyName)
	mgmt := groupID(t, ts.path, wire.NetdevFamilyName, wire.NetdevGroupMgmt)
	pp := groupID(t, ts.path, wire.NetdevFamilyName, wire.NetdevGroupPagePool)
	if a := joinRaw(t, rc, mf, mgmt, wire.CmdGroupJoin); a.errno != 0 {
		t.Fatalf("join mgmt: %+v", a)
	}
	a := joinRaw(t, other, mf, pp, wire.CmdGroupJoin)
	require.Equal(t, unix.Errno(0), a.errno, "join page-pool: %+v", a)
	dev := wire.NetdevDev{Ifindex: ts.mana0.Dev.Index, XDPFeatures: 1}
	var want nlattr.Builder
	wire.NetdevDevTable.Put(&want, &dev)
	for _, tc := range []struct {
		kind genl.Event
		cmd  uint8
	}{{genl.EventNew, wire.NetdevCmdDevAddNtf}, {genl.EventDel, wire.NetdevCmdDevDelNtf}, {genl.EventChange, wire.NetdevCmdDevChangeNtf}} {
		ts.srv.NotifyNetdevDev(tc.kind, ts.mana0.Dev, dev)
		msgs := rc.recv()
		m := msgs[0]
		require.Len(t, msgs, 1, "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, nd, m.h.Type, "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, uint32(0), m.h.PID, "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, uint32(0), m.h.Seq, "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, tc.cmd, m.data[0], "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, byte(wire.NetdevFamilyVersion), m.data[1], "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		assert.Equal(t, string(want.B), string(m.data[4:]), "%s: NTF attributes % x, want % x", tc.kind, m.data[4:], want.B)
	}
	// The page-pool subscriber got nothing: its next datagram is the reply to a request.
	other.send(netdevReq(nd, 0, wire.NetdevCmdDevGet, func(m *msgBuilder) { m.PutU32(wire.NetdevADevIfindex, ts.mana0.Dev.Index) }))
	if m := other.recv()[0]; m.h.Seq != 7 || m.data[0] != wire.NetdevCmdDevGet {
		t.Errorf("page-pool subscriber got %+v % x", m.h, m.data[:4])
	}
}

// TestNetdevPagePoolNotifications: a "page-pool" subscriber gets the page-pool add/change/del
// notifications (pid 0, seq 0) with page-pool-get's attributes, ifindex left out for a pool
// whose netdev is gone; a "mgmt" subscriber gets none, nor does one in another namespace.
func TestNetdevPagePoolNotifications(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	mgmtOnly := dialRaw(t, ts.path)
	mf := manadFamilyID(t, rc, wire.FamilyName)
	nd := manadFamilyID(t, rc, wire.NetdevFamilyName)
	mgmt := groupID(t, ts.path, wire.NetdevFamilyName, wire.NetdevGroupMgmt)
	pp := groupID(t, ts.path, wire.NetdevFamilyName, wire.NetdevGroupPagePool)
	if a := joinRaw(t, rc, mf, pp, wire.CmdGroupJoin); a.errno != 0 {
		t.Fatalf("join page-pool: %+v", a)
	}
	a := joinRaw(t, mgmtOnly, mf, mgmt, wire.CmdGroupJoin)
	require.Equal(t, unix.Errno(0), a.errno, "join mgmt: %+v", a)
	ns := ts.mana0.Dev.NetNS
	ifi := ts.mana0.Dev.Index
	for _, tc := range []struct {
		kind genl.Event
		cmd  uint8
		pool wire.NetdevPagePool
		want func(b *nlattr.Builder)
	}{
		{genl.EventNew, wire.NetdevCmdPagePoolAddNtf, wire.NetdevPagePool{ID: 3, Ifindex: ifi}, func(b *nlattr.Builder) {
			b.PutU32(wire.NetdevAPagePoolID, 3)
			b.PutU32(wire.NetdevAPagePoolIfindex, ifi)
			b.PutU32(wire.NetdevAPagePoolInflight, 0)
			b.PutU32(wire.NetdevAPagePoolInflightMem, 0)
		}},
		{genl.EventChange, wire.NetdevCmdPagePoolChangeNtf, wire.NetdevPagePool{ID: 3, Ifindex: ifi, Inflight: 2, InflightMem: 8192, DetachTime: 1 << 33},
			func(b *nlattr.Builder) {
				b.PutU32(wire.NetdevAPagePoolID, 3)
				b.PutU32(wire.NetdevAPagePoolIfindex, ifi)
				b.PutU32(wire.NetdevAPagePoolInflight, 2)
				b.PutU32(wire.NetdevAPagePoolInflightMem, 8192)
				b.PutU64(wire.NetdevAPagePoolDetachTime, 1<<33) // nla_put_uint: 8 bytes past u32
			}},
		{genl.EventChange, wire.NetdevCmdPagePoolChangeNtf, wire.NetdevPagePool{ID: 3, Inflight: 2, InflightMem: 8192, DetachTime: 40},
			func(b *nlattr.Builder) {
				b.PutU32(wire.NetdevAPagePoolID, 3)
				b.PutU32(wire.NetdevAPagePoolInflight, 2)
				b.PutU32(wire.NetdevAPagePoolInflightMem, 8192)
				b.PutU32(wire.NetdevAPagePoolDetachTime, 40)
			}},
		{genl.EventDel, wire.NetdevCmdPagePoolDelNtf, wire.NetdevPagePool{ID: 3, DetachTime: 40}, func(b *nlattr.Builder) {
			b.PutU32(wire.NetdevAPagePoolID, 3)
			b.PutU32(wire.NetdevAPagePoolInflight, 0)
			b.PutU32(wire.NetdevAPagePoolInflightMem, 0)
			b.PutU32(wire.NetdevAPagePoolDetachTime, 40)
		}},
	} {
		ts.srv.NotifyNetdevPagePool(tc.kind, genl.NetNS{Dev: ns.Dev, Ino: ns.Ino + 1}, tc.pool) // another namespace: nobody
		ts.srv.NotifyNetdevPagePool(tc.kind, ns, tc.pool)
		msgs := rc.recv()
		m := msgs[0]
		require.Len(t, msgs, 1, "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, nd, m.h.Type, "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, uint32(0), m.h.PID, "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, uint32(0), m.h.Seq, "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, tc.cmd, m.data[0], "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		require.Equal(t, byte(wire.NetdevFamilyVersion), m.data[1], "%s: NTF header %+v % x", tc.kind, m.h, m.data[:4])
		var want nlattr.Builder
		tc.want(&want)
		assert.Equal(t, string(want.B), string(m.data[4:]), "%s %+v: NTF attributes % x, want % x", tc.kind, tc.pool, m.data[4:], want.B)
		var back wire.NetdevPagePool
		if err := wire.NetdevPagePoolTable.Decode(m.data[4:], &back); err != nil || back != tc.pool {
			t.Errorf("%s: decoded %+v (%v), want %+v", tc.kind, back, err, tc.pool)
		}
	}
	ts.srv.NotifyNetdevPagePool(genl.Event(99), ns, wire.NetdevPagePool{ID: 1})
	// Neither the bogus kind nor the other namespace reached rc, and the mgmt subscriber got
	// nothing: the next datagram of each is the reply to a request.
	for _, c := range []*rawConn{rc, mgmtOnly} {
		c.send(netdevReq(nd, 0, wire.NetdevCmdDevGet, func(m *msgBuilder) { m.PutU32(wire.NetdevADevIfindex, ifi) }))
		m := c.recv()[0]
		assert.Equal(t, byte(wire.NetdevCmdDevGet), m.data[0], "subscriber got %+v % x before its reply", m.h, m.data[:4])
	}
}
