package config

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/privflag"
)

const (
	// StateFile is the state file's name in the state directory.
	StateFile = "state.json"
	// StateVersion is the state file format this package writes and reads.
	StateVersion = 1
	// stateTempPattern names Save's temporary files (os.CreateTemp replaces the '*').
	stateTempPattern = "." + StateFile + ".*.tmp"
)

// State is what the daemon changed at runtime and must survive a restart, even a kill -9: the
// settings of every port, the full spec of ports created at runtime, and the configuration-file
// ports deleted at runtime. The daemon updates it under its configuration lock after every
// successful change and calls Save; State is not safe for concurrent use.
type State struct {
	// Ports maps a port name to what is remembered about it.
	Ports map[string]PortState
	// Deleted lists the configuration-file ports deleted at runtime, sorted: Merge leaves them
	// out until they are created again.
	Deleted []string
	// NetNS maps the named network namespaces manad created (as `ip netns add` does) to their
	// nsfs inode, so that `port del --netns-too` deletes only a namespace manad made, and only
	// while it is still that one (a name deleted and added again by someone else has another).
	// Inode 0 is a creation under way (saved before the namespace is made), which a start finds
	// only when a crash interrupted it.
	NetNS map[string]uint64
	// Segments is what runtime changes to wire segments left (segment_state.go).
	Segments SegmentsState
}

// PortState is what the state file remembers about one port.
type PortState struct {
	// Spec is the full spec of a port created at runtime; nil for a configuration-file port,
	// whose spec the file gives.
	Spec     *PortSpec
	Settings PortSettings
}

// PortSettings are a port's runtime settings as the state file keeps them: what vnic.Settings
// holds, with the private flags and the XDP program by name so the file stays readable and
// survives a renumbering, plus the administrative state. It is not derived from the port
// schema (portFields): six of its keys are setting rows of the schema, but the rest keep what a
// port changed at run time in a form the schema's rows do not have (NAPI per queue, the whole
// coalescing, the TAP's offloads, the RSS key), and the state file's format stays. A test
// (TestPortSettingsCoverSchema) holds every setting row to a key here.
type PortSettings struct {
	MTU       int      `json:"mtu"`
	Queues    int      `json:"queues"`
	RxRing    int      `json:"rx_ring"`
	TxRing    int      `json:"tx_ring"`
	PrivFlags []string `json:"priv_flags"`
	// XDP is the attached program's name: a built-in ("pass", …), or another program's name
	// ("ebpf:…"), which Merge cannot restore and drops with a note. "" when none.
	XDP     string `json:"xdp"`
	AdminUp bool   `json:"admin_up"`
	// Coalesce is the coalescing (ethtool -C) without the firmware's rx-cqe-nsecs, which the
	// driver never sets. nil in files from before it was kept: the port's spec decides.
	Coalesce *CoalesceSettings `json:"coalesce,omitempty"`
	// Offload is whether the TAP's offloads are on (ethtool -K; the spec's offload key). nil in
	// older files: the spec decides.
	Offload *bool `json:"offload,omitempty"`
	// RSSKey is the Toeplitz key in hex (ethtool -X hkey): mana keeps it in apc->hashkey across
	// detach/attach, so a restart keeps it too. The indirection table is not kept: mana
	// rewrites it on every attach (mana_rss_table_init). "" in older files: the default key.
	RSSKey string `json:"rss_key,omitempty"`
	// NAPI is every queue index's NAPI settings (napi-set, the napi_* keys), kept as the kernel
	// keeps napi_config per queue index. nil when every queue has the zero value and the file
	// gives none (and in older files): the spec's keys decide.
	NAPI *NAPISettings `json:"napi,omitempty"`
}

// NAPISettings are a port's per-queue NAPI settings as the state file keeps them: the value
// most queues have, and the queues that differ from it.
type NAPISettings struct {
	All    NAPIValues        `json:"all"`
	Queues []NAPIQueueValues `json:"queues,omitempty"` // sorted by queue, each differing from All
}

