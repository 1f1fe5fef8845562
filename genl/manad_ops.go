package genl

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
)

// Policies of the manad family (see manad_family.go for the wire table).
var (
	manadHeaderNest = nlattr.Policy{Kind: nlattr.Nested, Nested: ethtool.Policy().Header}
	nameStr         = nlattr.Policy{Kind: nlattr.NulString, Len: 255}
	u8Bool          = nlattr.Policy{Kind: nlattr.U8, Check: nlattr.CheckMax, Max: 1}
	u32             = nlattr.Policy{Kind: nlattr.U32}

	portSpecPolicy = nlattr.NewSet(portAttrMax, map[uint16]nlattr.Policy{
		PortAttrDevName:      {Kind: nlattr.NulString, Len: ethtool.IfNameSize - 1},
		PortAttrNetNS:        nameStr,
		PortAttrSegment:      nameStr,
		PortAttrMAC:          {Kind: nlattr.Binary, Check: nlattr.CheckRange, Min: 6, Max: 6},
		PortAttrPersistent:   u8Bool,
		PortAttrMTU:          u32,
		PortAttrMaxMTU:       u32,
		PortAttrPageSize:     u32,
		PortAttrQueues:       u32,
		PortAttrMaxQueues:    u32,
		PortAttrRxRing:       u32,
		PortAttrTxRing:       u32,
		PortAttrPrivFlags:    u32,
		PortAttrMemoryBudget: {Kind: nlattr.U64},
	})
	xdpPolicy = nlattr.NewSet(xdpAttrMax, map[uint16]nlattr.Policy{
		XDPAttrBuiltin: nameStr,
		XDPAttrSection: nameStr,
		XDPAttrName:    nameStr,
	})
	faultPolicy = nlattr.NewSet(faultAttrMax, map[uint16]nlattr.Policy{
		FaultAttrPoint: nameStr,
		FaultAttrMode:  nameStr,
		FaultAttrCount: u32,
		FaultAttrErrno: {Kind: nlattr.U32, Check: nlattr.CheckRange, Min: 0, Max: 4095},
	})
	layoutRequestPolicy = nlattr.NewSet(layoutAttrMax, map[uint16]nlattr.Policy{
		LayoutAttrRule:       nameStr,
		LayoutAttrPageSize:   u32,
		LayoutAttrMTU:        u32,
		LayoutAttrXDP:        u8Bool,
		LayoutAttrFullPageRx: u8Bool,
		LayoutAttrRingSize:   u32,
		LayoutAttrQueues:     u32,
	})

	// Per-command request policies: each admits only its own attributes.
	headerOnlyPolicy = manadPolicy(map[uint16]nlattr.Policy{AttrHeader: manadHeaderNest})
	portNewPolicy    = manadPolicy(map[uint16]nlattr.Policy{AttrPort: {Kind: nlattr.Nested, Nested: portSpecPolicy}})
	setMTUPolicy     = manadPolicy(map[uint16]nlattr.Policy{AttrHeader: manadHeaderNest, AttrMTU: u32})
	xdpAttachPolicy  = manadPolicy(map[uint16]nlattr.Policy{AttrHeader: manadHeaderNest,
		AttrXDP: {Kind: nlattr.Nested, Nested: xdpPolicy}, AttrXDPObject: {Kind: nlattr.Binary}})
	layoutPolicy   = manadPolicy(map[uint16]nlattr.Policy{AttrLayoutRequest: {Kind: nlattr.Nested, Nested: layoutRequestPolicy}})
	faultSetPolicy = manadPolicy(map[uint16]nlattr.Policy{AttrHeader: manadHeaderNest, AttrFault: {Kind: nlattr.Nested, Nested: faultPolicy}})
	groupPolicy    = manadPolicy(map[uint16]nlattr.Policy{AttrGroup: u32})
	optionPolicy   = manadPolicy(map[uint16]nlattr.Policy{AttrOption: u32, AttrOptionValue: u8Bool})
)

func manadPolicy(p map[uint16]nlattr.Policy) *nlattr.Set { return nlattr.NewSet(attrMax, p) }

