package genl

import (
	"sort"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The manad family's wire segment commands (genl/wire/segment.go has their numbers and tables).

// The segment structs of the wire, under the names the Backend uses.
type (
	SegmentSpec = wire.SegmentSpec
	SegmentInfo = wire.SegmentInfo
	UplinkSpec  = wire.UplinkSpec
	UplinkInfo  = wire.UplinkInfo
)

// Segment request policies: only the attributes each command takes.
var (
	segmentNameStr   = nlattr.Policy{Kind: nlattr.NulString, Len: 64}
	segmentNameOnly  = nlattr.NewSet(wire.SegmentAttrMax, map[uint16]nlattr.Policy{wire.SegmentAttrName: segmentNameStr})
	segmentNewPolicy = tablePolicy(wire.SegmentAttrMax, wire.SegmentSpecTable.Kinds(), map[uint16]nlattr.Policy{
		wire.SegmentAttrName: segmentNameStr,
		// The range of [[segment]] mtu (daemon/config).
		wire.SegmentAttrMTU: {Kind: nlattr.U32, Check: nlattr.CheckRange, Min: 68, Max: 65535},
	})
	uplinkSpecPolicy = tablePolicy(wire.UplinkAttrMax, wire.UplinkSpecTable.Kinds(), map[uint16]nlattr.Policy{
		wire.UplinkAttrDev: {Kind: nlattr.NulString, Len: ethtool.IfNameSize - 1},
		// The mode's value is checked with the rest of the spec (config.UplinkSpec.Validate).
		wire.UplinkAttrAttach: {Kind: nlattr.NulString, Len: 16},
	})

	segmentPolicy = func(p map[uint16]nlattr.Policy) *nlattr.Set { return nlattr.NewSet(wire.AttrSegmentMax, p) }
	segGetPolicy  = segmentPolicy(map[uint16]nlattr.Policy{wire.AttrSegment: {Kind: nlattr.Nested, Nested: segmentNameOnly}})
	segNewPolicy  = segmentPolicy(map[uint16]nlattr.Policy{wire.AttrSegment: {Kind: nlattr.Nested, Nested: segmentNewPolicy}})
	uplinkPolicy  = segmentPolicy(map[uint16]nlattr.Policy{
		wire.AttrSegment: {Kind: nlattr.Nested, Nested: segmentNameOnly},
		wire.AttrUplink:  {Kind: nlattr.Nested, Nested: uplinkSpecPolicy},
	})
)

// The segment commands of the manad family: GET for anyone, the changes for admins
// (GENL_UNS_ADMIN_PERM, checked before the handler runs: a non-admin gets EPERM).

// SegmentGet is SEGMENT_GET: a segment (do) or every segment (dump).
func (manadMsgs) SegmentGet() op {
	return withDump(manadDo(wire.CmdSegmentGet, "segment-get", false, segGetPolicy, "Segment", (*Server).segmentGet), "Segments", (*Server).segmentDump)
}

// SegmentNew is SEGMENT_NEW, for admins.
func (manadMsgs) SegmentNew() op {
	return manadDo(wire.CmdSegmentNew, "segment-new", true, segNewPolicy, "CreateSegment", (*Server).segmentNew)
}

// SegmentDel is SEGMENT_DEL, for admins.
func (manadMsgs) SegmentDel() op {
	return manadDo(wire.CmdSegmentDel, "segment-del", true, segGetPolicy, "DeleteSegment", (*Server).segmentDel)
}

// UplinkAdd is UPLINK_ADD, for admins.
func (manadMsgs) UplinkAdd() op {
	return manadDo(wire.CmdUplinkAdd, "uplink-add", true, uplinkPolicy, "AddUplink", (*Server).uplinkAdd)
}

// UplinkDel is UPLINK_DEL, for admins.
func (manadMsgs) UplinkDel() op {
	return manadDo(wire.CmdUplinkDel, "uplink-del", true, uplinkPolicy, "DeleteUplink", (*Server).uplinkDel)
}

// segmentName is the required SegmentAttrName inside the required AttrSegment of r, validated
// by the op's policy.
func (r *request) segmentName() (string, error) {
	a, err := r.required(wire.AttrSegment, "segment")
	if err != nil {
		return "", err
	}
	tb, err := nlattr.ParseNested(r.msg, a, segmentNameOnly)
	if err != nil {
		return "", err
	}
	return requiredName(a, tb)
}

// requiredName is the segment name of the parsed AttrSegment nest a, or the MISS_TYPE error
// pointing into it (an empty name is missing too: it names nothing).
func requiredName(a nlattr.Attr, tb []nlattr.Attr) (string, error) {
	n := tb[wire.SegmentAttrName]
	if !n.Present() {
		return "", &nlattr.Error{Errno: unix.EINVAL, Message: "missing segment name", MissType: wire.SegmentAttrName, MissNest: a.Off}
	}
	if n.Str() == "" {
		return "", nlattr.AttrError(unix.EINVAL, n, "empty segment name")
	}
	return n.Str(), nil
}

// uplinkSpec is the required AttrUplink of r, with its required device name.
func (r *request) uplinkSpec() (UplinkSpec, error) {
	a, err := r.required(wire.AttrUplink, "uplink")
	if err != nil {
		return UplinkSpec{}, err
	}
	tb, err := nlattr.ParseNested(r.msg, a, uplinkSpecPolicy)
	if err != nil {
		return UplinkSpec{}, err
	}
	if d := tb[wire.UplinkAttrDev]; !d.Present() || d.Str() == "" {
		return UplinkSpec{}, &nlattr.Error{Errno: unix.EINVAL, Message: "missing uplink device", MissType: wire.UplinkAttrDev, MissNest: a.Off}
	}
	var u UplinkSpec
	if err := wire.UplinkSpecTable.Decode(a.Data, &u); err != nil {
		return UplinkSpec{}, err
	}
	return u, nil
}

func putSegment(info *SegmentInfo) func(b *nlattr.Builder) error {
	return func(b *nlattr.Builder) error { wire.SegmentTable.PutNest(b, wire.AttrSegment, info); return nil }
}

func (s *Server) segmentGet(r *request) error {
	name, err := r.segmentName()
	if err != nil {
		return err
	}
	sb := s.cfg.Backend
	info, err := sb.Segment(r.ctx, r.c.caller, name)
	if err != nil {
		return err
	}
	return r.reply(wire.CmdSegmentGet, putSegment(&info))
}

func (s *Server) segmentDump(r *request, d *dumper) error {
	sb := s.cfg.Backend
	segs, err := sb.Segments(r.ctx, r.c.caller)
	if err != nil {
		return err
	}
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].Name < segs[j].Name })
	for i := range segs {
		if err := d.add(wire.CmdSegmentGet, putSegment(&segs[i])); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) segmentNew(r *request) error {
	a, err := r.required(wire.AttrSegment, "segment")
	if err != nil {
		return err
	}
	tb, err := nlattr.ParseNested(r.msg, a, segmentNewPolicy)
	if err != nil {
		return err
	}
	if _, err := requiredName(a, tb); err != nil {
		return err
	}
	var spec SegmentSpec
	if err := wire.SegmentSpecTable.Decode(a.Data, &spec); err != nil {
		return err
	}
	spec.AgeingSet = tb[wire.SegmentAttrAgeingMs].Present()
	sb := s.cfg.Backend
	info, err := sb.CreateSegment(r.ctx, r.c.caller, spec)
	if err != nil {
		return err
	}
	return r.reply(wire.CmdSegmentNew, putSegment(&info))
}

