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
		{ethtoolMsgs{}.PrivFlagsSet(), wire.PrivFlagsSetTable.Kinds()},
		{ethtoolMsgs{}.FeaturesSet(), wire.FeaturesSetTable.Kinds()},
		{ethtoolMsgs{}.RingsSet(), wire.RingsSetTable.Kinds()},
		{ethtoolMsgs{}.ChannelsSet(), wire.ChannelsSetTable.Kinds()},
		{netdevMsgs{}.NAPISet(), wire.NetdevNAPISetTable.Kinds()},
		{ethtoolMsgs{}.CoalesceSet(), wire.CoalesceSetTable.Kinds()},
		{ethtoolMsgs{}.CoalesceSet(), wire.CoalesceParamsTable.Kinds()},
	} {
		require.NotEmpty(t, tc.kinds, tc.op.name)
		for typ, k := range tc.kinds {
			want, ok := kindOf[k]
			require.True(t, ok, "%s attribute %d: kind %d", tc.op.name, typ, k)
			assert.Equal(t, want, tc.op.policy.Policy(typ).Kind, "%s attribute %d", tc.op.name, typ)
		}
	}
}

// Message types of the opsOf tests: each declares something opsOf refuses.
type (
	notAMessage  struct{}
	twoOfACmd    struct{}
	twoOfAName   struct{}
	someMessages struct{}
)

func (notAMessage) Get() op             { return op{cmd: 1, name: "get"} }
func (notAMessage) Helper() int         { return 0 }
func (twoOfACmd) Get() op               { return op{cmd: 1, name: "get"} }
func (twoOfACmd) Set() []op             { return []op{{cmd: 2, name: "set"}, {cmd: 1, name: "get-again"}} }
func (twoOfAName) Get() op              { return op{cmd: 1, name: "get"} }
func (twoOfAName) Set() op              { return op{cmd: 2, name: "get"} }
func (someMessages) A() op              { return op{cmd: 9, name: "nine"} }
func (someMessages) B() []op            { return []op{{cmd: 3, name: "three"}, {cmd: 1, name: "one"}} }
func (someMessages) C() op              { return op{cmd: 2, name: "two"} }
func (someMessages) helper() (op, bool) { return op{}, false }

// TestOpsOf: a family's ops are its message type's exported methods, in command order whatever
// the methods' names; a method of another signature, two ops of one command and two of one name
// are refused, saying which.
func TestOpsOf(t *testing.T) {
	var cmds []uint8
	for _, o := range opsOf(someMessages{}) {
		cmds = append(cmds, o.cmd)
	}
	assert.Equal(t, []uint8{1, 2, 3, 9}, cmds)
	_ = someMessages{}.helper // unexported methods are not messages

	for _, tc := range []struct {
		msgs any
		want string
	}{
		{notAMessage{}, "genl: genl.notAMessage.Helper is a func() int, not a message (func() op or func() []op)"},
		{twoOfACmd{}, "genl: genl.twoOfACmd declares command 1 twice (get, get-again)"},
		{twoOfAName{}, `genl: genl.twoOfAName declares two ops named "get"`},
	} {
		assert.PanicsWithValue(t, tc.want, func() { opsOf(tc.msgs) })
	}
}