func (s *Server) manadFamily() *family {
	do := func(cmd uint8, admin bool, pol *nlattr.Set, fn func(*request) error) op {
		o := op{cmd: cmd, policy: pol, mode: nlattr.Strict, dumpMode: nlattr.Strict, doit: fn}
		if admin {
			o.perm = unix.GENL_UNS_ADMIN_PERM
		}
		return o
	}
	portGet := do(CmdPortGet, false, headerOnlyPolicy, s.portGet)
	portGet.dumpit = s.portDump
	statsGet := do(CmdStatsGet, false, headerOnlyPolicy, s.statsGet)
	statsGet.dumpit = s.statsDump
	return &family{
		id: manadID, name: FamilyName, version: FamilyVersion,
		resvStartOp: 0, // every command gets genl_header_check
		ops: []op{
			portGet,
			do(CmdPortNew, true, portNewPolicy, s.portNew),
			do(CmdPortDel, true, headerOnlyPolicy, s.portDel),
			do(CmdPortSetMTU, true, setMTUPolicy, s.portSetMTU),
			do(CmdXDPAttach, true, xdpAttachPolicy, s.xdpAttach),
			do(CmdXDPDetach, true, headerOnlyPolicy, s.xdpDetach),
			statsGet,
			do(CmdLayoutPlan, false, layoutPolicy, s.layoutPlan),
			do(CmdFaultSet, true, faultSetPolicy, s.faultSet),
			do(CmdGroupJoin, false, groupPolicy, s.groupJoin),
			do(CmdGroupLeave, false, groupPolicy, s.groupLeave),
			do(CmdSetOption, false, optionPolicy, s.setOption),
		},
		groups: []mcGroup{{id: eventsGroup, name: EventsGroup}},
	}
}

// device resolves the required AttrHeader of a manad request.
func (r *request) device() (Device, error) {
	hdr := r.attr(AttrHeader)
	if !hdr.Present() {
		return Device{}, &nlattr.Error{Errno: unix.EINVAL, Msg: "missing device header", MissType: AttrHeader}
	}
	d, _, err := r.parseHeader(hdr, true)
	if err != nil {
		return Device{}, err
	}
	return *d, nil
}

// required returns top-level attribute t or the MISS_TYPE error.
func (r *request) required(t uint16, what string) (nlattr.Attr, error) {
	a := r.attr(t)
	if !a.Present() {
		return a, &nlattr.Error{Errno: unix.EINVAL, Msg: "missing " + what, MissType: t}
	}
	return a, nil
}

func oneOf(a nlattr.Attr, valid []string, what string) error {
	if slices.Contains(valid, a.Str()) {
		return nil
	}
	return nlattr.AttrError(unix.EINVAL, a, fmt.Sprintf("unknown %s %q (want %s)", what, a.Str(), strings.Join(valid, ", ")))
}

func (s *Server) portGet(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	p, err := s.cfg.Backend.Port(r.ctx, r.c.caller, d)
	if err != nil {
		return err
	}
	return r.reply(CmdPortGet, func(b *nlattr.Builder) error { putPort(b, AttrPort, &p); return nil })
}

