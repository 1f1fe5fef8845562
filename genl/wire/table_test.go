package wire_test

import (
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// fill sets every field of v (recursively) to a distinct non-zero value, so
// that a struct field without a table row shows up in a round trip.
func fill(v reflect.Value, n *uint64) {
	*n++
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.SetUint(*n)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	}
}

func roundTrip[T any](t *testing.T, name string, tb *wire.Table[T]) {
	t.Run(name, func(t *testing.T) {
		var in, out T
		var n uint64
		fill(reflect.ValueOf(&in).Elem(), &n)
		var b nlattr.Builder
		tb.Put(&b, &in)
		require.NoError(t, tb.Decode(b.B, &out))
		assert.Empty(t, cmp.Diff(in, out), "round trip (-put +decoded)")
		// Zero values: an all-zero struct decodes to itself too (omitted and
		// conditional attributes read back as zero).
		var zin, zout T
		b.Reset()
		tb.Put(&b, &zin)
		require.NoError(t, tb.Decode(b.B, &zout))
		assert.Empty(t, cmp.Diff(zin, zout, cmp.Comparer(func(a, b net.HardwareAddr) bool { return len(a) == 0 && len(b) == 0 || a.String() == b.String() })), "zero round trip (-put +decoded)")
	})
}

// TestTablesCoverTheirStructs: every field of every wire struct has a row in
// its table (a new field without one fails here), and Decode reads what Put
// writes.
func TestTablesCoverTheirStructs(t *testing.T) {
	roundTrip(t, "PortInfo", wire.PortTable)
	roundTrip(t, "PortSpec", wire.PortSpecTable)
	roundTrip(t, "PortDel", wire.PortDelTable)
	roundTrip(t, "RxBufLayout", wire.LayoutTable)
	roundTrip(t, "LayoutRequest", wire.LayoutRequestTable)
	roundTrip(t, "Fault", wire.FaultTable)
	roundTrip(t, "Stat", wire.StatTable)
	roundTrip(t, "Rings", wire.RingsTable)
	roundTrip(t, "Channels", wire.ChannelsTable)
	roundTrip(t, "Header", wire.HeaderTable)
	// XDPProgram's Object travels outside the nest, in AttrXDPObject chunks.
	t.Run("XDPProgram", func(t *testing.T) {
		in := wire.XDPProgram{Builtin: "pass", Section: "xdp", Name: "prog"}
		var b nlattr.Builder
		wire.XDPTable.Put(&b, &in)
		var out wire.XDPProgram
		if err := wire.XDPTable.Decode(b.B, &out); err != nil || !cmp.Equal(out, in) {
			t.Errorf("got %+v, %v; want %+v", out, err, in)
		}
	})
}

// TestOptBool: an optional boolean is written when given, false included,
// and a missing one decodes to nil (PORT_NEW's offload and rx_recycle, whose
// default is on).
func TestOptBool(t *testing.T) {
	off, on := false, true
	for _, tc := range []struct {
		name string
		in   *bool
		size int
	}{{"nil", nil, 0}, {"false", &off, 8}, {"true", &on, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			in := wire.PortSpec{Offload: tc.in}
			var b nlattr.Builder
			wire.PortSpecTable.Put(&b, &in)
			require.Equal(t, tc.size, len(b.B), "Put wrote %d bytes, want %d", len(b.B), tc.size)
			var out wire.PortSpec
			require.NoError(t, wire.PortSpecTable.Decode(b.B, &out))
			if (out.Offload == nil) != (tc.in == nil) || out.Offload != nil && *out.Offload != *tc.in {
				t.Errorf("decoded %v, want %v", out.Offload, tc.in)
			}
		})
	}
}

