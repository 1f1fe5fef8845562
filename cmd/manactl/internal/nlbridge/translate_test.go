package nlbridge

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// Family and group numbers of the unit tests' Socket: deliberately unlike manad's defaults, so
// that a translation that does nothing fails.
const (
	tkEthtool = 0x1a // the kernel's ethtool
	tkNetdev  = 0x1b // the kernel's netdev
	tmEthtool = 0x13 // manad's
	tmNetdev  = 0x15
	tmManad   = 0x14
	trManad   = 0x3ff // manad's family as the program sees it
	tmEvents  = 3     // manad's "events" group
	trEvents  = 63    // as the program sees it
	tPortID   = 0xfffff123
)

// unitSocket is a Socket with fixed ids, a port cache holding ports, manad considered gone (so
// that nothing asks it anything) and a real kernel socket for name lookups.
func unitSocket(t *testing.T, ports ...uint32) *Socket {
	t.Helper()
	s := &Socket{
		kEthtool: tkEthtool, kNetdev: tkNetdev, mEthtool: tmEthtool, mNetdev: tmNetdev, mManad: tmManad, rManad: trManad,
		mEvents: tmEvents, manadGroupIDs: map[uint32]uint32{tmEvents: trEvents},
		portid: tPortID, bound: true, cmdGroups: map[uint32]bool{},
	}
	s.manadDead.Store(true)
	s.cache = newCache(s)
	for _, p := range ports {
		s.cache.ports[p] = true
	}
	s.cache.last = time.Now()
	k, err := openKernel()
	require.NoError(t, err)
	t.Cleanup(func() { k.Close() })
	s.k = k
	return s
}

func msg(typ, flags uint16, seq, pid uint32, cmd uint8, attrs func(b *nlattr.Builder)) []byte {
	var b nlattr.Builder
	start := b.BeginMsg(typ, flags, seq, pid)
	b.Genl(cmd, 1)
	if attrs != nil {
		attrs(&b)
	}
	b.EndMsg(start)
	return b.B
}

func TestSplitMsgs(t *testing.T) {
	one := msg(0x20, 1, 1, 0, 1, func(b *nlattr.Builder) { b.PutU8(1, 7) }) // 28 bytes, aligned
	odd := one[:len(one)-3]                                                 // nlmsg_len 28 but 25 bytes: past the end
	short := append([]byte(nil), one...)
	binary.NativeEndian.PutUint32(short, 8) // nlmsg_len < 16
	unaligned := append([]byte(nil), one[:nlattr.MsgHdrLen+nlattr.GenlHdrLen+5]...)
	binary.NativeEndian.PutUint32(unaligned, uint32(len(unaligned))) // 25 bytes, then padding
	two := appendMsg(appendMsg(nil, unaligned), one)
	for _, tc := range []struct {
		name     string
		in       []byte
		msgs     int
		restLen  int
		firstLen int
	}{
		{"empty", nil, 0, 0, 0},
		{"shorter than a header", one[:10], 0, 10, 0},
		{"one", one, 1, 0, len(one)},
		{"nlmsg_len past the end", odd, 0, len(odd), 0},
		{"nlmsg_len below a header", short, 0, len(short), 0},
		{"unaligned then aligned", two, 2, 0, len(unaligned)},
		{"trailing garbage", append(append([]byte(nil), one...), 1, 2, 3), 1, 3, len(one)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, rest := splitMsgs(tc.in)
			assert.Len(t, msgs, tc.msgs)
			assert.Len(t, rest, tc.restLen)
			if tc.msgs > 0 {
				assert.Len(t, msgs[0], tc.firstLen)
			}
		})
	}
}

