package genl_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dialClient(t *testing.T, path string) *client.Client {
	t.Helper()
	c, err := client.Dial(path)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

var threeFlags = []string{"full-page-rx", "flag-b", "flag-c"}

func TestPrivateFlags(t *testing.T) {
	ts := startServer(t, nil)
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) { d.Names, d.Flags = threeFlags, 0b100 })
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}

	want := &client.PrivateFlags{
		Interface: client.Interface{Index: int(ts.mana0.Dev.Index), Name: "mana0"},
		Flags:     []client.Flag{{Name: "full-page-rx", Index: 0}, {Name: "flag-b", Index: 1}, {Name: "flag-c", Index: 2, On: true}},
	}
	for _, ifi := range []client.Interface{mana0, {Index: int(ts.mana0.Dev.Index)}, {Index: int(ts.mana0.Dev.Index), Name: "mana0"}} {
		got, err := c.PrivateFlags(ctx, ifi)
		require.NoError(t, err, "PrivateFlags(%+v)", ifi)
		assert.Empty(t, cmp.Diff(want, got), "PrivateFlags(%+v) (-want +got)", ifi)
	}

	// By name and by index; unlisted flags keep their value.
	require.NoError(t, c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Name: "full-page-rx", On: true}}}))
	require.NoError(t, c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Index: 2, On: false}, {Index: 1, On: true}}}))
	got := ts.be.Dev(ts.mana0.Dev.Index).Flags
	assert.Equal(t, uint32(0b011), got, "flags = %#b, want 0b011", got)
	assert.Empty(t, cmp.Diff([]string{"SetPrivFlags mana0 0x5", "SetPrivFlags mana0 0x3"}, ts.be.Calls()), "backend calls (-want +got)")
	// No change: no driver call (and, tested in TestNotifications, no NTF).
	require.NoError(t, c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: mana0, Flags: []client.Flag{{Name: "flag-b", On: true}}}))
	assert.Empty(t, ts.be.Calls(), "a SET without change called the backend")

	// Dump: ports only; lo0 (EOPNOTSUPP) is skipped silently.
	all, err := c.AllPrivateFlags(ctx)
	require.NoError(t, err)
	var names []string
	for _, p := range all {
		names = append(names, p.Interface.Name)
	}
	assert.Empty(t, cmp.Diff([]string{"mana0", "mana1"}, names), "dump devices (-want +got)")

	// A device without private flags.
	_, err = c.PrivateFlags(ctx, client.Interface{Name: "lo0"})
	assert.ErrorIs(t, err, unix.EOPNOTSUPP, "lo0: %v, want EOPNOTSUPP", err)
	// Lookup errors carry the kernel's extack.
	_, err = c.PrivateFlags(ctx, client.Interface{Name: "nosuch"})
	var ce *client.Error
	assert.ErrorIs(t, err, unix.ENODEV, "unknown name")
	if assert.ErrorAs(t, err, &ce, "unknown name") {
		assert.Equal(t, "no device matches name", ce.Message, "unknown name")
		assert.NotZero(t, ce.Offset, "unknown name: no offset")
	}
	_, err = c.PrivateFlags(ctx, client.Interface{Index: int(ts.mana0.Dev.Index), Name: "mana1"})
	assert.ErrorIs(t, err, unix.ENODEV, "mismatch")
	if assert.ErrorAs(t, err, &ce, "mismatch") {
		assert.Equal(t, "ifindex and name do not match", ce.Message, "mismatch")
	}
}

