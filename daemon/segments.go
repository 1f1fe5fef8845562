package daemon

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/metrics"
	"github.com/manad/manad/daemon/uplink"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/genl/wire"
)

// segDef is a defined wire segment — a [[segment]] table, or one created at runtime (manactl
// segment add), as config.MergeSegments and the runtime changes leave it — with its running
// uplinks. ups[i] runs spec.Uplinks[i]; nil when it could not start (no rtnetlink socket in its
// namespace), which is reported as gone with the error in errs[i].
type segDef struct {
	spec config.SegmentSpec
	ups  []*uplink.Uplink
	errs []string
}

// segment returns the wire segment named name with the settings its definition gives (or the
// defaults), creating it on first use. Caller holds the configuration lock.
func (d *Daemon) segment(name string) *datapath.Segment {
	seg := d.segments.Get(name)
	spec := config.DefaultSegmentSpec(name)
	if def := d.segDef(name); def != nil {
		spec = def.spec
	}
	seg.SetAgeingTime(spec.AgeingTime)
	seg.SetStormLimit(spec.StormPPS)
	return seg
}

// segDef returns the definition of segment name, or nil. Caller holds the configuration lock.
func (d *Daemon) segDef(name string) *segDef {
	for _, def := range d.segDefs {
		if def.spec.Name == name {
			return def
		}
	}
	return nil
}

// startUplinks defines the segments of the configuration and the state file
// (config.MergeSegments) and starts their uplinks. It runs once, at start, before the ports are
// created: the named namespaces manad created are reconciled with /run/netns first
// (reconcileNetNS), so that neither the uplinks nor the ports open what a crash left half-made.
// Caller holds the configuration lock.
func (d *Daemon) startUplinks(ctx context.Context) {
	d.reconcileNetNS()
	specs, notes := config.MergeSegments(d.cfg, d.state)
	for _, n := range notes {
		d.log.Warn(n.Error())
	}
	for _, spec := range specs {
		def := &segDef{spec: spec}
		d.segDefs = append(d.segDefs, def)
		d.segment(spec.Name)
		for _, us := range spec.Uplinks {
			d.startUplink(ctx, def, us)
		}
	}
}

// startUplink starts one uplink of def and appends it to def.ups. One whose namespace or device
// is missing or down starts anyway and attaches when they are there; one that cannot start at
// all (no rtnetlink socket) is logged and kept as nil, with its error. Caller holds the
// configuration lock.
func (d *Daemon) startUplink(ctx context.Context, def *segDef, us config.UplinkSpec) error {
	u, err := uplink.Start(ctx, uplink.Config{Dev: us.Dev, NetNS: us.NetNS, MTU: def.spec.MTU, Segment: d.segment(def.spec.Name), Logger: d.log, Attach: us.Attach,
		BusyPoll: us.BusyPoll, Pollers: d.segments.Pollers()})
	def.ups = append(def.ups, u)
	if err != nil {
		d.log.Error("uplink not started", "segment", def.spec.Name, "uplink", us.String(), "err", err)
		def.errs = append(def.errs, err.Error())
		return err
	}
	def.errs = append(def.errs, "")
	return nil
}

// stopUplinks closes every uplink (each logs its counters) and logs each segment's counters.
func (d *Daemon) stopUplinks() {
	d.mu.Lock()
	defs := d.segDefs
	d.segDefs = nil
	d.mu.Unlock()
	for _, def := range defs {
		for _, u := range def.ups {
			if u != nil {
				u.Close()
			}
		}
	}
	for _, s := range d.segments.List() {
		d.log.Info("segment counters", "segment", s.Name(), "stats", fmt.Sprintf("%+v", s.Stats()))
	}
}

// Uplinks returns the state of every running uplink, in definition order.
func (d *Daemon) Uplinks() []uplink.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []uplink.Status
	for _, def := range d.segDefs {
		for _, u := range def.ups {
			if u != nil {
				out = append(out, u.Status())
			}
		}
	}
	return out
}