func TestEthtoolDev(t *testing.T) {
	hdr := func(f func(b *nlattr.Builder)) []byte {
		return msg(tkEthtool, 1, 1, 0, unix.ETHTOOL_MSG_RINGS_GET, func(b *nlattr.Builder) {
			n := b.Nest(unix.ETHTOOL_A_RINGS_HEADER)
			f(b)
			b.EndNest(n)
		})
	}
	truncated := hdr(func(b *nlattr.Builder) { b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 5) })
	// The inner attribute claims more than its nest holds.
	binary.NativeEndian.PutUint16(truncated[nlattr.MsgHdrLen+nlattr.GenlHdrLen+4:], 40)
	for _, tc := range []struct {
		name string
		m    []byte
		idx  uint32
		dev  string
	}{
		{"index", hdr(func(b *nlattr.Builder) { b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 7) }), 7, ""},
		{"name", hdr(func(b *nlattr.Builder) { b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "eth0") }), 0, "eth0"},
		{"both", hdr(func(b *nlattr.Builder) {
			b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 3)
			b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "x")
		}), 3, "x"},
		{"empty header", hdr(func(*nlattr.Builder) {}), 0, ""},
		{"no header", msg(tkEthtool, 1, 1, 0, unix.ETHTOOL_MSG_STRSET_GET, nil), 0, ""},
		{"index too short", hdr(func(b *nlattr.Builder) { b.PutU16(unix.ETHTOOL_A_HEADER_DEV_INDEX, 7) }), 0, ""},
		{"truncated nest", truncated, 0, ""},
		{"no genl header", msg(tkEthtool, 1, 1, 0, 0, nil)[:nlattr.MsgHdrLen], 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx, dev := ethtoolDev(tc.m)
			assert.Equal(t, tc.idx, idx)
			assert.Equal(t, tc.dev, dev)
		})
	}
}

func TestRoute(t *testing.T) {
	const port, other = 41, 42
	s := unitSocket(t, port)
	eth := func(flags uint16, cmd uint8, idx uint32) []byte {
		return msg(tkEthtool, nlattr.FlagRequest|flags, 9, 0, cmd, func(b *nlattr.Builder) {
			n := b.Nest(1)
			if idx != 0 {
				b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, idx)
			}
			b.EndNest(n)
		})
	}
	nd := func(flags uint16, cmd uint8, attr uint16, v uint32) []byte {
		return msg(tkNetdev, nlattr.FlagRequest|flags, 9, 0, cmd, func(b *nlattr.Builder) {
			if attr != 0 {
				b.PutU32(attr, v)
			}
		})
	}
	ctrl := func(flags uint16, f func(b *nlattr.Builder)) []byte {
		return msg(unix.GENL_ID_CTRL, nlattr.FlagRequest|flags, 9, 0, unix.CTRL_CMD_GETFAMILY, f)
	}
	for _, tc := range []struct {
		name string
		m    []byte
		mode mode
		typ  uint16 // of the forwarded message (manad's half)
	}{
		{"ethtool get of a port", eth(0, unix.ETHTOOL_MSG_RINGS_GET, port), modeManad, tmEthtool},
		{"ethtool get of another device", eth(0, unix.ETHTOOL_MSG_RINGS_GET, other), modeKernel, 0},
		{"ethtool set of a port with ACK", eth(nlattr.FlagAck, unix.ETHTOOL_MSG_RINGS_SET, port), modeManad, tmEthtool},
		{"ethtool without device", eth(0, unix.ETHTOOL_MSG_STRSET_GET, 0), modeKernel, 0},
		{"ethtool dump", eth(nlattr.FlagDump, unix.ETHTOOL_MSG_RINGS_GET, 0), modeMerged, tmEthtool},
		{"ethtool by name of lo", msg(tkEthtool, nlattr.FlagRequest, 9, 0, unix.ETHTOOL_MSG_RINGS_GET, func(b *nlattr.Builder) {
			n := b.Nest(1)
			b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "lo")
			b.EndNest(n)
		}), modeKernel, 0},
		{"ethtool too short for genl", msg(tkEthtool, nlattr.FlagRequest, 9, 0, 0, nil)[:nlattr.MsgHdrLen], modeKernel, 0},
		{"netdev dev-get of a port", nd(0, wire.NetdevCmdDevGet, wire.NetdevADevIfindex, port), modeManad, tmNetdev},
		{"netdev dev-get of another", nd(0, wire.NetdevCmdDevGet, wire.NetdevADevIfindex, other), modeKernel, 0},
		{"netdev dev dump", nd(nlattr.FlagDump, wire.NetdevCmdDevGet, 0, 0), modeMerged, tmNetdev},
		{"netdev queue dump of a port", nd(nlattr.FlagDump, wire.NetdevCmdQueueGet, wire.NetdevAQueueIfindex, port), modeManad, tmNetdev},
		{"netdev queue dump of another", nd(nlattr.FlagDump, wire.NetdevCmdQueueGet, wire.NetdevAQueueIfindex, other), modeKernelDump, 0},
		{"netdev qstats dump", nd(nlattr.FlagDump, wire.NetdevCmdQStatsGet, 0, 0), modeMerged, tmNetdev},
		{"netdev unknown pool", nd(0, wire.NetdevCmdPagePoolGet, wire.NetdevAPagePoolID, 99), modeKernel, 0},
		{"manad family", msg(trManad, nlattr.FlagRequest, 9, 0, wire.CmdPortGet, nil), modeManad, tmManad},
		{"getfamily ethtool", ctrl(0, func(b *nlattr.Builder) { b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "ethtool") }), modeKernel, 0},
		{"getfamily manad", ctrl(0, func(b *nlattr.Builder) { b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "manad") }), modeManad, unix.GENL_ID_CTRL},
		{"getfamily by manad's id", ctrl(0, func(b *nlattr.Builder) { b.PutU16(unix.CTRL_ATTR_FAMILY_ID, trManad) }), modeManad, unix.GENL_ID_CTRL},
		{"family dump", ctrl(nlattr.FlagDump, nil), modeMerged, unix.GENL_ID_CTRL},
		{"other family", msg(0x30, nlattr.FlagRequest, 9, 0, 1, nil), modeKernel, 0},
		{"other family dump", msg(0x30, nlattr.FlagRequest|nlattr.FlagDump, 9, 0, 1, nil), modeKernelDump, 0},
		{"not a request", msg(tkEthtool, 0, 9, 0, unix.ETHTOOL_MSG_RINGS_GET, nil), modeKernel, 0},
		{"control message", msg(nlattr.MsgNoop, nlattr.FlagRequest|nlattr.FlagAck, 9, 0, 0, nil), modeKernel, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.route(tc.m)
			assert.Equal(t, tc.mode, r.mode)
			if tc.typ == 0 {
				assert.Nil(t, r.fwd)
				return
			}
			require.Len(t, r.fwd, len(tc.m))
			h, _ := nlattr.ReadHeader(r.fwd)
			assert.Equal(t, tc.typ, h.Type)
			assert.Equal(t, uint32(tPortID), h.PID, "manad echoes the port id")
			// A GET's reply ends it; every other request to manad is acknowledged.
			get := map[string]bool{"ethtool get of a port": true, "netdev dev-get of a port": true,
				"getfamily manad": true, "getfamily by manad's id": true}[tc.name]
			assert.Equal(t, get, r.replyEnds)
			assert.Equal(t, !get, h.Flags&nlattr.FlagAck != 0, "NLM_F_ACK")
			if id := genlAttr(r.fwd, unix.CTRL_ATTR_FAMILY_ID); h.Type == unix.GENL_ID_CTRL && id.Present() {
				assert.Equal(t, uint16(tmManad), id.U16(), "manad's own id inside")
				return
			}
			assert.Equal(t, tc.m[nlattr.MsgHdrLen:], r.fwd[nlattr.MsgHdrLen:], "payload")
		})
	}
}

