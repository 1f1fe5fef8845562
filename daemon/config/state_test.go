package config

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// crashChildEnv makes the test binary a child that saves states in a loop until killed
// (TestSaveSurvivesKill).
const crashChildEnv = "MANAD_CONFIG_TEST_SAVE_LOOP_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		saveLoop(dir)
		return
	}
	os.Exit(m.Run())
}

// crashState returns the state the crash child saves on round i: its MTU encodes the round, so
// the parent can tell which save it finds.
func crashState(i int) *State {
	st := NewState()
	st.RecordSettings("mana0", PortSettings{MTU: 1000 + i, Queues: 4, RxRing: 1024, TxRing: 256, PrivFlags: []string{}})
	// A large runtime-port list makes each write long enough for a kill to land inside it.
	for p := range 200 {
		spec := DefaultPortSpec("rt" + strconv.Itoa(p))
		st.RecordCreated(spec, PortSettings{MTU: 1000 + i, Queues: 16, RxRing: 1024, TxRing: 256})
	}
	return st
}

// saveLoop saves crashState(1), crashState(2), … to dir and prints each round number after its
// Save returned, until the process is killed. The states are built beforehand so that the loop
// spends its time in Save.
func saveLoop(dir string) {
	w := bufio.NewWriter(os.Stdout)
	states := make([]*State, crashRounds+1)
	for i := range states {
		states[i] = crashState(i)
	}
	for i := 1; ; i++ {
		if err := states[i%len(states)].Save(dir); err != nil {
			fmt.Fprintln(os.Stderr, "save:", err)
			os.Exit(2)
		}
		fmt.Fprintln(w, i)
		w.Flush()
	}
}

// crashRounds is how many distinct states the crash child cycles through.
const crashRounds = 64

// TestSaveSurvivesKill kills (SIGKILL) a process that saves the state in a loop, at random
// points, and checks that the state file is then always complete: the last state whose Save
// returned, or the one being saved. (A Save that wrote the file in place fails this test within a
// few runs.)
func TestSaveSurvivesKill(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	for run := range 25 {
		dir := t.TempDir()
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		// Let it complete a few saves, then kill it wherever it is: the random pause only moves
		// the kill around inside a Save; every outcome is checked the same way.
		lines := bufio.NewScanner(out)
		done := 0
		for done < 2+run%5 && lines.Scan() {
			done, _ = strconv.Atoi(lines.Text())
		}
		time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		for lines.Scan() { // saves reported between our last read and the kill
			done, _ = strconv.Atoi(lines.Text())
		}
		err = cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok, "child did not die of the kill: %v; stderr: %s", err, stderr.String())
		require.True(t, ws.Signaled(), "child did not die of the kill: %v; stderr: %s", err, stderr.String())
		st, err := LoadState(dir)
		require.NoError(t, err, "run %d: state after kill -9 is unreadable", run)
		// Round i saved states[i % (crashRounds+1)].
		got, last, next := st.Ports["mana0"].Settings.MTU-1000, done%(crashRounds+1), (done+1)%(crashRounds+1)
		if got != last {
			require.Equal(t, next, got, "run %d: state file holds state %d; the last completed save wrote %d", run, got, last)
		}
		require.Empty(t, cmp.Diff(crashState(got), st), "run %d: state of round %d is not what was saved (-want +got)", run, got)
		// A following Save clears whatever temporary file the kill left behind.
		require.NoError(t, st.Save(dir))
		left, _ := filepath.Glob(filepath.Join(dir, stateTempPattern))
		assert.Empty(t, left, "run %d: temporary files left after Save", run)
	}
}

