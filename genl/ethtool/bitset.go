package ethtool

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// Bitset attribute policies (bitset_policy and bit_policy in
// net/ethtool/bitset.c).
var (
	bitsetPolicy = nlattr.NewSet(unix.ETHTOOL_A_BITSET_MASK, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_BITSET_NOMASK: {Kind: nlattr.Flag},
		unix.ETHTOOL_A_BITSET_SIZE:   {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: MaxBitsetSize},
		unix.ETHTOOL_A_BITSET_BITS:   {Kind: nlattr.Nested},
		unix.ETHTOOL_A_BITSET_VALUE:  {Kind: nlattr.Binary},
		unix.ETHTOOL_A_BITSET_MASK:   {Kind: nlattr.Binary},
	})
	bitPolicy = nlattr.NewSet(unix.ETHTOOL_A_BITSET_BIT_VALUE, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_BITSET_BIT_INDEX: {Kind: nlattr.U32},
		unix.ETHTOOL_A_BITSET_BIT_NAME:  {Kind: nlattr.NulString},
		unix.ETHTOOL_A_BITSET_BIT_VALUE: {Kind: nlattr.Flag},
	})
)

// Words returns the number of u32 words of an nbits-bit bitmap.
func Words(nbits int) int { return (nbits + 31) / 32 }

func testBit(m []uint32, i int) bool { return i/32 < len(m) && m[i/32]&(1<<(i%32)) != 0 }

// lowerBits is ethnl_lower_bits: the mask of the used bits in the last word.
func lowerBits(nbits int) uint32 {
	if nbits%32 == 0 {
		return ^uint32(0)
	}
	return ^uint32(0) >> (32 - nbits%32)
}

// PutBitset32 appends bitset attribute t like ethnl_put_bitset32: a nest with
// NOMASK (only when mask is nil, a "list"), SIZE, then either VALUE/MASK word
// arrays (compact) or a BITS nest with one BIT{INDEX, NAME, [VALUE]} per bit
// set in mask (or in val for a list). Bits at or past len(names) have no
// name (the kernel's NULL names table); an empty name is sent as "". val and mask need Words(nbits) words.
func PutBitset32(b *nlattr.Builder, t uint16, val, mask []uint32, nbits int, names []string, compact bool) {
	nest := b.Nest(t)
	if mask == nil {
		b.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
	}
	b.PutU32(unix.ETHTOOL_A_BITSET_SIZE, uint32(nbits))
	if compact {
		putWords(b, unix.ETHTOOL_A_BITSET_VALUE, val, nbits)
		if mask != nil {
			putWords(b, unix.ETHTOOL_A_BITSET_MASK, mask, nbits)
		}
	} else {
		bits := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
		sel := val
		if mask != nil {
			sel = mask
		}
		for i := 0; i < nbits; i++ {
			if !testBit(sel, i) {
				continue
			}
			bit := b.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
			b.PutU32(unix.ETHTOOL_A_BITSET_BIT_INDEX, uint32(i))
			if i < len(names) {
				PutStrz(b, unix.ETHTOOL_A_BITSET_BIT_NAME, names[i])
			}
			if mask != nil && testBit(val, i) {
				b.PutFlag(unix.ETHTOOL_A_BITSET_BIT_VALUE)
			}
			b.EndNest(bit)
		}
		b.EndNest(bits)
	}
	b.EndNest(nest)
}

func putWords(b *nlattr.Builder, t uint16, words []uint32, nbits int) {
	n := Words(nbits)
	buf := make([]byte, 4*n)
	for i := 0; i < n && i < len(words); i++ {
		w := words[i]
		if i == n-1 {
			w &= lowerBits(nbits)
		}
		binary.NativeEndian.PutUint32(buf[4*i:], w)
	}
	b.Put(t, buf)
}

// stripExtack drops message and offset, for parses the kernel runs with a
// NULL extack.
func stripExtack(err error) error {
	var e *nlattr.Error
	if errors.As(err, &e) {
		return &nlattr.Error{Errno: e.Errno}
	}
	return err
}

