package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"time"

	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/internal/jsonobj"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// portField is one field of a port, described once: its name (the [[port]] key and the state
// file's key), whether it is hardware (a change makes it another port: sameHardware), the wire
// attribute that carries it, how the file's value is read into a PortSpec, how the state file
// keeps it, how two specs compare on it and how PORT_NEW and the replies carry it (carried: a
// carrier given the attribute reaches the fields of its wire.PortKeys row, whose Key is also
// manactl's JSON key and port add flag, the [[port]] key in kebab case). The TOML parser (keys
// and their suggestions), the state file's spec, sameHardware, the wire conversions
// (PortSpec.WireSpec, Info, SpecFromWire) and, through PortFields, manactl's round-trip and flag
// tests are derived from portFields, so a field added there is parsed, saved, compared and
// carried everywhere, and one missing in a layer fails a test. Defaults are DefaultPortSpec's.
//
// Meaning (ranges, the page sizes, the rx_cqe_frames rule) is not checked here but once, by
// PortSpec.problems with the port model's rules, whatever the value came from: the file, the
// state file or a port-add request. A field's toml only checks what the type of its TOML value
// cannot say (a name that is not a rule, a size that is not a number). The fields written as
// text (mac, rule, rx_alloc, xdp) are built by text from one textual each: one parser, one
// format and one message for the file, the state file and PORT_NEW.
type portField struct {
	key      string
	alias    string // an older state-file key still read, never written; load is told when it was
	hardware bool
	attr     uint16 // wire.PortAttr*: PORT_NEW's and the replies' attribute (every field has one)
	// model is the port model's field (vnic.Field) whose rule judges the value, as vnic.Check
	// names it when it refuses one (checkedBy): its errors are reported under this key.
	model vnic.Field

	// toml reads the file's value v of the key at at into s; false (after d.errorf) when it is
	// unusable.
	toml func(d *decoder, v any, at keyPath, label string, s *PortSpec) bool
	// save is the state file's value (marshalled by encoding/json).
	save func(s *PortSpec) any
	// load reads the state file's value into s; fromAlias when it was under alias.
	load func(raw json.RawMessage, fromAlias bool, s *PortSpec) error
	// equal reports whether a and b agree on the field.
	equal func(a, b *PortSpec) bool
	// toWire writes the field into PORT_NEW's request w and into a port's reply i.
	toWire func(s *PortSpec, w *wire.PortSpec, i *wire.PortInfo)
	// fromWire sets the field from a request; one that leaves it out (its zero value, see
	// wire.PortSpecTable) keeps DefaultPortSpec's.
	fromWire func(w *wire.PortSpec, s *PortSpec) error
}

// onWire says how a V travels in PORT_NEW's request and in the replies.
type onWire[V any] struct {
	put func(v V, w *wire.PortSpec, i *wire.PortInfo)
	// get reads the request: given when it sets the field; an error (EINVAL, the file's words)
	// for a value the field cannot represent.
	get func(w *wire.PortSpec) (v V, given bool, err error)
}

// set sets *v from the request, when it gives the field.
func (o onWire[V]) set(w *wire.PortSpec, v *V) error {
	x, given, err := o.get(w)
	if given && err == nil {
		*v = x
	}
	return err
}

// textual is how the file and the state file write a V: as the string format returns and parse
// reads. what says, in the file's words, what is wrong with a string parse refused ("unknown
// rule \"x\" (want …)"): the one message of the file, the state file and a port-add request.
type textual[V any] struct {
	parse  func(string) (V, error)
	format func(V) string
	what   func(string) string
}

// wireText is a field whose wire value is its text (t.format); "" in a request is "not given",
// a string t.parse refuses is EINVAL with t.what, as the file says it.
func wireText[V any](t textual[V]) func(attr uint16) onWire[V] {
	return func(attr uint16) onWire[V] {
		req, rep := wire.SpecField[string](attr), wire.InfoField[string](attr)
		return onWire[V]{
			put: func(v V, w *wire.PortSpec, i *wire.PortInfo) { *req(w), *rep(i) = t.format(v), t.format(v) },
			get: func(w *wire.PortSpec) (V, bool, error) {
				str := *req(w)
				if str == "" {
					var zero V
					return zero, false, nil
				}
				v, err := t.parse(str)
				if err != nil {
					return v, false, invalid("%s: %s", portLabel(w.Name, -1), t.what(str))
				}
				return v, true, nil
			},
		}
	}
}

