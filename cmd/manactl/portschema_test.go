package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// portFieldExamples is a value other than the default for every field of config's port schema:
// as the configuration file writes it (TOML) and as manactl's port JSON shows it.
var portFieldExamples = map[string]struct {
	toml string
	json any
}{
	"name":                 {`"rt1"`, "rt1"},
	"mac":                  {`"02:00:00:00:00:42"`, "02:00:00:00:00:42"},
	"netns":                {`"blue"`, "blue"},
	"segment":              {`"lab"`, "lab"},
	"persistent":           {`false`, false},
	"offload":              {`false`, false},
	"page_size":            {`"16K"`, 16384},
	"rule":                 {`"pre-frag"`, "pre-frag"},
	"max_mtu":              {`4000`, 4000},
	"max_queues":           {`32`, 32},
	"memory_budget":        {`"512MiB"`, 512 << 20},
	"mtu":                  {`3000`, 3000},
	"queues":               {`2`, 2},
	"rx_ring":              {`2048`, 2048},
	"tx_ring":              {`512`, 512},
	"priv_flags":           {`["full-page-rx"]`, []string{"full-page-rx"}},
	"xdp":                  {`"drop"`, "drop"},
	"rx_alloc":             {`"no-pool"`, "no-pool"},
	"rx_recycle":           {`false`, false},
	"speed":                {`25000`, 25000},
	"cqe_coalesce_8":       {`true`, true},
	"rx_cqe_frames":        {`4`, 4},
	"napi_defer_hard_irqs": {`2`, 2},
	"gro_flush_timeout":    {`"20us"`, 20000},
	"irq_suspend_timeout":  {`"1ms"`, 1000000},
	"napi_threaded":        {`true`, true},
	"msix_vectors":         {`40`, 40},
}

// TestPortSchemaRoundTrip feeds every field of config's port schema through each layer that
// carries a port: the configuration file (TOML) → the state file (a runtime port's spec, saved
// and loaded, and Merge's restart comparison) → PORT_NEW's request (encoded and decoded, turned
// back into a spec as the daemon does) → the port reply (encoded and decoded) → manactl's JSON,
// and back from the JSON (portJSONObject); at each step the port must be what the file said. It iterates the
// schema, so a field added there without an example, a state-file form, a wire attribute or a
// JSON key fails here.
func TestPortSchemaRoundTrip(t *testing.T) {
	fields := config.PortFields()
	require.Len(t, portFieldExamples, len(fields), "portFieldExamples has a field the schema does not")
	base := `[[port]]` + "\n" + `name = "rt0"` + "\n"
	def := parsePort(t, base)
	defJSON := portJSONObject(t, def.Info())
	for _, f := range fields {
		t.Run(f.Key, func(t *testing.T) {
			ex, ok := portFieldExamples[f.Key]
			require.True(t, ok, "port field %s has no example in portFieldExamples: add one", f.Key)
			text := base + fmt.Sprintf("%s = %s\n", f.Key, ex.toml)
			if f.Key == "name" {
				text = fmt.Sprintf("[[port]]\nname = %s\n", ex.toml)
			}
			spec := parsePort(t, text)
			spec.Line = 0
			def.Line = 0
			require.NotEqual(t, def, spec, "%s = %s parsed as the default", f.Key, ex.toml)

			// The state file: a port created at runtime comes back as it was.
			dir := t.TempDir()
			st := config.NewState()
			st.RecordCreated(spec, config.NewPortSettings(spec.Settings, true))
			require.NoError(t, st.Save(dir))
			loaded, err := config.LoadState(dir)
			require.NoError(t, err)
			ports, notes := config.Merge(&config.Config{File: "t.toml"}, loaded)
			require.Empty(t, notes)
			require.Len(t, ports, 1)
			restored := ports[0].Spec
			require.Empty(t, cmp.Diff(spec, restored), "state file (-file +restored)")
			// A restart whose file now defines the port with its defaults notices a hardware
			// field's change, and only that.
			if f.Key != "name" {
				cfg, err := config.Parse("t.toml", []byte(fmt.Sprintf("[[port]]\nname = %q\n", spec.Name)))
				require.NoError(t, err)
				_, notes = config.Merge(cfg, loaded)
				assert.Equal(t, f.Hardware, len(notes) > 0, "hardware %v, restart notes %v", f.Hardware, notes)
			}

			// PORT_NEW: the request carries the field, and the daemon's spec is the file's.
			assert.Contains(t, wire.PortSpecTable.Kinds(), f.Attr, "PORT_NEW does not carry %s", f.Key)
			req := restored.WireSpec()
			var b nlattr.Builder
			wire.PortSpecTable.Put(&b, &req)
			var got wire.PortSpec
			require.NoError(t, wire.PortSpecTable.Decode(b.B, &got))
			fromWire, err := config.SpecFromWire(got)
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(spec, fromWire), "PORT_NEW (-file +request)")

			// The reply and manactl's JSON show the file's value under the field's key.
			assert.Contains(t, wire.PortTable.Kinds(), f.Attr, "the port reply does not carry %s", f.Key)
			obj := portJSONObject(t, fromWire.Info())
			want, _ := json.Marshal(ex.json)
			require.Contains(t, obj, f.JSONKey, "manactl's port JSON has no key %s", f.JSONKey)
			assert.JSONEq(t, string(want), string(obj[f.JSONKey]), "%s in manactl's JSON", f.JSONKey)
			assert.NotEqual(t, string(defJSON[f.JSONKey]), string(obj[f.JSONKey]), "%s shows the default", f.JSONKey)
		})
	}
}