// TestPrivFlagsReplyLayout checks the verbose and compact reply bytes.
func TestPrivFlagsReplyLayout(t *testing.T) {
	ts := startServer(t, nil)
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) { d.Names, d.Flags = threeFlags, 0b101 })
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	get := func(flags uint32) nlattr.Attr {
		m := newMsg(eth, nlattr.FlagRequest, 9, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1)
		header(m, 1, func(m *msgBuilder) {
			m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
			if flags != 0 {
				m.PutU32(unix.ETHTOOL_A_HEADER_FLAGS, flags)
			}
		})
		rc.send(m.done())
		msgs := rc.recv()
		require.Len(t, msgs, 1, "reply %+v", msgs)
		require.Equal(t, eth, msgs[0].h.Type, "reply %+v", msgs)
		require.Equal(t, uint16(0), msgs[0].h.Flags, "reply %+v", msgs)
		require.Equal(t, uint32(9), msgs[0].h.Seq, "reply %+v", msgs)
		require.Equal(t, uint32(4242), msgs[0].h.PID, "reply %+v", msgs)
		require.Equal(t, byte(unix.ETHTOOL_MSG_PRIVFLAGS_GET_REPLY), msgs[0].data[0], "genl header % x", msgs[0].data[:4])
		require.Equal(t, byte(1), msgs[0].data[1], "genl header % x", msgs[0].data[:4])
		var order []uint16
		var flagsAttr nlattr.Attr
		it := nlattr.NewIter(msgs[0].data, 4, len(msgs[0].data)-4)
		for it.Next() {
			order = append(order, it.Attr().Raw)
			if it.Attr().Type() == 2 {
				flagsAttr = it.Attr()
			}
		}
		assert.Empty(t, cmp.Diff([]uint16{1 | nlattr.FlagNested, 2 | nlattr.FlagNested}, order), "top-level attrs (-want +got)")
		return flagsAttr
	}

	bs, err := ethtool.DecodeBitset(get(0).Data)
	require.NoError(t, err)
	want := ethtool.Bitset{Size: 3, Bits: []ethtool.Bit{{Index: 0, Name: "full-page-rx", On: true}, {Index: 1, Name: "flag-b"}, {Index: 2, Name: "flag-c", On: true}}}
	assert.Empty(t, cmp.Diff(want, bs), "verbose bitset (-want +got)")
	bs, err = ethtool.DecodeBitset(get(unix.ETHTOOL_FLAG_COMPACT_BITSETS).Data)
	require.NoError(t, err)
	want = ethtool.Bitset{Size: 3, Compact: true, Value: []uint32{0b101}, Mask: []uint32{0b111}}
	assert.Empty(t, cmp.Diff(want, bs), "compact bitset (-want +got)")
}

// bitsetReq builds a PRIVFLAGS_SET for mana0; fill writes the FLAGS nest
// content and may record attribute offsets.
func bitsetReq(eth uint16, seq uint32, nested bool, fill func(m *msgBuilder, offs map[string]int)) ([]byte, map[string]int) {
	offs := map[string]int{}
	m := newMsg(eth, nlattr.FlagRequest|nlattr.FlagAck, seq, unix.ETHTOOL_MSG_PRIVFLAGS_SET, 1)
	header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0") })
	offs["flags"] = m.Len()
	var n int
	if nested {
		n = m.Nest(unix.ETHTOOL_A_PRIVFLAGS_FLAGS)
	} else {
		n = m.NestNoFlag(unix.ETHTOOL_A_PRIVFLAGS_FLAGS)
	}
	fill(m, offs)
	m.EndNest(n)
	return m.done(), offs
}

func bits(m *msgBuilder, offs map[string]int, fill func()) {
	offs["bits"] = m.Len()
	n := m.Nest(unix.ETHTOOL_A_BITSET_BITS)
	fill()
	m.EndNest(n)
}

func bit(m *msgBuilder, offs map[string]int, key string, idx int, name string, value bool) {
	offs[key] = m.Len()
	n := m.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
	if idx >= 0 {
		offs[key+".index"] = m.Len()
		m.PutU32(unix.ETHTOOL_A_BITSET_BIT_INDEX, uint32(idx))
	}
	if name != "" {
		offs[key+".name"] = m.Len()
		m.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, name)
	}
	if value {
		m.PutFlag(unix.ETHTOOL_A_BITSET_BIT_VALUE)
	}
	m.EndNest(n)
}

