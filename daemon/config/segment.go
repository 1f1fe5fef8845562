package config

import (
	"fmt"
	"github.com/manad/manad/genl/wire"
	"math"
	"time"
)

// Defaults and bounds of a [[segment]] table.
const (
	// DefaultAgeingTime is how long a segment remembers an address without traffic from it,
	// as the Linux bridge does (ageing_time 300 s).
	DefaultAgeingTime = 300 * time.Second
	// MaxUplinks bounds a segment's uplinks.
	MaxUplinks = 16
	// MaxSegments bounds the segments defined by [[segment]] tables and SEGMENT_NEW together
	// (each is a switch with its own address table, state-file entry and notifications); ports
	// may still name segments no table defines.
	MaxSegments = 1024
	// MaxSegmentPorts bounds the ports on one segment, as BR_MAX_PORTS bounds a Linux bridge's:
	// every SEGMENT_GET reply and segment notification names them all, in one attribute nest
	// that holds at most 64 KiB.
	MaxSegmentPorts = 1024
)

// SegmentSpec is a [[segment]] table: settings of a wire segment and the kernel netdevs it is
// uplinked to. A segment that ports name but no table describes has the defaults and no uplink.
type SegmentSpec struct {
	Name    string
	Uplinks []UplinkSpec
	// MTU caps the payload of frames sent out of the uplinks (larger ones are dropped and
	// counted); 0: each uplink device's own MTU. The device's MTU applies when it is smaller.
	MTU int
	// AgeingTime is how long learned addresses last without traffic; 0 disables ageing.
	AgeingTime time.Duration
	// StormPPS limits the frames the segment floods (broadcast, multicast, unknown unicast)
	// per second; 0: no limit.
	StormPPS int64
	Line     int // of the [[segment]] header; 0 when not from the file
}

// UplinkSpec is one uplink: an existing netdev in a named network namespace.
type UplinkSpec struct {
	Dev   string // interface name
	NetNS string // named network namespace (/run/netns/NAME); "" = manad's own
	// Attach is the attachment mode (wire.UplinkAttach*): "" or "af_packet", "af_xdp", "auto".
	// It is a setting, not part of the uplink's identity (ID).
	Attach string
	// BusyPoll is how long the uplink's reader polls its socket after it found frames before
	// it parks (uplink.Config.BusyPoll): busy_poll, a duration string of whole microseconds,
	// 0 (off, the default) to maxBusyPoll, as the [daemon] table's busy_poll. A setting, not
	// part of the identity.
	BusyPoll time.Duration
}

// ID is the uplink's identity: its device and namespace. Two specs naming the same device are
// the same uplink whatever their attachment mode.
func (u UplinkSpec) ID() UplinkSpec { return UplinkSpec{Dev: u.Dev, NetNS: u.NetNS} }

// String names the uplink as logs and listings do: "vx0" or "hostA/vx0".
func (u UplinkSpec) String() string {
	if u.NetNS == "" {
		return u.Dev
	}
	return u.NetNS + "/" + u.Dev
}

// DefaultSegmentSpec returns the settings of a segment named name that no table describes.
func DefaultSegmentSpec(name string) SegmentSpec {
	return SegmentSpec{Name: name, AgeingTime: DefaultAgeingTime}
}

// Segment returns the spec of the segment named name: its table's, or the defaults.
func (c *Config) Segment(name string) SegmentSpec {
	for _, s := range c.Segments {
		if s.Name == name {
			s.Uplinks = append([]UplinkSpec(nil), s.Uplinks...)
			return s
		}
	}
	return DefaultSegmentSpec(name)
}

var segmentKeys = []string{"name", "uplinks", "mtu", "ageing_time", "storm_pps"}

func segmentLabel(name string, index int) string {
	if name != "" {
		return fmt.Sprintf("segment %q", name)
	}
	return fmt.Sprintf("segment #%d", index+1)
}