// NAPIValues is one vnic.NAPIConfig, the timeouts in nanoseconds.
type NAPIValues struct {
	DeferHardIRQs       uint32 `json:"defer_hard_irqs"`
	GROFlushTimeoutNs   int64  `json:"gro_flush_timeout_ns"`
	IRQSuspendTimeoutNs int64  `json:"irq_suspend_timeout_ns"`
	Threaded            bool   `json:"threaded,omitempty"`
}

// NAPIQueueValues is one queue index's NAPIValues.
type NAPIQueueValues struct {
	Queue int `json:"queue"`
	NAPIValues
}

func newNAPIValues(c vnic.NAPIConfig) NAPIValues {
	return NAPIValues{DeferHardIRQs: c.DeferHardIRQs, GROFlushTimeoutNs: int64(c.GROFlushTimeout),
		IRQSuspendTimeoutNs: int64(c.IRQSuspendTimeout), Threaded: c.Threaded}
}

func (v NAPIValues) config() vnic.NAPIConfig {
	return vnic.NAPIConfig{DeferHardIRQs: v.DeferHardIRQs, GROFlushTimeout: time.Duration(v.GROFlushTimeoutNs),
		IRQSuspendTimeout: time.Duration(v.IRQSuspendTimeoutNs), Threaded: v.Threaded}
}

// SetNAPI records a port's NAPI settings, one per queue index (vnic.Port.NAPIConfigs); fileNAPI
// is what its spec's napi_* keys give every queue. Nothing is recorded when every queue has the
// zero value and so does fileNAPI: an older manad's file says the same.
func (ps *PortSettings) SetNAPI(queues []vnic.NAPIConfig, fileNAPI vnic.NAPIConfig) {
	ps.NAPI = nil
	count := map[vnic.NAPIConfig]int{}
	for _, c := range queues {
		count[c]++
	}
	if len(count) == 0 || len(count) == 1 && count[vnic.NAPIConfig{}] > 0 && fileNAPI == (vnic.NAPIConfig{}) {
		return
	}
	all := CommonNAPI(queues)
	n := &NAPISettings{All: newNAPIValues(all)}
	for q, c := range queues {
		if c != all {
			n.Queues = append(n.Queues, NAPIQueueValues{Queue: q, NAPIValues: newNAPIValues(c)})
		}
	}
	ps.NAPI = n
}

// CommonNAPI returns the NAPI settings most queues have, the first queue's on a tie (the zero
// value for no queue): what a port's reply and the state file's "all" show.
func CommonNAPI(queues []vnic.NAPIConfig) vnic.NAPIConfig {
	count := map[vnic.NAPIConfig]int{}
	for _, c := range queues {
		count[c]++
	}
	var all vnic.NAPIConfig
	best := 0
	for _, c := range queues { // in queue order: the first queue's wins a tie
		if count[c] > best {
			all, best = c, count[c]
		}
	}
	return all
}

// queues returns the per-queue settings as PortSpec.NAPIQueues holds them.
func (n *NAPISettings) queues() ([]vnic.NAPIConfig, error) {
	for _, q := range n.Queues {
		if q.Queue < 0 || q.Queue >= maxNAPIQueues {
			return nil, fmt.Errorf("napi: queue %d out of range 0..%d", q.Queue, maxNAPIQueues-1)
		}
	}
	out := make([]vnic.NAPIConfig, maxNAPIQueues)
	for q := range out {
		out[q] = n.All.config()
	}
	for _, q := range n.Queues {
		out[q.Queue] = q.config()
	}
	return out, nil
}

// maxNAPIQueues is the most queues a port may have (max_queues' range), so the most
// NAPI settings a state file keeps per port.
const maxNAPIQueues = vnic.MaxQueues