// wireMAC is a MAC carried as its bytes; none in a request is "not given".
func wireMAC(attr uint16) onWire[net.HardwareAddr] {
	req, rep := wire.SpecField[net.HardwareAddr](attr), wire.InfoField[net.HardwareAddr](attr)
	return onWire[net.HardwareAddr]{
		put: func(v net.HardwareAddr, w *wire.PortSpec, i *wire.PortInfo) {
			*req(w), *rep(i) = slices.Clone(v), slices.Clone(v)
		},
		get: func(w *wire.PortSpec) (net.HardwareAddr, bool, error) {
			return slices.Clone(*req(w)), len(*req(w)) != 0, nil
		},
	}
}

// carried returns f with its wire conversions: carry(f.attr) carries the value at p in
// PORT_NEW's request and the replies, in the fields of f.attr's wire.PortKeys row, so a row
// names its attribute once and never a field of wire.PortSpec or wire.PortInfo.
func carried[V any](f portField, p func(*PortSpec) *V, carry func(attr uint16) onWire[V]) portField {
	w := carry(f.attr)
	f.toWire = func(s *PortSpec, req *wire.PortSpec, rep *wire.PortInfo) { w.put(*p(s), req, rep) }
	f.fromWire = func(req *wire.PortSpec, s *PortSpec) error { return w.set(req, p(s)) }
	return f
}

// text returns the field of a V at p that the file and the state file write as text (t): a
// TOML string, a JSON string, carried in attr's fields as carry says. In the state file "" is
// the default (DefaultPortSpec's: older files, or a field with no value); equal compares two
// values.
func text[V any](key string, hardware bool, attr uint16, p func(*PortSpec) *V, t textual[V],
	equal func(a, b V) bool, carry func(attr uint16) onWire[V]) portField {
	return carried(portField{key: key, hardware: hardware, attr: attr,
		toml: func(d *decoder, v any, at keyPath, label string, s *PortSpec) bool {
			str, ok := typed[string](d, v, at, label, key, "a string")
			if !ok {
				return false
			}
			x, err := t.parse(str)
			if err != nil {
				d.errorf(at, "%s: %s", label, t.what(str))
				return false
			}
			*p(s) = x
			return true
		},
		save: func(s *PortSpec) any { return t.format(*p(s)) },
		load: func(raw json.RawMessage, _ bool, s *PortSpec) error {
			var str string
			if err := loadJSON(raw, &str); err != nil || str == "" {
				return err
			}
			x, err := t.parse(str)
			if err != nil {
				return errors.New(t.what(str))
			}
			*p(s) = x
			return nil
		},
		equal: func(a, b *PortSpec) bool { return equal(*p(a), *p(b)) },
	}, p, carry)
}

// checkedBy returns f judged by the port model's field m (portField.model).
func checkedBy(m vnic.Field, f portField) portField {
	f.model = m
	return f
}

// same is == for text's equal.
func same[V comparable](a, b V) bool { return a == b }

// The text forms of a port's text fields: each parser is the model's or the kernel's, each
// message the file's.
var (
	macText = textual[net.HardwareAddr]{parse: net.ParseMAC, format: net.HardwareAddr.String,
		what: func(s string) string {
			return fmt.Sprintf("mac %q invalid (want six hex bytes like \"02:00:00:00:00:01\")", s)
		}}
	ruleText = textual[rxbuf.Rule]{parse: rxbuf.ParseRule, format: rxbuf.Rule.String,
		what: func(s string) string { return fmt.Sprintf("unknown rule %q (want %s)", s, rulesWanted()) }}
	allocText = textual[rxbuf.Alloc]{parse: rxbuf.ParseAlloc, format: rxbuf.Alloc.String, what: rxAllocProblem}
	xdpText   = textual[vnic.XDPProgram]{parse: parseXDP, format: xdpName, what: xdpProblem}
)