// TestDecodeMalformed: short fixed-size attributes and trailing bytes are
// EINVAL, never a panic or a silent zero.
func TestDecodeMalformed(t *testing.T) {
	attr := func(typ uint16, data ...byte) []byte {
		var b nlattr.Builder
		b.Put(typ, data)
		return b.B
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"short u32", attr(wire.PortAttrMTU, 1, 2)},
		{"short u64", attr(wire.PortAttrMemoryPeak, 1, 2, 3, 4)},
		{"short u8", attr(wire.PortAttrAdminUp)},
		{"short in a nest", attr(wire.PortAttrLayout|nlattr.FlagNested, attr(wire.LayoutAttrBytesTotal, 1)...)},
		{"short in a list item", attr(wire.PortAttrFaults|nlattr.FlagNested, attr(wire.ListItem|nlattr.FlagNested, attr(wire.FaultAttrCount, 1)...)...)},
		{"trailing bytes", append(attr(wire.PortAttrMTU, 0, 0, 0, 0), 1, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p wire.PortInfo
			err := wire.PortTable.Decode(tc.data, &p)
			assert.ErrorIs(t, err, unix.EINVAL, "Decode = %v, want EINVAL", err)
		})
	}
	// Unknown attributes are skipped.
	var p wire.PortInfo
	assert.NoError(t, wire.PortTable.Decode(attr(999, 1, 2, 3), &p), "unknown attribute")
}

// TestSetTables: a SET request's table writes exactly the fields given, 0 and false included,
// in the table's order, and reads back what it wrote (the client writes with it, the server
// reads with it).
func TestSetTables(t *testing.T) {
	zero, big, split, no := uint32(0), uint32(4096), uint8(2), false
	for _, tc := range []struct {
		name  string
		in    wire.RingsSet
		types []uint16
	}{
		{"nothing", wire.RingsSet{}, nil},
		{"rx 0", wire.RingsSet{Rx: &zero}, []uint16{unix.ETHTOOL_A_RINGS_RX}},
		{"all", wire.RingsSet{Rx: &big, RxMini: &zero, RxJumbo: &zero, Tx: &big, RxBufLen: &big, CQESize: &zero,
			TCPDataSplit: &split, TxPush: &no, RxPush: &no},
			[]uint16{unix.ETHTOOL_A_RINGS_RX, unix.ETHTOOL_A_RINGS_RX_MINI, unix.ETHTOOL_A_RINGS_RX_JUMBO,
				unix.ETHTOOL_A_RINGS_TX, unix.ETHTOOL_A_RINGS_RX_BUF_LEN, unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT,
				unix.ETHTOOL_A_RINGS_CQE_SIZE, unix.ETHTOOL_A_RINGS_TX_PUSH, unix.ETHTOOL_A_RINGS_RX_PUSH}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b nlattr.Builder
			wire.RingsSetTable.Put(&b, &tc.in)
			var types []uint16
			for it := nlattr.NewIter(b.B, 0, len(b.B)); it.Next(); {
				types = append(types, it.Attr().Type())
			}
			assert.Equal(t, tc.types, types, "attributes written")
			var out wire.RingsSet
			require.NoError(t, wire.RingsSetTable.Decode(b.B, &out))
			assert.Equal(t, tc.in, out, "read back")
		})
	}
	ch := wire.ChannelsSet{Combined: &big, Rx: &zero}
	var b nlattr.Builder
	wire.ChannelsSetTable.Put(&b, &ch)
	var out wire.ChannelsSet
	require.NoError(t, wire.ChannelsSetTable.Decode(b.B, &out))
	assert.Equal(t, ch, out)
	assert.Len(t, b.B, 16, "rx and combined, 8 bytes each")
}

// TestBitList: PRIVFLAGS_SET's bitset is the verbose list ethtool --set-priv-flags sends (BITS
// of BIT nests: a name, or an index when there is none; VALUE only when on; no NOMASK), and reads
// back as written.
func TestBitList(t *testing.T) {
	in := wire.PrivFlagsSet{Flags: []wire.Bit{{Name: "full-page-rx", On: true}, {Index: 2}}}
	var b nlattr.Builder
	wire.PrivFlagsSetTable.Put(&b, &in)

	var want nlattr.Builder
	flags := want.Nest(unix.ETHTOOL_A_PRIVFLAGS_FLAGS)
	bits := want.Nest(unix.ETHTOOL_A_BITSET_BITS)
	one := want.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
	want.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, "full-page-rx")
	want.PutFlag(unix.ETHTOOL_A_BITSET_BIT_VALUE)
	want.EndNest(one)
	two := want.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
	want.PutU32(unix.ETHTOOL_A_BITSET_BIT_INDEX, 2)
	want.EndNest(two)
	want.EndNest(bits)
	want.EndNest(flags)
	assert.Equal(t, want.B, b.B, "bytes")

	var out wire.PrivFlagsSet
	require.NoError(t, wire.PrivFlagsSetTable.Decode(b.B, &out))
	assert.Equal(t, in, out)
}