// parsePort parses a configuration of one port.
func parsePort(t *testing.T, text string) config.PortSpec {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(text))
	require.NoError(t, err, text)
	require.Len(t, cfg.Ports, 1)
	return cfg.Ports[0]
}

// portJSONObject sends p through the port reply's encoding and returns manactl's JSON object
// of it by key, checking that the JSON has wire.PortKeys' keys in their order and reads back as
// it was written: each key of a plain JSON type (numbers, strings, booleans, the MAC, the
// flag names) holds the reply's value.
func portJSONObject(t *testing.T, p wire.PortInfo) map[string]json.RawMessage {
	t.Helper()
	var b nlattr.Builder
	wire.PortTable.Put(&b, &p)
	var got wire.PortInfo
	require.NoError(t, wire.PortTable.Decode(b.B, &got))
	data, err := json.Marshal(portToJSON(got))
	require.NoError(t, err)
	require.Equal(t, shownPortKeys(), jsonKeys(t, data), "manactl's port JSON keys")
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &obj))
	for _, k := range wire.PortKeys {
		if !k.Shown() {
			continue
		}
		var back wire.PortInfo
		switch ptr := k.Info(&back).(type) {
		case *uint32, *uint64, *string, *bool, *[]string:
			require.NoError(t, json.Unmarshal(obj[k.Key], ptr), "%s", k.Key)
		case *net.HardwareAddr:
			var text string
			require.NoError(t, json.Unmarshal(obj[k.Key], &text), "%s", k.Key)
			if text != "" {
				*ptr, err = net.ParseMAC(text)
				require.NoError(t, err, "%s", k.Key)
			}
		default: // faults, coalesce, the RSS key: shapes of their own, pinned by the golden files
			continue
		}
		assert.Empty(t, cmp.Diff(k.Info(&got), k.Info(&back), cmpopts.EquateEmpty()), "%s read back from the JSON (-reply +JSON)", k.Key)
	}
	return obj
}

// shownPortKeys are the keys of manactl's port JSON, in order: wire.PortKeys' shown rows.
func shownPortKeys() []string {
	var keys []string
	for _, k := range wire.PortKeys {
		if k.Shown() {
			keys = append(keys, k.Key)
		}
	}
	return keys
}

// jsonKeys returns the keys of the JSON object data, in the order written.
func jsonKeys(t *testing.T, data []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	tok, err := d.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok, "not an object: %s", data)
	var keys []string
	for d.More() {
		tok, err := d.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var v json.RawMessage
		require.NoError(t, d.Decode(&v))
	}
	return keys
}