// wireInt is an int field carried as a u32 (every count and size: the file's values fit an
// int32); 0 in a request is "not given".
func wireInt(attr uint16) onWire[int] {
	req, rep := wire.SpecField[uint32](attr), wire.InfoField[uint32](attr)
	return onWire[int]{
		put: func(v int, w *wire.PortSpec, i *wire.PortInfo) {
			*req(w), *rep(i) = uint32(max(v, 0)), uint32(max(v, 0))
		},
		get: func(w *wire.PortSpec) (int, bool, error) { return int(*req(w)), *req(w) != 0, nil },
	}
}

// wireSame is a field whose wire value is its own type; a request's zero value is "not given"
// unless always.
func wireSame[V comparable](always bool) func(attr uint16) onWire[V] {
	return func(attr uint16) onWire[V] {
		req, rep := wire.SpecField[V](attr), wire.InfoField[V](attr)
		return onWire[V]{
			put: func(v V, w *wire.PortSpec, i *wire.PortInfo) { *req(w), *rep(i) = v, v },
			get: func(w *wire.PortSpec) (V, bool, error) {
				var zero V
				return *req(w), always || *req(w) != zero, nil
			},
		}
	}
}

// wireOptBool is a boolean a request may leave out (nil).
func wireOptBool(attr uint16) onWire[bool] {
	req, rep := wire.SpecField[*bool](attr), wire.InfoField[bool](attr)
	return onWire[bool]{
		put: func(v bool, w *wire.PortSpec, i *wire.PortInfo) { *req(w), *rep(i) = &v, v },
		get: func(w *wire.PortSpec) (bool, bool, error) {
			if *req(w) == nil {
				return false, false, nil
			}
			return **req(w), true, nil
		},
	}
}

// wireNanos is a duration carried as a u64 of nanoseconds; one beyond math.MaxInt64 reads as
// negative, which Validate refuses as the file's negative value.
func wireNanos(attr uint16) onWire[time.Duration] {
	req, rep := wire.SpecField[uint64](attr), wire.InfoField[uint64](attr)
	return onWire[time.Duration]{
		put: func(v time.Duration, w *wire.PortSpec, i *wire.PortInfo) {
			*req(w), *rep(i) = uint64(max(v, 0)), uint64(max(v, 0))
		},
		get: func(w *wire.PortSpec) (time.Duration, bool, error) { return time.Duration(*req(w)), *req(w) != 0, nil },
	}
}

// wirePrivFlags is the private flags' bitmap, always given (a request's 0 is none on), whose
// reply carries the names of the bits that are on too (wire.PortAttrPrivFlagNames).
func wirePrivFlags(attr uint16) onWire[uint32] {
	req, rep := wire.SpecField[uint32](attr), wire.InfoField[uint32](attr)
	names := wire.InfoField[[]string](wire.PortAttrPrivFlagNames)
	return onWire[uint32]{
		put: func(v uint32, w *wire.PortSpec, i *wire.PortInfo) {
			*req(w), *rep(i), *names(i) = v, v, privflag.NamesOf(v)
		},
		get: func(w *wire.PortSpec) (uint32, bool, error) { return *req(w), true, nil },
	}
}

// wireRecycle is rx_recycle as wireOptBool carries it, in the one polarity of every layer.
func wireRecycle(attr uint16) onWire[vnic.Recycle] {
	on := wireOptBool(attr)
	return onWire[vnic.Recycle]{
		put: func(v vnic.Recycle, w *wire.PortSpec, i *wire.PortInfo) { on.put(v.On(), w, i) },
		get: func(w *wire.PortSpec) (vnic.Recycle, bool, error) {
			b, given, err := on.get(w)
			return vnic.RecycleIf(b), given, err
		},
	}
}

// wireMemory is memory_budget: bytes as a u64. The request's UnlimitedMemory is all ones (a u64
// of -1); a reply's is 0, vnic's.
func wireMemory(attr uint16) onWire[int64] {
	req, rep := wire.SpecField[uint64](attr), wire.InfoField[uint64](attr)
	return onWire[int64]{
		put: func(v int64, w *wire.PortSpec, i *wire.PortInfo) { *req(w), *rep(i) = uint64(v), uint64(max(v, 0)) },
		get: func(w *wire.PortSpec) (int64, bool, error) { return int64(*req(w)), *req(w) != 0, nil },
	}
}

