package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// Parse parses a configuration file's contents; name is the file name errors carry.
//
// Errors: an *Error (or Errors, for several problems, ordered by line) matching
// errors.Is(err, unix.EINVAL), each naming the file and line: TOML syntax errors, unknown keys or
// tables, values of the wrong type, values the port model would refuse (out-of-range MTU, rings,
// queues; unsupported page size; unknown private flag, rule or XDP built-in), invalid names, two
// ports with one name or one MAC, an admin_group that does not exist.
func Parse(name string, data []byte) (*Config, error) {
	src := string(data)
	var tree map[string]any
	if _, err := toml.Decode(src, &tree); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: name, Line: pe.Position.Line, Msg: "invalid TOML: " + pe.Message}
		}
		return nil, &Error{File: name, Msg: "invalid TOML: " + err.Error()}
	}
	d := &decoder{file: name, lines: indexLines(src)}
	cfg := &Config{File: name, Daemon: DefaultDaemonConfig()}
	for _, k := range d.sortedKeys(tree, root) {
		at := root.key(k)
		switch k {
		case "daemon":
			d.daemon(tree[k], at, &cfg.Daemon)
		case "port":
			cfg.Ports = d.ports(tree[k], at)
		case "segment":
			cfg.Segments = d.segments(tree[k], at)
		default:
			if _, ok := tree[k].(map[string]any); ok {
				d.errorf(at, "unknown table [%s] (want [daemon], [[port]] or [[segment]])", k)
			} else {
				d.errorf(at, "unknown key %q (want [daemon], [[port]] or [[segment]])", k)
			}
		}
	}
	if err := result(d.errs); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decoder walks the tree BurntSushi/toml produced, checking types and values and collecting every
// problem with its line.
type decoder struct {
	file  string
	lines lineIndex
	errs  []*Error
}

func (d *decoder) errorf(at keyPath, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: d.lines.line(at), Msg: fmt.Sprintf(format, args...)})
}

// sortedKeys returns t's keys in file order, so problems are found in the order a reader meets them.
func (d *decoder) sortedKeys(t map[string]any, at keyPath) []string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(d.lines.line(at.key(a)), d.lines.line(at.key(b))), cmp.Compare(a, b))
	})
	return keys
}

// describe names a TOML value and its type for "must be X, not Y" messages.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case float64:
		return fmt.Sprintf("the float %v", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date/time"
	}
	return fmt.Sprintf("a %T", v)
}

// typed reads the field key of table label (at its path) as a T, or reports the type mismatch.
func typed[T any](d *decoder, v any, at keyPath, label, key, want string) (T, bool) {
	t, ok := v.(T)
	if !ok {
		d.errorf(at, "%s: %s must be %s, not %s", label, key, want, describe(v))
	}
	return t, ok
}

// integer reads an integer field that must fit an int32 (every count and size here does).
func (d *decoder) integer(v any, at keyPath, label, key string) (int, bool) {
	n, ok := typed[int64](d, v, at, label, key, "an integer")
	if !ok {
		return 0, false
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		d.errorf(at, "%s: %s %d out of range", label, key, n)
		return 0, false
	}
	return int(n), true
}

const daemonLabel = "daemon"

