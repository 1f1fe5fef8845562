package genl_test

import (
	"context"
	"math"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/testenv"
)

// napiBackend is the memory backend with napi-set: it keeps each NAPI's settings by id, as
// a port keeps them by queue, and its napi-get view carries them.
type napiBackend struct {
	*genl.MemBackend
	mu   sync.Mutex
	cfg  map[uint32]wire.NetdevNAPI
	sets int
}

func (b *napiBackend) NetdevPort(ctx context.Context, c genl.Caller, d genl.Device) (genl.NetdevPort, error) {
	p, err := b.MemBackend.NetdevPort(ctx, c, d)
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, n := range p.NAPIs {
		if s, ok := b.cfg[n.ID]; ok {
			s.ID, s.Ifindex = n.ID, n.Ifindex
			p.NAPIs[i] = s
		}
	}
	return p, err
}

func (b *napiBackend) SetNAPI(ctx context.Context, c genl.Caller, d genl.Device, id uint32, s genl.NAPISet) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sets++
	n := b.cfg[id]
	if s.DeferHardIRQs != nil {
		n.DeferHardIRQs = *s.DeferHardIRQs
	}
	if s.GROFlushTimeout != nil {
		n.GROFlushTimeout = uint64(*s.GROFlushTimeout)
	}
	if s.IRQSuspendTimeout != nil {
		n.IRQSuspendTimeout = uint64(*s.IRQSuspendTimeout)
	}
	if s.Threaded != nil {
		n.Threaded = 0
		if *s.Threaded {
			n.Threaded = wire.NetdevNAPIThreadedEnabled
		}
	}
	b.cfg[id] = n
	return nil
}

// setCount returns how many napi-sets reached the backend.
func (b *napiBackend) setCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sets
}

func startNAPIServer(t *testing.T) (*testServer, *napiBackend) {
	var nb *napiBackend
	ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		nb = &napiBackend{MemBackend: pre.be, cfg: map[uint32]wire.NetdevNAPI{}}
		c.Backend.NetdevPort, c.Backend.SetNAPI = nb.NetdevPort, nb.SetNAPI
	})
	return ts, nb
}

func napiSetReq(fam uint16, id uint32, build func(m *msgBuilder)) []byte {
	return netdevReq(fam, 0, wire.NetdevCmdNAPISet, func(m *msgBuilder) {
		m.PutU32(wire.NetdevANAPIID, id)
		if build != nil {
			build(m)
		}
	})
}

// TestNetdevNAPISetClient: napi-set through the client changes only the settings it carries,
// napi-get reads them back, an unknown id is ENOENT, and a request without an id is the
// kernel's missing-attribute EINVAL.
func TestNetdevNAPISetClient(t *testing.T) {
	ts, nb := startNAPIServer(t)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	napis, err := c.NAPIs(ctx, ts.mana0.Dev.Index)
	require.NoError(t, err)
	require.NotEmpty(t, napis)
	id := napis[0].ID

	d, g, on := uint32(5), 20*time.Microsecond, true
	require.NoError(t, c.NAPISet(ctx, id, wire.NetdevNAPISet{DeferHardIRQs: &d, GROFlushTimeout: &g}))
	long := 10 * time.Second // beyond 32 bits of nanoseconds: an 8-byte NLA_UINT
	require.NoError(t, c.NAPISet(ctx, id, wire.NetdevNAPISet{IRQSuspendTimeout: &long, Threaded: &on}))
	got, err := c.NAPIs(ctx, ts.mana0.Dev.Index)
	require.NoError(t, err)
	var n wire.NetdevNAPI
	for _, x := range got {
		if x.ID == id {
			n = x
		}
	}
	assert.Equal(t, wire.NetdevNAPI{ID: id, Ifindex: ts.mana0.Dev.Index, Threaded: wire.NetdevNAPIThreadedEnabled,
		DeferHardIRQs: 5, GROFlushTimeout: uint64(g), IRQSuspendTimeout: uint64(long)}, n)

	err = c.NAPISet(ctx, 1, wire.NetdevNAPISet{DeferHardIRQs: &d})
	require.ErrorIs(t, err, unix.ENOENT)
	assert.Equal(t, 2, nb.setCount(), "an unknown id reaches no NAPI")
}