// segments reads the [[segment]] tables. Errors (collected in d): the same kinds as for ports,
// plus a device uplinked twice, within a segment or across segments.
func (d *decoder) segments(v any, at keyPath) []SegmentSpec {
	tables, ok := v.([]map[string]any)
	if !ok {
		d.errorf(at, "segment must be an array of tables ([[segment]]), not %s", describe(v))
		return nil
	}
	if len(tables) > MaxSegments {
		d.errorf(at.index(MaxSegments), "segment #%d: %d [[segment]] tables, at most %d", MaxSegments+1, len(tables), MaxSegments)
		return nil
	}
	var out []SegmentSpec
	names := map[string]int{}
	devs := map[UplinkSpec]string{}
	for i, t := range tables {
		sat := at.index(i)
		spec, ok := d.segment(t, sat, i)
		if spec.Name != "" {
			if first, dup := names[spec.Name]; dup {
				d.errorf(sat.key("name"), "%s: duplicate name (first defined at line %d)", segmentLabel(spec.Name, i), first)
				continue
			}
			names[spec.Name] = d.lines.line(sat.key("name"))
		}
		if !ok {
			continue
		}
		for j, u := range spec.Uplinks {
			if other, dup := devs[u.ID()]; dup {
				d.errorf(sat.key("uplinks").index(j), "%s: uplink %s already used by segment %q", segmentLabel(spec.Name, i), u, other)
				ok = false
				continue
			}
			devs[u.ID()] = spec.Name
		}
		if ok {
			out = append(out, spec)
		}
	}
	return out
}

// segment reads one [[segment]] table.
func (d *decoder) segment(t map[string]any, at keyPath, index int) (SegmentSpec, bool) {
	nerrs := len(d.errs)
	var name string
	if v, ok := t["name"]; !ok {
		d.errorf(at, "%s: name missing", segmentLabel("", index))
	} else if name, ok = typed[string](d, v, at.key("name"), segmentLabel("", index), "name", "a string"); ok {
		if msg := checkSegment(name); msg != "" {
			d.errorf(at.key("name"), "%s: name %q %s", segmentLabel("", index), name, msg)
			name = ""
		}
	}
	label := segmentLabel(name, index)
	spec := DefaultSegmentSpec(name)
	spec.Line = d.lines.line(at)
	for _, k := range d.sortedKeys(t, at) {
		kat, v := at.key(k), t[k]
		switch k {
		case "name":
		case "uplinks":
			spec.Uplinks = d.uplinks(v, kat, label)
		case "mtu":
			if n, ok := d.integer(v, kat, label, k); ok {
				if n < 68 || n > 65535 {
					d.errorf(kat, "%s: mtu %d out of range 68..65535", label, n)
				} else {
					spec.MTU = n
				}
			}
		case "ageing_time":
			if a, ok := d.ageing(v, kat, label); ok {
				spec.AgeingTime = a
			}
		case "storm_pps":
			if n, ok := typed[int64](d, v, kat, label, k, "an integer"); ok {
				if n < 0 {
					d.errorf(kat, "%s: storm_pps %d negative (0 means no limit)", label, n)
				} else {
					spec.StormPPS = n
				}
			}
		default:
			d.errorf(kat, "%s: unknown key %q%s", label, k, suggest(k, segmentKeys))
		}
	}
	return spec, len(d.errs) == nerrs
}

// ageing reads ageing_time: whole seconds, or a Go duration string ("5m", "90s"); 0 disables
// ageing.
func (d *decoder) ageing(v any, at keyPath, label string) (time.Duration, bool) {
	var a time.Duration
	switch v := v.(type) {
	case int64:
		if v < 0 || v > math.MaxInt64/int64(time.Second) {
			d.errorf(at, "%s: ageing_time %d out of range (seconds, 0 for never)", label, v)
			return 0, false
		}
		a = time.Duration(v) * time.Second
	case string:
		var err error
		if a, err = time.ParseDuration(v); err != nil || a < 0 {
			d.errorf(at, "%s: ageing_time %q invalid (want seconds or a duration like \"5m\")", label, v)
			return 0, false
		}
	default:
		d.errorf(at, "%s: ageing_time must be seconds or a duration string like \"5m\", not %s", label, describe(v))
		return 0, false
	}
	return a, true
}

