package nlattr

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestUint: NLA_UINT takes a u32 or a u64 (else "invalid attribute length"), its mask applies
// to either size ("reserved bit set"), and the policy dump describes it as NL_ATTR_TYPE_UINT
// with its mask, as netlink_policy_dump_write_attr does.
func TestUint(t *testing.T) {
	set := NewSet(1, map[uint16]Policy{1: {Kind: Uint, Check: CheckMask, Mask: 0x0f}})
	for _, tc := range []struct {
		name string
		data []byte
		msg  string
	}{
		{"u32", []byte{5, 0, 0, 0}, ""},
		{"u64", []byte{5, 0, 0, 0, 0, 0, 0, 0}, ""},
		{"u32 reserved bit", []byte{0x10, 0, 0, 0}, "reserved bit set"},
		{"u64 reserved high bit", []byte{0, 0, 0, 0, 0, 0, 0, 1}, "reserved bit set"},
		{"u16", []byte{5, 0}, "invalid attribute length"},
		{"empty", nil, "invalid attribute length"},
		{"u128", make([]byte, 16), "invalid attribute length"},
	} {
		var b Builder
		b.Put(1, tc.data)
		tb, err := Parse(b.B, 0, len(b.B), set, Strict)
		var e *Error
		switch {
		case tc.msg == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.msg == "" && tb[1].Data[0] != 5:
			t.Errorf("%s: attribute %+v", tc.name, tb[1])
		case tc.msg != "" && (!errors.As(err, &e) || e.Errno != unix.EINVAL || e.Message != tc.msg || e.Offset != 0):
			t.Errorf("%s: %v, want EINVAL %q at 0", tc.name, err, tc.msg)
		}
	}
	var b Builder
	require.True(t, set.Policy(1).appendDump(&b, 1, nil), "NLA_UINT not described")
	want := map[uint16]uint64{unix.NL_POLICY_TYPE_ATTR_TYPE: nlAttrTypeUint, unix.NL_POLICY_TYPE_ATTR_MASK: 0x0f}
	it := NewIter(b.B, AttrHdrLen, len(b.B)-AttrHdrLen)
	got := map[uint16]uint64{}
	for it.Next() {
		a := it.Attr()
		if len(a.Data) == 4 {
			got[a.Type()] = uint64(a.U32())
		} else {
			got[a.Type()] = a.U64()
		}
	}
	if len(got) != len(want) || got[unix.NL_POLICY_TYPE_ATTR_TYPE] != want[unix.NL_POLICY_TYPE_ATTR_TYPE] ||
		got[unix.NL_POLICY_TYPE_ATTR_MASK] != want[unix.NL_POLICY_TYPE_ATTR_MASK] {
		t.Errorf("dump %v, want %v", got, want)
	}
}
