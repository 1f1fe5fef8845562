package nlattr

import (
	"bytes"
	"math"

	"golang.org/x/sys/unix"
)

// Kind is the type of an attribute in a policy (enum nla_policy type NLA_*).
type Kind uint8

// Policy kinds. The numbering is this package's; the semantics are the
// kernel's.
const (
	Unspec    Kind = iota // NLA_UNSPEC: no policy entry
	U8                    // NLA_U8
	U16                   // NLA_U16
	U32                   // NLA_U32
	U64                   // NLA_U64
	String                // NLA_STRING
	Flag                  // NLA_FLAG
	Nested                // NLA_NESTED
	NulString             // NLA_NUL_STRING
	Binary                // NLA_BINARY
	Reject                // NLA_REJECT
	Uint                  // NLA_UINT: a u32 or a u64 (nla_get_uint)
)

// nlAttrTypeUint is NL_ATTR_TYPE_UINT (enum netlink_attribute_type; x/sys/unix stops at
// NL_ATTR_TYPE_BITFIELD32).
const nlAttrTypeUint = 17

// fixedLen is nla_attr_len: exact sizes, enforced under
// NL_VALIDATE_STRICT_ATTRS.
func (k Kind) fixedLen() int {
	switch k {
	case U8:
		return 1
	case U16:
		return 2
	case U32:
		return 4
	case U64:
		return 8
	}
	return 0
}

// minLen is nla_attr_minlen.
func (k Kind) minLen() int {
	if k == Nested {
		return AttrHdrLen
	}
	return k.fixedLen()
}

// Check is an additional value check (enum nla_policy_validation).
type Check uint8

// Value checks.
const (
	CheckNone  Check = iota // NLA_VALIDATE_NONE
	CheckMin                // NLA_POLICY_MIN
	CheckMax                // NLA_POLICY_MAX
	CheckRange              // NLA_POLICY_RANGE
	CheckMask               // NLA_POLICY_MASK
)

// Policy describes one attribute (struct nla_policy).
type Policy struct {
	Kind Kind
	// Len is the maximum string length without the NUL (String,
	// NulString), the maximum payload (Binary), or the minimum payload
	// (Unspec), as the kernel's pt->len.
	Len int
	// Nested validates the payload of a Nested attribute
	// (NLA_POLICY_NESTED).
	Nested *Set
	// Check, Min, Max and Mask are NLA_POLICY_MIN/MAX/RANGE/MASK.
	Check    Check
	Min, Max uint64
	Mask     uint64
}

// Set is a policy array for attribute types 1..MaxType.
type Set struct {
	MaxType uint16
	pol     []Policy
}

// NewSet builds a policy set; types missing from p are Unspec.
func NewSet(maxType uint16, p map[uint16]Policy) *Set {
	s := &Set{MaxType: maxType, pol: make([]Policy, int(maxType)+1)}
	for t, v := range p {
		if t >= 1 && t <= maxType {
			s.pol[t] = v
		}
	}
	return s
}

// Policy returns the policy of attribute type t (Unspec when out of range).
func (s *Set) Policy(t uint16) Policy {
	if s == nil || int(t) >= len(s.pol) {
		return Policy{}
	}
	return s.pol[t]
}

// Mode selects which checks apply (enum netlink_validation).
type Mode uint8

// Validation modes.
const (
	ValidateTrailing    Mode = 1 << iota // NL_VALIDATE_TRAILING
	ValidateMaxType                      // NL_VALIDATE_MAXTYPE
	ValidateUnspec                       // NL_VALIDATE_UNSPEC
	ValidateStrictAttrs                  // NL_VALIDATE_STRICT_ATTRS
	ValidateNested                       // NL_VALIDATE_NESTED

	Liberal Mode = 0                                                                                          // NL_VALIDATE_LIBERAL
	Strict  Mode = ValidateTrailing | ValidateMaxType | ValidateUnspec | ValidateStrictAttrs | ValidateNested // NL_VALIDATE_STRICT
)

// maxPolicyDepth is MAX_POLICY_RECURSION_DEPTH.
const maxPolicyDepth = 10

// Parse validates the attribute stream msg[off:off+n] against set and returns
// a table indexed by attribute type (length set.MaxType+1; absent entries
// have Off == 0). It mirrors __nla_validate_parse: errors are *Error with the
// kernel's errno, extack message and offending attribute.
func Parse(msg []byte, off, n int, set *Set, mode Mode) ([]Attr, error) {
	return parse(msg, off, n, set, mode, true, 0)
}