func words(m *msgBuilder, offs map[string]int, key string, t uint16, w ...uint32) {
	offs[key] = m.Len()
	b := make([]byte, 4*len(w))
	for i, v := range w {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	m.Put(t, b)
}

// TestPrivFlagsSetForms applies every bitset form the kernel accepts.
func TestPrivFlagsSetForms(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	tests := []struct {
		name   string
		before uint32
		fill   func(m *msgBuilder, o map[string]int)
		after  uint32
	}{
		{"verbose by name, value/mask", 0b100, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", -1, "full-page-rx", true) })
		}, 0b101},
		{"verbose by index, clear", 0b111, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", 1, "", false) })
		}, 0b101},
		{"verbose index and matching name", 0, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", 2, "flag-c", true) })
		}, 0b100},
		{"verbose list (NOMASK): exactly the listed bits", 0b011, func(m *msgBuilder, o map[string]int) {
			m.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
			bits(m, o, func() { bit(m, o, "a", -1, "flag-c", false) })
		}, 0b100},
		{"compact value/mask", 0b001, func(m *msgBuilder, o map[string]int) {
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 3)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 0b010)
			words(m, o, "m", unix.ETHTOOL_A_BITSET_MASK, 0b011)
		}, 0b010},
		{"compact list", 0b111, func(m *msgBuilder, o map[string]int) {
			m.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 2)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 0b01)
		}, 0b001}, // bits from SIZE up to nflags are cleared
		{"compact, size past nflags with no bit set there", 0, func(m *msgBuilder, o map[string]int) {
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 40)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 0b110, 0)
			words(m, o, "m", unix.ETHTOOL_A_BITSET_MASK, 0b110, 0)
		}, 0b110},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) { d.Names, d.Flags = threeFlags, tt.before })
			req, _ := bitsetReq(eth, uint32(i+1), true, tt.fill)
			rc.send(req)
			a := decodeAck(t, rc.recv()[0])
			require.Equal(t, unix.Errno(0), a.errno, "ACK: %+v", a)
			assert.Equal(t, tt.after, ts.be.Dev(ts.mana0.Dev.Index).Flags, "flags")
		})
	}
}