// scalar returns the field of a comparable value at p, read from the file by read, kept in the
// state file as encoding/json writes a V and carried in attr's fields as carry says.
func scalar[V comparable](key string, hardware bool, attr uint16, p func(*PortSpec) *V,
	read func(d *decoder, v any, at keyPath, label, key string) (V, bool), carry func(attr uint16) onWire[V]) portField {
	return carried(portField{key: key, hardware: hardware, attr: attr,
		toml: func(d *decoder, v any, at keyPath, label string, s *PortSpec) bool {
			var ok bool
			*p(s), ok = read(d, v, at, label, key)
			return ok
		},
		save:  func(s *PortSpec) any { return *p(s) },
		load:  func(raw json.RawMessage, _ bool, s *PortSpec) error { return loadJSON(raw, p(s)) },
		equal: func(a, b *PortSpec) bool { return *p(a) == *p(b) },
	}, p, carry)
}

func readInt(d *decoder, v any, at keyPath, label, key string) (int, bool) {
	return d.integer(v, at, label, key)
}

func readBool(d *decoder, v any, at keyPath, label, key string) (bool, bool) {
	return typed[bool](d, v, at, label, key, "a boolean")
}

func readString(d *decoder, v any, at keyPath, label, key string) (string, bool) {
	return typed[string](d, v, at, label, key, "a string")
}

// loadJSON decodes a state-file value into *p.
func loadJSON[V any](raw json.RawMessage, p *V) error {
	var v V
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	*p = v
	return nil
}