// ParseNested parses the payload of nest like the kernel's strict
// nla_parse_nested: the nest must carry NLA_F_NESTED.
func ParseNested(msg []byte, nest Attr, set *Set) ([]Attr, error) {
	if !nest.IsNested() {
		return nil, &Error{Errno: unix.EINVAL, Message: "NLA_F_NESTED is missing", Offset: nest.Off}
	}
	return parse(msg, nest.PayloadOff(), len(nest.Data), set, Strict, true, 0)
}

// ValidateNestedAttr validates the payload of nest without requiring
// NLA_F_NESTED on it (nla_validate_nested).
func ValidateNestedAttr(msg []byte, nest Attr, set *Set) error {
	_, err := parse(msg, nest.PayloadOff(), len(nest.Data), set, Strict, false, 0)
	return err
}

func parse(msg []byte, off, n int, set *Set, mode Mode, wantTable bool, depth int) ([]Attr, error) {
	if depth >= maxPolicyDepth {
		return nil, &Error{Errno: unix.EINVAL, Message: "allowed policy recursion depth exceeded"}
	}
	var tb []Attr
	if wantTable {
		tb = make([]Attr, int(set.MaxType)+1)
	}
	it := NewIter(msg, off, n)
	for it.Next() {
		a := it.Attr()
		t := a.Type()
		if t == 0 || t > set.MaxType {
			if mode&ValidateMaxType != 0 {
				return nil, &Error{Errno: unix.EINVAL, Message: "Unknown attribute type", Offset: a.Off}
			}
			continue
		}
		if err := validateAttr(msg, a, set, mode, depth); err != nil {
			return nil, err
		}
		if tb != nil {
			tb[t] = a
		}
	}
	if it.Rem() > 0 && mode&ValidateTrailing != 0 {
		return nil, &Error{Errno: unix.EINVAL, Message: "bytes leftover after parsing attributes"}
	}
	return tb, nil
}

// validateAttr mirrors validate_nla.
func validateAttr(msg []byte, a Attr, set *Set, mode Mode, depth int) error {
	pt := set.pol[a.Type()]
	attrlen := len(a.Data)
	errno := unix.ERANGE
	polErr := func(e unix.Errno, msg string) error {
		return &Error{Errno: e, Message: msg, Offset: a.Off, Policy: pt.extackDump()}
	}

	if fl := pt.Kind.fixedLen(); fl != 0 && attrlen != fl && mode&ValidateStrictAttrs != 0 {
		return polErr(unix.EINVAL, "invalid attribute length")
	}
	if mode&ValidateNested != 0 {
		if pt.Kind == Nested && !a.IsNested() {
			return polErr(unix.EINVAL, "NLA_F_NESTED is missing")
		}
		if pt.Kind != Nested && pt.Kind != Unspec && a.IsNested() {
			return polErr(unix.EINVAL, "NLA_F_NESTED not expected")
		}
	}

	bad := false
	switch pt.Kind {
	case Reject:
		errno, bad = unix.EINVAL, true
	case Uint:
		if attrlen != 4 && attrlen != 8 {
			return polErr(unix.EINVAL, "invalid attribute length")
		}
	case Flag:
		bad = attrlen > 0
	case NulString, String:
		if pt.Kind == NulString {
			minlen := attrlen
			if pt.Len > 0 {
				minlen = min(attrlen, pt.Len+1)
			}
			if minlen == 0 || bytes.IndexByte(a.Data[:minlen], 0) < 0 {
				errno, bad = unix.EINVAL, true
				break
			}
		}
		if attrlen < 1 {
			bad = true
			break
		}
		if pt.Len > 0 {
			l := attrlen
			if a.Data[l-1] == 0 {
				l--
			}
			bad = l > pt.Len
		}
	case Binary:
		bad = pt.Len > 0 && attrlen > pt.Len
	case Nested:
		if attrlen == 0 {
			break
		}
		if attrlen < AttrHdrLen {
			bad = true
			break
		}
		if pt.Nested != nil {
			if _, err := parse(msg, a.PayloadOff(), attrlen, pt.Nested, mode, false, depth+1); err != nil {
				return err
			}
		}
	case Unspec:
		if mode&ValidateUnspec != 0 {
			return &Error{Errno: unix.EINVAL, Message: "Unsupported attribute", Offset: a.Off}
		}
		bad = attrlen < pt.Len
	default:
		minlen := pt.Kind.minLen()
		if pt.Len > 0 {
			minlen = pt.Len
		}
		bad = attrlen < minlen
	}
	if bad {
		return polErr(errno, "Attribute failed policy validation")
	}

	switch pt.Check {
	case CheckMin, CheckMax, CheckRange:
		lo, hi := pt.rangeUnsigned()
		v := a.value(pt.Kind)
		if v < lo || v > hi {
			if pt.Kind == Binary {
				return polErr(unix.ERANGE, "binary attribute size out of range")
			}
			return polErr(unix.ERANGE, "integer out of range")
		}
	case CheckMask:
		if a.value(pt.Kind)&^pt.Mask != 0 {
			return &Error{Errno: unix.EINVAL, Message: "reserved bit set", Offset: a.Off}
		}
	}
	return nil
}

