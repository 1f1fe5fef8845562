package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// TestStateSpecRxRecycle: the state file keeps rx_recycle in the file's polarity, and a spec
// of an older manad, which kept rx_no_recycle, still loads with its meaning.
func TestStateSpecRxRecycle(t *testing.T) {
	dir := t.TempDir()
	st := NewState()
	spec := DefaultPortSpec("rt0")
	spec.RxRecycle = vnic.RecycleOff
	st.RecordCreated(spec, PortSettings{MTU: 1500, Queues: 1, RxRing: 1024, TxRing: 256})
	require.NoError(t, st.Save(dir))
	data, err := os.ReadFile(StatePath(dir))
	require.NoError(t, err)
	assert.Contains(t, string(data), `"rx_recycle": false`)
	assert.NotContains(t, string(data), "rx_no_recycle")

	for _, tc := range []struct {
		name, replace string
		noRecycle     bool
		err           string
	}{
		{"new form", `"rx_recycle": false`, true, ""},
		{"new form on", `"rx_recycle": true`, false, ""},
		{"older form", `"rx_no_recycle": true`, true, ""},
		{"older form off", `"rx_no_recycle": false`, false, ""},
		{"absent", ``, false, ""},
		{"both", `"rx_recycle": true, "rx_no_recycle": true`, false, "rx_recycle and its older form rx_no_recycle both given"},
		{"wrong type", `"rx_no_recycle": "yes"`, false, "rx_recycle: json: cannot unmarshal string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(string(data), `"rx_recycle": false`, tc.replace, 1)
			if tc.replace == "" {
				text = strings.Replace(string(data), `"rx_recycle": false,`, "", 1)
			}
			require.True(t, tc.replace == `"rx_recycle": false` || text != string(data))
			path := StatePath(dir)
			got, err := parseState(path, []byte(text))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.ErrorIs(t, err, unix.EBADMSG)
				return
			}
			require.NoError(t, err, text)
			assert.Equal(t, vnic.RecycleIf(!tc.noRecycle), got.Ports["rt0"].Spec.RxRecycle, text)
		})
	}
}

// TestPortKeysFromSchema: the [[port]] keys are portFields', each once, and an unknown key is
// answered with the nearest one.
func TestPortKeysFromSchema(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range portFields {
		assert.False(t, seen[f.key], "key %s twice", f.key)
		seen[f.key] = true
		assert.NotNil(t, f.toml, f.key)
		assert.NotNil(t, f.save, f.key)
		assert.NotNil(t, f.load, f.key)
		assert.NotNil(t, f.equal, f.key)
		assert.NotNil(t, f.toWire, f.key)
		assert.NotNil(t, f.fromWire, f.key)
		assert.NotZero(t, f.attr, "%s: no wire attribute", f.key)
	}
	_, err := Parse("t.toml", []byte("[[port]]\nname = \"p0\"\nrx_recyle = false\n"))
	require.Error(t, err)
	assert.Equal(t, `t.toml:3: port "p0": unknown key "rx_recyle" (did you mean "rx_recycle"?)`, err.Error())
}

// TestPortFieldsJSONKeys: a field's manactl JSON key and port add flag, which PortFields takes
// from the wire package's PortKeys, is its [[port]] key in kebab case (the name shows as
// ethtool's ifname), so the file, the state file and manactl name a field alike.
func TestPortFieldsJSONKeys(t *testing.T) {
	fields := PortFields()
	require.Len(t, fields, len(portFields))
	for i, f := range fields {
		want := strings.ReplaceAll(portFields[i].key, "_", "-")
		if f.Key == "name" {
			want = "ifname"
		}
		assert.Equal(t, portFields[i].key, f.Key)
		assert.Equal(t, want, f.JSONKey, "%s: manactl's key (wire.PortKeys' row of attribute %d)", f.Key, f.Attr)
		assert.Equal(t, portFields[i].attr, f.Attr, f.Key)
		assert.Equal(t, portFields[i].hardware, f.Hardware, f.Key)
	}
}

// TestDocListsEveryPortKey: the package documentation's [[port]] example has a line for every
// key of the schema, so a key added there is documented too.
func TestDocListsEveryPortKey(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for _, f := range portFields {
		assert.Regexp(t, `(?m)^//\t`+f.key+` +=`, string(doc), "doc.go does not document the [[port]] key %s", f.key)
	}
}