// IsCompact mirrors ethnl_bitset_is_compact: it parses the bitset with a NULL
// extack (so its errors carry only an errno) and reports whether it is in
// compact form.
func IsCompact(msg []byte, bitset nlattr.Attr) (bool, error) {
	tb, err := nlattr.ParseNested(msg, bitset, bitsetPolicy)
	if err != nil {
		return false, stripExtack(err)
	}
	if tb[unix.ETHTOOL_A_BITSET_BITS].Present() {
		if tb[unix.ETHTOOL_A_BITSET_VALUE].Present() || tb[unix.ETHTOOL_A_BITSET_MASK].Present() {
			return false, &nlattr.Error{Errno: unix.EINVAL}
		}
		return false, nil
	}
	if !tb[unix.ETHTOOL_A_BITSET_SIZE].Present() || !tb[unix.ETHTOOL_A_BITSET_VALUE].Present() {
		return false, &nlattr.Error{Errno: unix.EINVAL}
	}
	return true, nil
}

// UpdateBitset32 applies the bitset attribute of a SET request to bitmap
// (nbits bits, Words(nbits) words), mirroring ethnl_update_bitset32 with all
// of its extack errors. names are the bit names for lookups by name (nil in
// compact form, as the kernel passes). It reports whether bitmap changed; on
// error bitmap may be partly updated, so callers work on a copy.
func UpdateBitset32(msg []byte, bitset nlattr.Attr, bitmap []uint32, nbits int, names []string) (mod bool, err error) {
	if !bitset.Present() {
		return false, nil
	}
	if len(bitmap) < Words(nbits) {
		return false, fmt.Errorf("bitmap of %d words is too short for %d bits", len(bitmap), nbits)
	}
	tb, err := nlattr.ParseNested(msg, bitset, bitsetPolicy)
	if err != nil {
		return false, err
	}
	if tb[unix.ETHTOOL_A_BITSET_BITS].Present() {
		return updateVerbose(msg, bitmap, nbits, tb, names)
	}
	if err := compactSanityChecks(nbits, bitset, tb); err != nil {
		return false, err
	}
	noMask := tb[unix.ETHTOOL_A_BITSET_NOMASK].Present()
	changeBits := min(int(tb[unix.ETHTOOL_A_BITSET_SIZE].U32()), nbits)
	val := words(tb[unix.ETHTOOL_A_BITSET_VALUE].Data)
	var mask []uint32
	if !noMask {
		mask = words(tb[unix.ETHTOOL_A_BITSET_MASK].Data)
	}
	// ethnl_bitmap32_update, then ethnl_bitmap32_clear for a list.
	for i := 0; i < changeBits; i++ {
		if mask != nil && !testBit(mask, i) {
			continue
		}
		mod = setBit(bitmap, i, testBit(val, i)) || mod
	}
	if noMask {
		for i := changeBits; i < nbits; i++ {
			mod = setBit(bitmap, i, false) || mod
		}
	}
	return mod, nil
}

func setBit(m []uint32, i int, on bool) (changed bool) {
	old := testBit(m, i)
	if on {
		m[i/32] |= 1 << (i % 32)
	} else {
		m[i/32] &^= 1 << (i % 32)
	}
	return old != on
}

func words(b []byte) []uint32 {
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w
}

// compactSanityChecks mirrors ethnl_compact_sanity_checks.
func compactSanityChecks(nbits int, nest nlattr.Attr, tb []nlattr.Attr) error {
	noMask := tb[unix.ETHTOOL_A_BITSET_NOMASK].Present()
	size, value, mask := tb[unix.ETHTOOL_A_BITSET_SIZE], tb[unix.ETHTOOL_A_BITSET_VALUE], tb[unix.ETHTOOL_A_BITSET_MASK]
	switch {
	case noMask && mask.Present():
		return nlattr.AttrError(unix.EINVAL, mask, "mask not allowed in list bitset")
	case !size.Present():
		return nlattr.AttrError(unix.EINVAL, nest, "missing size in compact bitset")
	case !value.Present():
		return nlattr.AttrError(unix.EINVAL, nest, "missing value in compact bitset")
	case !noMask && !mask.Present():
		return nlattr.AttrError(unix.EINVAL, nest, "missing mask in compact nonlist bitset")
	}
	attrBits := int(size.U32())
	nbytes := Words(attrBits) * 4
	if len(value.Data) != nbytes {
		return nlattr.AttrError(unix.EINVAL, value, "bitset value length does not match size")
	}
	if mask.Present() && len(mask.Data) != nbytes {
		return nlattr.AttrError(unix.EINVAL, mask, "bitset mask length does not match size")
	}
	if attrBits <= nbits {
		return nil
	}
	test := value
	if !noMask {
		test = mask
	}
	w := words(test.Data)
	for i := nbits; i < attrBits; i++ {
		if testBit(w, i) {
			return nlattr.AttrError(unix.EINVAL, test, "cannot modify bits past kernel bitset size")
		}
	}
	return nil
}