// value reads an integer of kind k (the payload length for Binary).
func (a Attr) value(k Kind) uint64 {
	switch k {
	case U8:
		return uint64(a.U8())
	case U16:
		return uint64(a.U16())
	case U32:
		return uint64(a.U32())
	case U64:
		return a.U64()
	case Uint:
		if len(a.Data) == 4 {
			return uint64(a.U32())
		}
		return a.U64()
	case Binary:
		return uint64(len(a.Data))
	}
	return 0
}

// rangeUnsigned mirrors nla_get_range_unsigned.
func (p Policy) rangeUnsigned() (lo, hi uint64) {
	switch p.Kind {
	case U8:
		hi = math.MaxUint8
	case U16, Binary:
		hi = math.MaxUint16
	case U32:
		hi = math.MaxUint32
	case U64, Uint:
		hi = math.MaxUint64
	}
	switch p.Check {
	case CheckRange:
		lo, hi = p.Min, p.Max
	case CheckMin:
		lo = p.Min
	case CheckMax:
		hi = p.Max
	}
	return lo, hi
}

// extackDump returns p as NLMSGERR_ATTR_POLICY's payload (netlink_policy_dump_write_attr): the
// NL_POLICY_TYPE_ATTR_* attributes, or nil for a kind the kernel does not describe.
func (p Policy) extackDump() []byte {
	var b Builder
	if !p.appendDump(&b, ErrAttrPolicy, nil) {
		return nil
	}
	return b.B[AttrHdrLen:]
}

// appendDump writes the policy description the kernel puts in
// NLMSGERR_ATTR_POLICY (netlink_policy_dump_write_attr, d nil) and in a
// CTRL_CMD_GETPOLICY dump (__netlink_policy_dump_write_attr, d its state:
// nested policies then carry their index and maximum type).
// It reports false for kinds the kernel does not describe (Unspec, Reject).
func (p Policy) appendDump(b *Builder, nestType uint16, d *PolicyDump) bool {
	var typ uint32
	start := b.Nest(nestType)
	switch p.Kind {
	case Unspec, Reject:
		b.Truncate(start)
		return false
	case Nested:
		typ = unix.NL_ATTR_TYPE_NESTED
		if d != nil && p.Nested != nil && p.Nested.MaxType > 0 {
			b.PutU32(unix.NL_POLICY_TYPE_ATTR_POLICY_IDX, d.Index(p.Nested))
			b.PutU32(unix.NL_POLICY_TYPE_ATTR_POLICY_MAXTYPE, uint32(p.Nested.MaxType))
		}
	case U8, U16, U32, U64, Uint:
		typ = map[Kind]uint32{U8: unix.NL_ATTR_TYPE_U8, U16: unix.NL_ATTR_TYPE_U16,
			U32: unix.NL_ATTR_TYPE_U32, U64: unix.NL_ATTR_TYPE_U64, Uint: nlAttrTypeUint}[p.Kind]
		if p.Check == CheckMask {
			b.PutU64(unix.NL_POLICY_TYPE_ATTR_MASK, p.Mask)
			break
		}
		lo, hi := p.rangeUnsigned()
		b.PutU64(unix.NL_POLICY_TYPE_ATTR_MIN_VALUE_U, lo)
		b.PutU64(unix.NL_POLICY_TYPE_ATTR_MAX_VALUE_U, hi)
	case Binary:
		typ = unix.NL_ATTR_TYPE_BINARY
		if p.Len > 0 {
			b.PutU32(unix.NL_POLICY_TYPE_ATTR_MAX_LENGTH, uint32(p.Len))
		}
	case String, NulString:
		typ = unix.NL_ATTR_TYPE_STRING
		if p.Kind == NulString {
			typ = unix.NL_ATTR_TYPE_NUL_STRING
		}
		if p.Len > 0 {
			b.PutU32(unix.NL_POLICY_TYPE_ATTR_MAX_LENGTH, uint32(p.Len))
		}
	case Flag:
		typ = unix.NL_ATTR_TYPE_FLAG
	}
	b.PutU32(unix.NL_POLICY_TYPE_ATTR_TYPE, typ)
	b.EndNest(start)
	return true
}
