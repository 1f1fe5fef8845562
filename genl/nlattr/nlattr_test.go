package nlattr

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

var (
	innerSet = NewSet(3, map[uint16]Policy{
		1: {Kind: U32},
		2: {Kind: NulString, Len: 7},
		3: {Kind: Flag},
	})
	testSet = NewSet(9, map[uint16]Policy{
		1: {Kind: Nested, Nested: innerSet},
		2: {Kind: U8, Check: CheckMax, Max: 2},
		3: {Kind: U16},
		4: {Kind: U64},
		5: {Kind: String, Len: 4},
		6: {Kind: Binary, Check: CheckRange, Min: 2, Max: 4},
		7: {Kind: U32, Check: CheckMask, Mask: 0x3},
		8: {Kind: Reject},
		// 9: Unspec
	})
)

// msgWith returns a message (nlmsghdr + genl header) carrying attrs.
func msgWith(fill func(b *Builder)) []byte {
	var b Builder
	s := b.BeginMsg(0x20, FlagRequest, 1, 1)
	b.Genl(1, 1)
	fill(&b)
	b.EndMsg(s)
	return b.B
}

func parseTest(m []byte, mode Mode) ([]Attr, error) {
	return Parse(m, MsgHdrLen+GenlHdrLen, len(m)-MsgHdrLen-GenlHdrLen, testSet, mode)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		fill   func(b *Builder)
		mode   Mode
		errno  unix.Errno
		msg    string
		off    bool
		policy bool
	}{
		{"ok", func(b *Builder) { b.PutU8(2, 1); b.PutU16(3, 9); b.PutU64(4, 1) }, Strict, 0, "", false, false},
		{"unknown type", func(b *Builder) { b.PutU32(10, 1) }, Strict, unix.EINVAL, "Unknown attribute type", true, false},
		{"unknown type, liberal", func(b *Builder) { b.PutU32(10, 1) }, Liberal, 0, "", false, false},
		{"type 0", func(b *Builder) { b.PutU32(0, 1) }, Strict, unix.EINVAL, "Unknown attribute type", true, false},
		{"unspec", func(b *Builder) { b.PutU32(9, 1) }, Strict, unix.EINVAL, "Unsupported attribute", true, false},
		{"reject", func(b *Builder) { b.PutU32(8, 1) }, Strict, unix.EINVAL, "Attribute failed policy validation", true, false}, // NLA_REJECT: no policy to describe (netlink_policy_dump_write_attr)
		{"length", func(b *Builder) { b.PutU32(3, 1) }, Strict, unix.EINVAL, "invalid attribute length", true, true},
		{"length, liberal, longer", func(b *Builder) { b.PutU32(3, 1) }, Liberal, 0, "", false, false},
		{"length, liberal, shorter", func(b *Builder) { b.PutU8(4, 1) }, Liberal, unix.ERANGE, "Attribute failed policy validation", true, true},
		{"max", func(b *Builder) { b.PutU8(2, 3) }, Strict, unix.ERANGE, "integer out of range", true, true},
		{"mask", func(b *Builder) { b.PutU32(7, 4) }, Strict, unix.EINVAL, "reserved bit set", true, false},
		{"binary range", func(b *Builder) { b.Put(6, []byte{1}) }, Strict, unix.ERANGE, "binary attribute size out of range", true, true},
		{"string too long", func(b *Builder) { b.PutString(5, "abcde") }, Strict, unix.ERANGE, "Attribute failed policy validation", true, true},
		{"string at max with NUL", func(b *Builder) { b.PutString(5, "abcd") }, Strict, 0, "", false, false},
		{"empty string", func(b *Builder) { b.Put(5, nil) }, Strict, unix.ERANGE, "Attribute failed policy validation", true, true},
		{"nested flag missing", func(b *Builder) { n := b.NestNoFlag(1); b.EndNest(n) }, Strict, unix.EINVAL, "NLA_F_NESTED is missing", true, true},
		{"nested flag missing, liberal", func(b *Builder) { n := b.NestNoFlag(1); b.EndNest(n) }, Liberal, 0, "", false, false},
		{"nested flag on u16", func(b *Builder) { b.PutU16(3|FlagNested, 1) }, Strict, unix.EINVAL, "NLA_F_NESTED not expected", true, true},
		{"nest too short", func(b *Builder) { b.Put(1|FlagNested, []byte{1, 2}) }, Strict, unix.ERANGE, "Attribute failed policy validation", true, true},
		{"inner nul string without NUL", func(b *Builder) { n := b.Nest(1); b.Put(2, []byte("abc")); b.EndNest(n) }, Strict, unix.EINVAL, "Attribute failed policy validation", true, true},
		{"inner nul string too long", func(b *Builder) { n := b.Nest(1); b.PutString(2, "abcdefgh"); b.EndNest(n) }, Strict, unix.EINVAL, "Attribute failed policy validation", true, true},
		{"inner flag with data", func(b *Builder) { n := b.Nest(1); b.PutU8(3, 1); b.EndNest(n) }, Strict, unix.ERANGE, "Attribute failed policy validation", true, true},
		{"inner unknown", func(b *Builder) { n := b.Nest(1); b.PutU8(4, 1); b.EndNest(n) }, Strict, unix.EINVAL, "Unknown attribute type", true, false},
		{"leftover", func(b *Builder) { b.PutU8(2, 1); b.B = append(b.B, 0, 0) }, Strict, unix.EINVAL, "bytes leftover after parsing attributes", false, false},
		{"leftover, liberal", func(b *Builder) { b.PutU8(2, 1); b.B = append(b.B, 0, 0) }, Liberal, 0, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := msgWith(tt.fill)
			_, err := parseTest(m, tt.mode)
			if tt.errno == 0 {
				require.NoError(t, err, "unexpected")
				return
			}
			e, ok := err.(*Error)
			require.True(t, ok, "error %v (%T), want *Error", err, err)
			assert.Equal(t, tt.errno, e.Errno, "got %+v", e)
			assert.Equal(t, tt.msg, e.Message, "got %+v", e)
			assert.Equal(t, tt.off, e.Offset > 0, "got %+v", e)
			assert.Equal(t, tt.policy, e.Policy != nil, "got %+v", e)
			if e.Offset > 0 {
				assert.GreaterOrEqual(t, e.Offset, int(MsgHdrLen+GenlHdrLen), "offset %d outside the attributes", e.Offset)
				assert.Less(t, e.Offset, len(m), "offset %d outside the attributes", e.Offset)
			}
		})
	}
}