// TestPrivFlagsSetErrors covers every error of the kernel's bitset parser
// that a request can reach, with its errno, message and offending attribute,
// and checks that nothing changed.
func TestPrivFlagsSetErrors(t *testing.T) {
	ts := startServer(t, nil)
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) { d.Names, d.Flags = threeFlags, 0b010 })
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	tests := []struct {
		name   string
		nested bool
		fill   func(m *msgBuilder, o map[string]int)
		errno  unix.Errno
		msg    string
		off    string // key of the offending attribute ("" = no OFFS)
	}{
		{"bit name not found", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", -1, "nope", true) })
		}, unix.EOPNOTSUPP, "bit name not found", "a.name"},
		{"bit index too high", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", 3, "", true) })
		}, unix.EOPNOTSUPP, "bit index too high", "a.index"},
		{"bit index and name mismatch", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", 0, "flag-b", true) })
		}, unix.EINVAL, "bit index and name mismatch", "a"},
		{"neither bit index nor name", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", -1, "", true) })
		}, unix.EINVAL, "neither bit index nor name specified", "a"},
		{"later bit fails, earlier not applied", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() {
				bit(m, o, "a", 0, "", true)
				bit(m, o, "b", -1, "nope", true)
			})
		}, unix.EOPNOTSUPP, "bit name not found", "b.name"},
		{"wrong type in BITS", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() {
				o["x"] = m.Len()
				n := m.Nest(2)
				m.EndNest(n)
			})
		}, unix.EINVAL, "only ETHTOOL_A_BITSET_BITS_BIT allowed in ETHTOOL_A_BITSET_BITS", "x"},
		{"BIT without NLA_F_NESTED", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() {
				o["x"] = m.Len()
				n := m.NestNoFlag(unix.ETHTOOL_A_BITSET_BITS_BIT)
				m.PutU32(unix.ETHTOOL_A_BITSET_BIT_INDEX, 0)
				m.EndNest(n)
			})
		}, unix.EINVAL, "NLA_F_NESTED is missing", "x"},
		{"bit name without NUL", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() {
				n := m.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
				o["x"] = m.Len()
				m.Put(unix.ETHTOOL_A_BITSET_BIT_NAME, []byte("flag"))
				m.EndNest(n)
			})
		}, unix.EINVAL, "Attribute failed policy validation", "x"},
		{"bit value flag with payload", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() {
				n := m.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
				m.PutU32(unix.ETHTOOL_A_BITSET_BIT_INDEX, 0)
				o["x"] = m.Len()
				m.PutU32(unix.ETHTOOL_A_BITSET_BIT_VALUE, 1)
				m.EndNest(n)
			})
		}, unix.ERANGE, "Attribute failed policy validation", "x"},
		{"mask not allowed in list bitset", true, func(m *msgBuilder, o map[string]int) {
			m.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 3)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 1)
			words(m, o, "m", unix.ETHTOOL_A_BITSET_MASK, 1)
		}, unix.EINVAL, "mask not allowed in list bitset", "m"},
		{"missing mask in compact nonlist bitset", true, func(m *msgBuilder, o map[string]int) {
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 3)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 1)
		}, unix.EINVAL, "missing mask in compact nonlist bitset", "flags"},
		{"value length does not match size", true, func(m *msgBuilder, o map[string]int) {
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 33)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 1)
			words(m, o, "m", unix.ETHTOOL_A_BITSET_MASK, 1, 0)
		}, unix.EINVAL, "bitset value length does not match size", "v"},
		{"mask length does not match size", true, func(m *msgBuilder, o map[string]int) {
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 3)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 1)
			words(m, o, "m", unix.ETHTOOL_A_BITSET_MASK, 1, 0)
		}, unix.EINVAL, "bitset mask length does not match size", "m"},
		{"cannot modify bits past size (mask)", true, func(m *msgBuilder, o map[string]int) {
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 8)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 0)
			words(m, o, "m", unix.ETHTOOL_A_BITSET_MASK, 1<<5)
		}, unix.EINVAL, "cannot modify bits past kernel bitset size", "m"},
		{"cannot modify bits past size (list value)", true, func(m *msgBuilder, o map[string]int) {
			m.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 64)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 0, 1)
		}, unix.EINVAL, "cannot modify bits past kernel bitset size", "v"},
		// ethnl_bitset_is_compact parses with a NULL extack: errno only.
		{"bits together with value", true, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", 0, "", true) })
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 1)
		}, unix.EINVAL, "", ""},
		{"no bits and no size", true, func(m *msgBuilder, o map[string]int) {
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 1)
		}, unix.EINVAL, "", ""},
		{"size above 32767", true, func(m *msgBuilder, o map[string]int) {
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 40000)
			words(m, o, "v", unix.ETHTOOL_A_BITSET_VALUE, 1)
		}, unix.ERANGE, "", ""},
		{"BITS without NLA_F_NESTED", true, func(m *msgBuilder, o map[string]int) {
			n := m.NestNoFlag(unix.ETHTOOL_A_BITSET_BITS)
			m.EndNest(n)
		}, unix.EINVAL, "", ""},
		{"unknown attribute in bitset", true, func(m *msgBuilder, o map[string]int) {
			m.PutU32(9, 1)
		}, unix.EINVAL, "", ""},
		// The top-level policy catches a FLAGS nest without NLA_F_NESTED.
		{"FLAGS without NLA_F_NESTED", false, func(m *msgBuilder, o map[string]int) {
			bits(m, o, func() { bit(m, o, "a", 0, "", true) })
		}, unix.EINVAL, "NLA_F_NESTED is missing", "flags"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, offs := bitsetReq(eth, uint32(i+1), tt.nested, tt.fill)
			rc.send(req)
			a := decodeAck(t, rc.recv()[0])
			wantOff := 0
			if tt.off != "" {
				wantOff = offs[tt.off]
			}
			assert.Equal(t, tt.errno, a.errno, "got %v %q off %d, want %v %q off %d", a.errno, a.msg, a.off, tt.errno, tt.msg, wantOff)
			assert.Equal(t, tt.msg, a.msg, "got %v %q off %d, want %v %q off %d", a.errno, a.msg, a.off, tt.errno, tt.msg, wantOff)
			assert.Equal(t, wantOff, a.off, "got %v %q off %d, want %v %q off %d", a.errno, a.msg, a.off, tt.errno, tt.msg, wantOff)
			assert.Equal(t, uint16(0), a.flags&nlattr.FlagCapped, "error ACK does not echo the request: flags %#x, %d payload bytes", a.flags, len(a.payload))
			assert.Equal(t, len(req)-nlattr.MsgHdrLen, len(a.payload), "error ACK does not echo the request: flags %#x, %d payload bytes", a.flags, len(a.payload))
			assert.Empty(t, ts.be.Calls(), "backend called")
			assert.Equal(t, uint32(0b010), ts.be.Dev(ts.mana0.Dev.Index).Flags, "flags changed to")
		})
	}
	// FLAGS missing entirely: EINVAL without a message.
	m := newMsg(eth, nlattr.FlagRequest, 99, unix.ETHTOOL_MSG_PRIVFLAGS_SET, 1)
	header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0") })
	rc.send(m.done())
	a := decodeAck(t, rc.recv()[0])
	assert.Equal(t, unix.EINVAL, a.errno, "missing FLAGS: %+v", a)
	assert.Equal(t, "", a.msg, "missing FLAGS: %+v", a)
}