func (s *Server) portDump(r *request, d *dumper) error {
	ports, err := s.cfg.Backend.Ports(r.ctx, r.c.caller)
	if err != nil {
		return err
	}
	sort.SliceStable(ports, func(i, j int) bool { return ports[i].Device.Index < ports[j].Device.Index })
	for i := range ports {
		if err := d.add(CmdPortGet, func(b *nlattr.Builder) error { putPort(b, AttrPort, &ports[i]); return nil }); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) portNew(r *request) error {
	a, err := r.required(AttrPort, "port specification")
	if err != nil {
		return err
	}
	tb, err := nlattr.ParseNested(r.msg, a, portSpecPolicy)
	if err != nil {
		return err
	}
	spec := PortSpec{
		Name:         tb[PortAttrDevName].Str(),
		MTU:          tb[PortAttrMTU].U32(),
		MaxMTU:       tb[PortAttrMaxMTU].U32(),
		PageSize:     tb[PortAttrPageSize].U32(),
		Queues:       tb[PortAttrQueues].U32(),
		MaxQueues:    tb[PortAttrMaxQueues].U32(),
		RxRing:       tb[PortAttrRxRing].U32(),
		TxRing:       tb[PortAttrTxRing].U32(),
		Segment:      tb[PortAttrSegment].Str(),
		NetNS:        tb[PortAttrNetNS].Str(),
		MemoryBudget: tb[PortAttrMemoryBudget].U64(),
		Persistent:   tb[PortAttrPersistent].U8() != 0,
		PrivFlags:    tb[PortAttrPrivFlags].U32(),
	}
	if m := tb[PortAttrMAC]; m.Present() {
		spec.MAC = net.HardwareAddr(slices.Clone(m.Data))
	}
	p, err := s.cfg.Backend.CreatePort(r.ctx, r.c.caller, spec)
	if err != nil {
		return err
	}
	return r.reply(CmdPortNew, func(b *nlattr.Builder) error { putPort(b, AttrPort, &p); return nil })
}

func (s *Server) portDel(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	return s.cfg.Backend.DeletePort(r.ctx, r.c.caller, d)
}

func (s *Server) portSetMTU(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	mtu, err := r.required(AttrMTU, "MTU")
	if err != nil {
		return err
	}
	return s.cfg.Backend.SetMTU(r.ctx, r.c.caller, d, mtu.U32())
}

func (s *Server) xdpAttach(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	var p XDPProgram
	var builtin nlattr.Attr
	if a := r.attr(AttrXDP); a.Present() {
		tb, err := nlattr.ParseNested(r.msg, a, xdpPolicy)
		if err != nil {
			return err
		}
		builtin = tb[XDPAttrBuiltin]
		p.Section, p.Name = tb[XDPAttrSection].Str(), tb[XDPAttrName].Str()
	}
	// The object chunks are concatenated in message order.
	var first nlattr.Attr
	off := nlattr.MsgHdrLen + nlattr.GenlHdrLen
	for it := nlattr.NewIter(r.msg, off, len(r.msg)-off); it.Next(); {
		if a := it.Attr(); a.Type() == AttrXDPObject {
			if !first.Present() {
				first = a
			}
			p.Object = append(p.Object, a.Data...)
		}
	}
	switch {
	case builtin.Present() && first.Present():
		return nlattr.AttrError(unix.EINVAL, first, "XDP builtin and object are mutually exclusive")
	case builtin.Present():
		if err := oneOf(builtin, xdpBuiltins(), "built-in XDP program"); err != nil {
			return err
		}
		p.Builtin = builtin.Str()
	case len(p.Object) == 0:
		return &nlattr.Error{Errno: unix.EINVAL, Msg: "XDP program needs a builtin or a non-empty object",
			MissType: AttrXDPObject}
	}
	return s.cfg.Backend.AttachXDP(r.ctx, r.c.caller, d, p)
}

func (s *Server) xdpDetach(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	return s.cfg.Backend.DetachXDP(r.ctx, r.c.caller, d)
}

func (s *Server) statsGet(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	stats, err := s.cfg.Backend.Stats(r.ctx, r.c.caller, d)
	if err != nil {
		return err
	}
	return r.reply(CmdStatsGet, func(b *nlattr.Builder) error { putStats(b, &d, stats); return nil })
}

// statsDump sends the stats of every device of the caller's netns that has
// them; devices answering EOPNOTSUPP (not manad ports) are skipped.
func (s *Server) statsDump(r *request, d *dumper) error {
	devs, err := s.cfg.Backend.Devices(r.ctx, r.c.caller)
	if err != nil {
		return err
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Index < devs[j].Index })
	for i := range devs {
		stats, err := s.cfg.Backend.Stats(r.ctx, r.c.caller, devs[i])
		if err == nil {
			err = d.add(CmdStatsGet, func(b *nlattr.Builder) error { putStats(b, &devs[i], stats); return nil })
		}
		if err != nil && !isSkippable(err) {
			return err
		}
	}
	return nil
}

func isSkippable(err error) bool { return errors.Is(err, unix.EOPNOTSUPP) }

func putStats(b *nlattr.Builder, d *Device, stats []Stat) {
	putDevHeader(b, AttrHeader, d)
	for _, st := range stats {
		n := b.Nest(AttrStat)
		b.PutString(StatAttrName, st.Name)
		b.PutU64(StatAttrValue, st.Value)
		b.EndNest(n)
	}
}