// updateVerbose mirrors ethnl_update_bitset32_verbose.
func updateVerbose(msg []byte, bitmap []uint32, nbits int, tb []nlattr.Attr, names []string) (bool, error) {
	if v := tb[unix.ETHTOOL_A_BITSET_VALUE]; v.Present() {
		return false, nlattr.AttrError(unix.EINVAL, v, "value only allowed in compact bitset")
	}
	if m := tb[unix.ETHTOOL_A_BITSET_MASK]; m.Present() {
		return false, nlattr.AttrError(unix.EINVAL, m, "mask only allowed in compact bitset")
	}
	noMask := tb[unix.ETHTOOL_A_BITSET_NOMASK].Present()
	var saved []uint32
	if noMask {
		saved = append([]uint32(nil), bitmap[:Words(nbits)]...)
		for i := 0; i < nbits; i++ {
			setBit(bitmap, i, false)
		}
	}
	mod := false
	it := nlattr.NestedIter(msg, tb[unix.ETHTOOL_A_BITSET_BITS])
	for it.Next() {
		bit := it.Attr()
		if bit.Type() != unix.ETHTOOL_A_BITSET_BITS_BIT {
			return false, nlattr.AttrError(unix.EINVAL, bit,
				"only ETHTOOL_A_BITSET_BITS_BIT allowed in ETHTOOL_A_BITSET_BITS")
		}
		idx, val, err := parseBit(msg, bit, nbits, noMask, names)
		if err != nil {
			return false, err
		}
		if setBit(bitmap, idx, val) && !noMask {
			mod = true
		}
	}
	if noMask {
		for i := 0; i < nbits; i++ {
			if testBit(saved, i) != testBit(bitmap, i) {
				mod = true
			}
		}
	}
	return mod, nil
}

// parseBit mirrors ethnl_parse_bit.
func parseBit(msg []byte, bit nlattr.Attr, nbits int, isList bool, names []string) (int, bool, error) {
	tb, err := nlattr.ParseNested(msg, bit, bitPolicy)
	if err != nil {
		return 0, false, err
	}
	index, name := tb[unix.ETHTOOL_A_BITSET_BIT_INDEX], tb[unix.ETHTOOL_A_BITSET_BIT_NAME]
	var idx int
	switch {
	case index.Present():
		i := index.U32()
		if i >= uint32(nbits) {
			return 0, false, nlattr.AttrError(unix.EOPNOTSUPP, index, "bit index too high")
		}
		idx = int(i)
		// strncmp(attr, names[idx], nla_len): compares up to the attribute's
		// NUL, i.e. the whole name.
		if name.Present() && idx < len(names) && name.Str() != gstring(names[idx]) {
			return 0, false, nlattr.AttrError(unix.EINVAL, bit, "bit index and name mismatch")
		}
	case name.Present():
		idx = nameToIndex(names, nbits, name.Str())
		if idx < 0 {
			return 0, false, nlattr.AttrError(unix.EOPNOTSUPP, name, "bit name not found")
		}
	default:
		return 0, false, nlattr.AttrError(unix.EINVAL, bit, "neither bit index nor name specified")
	}
	return idx, isList || tb[unix.ETHTOOL_A_BITSET_BIT_VALUE].Present(), nil
}