// TestNetdevNAPISetAdminOnly: napi-set is GENL_ADMIN_PERM: a peer that is not an admin gets
// EPERM without extack, before the policy, and nothing changes.
func TestNetdevNAPISetAdminOnly(t *testing.T) {
	ts, nb := startNAPIServer(t)
	requireRoot(t)
	rc := mustDialAs(t, ts.path, 65534)
	mid := manadFamilyID(t, rc, wire.NetdevFamilyName)
	for _, build := range []func(m *msgBuilder){
		func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIDeferHardIRQs, 1) },
		func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIDeferHardIRQs, math.MaxUint32) }, // out of range: EPERM first
	} {
		rc.send(napiSetReq(mid, 10000+100*ts.mana0.Dev.Index, build))
		a := decodeAck(t, rc.recv()[0])
		assert.Equal(t, unix.EPERM, a.errno)
		assert.Empty(t, a.msg)
		assert.Zero(t, a.off)
	}
	assert.Zero(t, nb.setCount())
}

// TestNetdevNAPISetMatchesKernel: napi-set's errors are the kernel's (policy ranges, a missing
// or unknown id, attributes napi-set does not take), and the same settings set on a veth's NAPI
// in the kernel and on a manad port's read back alike in napi-get (every attribute but the id
// and ifindex, byte for byte).
func TestNetdevNAPISetMatchesKernel(t *testing.T) {
	if major, minor := kernelRelease(t); major < 6 || major == 6 && minor < 17 {
		t.Skipf("kernel %d.%d: napi-set has every setting since 6.17", major, minor)
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.SkipOrFail(t, "needs ethtool: %v", err)
	}
	kc, vethIdx := kernelInNetNS(t)
	out, err := exec.Command("ip", "netns", "exec", kernelNetNSName(), "ethtool", "-K", "nd0", "gro", "on").CombinedOutput()
	require.NoError(t, err, "ethtool -K nd0 gro on: %s", out)
	ts, _ := startNAPIServer(t)
	rc := dialRaw(t, ts.path)
	kid, mid := kc.family(wire.NetdevFamilyName), manadFamilyID(t, rc, wire.NetdevFamilyName)
	dump := func(fam uint16, ifi uint32) []byte {
		return netdevReq(fam, nlattr.FlagDump, wire.NetdevCmdNAPIGet, func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIIfindex, ifi) })
	}
	kn, _ := dumpAll(t, kc.send, kc.recv, dump(kid, vethIdx))
	mn, _ := dumpAll(t, rc.send, rc.recv, dump(mid, ts.mana0.Dev.Index))
	require.NotEmpty(t, kn, "the veth with GRO on has no NAPI")
	require.NotEmpty(t, mn, "mana0 has no NAPI")
	napiID := func(m rawMsg) uint32 {
		for it := nlattr.NewIter(m.data, 4, len(m.data)-4); it.Next(); {
			if it.Attr().Type() == wire.NetdevANAPIID {
				return it.Attr().U32()
			}
		}
		t.Fatal("napi-get message without an id")
		return 0
	}
	kID, mID := napiID(kn[0]), napiID(mn[0])

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			build func(id uint32) func(m *msgBuilder)
		}{
			{"no id", func(uint32) func(m *msgBuilder) {
				return func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIDeferHardIRQs, 1) }
			}},
			{"unknown id", func(uint32) func(m *msgBuilder) {
				return func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIID, noSuchIfindex) }
			}},
			{"defer-hard-irqs beyond S32_MAX", func(id uint32) func(m *msgBuilder) {
				return func(m *msgBuilder) {
					m.PutU32(wire.NetdevANAPIID, id)
					m.PutU32(wire.NetdevANAPIDeferHardIRQs, math.MaxInt32+1)
				}
			}},
			{"threaded 2", func(id uint32) func(m *msgBuilder) {
				return func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIID, id); m.PutU32(wire.NetdevANAPIThreaded, 2) }
			}},
			{"gro-flush-timeout of 2 bytes", func(id uint32) func(m *msgBuilder) {
				return func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIID, id); m.PutU16(wire.NetdevANAPIGROFlushTimeout, 1) }
			}},
			{"ifindex", func(id uint32) func(m *msgBuilder) {
				return func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIID, id); m.PutU32(wire.NetdevANAPIIfindex, 1) }
			}},
			{"irq (beyond napi-set's attributes)", func(id uint32) func(m *msgBuilder) {
				return func(m *msgBuilder) { m.PutU32(wire.NetdevANAPIID, id); m.PutU32(wire.NetdevANAPIIRQ, 1) }
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				build := func(fam uint16, id uint32) []byte {
					return netdevReq(fam, 0, wire.NetdevCmdNAPISet, tc.build(id))
				}
				kc.send(build(kid, kID))
				rc.send(build(mid, mID))
				k, m := decodeAck(t, kc.recv()[0]), decodeAck(t, rc.recv()[0])
				require.NotZero(t, k.errno, "the kernel accepted it")
				k.payload, m.payload = nil, nil // the echoed ids differ
				assert.Equal(t, k, m, "kernel, manad")
			})
		}
	})

	for _, tc := range []struct {
		name  string
		build func(m *msgBuilder)
	}{
		{"defer and gro", func(m *msgBuilder) {
			m.PutU32(wire.NetdevANAPIDeferHardIRQs, 2)
			m.PutU32(wire.NetdevANAPIGROFlushTimeout, 200000)
		}},
		{"irq-suspend as 8 bytes, defer max", func(m *msgBuilder) {
			m.PutU64(wire.NetdevANAPIIRQSuspendTimeout, 20_000_000_000)
			m.PutU32(wire.NetdevANAPIDeferHardIRQs, math.MaxInt32)
		}},
		{"only the id: nothing changes", nil},
		{"back to 0", func(m *msgBuilder) {
			m.PutU32(wire.NetdevANAPIDeferHardIRQs, 0)
			m.PutU32(wire.NetdevANAPIGROFlushTimeout, 0)
			m.PutU64(wire.NetdevANAPIIRQSuspendTimeout, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc.send(napiSetReq(kid, kID, tc.build))
			rc.send(napiSetReq(mid, mID, tc.build))
			k, m := decodeAck(t, kc.recv()[0]), decodeAck(t, rc.recv()[0])
			require.Zero(t, k.errno, "kernel")
			k.payload, m.payload = nil, nil
			require.Equal(t, k, m, "ACK (kernel, manad)")
			kn, _ := dumpAll(t, kc.send, kc.recv, dump(kid, vethIdx))
			mn, _ := dumpAll(t, rc.send, rc.recv, dump(mid, ts.mana0.Dev.Index))
			var kMsg, mMsg rawMsg
			for _, x := range kn {
				if napiID(x) == kID {
					kMsg = x
				}
			}
			for _, x := range mn {
				if napiID(x) == mID {
					mMsg = x
				}
			}
			assert.Equal(t, napiShape(kMsg), napiShape(mMsg), "napi-get after napi-set (kernel, manad)")
		})
	}
}