// TestStateSpecOlderFile: a runtime port's spec as manad before the port schema wrote it (every
// key of its specJSON, rx_no_recycle among them, none of the newer ones) loads as the port it
// was, the newer keys at their defaults, and is written back in the new form.
func TestStateSpecOlderFile(t *testing.T) {
	old := `{"version": 1, "ports": {"rt0": {"spec": {"name": "rt0", "mac": "02:aa:bb:cc:dd:ee",
	"netns": "blue", "segment": "lab", "persistent": false, "offload": false, "page_size": 65536,
	"rule": "pre-frag", "max_mtu": 9000, "max_queues": 32, "memory_budget": -1, "mtu": 1400,
	"queues": 2, "rx_ring": 1024, "tx_ring": 256, "priv_flags": ["full-page-rx"], "xdp": "drop",
	"rx_alloc": "no-pool", "rx_no_recycle": true, "speed": 25000, "cqe_coalesce_8": true},
	"settings": {"mtu": 1400, "queues": 2, "rx_ring": 1024, "tx_ring": 256, "priv_flags": [], "xdp": "", "admin_up": true}}},
	"deleted": []}`
	st, err := parseState("state.json", []byte(old))
	require.NoError(t, err)
	want := DefaultPortSpec("rt0")
	want.MAC = mustMAC("02:aa:bb:cc:dd:ee")
	want.NetNS, want.Segment, want.Persistent, want.Offload = "blue", "lab", false, false
	want.PageSize, want.Rule, want.MaxMTU, want.MaxQueues = 65536, rxbuf.RulePreFrag, 9000, 32
	want.MemoryBudget, want.MTU, want.Queues, want.PrivFlags, want.XDP = UnlimitedMemory, 1400, 2, privflag.FullPageRx, vnic.XDPProgDrop
	want.RxAlloc, want.RxRecycle, want.Speed, want.CQECoalesce8 = rxbuf.AllocNoPool, vnic.RecycleOff, 25000, true
	require.NotNil(t, st.Ports["rt0"].Spec)
	assert.Equal(t, want, *st.Ports["rt0"].Spec)
	data, err := st.marshal()
	require.NoError(t, err)
	assert.Contains(t, string(data), `"rx_recycle": false`)
	assert.NotContains(t, string(data), "rx_no_recycle")
	again, err := parseState("state.json", data)
	require.NoError(t, err)
	assert.Equal(t, st, again)
}

// TestPortSettingsCoverSchema: the state file's runtime settings (PortSettings) are not derived
// from the schema, since they keep what a port changed at run time in their own form (NAPI per
// queue, the whole coalescing, the TAP's offloads, the RSS key, the administrative state). This
// pins how the two meet: every setting row of the schema (a field that is not hardware) is a
// key of the settings or carried inside one of them, and every key of the settings is a
// setting row or one of those others, so a setting added to the schema and forgotten by the
// state file fails here.
func TestPortSettingsCoverSchema(t *testing.T) {
	carriedBy := map[string]string{ // setting rows the settings keep inside another key
		"rx_cqe_frames": "coalesce", "napi_defer_hard_irqs": "napi", "gro_flush_timeout": "napi",
		"irq_suspend_timeout": "napi", "napi_threaded": "napi",
	}
	notRows := map[string]bool{"admin_up": true, "coalesce": true, "offload": true, "rss_key": true, "napi": true}
	keys := map[string]bool{}
	typ := reflect.TypeFor[PortSettings]()
	for i := range typ.NumField() {
		k, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		require.NotEmpty(t, k, typ.Field(i).Name)
		keys[k] = true
	}
	rows := map[string]bool{}
	for _, f := range portFields {
		if f.hardware {
			continue
		}
		rows[f.key] = true
		if c, ok := carriedBy[f.key]; ok {
			assert.True(t, keys[c], "setting %s: the settings have no key %s to carry it", f.key, c)
			continue
		}
		assert.True(t, keys[f.key], "setting %s is not kept in the state file's settings", f.key)
	}
	for k := range keys {
		assert.True(t, rows[k] || notRows[k], "settings key %s is neither a setting row of the schema nor a known other", k)
	}
}

// TestModelErrorsNameRows: every field the port model refuses is reported under a key of the
// schema (its row's checkedBy), or rss_key, the state file's: a refusal never names a key the
// file does not have.
func TestModelErrorsNameRows(t *testing.T) {
	s := DefaultPortSpec("p0")
	s.PageSize, s.MaxMTU, s.MaxQueues, s.Rule, s.RxAlloc = 3, 1, 0, rxbuf.RulePreFrag+1, rxbuf.AllocNoPool+1
	s.RxRecycle, s.Speed, s.RSSKey = vnic.RecycleOff+1, -1, []byte{1}
	s.MTU, s.Queues, s.RxRing, s.TxRing, s.PrivFlags = 1, 0, 1, 1, 1<<31
	errs := vnic.Check(s.Config(), s.Settings)
	fields := map[vnic.Field]bool{}
	for _, e := range errs {
		fields[e.Field] = true
		key, msg := s.modelProblem(e)
		assert.True(t, key == "rss_key" || portFieldByKey(key, false) != nil, "%s: refused under key %q, not a [[port]] key (%s)", e.Field, key, msg)
		assert.NotEqual(t, key, string(e.Field), "%s: no row is checked by it", e.Field)
	}
	for _, f := range []vnic.Field{vnic.FieldPageSize, vnic.FieldMaxMTU, vnic.FieldMaxQueues, vnic.FieldRule, vnic.FieldRxAlloc,
		vnic.FieldRxRecycle, vnic.FieldSpeed, vnic.FieldRSSKey, vnic.FieldMTU, vnic.FieldQueues, vnic.FieldRxRing, vnic.FieldTxRing,
		vnic.FieldPrivFlags} {
		assert.True(t, fields[f], "%s not refused: the test's spec no longer covers it (%v)", f, errs)
	}
	s = DefaultPortSpec("p0")
	s.MTU, s.XDP = 9000, vnic.XDPProgPass
	errs = vnic.Check(s.Config(), s.Settings)
	require.Len(t, errs, 1)
	key, _ := s.modelProblem(errs[0])
	assert.Equal(t, "xdp", key, "an MTU XDP lowers the maximum of")
}