// uplinkState names an uplink state as SEGMENT_GET reports it.
func uplinkState(s uplink.State) string {
	switch s {
	case uplink.Up:
		return wire.UplinkAttached
	case uplink.Down:
		return wire.UplinkDown
	case uplink.Failed:
		return wire.UplinkReattaching
	}
	return wire.UplinkGone
}

// uplinkInfo is what SEGMENT_GET reports of uplink i of def. Caller holds the configuration lock.
func (def *segDef) uplinkInfo(i int) genl.UplinkInfo {
	us := def.spec.Uplinks[i]
	info := genl.UplinkInfo{Dev: us.Dev, NetNS: us.NetNS, State: wire.UplinkGone, Error: def.errs[i],
		BusyPollUs: uint32(us.BusyPoll / time.Microsecond)}
	u := def.ups[i]
	if u == nil {
		return info
	}
	st, s := u.Status(), u.Stats()
	info.State, info.Error, info.Kind = uplinkState(st.State), st.Err, st.Kind
	info.Ifindex, info.MTU, info.MaxPortMTU, info.Changes = uint32(st.Index), uint32(max(st.MTU, 0)), uint32(max(st.MaxPortMTU, 0)), st.Changes
	info.RxPackets, info.RxBytes, info.TxPackets, info.TxBytes = s.RxFrames, s.RxBytes, s.TxFrames, s.TxBytes
	info.RxRunts, info.RxOversize, info.RxTruncated = s.RxRunts, s.RxOversize, s.RxTruncated
	info.TxErrors, info.TxDown, info.TxMTUDrops = s.TxErrors, s.TxDown, s.TxMTUDrops
	info.RxSegmented, info.RxCsumFilled, info.Attaches = s.RxSegmented, s.RxChecksumFilled, s.Attaches
	info.Attach, info.TxAggregates, info.TxWhole, info.RxWhole = st.Attach, s.TxAggregates, s.TxWhole, s.RxWhole
	info.XDPMode, info.Fallback = st.XDPMode, st.Fallback
	info.Polls, info.PollHits, info.PollNanos = s.Polling.Polls, s.Polling.Hits, uint64(s.Polling.CPUTime)
	return info
}

// segmentNames are the segments there are: the defined ones, then those ports use without a
// definition, by name. Caller holds the configuration lock.
func (d *Daemon) segmentNames() []string {
	var names []string
	for _, def := range d.segDefs {
		names = append(names, def.spec.Name)
	}
	var implicit []string
	for _, p := range d.ports {
		if d.segDef(p.spec.Segment) == nil {
			implicit = append(implicit, p.spec.Segment)
		}
	}
	slices.Sort(implicit)
	return append(names, slices.Compact(implicit)...)
}

// segmentPorts are the names of the ready ports on segment name that caller c may see (as
// Ports: an admin in manad's namespace sees all, others their namespace's), sorted. Caller holds
// the configuration lock.
func (d *Daemon) segmentPorts(name string, c *genl.Caller) []string {
	all := c == nil
	if c != nil && c.Admin {
		self, err := selfNetNS()
		all = err == nil && c.NetNS == self
	}
	var out []string
	for _, p := range d.ports {
		if p.spec.Segment == name && p.isReady() && (all || p.ns == c.NetNS) {
			out = append(out, p.spec.Name)
		}
	}
	slices.Sort(out)
	return out
}