// portFields are a port's fields, in the state file's order. Defaults are DefaultPortSpec's.
var portFields = []portField{
	carried(portField{key: "name", hardware: true, attr: wire.PortAttrDevName,
		// Read before the others (Parse's port), for the label of every message.
		toml:  func(*decoder, any, keyPath, string, *PortSpec) bool { return true },
		save:  func(s *PortSpec) any { return s.Name },
		load:  func(raw json.RawMessage, _ bool, s *PortSpec) error { return loadJSON(raw, &s.Name) },
		equal: func(a, b *PortSpec) bool { return a.Name == b.Name },
	}, func(s *PortSpec) *string { return &s.Name }, wireSame[string](true)),
	text("mac", true, wire.PortAttrMAC, func(s *PortSpec) *net.HardwareAddr { return &s.MAC }, macText, slices.Equal,
		wireMAC),
	scalar("netns", true, wire.PortAttrNetNS, func(s *PortSpec) *string { return &s.NetNS }, readString,
		wireSame[string](true)),
	scalar("segment", true, wire.PortAttrSegment, func(s *PortSpec) *string { return &s.Segment }, readString,
		wireSame[string](false)),
	scalar("persistent", true, wire.PortAttrPersistent, func(s *PortSpec) *bool { return &s.Persistent }, readBool,
		wireSame[bool](true)),
	scalar("offload", true, wire.PortAttrOffload, func(s *PortSpec) *bool { return &s.Offload }, readBool,
		wireOptBool),
	checkedBy(vnic.FieldPageSize, scalar("page_size", true, wire.PortAttrPageSize, func(s *PortSpec) *int { return &s.PageSize },
		func(d *decoder, v any, at keyPath, label, _ string) (int, bool) { return d.pageSize(v, at, label) },
		wireInt)),
	checkedBy(vnic.FieldRule, text("rule", true, wire.PortAttrRule, func(s *PortSpec) *rxbuf.Rule { return &s.Rule }, ruleText, same,
		wireText(ruleText))),
	checkedBy(vnic.FieldMaxMTU, scalar("max_mtu", true, wire.PortAttrMaxMTU, func(s *PortSpec) *int { return &s.MaxMTU }, readInt,
		wireInt)),
	checkedBy(vnic.FieldMaxQueues, scalar("max_queues", true, wire.PortAttrMaxQueues, func(s *PortSpec) *int { return &s.MaxQueues }, readInt,
		wireInt)),
	// The state file keeps bytes, -1 for unlimited (UnlimitedMemory).
	scalar("memory_budget", true, wire.PortAttrMemoryBudget, func(s *PortSpec) *int64 { return &s.MemoryBudget },
		func(d *decoder, v any, at keyPath, label, _ string) (int64, bool) { return d.memory(v, at, label) },
		wireMemory),
	checkedBy(vnic.FieldMTU, scalar("mtu", false, wire.PortAttrMTU, func(s *PortSpec) *int { return &s.MTU }, readInt,
		wireInt)),
	checkedBy(vnic.FieldQueues, scalar("queues", false, wire.PortAttrQueues, func(s *PortSpec) *int { return &s.Queues }, readInt,
		wireInt)),
	checkedBy(vnic.FieldRxRing, scalar("rx_ring", false, wire.PortAttrRxRing, func(s *PortSpec) *int { return &s.RxRing }, readInt,
		wireInt)),
	checkedBy(vnic.FieldTxRing, scalar("tx_ring", false, wire.PortAttrTxRing, func(s *PortSpec) *int { return &s.TxRing }, readInt,
		wireInt)),
	carried(portField{key: "priv_flags", attr: wire.PortAttrPrivFlags, model: vnic.FieldPrivFlags,
		toml: func(d *decoder, v any, at keyPath, label string, s *PortSpec) bool {
			var ok bool
			s.PrivFlags, ok = d.privFlags(v, at, label)
			return ok
		},
		save: func(s *PortSpec) any { return privflag.NamesOf(s.PrivFlags) },
		load: func(raw json.RawMessage, _ bool, s *PortSpec) error {
			var names []string
			if err := loadJSON(raw, &names); err != nil {
				return err
			}
			flags, err := privflag.Parse(names)
			if err != nil {
				return err
			}
			s.PrivFlags = flags
			return nil
		},
		equal: func(a, b *PortSpec) bool { return a.PrivFlags == b.PrivFlags },
	}, func(s *PortSpec) *uint32 { return &s.PrivFlags }, wirePrivFlags),
	// The wire's "" is no program, as a request that leaves xdp out: DefaultPortSpec's.
	checkedBy(vnic.FieldXDP, text("xdp", false, wire.PortAttrXDP, func(s *PortSpec) *vnic.XDPProgram { return &s.XDP }, xdpText, same,
		wireText(xdpText))),
	checkedBy(vnic.FieldRxAlloc, text("rx_alloc", true, wire.PortAttrRxAlloc, func(s *PortSpec) *rxbuf.Alloc { return &s.RxAlloc }, allocText, same,
		wireText(allocText))),
	// rx_recycle is the one polarity of the file, the state file, the wire, manactl's JSON and
	// the model (vnic.Hardware.RxRecycle, whose zero value is on); state files before it kept
	// rx_no_recycle, read in its own polarity.
	carried(portField{key: "rx_recycle", alias: "rx_no_recycle", hardware: true, attr: wire.PortAttrRxRecycle, model: vnic.FieldRxRecycle,
		toml: func(d *decoder, v any, at keyPath, label string, s *PortSpec) bool {
			on, ok := typed[bool](d, v, at, label, "rx_recycle", "a boolean")
			if ok {
				s.RxRecycle = vnic.RecycleIf(on)
			}
			return ok
		},
		save: func(s *PortSpec) any { return s.RxRecycle.On() },
		load: func(raw json.RawMessage, fromAlias bool, s *PortSpec) error {
			var b bool
			if err := loadJSON(raw, &b); err != nil {
				return err
			}
			s.RxRecycle = vnic.RecycleIf(b != fromAlias) // rx_no_recycle: !b; rx_recycle: b
			return nil
		},
		equal: func(a, b *PortSpec) bool { return a.RxRecycle == b.RxRecycle },
	}, func(s *PortSpec) *vnic.Recycle { return &s.RxRecycle }, wireRecycle),
	checkedBy(vnic.FieldSpeed, scalar("speed", true, wire.PortAttrSpeed, func(s *PortSpec) *int { return &s.Speed }, readInt,
		wireInt)),
	checkedBy(vnic.FieldMSIX, scalar("msix_vectors", true, wire.PortAttrMSIXVectors, func(s *PortSpec) *int { return &s.MSIXVectors },
		readInt, wireInt)),
	scalar("cqe_coalesce_8", true, wire.PortAttrCQECoalesce8, func(s *PortSpec) *bool { return &s.CQECoalesce8 }, readBool,
		wireSame[bool](true)),
	carried(portField{key: "rx_cqe_frames", attr: wire.PortAttrRxCQEFrames,
		toml: func(d *decoder, v any, at keyPath, label string, s *PortSpec) bool {
			n, ok := d.integer(v, at, label, "rx_cqe_frames")
			if ok && n < 0 {
				d.errorf(at, "%s: rx_cqe_frames %d not supported (want %s)", label, n, cqeFramesWanted(s.CQECoalesce8))
				return false
			}
			if ok {
				s.Coalesce.RxCQEFrames = uint32(n)
			}
			return ok
		},
		save:  func(s *PortSpec) any { return s.Coalesce.RxCQEFrames },
		load:  func(raw json.RawMessage, _ bool, s *PortSpec) error { return loadJSON(raw, &s.Coalesce.RxCQEFrames) },
		equal: func(a, b *PortSpec) bool { return a.Coalesce.RxCQEFrames == b.Coalesce.RxCQEFrames },
	}, func(s *PortSpec) *uint32 { return &s.Coalesce.RxCQEFrames }, wireSame[uint32](false)),
	scalar("napi_defer_hard_irqs", false, wire.PortAttrNAPIDeferIRQs, func(s *PortSpec) *uint32 { return &s.NAPI.DeferHardIRQs },
		func(d *decoder, v any, at keyPath, label, key string) (uint32, bool) {
			n, ok := d.integer(v, at, label, key)
			if ok && n < 0 {
				d.errorf(at, "%s: napi_defer_hard_irqs %d out of range 0..%d", label, n, math.MaxInt32)
				return 0, false
			}
			return uint32(n), ok
		},
		wireSame[uint32](true)),
	// The state file keeps the NAPI timeouts in nanoseconds, as sysfs does.
	scalar("gro_flush_timeout", false, wire.PortAttrGROFlushTimeout, func(s *PortSpec) *time.Duration { return &s.NAPI.GROFlushTimeout },
		func(d *decoder, v any, at keyPath, label, key string) (time.Duration, bool) {
			return d.napiTimeout(v, at, label, key)
		},
		wireNanos),
	scalar("irq_suspend_timeout", false, wire.PortAttrIRQSuspendTmo, func(s *PortSpec) *time.Duration { return &s.NAPI.IRQSuspendTimeout },
		func(d *decoder, v any, at keyPath, label, key string) (time.Duration, bool) {
			return d.napiTimeout(v, at, label, key)
		},
		wireNanos),
	// The kernel's per-device sysfs threaded.
	scalar("napi_threaded", false, wire.PortAttrNAPIThreaded, func(s *PortSpec) *bool { return &s.NAPI.Threaded }, readBool,
		wireSame[bool](true)),
}