func (s *Server) layoutPlan(r *request) error {
	a, err := r.required(AttrLayoutRequest, "layout request")
	if err != nil {
		return err
	}
	tb, err := nlattr.ParseNested(r.msg, a, layoutRequestPolicy)
	if err != nil {
		return err
	}
	req := LayoutRequest{
		PageSize:   tb[LayoutAttrPageSize].U32(),
		MTU:        tb[LayoutAttrMTU].U32(),
		RingSize:   tb[LayoutAttrRingSize].U32(),
		Queues:     tb[LayoutAttrQueues].U32(),
		XDP:        tb[LayoutAttrXDP].U8() != 0,
		FullPageRx: tb[LayoutAttrFullPageRx].U8() != 0,
	}
	for it := nlattr.NestedIter(r.msg, a); it.Next(); {
		if rule := it.Attr(); rule.Type() == LayoutAttrRule {
			if err := oneOf(rule, layoutRules(), "layout rule"); err != nil {
				return err
			}
			req.Rules = append(req.Rules, rule.Str())
		}
	}
	layouts, err := s.cfg.Backend.PlanLayout(r.ctx, r.c.caller, req)
	if err != nil {
		return err
	}
	// Many rules can make a reply longer than one datagram: it is then sent multi-part,
	// one LAYOUT per message (replyParts), and the client joins the parts.
	return r.replyParts(CmdLayoutPlan, len(layouts), func(b *nlattr.Builder, i int) {
		putLayout(b, AttrLayout, &layouts[i])
	})
}

func (s *Server) faultSet(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	a, err := r.required(AttrFault, "fault")
	if err != nil {
		return err
	}
	tb, err := nlattr.ParseNested(r.msg, a, faultPolicy)
	if err != nil {
		return err
	}
	point, mode := tb[FaultAttrPoint], tb[FaultAttrMode]
	if !point.Present() {
		return &nlattr.Error{Errno: unix.EINVAL, Msg: "missing fault point", MissType: FaultAttrPoint, MissNest: a.Off}
	}
	if !mode.Present() {
		return &nlattr.Error{Errno: unix.EINVAL, Msg: "missing fault mode", MissType: FaultAttrMode, MissNest: a.Off}
	}
	if err := oneOf(point, faultPoints(), "fault point"); err != nil {
		return err
	}
	if err := oneOf(mode, faultModes(), "fault mode"); err != nil {
		return err
	}
	f := Fault{Point: point.Str(), Mode: mode.Str(), Count: tb[FaultAttrCount].U32(), Errno: tb[FaultAttrErrno].U32()}
	if f.Mode == "count" && f.Count == 0 {
		return nlattr.AttrError(unix.EINVAL, a, `fault mode "count" needs a count > 0`)
	}
	return s.cfg.Backend.SetFault(r.ctx, r.c.caller, d, f)
}

func (s *Server) groupJoin(r *request) error  { return s.setGroup(r, true) }
func (s *Server) groupLeave(r *request) error { return s.setGroup(r, false) }

// setGroup is NETLINK_ADD/DROP_MEMBERSHIP for a Unix socket.
func (s *Server) setGroup(r *request, join bool) error {
	a, err := r.required(AttrGroup, "multicast group")
	if err != nil {
		return err
	}
	g := a.U32()
	if g >= 64 || !s.groupKnown(g) {
		return nlattr.AttrError(unix.EINVAL, a, fmt.Sprintf("unknown multicast group %d", g))
	}
	bit := uint64(1) << g
	for {
		old := r.c.groups.Load()
		nw := old &^ bit
		if join {
			nw = old | bit
		}
		if r.c.groups.CompareAndSwap(old, nw) {
			return nil
		}
	}
}

// setOption is setsockopt(SOL_NETLINK) for a Unix socket.
func (s *Server) setOption(r *request) error {
	opt, err := r.required(AttrOption, "socket option")
	if err != nil {
		return err
	}
	val, err := r.required(AttrOptionValue, "socket option value")
	if err != nil {
		return err
	}
	on := val.U8() != 0
	switch opt.U32() {
	case unix.NETLINK_EXT_ACK:
		r.c.extAck = on
	case unix.NETLINK_CAP_ACK:
		r.c.capAck = on
	case unix.NETLINK_GET_STRICT_CHK:
		// Requests are always checked strictly.
	default:
		return nlattr.AttrError(unix.ENOPROTOOPT, opt, fmt.Sprintf("unsupported socket option %d", opt.U32()))
	}
	return nil
}

// Encoders of manad replies.