// segmentInfo is segment name's full state as c sees it (nil: everything, for notifications,
// which only reach manad's namespace), or ENOENT when there is no such segment. Caller holds the
// configuration lock.
func (d *Daemon) segmentInfo(name string, c *genl.Caller) (genl.SegmentInfo, error) {
	def := d.segDef(name)
	ports := d.segmentPorts(name, nil)
	if def == nil && len(ports) == 0 {
		return genl.SegmentInfo{}, nlerr.New(unix.ENOENT, "no segment %s", name)
	}
	spec := config.DefaultSegmentSpec(name)
	origin := "ports"
	if def != nil {
		spec, origin = def.spec, "runtime"
		if slices.ContainsFunc(d.cfg.Segments, func(s config.SegmentSpec) bool { return s.Name == name }) {
			origin = "config"
		}
	}
	// The segment as it is: its settings were applied when it was defined (d.segment).
	seg := d.segments.Get(name)
	st := seg.Stats()
	info := genl.SegmentInfo{
		Name: name, MTU: uint32(spec.MTU), StormPPS: uint64(max(spec.StormPPS, 0)), AgeingMs: uint64(max(spec.AgeingTime.Milliseconds(), 0)),
		Origin: origin, Ports: d.segmentPorts(name, c), Learnt: uint32(len(seg.FDB())), Floods: st.Floods, StormDrops: st.StormDrops,
		Uplinks: []genl.UplinkInfo{},
	}
	if info.Ports == nil {
		info.Ports = []string{}
	}
	if def != nil {
		for i := range def.spec.Uplinks {
			info.Uplinks = append(info.Uplinks, def.uplinkInfo(i))
		}
	}
	return info, nil
}

// notifySegment announces a new or changed segment (genl.EventNew, EventChange) or its
// deletion (EventDel, with the state it had). Caller holds the configuration lock.
func (d *Daemon) notifySegment(ev genl.Event, info genl.SegmentInfo) {
	self, err := selfNetNS()
	if err != nil {
		d.log.Error("segment notification not sent: manad's network namespace is unknown", "segment", info.Name, "err", err)
		return
	}
	d.srv.NotifySegment(ev, info, self)
}

// recordSegment remembers def's spec in the state file. Caller holds the configuration lock.
func (d *Daemon) recordSegment(def *segDef) {
	d.state.Segments.RecordSegment(def.spec)
	d.saveState()
}

// logSegmentOp logs a segment reconfiguration as the port ones are logged.
func (d *Daemon) logSegmentOp(c genl.Caller, op, segment string, start time.Time, err error, extra ...any) {
	attrs := append([]any{"segment", segment, "op", op, "uid", c.UID, "pid", c.PID, "took", time.Since(start)}, extra...)
	if err != nil {
		d.log.Warn("reconfigure", append(attrs, "result", "error", "err", err)...)
		return
	}
	d.log.Info("reconfigure", append(attrs, "result", "ok")...)
}

// Segments lists every segment (SEGMENT_GET dump).
func (b *backend) Segments(ctx context.Context, c genl.Caller) ([]genl.SegmentInfo, error) {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []genl.SegmentInfo
	for _, name := range d.segmentNames() {
		if info, err := d.segmentInfo(name, &c); err == nil {
			out = append(out, info)
		}
	}
	return out, nil
}

// Segment returns one segment (SEGMENT_GET). Errors: ENOENT.
func (b *backend) Segment(ctx context.Context, c genl.Caller, name string) (genl.SegmentInfo, error) {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.segmentInfo(name, &c)
}

// segmentSpec turns a SEGMENT_NEW request into a spec, defaults filled in. Errors: EINVAL for
// values no spec can hold.
func segmentSpec(s genl.SegmentSpec) (config.SegmentSpec, error) {
	spec := config.DefaultSegmentSpec(s.Name)
	spec.MTU = int(s.MTU)
	if s.StormPPS > math.MaxInt64 {
		return spec, nlerr.New(unix.EINVAL, "storm_pps %d out of range", s.StormPPS)
	}
	spec.StormPPS = int64(s.StormPPS)
	if s.AgeingSet {
		if s.AgeingMs > uint64(math.MaxInt64/int64(time.Millisecond)) {
			return spec, nlerr.New(unix.EINVAL, "ageing time %d ms out of range", s.AgeingMs)
		}
		spec.AgeingTime = time.Duration(s.AgeingMs) * time.Millisecond
	}
	return spec, spec.Validate()
}

