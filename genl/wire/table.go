// Package wire is the one description of manad's generic netlink messages,
// shared by the server (package genl) and the client (genl/client): the
// message and attribute numbers of each family and, for every attribute set,
// a typed struct with a Table that both encodes and decodes it. A new
// attribute is one constant and one row of its table; both sides follow.
//
// Tables describe shape only. The server still validates requests against
// its policies (genl/nlattr) before decoding them, and meaning is checked by
// the backend.
package wire

import (
	"fmt"
	"math"
	"net"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// Field is one attribute of a T: its type number, how it is written and how
// it is read. Fields are made by U8, Bool, U32, U64, String, MAC, Strings,
// Nest and NestList.
type Field[T any] struct {
	typ  uint16
	kind Kind
	put  func(b *nlattr.Builder, v *T)
	get  func(a nlattr.Attr, v *T) error
	zero func(v *T) bool
	when func(v *T) bool
}

// OmitZero returns f that Table.Put leaves out when its value is zero
// (strings empty, lists empty, numbers 0, false).
func (f Field[T]) OmitZero() Field[T] {
	f.when = func(v *T) bool { return !f.zero(v) }
	return f
}

// When returns f that Table.Put writes only when cond holds.
func (f Field[T]) When(cond func(v *T) bool) Field[T] {
	f.when = cond
	return f
}

// Kind is the wire type of a Field, from which the server derives its
// request policy.
type Kind uint8

// Kinds of Field.
const (
	KindU8 Kind = iota + 1
	KindBool
	KindU32
	KindU64
	KindString // also Repeated
	KindMAC    // 6 bytes
	KindNest   // Nest
	KindList   // Strings, NestList
	KindBinary // Binary: raw bytes
	KindUint   // NLA_UINT: a u32, or a u64 when the value needs it
)

// Table is the attribute set of a T, in the order Put writes it.
type Table[T any] struct {
	fields []Field[T]
	// OmitZero applies Field.OmitZero to every field (request structs whose
	// zero fields mean "not given").
	omitZero bool
}

// NewTable returns the table of fields, written in this order.
func NewTable[T any](fields ...Field[T]) *Table[T] { return &Table[T]{fields: fields} }

// OmitZero returns a copy of t that leaves out every zero field.
func (t *Table[T]) OmitZero() *Table[T] { return &Table[T]{fields: t.fields, omitZero: true} }

// Put writes the attributes of v.
func (t *Table[T]) Put(b *nlattr.Builder, v *T) {
	for _, f := range t.fields {
		if f.when != nil && !f.when(v) || t.omitZero && f.zero(v) {
			continue
		}
		f.put(b, v)
	}
}

// PutNest writes v as a nest of type typ.
func (t *Table[T]) PutNest(b *nlattr.Builder, typ uint16, v *T) {
	n := b.Nest(typ)
	t.Put(b, v)
	b.EndNest(n)
}

// Kinds returns the wire type of every attribute of the table, by type.
func (t *Table[T]) Kinds() map[uint16]Kind {
	m := make(map[uint16]Kind, len(t.fields))
	for _, f := range t.fields {
		m[f.typ] = f.kind
	}
	return m
}

// Decode reads the attribute stream data into v. Attributes the table does
// not know are skipped (a newer peer may send more); a known attribute
// shorter than its type is an error wrapping EINVAL, and so is trailing data
// that is not an attribute.
func (t *Table[T]) Decode(data []byte, v *T) error {
	it := nlattr.NewIter(data, 0, len(data))
	for it.Next() {
		a := it.Attr()
		for _, f := range t.fields {
			if f.typ == a.Type() {
				if err := f.get(a, v); err != nil {
					return fmt.Errorf("wire: attribute %d: %w", a.Type(), err)
				}
				break
			}
		}
	}
	if it.Rem() > 0 {
		return fmt.Errorf("wire: %d bytes of trailing data: %w", it.Rem(), unix.EINVAL)
	}
	return nil
}

func short(a nlattr.Attr, n int) error {
	if len(a.Data) < n {
		return fmt.Errorf("%d bytes, want %d: %w", len(a.Data), n, unix.EINVAL)
	}
	return nil
}

// U8 is a u8 attribute.
func U8[T any](typ uint16, p func(*T) *uint8) Field[T] {
	return Field[T]{typ: typ, kind: KindU8,
		put:  func(b *nlattr.Builder, v *T) { b.PutU8(typ, *p(v)) },
		get:  func(a nlattr.Attr, v *T) error { *p(v) = a.U8(); return short(a, 1) },
		zero: func(v *T) bool { return *p(v) == 0 },
	}
}

// Bool is a u8 attribute holding 0 or 1 (any non-zero reads as true).
func Bool[T any](typ uint16, p func(*T) *bool) Field[T] {
	return Field[T]{typ: typ, kind: KindBool,
		put: func(b *nlattr.Builder, v *T) {
			var u uint8
			if *p(v) {
				u = 1
			}
			b.PutU8(typ, u)
		},
		get:  func(a nlattr.Attr, v *T) error { *p(v) = a.U8() != 0; return short(a, 1) },
		zero: func(v *T) bool { return !*p(v) },
	}
}

// OptBool is a Bool a request may leave out: nil is "not given" (never
// written, and what a missing attribute decodes to), so that false can be
// asked for where the default is true.
func OptBool[T any](typ uint16, p func(*T) **bool) Field[T] {
	return Field[T]{typ: typ, kind: KindBool,
		put: func(b *nlattr.Builder, v *T) {
			var u uint8
			if **p(v) {
				u = 1
			}
			b.PutU8(typ, u)
		},
		get: func(a nlattr.Attr, v *T) error {
			on := a.U8() != 0
			*p(v) = &on
			return short(a, 1)
		},
		zero: func(v *T) bool { return *p(v) == nil },
	}.OmitZero()
}

// OptU8 is a U8 a request may leave out: nil is "not given" (not written, and what a missing
// attribute decodes to), so that 0 can be asked for.
func OptU8[T any](typ uint16, p func(*T) **uint8) Field[T] {
	return Field[T]{typ: typ, kind: KindU8,
		put: func(b *nlattr.Builder, v *T) { b.PutU8(typ, **p(v)) },
		get: func(a nlattr.Attr, v *T) error {
			x := a.U8()
			*p(v) = &x
			return short(a, 1)
		},
		zero: func(v *T) bool { return *p(v) == nil },
	}.OmitZero()
}

// OptU32 is a U32 a request may leave out, as OptU8.
func OptU32[T any](typ uint16, p func(*T) **uint32) Field[T] {
	return Field[T]{typ: typ, kind: KindU32,
		put: func(b *nlattr.Builder, v *T) { b.PutU32(typ, **p(v)) },
		get: func(a nlattr.Attr, v *T) error {
			x := a.U32()
			*p(v) = &x
			return short(a, 4)
		},
		zero: func(v *T) bool { return *p(v) == nil },
	}.OmitZero()
}

// OptNanos is an optional duration sent as an NLA_UINT of nanoseconds (nla_put_uint: 4 bytes
// when the value fits, else 8); nil is "not given". A negative duration is written as 0 (a
// caller refuses it before); a value beyond a Duration's range reads as the largest one.
func OptNanos[T any](typ uint16, p func(*T) **time.Duration) Field[T] {
	return Field[T]{typ: typ, kind: KindUint,
		put: func(b *nlattr.Builder, v *T) {
			if n := uint64(max(**p(v), 0)); n <= math.MaxUint32 {
				b.PutU32(typ, uint32(n))
			} else {
				b.PutU64(typ, n)
			}
		},
		get: func(a nlattr.Attr, v *T) error {
			var n uint64
			switch len(a.Data) {
			case 4:
				n = uint64(a.U32())
			case 8:
				n = a.U64()
			default:
				return fmt.Errorf("%d bytes, want 4 or 8: %w", len(a.Data), unix.EINVAL)
			}
			d := time.Duration(min(n, math.MaxInt64))
			*p(v) = &d
			return nil
		},
		zero: func(v *T) bool { return *p(v) == nil },
	}.OmitZero()
}

// U32 is a host-order u32 attribute.
func U32[T any](typ uint16, p func(*T) *uint32) Field[T] {
	return Field[T]{typ: typ, kind: KindU32,
		put:  func(b *nlattr.Builder, v *T) { b.PutU32(typ, *p(v)) },
		get:  func(a nlattr.Attr, v *T) error { *p(v) = a.U32(); return short(a, 4) },
		zero: func(v *T) bool { return *p(v) == 0 },
	}
}

// U64 is a host-order u64 attribute.
func U64[T any](typ uint16, p func(*T) *uint64) Field[T] {
	return Field[T]{typ: typ, kind: KindU64,
		put:  func(b *nlattr.Builder, v *T) { b.PutU64(typ, *p(v)) },
		get:  func(a nlattr.Attr, v *T) error { *p(v) = a.U64(); return short(a, 8) },
		zero: func(v *T) bool { return *p(v) == 0 },
	}
}

// String is a NUL-terminated string attribute.
func String[T any](typ uint16, p func(*T) *string) Field[T] {
	return Field[T]{typ: typ, kind: KindString,
		put:  func(b *nlattr.Builder, v *T) { b.PutString(typ, *p(v)) },
		get:  func(a nlattr.Attr, v *T) error { *p(v) = a.Str(); return nil },
		zero: func(v *T) bool { return *p(v) == "" },
	}
}

// MAC is a binary hardware-address attribute, left out when empty.
func MAC[T any](typ uint16, p func(*T) *net.HardwareAddr) Field[T] {
	f := Field[T]{typ: typ, kind: KindMAC,
		put:  func(b *nlattr.Builder, v *T) { b.Put(typ, *p(v)) },
		get:  func(a nlattr.Attr, v *T) error { *p(v) = net.HardwareAddr(slices.Clone(a.Data)); return nil },
		zero: func(v *T) bool { return len(*p(v)) == 0 },
	}
	return f.OmitZero()
}

// Repeated is a string attribute that may occur many times at its level, one
// per element (in order).
func Repeated[T any](typ uint16, p func(*T) *[]string) Field[T] {
	return Field[T]{typ: typ, kind: KindString,
		put: func(b *nlattr.Builder, v *T) {
			for _, s := range *p(v) {
				b.PutString(typ, s)
			}
		},
		get:  func(a nlattr.Attr, v *T) error { *p(v) = append(*p(v), a.Str()); return nil },
		zero: func(v *T) bool { return len(*p(v)) == 0 },
	}
}

// Strings is a nest of ListItem string attributes, in order.
func Strings[T any](typ uint16, p func(*T) *[]string) Field[T] {
	return Field[T]{typ: typ, kind: KindList,
		put: func(b *nlattr.Builder, v *T) {
			n := b.Nest(typ)
			for _, s := range *p(v) {
				b.PutString(ListItem, s)
			}
			b.EndNest(n)
		},
		get: func(a nlattr.Attr, v *T) error {
			for it := nlattr.NewIter(a.Data, 0, len(a.Data)); it.Next(); {
				*p(v) = append(*p(v), it.Attr().Str())
			}
			return nil
		},
		zero: func(v *T) bool { return len(*p(v)) == 0 },
	}
}

// Nest is a nested attribute set described by sub.
func Nest[T, S any](typ uint16, p func(*T) *S, sub *Table[S]) Field[T] {
	return Field[T]{typ: typ, kind: KindNest,
		put:  func(b *nlattr.Builder, v *T) { sub.PutNest(b, typ, p(v)) },
		get:  func(a nlattr.Attr, v *T) error { return sub.Decode(a.Data, p(v)) },
		zero: func(*T) bool { return false },
	}
}

// NestList is a nest of ListItem nests, each an S described by sub.
func NestList[T, S any](typ uint16, p func(*T) *[]S, sub *Table[S]) Field[T] {
	return Field[T]{typ: typ, kind: KindList,
		put: func(b *nlattr.Builder, v *T) {
			n := b.Nest(typ)
			for i := range *p(v) {
				sub.PutNest(b, ListItem, &(*p(v))[i])
			}
			b.EndNest(n)
		},
		get: func(a nlattr.Attr, v *T) error {
			for it := nlattr.NewIter(a.Data, 0, len(a.Data)); it.Next(); {
				var s S
				if err := sub.Decode(it.Attr().Data, &s); err != nil {
					return err
				}
				*p(v) = append(*p(v), s)
			}
			return nil
		},
		zero: func(v *T) bool { return len(*p(v)) == 0 },
	}
}

// Bit is one bit of an ethtool bitset in list form (ETHTOOL_A_BITSET_BITS_BIT): by Name, or by
// Index when Name is empty, and its value.
type Bit struct {
	Index uint32
	Name  string
	On    bool
}

// BitList is an ethtool bitset nest in verbose list form without a mask (struct
// ethnl_bitset's ETHTOOL_A_BITSET_BITS, no NOMASK), as a SET request that changes the bits it
// lists and leaves the others: each bit by name or index, VALUE present when on. Decoding
// reads that form only (bit values and masks of the compact form are skipped): a server that
// also takes compact requests reads the nest with ethnl_update_bitset32's rules instead.
func BitList[T any](typ uint16, p func(*T) *[]Bit) Field[T] {
	return Field[T]{typ: typ, kind: KindNest,
		put: func(b *nlattr.Builder, v *T) {
			n := b.Nest(typ)
			bits := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
			for _, bit := range *p(v) {
				one := b.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
				if bit.Name != "" {
					b.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, bit.Name)
				} else {
					b.PutU32(unix.ETHTOOL_A_BITSET_BIT_INDEX, bit.Index)
				}
				if bit.On {
					b.PutFlag(unix.ETHTOOL_A_BITSET_BIT_VALUE)
				}
				b.EndNest(one)
			}
			b.EndNest(bits)
			b.EndNest(n)
		},
		get: func(a nlattr.Attr, v *T) error {
			for it := nlattr.NewIter(a.Data, 0, len(a.Data)); it.Next(); {
				if it.Attr().Type() != unix.ETHTOOL_A_BITSET_BITS {
					continue
				}
				bits := it.Attr()
				for bi := nlattr.NewIter(bits.Data, 0, len(bits.Data)); bi.Next(); {
					var bit Bit
					one := bi.Attr()
					for fi := nlattr.NewIter(one.Data, 0, len(one.Data)); fi.Next(); {
						switch f := fi.Attr(); f.Type() {
						case unix.ETHTOOL_A_BITSET_BIT_INDEX:
							if err := short(f, 4); err != nil {
								return err
							}
							bit.Index = f.U32()
						case unix.ETHTOOL_A_BITSET_BIT_NAME:
							bit.Name = f.Str()
						case unix.ETHTOOL_A_BITSET_BIT_VALUE:
							bit.On = true
						}
					}
					*p(v) = append(*p(v), bit)
				}
			}
			return nil
		},
		zero: func(v *T) bool { return len(*p(v)) == 0 },
	}
}

// Binary is an attribute of raw bytes (a captured frame); decoding copies them out of the
// message.
func Binary[T any](typ uint16, p func(*T) *[]byte) Field[T] {
	return Field[T]{typ: typ, kind: KindBinary,
		put:  func(b *nlattr.Builder, v *T) { b.Put(typ, *p(v)) },
		get:  func(a nlattr.Attr, v *T) error { *p(v) = slices.Clone(a.Data); return nil },
		zero: func(v *T) bool { return len(*p(v)) == 0 },
	}
}
