package config

import (
	"fmt"
	"github.com/manad/manad/genl/wire"
	"maps"
	"math"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// SegmentsState is what the state file remembers of runtime changes to wire segments (manactl
// segment add|del, segment uplink add|del), apart from the ports: the full spec of every segment
// created or changed at runtime, and the configuration-file segments deleted at runtime. Like a
// port's runtime settings, a remembered spec wins over the configuration file's table as a whole.
type SegmentsState struct {
	// Defined maps a segment name to its spec as the runtime changes left it.
	Defined map[string]SegmentSpec
	// Deleted lists the configuration-file segments deleted at runtime, sorted: MergeSegments
	// leaves them out until they are defined again.
	Deleted []string
}

// RecordSegment remembers segment spec as it is now (created, or its uplinks changed). A
// configuration-file segment of that name that was deleted is no longer remembered as deleted.
func (s *SegmentsState) RecordSegment(spec SegmentSpec) {
	if s.Defined == nil {
		s.Defined = map[string]SegmentSpec{}
	}
	spec.Uplinks = slices.Clone(spec.Uplinks)
	spec.Line = 0
	s.Defined[spec.Name] = spec
	s.Deleted = slices.DeleteFunc(s.Deleted, func(n string) bool { return n == spec.Name })
}

// RecordSegmentDeleted forgets segment name and, when cfg defines it, remembers that it was
// deleted so the next start does not bring it back.
func (s *SegmentsState) RecordSegmentDeleted(name string, cfg *Config) {
	delete(s.Defined, name)
	for _, c := range cfg.Segments {
		if c.Name == name {
			if i, found := slices.BinarySearch(s.Deleted, name); !found {
				s.Deleted = slices.Insert(s.Deleted, i, name)
			}
			return
		}
	}
}

func (s *SegmentsState) empty() bool { return len(s.Defined) == 0 && len(s.Deleted) == 0 }

// ValidateSegmentName checks a segment name as a [[segment]] table's. Errors: EINVAL with the
// reason.
func ValidateSegmentName(name string) error {
	if msg := checkSegment(name); msg != "" {
		return nlerr.New(unix.EINVAL, "segment name %q %s", name, msg)
	}
	return nil
}

// Validate checks an uplink as a [[segment]] table's uplinks entry. Errors: EINVAL with the
// reason.
func (u UplinkSpec) Validate() error {
	if msg := checkIfName(u.Dev); msg != "" {
		return nlerr.New(unix.EINVAL, "uplink dev %q %s", u.Dev, msg)
	}
	if msg := checkNetNS(u.NetNS); msg != "" {
		return nlerr.New(unix.EINVAL, "uplink netns %q %s", u.NetNS, msg)
	}
	if !wire.ValidUplinkAttach(u.Attach) {
		return nlerr.New(unix.EINVAL, "uplink attach %q is not one of \"auto\", \"af_packet\", \"af_xdp\"", u.Attach)
	}
	if msg := checkUplinkBusyPoll(u.BusyPoll); msg != "" {
		return nlerr.New(unix.EINVAL, "uplink %s: %s", u, msg)
	}
	return nil
}

// Validate checks a segment spec made at runtime against the bounds of a [[segment]] table.
// Errors: EINVAL (ENOSPC for more than MaxUplinks uplinks) with the reason.
func (s SegmentSpec) Validate() error {
	if err := ValidateSegmentName(s.Name); err != nil {
		return err
	}
	switch {
	case s.MTU != 0 && (s.MTU < 68 || s.MTU > 65535):
		return nlerr.New(unix.EINVAL, "segment %s: mtu %d out of range 68..65535", s.Name, s.MTU)
	case s.AgeingTime < 0:
		return nlerr.New(unix.EINVAL, "segment %s: ageing time %v negative (0 means never)", s.Name, s.AgeingTime)
	case s.StormPPS < 0:
		return nlerr.New(unix.EINVAL, "segment %s: storm_pps %d negative (0 means no limit)", s.Name, s.StormPPS)
	case len(s.Uplinks) > MaxUplinks:
		return nlerr.New(unix.ENOSPC, "segment %s: %d uplinks, at most %d", s.Name, len(s.Uplinks), MaxUplinks)
	}
	seen := map[UplinkSpec]bool{}
	for _, u := range s.Uplinks {
		if err := u.Validate(); err != nil {
			return err
		}
		if seen[u.ID()] {
			return nlerr.New(unix.EEXIST, "segment %s: uplink %s listed twice", s.Name, u)
		}
		seen[u.ID()] = true
	}
	return nil
}

// MergeSegments combines the configuration's [[segment]] tables with the state file into the
// segments the daemon defines at startup: the configuration's in file order, less those deleted
// at runtime and with the state's spec where runtime changes left one, then the segments created
// at runtime, by name.
//
// MergeSegments never fails: what in the state cannot be used is left out and explained in the
// notes, which the daemon logs: a runtime segment whose spec is invalid, an uplink another
// segment already uses (the first keeps it), runtime segments past MaxSegments. cfg and st are not modified; a nil st is an empty
// state.
func MergeSegments(cfg *Config, st *State) (segs []SegmentSpec, notes []error) {
	if st == nil {
		st = NewState()
	}
	ss := &st.Segments
	note := func(format string, args ...any) { notes = append(notes, fmt.Errorf("state: "+format, args...)) }
	used := map[UplinkSpec]string{}
	add := func(spec SegmentSpec) {
		spec.Uplinks = slices.DeleteFunc(slices.Clone(spec.Uplinks), func(u UplinkSpec) bool {
			if other, dup := used[u.ID()]; dup {
				note("segment %q: uplink %s dropped: segment %q uses it", spec.Name, u, other)
				return true
			}
			used[u.ID()] = spec.Name
			return false
		})
		segs = append(segs, spec)
	}
	inCfg := map[string]bool{}
	for _, c := range cfg.Segments {
		inCfg[c.Name] = true
		if r, ok := ss.Defined[c.Name]; ok {
			r.Line = c.Line
			if err := r.Validate(); err != nil {
				note("segment %q: runtime changes not applied: %v", c.Name, err)
				add(c)
				continue
			}
			add(r)
			continue
		}
		if slices.Contains(ss.Deleted, c.Name) {
			continue
		}
		add(c)
	}
	for _, name := range slices.Sorted(maps.Keys(ss.Defined)) {
		if inCfg[name] {
			continue
		}
		r := ss.Defined[name]
		if err := r.Validate(); err != nil {
			note("segment %q created at runtime dropped: %v", name, err)
			continue
		}
		if len(segs) >= MaxSegments {
			// The state file was edited, or the configuration gained tables since: the
			// configuration's segments come first.
			note("segment %q created at runtime dropped: %d segments defined, at most %d", name, len(segs), MaxSegments)
			continue
		}
		add(r)
	}
	return segs, notes
}

// The state file's JSON form of SegmentsState: "segments" = {"defined": {NAME: SEGMENT}, "deleted":
// [NAME]}, absent when there is nothing to remember (older files read the same).
type (
	segmentsJSON struct {
		Defined map[string]segmentJSON `json:"defined"`
		Deleted []string               `json:"deleted"`
	}
	segmentJSON struct {
		MTU      int          `json:"mtu"`
		AgeingMs int64        `json:"ageing_ms"`
		StormPPS int64        `json:"storm_pps"`
		Uplinks  []uplinkJSON `json:"uplinks"`
	}
	uplinkJSON struct {
		Dev    string `json:"dev"`
		NetNS  string `json:"netns"`
		Attach string `json:"attach,omitempty"`
		// BusyPollUs is UplinkSpec.BusyPoll in microseconds, absent when off.
		BusyPollUs int64 `json:"busy_poll_us,omitempty"`
	}
)

func uplinkToJSON(u UplinkSpec) uplinkJSON {
	return uplinkJSON{Dev: u.Dev, NetNS: u.NetNS, Attach: u.Attach, BusyPollUs: u.BusyPoll.Microseconds()}
}

// spec converts back; a busy_poll_us out of range is left to Validate (MergeSegments), but one
// that does not fit a time.Duration cannot be represented.
func (j uplinkJSON) spec() (UplinkSpec, error) {
	if j.BusyPollUs < 0 || j.BusyPollUs > math.MaxInt64/int64(time.Microsecond) {
		return UplinkSpec{}, fmt.Errorf("uplink %s: busy_poll_us %d out of range", j.Dev, j.BusyPollUs)
	}
	return UplinkSpec{Dev: j.Dev, NetNS: j.NetNS, Attach: j.Attach, BusyPoll: time.Duration(j.BusyPollUs) * time.Microsecond}, nil
}

// toJSON returns the JSON form, nil when empty.
func (s *SegmentsState) toJSON() *segmentsJSON {
	if s.empty() {
		return nil
	}
	out := &segmentsJSON{Defined: map[string]segmentJSON{}, Deleted: slices.Compact(slices.Sorted(slices.Values(s.Deleted)))}
	for name, spec := range s.Defined {
		j := segmentJSON{MTU: spec.MTU, AgeingMs: spec.AgeingTime.Milliseconds(), StormPPS: spec.StormPPS, Uplinks: []uplinkJSON{}}
		for _, u := range spec.Uplinks {
			j.Uplinks = append(j.Uplinks, uplinkToJSON(u))
		}
		out.Defined[name] = j
	}
	return out
}

// state converts the JSON form back; only what cannot be represented is an error (values out of
// range are MergeSegments' business).
func (j *segmentsJSON) state() (SegmentsState, error) {
	var s SegmentsState
	if j == nil {
		return s, nil
	}
	for name, sj := range j.Defined {
		if name == "" {
			return s, fmt.Errorf("a segment with an empty name")
		}
		if sj.AgeingMs > math.MaxInt64/int64(time.Millisecond) || sj.AgeingMs < 0 {
			return s, fmt.Errorf("segment %q: ageing_ms %d out of range", name, sj.AgeingMs)
		}
		spec := SegmentSpec{Name: name, MTU: sj.MTU, AgeingTime: time.Duration(sj.AgeingMs) * time.Millisecond, StormPPS: sj.StormPPS}
		for _, uj := range sj.Uplinks {
			u, err := uj.spec()
			if err != nil {
				return s, fmt.Errorf("segment %q: %w", name, err)
			}
			spec.Uplinks = append(spec.Uplinks, u)
		}
		if s.Defined == nil {
			s.Defined = map[string]SegmentSpec{}
		}
		s.Defined[name] = spec
	}
	for _, name := range j.Deleted {
		if name == "" {
			return s, fmt.Errorf("an empty name in the deleted segments")
		}
	}
	s.Deleted = slices.Compact(slices.Sorted(slices.Values(j.Deleted)))
	return s, nil
}