// sampleState has every kind of entry.
func sampleState() *State {
	st := NewState()
	st.RecordSettings("mana0", PortSettings{MTU: 4000, Queues: 8, RxRing: 2048, TxRing: 512, PrivFlags: []string{"full-page-rx"}, XDP: "pass", AdminUp: true})
	spec := DefaultPortSpec("rt0")
	spec.MAC = mustMAC("02:aa:bb:cc:dd:ee")
	spec.NetNS, spec.Segment, spec.Persistent, spec.Offload = "blue", "lab", false, false
	spec.PageSize, spec.Rule, spec.MaxMTU, spec.MaxQueues = 65536, rxbuf.RulePreFrag, 9000, 32
	spec.MemoryBudget, spec.MTU, spec.Queues, spec.PrivFlags, spec.XDP = UnlimitedMemory, 1400, 2, privflag.FullPageRx, vnic.XDPProgDrop
	spec.RxAlloc, spec.RxRecycle = rxbuf.AllocNoPool, vnic.RecycleOff
	spec.Line = 42 // not persisted: a runtime port has no line
	st.RecordCreated(spec, PortSettings{MTU: 1400, Queues: 2, RxRing: 1024, TxRing: 256, XDP: "ebpf:counter"})
	st.RecordDeleted("mana1", &Config{Ports: []PortSpec{DefaultPortSpec("mana1")}})
	return st
}

func TestStateRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "state")
	st := sampleState()
	require.NoError(t, st.Save(dir))
	got, err := LoadState(dir)
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(st, got), "LoadState(Save(s)) != s (-want +got)")
	assert.Equal(t, 0, got.Ports["rt0"].Spec.Line, "a runtime port's spec kept a config line")
	// Saved twice, the file is byte-for-byte the same (sorted keys): no spurious diffs.
	first, _ := os.ReadFile(StatePath(dir))
	require.NoError(t, got.Save(dir))
	second, _ := os.ReadFile(StatePath(dir))
	assert.Equal(t, string(second), string(first), "saving the loaded state changed the file:\n%s\n---\n%s", first, second)
	fi, err := os.Stat(StatePath(dir))
	if assert.NoError(t, err) {
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "state file mode")
	}
}

// TestStateOffloadMissing: a runtime port saved before the offload key existed comes back with
// offloads, the default.
func TestStateOffloadMissing(t *testing.T) {
	dir := t.TempDir()
	st := NewState()
	st.RecordCreated(DefaultPortSpec("rt0"), PortSettings{MTU: 1500, Queues: 1, RxRing: 1024, TxRing: 256})
	require.NoError(t, st.Save(dir))
	data, err := os.ReadFile(StatePath(dir))
	require.NoError(t, err)
	old := strings.Replace(string(data), `"offload": true,`, "", 1)
	require.NotEqual(t, string(data), old, "state file has no offload key:\n%s", data)
	require.NoError(t, os.WriteFile(StatePath(dir), []byte(old), 0o600))
	got, err := LoadState(dir)
	require.NoError(t, err)
	assert.True(t, got.Ports["rt0"].Spec.Offload, "a spec without the offload key loaded with offloads off")
}

func TestStateFileFormat(t *testing.T) {
	dir := t.TempDir()
	st := NewState()
	st.RecordSettings("mana0", NewPortSettings(vnic.Settings{MTU: 1500, Queues: 4, RxRing: 1024, TxRing: 256, PrivFlags: privflag.FullPageRx, XDP: vnic.XDPProgDrop}, true))
	require.NoError(t, st.Save(dir))
	got, _ := os.ReadFile(StatePath(dir))
	want := `{
  "version": 1,
  "ports": {
    "mana0": {
      "settings": {
        "mtu": 1500,
        "queues": 4,
        "rx_ring": 1024,
        "tx_ring": 256,
        "priv_flags": [
          "full-page-rx"
        ],
        "xdp": "drop",
        "admin_up": true
      }
    }
  },
  "deleted": []
}
`
	assert.Empty(t, cmp.Diff(want, string(got)), "state.json (-want +got)")
}

func TestLoadStateMissing(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "does", "not", "exist")} {
		st, err := LoadState(dir)
		require.NoError(t, err, "LoadState(%s)", dir)
		assert.Empty(t, cmp.Diff(NewState(), st), "missing file: not an empty state (-want +got)")
	}
}