func TestParseRecursionLimit(t *testing.T) {
	self := &Set{}
	*self = *NewSet(1, map[uint16]Policy{1: {Kind: Nested}})
	self.pol[1].Nested = self
	var b Builder
	var nests []int
	for range 12 {
		nests = append(nests, b.Nest(1))
	}
	for i := len(nests) - 1; i >= 0; i-- {
		b.EndNest(nests[i])
	}
	_, err := Parse(b.B, 0, len(b.B), self, Strict)
	if e, ok := err.(*Error); !ok || e.Message != "allowed policy recursion depth exceeded" {
		t.Errorf("got %v", err)
	}
}

func TestAppendAck(t *testing.T) {
	req := msgWith(func(b *Builder) { b.PutU8(2, 1) })
	e := &Error{Errno: unix.EINVAL, Message: "boom", Offset: 20, MissType: 3, MissNest: 20, Policy: Policy{Kind: U8, Check: CheckMax, Max: 2}.extackDump()}
	for _, tc := range []struct {
		name   string
		errno  unix.Errno
		opt    AckOptions
		flags  uint16
		length int
	}{
		{"success", 0, AckOptions{ExtAck: true}, FlagCapped | FlagAckTLVs, 36 + 12},
		{"success, no extack", 0, AckOptions{}, FlagCapped, 36},
		{"error", unix.EINVAL, AckOptions{ExtAck: true}, FlagAckTLVs, 36 + len(req) - 16},
		{"error, capped", unix.EINVAL, AckOptions{ExtAck: true, CapAck: true}, FlagCapped | FlagAckTLVs, 36},
		{"error, no extack", unix.EINVAL, AckOptions{}, 0, 36 + len(req) - 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendAck(nil, req, 99, tc.errno, e, tc.opt)
			h, _ := ReadHeader(b)
			require.Equal(t, MsgError, h.Type, "header %+v (len %d)", h, len(b))
			require.Equal(t, tc.flags, h.Flags, "header %+v (len %d)", h, len(b))
			require.Equal(t, uint32(1), h.Seq, "header %+v (len %d)", h, len(b))
			require.Equal(t, uint32(99), h.PID, "header %+v (len %d)", h, len(b))
			require.Equal(t, len(b), int(h.Len), "header %+v (len %d)", h, len(b))
			assert.Equal(t, -int32(tc.errno), int32(binary.NativeEndian.Uint32(b[16:])), "errno field")
			assert.Equal(t, uint32(len(req)), binary.NativeEndian.Uint32(b[20:]), "echoed nlmsg_len")
			if tc.flags&FlagAckTLVs == 0 {
				assert.Equal(t, tc.length, len(b), "length")
			}
			if tc.flags&FlagAckTLVs != 0 {
				off := 20 + 16
				if tc.flags&FlagCapped == 0 {
					off = 20 + len(req)
				}
				seen := map[uint16]bool{}
				it := NewIter(b, off, len(b)-off)
				for it.Next() {
					seen[it.Attr().Type()] = true
				}
				if it.Rem() != 0 || !seen[ErrAttrMsg] || seen[ErrAttrOffs] != (tc.errno != 0) ||
					seen[ErrAttrPolicy] != (tc.errno != 0) || seen[ErrAttrMissType] != (tc.errno != 0) {
					t.Errorf("TLVs %v", seen)
				}
			}
		})
	}
	d := AppendDone(nil, 5, 6, unix.EIO, "dump failed", true)
	h, _ := ReadHeader(d)
	if h.Type != MsgDone || h.Flags != FlagMulti|FlagAckTLVs || int32(binary.NativeEndian.Uint32(d[16:])) != -int32(unix.EIO) {
		t.Errorf("DONE %+v", h)
	}
}