// CoalesceSettings is vnic.Coalesce as the state file keeps it.
type CoalesceSettings struct {
	RxUsecs     uint32 `json:"rx_usecs"`
	RxFrames    uint32 `json:"rx_frames"`
	TxUsecs     uint32 `json:"tx_usecs"`
	TxFrames    uint32 `json:"tx_frames"`
	AdaptiveRx  bool   `json:"adaptive_rx"`
	AdaptiveTx  bool   `json:"adaptive_tx"`
	RxCQEFrames uint32 `json:"rx_cqe_frames"`
}

func newCoalesceSettings(c vnic.Coalesce) *CoalesceSettings {
	return &CoalesceSettings{RxUsecs: c.RxUsecs, RxFrames: c.RxMaxFrames, TxUsecs: c.TxUsecs, TxFrames: c.TxMaxFrames,
		AdaptiveRx: c.AdaptiveRx, AdaptiveTx: c.AdaptiveTx, RxCQEFrames: c.RxCQEFrames}
}

// coalesce returns the settings as vnic takes them, with the probe's rx-cqe-nsecs.
func (c *CoalesceSettings) coalesce() vnic.Coalesce {
	return vnic.Coalesce{RxUsecs: c.RxUsecs, RxMaxFrames: c.RxFrames, TxUsecs: c.TxUsecs, TxMaxFrames: c.TxFrames,
		AdaptiveRx: c.AdaptiveRx, AdaptiveTx: c.AdaptiveTx, RxCQEFrames: c.RxCQEFrames, RxCQENsecs: vnic.DefaultRxCQENsecs}
}

// SetDevice records what the port's TAP and RSS hold besides vnic.Settings: whether the TAP's
// offloads are on and the RSS hash key (RSSKeySize bytes).
func (ps *PortSettings) SetDevice(offload bool, rssKey []byte) {
	ps.Offload = &offload
	ps.RSSKey = hex.EncodeToString(rssKey)
}

// parseRSSKey decodes PortSettings.RSSKey: "" is nil (the default key).
func parseRSSKey(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	key, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("rss_key %q: %w", s, err)
	}
	if len(key) != vnic.RSSKeySize {
		return nil, fmt.Errorf("rss_key has %d bytes, want %d", len(key), vnic.RSSKeySize)
	}
	return key, nil
}

// NewPortSettings returns the settings to record for a port whose vnic settings are s.
func NewPortSettings(s vnic.Settings, adminUp bool) PortSettings {
	ps := PortSettings{
		MTU: s.MTU, Queues: s.Queues, RxRing: s.RxRing, TxRing: s.TxRing,
		PrivFlags: privflag.NamesOf(s.PrivFlags), AdminUp: adminUp,
	}
	if s.Coalesce != (vnic.Coalesce{}) {
		ps.Coalesce = newCoalesceSettings(s.Coalesce)
	}
	ps.XDP = xdpName(s.XDP)
	return ps
}

func (ps PortSettings) clone() PortSettings {
	ps.PrivFlags = slices.Clone(ps.PrivFlags)
	if ps.PrivFlags == nil {
		ps.PrivFlags = []string{}
	}
	if ps.Coalesce != nil {
		c := *ps.Coalesce
		ps.Coalesce = &c
	}
	if ps.Offload != nil {
		o := *ps.Offload
		ps.Offload = &o
	}
	if ps.NAPI != nil {
		n := *ps.NAPI
		n.Queues = slices.Clone(n.Queues)
		ps.NAPI = &n
	}
	return ps
}

// NewState returns an empty state: nothing changed at runtime.
func NewState() *State { return &State{Ports: map[string]PortState{}} }

// RecordSettings remembers the current settings of port name (a configuration-file port or one
// created at runtime).
func (s *State) RecordSettings(name string, set PortSettings) {
	s.init()
	ps := s.Ports[name]
	ps.Settings = set.clone()
	s.Ports[name] = ps
}

// RecordCreated remembers a port created at runtime, with its full spec and current settings. A
// configuration-file port of that name that was deleted is no longer remembered as deleted.
func (s *State) RecordCreated(spec PortSpec, set PortSettings) {
	s.init()
	spec = spec.clone()
	spec.Line = 0
	s.Ports[spec.Name] = PortState{Spec: &spec, Settings: set.clone()}
	s.Deleted = slices.DeleteFunc(s.Deleted, func(n string) bool { return n == spec.Name })
}