func TestFixError(t *testing.T) {
	s := unitSocket(t)
	orig := msg(trManad, nlattr.FlagRequest, 77, 0, wire.CmdPortGet, func(b *nlattr.Builder) { b.PutU32(9, 1) })
	r := s.route(orig)
	require.Equal(t, modeManad, r.mode)
	e := &nlattr.Error{Errno: unix.ENODEV, Message: "no device"}
	for _, tc := range []struct {
		name string
		opt  nlattr.AckOptions
	}{
		{"echoed with TLVs", nlattr.AckOptions{ExtAck: true}},
		{"capped", nlattr.AckOptions{CapAck: true}},
		{"plain", nlattr.AckOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What manad sends for the forwarded message, and what the kernel would for the original.
			got := nlattr.AppendAck(nil, r.fwd, tPortID, e.Errno, e, tc.opt)
			want := nlattr.AppendAck(nil, orig, tPortID, e.Errno, e, tc.opt)
			require.NotEqual(t, want, got)
			s.fixError(r, got)
			assert.Equal(t, want, got)
		})
	}
	t.Run("too short to hold a request", func(t *testing.T) {
		m := make([]byte, nlattr.MsgHdrLen+4)
		binary.NativeEndian.PutUint32(m, uint32(len(m)))
		putType(m, nlattr.MsgError)
		s.fixError(r, m) // must not panic
		assert.Equal(t, uint32(tPortID), binary.NativeEndian.Uint32(m[12:]))
	})
}