// segmentRoom reports ENOSPC, with an extack message, when config.MaxSegments segments are
// defined already. Caller holds the configuration lock.
func (d *Daemon) segmentRoom() error {
	if n := len(d.segDefs); n >= config.MaxSegments {
		return nlerr.New(unix.ENOSPC, "%d segments defined, at most %d", n, config.MaxSegments)
	}
	return nil
}

// CreateSegment defines a segment at runtime (SEGMENT_NEW); the state file remembers it. A
// segment ports already use without a definition gets one (its settings apply at once). Errors:
// EINVAL, EEXIST for a defined segment, ENOSPC past config.MaxSegments defined segments,
// ESHUTDOWN.
func (b *backend) CreateSegment(ctx context.Context, c genl.Caller, s genl.SegmentSpec) (info genl.SegmentInfo, err error) {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	start := time.Now()
	defer func() { d.logSegmentOp(c, "segment-add", s.Name, start, err) }()
	spec, err := segmentSpec(s)
	switch {
	case err != nil:
		return info, err
	case d.closing:
		return info, nlerr.New(unix.ESHUTDOWN, "manad is shutting down")
	case d.segDef(spec.Name) != nil:
		return info, nlerr.New(unix.EEXIST, "segment %s already exists", spec.Name)
	}
	if err := d.segmentRoom(); err != nil {
		return info, err
	}
	done, err := d.reserveSave()
	if err != nil {
		return info, err
	}
	defer done(&err)
	def := &segDef{spec: spec}
	d.segDefs = append(d.segDefs, def)
	d.segment(spec.Name) // the settings apply at once, also to the ports already on it
	d.recordSegment(def)
	info, err = d.segmentInfo(spec.Name, nil)
	if err != nil {
		return info, err
	}
	d.notifySegment(genl.EventNew, info)
	return d.segmentInfo(spec.Name, &c)
}

// DeleteSegment deletes a segment and stops its uplinks (SEGMENT_DEL); a configuration-file
// segment stays deleted across restarts. Errors: ENOENT, EBUSY while ports are on it.
func (b *backend) DeleteSegment(ctx context.Context, c genl.Caller, name string) (err error) {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	start := time.Now()
	defer func() { d.logSegmentOp(c, "segment-del", name, start, err) }()
	if ports := d.segmentPorts(name, nil); len(ports) > 0 {
		return nlerr.New(unix.EBUSY, "segment %s has ports: %s", name, strings.Join(ports, ", "))
	}
	def := d.segDef(name)
	if def == nil {
		return nlerr.New(unix.ENOENT, "no segment %s", name)
	}
	info, err := d.segmentInfo(name, nil)
	if err != nil {
		return err
	}
	done, err := d.reserveSave()
	if err != nil {
		return err
	}
	defer done(&err)
	for _, u := range def.ups {
		if u != nil {
			u.Close()
		}
	}
	d.segDefs = slices.DeleteFunc(d.segDefs, func(x *segDef) bool { return x == def })
	d.segments.Prune()
	d.state.Segments.RecordSegmentDeleted(name, d.cfg)
	d.saveState()
	d.notifySegment(genl.EventDel, info)
	return nil
}