func TestLoadStateCorrupt(t *testing.T) {
	good := `{"version": 1, "ports": {"a": {"settings": {"mtu": 1500}}}, "deleted": []}`
	for _, tc := range []struct {
		name, data, want string // want: the message after "PATH"
	}{
		{"empty", "", ":1: corrupt state file: unexpected end of JSON input"},
		{"truncated", good[:40], ":1: corrupt state file: unexpected end of JSON input"},
		{"syntax", "{\n\"version\": 1,\n\"ports\": {,}}", `:3: corrupt state file: invalid character ',' looking for beginning of object key string`},
		{"type", "{\"version\": 1,\n\"ports\": {\"a\": {\"settings\": {\"mtu\": \"big\"}}}}", `:2: corrupt state file: json: cannot unmarshal string into Go struct field PortSettings.ports.settings.mtu of type int`},
		{"no version", `{"ports": {}}`, ": corrupt state file: no version"},
		{"version zero", `{"version": 0}`, ": corrupt state file: unsupported version 0 (want 1)"},
		{"trailing", good + "\n{}", ":2: corrupt state file: invalid character '{' after top-level value"},
		{"empty name", `{"version": 1, "ports": {"": {}}}`, ": corrupt state file: a port with an empty name"},
		{"bad mac", `{"version": 1, "ports": {"x": {"spec": {"name": "x", "mac": "nope", "rule": "upstream"}}}}`, `: corrupt state file: port "x": spec: mac "nope" invalid (want six hex bytes like "02:00:00:00:00:01")`},
		{"bad rule", `{"version": 1, "ports": {"x": {"spec": {"name": "x", "mac": "02:00:00:00:00:01", "rule": "r"}}}}`, `: corrupt state file: port "x": spec: unknown rule "r" (want upstream, pre-headroom or pre-frag)`},
		{"bad rx_alloc", `{"version": 1, "ports": {"x": {"spec": {"name": "x", "rx_alloc": "slab"}}}}`, `: corrupt state file: port "x": spec: unknown rx_alloc "slab" (want page-pool-frag, page-pool-page or no-pool)`},
		{"bad xdp", `{"version": 1, "ports": {"x": {"spec": {"name": "x", "xdp": "ebpf:fw"}}}}`, `: corrupt state file: port "x": spec: unknown XDP built-in "ebpf:fw" (want pass, drop, tx, aborted or "")`},
		{"name mismatch", `{"version": 1, "ports": {"x": {"spec": {"name": "y", "mac": "02:00:00:00:00:01", "rule": "upstream"}}}}`, `: corrupt state file: port "x": spec names port "y"`},
		{"empty deleted", `{"version": 1, "deleted": [""]}`, ": corrupt state file: an empty name in deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := StatePath(dir)
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))
			_, err := LoadState(dir)
			require.Error(t, err, "no error")
			assert.Equal(t, path+tc.want, err.Error(), "error\n got %s\nwant", err)
			assert.ErrorIs(t, err, unix.EBADMSG, "errors.Is(%v, EBADMSG) = false", err)
		})
	}
}

// TestLoadStateNewer: a file of a newer format is an error of its own, which the daemon must not
// treat as corruption (it would set the file aside and start without what the newer manad saved):
// a newer version, or a field this manad does not know in a file of its version (a newer manad
// adds fields without a new version while older files stay readable), at any depth.
func TestLoadStateNewer(t *testing.T) {
	for _, data := range []string{
		`{"version": 2, "ports": {}, "tunnels": []}`,
		`{"version": 99, "ports": {"a": {"settings": {"mtu": "a string in version 99"}}}}`,
		`{"version": 1, "portz": {}}`,
		`{"version": 1, "ports": {"x": {"spec": {"name": "x", "mac": "02:00:00:00:00:01", "rule": "upstream", "wol": true}}}}`,
		`{"version": 1, "ports": {}, "deleted": [], "segments": {"defined": {}, "deleted": [], "extra": 1}}`,
	} {
		dir := t.TempDir()
		path := StatePath(dir)
		require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
		_, err := LoadState(dir)
		assert.ErrorIs(t, err, ErrStateNewer, "LoadState(%s) = %v, want ErrStateNewer (ENOTSUP)", data, err)
		assert.ErrorIs(t, err, unix.ENOTSUP, "LoadState(%s) = %v, want ErrStateNewer (ENOTSUP)", data, err)
		assert.NotErrorIs(t, err, unix.EBADMSG, "LoadState(%s) = %v: a newer file reported as corrupt", data, err)
		var e *Error
		if assert.ErrorAs(t, err, &e, "LoadState(%s)", data) {
			assert.Equal(t, path, e.File, "LoadState(%s): the *Error names", data)
			assert.Contains(t, e.Msg, "written by a newer manad", "LoadState(%s)", data)
		}
		got, _ := os.ReadFile(path)
		assert.Equal(t, data, string(got), "LoadState changed the file: %q", got)
	}
}