func TestRings(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	u32 := func(v uint32) *uint32 { return &v }

	r, err := c.Rings(ctx, mana0)
	require.NoError(t, err)
	want := genl.Rings{RxMax: 8192, TxMax: 16384, Rx: 1024, Tx: 1024}
	assert.Empty(t, cmp.Diff(want, r.Rings), "Rings (-want +got)")
	assert.Equal(t, "mana0", r.Interface.Name, "Rings interface")
	// The backend rounds to a power of two; the server passes the full new
	// value.
	require.NoError(t, c.SetRings(ctx, mana0, client.RingsUpdate{Rx: u32(600)}))
	assert.Empty(t, cmp.Diff([]string{"SetRings mana0 rx=600 tx=1024"}, ts.be.Calls()), "calls (-want +got)")
	if r, _ = c.Rings(ctx, mana0); r.Rx != 1024 {
		t.Errorf("rx = %d after rounding, want 1024", r.Rx)
	}
	// Unchanged value: no call.
	require.NoError(t, c.SetRings(ctx, mana0, client.RingsUpdate{Tx: u32(1024)}))
	assert.Empty(t, ts.be.Calls(), "no-op SET called the backend")

	var ce *client.Error
	for _, tc := range []struct {
		name  string
		u     client.RingsUpdate
		errno unix.Errno
		msg   string
		off   bool
	}{
		{"rx above max", client.RingsUpdate{Rx: u32(8193)}, unix.EINVAL, "requested ring size exceeds maximum", true},
		{"rx-mini with max 0", client.RingsUpdate{RxMini: u32(1)}, unix.EINVAL, "requested ring size exceeds maximum", true},
		{"tx above max", client.RingsUpdate{Rx: u32(16), Tx: u32(1 << 20)}, unix.EINVAL, "requested ring size exceeds maximum", true},
		{"rx buf len", client.RingsUpdate{RxBufLen: u32(2048)}, unix.EOPNOTSUPP, "setting rx buf len not supported", true},
		{"cqe size", client.RingsUpdate{CQESize: u32(64)}, unix.EOPNOTSUPP, "setting cqe size not supported", true},
		{"tx push", client.RingsUpdate{TxPush: new(bool)}, unix.EOPNOTSUPP, "setting tx push not supported", true},
		{"rx push", client.RingsUpdate{RxPush: new(bool)}, unix.EOPNOTSUPP, "setting rx push not supported", true},
		{"tcp data split", client.RingsUpdate{TCPDataSplit: new(uint8)}, unix.EOPNOTSUPP, "setting TCP data split is not supported", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.SetRings(ctx, mana0, tc.u)
			if !errors.Is(err, tc.errno) || !errors.As(err, &ce) || ce.Message != tc.msg || (ce.Offset != 0) != tc.off {
				t.Errorf("got %v, want %v %q", err, tc.errno, tc.msg)
			}
			assert.Empty(t, ts.be.Calls(), "backend called")
		})
	}
	// A backend error reaches the client with its message.
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) {
		d.SetErr = genl.Errorf(unix.ENOMEM, "pre-allocating RX buffers: budget exceeded")
	})
	err = c.SetRings(ctx, mana0, client.RingsUpdate{Rx: u32(2048)})
	if !errors.Is(err, unix.ENOMEM) || !errors.As(err, &ce) || ce.Message != "pre-allocating RX buffers: budget exceeded" {
		t.Errorf("backend error: %v", err)
	}
	all, err := c.AllRings(ctx)
	if err != nil || len(all) != 2 {
		t.Errorf("AllRings: %d, %v", len(all), err)
	}
}