// uplinks reads uplinks = [{dev = "vx0", netns = "hostA"}, …].
func (d *decoder) uplinks(v any, at keyPath, label string) []UplinkSpec {
	list, ok := v.([]any)
	if !ok {
		if tables, isTables := v.([]map[string]any); isTables {
			for _, t := range tables {
				list = append(list, t)
			}
		} else {
			d.errorf(at, "%s: uplinks must be an array of tables like [{dev = \"vx0\", netns = \"hostA\"}], not %s", label, describe(v))
			return nil
		}
	}
	if len(list) > MaxUplinks {
		d.errorf(at, "%s: %d uplinks, at most %d", label, len(list), MaxUplinks)
		return nil
	}
	var out []UplinkSpec
	seen := map[UplinkSpec]bool{}
	for i, e := range list {
		uat := at.index(i)
		t, ok := e.(map[string]any)
		if !ok {
			d.errorf(uat, "%s: uplink #%d must be a table like {dev = \"vx0\"}, not %s", label, i+1, describe(e))
			continue
		}
		var u UplinkSpec
		good := true
		for _, k := range d.sortedKeys(t, uat) {
			kat := uat.key(k)
			switch k {
			case "dev":
				if s, ok := typed[string](d, t[k], kat, label, "uplink dev", "a string"); !ok {
					good = false
				} else if msg := checkIfName(s); msg != "" {
					d.errorf(kat, "%s: uplink dev %q %s", label, s, msg)
					good = false
				} else {
					u.Dev = s
				}
			case "netns":
				if s, ok := typed[string](d, t[k], kat, label, "uplink netns", "a string"); !ok {
					good = false
				} else if msg := checkNetNS(s); msg != "" {
					d.errorf(kat, "%s: uplink netns %q %s", label, s, msg)
					good = false
				} else {
					u.NetNS = s
				}
			case "attach":
				if s, ok := typed[string](d, t[k], kat, label, "uplink attach", "a string"); !ok {
					good = false
				} else if !wire.ValidUplinkAttach(s) {
					d.errorf(kat, "%s: uplink attach %q is not one of \"auto\", \"af_packet\", \"af_xdp\"", label, s)
					good = false
				} else {
					u.Attach = s
				}
			case "busy_poll":
				if s, ok := typed[string](d, t[k], kat, label, "uplink busy_poll", `a duration string such as "50us"`); !ok {
					good = false
				} else if p, err := time.ParseDuration(s); err != nil {
					d.errorf(kat, "%s: uplink busy_poll %q is not a duration (want e.g. \"50us\", or \"0\" for none)", label, s)
					good = false
				} else if msg := checkUplinkBusyPoll(p); msg != "" {
					d.errorf(kat, "%s: uplink %s", label, msg)
					good = false
				} else {
					u.BusyPoll = p
				}
			default:
				d.errorf(kat, "%s: uplink #%d: unknown key %q%s", label, i+1, k, suggest(k, []string{"dev", "netns", "attach", "busy_poll"}))
				good = false
			}
		}
		if _, has := t["dev"]; !has {
			d.errorf(uat, "%s: uplink #%d: dev missing", label, i+1)
			good = false
		}
		if !good {
			continue
		}
		if seen[u.ID()] {
			d.errorf(uat, "%s: uplink %s listed twice", label, u)
			continue
		}
		seen[u.ID()] = true
		out = append(out, u)
	}
	return out
}

// checkUplinkBusyPoll returns what is wrong with an uplink's busy_poll d, or "": the [daemon]
// table's bounds, in the whole microseconds the kernel's SO_BUSY_POLL takes (an AF_XDP uplink
// passes it on; uplink.CheckBusyPoll is the same rule).
func checkUplinkBusyPoll(d time.Duration) string {
	if msg := checkBusyPoll(d); msg != "" {
		return msg
	}
	if d%time.Microsecond != 0 {
		return fmt.Sprintf("busy_poll %v is not whole microseconds", d)
	}
	return ""
}
