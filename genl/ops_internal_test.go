package genl

import (
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpDrivers: the driver op each message names is a Backend op, and every Backend op is
// named by a message, but for the lookups every message uses and the two that stand in for
// another (DeletePortNetNS for port-del with NETNS_TOO, NetdevViews for NetdevPort).
func TestOpDrivers(t *testing.T) {
	s, err := NewServer(ServerConfig{Backend: NewMemBackend().Ops()})
	require.NoError(t, err)
	bt := reflect.TypeFor[Backend]()
	named := map[string]bool{"Devices": true, "DeviceByIndex": true, "DeviceByName": true,
		"DeletePortNetNS": true, "NetdevViews": true}
	for _, f := range s.familyList() {
		for _, o := range f.ops {
			for _, d := range []string{o.driver, o.dumpDriver} {
				if d == "" {
					continue
				}
				ft, ok := bt.FieldByName(d)
				if assert.True(t, ok, "%s %s names driver op %q, which Backend has not", f.name, o.name, d) {
					assert.Equal(t, reflect.Func, ft.Type.Kind(), "%s %s: Backend.%s", f.name, o.name, d)
				}
				named[d] = true
			}
		}
	}
	for i := range bt.NumField() {
		assert.True(t, named[bt.Field(i).Name], "Backend.%s is named by no message", bt.Field(i).Name)
	}
}

// TestNewServerNeedsLookups: a Backend without a device lookup is refused (EINVAL); every other
// op may be nil.
func TestNewServerNeedsLookups(t *testing.T) {
	for _, name := range []string{"Devices", "DeviceByIndex", "DeviceByName"} {
		b := NewMemBackend().Ops()
		reflect.ValueOf(&b).Elem().FieldByName(name).SetZero()
		_, err := NewServer(ServerConfig{Backend: b})
		assert.ErrorIs(t, err, unix.EINVAL, "without %s", name)
		assert.ErrorContains(t, err, name, "without %s", name)
	}
	mb := NewMemBackend()
	_, err := NewServer(ServerConfig{Backend: Backend{Devices: mb.Devices, DeviceByIndex: mb.DeviceByIndex, DeviceByName: mb.DeviceByName}})
	assert.NoError(t, err, "lookups only")
}

// TestSetTablesMatchPolicy: every attribute a SET request's wire table writes is admitted by the
// op's policy (the kernel's) with the table's type, so what the client sends passes the
// server's and the kernel's validation and the server reads it back with the same table.
func TestSetTablesMatchPolicy(t *testing.T) {
	kindOf := map[wire.Kind]nlattr.Kind{wire.KindU8: nlattr.U8, wire.KindBool: nlattr.U8, wire.KindU32: nlattr.U32, wire.KindNest: nlattr.Nested, wire.KindUint: nlattr.Uint}
	for _, tc := range []struct {
		op    op
		kinds map[uint16]wire.Kind
	}{
		{privFlagsSetOp, wire.PrivFlagsSetTable.Kinds()},
		{featuresSetOp, wire.FeaturesSetTable.Kinds()},
		{ringsSetOp, wire.RingsSetTable.Kinds()},
		{channelsSetOp, wire.ChannelsSetTable.Kinds()},
		{napiSetOp, wire.NetdevNAPISetTable.Kinds()},
		{coalesceSetOp, wire.CoalesceSetTable.Kinds()},
	} {
		require.NotEmpty(t, tc.kinds, tc.op.name)
		for typ, k := range tc.kinds {
			want, ok := kindOf[k]
			require.True(t, ok, "%s attribute %d: kind %d", tc.op.name, typ, k)
			assert.Equal(t, want, tc.op.policy.Policy(typ).Kind, "%s attribute %d", tc.op.name, typ)
		}
	}
}