// RecordDeleted forgets port name and, when cfg defines it, remembers that it was deleted so the
// next start does not bring it back.
func (s *State) RecordDeleted(name string, cfg *Config) {
	delete(s.Ports, name)
	if _, ok := cfg.Port(name); ok {
		if i, found := slices.BinarySearch(s.Deleted, name); !found {
			s.Deleted = slices.Insert(s.Deleted, i, name)
		}
	}
}

// RecordNetNS remembers that manad created the named namespace whose nsfs inode is ino.
func (s *State) RecordNetNS(name string, ino uint64) {
	if s.NetNS == nil {
		s.NetNS = map[string]uint64{}
	}
	s.NetNS[name] = ino
}

// ForgetNetNS forgets a namespace manad created (it was deleted).
func (s *State) ForgetNetNS(name string) { delete(s.NetNS, name) }

// init makes a zero State usable.
func (s *State) init() {
	if s.Ports == nil {
		s.Ports = map[string]PortState{}
	}
}

// StatePath returns the state file's path in dir.
func StatePath(dir string) string { return filepath.Join(dir, StateFile) }

// ErrStateNewer is what LoadState's error matches (errors.Is) when the state file was written by
// a newer manad: a format this one cannot read but must not destroy, since the user may start the
// newer manad again. It matches unix.ENOTSUP too.
var ErrStateNewer = fmt.Errorf("state file written by a newer manad: %w", unix.ENOTSUP)

// LoadState reads dir's state file. A missing file (or directory) is an empty state, not an
// error: the first start, or a daemon that never changed anything.
//
// The file must be a regular file (not a symbolic link, FIFO, device or directory) of at most
// MaxStateSize bytes; it is read without blocking and without following links.
//
// Errors: an *Error that names the file and matches ErrStateFile (and EINVAL, EISDIR, ELOOP or
// EFBIG) when it is not such a file: the daemon refuses to start on it; the os error when the
// file cannot be read (errors.Is with unix.EACCES, …); an *Error that names the file when its
// contents are unusable: matching ErrStateNewer when a newer manad
// wrote it (a newer version, or a key this manad does not know; the file is then to be left
// alone), else unix.EBADMSG when they are corrupt or
// unparsable (with the line, for a JSON error). The daemon sets an unusable file aside
// (SetAsideState) and starts from the configuration alone; it refuses to start on a newer one.
func LoadState(dir string) (*State, error) {
	path := StatePath(dir)
	data, err := readStateFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return parseState(path, data)
}

// Save writes the state to dir's state file atomically: it writes a temporary file in dir (its
// blocks allocated first, as Reserve does), fsyncs it, renames it over the state file and fsyncs
// dir, so after a crash at any point the file holds either the previous state or this one, never
// a mix. It creates dir (0755) when missing and removes temporary files an earlier crash left
// behind.
//
// Errors: the os error of the step that failed (errors.Is with unix.ENOSPC, unix.EACCES, …); the
// previous state file is then untouched.
func (s *State) Save(dir string) error {
	data, err := s.marshal()
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	r, err := Reserve(dir, int64(len(data)))
	if err != nil {
		return err
	}
	f := r.f
	r.f = nil
	return r.write(f, data)
}

// badStateTime formats the time in a set-aside state file's name: UTC, sortable, no colons.
const badStateTime = "20060102T150405Z"

// maxSetAside bounds the names SetAsideState tries when earlier copies of the same second exist.
const maxSetAside = 100