func TestTranslate(t *testing.T) {
	s := unitSocket(t)
	family := func(id uint16, group, pid uint32) []byte {
		return msg(unix.GENL_ID_CTRL, 0, 5, pid, unix.CTRL_CMD_NEWFAMILY, func(b *nlattr.Builder) {
			b.PutU16(unix.CTRL_ATTR_FAMILY_ID, id)
			b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "manad")
			gs := b.NestNoFlag(unix.CTRL_ATTR_MCAST_GROUPS)
			g := b.NestNoFlag(1)
			b.PutString(unix.CTRL_ATTR_MCAST_GRP_NAME, "events")
			b.PutU32(unix.CTRL_ATTR_MCAST_GRP_ID, group)
			b.EndNest(g)
			b.EndNest(gs)
		})
	}
	for _, tc := range []struct {
		name     string
		in, want []byte
		pid      uint32
	}{
		{"ethtool reply", msg(tmEthtool, 0, 5, tPortID, 1, nil), msg(tkEthtool, 0, 5, tPortID, 1, nil), tPortID},
		{"netdev notification", msg(tmNetdev, 0, 0, 0, 2, nil), msg(tkNetdev, 0, 0, 0, 2, nil), 0},
		{"manad family", msg(tmManad, 0, 5, 0, 1, nil), msg(trManad, 0, 5, tPortID, 1, nil), tPortID},
		{"manad's nlctrl entry", family(tmManad, tmEvents, 0), family(trManad, trEvents, tPortID), tPortID},
		{"another family's nlctrl entry", family(0x33, tmEvents, 0), family(0x33, tmEvents, tPortID), tPortID},
		{"unknown family", msg(0x44, 0, 5, 0, 1, nil), msg(0x44, 0, 5, tPortID, 1, nil), tPortID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := append([]byte(nil), tc.in...)
			s.translate(m, tc.pid)
			assert.Equal(t, tc.want, m)
		})
	}
}

func TestMarkerAck(t *testing.T) {
	mk := markerMsg(1234)
	ack := nlattr.AppendAck(nil, mk, tPortID, 0, nil, nlattr.AckOptions{})
	seq, ok := markerAck(ack)
	assert.True(t, ok)
	assert.Equal(t, uint32(1234), seq)
	// The program's own NOOP with an ACK is not the bridge's marker.
	own := msg(nlattr.MsgNoop, nlattr.FlagRequest|nlattr.FlagAck, 1234, tPortID, 0, nil)[:nlattr.MsgHdrLen]
	binary.NativeEndian.PutUint32(own, nlattr.MsgHdrLen)
	_, ok = markerAck(nlattr.AppendAck(nil, own, tPortID, 0, nil, nlattr.AckOptions{}))
	assert.False(t, ok)
	_, ok = markerAck(ack[:errOff+4])
	assert.False(t, ok, "truncated")
}

func TestMergedDone(t *testing.T) {
	s := unitSocket(t)
	orig := msg(tkEthtool, nlattr.FlagRequest|nlattr.FlagDump, 8, 0, unix.ETHTOOL_MSG_RINGS_GET, nil)
	kOK := nlattr.AppendDone(nil, 8, tPortID, 0, "", false)
	kErr := nlattr.AppendDone(nil, 8, tPortID, unix.EIO, "", false)
	mErr := &nlattr.Error{Errno: unix.ENOMEM, Message: "manad: no memory"}
	for _, tc := range []struct {
		name    string
		kDone   []byte
		mErr    *nlattr.Error
		extAck  bool
		errno   unix.Errno
		message string
	}{
		{"both fine", kOK, nil, false, 0, ""},
		{"manad failed", kOK, mErr, false, unix.ENOMEM, ""},
		{"manad failed, extack on", kOK, mErr, true, unix.ENOMEM, "manad: no memory"},
		{"kernel failed first", kErr, mErr, true, unix.EIO, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.extAck = tc.extAck
			r := &request{orig: orig, kDone: tc.kDone, mErr: tc.mErr}
			r.hdr, _ = nlattr.ReadHeader(orig)
			d := s.mergedDone(r)
			h, _ := nlattr.ReadHeader(d)
			assert.Equal(t, nlattr.MsgDone, h.Type)
			assert.Equal(t, uint32(8), h.Seq)
			assert.Equal(t, uint32(tPortID), h.PID)
			errno, _ := errnoOf(d)
			assert.Equal(t, tc.errno, errno)
			assert.Equal(t, tc.message, extackMsg(d))
		})
	}
}