// daemon reads the [daemon] table into dc.
func (d *decoder) daemon(v any, at keyPath, dc *DaemonConfig) {
	t, ok := v.(map[string]any)
	if !ok {
		d.errorf(at, "daemon must be a table ([daemon]), not %s", describe(v))
		return
	}
	for _, k := range d.sortedKeys(t, at) {
		kat, v := at.key(k), t[k]
		switch k {
		case "socket":
			if s, ok := typed[string](d, v, kat, daemonLabel, k, "a string"); ok {
				if msg := checkSocket(s); msg != "" {
					d.errorf(kat, "daemon: %s", msg)
				} else {
					dc.Socket = s
				}
			}
		case "socket_mode":
			if m, ok := d.socketMode(v, kat); ok {
				dc.SocketMode = m
			}
		case "admin_group":
			if gid, ok := d.adminGroup(v, kat); ok {
				dc.AdminGroup, dc.AdminGID = fmt.Sprint(v), gid
			}
		case "state_dir":
			if s, ok := typed[string](d, v, kat, daemonLabel, k, "a string"); ok {
				if msg := checkStateDir(s); msg != "" {
					d.errorf(kat, "daemon: %s", msg)
				} else {
					dc.StateDir = filepath.Clean(s)
				}
			}
		case "log_level":
			if s, ok := typed[string](d, v, kat, daemonLabel, k, "a string"); ok {
				if l, err := ParseLogLevel(s); err != nil {
					d.errorf(kat, "daemon: log_level %q unknown (want debug, info, warn or error)", s)
				} else {
					dc.LogLevel = l
				}
			}
		case "log_format":
			if s, ok := typed[string](d, v, kat, daemonLabel, k, "a string"); ok {
				if s != "text" && s != "json" {
					d.errorf(kat, "daemon: log_format %q unknown (want text or json)", s)
				} else {
					dc.LogFormat = s
				}
			}
		case "metrics_listen":
			if s, ok := typed[string](d, v, kat, daemonLabel, k, "a string"); ok {
				if msg := checkMetricsListen(s); msg != "" {
					d.errorf(kat, "daemon: %s", msg)
				} else {
					dc.MetricsListen = s
				}
			}
		case "max_connections", "max_connections_per_uid":
			if n, ok := d.integer(v, kat, daemonLabel, k); ok {
				if msg := checkConnections(k, n); msg != "" {
					d.errorf(kat, "daemon: %s", msg)
				} else if k == "max_connections" {
					dc.MaxConnections = n
				} else {
					dc.MaxConnectionsPerUID = n
				}
			}
		case "idle_timeout":
			d.duration(v, kat, k, `"5m"`, `"30s" or "5m"`, checkIdleTimeout, &dc.IdleTimeout)
		case "busy_poll":
			d.duration(v, kat, k, `"200us"`, `"200us", or "0" for none`, checkBusyPoll, &dc.BusyPoll)
		case "max_pollers":
			if n, ok := d.integer(v, kat, daemonLabel, k); ok {
				if msg := checkMaxPollers(n); msg != "" || n < 0 {
					d.errorf(kat, "daemon: %s", cmp.Or(msg, fmt.Sprintf("max_pollers %d out of range 0..%d", n, maxPollersAllowed())))
				} else {
					dc.MaxPollers = n
				}
			}
		default:
			d.errorf(kat, "daemon: unknown key %q%s", k, suggest(k, daemonKeys))
		}
	}
}

var daemonKeys = []string{"socket", "socket_mode", "admin_group", "state_dir", "log_level", "log_format", "metrics_listen",
	"max_connections", "max_connections_per_uid", "idle_timeout", "busy_poll", "max_pollers"}

// duration sets *into from [daemon] key k, a Go duration string, when check finds nothing
// wrong with it; example is what a wrong type's message shows, want what a bad string's does.
func (d *decoder) duration(v any, at keyPath, k, example, want string, check func(time.Duration) string, into *time.Duration) {
	s, ok := typed[string](d, v, at, daemonLabel, k, "a duration string such as "+example)
	if !ok {
		return
	}
	t, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.errorf(at, "daemon: %s %q is not a duration (want e.g. %s)", k, s, want)
	case check(t) != "":
		d.errorf(at, "daemon: %s", check(t))
	default:
		*into = t
	}
}

// socketMode accepts permission bits as a TOML integer (write it in octal: 0o660) or an octal
// string ("0660").
func (d *decoder) socketMode(v any, at keyPath) (fs.FileMode, bool) {
	var n uint64
	switch v := v.(type) {
	case int64:
		if v < 0 || v > 0o777 {
			d.errorf(at, "daemon: socket_mode %d out of range (write it in octal: 0o660 or \"0660\")", v)
			return 0, false
		}
		n = uint64(v)
	case string:
		var err error
		if n, err = strconv.ParseUint(strings.TrimPrefix(v, "0o"), 8, 32); err != nil || n > 0o777 {
			d.errorf(at, "daemon: socket_mode %q is not permission bits in octal (want e.g. \"0660\")", v)
			return 0, false
		}
	default:
		d.errorf(at, "daemon: socket_mode must be an octal string or integer, not %s", describe(v))
		return 0, false
	}
	return fs.FileMode(n), true
}