// SetAsideState renames dir's state file, which the daemon cannot use, to
// state.json.bad-<time> (UTC; "-2", "-3", … appended when that name is taken: an earlier copy is
// never replaced) and returns the new path, so that the daemon can start from the configuration
// without destroying what the file holds. The rename is made durable (dir is fsynced).
//
// Errors: the os error of the rename (errors.Is with unix.ENOENT when there is no state file,
// unix.EROFS, unix.EACCES, …), unix.EEXIST when every candidate name is taken: the file is then
// where it was and "" is returned. An error of the fsync after the rename comes with the new path.
func SetAsideState(dir string, now time.Time) (string, error) {
	path := StatePath(dir)
	base := path + ".bad-" + now.UTC().Format(badStateTime)
	for i := 1; i <= maxSetAside; i++ {
		kept := base
		if i > 1 {
			kept += "-" + strconv.Itoa(i)
		}
		err := renameNoReplace(path, kept)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("state: set aside %s: %w", path, &os.LinkError{Op: "rename", Old: path, New: kept, Err: err})
		}
		if err := syncDir(dir); err != nil {
			return kept, fmt.Errorf("state: set aside %s as %s: %w", path, kept, err)
		}
		return kept, nil
	}
	return "", fmt.Errorf("state: set aside %s: %d copies of %s exist: %w", path, maxSetAside, now.UTC().Format(badStateTime), unix.EEXIST)
}

// renameNoReplace renames old to new unless new exists (EEXIST): an earlier copy is evidence
// too. A file system without RENAME_NOREPLACE (EINVAL) gets a check then a plain rename; only a
// concurrent writer of the same name could slip between them, and the state directory has none.
func renameNoReplace(old, new string) error {
	err := unix.Renameat2(unix.AT_FDCWD, old, unix.AT_FDCWD, new, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	if _, err := os.Lstat(new); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			return unix.EEXIST
		}
		return err
	}
	return unix.Rename(old, new)
}

// removeStaleTemps removes the temporary files of Saves a crash interrupted, and leaves those of
// live reservations (locked: see Reserve) alone. It is best effort: a leftover only costs space
// and never shadows the state file.
func removeStaleTemps(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if ok, _ := filepath.Match(stateTempPattern, e.Name()); !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = os.Remove(path)
		}
		unix.Close(fd)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// The state file's JSON form.
type (
	stateJSON struct {
		Version int                      `json:"version"`
		Ports   map[string]portStateJSON `json:"ports"`
		Deleted []string                 `json:"deleted"`
		// Absent in files of older manads (and when manad created no namespace).
		NetNS map[string]uint64 `json:"netns_created,omitempty"`
		// Absent when no segment was changed at runtime (and in older files).
		Segments *segmentsJSON `json:"segments,omitempty"`
	}
	portStateJSON struct {
		Spec     *specJSON    `json:"spec,omitempty"`
		Settings PortSettings `json:"settings"`
	}
)