// portFieldByKey returns the field whose key (or, with alias, older state-file key) is k.
func portFieldByKey(k string, alias bool) *portField {
	for i := range portFields {
		f := &portFields[i]
		if f.key == k || alias && f.alias != "" && f.alias == k {
			return f
		}
	}
	return nil
}

// portKeys are the keys a [[port]] table may have, for the suggestions of an unknown one.
var portKeys = func() []string {
	keys := make([]string, len(portFields))
	for i, f := range portFields {
		keys[i] = f.key
	}
	return keys
}()

// sameHardware reports whether two specs describe the same port apart from its settings: they
// agree on every hardware field of portFields.
func sameHardware(a, b PortSpec) bool {
	for _, f := range portFields {
		if f.hardware && !f.equal(&a, &b) {
			return false
		}
	}
	return true
}

// specJSON is a port's spec in the state file: each portField's value under its key. It is
// written in portFields' order.
type specJSON map[string]json.RawMessage

// newSpecJSON returns the state file's form of s.
func newSpecJSON(s *PortSpec) (*specJSON, error) {
	j := make(specJSON, len(portFields))
	for _, f := range portFields {
		raw, err := json.Marshal(f.save(s))
		if err != nil {
			return nil, fmt.Errorf("port %q: %s: %w", s.Name, f.key, err)
		}
		j[f.key] = raw
	}
	return &j, nil
}

// MarshalJSON writes the keys in portFields' order, so the file reads as the table does.
func (j specJSON) MarshalJSON() ([]byte, error) {
	var o jsonobj.Object
	for _, f := range portFields {
		if raw, ok := j[f.key]; ok {
			o.Add(f.key, raw)
		}
	}
	return o.Bytes(), nil
}