func putPort(b *nlattr.Builder, t uint16, p *PortInfo) {
	n := b.Nest(t)
	b.PutU32(PortAttrDevIndex, p.Device.Index)
	b.PutString(PortAttrDevName, p.Device.Name)
	b.PutString(PortAttrNetNS, p.NetNSName)
	b.PutString(PortAttrSegment, p.Segment)
	if len(p.MAC) > 0 {
		b.Put(PortAttrMAC, p.MAC)
	}
	b.PutU8(PortAttrAdminUp, b2u8(p.AdminUp))
	b.PutU8(PortAttrRunning, b2u8(p.Running))
	b.PutU8(PortAttrDetached, b2u8(p.Detached))
	b.PutU8(PortAttrResetPending, b2u8(p.ResetPending))
	b.PutU8(PortAttrPersistent, b2u8(p.Persistent))
	b.PutU32(PortAttrMTU, p.MTU)
	b.PutU32(PortAttrMinMTU, p.MinMTU)
	b.PutU32(PortAttrMaxMTU, p.MaxMTU)
	b.PutU32(PortAttrPageSize, p.PageSize)
	b.PutU32(PortAttrQueues, p.Queues)
	b.PutU32(PortAttrMaxQueues, p.MaxQueues)
	b.PutU32(PortAttrRxRing, p.RxRing)
	b.PutU32(PortAttrTxRing, p.TxRing)
	b.PutU32(PortAttrPrivFlags, p.PrivFlags)
	names := b.Nest(PortAttrPrivFlagNames)
	for _, name := range p.PrivFlagNames {
		b.PutString(ListItem, name)
	}
	b.EndNest(names)
	b.PutString(PortAttrXDP, p.XDP)
	putLayout(b, PortAttrLayout, &p.Layout)
	b.PutU64(PortAttrPagesPinned, p.PagesPinned)
	b.PutU64(PortAttrBytesPinned, p.BytesPinned)
	b.PutU64(PortAttrBuffersInFlight, p.BuffersInFlight)
	b.PutU64(PortAttrMemoryInUse, p.MemoryInUse)
	b.PutU64(PortAttrMemoryPeak, p.MemoryPeak)
	b.PutU64(PortAttrMemoryBudget, p.MemoryBudget)
	faults := b.Nest(PortAttrFaults)
	for _, f := range p.Faults {
		fn := b.Nest(ListItem)
		b.PutString(FaultAttrPoint, f.Point)
		b.PutString(FaultAttrMode, f.Mode)
		b.PutU32(FaultAttrCount, f.Count)
		b.PutU32(FaultAttrErrno, f.Errno)
		b.EndNest(fn)
	}
	b.EndNest(faults)
	b.PutU64(PortAttrNetNSDev, p.Device.NetNS.Dev)
	b.PutU64(PortAttrNetNSIno, p.Device.NetNS.Ino)
	b.EndNest(n)
}

func putLayout(b *nlattr.Builder, t uint16, l *RxBufLayout) {
	n := b.Nest(t)
	b.PutString(LayoutAttrRule, l.Rule)
	b.PutU32(LayoutAttrPageSize, l.PageSize)
	b.PutU32(LayoutAttrMTU, l.MTU)
	b.PutU8(LayoutAttrXDP, b2u8(l.XDP))
	b.PutU8(LayoutAttrFullPageRx, b2u8(l.FullPageRx))
	b.PutU32(LayoutAttrDataSize, l.DataSize)
	b.PutU32(LayoutAttrAllocSize, l.AllocSize)
	b.PutU32(LayoutAttrHeadroom, l.Headroom)
	b.PutU32(LayoutAttrBufSize, l.BufSize)
	b.PutU32(LayoutAttrFragCount, l.FragCount)
	b.PutU32(LayoutAttrOrder, l.Order)
	b.PutU32(LayoutAttrPoolSize, l.PoolSize)
	b.PutU8(LayoutAttrSingle, b2u8(l.Single))
	b.PutString(LayoutAttrReason, l.Reason)
	b.PutU32(LayoutAttrRingSize, l.RingSize)
	b.PutU32(LayoutAttrQueues, l.Queues)
	b.PutU32(LayoutAttrPagesPerQueue, l.PagesPerQueue)
	b.PutU64(LayoutAttrBytesPerQueue, l.BytesPerQueue)
	b.PutU64(LayoutAttrBytesTotal, l.BytesTotal)
	b.EndNest(n)
}