// AddUplink plugs a segment into a kernel netdev (UPLINK_ADD); the state file remembers it. A
// segment ports use without a definition gets one. The device and its namespace need not exist
// yet. Errors: EINVAL, ENOENT for no such segment, EEXIST for an uplink any segment uses, ENOSPC
// past config.MaxUplinks uplinks or (defining the segment) config.MaxSegments segments, the errno
// of a namespace that cannot be opened.
func (b *backend) AddUplink(ctx context.Context, c genl.Caller, segment string, u genl.UplinkSpec) (info genl.SegmentInfo, err error) {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	us := config.UplinkSpec{Dev: u.Dev, NetNS: u.NetNS, Attach: u.Attach, BusyPoll: time.Duration(u.BusyPollUs) * time.Microsecond}
	start := time.Now()
	defer func() { d.logSegmentOp(c, "uplink-add", segment, start, err, "uplink", us.String()) }()
	if err := us.Validate(); err != nil {
		return info, err
	}
	if d.closing {
		return info, nlerr.New(unix.ESHUTDOWN, "manad is shutting down")
	}
	def := d.segDef(segment)
	if def == nil && len(d.segmentPorts(segment, nil)) == 0 {
		return info, nlerr.New(unix.ENOENT, "no segment %s", segment)
	}
	for _, o := range d.segDefs {
		if slices.ContainsFunc(o.spec.Uplinks, func(x config.UplinkSpec) bool { return x.ID() == us.ID() }) {
			return info, nlerr.New(unix.EEXIST, "uplink %s already used by segment %s", us, o.spec.Name)
		}
	}
	if def != nil && len(def.spec.Uplinks) >= config.MaxUplinks {
		return info, nlerr.New(unix.ENOSPC, "segment %s has %d uplinks, at most %d", segment, len(def.spec.Uplinks), config.MaxUplinks)
	}
	done, err := d.reserveSave()
	if err != nil {
		return info, err
	}
	defer done(&err)
	created := def == nil
	if created {
		if err := d.segmentRoom(); err != nil {
			return info, err
		}
		def = &segDef{spec: config.DefaultSegmentSpec(segment)}
		d.segDefs = append(d.segDefs, def)
	}
	if err := d.startUplink(context.Background(), def, us); err != nil {
		// Nothing changed: not the uplinks, nor whether the segment is defined.
		def.ups, def.errs = def.ups[:len(def.ups)-1], def.errs[:len(def.errs)-1]
		if created {
			d.segDefs = d.segDefs[:len(d.segDefs)-1]
		}
		return info, err
	}
	def.spec.Uplinks = append(def.spec.Uplinks, us)
	d.recordSegment(def)
	info, err = d.segmentInfo(segment, nil)
	if err != nil {
		return info, err
	}
	d.notifySegment(genl.EventChange, info)
	return d.segmentInfo(segment, &c)
}

// DeleteUplink unplugs a segment from a kernel netdev (UPLINK_DEL); the state file remembers
// it. Errors: ENOENT for no such segment or uplink.
func (b *backend) DeleteUplink(ctx context.Context, c genl.Caller, segment string, u genl.UplinkSpec) (err error) {
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	us := config.UplinkSpec{Dev: u.Dev, NetNS: u.NetNS}
	start := time.Now()
	defer func() { d.logSegmentOp(c, "uplink-del", segment, start, err, "uplink", us.String()) }()
	def := d.segDef(segment)
	if def == nil {
		return nlerr.New(unix.ENOENT, "no segment %s", segment)
	}
	i := slices.IndexFunc(def.spec.Uplinks, func(x config.UplinkSpec) bool { return x.ID() == us.ID() })
	if i < 0 {
		return nlerr.New(unix.ENOENT, "segment %s has no uplink %s", segment, us)
	}
	done, err := d.reserveSave()
	if err != nil {
		return err
	}
	defer done(&err)
	if def.ups[i] != nil {
		def.ups[i].Close()
	}
	def.spec.Uplinks = slices.Delete(def.spec.Uplinks, i, i+1)
	def.ups = slices.Delete(def.ups, i, i+1)
	def.errs = slices.Delete(def.errs, i, i+1)
	d.recordSegment(def)
	info, err := d.segmentInfo(segment, nil)
	if err != nil {
		return err
	}
	d.notifySegment(genl.EventChange, info)
	return nil
}

// metricsSegments is the metrics.SegmentSource of the daemon: every segment's counters and its
// uplinks' state and counters, read under the configuration lock.
func (d *Daemon) metricsSegments() []metrics.Segment {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []metrics.Segment
	for _, name := range d.segmentNames() {
		info, err := d.segmentInfo(name, nil)
		if err == nil {
			out = append(out, metrics.Segment(info))
		}
	}
	return out
}