func TestGroupsAndOptionsWithoutManad(t *testing.T) {
	s := unitSocket(t)
	s.toManadGroup = map[uint32]uint32{trEvents: tmEvents}
	s.manadJoined = map[uint32]bool{}
	// A group id beyond the kernel's is the kernel's EINVAL, nothing recorded.
	handled, err := s.SetOption(unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, []byte{0xff, 0xff, 0, 0})
	assert.True(t, handled)
	assert.ErrorIs(t, err, unix.EINVAL)
	assert.Empty(t, s.cmdGroups)
	// manad's translated group joins on the kernel socket too: LIST_MEMBERSHIPS shows it.
	v := make([]byte, 4)
	binary.NativeEndian.PutUint32(v, trEvents)
	_, err = s.SetOption(unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, v)
	require.NoError(t, err)
	val, handled, err := s.Option(unix.SOL_NETLINK, unix.NETLINK_LIST_MEMBERSHIPS, 16)
	require.NoError(t, err)
	assert.True(t, handled)
	require.GreaterOrEqual(t, len(val), 8)
	short, _, err := s.Option(unix.SOL_NETLINK, unix.NETLINK_LIST_MEMBERSHIPS, 4)
	require.NoError(t, err)
	assert.Equal(t, len(val), len(short), "the length the kernel needs, whatever the buffer")
	assert.Equal(t, []byte{0, 0, 0, 0}, short[4:8], "nothing past the buffer")
	assert.NotZero(t, binary.NativeEndian.Uint32(val[4:])&(1<<(trEvents-1-32)), "group g is bit g-1")
	// Options of other levels are the Unix socket's.
	handled, err = s.SetOption(unix.SOL_SOCKET, unix.SO_RCVBUF, []byte{0, 0, 1, 0})
	assert.False(t, handled)
	assert.NoError(t, err)
	// Unknown netlink options: the kernel's ENOPROTOOPT.
	_, err = s.SetOption(unix.SOL_NETLINK, 99, []byte{1, 0, 0, 0})
	assert.ErrorIs(t, err, unix.ENOPROTOOPT)
	// NO_ENOBUFS: the kernel's value reads back.
	_, err = s.SetOption(unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, []byte{1, 0, 0, 0})
	require.NoError(t, err)
	val, _, err = s.Option(unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 4)
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 0, 0, 0}, val)
	assert.True(t, s.noENOBUFS.Load())
	// PKTINFO is the program's own.
	_, err = s.SetOption(unix.SOL_NETLINK, unix.NETLINK_PKTINFO, []byte{1, 0, 0, 0})
	require.NoError(t, err)
	val, _, err = s.Option(unix.SOL_NETLINK, unix.NETLINK_PKTINFO, 4)
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 0, 0, 0}, val)
}

