package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
}

// TestPortSchemaRoundTrip feeds every field of config's port schema through each layer that
// carries a port: the configuration file (TOML) → the state file (a runtime port's spec, saved
// and loaded, and Merge's restart comparison) → PORT_NEW's request (encoded and decoded, turned
// back into a spec as the daemon does) → the port reply (encoded and decoded) → manactl's JSON,
// and back from the JSON; at each step the port must be what the file said. It iterates the
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
// of it by key, checking that the JSON reads back as it was written.
func portJSONObject(t *testing.T, p wire.PortInfo) map[string]json.RawMessage {
	t.Helper()
	var b nlattr.Builder
	wire.PortTable.Put(&b, &p)
	var got wire.PortInfo
	require.NoError(t, wire.PortTable.Decode(b.B, &got))
	j := portToJSON(got)
	data, err := json.Marshal(j)
	require.NoError(t, err)
	var back portJSON
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, j, back, "manactl's port JSON does not read back")
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &obj))
	return obj
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