func TestSetAsideState(t *testing.T) {
	now := time.Date(2026, 12, 1, 23, 4, 5, 0, time.FixedZone("CET", 3600))
	dir := t.TempDir()
	path := StatePath(dir)
	want := []string{ // the same second three times: no copy replaces another
		path + ".bad-20261201T220405Z",
		path + ".bad-20261201T220405Z-2",
		path + ".bad-20261201T220405Z-3",
	}
	for i, w := range want {
		data := fmt.Sprintf(`{"version": 1, "ports": {"a": {"settings": {"mtu": "bad %d"}}}}`, i)
		require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
		kept, err := SetAsideState(dir, now)
		require.NoError(t, err, "SetAsideState #%d = %q, %v; want %q", i, kept, err, w)
		require.Equal(t, w, kept, "SetAsideState #%d = %q, %v; want %q", i, kept, err, w)
		got, err := os.ReadFile(kept)
		assert.NoError(t, err, "kept copy %s", kept)
		assert.Equal(t, data, string(got), "kept copy %s", kept)
		_, err = os.Lstat(path)
		assert.ErrorIs(t, err, fs.ErrNotExist, "state file still there after SetAsideState")
	}
	// Nothing to set aside: ENOENT, and nothing is created.
	kept, err := SetAsideState(dir, now)
	assert.ErrorIs(t, err, unix.ENOENT, "SetAsideState without a file")
	assert.Equal(t, "", kept, "SetAsideState without a file")
	// Every name of that second taken: EEXIST, the file stays where it is.
	full := t.TempDir()
	base := StatePath(full) + ".bad-20261201T220405Z"
	for i := 1; i <= maxSetAside; i++ {
		name := base
		if i > 1 {
			name += "-" + strconv.Itoa(i)
		}
		require.NoError(t, os.WriteFile(name, nil, 0o600))
	}
	require.NoError(t, os.WriteFile(StatePath(full), []byte("{"), 0o600))
	kept, err = SetAsideState(full, now)
	assert.ErrorIs(t, err, unix.EEXIST, "SetAsideState with every name taken")
	assert.Equal(t, "", kept, "SetAsideState with every name taken")
	got, _ := os.ReadFile(StatePath(full))
	assert.Equal(t, "{", string(got), "state file changed by a failed SetAsideState: %q", got)
	// A directory where the file should be (LoadState: EISDIR) is set aside like a file.
	odd := t.TempDir()
	require.NoError(t, os.Mkdir(StatePath(odd), 0o700))
	kept, err = SetAsideState(odd, now)
	assert.NoError(t, err, "SetAsideState of a directory")
	assert.Equal(t, StatePath(odd)+".bad-20261201T220405Z", kept, "SetAsideState of a directory")
}

func TestLoadStateUnreadable(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(StatePath(dir), 0o700)) // a directory where the file should be
	_, err := LoadState(dir)
	assert.ErrorIs(t, err, unix.EISDIR, "LoadState = %v, want EISDIR", err)
}

// TestSaveLeftoverTemp simulates a crash between writing the temporary file and renaming it: the
// previous state stays readable, and the next Save removes the leftover.
func TestSaveLeftoverTemp(t *testing.T) {
	dir := t.TempDir()
	st := sampleState()
	require.NoError(t, st.Save(dir))
	leftover := filepath.Join(dir, ".state.json.123456.tmp")
	require.NoError(t, os.WriteFile(leftover, []byte(`{"version": 1, "ports": {"half`), 0o600))
	got, err := LoadState(dir)
	require.NoError(t, err, "LoadState with a leftover temporary file")
	assert.Empty(t, cmp.Diff(st, got), "state changed by a leftover (-want +got)")
	got.RecordSettings("mana9", PortSettings{MTU: 1500})
	require.NoError(t, got.Save(dir))
	_, err = os.Stat(leftover)
	assert.ErrorIs(t, err, os.ErrNotExist, "leftover still there after Save")
	again, err := LoadState(dir)
	if assert.NoError(t, err, "LoadState after Save") {
		assert.Equal(t, 1500, again.Ports["mana9"].Settings.MTU, "LoadState after Save = %+v", again)
	}
}