func TestChannels(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	u32 := func(v uint32) *uint32 { return &v }

	ch, err := c.Channels(ctx, mana0)
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(genl.Channels{CombinedMax: 16, Combined: 4}, ch.Channels), "Channels (-want +got)")
	require.NoError(t, c.SetChannels(ctx, mana0, client.ChannelsUpdate{Combined: u32(8)}))
	if ch, _ = c.Channels(ctx, mana0); ch.Combined != 8 {
		t.Errorf("combined %d, want 8", ch.Combined)
	}
	ts.be.Calls()
	var ce *client.Error
	for _, tc := range []struct {
		name string
		u    client.ChannelsUpdate
		msg  string
		off  bool
	}{
		{"combined above max", client.ChannelsUpdate{Combined: u32(17)}, "requested channel count exceeds maximum", true},
		{"rx with max 0", client.ChannelsUpdate{Rx: u32(1)}, "requested channel count exceeds maximum", true},
		{"no combined, no rx", client.ChannelsUpdate{Combined: u32(0)}, "requested channel counts would result in no RX or TX channel being configured", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.SetChannels(ctx, mana0, tc.u)
			if !errors.Is(err, unix.EINVAL) || !errors.As(err, &ce) || ce.Message != tc.msg || (ce.Offset != 0) != tc.off {
				t.Errorf("got %v, want EINVAL %q", err, tc.msg)
			}
			assert.Empty(t, ts.be.Calls(), "backend called")
		})
	}
}

func TestStringSets(t *testing.T) {
	ts := startServer(t, nil)
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) { d.Names = threeFlags })
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}

	stats, err := c.StringSet(ctx, mana0, ethtool.SSStats)
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff([]string{"stop_queue", "wake_queue", "rx_0_packets"}, stats), "ETH_SS_STATS (-want +got)")
	pf, err := c.StringSet(ctx, mana0, ethtool.SSPrivFlags)
	if err != nil || !cmp.Equal(threeFlags, pf) {
		t.Errorf("ETH_SS_PRIV_FLAGS = %v, %v", pf, err)
	}

	// All sets of a device: the per-device sets with strings, in id order.
	ss, err := c.StringSets(ctx, &mana0, nil, false)
	require.NoError(t, err)
	var ids []uint32
	for _, s := range ss.Sets {
		ids = append(ids, s.ID)
	}
	if diff := cmp.Diff([]uint32{ethtool.SSStats, ethtool.SSPrivFlags}, ids); diff != "" || ss.Interface.Name != "mana0" {
		t.Errorf("all sets of mana0 (-want +got):\n%s", diff)
	}

	// Counts only, a per-device and a global set together.
	ss, err = c.StringSets(ctx, &mana0, []uint32{ethtool.SSLinkModes, ethtool.SSPrivFlags}, true)
	require.NoError(t, err)
	if len(ss.Sets) != 2 || ss.Sets[0].ID != ethtool.SSPrivFlags || ss.Sets[0].Count != 3 || ss.Sets[0].Strings != nil ||
		ss.Sets[1].ID != ethtool.SSLinkModes || ss.Sets[1].Count < 90 {
		t.Errorf("counts only: %+v", ss.Sets)
	}

	// A set the device does not have is left out.
	test, err := c.StringSet(ctx, mana0, ethtool.SSTest)
	if err != nil || test != nil {
		t.Errorf("ETH_SS_TEST = %v, %v; want empty", test, err)
	}

	// Dump over all devices: lo0 has no per-device sets but still gets a
	// reply with an empty STRINGSETS nest, as in the kernel.
	all, err := c.AllStringSets(ctx, nil, false)
	require.NoError(t, err)
	if len(all) != 3 || all[0].Interface.Name != "lo0" || len(all[0].Sets) != 0 || len(all[1].Sets) != 2 {
		t.Errorf("dump: %+v", all)
	}
}