// TestNAPISetTable: napi-set's timeouts are NLA_UINTs, 4 bytes while the nanoseconds fit and 8
// beyond (nla_put_uint), threaded a u32; each reads back as written, and what is not given is
// not sent.
func TestNAPISetTable(t *testing.T) {
	short, long, irqs, on := time.Second, 10*time.Second, uint32(2), true
	in := wire.NetdevNAPISetRequest{ID: 9, NetdevNAPISet: wire.NetdevNAPISet{DeferHardIRQs: &irqs,
		GROFlushTimeout: &short, IRQSuspendTimeout: &long, Threaded: &on}}
	var b nlattr.Builder
	wire.NetdevNAPISetTable.Put(&b, &in)
	sizes := map[uint16]int{}
	for it := nlattr.NewIter(b.B, 0, len(b.B)); it.Next(); {
		sizes[it.Attr().Type()] = len(it.Attr().Data)
	}
	assert.Equal(t, map[uint16]int{wire.NetdevANAPIID: 4, wire.NetdevANAPIDeferHardIRQs: 4, wire.NetdevANAPIGROFlushTimeout: 4,
		wire.NetdevANAPIIRQSuspendTimeout: 8, wire.NetdevANAPIThreaded: 4}, sizes)
	var out wire.NetdevNAPISetRequest
	require.NoError(t, wire.NetdevNAPISetTable.Decode(b.B, &out))
	assert.Equal(t, in, out)

	b.Reset()
	wire.NetdevNAPISetTable.Put(&b, &wire.NetdevNAPISetRequest{ID: 9})
	assert.Len(t, b.B, 8, "only the id")
}

// TestCoalesceParamsTable: COALESCE_SET's full table writes every scalar parameter the kernel's
// policy takes (ETHTOOL_A_COALESCE_RX_USECS to CoalesceMax, the nested profiles aside), each
// with its type (u8 for the four flags), in attribute order, exactly those given, and reads back
// what it wrote; mana's table (CoalesceSetTable, which the server reads) has the supported
// parameters' rows of it, with the same types.
func TestCoalesceParamsTable(t *testing.T) {
	var all wire.CoalesceParams
	var want []uint16
	for a := uint16(unix.ETHTOOL_A_COALESCE_RX_USECS); a <= wire.CoalesceMax; a++ {
		if a == wire.CoalesceRxProfile || a == wire.CoalesceTxProfile {
			continue
		}
		want = append(want, a)
		if wire.CoalesceFlag(a) {
			on := a%2 == 0
			all.Bool[a] = &on
		} else {
			v := uint32(a) * 1000
			all.U32[a] = &v
		}
	}
	var b nlattr.Builder
	wire.CoalesceParamsTable.Put(&b, &all)
	var types []uint16
	for it := nlattr.NewIter(b.B, 0, len(b.B)); it.Next(); {
		a := it.Attr()
		types = append(types, a.Type())
		size := 4
		if wire.CoalesceFlag(a.Type()) {
			size = 1
		}
		assert.Len(t, a.Data, size, "attribute %d", a.Type())
	}
	assert.Equal(t, want, types, "attributes written")
	var out wire.CoalesceParams
	require.NoError(t, wire.CoalesceParamsTable.Decode(b.B, &out))
	assert.Equal(t, all, out, "read back")

	rx, off := uint32(0), false
	one := wire.CoalesceParams{}
	one.U32[unix.ETHTOOL_A_COALESCE_RX_USECS], one.Bool[unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX] = &rx, &off
	b.Reset()
	wire.CoalesceParamsTable.Put(&b, &one)
	assert.Len(t, b.B, 8+8, "rx-usecs 0 and adaptive-tx off, 8 bytes each")

	full, mana := wire.CoalesceParamsTable.Kinds(), wire.CoalesceSetTable.Kinds()
	assert.Len(t, mana, len(wire.CoalesceSupported))
	for _, a := range wire.CoalesceSupported {
		if assert.Contains(t, mana, a) {
			assert.Equal(t, full[a], mana[a], "attribute %d", a)
		}
	}
}
