// Package nlattr reads, validates and writes netlink messages and attributes
// the way the Linux kernel does (lib/nlattr.c, net/netlink/af_netlink.c), so
// that a userspace server can answer requests byte-for-byte like a kernel
// generic netlink family.
//
// Attributes are located by their offset from the start of the netlink
// message that carries them, because the kernel's extended ACK reports the
// offending attribute as such an offset (NLMSGERR_ATTR_OFFS).
//
// Nothing in this package panics on malformed input: every accessor checks
// lengths, and validation failures are returned as *Error carrying the errno
// and the kernel's extack text.
package nlattr

import (
	"encoding/binary"
	"strings"
)

// Sizes of the fixed headers.
const (
	MsgHdrLen  = 16 // struct nlmsghdr
	GenlHdrLen = 4  // struct genlmsghdr
	AttrHdrLen = 4  // struct nlattr
)

// Attribute type flags, as in include/uapi/linux/netlink.h.
const (
	FlagNested       uint16 = 0x8000 // NLA_F_NESTED
	FlagNetByteOrder uint16 = 0x4000 // NLA_F_NET_BYTEORDER
	TypeMask         uint16 = 0x3fff // NLA_TYPE_MASK
)

// Align rounds n up to the 4-byte netlink alignment (NLMSG_ALIGN, NLA_ALIGN).
func Align(n int) int { return (n + 3) &^ 3 }

// Attr is one attribute of a received message.
type Attr struct {
	// Raw is the nla_type field, including NLA_F_NESTED and
	// NLA_F_NET_BYTEORDER.
	Raw uint16
	// Off is the offset of the attribute header from the start of the
	// netlink message (nlmsghdr) it was read from. Off == 0 means the
	// attribute is absent: a real attribute always follows at least the
	// 16-byte nlmsghdr.
	Off int
	// Data is the payload, without the header and without padding.
	Data []byte
}

// Present reports whether the attribute was in the message.
func (a Attr) Present() bool { return a.Off > 0 }

// Type returns the attribute type without flags (nla_type()).
func (a Attr) Type() uint16 { return a.Raw & TypeMask }

// IsNested reports whether NLA_F_NESTED is set.
func (a Attr) IsNested() bool { return a.Raw&FlagNested != 0 }

// PayloadOff is the offset of the payload from the start of the message.
func (a Attr) PayloadOff() int { return a.Off + AttrHdrLen }

// U8 returns the payload as a u8, or 0 if it is too short.
func (a Attr) U8() uint8 {
	if len(a.Data) < 1 {
		return 0
	}
	return a.Data[0]
}

// U16 returns the payload as a host-order u16, or 0 if it is too short.
func (a Attr) U16() uint16 {
	if len(a.Data) < 2 {
		return 0
	}
	return binary.NativeEndian.Uint16(a.Data)
}

// U32 returns the payload as a host-order u32, or 0 if it is too short.
func (a Attr) U32() uint32 {
	if len(a.Data) < 4 {
		return 0
	}
	return binary.NativeEndian.Uint32(a.Data)
}

// U64 returns the payload as a host-order u64, or 0 if it is too short.
func (a Attr) U64() uint64 {
	if len(a.Data) < 8 {
		return 0
	}
	return binary.NativeEndian.Uint64(a.Data)
}

// Str returns the payload as a C string: up to the first NUL, or all of it
// when there is none (as the kernel's nla_data() used as a char * after
// NLA_NUL_STRING validation).
func (a Attr) Str() string {
	s := string(a.Data)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s
}

// Iter walks the attributes of a stream like nla_for_each_attr: it stops at
// the first attribute whose header does not fit, and reports the number of
// bytes left over (rem > 0 means trailing garbage, exactly the kernel's test).
type Iter struct {
	msg  []byte
	pos  int // offset of the next attribute in msg
	end  int
	cur  Attr
	done bool
}

// NewIter iterates over msg[off:off+n]; offsets in the returned attributes
// are relative to msg[0]. Out-of-range arguments give an empty iteration.
func NewIter(msg []byte, off, n int) *Iter {
	it := &Iter{msg: msg, pos: off, end: off + n}
	if off < 0 || n < 0 || off+n > len(msg) {
		it.pos, it.end, it.done = 0, 0, true
	}
	return it
}

// NestedIter iterates over the payload of a nested attribute of msg.
func NestedIter(msg []byte, a Attr) *Iter {
	if !a.Present() {
		return NewIter(msg, 0, 0)
	}
	return NewIter(msg, a.PayloadOff(), len(a.Data))
}

// Next advances to the next attribute (nla_ok/nla_next).
func (it *Iter) Next() bool {
	if it.done {
		return false
	}
	rem := it.end - it.pos
	if rem < AttrHdrLen {
		it.done = true
		return false
	}
	l := int(binary.NativeEndian.Uint16(it.msg[it.pos:]))
	if l < AttrHdrLen || l > rem {
		it.done = true
		return false
	}
	it.cur = Attr{
		Raw:  binary.NativeEndian.Uint16(it.msg[it.pos+2:]),
		Off:  it.pos,
		Data: it.msg[it.pos+AttrHdrLen : it.pos+l],
	}
	it.pos += Align(l)
	return true
}

// Attr returns the current attribute.
func (it *Iter) Attr() Attr { return it.cur }

// Rem returns the bytes remaining after the loop ended (the kernel's rem; may
// be negative when the last attribute's padding runs past the end).
func (it *Iter) Rem() int { return it.end - it.pos }