// adminGroup accepts a gid (integer or string of digits) or a group name, which must exist.
func (d *decoder) adminGroup(v any, at keyPath) (int, bool) {
	const maxGID = math.MaxUint32 - 1 // (gid_t)-1 means "no group"
	switch v := v.(type) {
	case int64:
		if v < 0 || v > maxGID {
			d.errorf(at, "daemon: admin_group %d is not a valid gid", v)
			return 0, false
		}
		return int(v), true
	case string:
		if v == "" {
			return NoAdminGroup, true
		}
		if n, err := strconv.ParseUint(v, 10, 32); err == nil && n <= maxGID {
			return int(n), true
		}
		g, err := user.LookupGroup(v)
		if err != nil {
			d.errorf(at, "daemon: admin_group %q: no such group", v)
			return 0, false
		}
		gid, err := strconv.Atoi(g.Gid)
		if err != nil {
			d.errorf(at, "daemon: admin_group %q has a non-numeric gid %q", v, g.Gid)
			return 0, false
		}
		return gid, true
	}
	d.errorf(at, "daemon: admin_group must be a group name or gid, not %s", describe(v))
	return 0, false
}

// ports reads the [[port]] tables (or an array of inline tables).
func (d *decoder) ports(v any, at keyPath) []PortSpec {
	var tables []map[string]any
	switch v := v.(type) {
	case []map[string]any:
		tables = v
	case []any:
		for i, e := range v {
			t, ok := e.(map[string]any)
			if !ok {
				d.errorf(at.index(i), "port #%d must be a table, not %s", i+1, describe(e))
				return nil
			}
			tables = append(tables, t)
		}
	default:
		d.errorf(at, "port must be an array of tables ([[port]]), not %s", describe(v))
		return nil
	}
	specs := make([]PortSpec, 0, len(tables))
	names := map[string]int{} // name → line of its name key
	macs := map[string]string{}
	perSegment := map[string]int{}
	for i, t := range tables {
		pat := at.index(i)
		spec, ok := d.port(t, pat, i)
		label := portLabel(spec.Name, i)
		// A port with other problems still claims its name, so that a later duplicate is
		// reported too: every problem of the file at once.
		if spec.Name != "" {
			if first, dup := names[spec.Name]; dup {
				d.errorf(pat.key("name"), "%s: duplicate name (first defined at line %d)", label, first)
				continue
			}
			names[spec.Name] = d.lines.line(pat.key("name"))
		}
		if !ok {
			continue
		}
		if other, dup := macs[string(spec.MAC)]; dup {
			d.errorf(pat.key("mac"), "%s: mac %s already used by port %q", label, spec.MAC, other)
			continue
		}
		macs[string(spec.MAC)] = spec.Name
		if perSegment[spec.Segment]++; perSegment[spec.Segment] > MaxSegmentPorts {
			d.errorf(pat, "%s: segment %q has %d ports already, at most %d (as a Linux bridge)", label, spec.Segment, MaxSegmentPorts, MaxSegmentPorts)
			continue
		}
		specs = append(specs, spec)
	}
	return specs
}

// port reads one [[port]] table, the index-th, and validates it as a whole.
func (d *decoder) port(t map[string]any, at keyPath, index int) (PortSpec, bool) {
	nerrs := len(d.errs)
	bad := map[string]bool{} // fields already reported: validation must not repeat them
	var name string
	if v, ok := t["name"]; !ok {
		d.errorf(at, "%s: name missing", portLabel("", index))
		bad["name"] = true
	} else if name, ok = typed[string](d, v, at.key("name"), portLabel("", index), "name", "a string"); !ok {
		bad["name"] = true
	}
	label := portLabel(name, index)
	spec := DefaultPortSpec(name)
	spec.Line = d.lines.line(at)
	set := map[string]bool{}
	for _, k := range d.sortedKeys(t, at) {
		kat, v := at.key(k), t[k]
		f := portFieldByKey(k, false)
		if f == nil {
			d.errorf(kat, "%s: unknown key %q%s", label, k, suggest(k, portKeys))
			continue
		}
		set[k] = true
		if !f.toml(d, v, kat, label, &spec) {
			bad[k] = true
		}
	}
	// Defaults that depend on other fields, as mana_probe_port caps num_queues by the vport's.
	if !set["mtu"] && !bad["max_mtu"] {
		spec.MTU = min(spec.MTU, max(spec.MaxMTU, 0))
	}
	if !set["queues"] && !bad["max_queues"] {
		spec.Queues = min(spec.Queues, max(spec.MaxQueues, 0))
	}
	for _, p := range spec.problems() {
		if !bad[p.field] {
			d.errorf(at.key(p.field), "%s: %s", label, p.msg)
		}
	}
	if len(d.errs) > nerrs {
		// Only the name, when it is valid, for the duplicate check.
		if bad["name"] {
			return PortSpec{}, false
		}
		return PortSpec{Name: name}, false
	}
	spec.normalize()
	return spec, true
}