func (s *State) marshal() ([]byte, error) {
	out := stateJSON{Version: StateVersion, Ports: map[string]portStateJSON{}, Deleted: []string{}}
	for name, ps := range s.Ports {
		p := portStateJSON{Settings: ps.Settings.clone()}
		if sp := ps.Spec; sp != nil {
			j, err := newSpecJSON(sp)
			if err != nil {
				return nil, err
			}
			p.Spec = j
		}
		out.Ports[name] = p
	}
	if len(s.NetNS) > 0 {
		out.NetNS = maps.Clone(s.NetNS)
	}
	out.Deleted = append(out.Deleted, s.Deleted...)
	slices.Sort(out.Deleted)
	out.Deleted = slices.Compact(out.Deleted)
	out.Segments = s.Segments.toJSON()
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// parseState decodes a state file's contents; path names it in errors.
func parseState(path string, data []byte) (*State, error) {
	corrupt := func(line int, format string, args ...any) error {
		return &Error{File: path, Line: line, Msg: "corrupt state file: " + fmt.Sprintf(format, args...), Err: unix.EBADMSG}
	}
	jsonErr := func(err error) error {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return corrupt(lineAt(data, se.Offset), "%v", err)
		case errors.As(err, &te):
			return corrupt(lineAt(data, te.Offset), "%v", err)
		}
		return corrupt(0, "%v", err)
	}
	// The version first, leniently, so a newer format is reported as such rather than as an
	// unknown field.
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonErr(err)
	}
	switch {
	case head.Version == nil:
		return nil, corrupt(0, "no version")
	case *head.Version > StateVersion:
		return nil, &Error{File: path, Msg: fmt.Sprintf("version %d was written by a newer manad (this one reads version %d)", *head.Version, StateVersion), Err: ErrStateNewer}
	case *head.Version != StateVersion:
		return nil, corrupt(0, "unsupported version %d (want %d)", *head.Version, StateVersion)
	}
	var in stateJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil { // data after the object was refused by Unmarshal above
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			// A key this manad does not know, in a file of its version: a newer manad's field
			// (fields are added without a new version when older files stay readable), or a
			// hand edit. Setting the file aside would start without what the newer manad
			// saved, so it is left alone, as a file of a newer version is. encoding/json has
			// no error type for it: its message is the interface.
			return nil, &Error{File: path, Msg: fmt.Sprintf("field %s is unknown to this manad (state version %d): written by a newer manad? The file is left as it is", field, StateVersion), Err: ErrStateNewer}
		}
		return nil, jsonErr(err)
	}
	st := NewState()
	for _, name := range slices.Sorted(maps.Keys(in.Ports)) {
		p := in.Ports[name]
		if name == "" {
			return nil, corrupt(0, "a port with an empty name")
		}
		ps := PortState{Settings: p.Settings.clone()}
		if _, err := parseRSSKey(ps.Settings.RSSKey); err != nil {
			return nil, corrupt(0, "port %q: settings: %v", name, err)
		}
		if n := ps.Settings.NAPI; n != nil {
			if _, err := n.queues(); err != nil {
				return nil, corrupt(0, "port %q: settings: %v", name, err)
			}
		}
		if p.Spec != nil {
			spec, err := p.Spec.spec()
			var unknown *unknownSpecKeyError
			if errors.As(err, &unknown) {
				// As an unknown field elsewhere: a newer manad's, left alone.
				return nil, &Error{File: path, Msg: fmt.Sprintf("port %q: spec: key %q is unknown to this manad (state version %d): written by a newer manad? The file is left as it is", name, unknown.key, StateVersion), Err: ErrStateNewer}
			}
			if err != nil {
				return nil, corrupt(0, "port %q: spec: %v", name, err)
			}
			if spec.Name != name {
				return nil, corrupt(0, "port %q: spec names port %q", name, spec.Name)
			}
			ps.Spec = &spec
		}
		st.Ports[name] = ps
	}
	for _, name := range in.Deleted {
		if name == "" {
			return nil, corrupt(0, "an empty name in deleted")
		}
	}
	st.Deleted = slices.Compact(slices.Sorted(slices.Values(in.Deleted)))
	for name, ino := range in.NetNS {
		if name == "" {
			return nil, corrupt(0, "an empty name in netns_created")
		}
		st.RecordNetNS(name, ino)
	}
	segs, err := in.Segments.state()
	if err != nil {
		return nil, corrupt(0, "segments: %v", err)
	}
	st.Segments = segs
	return st, nil
}

// lineAt returns the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}

// Port is a port the daemon creates at startup: the result of Merge.
type Port struct {
	// Spec is the port's spec with the settings it starts with: the state file's, when they
	// apply, else the configuration's.
	Spec PortSpec
	// AdminUp is the administrative state the state file remembers (false for a port it does
	// not know).
	AdminUp bool
	// Runtime is set for a port created at runtime, whose spec comes from the state file.
	Runtime bool
	// Restored is set when Spec's settings came from the state file.
	Restored bool
}