func (s *Server) segmentDel(r *request) error {
	name, err := r.segmentName()
	if err != nil {
		return err
	}
	sb := s.cfg.Backend
	return sb.DeleteSegment(r.ctx, r.c.caller, name)
}

func (s *Server) uplinkAdd(r *request) error {
	name, err := r.segmentName()
	if err != nil {
		return err
	}
	u, err := r.uplinkSpec()
	if err != nil {
		return err
	}
	sb := s.cfg.Backend
	info, err := sb.AddUplink(r.ctx, r.c.caller, name, u)
	if err != nil {
		return err
	}
	return r.reply(wire.CmdUplinkAdd, putSegment(&info))
}

func (s *Server) uplinkDel(r *request) error {
	name, err := r.segmentName()
	if err != nil {
		return err
	}
	u, err := r.uplinkSpec()
	if err != nil {
		return err
	}
	sb := s.cfg.Backend
	return sb.DeleteUplink(r.ctx, r.c.caller, name, u)
}

// NotifySegment sends a manad SEGMENT_{NEW,CHANGE,DEL}_NTF for ev, carrying the segment's full
// state, to the "events" subscribers in network namespace ns (the daemon's own: segments are the
// host's). A value that is no Event is logged and ignored.
func (s *Server) NotifySegment(ev Event, info SegmentInfo, ns NetNS) {
	cmd, ok := segmentNtf.cmd(ev)
	if !ok {
		s.log.Error("genl: NotifySegment with unknown event, ignored", "event", ev, "segment", info.Name)
		return
	}
	s.notify(manadID, wire.FamilyVersion, cmd, &s.manadSeq, eventsGroup, ns,
		func(b *nlattr.Builder) { wire.SegmentTable.PutNest(b, wire.AttrSegment, &info) })
}
