package genl

import (
	"errors"
	"fmt"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// Policies of the manad family (genl/wire has its numbers and tables).
var (
	manadHeaderNest = nlattr.Policy{Kind: nlattr.Nested, Nested: ethtool.Policy().Header}
	nameStr         = nlattr.Policy{Kind: nlattr.NulString, Len: 255}
	u8Bool          = nlattr.Policy{Kind: nlattr.U8, Check: nlattr.CheckMax, Max: 1}
	u32             = nlattr.Policy{Kind: nlattr.U32}

	// The nested request policies follow the wire tables, with tighter bounds where a
	// field has them.
	portSpecPolicy = tablePolicy(wire.PortAttrMax, wire.PortSpecTable.Kinds(), map[uint16]nlattr.Policy{
		wire.PortAttrDevName: {Kind: nlattr.NulString, Len: ethtool.IfNameSize - 1},
	})
	xdpPolicy   = tablePolicy(wire.XDPAttrMax, wire.XDPTable.Kinds(), nil)
	faultPolicy = tablePolicy(wire.FaultAttrMax, wire.FaultTable.Kinds(), map[uint16]nlattr.Policy{
		wire.FaultAttrErrno: {Kind: nlattr.U32, Check: nlattr.CheckRange, Min: 0, Max: 4095},
	})
	layoutRequestPolicy = tablePolicy(wire.LayoutAttrMax, wire.LayoutRequestTable.Kinds(), nil)

	// Per-command request policies: each admits only its own attributes.
	headerOnlyPolicy  = manadPolicy(map[uint16]nlattr.Policy{wire.AttrHeader: manadHeaderNest})
	portNewPolicy     = manadPolicy(map[uint16]nlattr.Policy{wire.AttrPort: {Kind: nlattr.Nested, Nested: portSpecPolicy}})
	portDelNestPolicy = nlattr.NewSet(wire.PortAttrMax, map[uint16]nlattr.Policy{wire.PortAttrNetNSToo: u8Bool})
	portDelPolicy     = manadPolicy(map[uint16]nlattr.Policy{wire.AttrHeader: manadHeaderNest,
		wire.AttrPort: {Kind: nlattr.Nested, Nested: portDelNestPolicy}})
	setMTUPolicy    = manadPolicy(map[uint16]nlattr.Policy{wire.AttrHeader: manadHeaderNest, wire.AttrMTU: u32})
	xdpAttachPolicy = manadPolicy(map[uint16]nlattr.Policy{wire.AttrHeader: manadHeaderNest,
		wire.AttrXDP: {Kind: nlattr.Nested, Nested: xdpPolicy}, wire.AttrXDPObject: {Kind: nlattr.Binary}})
	layoutPolicy   = manadPolicy(map[uint16]nlattr.Policy{wire.AttrLayoutRequest: {Kind: nlattr.Nested, Nested: layoutRequestPolicy}})
	faultSetPolicy = manadPolicy(map[uint16]nlattr.Policy{wire.AttrHeader: manadHeaderNest, wire.AttrFault: {Kind: nlattr.Nested, Nested: faultPolicy}})
	groupPolicy    = manadPolicy(map[uint16]nlattr.Policy{wire.AttrGroup: u32})
	optionPolicy   = manadPolicy(map[uint16]nlattr.Policy{wire.AttrOption: u32, wire.AttrOptionValue: u8Bool})
)

func manadPolicy(p map[uint16]nlattr.Policy) *nlattr.Set { return nlattr.NewSet(wire.AttrMax, p) }

// tablePolicy is the policy of a wire table's attributes: each by its kind
// (strings NUL-terminated and at most 255 bytes, booleans 0 or 1, a MAC 6
// bytes), except where over says otherwise.
func tablePolicy(maxType uint16, kinds map[uint16]wire.Kind, over map[uint16]nlattr.Policy) *nlattr.Set {
	p := make(map[uint16]nlattr.Policy, len(kinds))
	for t, k := range kinds {
		switch k {
		case wire.KindU8:
			p[t] = nlattr.Policy{Kind: nlattr.U8}
		case wire.KindBool:
			p[t] = u8Bool
		case wire.KindU32:
			p[t] = u32
		case wire.KindU64:
			p[t] = nlattr.Policy{Kind: nlattr.U64}
		case wire.KindString:
			p[t] = nameStr
		case wire.KindMAC:
			p[t] = nlattr.Policy{Kind: nlattr.Binary, Check: nlattr.CheckRange, Min: 6, Max: 6}
		default:
			panic(fmt.Sprintf("genl: no request policy for attribute %d of kind %d", t, k))
		}
	}
	for t, pol := range over {
		p[t] = pol
	}
	return nlattr.NewSet(maxType, p)
}

// manadDo is a do-only op of the manad family whose handler fn calls the Backend op named driver
// ("" for none); admin ops need GENL_UNS_ADMIN_PERM (a non-admin gets EPERM before the handler
// runs). With that Backend op nil the command is EOPNOTSUPP, saying so, before fn runs.
func manadDo(cmd uint8, name string, admin bool, pol *nlattr.Set, driver string, fn func(*Server, *request) error) op {
	o := op{cmd: cmd, name: name, policy: pol, mode: nlattr.Strict, dumpMode: nlattr.Strict, driver: driver,
		doit: func(s *Server, r *request) error {
			if err := s.needOp(driver, name); err != nil {
				return err
			}
			return fn(s, r)
		}}
	if admin {
		o.perm = unix.GENL_UNS_ADMIN_PERM
	}
	return o
}

// withDump adds to a manad op a dump that calls the Backend op named driver, EOPNOTSUPP without it.
func withDump(o op, driver string, dumpit func(*Server, *request, *dumper) error) op {
	o.dumpDriver = driver
	o.dumpit = func(s *Server, r *request, d *dumper) error {
		if err := s.needOp(driver, o.name); err != nil {
			return err
		}
		return dumpit(s, r, d)
	}
	return o
}

// needOp is EOPNOTSUPP with an extack naming the command when the Backend op named driver is nil.
func (s *Server) needOp(driver, cmd string) error {
	if driver != "" && s.noOps[driver] {
		return nlattr.Errorf(unix.EOPNOTSUPP, "%s is not supported by this backend (it has no %s)", cmd, driver)
	}
	return nil
}

// PortGet is PORT_GET: a port (do) or every port the caller sees (dump).
func (manadMsgs) PortGet() op {
	return withDump(manadDo(wire.CmdPortGet, "port-get", false, headerOnlyPolicy, "Port", (*Server).portGet), "Ports", (*Server).portDump)
}

// PortNew is PORT_NEW, for admins: create a port.
func (manadMsgs) PortNew() op {
	return manadDo(wire.CmdPortNew, "port-new", true, portNewPolicy, "CreatePort", (*Server).portNew)
}

// PortDel is PORT_DEL, for admins: delete a port (and the namespace manad made for it).
func (manadMsgs) PortDel() op {
	return manadDo(wire.CmdPortDel, "port-del", true, portDelPolicy, "DeletePort", (*Server).portDel)
}

// PortSetMTU is PORT_SET_MTU, for admins.
func (manadMsgs) PortSetMTU() op {
	return manadDo(wire.CmdPortSetMTU, "port-set-mtu", true, setMTUPolicy, "SetMTU", (*Server).portSetMTU)
}

// XDPAttach is XDP_ATTACH, for admins.
func (manadMsgs) XDPAttach() op {
	return manadDo(wire.CmdXDPAttach, "xdp-attach", true, xdpAttachPolicy, "AttachXDP", (*Server).xdpAttach)
}

// XDPDetach is XDP_DETACH, for admins.
func (manadMsgs) XDPDetach() op {
	return manadDo(wire.CmdXDPDetach, "xdp-detach", true, headerOnlyPolicy, "DetachXDP", (*Server).xdpDetach)
}

// StatsGet is STATS_GET: a port's counters (do) or every port's (dump).
func (manadMsgs) StatsGet() op {
	return withDump(manadDo(wire.CmdStatsGet, "stats-get", false, headerOnlyPolicy, "Stats", (*Server).statsGet), "Stats", (*Server).statsDump)
}

// LayoutPlan is LAYOUT_PLAN: the RX buffer layouts of a planned port.
func (manadMsgs) LayoutPlan() op {
	return manadDo(wire.CmdLayoutPlan, "layout-plan", false, layoutPolicy, "PlanLayout", (*Server).layoutPlan)
}

// FaultSet is FAULT_SET, for admins: arm or clear a fault point.
func (manadMsgs) FaultSet() op {
	return manadDo(wire.CmdFaultSet, "fault-set", true, faultSetPolicy, "SetFault", (*Server).faultSet)
}

// GroupJoin is GROUP_JOIN, a Unix socket's NETLINK_ADD_MEMBERSHIP.
func (manadMsgs) GroupJoin() op {
	return manadDo(wire.CmdGroupJoin, "group-join", false, groupPolicy, "", (*Server).groupJoin)
}

// GroupLeave is GROUP_LEAVE, a Unix socket's NETLINK_DROP_MEMBERSHIP.
func (manadMsgs) GroupLeave() op {
	return manadDo(wire.CmdGroupLeave, "group-leave", false, groupPolicy, "", (*Server).groupLeave)
}

// SetOption is SET_OPTION, a Unix socket's SOL_NETLINK options.
func (manadMsgs) SetOption() op {
	return manadDo(wire.CmdSetOption, "set-option", false, optionPolicy, "", (*Server).setOption)
}

// manadMsgs are the manad family's messages: each method, in the message's file, is one op, as
// for ethtoolMsgs.
type manadMsgs struct{}

func manadFamily() *family {
	return &family{
		id: manadID, name: wire.FamilyName, version: wire.FamilyVersion,
		resvStartOp: 0, // every command gets genl_header_check
		ops:         opsOf(manadMsgs{}),
		groups:      []mcGroup{{id: eventsGroup, name: wire.EventsGroup}},
	}
}

// device resolves the required wire.AttrHeader of a manad request.
func (r *request) device() (Device, error) {
	hdr := r.attr(wire.AttrHeader)
	if !hdr.Present() {
		return Device{}, &nlattr.Error{Errno: unix.EINVAL, Message: "missing device header", MissType: wire.AttrHeader}
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
		return a, &nlattr.Error{Errno: unix.EINVAL, Message: "missing " + what, MissType: t}
	}
	return a, nil
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
	return r.reply(wire.CmdPortGet, func(b *nlattr.Builder) error { wire.PortTable.PutNest(b, wire.AttrPort, &p); return nil })
}

func (s *Server) portDump(r *request, d *dumper) error {
	ports, err := s.cfg.Backend.Ports(r.ctx, r.c.caller)
	if err != nil {
		return err
	}
	sort.SliceStable(ports, func(i, j int) bool { return ports[i].Device.Index < ports[j].Device.Index })
	for i := range ports {
		if err := d.add(wire.CmdPortGet, func(b *nlattr.Builder) error { wire.PortTable.PutNest(b, wire.AttrPort, &ports[i]); return nil }); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) portNew(r *request) error {
	a, err := r.required(wire.AttrPort, "port specification")
	if err != nil {
		return err
	}
	if err := nlattr.ValidateNestedAttr(r.msg, a, portSpecPolicy); err != nil {
		return err
	}
	var spec PortSpec
	if err := wire.PortSpecTable.Decode(a.Data, &spec); err != nil {
		return err
	}
	p, err := s.cfg.Backend.CreatePort(r.ctx, r.c.caller, spec)
	if err != nil {
		return err
	}
	return r.reply(wire.CmdPortNew, func(b *nlattr.Builder) error { wire.PortTable.PutNest(b, wire.AttrPort, &p); return nil })
}

// portDel deletes a port: acknowledged, or, when AttrPort asks for the namespace too, answered
// with a PORT_DEL message saying what became of the namespace.
func (s *Server) portDel(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	var req wire.PortDel
	if a := r.attr(wire.AttrPort); a.Present() {
		if err := nlattr.ValidateNestedAttr(r.msg, a, portDelNestPolicy); err != nil {
			return err
		}
		if err := wire.PortDelTable.Decode(a.Data, &req); err != nil {
			return err
		}
	}
	if !req.NetNSToo {
		return s.cfg.Backend.DeletePort(r.ctx, r.c.caller, d)
	}
	if s.cfg.Backend.DeletePortNetNS == nil {
		return nlattr.Errorf(unix.EOPNOTSUPP, "this backend cannot delete namespaces")
	}
	res, err := s.cfg.Backend.DeletePortNetNS(r.ctx, r.c.caller, d)
	if err != nil {
		return err
	}
	res.NetNSToo = true
	return r.reply(wire.CmdPortDel, func(b *nlattr.Builder) error { wire.PortDelTable.PutNest(b, wire.AttrPort, &res); return nil })
}

func (s *Server) portSetMTU(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	mtu, err := r.required(wire.AttrMTU, "MTU")
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
	if a := r.attr(wire.AttrXDP); a.Present() {
		tb, err := nlattr.ParseNested(r.msg, a, xdpPolicy)
		if err != nil {
			return err
		}
		if err := wire.XDPTable.Decode(a.Data, &p); err != nil {
			return err
		}
		builtin = tb[wire.XDPAttrBuiltin]
	}
	// The object chunks are concatenated in message order.
	var first nlattr.Attr
	off := nlattr.MsgHdrLen + nlattr.GenlHdrLen
	for it := nlattr.NewIter(r.msg, off, len(r.msg)-off); it.Next(); {
		if a := it.Attr(); a.Type() == wire.AttrXDPObject {
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
		// Which built-ins exist is the port model's to say (vnic.BuiltinXDPByName).
	case len(p.Object) == 0:
		return &nlattr.Error{Errno: unix.EINVAL, Message: "XDP program needs a builtin or a non-empty object",
			MissType: wire.AttrXDPObject}
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
	return r.reply(wire.CmdStatsGet, func(b *nlattr.Builder) error { putStats(b, &d, stats); return nil })
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
			err = d.add(wire.CmdStatsGet, func(b *nlattr.Builder) error { putStats(b, &devs[i], stats); return nil })
		}
		if err != nil && !isSkippable(err) {
			return err
		}
	}
	return nil
}

func isSkippable(err error) bool { return errors.Is(err, unix.EOPNOTSUPP) }

func putStats(b *nlattr.Builder, d *Device, stats []Stat) {
	putDevHeader(b, wire.AttrHeader, d)
	for i := range stats {
		wire.StatTable.PutNest(b, wire.AttrStat, &stats[i])
	}
}

func (s *Server) layoutPlan(r *request) error {
	a, err := r.required(wire.AttrLayoutRequest, "layout request")
	if err != nil {
		return err
	}
	if err := nlattr.ValidateNestedAttr(r.msg, a, layoutRequestPolicy); err != nil {
		return err
	}
	// The rule names are genl/layout's to check (layout.Plan).
	var req LayoutRequest
	if err := wire.LayoutRequestTable.Decode(a.Data, &req); err != nil {
		return err
	}
	layouts, err := s.cfg.Backend.PlanLayout(r.ctx, r.c.caller, req)
	if err != nil {
		return err
	}
	// Many rules can make a reply longer than one datagram: it is then sent multi-part,
	// one LAYOUT per message (replyParts), and the client joins the parts.
	return r.replyParts(wire.CmdLayoutPlan, len(layouts), func(b *nlattr.Builder, i int) {
		wire.LayoutTable.PutNest(b, wire.AttrLayout, &layouts[i])
	})
}

// faultSet checks the wire shape of FAULT_SET (policy, point and mode present);
// what the point, mode and count mean is the backend's to check (vnic).
func (s *Server) faultSet(r *request) error {
	d, err := r.device()
	if err != nil {
		return err
	}
	a, err := r.required(wire.AttrFault, "fault")
	if err != nil {
		return err
	}
	tb, err := nlattr.ParseNested(r.msg, a, faultPolicy)
	if err != nil {
		return err
	}
	point, mode := tb[wire.FaultAttrPoint], tb[wire.FaultAttrMode]
	if !point.Present() {
		return &nlattr.Error{Errno: unix.EINVAL, Message: "missing fault point", MissType: wire.FaultAttrPoint, MissNest: a.Off}
	}
	if !mode.Present() {
		return &nlattr.Error{Errno: unix.EINVAL, Message: "missing fault mode", MissType: wire.FaultAttrMode, MissNest: a.Off}
	}
	var f Fault
	if err := wire.FaultTable.Decode(a.Data, &f); err != nil {
		return err
	}
	return s.cfg.Backend.SetFault(r.ctx, r.c.caller, d, f)
}

func (s *Server) groupJoin(r *request) error  { return s.setGroup(r, true) }
func (s *Server) groupLeave(r *request) error { return s.setGroup(r, false) }

// setGroup is NETLINK_ADD/DROP_MEMBERSHIP for a Unix socket.
func (s *Server) setGroup(r *request, join bool) error {
	a, err := r.required(wire.AttrGroup, "multicast group")
	if err != nil {
		return err
	}
	g := a.U32()
	if g >= 64 || !s.groupKnown(g) {
		return nlattr.AttrError(unix.EINVAL, a, fmt.Sprintf("unknown multicast group %d", g))
	}
	r.c.t.SetGroup(g, join)
	return nil
}

// setOption is setsockopt(SOL_NETLINK) for a Unix socket.
func (s *Server) setOption(r *request) error {
	opt, err := r.required(wire.AttrOption, "socket option")
	if err != nil {
		return err
	}
	val, err := r.required(wire.AttrOptionValue, "socket option value")
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