// TestPortJSONFromKeys: manactl's port JSON has a key for every attribute of the reply that
// wire.PortKeys shows, in the rows' order, and each key shows its attribute: a value set in
// the reply's field changes that key's JSON and no other.
func TestPortJSONFromKeys(t *testing.T) {
	var zero wire.PortInfo
	base := portJSONObject(t, zero)
	for _, k := range wire.PortKeys {
		if !k.Shown() {
			continue
		}
		t.Run(k.Key, func(t *testing.T) {
			var p wire.PortInfo
			fillNonZero(reflect.ValueOf(k.Info(&p)).Elem())
			obj := portJSONObject(t, p)
			for key, v := range obj {
				if key == k.Key {
					assert.NotEqual(t, string(base[key]), string(v), "%s does not show its attribute %d", key, k.Attr)
				} else {
					assert.Equal(t, string(base[key]), string(v), "%s changes with attribute %d (%s)", key, k.Attr, k.Key)
				}
			}
		})
	}
}

// fillNonZero sets v, and everything in it, to non-zero values (a slice gets one element, a
// MAC six bytes).
func fillNonZero(v reflect.Value) {
	if v.Type() == reflect.TypeFor[net.HardwareAddr]() {
		v.Set(reflect.ValueOf(net.HardwareAddr{2, 0, 0, 0, 0, 7}))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillNonZero(v.Field(i))
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillNonZero(v.Elem())
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillNonZero(s.Index(0))
		v.Set(s)
	}
}

// portFlagExamples is a value port add's flags of each kind take, other than the default.
var portFlagExamples = map[wire.PortFlag]string{
	wire.FlagString:    "x",
	wire.FlagUint:      "7",
	wire.FlagBool:      "true",
	wire.FlagDefaultOn: "false",
	wire.FlagMAC:       "02:00:00:00:00:42",
	wire.FlagPageSize:  "16K",
	wire.FlagBytes:     "1M",
	wire.FlagDuration:  "20us",
	wire.FlagPrivFlags: "full-page-rx",
}

// TestPortAddFlagsFromKeys: port add has exactly one flag per wire.PortKeys row with one,
// named and helped as the row says, and each flag sends its attribute: given alone, the
// PORT_NEW request carries the name and that attribute only.
func TestPortAddFlagsFromKeys(t *testing.T) {
	var o portAddFlags
	fs := pflag.NewFlagSet("port add", pflag.ContinueOnError)
	o.register(fs)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	var want []string
	for _, k := range wire.PortKeys {
		if k.HasFlag() {
			want = append(want, k.Key)
		}
	}
	assert.ElementsMatch(t, want, names, "port add's flags")
	for _, k := range wire.PortKeys {
		if !k.HasFlag() {
			continue
		}
		t.Run(k.Key, func(t *testing.T) {
			var o portAddFlags
			fs := pflag.NewFlagSet("port add", pflag.ContinueOnError)
			o.register(fs)
			f := fs.Lookup(k.Key)
			require.NotNil(t, f)
			assert.True(t, strings.HasPrefix(f.Usage, k.Help), "--%s's help %q", k.Key, f.Usage)
			ex, ok := portFlagExamples[k.Flag]
			require.True(t, ok, "no example for the flag kind %d of --%s: add one", k.Flag, k.Key)
			require.NoError(t, fs.Parse([]string{"--" + k.Key + "=" + ex}))
			req, err := o.request(fs, "rt0")
			require.NoError(t, err)
			var b nlattr.Builder
			wire.PortSpecTable.Put(&b, &req)
			var got []uint16
			for it := nlattr.NewIter(b.B, 0, len(b.B)); it.Next(); {
				got = append(got, it.Attr().Type())
			}
			assert.ElementsMatch(t, []uint16{wire.PortAttrDevName, k.Attr}, got, "--%s=%s: PORT_NEW's attributes", k.Key, ex)
		})
	}
}

// TestPortAddFlagErrors: a flag whose text cannot be read is a usage error that names it.
func TestPortAddFlagErrors(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"mac", "02:00", "invalid --mac '02:00'"},
		{"page-size", "huge", "invalid page size 'huge'"},
		{"priv-flags", "fast", "unknown private flag 'fast'"},
		{"memory-budget", "lots", "invalid value 'lots' for --memory-budget"},
		{"gro-flush-timeout", "-1s", "invalid --gro-flush-timeout '-1s'"},
		{"irq-suspend-timeout", "soon", "invalid --irq-suspend-timeout 'soon'"},
	} {
		var o portAddFlags
		fs := pflag.NewFlagSet("port add", pflag.ContinueOnError)
		o.register(fs)
		require.NoError(t, fs.Parse([]string{"--" + tc.flag, tc.value}))
		_, err := o.request(fs, "rt0")
		assert.ErrorContains(t, err, tc.want, "--%s %s", tc.flag, tc.value)
	}
}

