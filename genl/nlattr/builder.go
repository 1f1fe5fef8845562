package nlattr

import (
	"encoding/binary"
	"math"
)

// Builder appends netlink messages and attributes to a byte slice, with the
// kernel's layout: 4-byte alignment, zeroed padding, nla_len excluding the
// padding, nlmsg_len including the payload but not the final padding.
//
// A nest or message that grows past what its length field can hold (64 KiB
// for attributes) sets Overflow instead of writing a wrong length; callers
// treat that as EMSGSIZE, as the kernel's nla_put* do.
type Builder struct {
	B        []byte
	Overflow bool
}

// Reset empties the builder, keeping its storage.
func (b *Builder) Reset() { b.B, b.Overflow = b.B[:0], false }

// Len is the number of bytes written so far.
func (b *Builder) Len() int { return len(b.B) }

func (b *Builder) grow(n int) []byte {
	l := len(b.B)
	if cap(b.B)-l < n {
		nb := make([]byte, l, 2*cap(b.B)+n)
		copy(nb, b.B)
		b.B = nb
	}
	b.B = b.B[:l+n]
	s := b.B[l:]
	clear(s)
	return s
}

// BeginMsg starts a netlink message and returns its start offset for EndMsg.
func (b *Builder) BeginMsg(typ, flags uint16, seq, pid uint32) int {
	start := len(b.B)
	h := b.grow(MsgHdrLen)
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], seq)
	binary.NativeEndian.PutUint32(h[12:], pid)
	return start
}

// Genl appends a generic netlink header (reserved = 0).
func (b *Builder) Genl(cmd, version uint8) {
	h := b.grow(GenlHdrLen)
	h[0], h[1] = cmd, version
}

// EndMsg writes nlmsg_len for the message started at start.
func (b *Builder) EndMsg(start int) {
	l := len(b.B) - start
	if l > math.MaxUint32 {
		b.Overflow = true
		return
	}
	binary.NativeEndian.PutUint32(b.B[start:], uint32(l))
}

// Put appends an attribute with an arbitrary payload.
func (b *Builder) Put(t uint16, data []byte) {
	if AttrHdrLen+len(data) > math.MaxUint16 {
		b.Overflow = true
		return
	}
	a := b.grow(Align(AttrHdrLen + len(data)))
	binary.NativeEndian.PutUint16(a, uint16(AttrHdrLen+len(data)))
	binary.NativeEndian.PutUint16(a[2:], t)
	copy(a[AttrHdrLen:], data)
}

// PutU8 appends a u8 attribute.
func (b *Builder) PutU8(t uint16, v uint8) { b.Put(t, []byte{v}) }

// PutU16 appends a host-order u16 attribute.
func (b *Builder) PutU16(t uint16, v uint16) {
	a := b.grow(8)
	binary.NativeEndian.PutUint16(a, 6)
	binary.NativeEndian.PutUint16(a[2:], t)
	binary.NativeEndian.PutUint16(a[4:], v)
}

// PutU32 appends a host-order u32 attribute.
func (b *Builder) PutU32(t uint16, v uint32) {
	a := b.grow(8)
	binary.NativeEndian.PutUint16(a, 8)
	binary.NativeEndian.PutUint16(a[2:], t)
	binary.NativeEndian.PutUint32(a[4:], v)
}

// PutU64 appends a host-order u64 attribute. Like nla_put_u64_64bit on
// architectures with efficient unaligned access, it adds no pad attribute.
func (b *Builder) PutU64(t uint16, v uint64) {
	a := b.grow(12)
	binary.NativeEndian.PutUint16(a, 12)
	binary.NativeEndian.PutUint16(a[2:], t)
	binary.NativeEndian.PutUint64(a[4:], v)
}

// PutFlag appends a zero-length flag attribute.
func (b *Builder) PutFlag(t uint16) { b.Put(t, nil) }

// PutString appends a NUL-terminated string attribute (nla_put_string).
func (b *Builder) PutString(t uint16, s string) {
	if AttrHdrLen+len(s)+1 > math.MaxUint16 {
		b.Overflow = true
		return
	}
	a := b.grow(Align(AttrHdrLen + len(s) + 1))
	binary.NativeEndian.PutUint16(a, uint16(AttrHdrLen+len(s)+1))
	binary.NativeEndian.PutUint16(a[2:], t)
	copy(a[AttrHdrLen:], s)
}

// Nest starts a nest with NLA_F_NESTED set (nla_nest_start) and returns its
// offset for EndNest.
func (b *Builder) Nest(t uint16) int { return b.NestNoFlag(t | FlagNested) }

// NestNoFlag starts a nest without NLA_F_NESTED (nla_nest_start_noflag), as
// nlctrl does for CTRL_ATTR_OPS and CTRL_ATTR_MCAST_GROUPS.
func (b *Builder) NestNoFlag(t uint16) int {
	start := len(b.B)
	a := b.grow(AttrHdrLen)
	binary.NativeEndian.PutUint16(a[2:], t)
	return start
}

// EndNest writes the length of the nest started at start.
func (b *Builder) EndNest(start int) {
	l := len(b.B) - start
	if l > math.MaxUint16 {
		b.Overflow = true
		return
	}
	binary.NativeEndian.PutUint16(b.B[start:], uint16(l))
}

// Truncate drops everything written after off (nla_nest_cancel,
// genlmsg_cancel).
func (b *Builder) Truncate(off int) {
	if off >= 0 && off <= len(b.B) {
		b.B = b.B[:off]
	}
}
