package ethtool

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// bitsetMsg wraps a bitset nest body in a message; it returns the message
// and the bitset attribute.
func bitsetMsg(body func(b *nlattr.Builder)) ([]byte, nlattr.Attr) {
	var b nlattr.Builder
	s := b.BeginMsg(0x20, nlattr.FlagRequest, 1, 1)
	b.Genl(1, 1)
	off := b.Len()
	n := b.Nest(2)
	body(&b)
	b.EndNest(n)
	b.EndMsg(s)
	it := nlattr.NewIter(b.B, off, len(b.B)-off)
	it.Next()
	return b.B, it.Attr()
}

func u32s(w ...uint32) []byte {
	b := make([]byte, 4*len(w))
	for i, v := range w {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// TestUpdateBitsetUnreachable covers parser errors that privflags can never
// produce on the wire because ethnl_bitset_is_compact rejects the input
// first; UpdateBitset32 still implements them, as the kernel does.
func TestUpdateBitsetUnreachable(t *testing.T) {
	tests := []struct {
		name string
		body func(b *nlattr.Builder)
		msg  string
	}{
		{"value only allowed in compact bitset", func(b *nlattr.Builder) {
			n := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
			b.EndNest(n)
			b.Put(unix.ETHTOOL_A_BITSET_VALUE, u32s(1))
		}, "value only allowed in compact bitset"},
		{"mask only allowed in compact bitset", func(b *nlattr.Builder) {
			n := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
			b.EndNest(n)
			b.Put(unix.ETHTOOL_A_BITSET_MASK, u32s(1))
		}, "mask only allowed in compact bitset"},
		{"missing size", func(b *nlattr.Builder) {
			b.Put(unix.ETHTOOL_A_BITSET_VALUE, u32s(1))
			b.Put(unix.ETHTOOL_A_BITSET_MASK, u32s(1))
		}, "missing size in compact bitset"},
		{"missing value", func(b *nlattr.Builder) {
			b.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 3)
			b.Put(unix.ETHTOOL_A_BITSET_MASK, u32s(1))
		}, "missing value in compact bitset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, a := bitsetMsg(tt.body)
			if _, err := IsCompact(m, a); err == nil {
				t.Errorf("IsCompact accepted it; the wire path would reach UpdateBitset32")
			}
			bm := []uint32{0}
			_, err := UpdateBitset32(m, a, bm, 3, []string{"a", "b", "c"})
			e, ok := err.(*nlattr.Error)
			if !ok || e.Errno != unix.EINVAL || e.Message != tt.msg {
				t.Errorf("got %v", err)
			}
		})
	}
}

func TestPutBitset32(t *testing.T) {
	var b nlattr.Builder
	PutBitset32(&b, 7, []uint32{0b1011}, []uint32{0b0111}, 3, []string{"a", "", "c"}, false)
	bs, err := DecodeBitset(b.B[4:])
	require.NoError(t, err)
	want := Bitset{Size: 3, Bits: []Bit{{Index: 0, Name: "a", On: true}, {Index: 1, On: true}, {Index: 2, Name: "c"}}}
	// (bit 1 has an empty name, which decodes as "")
	assert.Empty(t, cmp.Diff(want, bs), "verbose (-want +got)")
	// List form: NOMASK, and only the set bits; compact words are cut to
	// nbits.
	b.Reset()
	PutBitset32(&b, 7, []uint32{0xffffffff, 0xffffffff}, nil, 35, nil, true)
	bs, _ = DecodeBitset(b.B[4:])
	if !bs.NoMask || !cmp.Equal(bs.Value, []uint32{0xffffffff, 0b111}) || bs.Mask != nil || len(bs.List(nil)) != 35 {
		t.Errorf("compact list: %+v", bs)
	}
	// A 32-char name is kept whole; a longer one is cut to ETH_GSTRING_LEN.
	b.Reset()
	long := "0123456789abcdef0123456789abcdefXYZ"
	PutBitset32(&b, 7, []uint32{1}, []uint32{1}, 1, []string{long}, false)
	bs, _ = DecodeBitset(b.B[4:])
	assert.Equal(t, long[:32], bs.Bits[0].Name, "name")
}

func TestNameLookupMirrorsKernel(t *testing.T) {
	long := "0123456789abcdef0123456789abcdefXYZ"
	names := []string{"a", long}
	assert.Equal(t, 1, nameToIndex(names, 2, long[:32]), "32-char prefix")
	assert.Equal(t, -1, nameToIndex(names, 2, long), "a name longer than 32 never matches")
	assert.Equal(t, -1, nameToIndex(names, 1, long[:32]), "only the first nbits names count")
}

// FuzzBitset: arbitrary bitset nests through the SET parser (against a
// 3-bit named bitmap and a 40-bit unnamed one) and the decoder. Nothing may
// panic and the update may never set a bit at or past nbits.
func FuzzBitset(f *testing.F) {
	_, a := bitsetMsg(func(b *nlattr.Builder) {
		n := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
		bit := b.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
		b.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, "b")
		b.PutFlag(unix.ETHTOOL_A_BITSET_BIT_VALUE)
		b.EndNest(bit)
		b.EndNest(n)
	})
	f.Add(a.Data)
	_, a = bitsetMsg(func(b *nlattr.Builder) {
		b.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 40)
		b.Put(unix.ETHTOOL_A_BITSET_VALUE, u32s(5, 1))
		b.Put(unix.ETHTOOL_A_BITSET_MASK, u32s(7, 1))
	})
	f.Add(a.Data)
	_, a = bitsetMsg(func(b *nlattr.Builder) {
		b.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
		b.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 2)
		b.Put(unix.ETHTOOL_A_BITSET_VALUE, u32s(3))
	})
	f.Add(a.Data)
	f.Fuzz(func(t *testing.T, body []byte) {
		m, a := bitsetMsg(func(b *nlattr.Builder) { b.B = append(b.B, body...) })
		for _, nbits := range []int{3, 40} {
			names := []string{"a", "b", "c"}
			if nbits == 40 {
				names = nil
			}
			_, _ = IsCompact(m, a)
			bm := make([]uint32, Words(nbits))
			if _, err := UpdateBitset32(m, a, bm, nbits, names); err == nil {
				for i := nbits; i < 32*len(bm); i++ {
					require.False(t, testBit(bm, i), "bit %d set past nbits %d", i, nbits)
				}
			}
		}
		if bs, err := DecodeBitset(body); err == nil {
			_ = bs.List([]string{"x"})
		}
		_, _ = DecodeStringSets(body)
	})
}