// TestNetdevOpList: every op of manad's netdev family has the flags the kernel advertises for
// it (napi-set: GENL_ADMIN_PERM, do, policy), and the kernel's ops manad leaves out are only
// the dmabuf bindings (bind-rx, bind-tx), which a manad port cannot take.
func TestNetdevOpList(t *testing.T) {
	if major, minor := kernelRelease(t); major < 6 || major == 6 && minor < 15 {
		t.Skipf("kernel %d.%d: compared with 6.15's op list and later", major, minor)
	}
	requireRoot(t)
	kc := dialKernel(t)
	kc.send(getFamilyReq(wire.NetdevFamilyName))
	kern := decodeFamily(t, kc.recv()[0])
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	rc.send(getFamilyReq(wire.NetdevFamilyName))
	got := decodeFamily(t, rc.recv()[0])

	kflags := map[uint32]uint32{}
	for _, o := range kern.ops {
		kflags[o.id] = o.flags
	}
	served := map[uint32]bool{}
	for _, o := range got.ops {
		served[o.id] = true
		fl, ok := kflags[o.id]
		if !ok && o.id == wire.NetdevCmdPagePoolStatsGet {
			continue // a kernel built without CONFIG_PAGE_POOL_STATS
		}
		assert.True(t, ok, "op %d: not in the kernel's list", o.id)
		assert.Equal(t, fl, o.flags, "op %d's flags (kernel, manad)", o.id)
	}
	assert.Equal(t, uint32(unix.GENL_ADMIN_PERM|unix.GENL_CMD_CAP_DO|unix.GENL_CMD_CAP_HASPOL), kflags[wire.NetdevCmdNAPISet], "napi-set's flags")
	for _, o := range kern.ops {
		if !served[o.id] {
			assert.Contains(t, []uint32{wire.NetdevCmdBindRX, wire.NetdevCmdBindTX}, o.id, "kernel op %d missing from manad's", o.id)
		}
	}
	assert.Equal(t, kern.groups, got.groups, "multicast groups")
}

// TestNetdevNAPISetNegativeTimeout: the client refuses a negative timeout before sending.
func TestNetdevNAPISetNegativeTimeout(t *testing.T) {
	ts, nb := startNAPIServer(t)
	c := dialClient(t, ts.path)
	neg := -time.Microsecond
	require.ErrorIs(t, c.NAPISet(ctxT(t), 10000, wire.NetdevNAPISet{GROFlushTimeout: &neg}), unix.EINVAL)
	assert.Zero(t, nb.setCount())
}