// TestSaveFailureKeepsOld checks that a Save that cannot complete leaves the previous file as it
// was and no temporary file behind.
func TestSaveFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	st := sampleState()
	require.NoError(t, st.Save(dir))
	before, _ := os.ReadFile(StatePath(dir))
	// Make the rename fail: a non-empty directory cannot be replaced by a file.
	path := StatePath(dir)
	require.NoError(t, os.Rename(path, path+".bak"))
	require.NoError(t, os.MkdirAll(filepath.Join(path, "x"), 0o700))
	st.RecordSettings("mana0", PortSettings{MTU: 9000})
	if err := st.Save(dir); !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.ENOTEMPTY) {
		assert.ErrorIs(t, err, unix.EEXIST, "Save over a directory = %v, want EISDIR/ENOTEMPTY/EEXIST", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, stateTempPattern))
	assert.Empty(t, left, "temporary files left after a failed Save")
	after, _ := os.ReadFile(path + ".bak")
	assert.Equal(t, string(before), string(after), "the previous state changed")
	// A state dir that is a file: the error is the os error, and nothing panics.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	if err := st.Save(file); !errors.Is(err, unix.ENOTDIR) {
		assert.ErrorIs(t, err, unix.EEXIST, "Save into a file = %v, want ENOTDIR or EEXIST", err)
	}
}

func TestStateRecord(t *testing.T) {
	cfg := Default()
	st := NewState()
	set := PortSettings{MTU: 2000, Queues: 2, RxRing: 256, TxRing: 256, PrivFlags: []string{"full-page-rx"}}
	st.RecordSettings("mana0", set)
	set.PrivFlags[0] = "changed" // the state keeps its own copy
	assert.Equal(t, "full-page-rx", st.Ports["mana0"].Settings.PrivFlags[0], "RecordSettings shares the caller's slice")
	st.RecordDeleted("mana1", cfg)
	st.RecordDeleted("mana0", cfg)
	st.RecordDeleted("mana0", cfg)    // twice: listed once
	st.RecordDeleted("runtime9", cfg) // not in the config: nothing to remember
	assert.Empty(t, cmp.Diff([]string{"mana0", "mana1"}, st.Deleted), "after deletes: Deleted (-want +got)")
	assert.Empty(t, st.Ports, "after deletes: Ports")
	spec, _ := cfg.Port("mana1")
	st.RecordCreated(spec, PortSettings{MTU: 1500})
	assert.Empty(t, cmp.Diff([]string{"mana0"}, st.Deleted), "after re-creating mana1: Deleted (-want +got)")
	assert.NotNil(t, st.Ports["mana1"].Spec, "after re-creating mana1: Ports %v", st.Ports)
	spec.MAC[0] = 0xfe // the state keeps its own copy of the spec too
	assert.NotEqual(t, byte(0xfe), st.Ports["mana1"].Spec.MAC[0], "RecordCreated shares the caller's MAC")
}

func TestNewPortSettings(t *testing.T) {
	got := NewPortSettings(vnic.Settings{MTU: 1500, Queues: 3, RxRing: 512, TxRing: 128}, false)
	want := PortSettings{MTU: 1500, Queues: 3, RxRing: 512, TxRing: 128, PrivFlags: []string{}}
	assert.Empty(t, cmp.Diff(want, got), "(-want +got)")
}

func TestZeroStateAndOddDir(t *testing.T) {
	var st State // the zero value is usable
	st.RecordSettings("a", PortSettings{MTU: 1500})
	st.RecordCreated(DefaultPortSpec("b"), PortSettings{MTU: 1500})
	dir := filepath.Join(t.TempDir(), "glob[*]?dir")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	leftover := filepath.Join(dir, ".state.json.99.tmp")
	require.NoError(t, os.WriteFile(leftover, []byte("{"), 0o600))
	require.NoError(t, st.Save(dir))
	_, err := os.Stat(leftover)
	assert.ErrorIs(t, err, os.ErrNotExist, "leftover in a directory with glob characters not removed")
	got, err := LoadState(dir)
	if assert.NoError(t, err, "LoadState") {
		assert.Len(t, got.Ports, 2, "LoadState = %+v", got)
	}
}