// gstring is a name as stored in a driver's ETH_GSTRING_LEN array.
func gstring(s string) string {
	if len(s) > GStringLen {
		return s[:GStringLen]
	}
	return s
}

// nameToIndex mirrors ethnl_name_to_idx: the first name equal in its first 32
// characters, for a request name of at most 32 characters.
func nameToIndex(names []string, n int, name string) int {
	if len(name) > GStringLen {
		return -1
	}
	for i := 0; i < n && i < len(names); i++ {
		if gstring(names[i]) == name {
			return i
		}
	}
	return -1
}

// Bit is one bit of a decoded bitset.
type Bit struct {
	Index int
	Name  string // "" when the sender gave no name
	On    bool
}

// Bitset is a decoded ETHTOOL_A_*_FLAGS-style bitset.
type Bitset struct {
	Size    int
	NoMask  bool // a list: the listed/set bits are the value
	Compact bool
	// Value and Mask are the compact words (Mask nil for a list).
	Value, Mask []uint32
	// Bits are the verbose bits in message order.
	Bits []Bit
}

// DecodeBitset decodes the payload of a bitset nest as sent by the kernel or
// by manad, in either form. It never panics; malformed input gives an error.
func DecodeBitset(payload []byte) (Bitset, error) {
	var bs Bitset
	it := nlattr.NewIter(payload, 0, len(payload))
	for it.Next() {
		a := it.Attr()
		switch a.Type() {
		case unix.ETHTOOL_A_BITSET_NOMASK:
			bs.NoMask = true
		case unix.ETHTOOL_A_BITSET_SIZE:
			if len(a.Data) != 4 {
				return Bitset{}, errors.New("ethtool: bitset size is not a u32")
			}
			bs.Size = int(a.U32())
		case unix.ETHTOOL_A_BITSET_VALUE:
			bs.Compact, bs.Value = true, words(a.Data)
		case unix.ETHTOOL_A_BITSET_MASK:
			bs.Compact, bs.Mask = true, words(a.Data)
		case unix.ETHTOOL_A_BITSET_BITS:
			bits := nlattr.NewIter(a.Data, 0, len(a.Data))
			for bits.Next() {
				bit, err := decodeBit(bits.Attr().Data)
				if err != nil {
					return Bitset{}, err
				}
				bs.Bits = append(bs.Bits, bit)
			}
		}
	}
	if it.Rem() > 0 {
		return Bitset{}, errors.New("ethtool: malformed bitset attributes")
	}
	return bs, nil
}

func decodeBit(b []byte) (Bit, error) {
	bit := Bit{Index: -1}
	it := nlattr.NewIter(b, 0, len(b))
	for it.Next() {
		a := it.Attr()
		switch a.Type() {
		case unix.ETHTOOL_A_BITSET_BIT_INDEX:
			if len(a.Data) != 4 {
				return Bit{}, errors.New("ethtool: bit index is not a u32")
			}
			bit.Index = int(a.U32())
		case unix.ETHTOOL_A_BITSET_BIT_NAME:
			bit.Name = a.Str()
		case unix.ETHTOOL_A_BITSET_BIT_VALUE:
			bit.On = true
		}
	}
	return bit, nil
}

// List returns the bits of a decoded bitset in order. For a compact value/mask
// bitset these are the bits in the mask; for a list, the bits set in the
// value (all with On). Verbose bits are returned as sent, except that in a
// list every listed bit is On. names, if given, name bits that carry none.
func (bs Bitset) List(names []string) []Bit {
	name := func(i int, n string) string {
		if n == "" && i >= 0 && i < len(names) {
			return names[i]
		}
		return n
	}
	var out []Bit
	if !bs.Compact {
		for _, b := range bs.Bits {
			b.Name = name(b.Index, b.Name)
			if bs.NoMask {
				b.On = true
			}
			out = append(out, b)
		}
		return out
	}
	sel := bs.Mask
	if bs.NoMask || sel == nil {
		sel = bs.Value
	}
	for i := 0; i < min(bs.Size, 32*len(sel)); i++ {
		if testBit(sel, i) {
			out = append(out, Bit{Index: i, Name: name(i, ""), On: testBit(bs.Value, i)})
		}
	}
	return out
}