// TestIDTranslation: manad's page-pool and NAPI ids reach the program above idBase and come
// back down, so that they never name a kernel page pool or NAPI with the same number.
func TestIDTranslation(t *testing.T) {
	s := unitSocket(t)
	req := func(cmd uint8, f func(b *nlattr.Builder)) []byte {
		return msg(tkNetdev, nlattr.FlagRequest, 9, 0, cmd, f)
	}
	u32 := func(attr uint16, v uint32) func(b *nlattr.Builder) {
		return func(b *nlattr.Builder) { b.PutU32(attr, v) }
	}
	statsInfo := func(v uint32) func(b *nlattr.Builder) {
		return func(b *nlattr.Builder) {
			n := b.Nest(wire.NetdevAPagePoolStatsInfo)
			b.PutU32(wire.NetdevAPagePoolID, v)
			b.EndNest(n)
		}
	}
	statsID := func(m []byte) (uint64, bool) {
		return uintOf(nestedAttr(m, genlAttr(m, wire.NetdevAPagePoolStatsInfo), wire.NetdevAPagePoolID))
	}
	napiID := func(m []byte) (uint64, bool) { return uintOf(genlAttr(m, wire.NetdevANAPIID)) }
	poolID := func(m []byte) (uint64, bool) { return uintOf(genlAttr(m, wire.NetdevAPagePoolID)) }
	for _, tc := range []struct {
		name string
		m    []byte
		mode mode
		id   func(m []byte) (uint64, bool)
		want uint64 // the id manad gets
	}{
		{"napi-get of the kernel's NAPI 8193", req(wire.NetdevCmdNAPIGet, u32(wire.NetdevANAPIID, 8193)), modeKernel, nil, 0},
		{"napi-get of manad's NAPI 8193", req(wire.NetdevCmdNAPIGet, u32(wire.NetdevANAPIID, idBase+8193)), modeManad, napiID, 8193},
		{"napi-set of manad's NAPI 8194", req(wire.NetdevCmdNAPISet, u32(wire.NetdevANAPIID, idBase+8194)), modeManad, napiID, 8194},
		{"page-pool-get of the kernel's pool 5", req(wire.NetdevCmdPagePoolGet, u32(wire.NetdevAPagePoolID, 5)), modeKernel, nil, 0},
		{"page-pool-get of manad's pool 5", req(wire.NetdevCmdPagePoolGet, u32(wire.NetdevAPagePoolID, idBase+5)), modeManad, poolID, 5},
		{"page-pool-stats-get of the kernel's pool 5", req(wire.NetdevCmdPagePoolStatsGet, statsInfo(5)), modeKernel, nil, 0},
		{"page-pool-stats-get of manad's pool 5", req(wire.NetdevCmdPagePoolStatsGet, statsInfo(idBase+5)), modeManad, statsID, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.route(tc.m)
			require.Equal(t, tc.mode, r.mode)
			if tc.id == nil {
				return
			}
			got, ok := tc.id(r.fwd)
			require.True(t, ok)
			assert.Equal(t, tc.want, got)
			orig, _ := tc.id(r.orig)
			assert.Equal(t, idBase+tc.want, orig, "the program's request is left as it sent it")
		})
	}

	// manad's answers and notifications, u32 and u64 ids alike.
	ans := msg(tmNetdev, 0, 9, tPortID, wire.NetdevCmdPagePoolGet, func(b *nlattr.Builder) {
		b.PutU64(wire.NetdevAPagePoolID, 5)
		b.PutU32(wire.NetdevAPagePoolIfindex, 41)
		b.PutU32(wire.NetdevAPagePoolNAPIID, 8193)
	})
	s.translate(ans, tPortID)
	assert.Equal(t, uint16(tkNetdev), msgType(ans))
	id, _ := poolID(ans)
	assert.Equal(t, uint64(idBase+5), id)
	id, _ = uintOf(genlAttr(ans, wire.NetdevAPagePoolNAPIID))
	assert.Equal(t, uint64(idBase+8193), id)
	idx, _ := u32Of(genlAttr(ans, wire.NetdevAPagePoolIfindex))
	assert.Equal(t, uint32(41), idx, "other attributes untouched")
	for _, c := range []struct {
		cmd  uint8
		attr uint16
	}{{wire.NetdevCmdNAPIGet, wire.NetdevANAPIID}, {wire.NetdevCmdQueueGet, wire.NetdevAQueueNAPIID},
		{wire.NetdevCmdPagePoolChangeNtf, wire.NetdevAPagePoolID}} {
		m := msg(tmNetdev, 0, 0, 0, c.cmd, u32(c.attr, 8193))
		s.translate(m, 0)
		v, _ := u32Of(genlAttr(m, c.attr))
		assert.Equal(t, uint32(idBase+8193), v, "cmd %d", c.cmd)
	}
	m := msg(tmNetdev, 0, 9, tPortID, wire.NetdevCmdPagePoolStatsGet, statsInfo(7))
	s.translate(m, tPortID)
	id, _ = statsID(m)
	assert.Equal(t, uint64(idBase+7), id)
	// A u32 id that would not fit stays as it is.
	m = msg(tmNetdev, 0, 0, 0, wire.NetdevCmdNAPIGet, u32(wire.NetdevANAPIID, math.MaxUint32-1))
	s.translate(m, 0)
	v, _ := u32Of(genlAttr(m, wire.NetdevANAPIID))
	assert.Equal(t, uint32(math.MaxUint32-1), v)
}