// TestSetQuirks pins kernel corner cases: rings.c blames the offending
// attribute by pointer (no error when it is not in the request), channels.c
// by type (error, without an offset); unsupported ring parameters that the
// client has no field for.
func TestSetQuirks(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	set := func(cmd uint8, fill func(m *msgBuilder)) ackInfo {
		m := newMsg(eth, nlattr.FlagRequest|nlattr.FlagAck, 3, cmd, 1)
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0") })
		fill(m)
		rc.send(m.done())
		return decodeAck(t, rc.recv()[0])
	}
	for _, tc := range []struct {
		attr uint16
		msg  string
	}{
		{unix.ETHTOOL_A_RINGS_HDS_THRESH, "setting hds-thresh is not supported"},
		{unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN, "setting tx push buf len is not supported"},
	} {
		a := set(unix.ETHTOOL_MSG_RINGS_SET, func(m *msgBuilder) { m.PutU32(tc.attr, 1) })
		assert.Equal(t, unix.EOPNOTSUPP, a.errno, "attr %d: %+v", tc.attr, a)
		assert.Equal(t, tc.msg, a.msg, "attr %d: %+v", tc.attr, a)
		assert.NotEqual(t, 0, a.off, "attr %d: %+v", tc.attr, a)
	}

	// A driver reporting rx above its own maximum: changing tx passes, as
	// in the kernel (the offender RX is not in the request).
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) { d.Rings.Rx = 9000 })
	if a := set(unix.ETHTOOL_MSG_RINGS_SET, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_RINGS_TX, 512) }); a.errno != 0 {
		t.Errorf("rings quirk: %+v", a)
	}
	ts.be.Calls()

	// Channels: rx and combined both 0 after changing only tx: error on
	// RX_COUNT, which is absent, so no offset.
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) {
		d.Channels = genl.Channels{RxMax: 4, TxMax: 4, CombinedMax: 4, Tx: 1}
	})
	a := set(unix.ETHTOOL_MSG_CHANNELS_SET, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_CHANNELS_TX_COUNT, 2) })
	assert.Equal(t, unix.EINVAL, a.errno, "channels quirk: %+v", a)
	assert.Equal(t, "requested channel counts would result in no RX or TX channel being configured", a.msg, "channels quirk: %+v", a)
	assert.Equal(t, 0, a.off, "channels quirk: %+v", a)
	assert.Empty(t, ts.be.Calls(), "backend called")
}

// TestDumpError: a device failing with other than EOPNOTSUPP ends the dump
// with that errno and its message in NLMSG_DONE.
func TestDumpError(t *testing.T) {
	ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		pre.be.Hook = func(context.Context, string) error {
			return genl.Errorf(unix.EIO, "hardware channel 3 timed out")
		}
	})
	c := dialClient(t, ts.path)
	_, err := c.AllRings(ctxT(t))
	var ce *client.Error
	if !errors.Is(err, unix.EIO) || !errors.As(err, &ce) || ce.Message != "hardware channel 3 timed out" {
		t.Errorf("dump error: %v", err)
	}
	// A backend error without an errno is EIO with its text.
	ts2 := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		pre.be.Hook = func(context.Context, string) error { return errors.New("plain failure") }
	})
	_, err = dialClient(t, ts2.path).Rings(ctxT(t), client.Interface{Name: "mana0"})
	if !errors.Is(err, unix.EIO) || !errors.As(err, &ce) || ce.Message != "plain failure" {
		t.Errorf("plain error: %v", err)
	}
}
