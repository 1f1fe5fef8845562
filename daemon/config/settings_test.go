package config

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic"
)

// testRSSKey is a key that is not vnic.DefaultRSSKey.
func testRSSKey() []byte {
	k := bytes.Repeat([]byte{0xa5}, vnic.RSSKeySize)
	k[0] = 0x01
	return k
}

// TestDeviceSettingsRoundTrip: coalescing, the TAP offloads and the RSS key survive Save and
// LoadState, and Merge gives the port exactly the values recorded from its vnic settings.
func TestDeviceSettingsRoundTrip(t *testing.T) {
	cfg, err := Parse("c.toml", []byte("[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\n"))
	require.NoError(t, err)
	cfg.Ports[0].CQECoalesce8 = true // cqe_coalesce_8 = true
	a, _ := cfg.Port("a")
	set := a.Settings
	set.Coalesce = vnic.Coalesce{RxUsecs: 100, RxMaxFrames: 32, TxUsecs: 1023, TxMaxFrames: 255, AdaptiveRx: true,
		RxCQEFrames: 8, RxCQENsecs: vnic.DefaultRxCQENsecs}
	ps := NewPortSettings(set, true)
	ps.SetDevice(false, testRSSKey())

	dir := t.TempDir()
	st := NewState()
	st.RecordSettings("a", ps)
	require.NoError(t, st.Save(dir))
	got, err := LoadState(dir)
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(st, got), "LoadState(Save(s)) != s (-want +got)")
	ports, notes := Merge(cfg, got)
	require.Empty(t, notes, "Merge: %d ports, notes %v", len(ports), notes)
	require.Len(t, ports, 2, "Merge: %d ports, notes %v", len(ports), notes)
	pa, pb := ports[0].Spec, ports[1].Spec
	assert.True(t, ports[0].Restored, "port a not restored")
	assert.Equal(t, set, pa.Settings, "port a after restart: settings")
	assert.False(t, pa.Offload, "port a after restart: offload, want off")
	assert.Equal(t, testRSSKey(), pa.Config().RSSKey, "port a after restart: key")
	// The port the state file does not know keeps the configuration's values.
	assert.Equal(t, vnic.DefaultCoalesce(), pb.Coalesce, "port b: coalesce, want the default")
	assert.True(t, pb.Offload, "port b: offload, want the default on")
	assert.Nil(t, pb.RSSKey, "port b: key, want the default")
}

// TestDeviceSettingsOlderFile: a state file written before coalescing, offloads and the RSS key
// were kept still loads, and its ports get those from the configuration.
func TestDeviceSettingsOlderFile(t *testing.T) {
	cfg, err := Parse("c.toml", []byte("[[port]]\nname = \"a\"\noffload = false\n"))
	require.NoError(t, err)
	cfg.Ports[0].Coalesce.RxCQEFrames = 4 // rx_cqe_frames = 4
	dir := t.TempDir()
	old := `{"version": 1, "ports": {"a": {"settings": {"mtu": 3000, "queues": 4, "rx_ring": 1024, "tx_ring": 256, "priv_flags": [], "xdp": "", "admin_up": true}}}, "deleted": []}`
	require.NoError(t, os.WriteFile(StatePath(dir), []byte(old), 0o600))
	st, err := LoadState(dir)
	require.NoError(t, err)
	ports, notes := Merge(cfg, st)
	require.Empty(t, notes, "Merge: %d ports, notes %v", len(ports), notes)
	require.Len(t, ports, 1, "Merge: %d ports, notes %v", len(ports), notes)
	p := ports[0].Spec
	assert.Equal(t, 3000, p.MTU, "port from an older state file: mtu, want the file's")
	assert.False(t, p.Offload, "port from an older state file: offload, want the file's off")
	assert.Equal(t, uint32(4), p.Coalesce.RxCQEFrames, "port from an older state file: rx_cqe_frames, want the configuration's")
	assert.Nil(t, p.RSSKey, "port from an older state file: key, want the default")
}

// TestDeviceSettingsInvalid: saved values the port cannot take are refused as Merge refuses any
// other saved setting (the file's settings are used, with a note), and a key that is not hex or
// not RSSKeySize bytes makes the file corrupt.
func TestDeviceSettingsInvalid(t *testing.T) {
	cfg, err := Parse("c.toml", []byte("[[port]]\nname = \"a\"\n"))
	require.NoError(t, err)
	a, _ := cfg.Port("a")
	for _, tc := range []struct {
		name     string
		coalesce *CoalesceSettings
		note     string
	}{
		{"cqe 8 without the capability", &CoalesceSettings{RxCQEFrames: 8},
			`state: port "a": saved settings not applied: port "a": rx_cqe_frames 8 not supported (want 1 or 4, or 8 with cqe_coalesce_8): invalid argument`},
		{"usecs", &CoalesceSettings{RxCQEFrames: 1, RxUsecs: 1024},
			`state: port "a": saved settings not applied: port "a": coalesce: rx-usecs must be at most 1023, got 1024: invalid argument`},
		{"frames", &CoalesceSettings{RxCQEFrames: 4, TxFrames: 256},
			`state: port "a": saved settings not applied: port "a": coalesce: tx-frames must be at most 255, got 256: invalid argument`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewState()
			ps := NewPortSettings(a.Settings, true)
			ps.Coalesce = tc.coalesce
			ps.MTU = 2000 // not applied either: the settings are taken as a whole
			st.RecordSettings("a", ps)
			ports, notes := Merge(cfg, st)
			assert.Empty(t, cmp.Diff([]string{tc.note}, errorTexts(notes)), "notes (-want +got)")
			if assert.Len(t, ports, 1, "ports %+v", ports) {
				assert.False(t, ports[0].Restored, "port a: %+v; want the file's settings", ports)
				assert.Equal(t, a.MTU, ports[0].Spec.MTU, "port a: %+v; want the file's settings", ports)
				assert.Equal(t, a.Coalesce, ports[0].Spec.Coalesce, "port a: %+v; want the file's settings", ports)
			}
		})
	}

	for _, key := range []string{"zz", "0102", strings.Repeat("ab", vnic.RSSKeySize+1)} {
		dir := t.TempDir()
		data := `{"version": 1, "ports": {"a": {"settings": {"mtu": 1500, "queues": 4, "rx_ring": 1024, "tx_ring": 256, "priv_flags": [], "xdp": "", "admin_up": true, "rss_key": "` + key + `"}}}, "deleted": []}`
		require.NoError(t, os.WriteFile(StatePath(dir), []byte(data), 0o600))
		_, err := LoadState(dir)
		var e *Error
		assert.ErrorIs(t, err, unix.EBADMSG, "rss_key %q: LoadState", key)
		if assert.ErrorAs(t, err, &e, "rss_key %q: LoadState", key) {
			assert.Contains(t, e.Msg, `port "a": settings: rss_key`, "rss_key %q: LoadState, want the error to name the port's rss_key", key)
		}
	}
}