// Merge combines the configuration with the state file into the ports the daemon creates at
// startup: the configuration's ports in file order, less those deleted at runtime, then the ports
// created at runtime, by name. The state's runtime settings win over the file's, each port's as a
// whole when they are valid for its (current) spec.
//
// Merge never fails: what in the state cannot be used is left out and explained in the notes,
// which the daemon logs: settings invalid for the port (the file changed, say max_mtu, since they
// were saved: the file's settings are used), an XDP program that is not a built-in (not
// restored; the rest of the settings are), a runtime port whose name the file now defines (the
// file's spec is used), a runtime port whose spec is invalid or whose MAC another port has
// (dropped), settings for a port that no longer exists (ignored). cfg and st are not modified; a
// nil st is an empty state.
func Merge(cfg *Config, st *State) (ports []Port, notes []error) {
	if st == nil {
		st = NewState()
	}
	note := func(format string, args ...any) {
		notes = append(notes, fmt.Errorf("state: "+format, args...))
	}
	apply := func(p *Port, ps PortState) {
		p.AdminUp = ps.Settings.AdminUp
		spec, dropped, err := withSettings(p.Spec, ps.Settings)
		if dropped != "" {
			note("port %q: XDP program %q not restored (only built-in programs persist)", p.Spec.Name, dropped)
		}
		if err != nil {
			note("port %q: saved settings not applied: %v", p.Spec.Name, err)
			return
		}
		p.Spec, p.Restored = spec, true
	}
	macs := map[string]string{}
	for _, spec := range cfg.Ports {
		ps, known := st.Ports[spec.Name]
		if !known && slices.Contains(st.Deleted, spec.Name) {
			continue
		}
		p := Port{Spec: spec.clone()}
		if known {
			if ps.Spec != nil && !sameHardware(*ps.Spec, spec) {
				note("port %q was created at runtime but %s now defines it differently; using the file's definition", spec.Name, cfg.File)
			}
			apply(&p, ps)
		}
		macs[string(p.Spec.MAC)] = p.Spec.Name
		ports = append(ports, p)
	}
	for _, name := range slices.Sorted(maps.Keys(st.Ports)) {
		if _, ok := cfg.Port(name); ok {
			continue
		}
		ps := st.Ports[name]
		if ps.Spec == nil {
			note("settings of port %q ignored: %s has no such port", name, cfg.File)
			continue
		}
		p := Port{Spec: ps.Spec.clone(), Runtime: true}
		p.Spec.Line = 0
		if err := p.Spec.Validate(); err != nil {
			note("port %q created at runtime dropped: %v", name, err)
			continue
		}
		if other, dup := macs[string(p.Spec.MAC)]; dup {
			note("port %q created at runtime dropped: its mac %s is port %q's", name, p.Spec.MAC, other)
			continue
		}
		p.Spec.normalize()
		apply(&p, ps)
		macs[string(p.Spec.MAC)] = name
		ports = append(ports, p)
	}
	return ports, notes
}

// withSettings returns spec with the saved settings set applied and validated. An XDP program
// that is not a built-in is left out and its name returned in dropped.
func withSettings(spec PortSpec, set PortSettings) (out PortSpec, dropped string, err error) {
	out = spec.clone()
	out.MTU, out.Queues, out.RxRing, out.TxRing = set.MTU, set.Queues, set.RxRing, set.TxRing
	if out.PrivFlags, err = privflag.Parse(set.PrivFlags); err != nil {
		return spec, "", err
	}
	if set.Coalesce != nil {
		out.Coalesce = set.Coalesce.coalesce()
	}
	if set.Offload != nil {
		out.Offload = *set.Offload
	}
	if set.RSSKey != "" {
		if out.RSSKey, err = parseRSSKey(set.RSSKey); err != nil {
			return spec, "", err
		}
	}
	if set.NAPI != nil {
		if out.NAPIQueues, err = set.NAPI.queues(); err != nil {
			return spec, "", err
		}
	}
	prog, bad := parseXDP(set.XDP)
	if bad != nil {
		dropped = set.XDP
	}
	out.XDP = prog
	if err := out.Validate(); err != nil {
		return spec, dropped, err
	}
	out.normalize()
	return out, dropped, nil
}