func TestBuilderOverflow(t *testing.T) {
	var b Builder
	n := b.Nest(1)
	b.Put(2, make([]byte, 65000))
	b.Put(3, make([]byte, 1000))
	b.EndNest(n)
	assert.True(t, b.Overflow, "nest past 64 KiB not flagged")
	b.Reset()
	b.Put(1, make([]byte, 70000))
	assert.True(t, b.Overflow, "attribute past 64 KiB not flagged")
}

func TestAttrAccessorsShort(t *testing.T) {
	a := Attr{Off: 20, Data: []byte{1}}
	assert.Equal(t, uint16(0), a.U16(), "short accessors")
	assert.Equal(t, uint32(0), a.U32(), "short accessors")
	assert.Equal(t, uint64(0), a.U64(), "short accessors")
	assert.Equal(t, uint8(1), a.U8(), "short accessors")
	assert.Equal(t, "\x01", a.Str(), "short accessors")
	assert.Equal(t, "ab", (Attr{Data: []byte("ab\x00cd")}).Str(), "Str stops at NUL")
}

// FuzzParse: any attribute stream, under any mode, must validate without
// panicking; errors carry in-range offsets; the ACK built from the error is
// well formed.
func FuzzParse(f *testing.F) {
	f.Add([]byte{8, 0, 2, 0, 1, 0, 0, 0}, true)
	f.Add(msgWith(func(b *Builder) { n := b.Nest(1); b.PutU32(1, 5); b.PutString(2, "abc"); b.PutFlag(3); b.EndNest(n) })[20:], true)
	f.Add(msgWith(func(b *Builder) { b.PutString(5, "abcd"); b.Put(6, []byte{1, 2, 3}); b.PutU32(7, 3) })[20:], false)
	f.Fuzz(func(t *testing.T, attrs []byte, strict bool) {
		m := msgWith(func(b *Builder) { b.B = append(b.B, attrs...) })
		mode := Liberal
		if strict {
			mode = Strict
		}
		tb, err := parseTest(m, mode)
		if err != nil {
			e, ok := err.(*Error)
			require.True(t, ok, "non-*Error %T", err)
			if e.Offset != 0 {
				require.GreaterOrEqual(t, e.Offset, 20, "offset %d out of range", e.Offset)
				require.Less(t, e.Offset, len(m), "offset %d out of range", e.Offset)
			}
			ack := AppendAck(nil, m, 1, e.Errno, e, AckOptions{ExtAck: true})
			h, _ := ReadHeader(ack)
			require.Equal(t, len(ack), int(h.Len), "ack length")
			return
		}
		for _, a := range tb {
			if a.Present() && a.IsNested() {
				_, _ = ParseNested(m, a, innerSet)
				for it := NestedIter(m, a); it.Next(); {
					_ = it.Attr().Str()
				}
			}
			_, _, _, _ = a.U8(), a.U16(), a.U32(), a.U64()
		}
	})
}
