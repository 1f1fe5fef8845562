package wire

import "fmt"

// A port's attributes as people see them: PortKeys (manad.go) holds, for every PortAttr*, the
// kebab-case key manactl's port JSON shows it under and, for the attributes PORT_NEW takes, how
// manactl port add reads it from a flag of that name. manactl derives its port JSON and port
// add's flags from the rows, so a new port attribute is its constant, its rows in
// PortSpecTable and PortTable and one PortKey, here in the wire package that both sides link.

// PortFlag says how manactl port add reads the text of a port attribute's flag (--KEY) into
// PORT_NEW's request, and so which type PortKey.Spec points to.
type PortFlag uint8

// Kinds of PortFlag.
const (
	// FlagNone: no flag; PORT_NEW does not take the attribute (replies, PORT_DEL).
	FlagNone PortFlag = iota
	// FlagArg: the command's argument (port add NAME), not a flag. Spec: *string.
	FlagArg
	// FlagString: the text as it is. Spec: *string.
	FlagString
	// FlagUint: a decimal u32. Spec: *uint32.
	FlagUint
	// FlagBool: --KEY or --KEY=false, default false. Spec: *bool.
	FlagBool
	// FlagDefaultOn: a boolean whose default is on, sent only when given (--KEY=false turns it
	// off; OptBool). Spec: **bool.
	FlagDefaultOn
	// FlagMAC: six hex bytes, 02:00:00:00:00:01. Spec: *net.HardwareAddr.
	FlagMAC
	// FlagPageSize: a page size as the configuration writes it (4096, 4K, 4KiB). Spec: *uint32.
	FlagPageSize
	// FlagBytes: bytes, or a number with K, M, G, T (KiB…TiB), or unlimited (all ones), as the
	// configuration's memory_budget. Spec: *uint64.
	FlagBytes
	// FlagDuration: a Go duration (20us) or nanoseconds, sent as nanoseconds. Spec: *uint64.
	FlagDuration
	// FlagPrivFlags: private flag names, comma-separated, sent as their bitmap. Spec: *uint32.
	FlagPrivFlags
)

// PortKey is one port attribute as manactl shows it and port add asks for it. Every PortAttr*
// has exactly one row (a test holds PortKeys to PortSpecTable and PortTable).
type PortKey struct {
	Attr uint16 // PortAttr*
	// Key is the kebab-case name: manactl's port JSON key, and port add's flag (--Key) when
	// Flag takes one. Keys of attributes PORT_NEW takes are the configuration's [[port]] keys in
	// kebab case; the port's name shows as ethtool's ifname.
	Key string
	// Hidden, when not empty, says why the port JSON does not show the attribute (and where it
	// shows instead); the port JSON shows every other row that replies carry, under Key, in
	// PortKeys' order.
	Hidden string
	Flag   PortFlag // how port add reads --Key; FlagNone: port add does not send it
	Help   string   // port add's help for --Key
	// Spec points to the attribute's field of PORT_NEW's request (the type Flag names); nil
	// when PORT_NEW does not take it.
	Spec func(s *PortSpec) any
	// Info points to the attribute's field of a port reply: *uint32, *uint64, *string, *bool,
	// *net.HardwareAddr, *[]string, *[]Fault, *Coalesce, *[]byte or *RxBufLayout; nil when
	// replies do not carry it.
	Info func(p *PortInfo) any
}

// Shown reports whether manactl's port JSON shows k (under k.Key).
func (k *PortKey) Shown() bool { return k.Hidden == "" && k.Info != nil }

// HasFlag reports whether port add has a flag --k.Key for k.
func (k *PortKey) HasFlag() bool { return k.Flag != FlagNone && k.Flag != FlagArg }

// PortKeyByAttr returns the row of the port attribute attr, or nil.
func PortKeyByAttr(attr uint16) *PortKey {
	for i := range PortKeys {
		if PortKeys[i].Attr == attr {
			return &PortKeys[i]
		}
	}
	return nil
}

// SpecField returns a typed accessor of attr's field in PORT_NEW's request (its PortKey.Spec),
// for code that builds its own rows from PortKeys (the configuration's port schema). It
// panics, when the caller's table is built, if attr has no such field or the field is not a V:
// a programming error that any test run shows.
func SpecField[V any](attr uint16) func(*PortSpec) *V {
	k := PortKeyByAttr(attr)
	if k == nil || k.Spec == nil {
		panic(fmt.Sprintf("wire: PORT_NEW takes no port attribute %d", attr))
	}
	if _, ok := k.Spec(&PortSpec{}).(*V); !ok {
		panic(fmt.Sprintf("wire: port attribute %d's request field is a %T, not a %T", attr, k.Spec(&PortSpec{}), new(V)))
	}
	return func(s *PortSpec) *V { return k.Spec(s).(*V) }
}

// InfoField returns a typed accessor of attr's field in a port reply (its PortKey.Info), as
// SpecField does for the request; it panics likewise.
func InfoField[V any](attr uint16) func(*PortInfo) *V {
	k := PortKeyByAttr(attr)
	if k == nil || k.Info == nil {
		panic(fmt.Sprintf("wire: replies carry no port attribute %d", attr))
	}
	if _, ok := k.Info(&PortInfo{}).(*V); !ok {
		panic(fmt.Sprintf("wire: port attribute %d's reply field is a %T, not a %T", attr, k.Info(&PortInfo{}), new(V)))
	}
	return func(p *PortInfo) *V { return k.Info(p).(*V) }
}
