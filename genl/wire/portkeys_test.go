package wire_test

import (
	"bytes"
	"net"
	"reflect"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// TestPortKeysCoverAttributes: every port attribute has one PortKey, and the rows agree with
// the tables that carry the attributes: a row has a flag exactly when PORT_NEW takes its
// attribute, the port JSON shows it under a key unless the row says where it shows instead,
// and keys are kebab case and unique. So a new PortAttr* (PortAttrMax moves with it) without
// its JSON key, or PORT_NEW's without its port add flag, fails here.
func TestPortKeysCoverAttributes(t *testing.T) {
	spec, reply, del := wire.PortSpecTable.Kinds(), wire.PortTable.Kinds(), wire.PortDelTable.Kinds()
	kebab := regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	rows := map[uint16]int{}
	shown, flags := map[string]uint16{}, map[string]uint16{}
	for _, k := range wire.PortKeys {
		rows[k.Attr]++
		_, inSpec := spec[k.Attr]
		_, inReply := reply[k.Attr]
		_, inDel := del[k.Attr]
		assert.Equal(t, inSpec, k.Spec != nil, "attribute %d: Spec set, PORT_NEW takes it: both or neither", k.Attr)
		assert.Equal(t, inSpec, k.Flag != wire.FlagNone, "attribute %d: a flag (or the argument) exactly when PORT_NEW takes it", k.Attr)
		assert.Equal(t, inReply, k.Info != nil, "attribute %d: Info set, the replies carry it: both or neither", k.Attr)
		assert.True(t, inSpec || inReply || inDel, "attribute %d is in no table", k.Attr)
		assert.Equal(t, k.HasFlag(), k.Help != "", "attribute %d: a flag has help, nothing else has", k.Attr)
		if k.Key != "" {
			assert.Regexp(t, kebab, k.Key, "attribute %d: the key is kebab case", k.Attr)
		}
		switch {
		case k.Shown():
			require.NotEmpty(t, k.Key, "attribute %d is shown without a key", k.Attr)
			assert.NotContains(t, shown, k.Key, "attribute %d: port JSON key %s twice", k.Attr, k.Key)
			shown[k.Key] = k.Attr
		default:
			assert.NotEmpty(t, k.Hidden, "attribute %d: neither in the port JSON nor says where it shows", k.Attr)
		}
		if k.HasFlag() {
			require.NotEmpty(t, k.Key, "attribute %d has a flag without a name", k.Attr)
			assert.NotContains(t, flags, k.Key, "attribute %d: flag --%s twice", k.Attr, k.Key)
			flags[k.Key] = k.Attr
		}
		assert.Same(t, &wire.PortKeys[len(rows)-1], wire.PortKeyByAttr(k.Attr), "PortKeyByAttr(%d)", k.Attr)
	}
	for a := uint16(1); a <= wire.PortAttrMax; a++ {
		assert.Equal(t, 1, rows[a], "PortKeys rows of attribute %d", a)
	}
	for a := range rows {
		assert.True(t, a >= 1 && a <= wire.PortAttrMax, "PortKeys has attribute %d, beyond 1..PortAttrMax", a)
	}
	for a := range spec {
		assert.NotZero(t, rows[a], "PORT_NEW's attribute %d has no PortKey", a)
	}
	for a := range reply {
		assert.NotZero(t, rows[a], "the replies' attribute %d has no PortKey", a)
	}
	assert.Nil(t, wire.PortKeyByAttr(wire.PortAttrMax+1))
}

// specTypes are the types PortKey.Spec points to, by PortFlag (as PortFlag documents them).
var specTypes = map[wire.PortFlag]reflect.Type{
	wire.FlagArg:       reflect.TypeFor[*string](),
	wire.FlagString:    reflect.TypeFor[*string](),
	wire.FlagUint:      reflect.TypeFor[*uint32](),
	wire.FlagBool:      reflect.TypeFor[*bool](),
	wire.FlagDefaultOn: reflect.TypeFor[**bool](),
	wire.FlagMAC:       reflect.TypeFor[*net.HardwareAddr](),
	wire.FlagPageSize:  reflect.TypeFor[*uint32](),
	wire.FlagBytes:     reflect.TypeFor[*uint64](),
	wire.FlagDuration:  reflect.TypeFor[*uint64](),
	wire.FlagPrivFlags: reflect.TypeFor[*uint32](),
}

// TestPortKeysAccessors: a row's Spec and Info point to the very field that PortSpecTable and
// PortTable carry in the row's attribute (the row and the tables name each field apart), with
// the type its Flag says: a value set through the row changes that attribute and no other.
func TestPortKeysAccessors(t *testing.T) {
	for _, k := range wire.PortKeys {
		if k.Spec != nil {
			var s wire.PortSpec
			p := k.Spec(&s)
			assert.Equal(t, specTypes[k.Flag], reflect.TypeOf(p), "attribute %d: Spec's type for its flag", k.Attr)
			var n uint64
			fill(reflect.ValueOf(p).Elem(), &n)
			var b nlattr.Builder
			wire.PortSpecTable.Put(&b, &s)
			assert.Equal(t, []uint16{k.Attr}, attrTypes(b.B), "attribute %d: PORT_NEW's attributes with only the row's field set", k.Attr)
		}
		if k.Info != nil {
			var zero, set wire.PortInfo
			var n uint64
			fill(reflect.ValueOf(k.Info(&set)).Elem(), &n)
			var zb, sb nlattr.Builder
			wire.PortTable.Put(&zb, &zero)
			wire.PortTable.Put(&sb, &set)
			assert.Equal(t, []uint16{k.Attr}, changedAttrs(zb.B, sb.B), "attribute %d: the reply's attributes that change with the row's field", k.Attr)
		}
	}
}

// attrTypes lists the types of the attributes in data, in order.
func attrTypes(data []byte) []uint16 {
	var out []uint16
	for it := nlattr.NewIter(data, 0, len(data)); it.Next(); {
		out = append(out, it.Attr().Type())
	}
	return out
}

// changedAttrs lists the types of the attributes whose payload differs between a and b, or
// that only one of them has, in type order.
func changedAttrs(a, b []byte) []uint16 {
	av, bv := attrPayloads(a), attrPayloads(b)
	var out []uint16
	for t := range uint16(wire.PortAttrMax + 1) {
		x, inA := av[t]
		y, inB := bv[t]
		if inA != inB || !bytes.Equal(x, y) {
			out = append(out, t)
		}
	}
	return out
}

// attrPayloads returns the payload of each attribute of data by type.
func attrPayloads(data []byte) map[uint16][]byte {
	m := map[uint16][]byte{}
	for it := nlattr.NewIter(data, 0, len(data)); it.Next(); {
		m[it.Attr().Type()] = it.Attr().Data
	}
	return m
}

// TestPortKeysTypedFields: SpecField and InfoField reach the row's fields, typed, and refuse
// (panic, at table-building time) an attribute without the field or a wrong type.
func TestPortKeysTypedFields(t *testing.T) {
	var s wire.PortSpec
	var p wire.PortInfo
	assert.Same(t, &s.MTU, wire.SpecField[uint32](wire.PortAttrMTU)(&s))
	assert.Same(t, &s.Offload, wire.SpecField[*bool](wire.PortAttrOffload)(&s))
	assert.Same(t, &p.NetNSName, wire.InfoField[string](wire.PortAttrNetNS)(&p))
	assert.Same(t, &p.Device.Name, wire.InfoField[string](wire.PortAttrDevName)(&p))
	assert.PanicsWithValue(t, "wire: port attribute 11's request field is a *uint32, not a *uint64",
		func() { wire.SpecField[uint64](wire.PortAttrMTU) })
	assert.PanicsWithValue(t, "wire: PORT_NEW takes no port attribute 12", func() { wire.SpecField[uint32](wire.PortAttrMinMTU) })
	assert.PanicsWithValue(t, "wire: replies carry no port attribute 36", func() { wire.InfoField[bool](wire.PortAttrNetNSToo) })
	assert.PanicsWithValue(t, "wire: replies carry no port attribute 999", func() { wire.InfoField[bool](999) })
	assert.PanicsWithValue(t, "wire: port attribute 33's reply field is a *string, not a *bool", func() { wire.InfoField[bool](wire.PortAttrRxAlloc) })
}