// TestPortKeysDocumented: doc.go's JSON section names every key of the port JSON (list's
// paragraph) and its port add synopsis every flag, so a new attribute's doc line is not
// forgotten.
func TestPortKeysDocumented(t *testing.T) {
	data, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	doc := string(data)
	section := func(from, to string) string {
		i := strings.Index(doc, from)
		require.GreaterOrEqual(t, i, 0, "doc.go has no %q", from)
		j := strings.Index(doc[i:], to)
		require.Greater(t, j, 0, "doc.go has no %q after %q", to, from)
		return doc[i : i+j]
	}
	list := section("//\tlist             ifname", "//\tshow-rxbuf")
	add := section("//\tport add NAME", "//\tport del NAME")
	word := func(w string) *regexp.Regexp {
		return regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(w) + `($|[^a-z0-9-])`)
	}
	for _, k := range wire.PortKeys {
		if k.Shown() {
			assert.Regexp(t, word(k.Key), list, "doc.go's list JSON keys lack %s", k.Key)
		}
		if k.HasFlag() {
			assert.Regexp(t, word("--"+k.Key), add, "doc.go's port add synopsis lacks --%s", k.Key)
		}
	}
}

// TestPortAddFlagsFromSchema: port add has one flag per key of the port schema (but name, its
// argument), named as the key in kebab case, and each flag asks for what the key says in the
// file: the request, turned into a spec as the daemon does, is the file's port.
func TestPortAddFlagsFromSchema(t *testing.T) {
	for _, f := range config.PortFields() {
		if f.Key == "name" {
			continue
		}
		t.Run(f.Key, func(t *testing.T) {
			ex := portFieldExamples[f.Key]
			var o portAddFlags
			fs := pflag.NewFlagSet("port add", pflag.ContinueOnError)
			o.register(fs)
			flag := fs.Lookup(f.JSONKey)
			require.NotNil(t, flag, "port add has no --%s for the port key %s", f.JSONKey, f.Key)
			value := strings.Trim(ex.toml, `[]"`)
			require.NoError(t, fs.Parse([]string{"--" + f.JSONKey + "=" + value}))
			req, err := o.request(fs, "rt0")
			require.NoError(t, err)
			got, err := config.SpecFromWire(req)
			require.NoError(t, err)
			// port add's default is not persistent, the file's is.
			text := "[[port]]\nname = \"rt0\"\n" + fmt.Sprintf("%s = %s\n", f.Key, ex.toml)
			if f.Key != "persistent" {
				text += "persistent = false\n"
			}
			want := parsePort(t, text)
			want.Line = 0
			assert.Empty(t, cmp.Diff(want, got), "--%s=%s (-file +request)", f.JSONKey, value)
		})
	}
}

// TestPortAddMemoryBudgetAsFile: --memory-budget takes what the file's memory_budget takes
// (one parser, bytesize), "unlimited" and lower-case units included, and means the same.
func TestPortAddMemoryBudgetAsFile(t *testing.T) {
	for _, v := range []string{"unlimited", "2g", "512MiB", "1048576", "3 K"} {
		var o portAddFlags
		fs := pflag.NewFlagSet("port add", pflag.ContinueOnError)
		o.register(fs)
		require.NoError(t, fs.Parse([]string{"--memory-budget", v}))
		req, err := o.request(fs, "rt0")
		require.NoError(t, err, v)
		got, err := config.SpecFromWire(req)
		require.NoError(t, err, v)
		want := parsePort(t, fmt.Sprintf("[[port]]\nname = \"rt0\"\npersistent = false\nmemory_budget = %q\n", v))
		assert.Equal(t, want.MemoryBudget, got.MemoryBudget, v)
	}
	var o portAddFlags
	fs := pflag.NewFlagSet("port add", pflag.ContinueOnError)
	o.register(fs)
	require.NoError(t, fs.Parse([]string{"--memory-budget", "lots"}))
	_, err := o.request(fs, "rt0")
	assert.ErrorContains(t, err, "invalid value 'lots' for --memory-budget")
}