// unknownSpecKeyError is specJSON.spec's error for a key no portField has (nor as
// its older alias): a newer manad's field, which parseState reports as ErrStateNewer.
type unknownSpecKeyError struct{ key string }

func (e *unknownSpecKeyError) Error() string { return fmt.Sprintf("unknown key %q", e.key) }

// spec converts the state file's form back: a key it leaves out has DefaultPortSpec's value (so
// files from before a field existed load with its default), an older key (alias) is read in its
// own polarity. Only what cannot be represented at all is an error here: values out of range are
// Merge's business (they may be valid for another manad version). Errors: *unknownSpecKeyError
// for a key it does not know, else what the field's decoding says, prefixed by nothing (the
// caller names the port).
func (j specJSON) spec() (PortSpec, error) {
	for k := range j {
		if portFieldByKey(k, true) == nil {
			return PortSpec{}, &unknownSpecKeyError{k}
		}
	}
	var name string
	if raw, ok := j["name"]; ok {
		if err := json.Unmarshal(raw, &name); err != nil {
			return PortSpec{}, fmt.Errorf("name: %w", err)
		}
	}
	s := DefaultPortSpec(name)
	for _, f := range portFields {
		raw, ok := j[f.key]
		fromAlias := false
		if f.alias != "" {
			if old, has := j[f.alias]; has {
				if ok {
					return PortSpec{}, fmt.Errorf("%s and its older form %s both given", f.key, f.alias)
				}
				raw, ok, fromAlias = old, true, true
			}
		}
		if !ok {
			continue
		}
		if err := f.load(raw, fromAlias, &s); err != nil {
			return PortSpec{}, keyError(f.key, err)
		}
	}
	return s, nil
}

// keyError prefixes a decoding error with the key, unless the field's own message names it.
func keyError(key string, err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	if errors.As(err, &te) || errors.As(err, &se) {
		return fmt.Errorf("%s: %w", key, err)
	}
	return err
}

// WireSpec returns s as PORT_NEW's request carries it: every field of portFields (SpecFromWire
// gives s back).
func (s *PortSpec) WireSpec() wire.PortSpec {
	w, _ := s.toWire()
	return w
}

// toWire runs every row of portFields: the request's and the reply's fields of s.
func (s *PortSpec) toWire() (wire.PortSpec, wire.PortInfo) {
	var w wire.PortSpec
	var i wire.PortInfo
	for _, f := range portFields {
		f.toWire(s, &w, &i)
	}
	return w, i
}

// Info returns the reply a port created from s reports before anything changed: every field of
// portFields, its coalescing and RSS key. The daemon overwrites what the port's live state says
// (its settings, device, state flags, layout and memory).
func (s *PortSpec) Info() wire.PortInfo {
	_, i := s.toWire()
	i.Coalesce = wire.Coalesce(s.Coalesce)
	i.RSSKey = slices.Clone(s.RSSKey)
	if i.RSSKey == nil {
		i.RSSKey = slices.Clone(vnic.DefaultRSSKey[:])
	}
	return i
}

// SpecFromWire turns a port-add request into a spec: DefaultPortSpec(w.Name) with every field
// the request gives. Errors: EINVAL with the configuration file's message for a rule or rx_alloc
// it does not know; every other value is PortSpec.Validate's to check, with the file's messages
// too.
func SpecFromWire(w wire.PortSpec) (PortSpec, error) {
	s := DefaultPortSpec(w.Name)
	for _, f := range portFields {
		if err := f.fromWire(&w, &s); err != nil {
			return PortSpec{}, err
		}
	}
	return s, nil
}

// PortField describes one field of a port's schema to other layers (manactl's tests, tools).
type PortField struct {
	Key      string // the [[port]] key and the state file's
	JSONKey  string // manactl's port JSON key and port add's flag: Attr's wire.PortKey.Key
	Hardware bool   // a change makes it another port (a restart's comparison)
	Attr     uint16 // wire.PortAttr* of PORT_NEW's request and the replies
}

// PortFields returns every field of a port, in the schema's order.
func PortFields() []PortField {
	out := make([]PortField, len(portFields))
	for i, f := range portFields {
		out[i] = PortField{Key: f.key, JSONKey: wire.PortKeyByAttr(f.attr).Key, Hardware: f.hardware, Attr: f.attr}
	}
	return out
}