// napiTimeout reads gro_flush_timeout or irq_suspend_timeout: a duration string ("20us"), or
// an integer of nanoseconds as the kernel's sysfs gro_flush_timeout takes it; not negative.
func (d *decoder) napiTimeout(v any, at keyPath, label, key string) (time.Duration, bool) {
	var t time.Duration
	switch v := v.(type) {
	case int64:
		t = time.Duration(v)
	case string:
		var err error
		if t, err = time.ParseDuration(v); err != nil {
			d.errorf(at, "%s: %s %q is not a duration (want e.g. \"20us\", or nanoseconds as an integer)", label, key, v)
			return 0, false
		}
	default:
		d.errorf(at, "%s: %s must be a duration string such as \"20us\" or an integer of nanoseconds, not %s", label, key, describe(v))
		return 0, false
	}
	if t < 0 {
		d.errorf(at, "%s: %s %s out of range: must not be negative", label, key, tomlText(v))
		return 0, false
	}
	return t, true
}

// pageSize reads page_size: 4096, 16384, 65536 or "4K", "16K", "64K".
func (d *decoder) pageSize(v any, at keyPath, label string) (int, bool) {
	var n int
	switch v := v.(type) {
	case int64:
		if v > 0 && v <= math.MaxInt32 {
			n = int(v)
		}
	case string:
		n, _ = rxbuf.ParsePageSize(v)
	default:
		d.errorf(at, "%s: page_size must be an integer or a string like \"4K\", not %s", label, describe(v))
		return 0, false
	}
	if !rxbuf.ValidPageSize(n) {
		d.errorf(at, "%s: page_size %s not supported (want %s)", label, tomlText(v), pageSizesWanted)
		return 0, false
	}
	return n, true
}

// memory reads memory_budget: bytes, a size with a binary unit ("2GiB"), or "unlimited".
func (d *decoder) memory(v any, at keyPath, label string) (int64, bool) {
	switch v := v.(type) {
	case int64:
		if v > 0 {
			return v, true
		}
	case string:
		if n, ok := parseMemory(v); ok {
			return n, true
		}
	default:
		d.errorf(at, "%s: memory_budget must be an integer or a string like \"2GiB\", not %s", label, describe(v))
		return 0, false
	}
	d.errorf(at, "%s: memory_budget %s invalid (want a positive number of bytes, optionally with K, M, G or T (KiB…TiB), or \"unlimited\")", label, tomlText(v))
	return 0, false
}

// privFlags reads priv_flags: an array of flag names.
func (d *decoder) privFlags(v any, at keyPath, label string) (uint32, bool) {
	list, ok := typed[[]any](d, v, at, label, "priv_flags", "an array of flag names")
	if !ok {
		return 0, false
	}
	var f uint32
	for i, e := range list {
		s, ok := typed[string](d, e, at.index(i), label, "priv_flags", "an array of flag names")
		if !ok {
			return 0, false
		}
		b, err := privflag.Parse([]string{s})
		if err != nil {
			d.errorf(at.index(i), "%s: %s", label, extackText(err))
			return 0, false
		}
		f |= b
	}
	return f, true
}

// tomlText writes a scalar as it would appear in the file.
func tomlText(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// suggest returns ` (did you mean "x"?)` for the known key closest to k, when one is close.
func suggest(k string, known []string) string {
	best, bestDist := "", 3
	for _, c := range known {
		if dist := editDistance(k, c); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
