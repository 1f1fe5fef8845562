package genl

import (
	"context"
	"errors"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The ethtool family, mirroring net/ethtool/netlink.c: the kernel's whole op
// list (ethtool_genl_ops of 6.18, in command order, with its flags and
// policies), each op answering as the kernel does for a mana netdev. The
// messages mana has no callback for are in ethtool_nocallback.go. A command
// the kernel does not know is EOPNOTSUPP.

// hdrAttr is the header attribute of every ethtool request (ETHTOOL_A_*_HEADER).
const hdrAttr = 1

// ethtoolMsgs are the ethtool family's messages: each method, defined in its
// message file (RingsGet in ethtool_rings.go), returns the op of one message,
// a row of ethtool_genl_ops[]; NoCallback returns those mana has no callback
// for. opsOf collects them.
type ethtoolMsgs struct{}

func ethtoolFamily() *family {
	return &family{
		id: ethtoolID, name: ethtool.FamilyName, version: ethtool.Version,
		resvStartOp: unix.ETHTOOL_MSG_MODULE_GET + 1,
		ops:         opsOf(ethtoolMsgs{}),
		groups:      []mcGroup{{id: monitorGroup, name: ethtool.MonitorGroup}},
	}
}

// ethGetOp is the op of an ethtool GET answered by g: do and dump, no
// permission, strict validation (ethnl_default_doit, _start, _dumpit).
func ethGetOp(cmd uint8, name string, pol *nlattr.Set, g *ethGet) op {
	return op{cmd: cmd, name: name, policy: pol, mode: nlattr.Strict, dumpMode: nlattr.Strict, driver: g.driver,
		doit:   func(s *Server, r *request) error { return s.ethDoit(g, r) },
		start:  func(s *Server, r *request) error { return s.ethDumpStart(g, r) },
		dumpit: func(s *Server, r *request, d *dumper) error { return s.ethDumpit(g, r, d) }}
}

// ethSetOp is the op of an ethtool SET: do only, GENL_UNS_ADMIN_PERM, strict
// validation, ethnl_default_set_doit over validate (nil: none) and apply,
// which calls the Backend's driver op.
func ethSetOp(cmd uint8, name string, pol *nlattr.Set, driver string, validate, apply func(*request, Device) error) op {
	return op{cmd: cmd, name: name, perm: unix.GENL_UNS_ADMIN_PERM, policy: pol, mode: nlattr.Strict, driver: driver,
		doit: func(s *Server, r *request) error { return s.ethSetDoit(r, validate, apply) }}
}

// parseHeader mirrors ethnl_parse_header_dev_get: it resolves the device
// named by the header nest in the caller's netns, with the kernel's errors.
// It returns a nil device when none is named and requireDev is false.
func (r *request) parseHeader(hdr nlattr.Attr, requireDev bool) (*Device, uint32, error) {
	if !hdr.Present() {
		if !requireDev {
			return nil, 0, nil
		}
		return nil, 0, nlattr.Errorf(unix.EINVAL, "request header missing")
	}
	pol := ethtool.Policy().Header
	if o := r.fam.op(r.cmd); o != nil && o.policy.Policy(hdr.Type()).Nested != nil {
		pol = o.policy.Policy(hdr.Type()).Nested // ethnl_header_policy_stats for LINKSTATE, TSINFO
	}
	tb, err := nlattr.ParseNested(r.msg, hdr, pol)
	if err != nil {
		return nil, 0, err
	}
	flags := tb[unix.ETHTOOL_A_HEADER_FLAGS].U32()
	name := tb[unix.ETHTOOL_A_HEADER_DEV_NAME]
	b := r.s.cfg.Backend
	switch idx := tb[unix.ETHTOOL_A_HEADER_DEV_INDEX]; {
	case idx.Present():
		d, err := b.DeviceByIndex(r.ctx, r.c.caller, idx.U32())
		if errors.Is(err, unix.ENODEV) {
			return nil, 0, nlattr.AttrError(unix.ENODEV, idx, "no device matches ifindex")
		} else if err != nil {
			return nil, 0, err
		}
		// strncmp(dev->name, name, IFNAMSIZ)
		if name.Present() && ifname(d.Name) != ifname(name.Str()) {
			return nil, 0, nlattr.AttrError(unix.ENODEV, hdr, "ifindex and name do not match")
		}
		return &d, flags, nil
	case name.Present():
		d, err := b.DeviceByName(r.ctx, r.c.caller, name.Str())
		if errors.Is(err, unix.ENODEV) {
			return nil, 0, nlattr.AttrError(unix.ENODEV, name, "no device matches name")
		} else if err != nil {
			return nil, 0, err
		}
		return &d, flags, nil
	case requireDev:
		return nil, 0, nlattr.AttrError(unix.EINVAL, hdr, "neither ifindex nor name specified")
	}
	// Only ethnl_header_policy_phy admits a PHY index, and it needs a device.
	if int(ethtool.HeaderPhyIndex) < len(tb) && tb[ethtool.HeaderPhyIndex].Present() {
		return nil, 0, nlattr.AttrError(unix.EINVAL, hdr, "phy_index set without a netdev")
	}
	return nil, flags, nil
}

func ifname(s string) string {
	if len(s) > ethtool.IfNameSize {
		return s[:ethtool.IfNameSize]
	}
	return s
}

// putDevHeader mirrors ethnl_fill_reply_header: nothing without a device.
func putDevHeader(b *nlattr.Builder, t uint16, d *Device) {
	if d == nil {
		return
	}
	n := b.Nest(t)
	b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, d.Index)
	ethtool.PutStrz(b, unix.ETHTOOL_A_HEADER_DEV_NAME, d.Name)
	b.EndNest(n)
}

// ethGet describes a GET request (struct ethnl_request_ops).
type ethGet struct {
	replyCmd   uint8
	allowNoDev bool
	parse      func(r *request) (any, error)
	prepare    func(r *request, d *Device, req any) (any, error)
	fill       func(r *request, b *nlattr.Builder, req, data any, compact bool) error
	// hdr is the request and reply header attribute when it is not hdrAttr
	// (ETHTOOL_A_STATS_HEADER follows a PAD).
	hdr uint16
	// driver names the Backend op prepare calls ("" for none).
	driver string
}

func (g *ethGet) hdrType() uint16 {
	if g.hdr != 0 {
		return g.hdr
	}
	return hdrAttr
}

// getFunc is a Backend op that reads one value of a device.
type getFunc[T any] func(ctx context.Context, c Caller, d Device) (T, error)

// tableGet is the GET of a message whose reply is one value the backend
// returns, written by its wire table: prepare asks the Backend op that driver
// (named name) selects, fill puts the table.
func tableGet[T any](replyCmd uint8, name string, driver func(Backend) getFunc[T], t *wire.Table[T]) *ethGet {
	return &ethGet{
		replyCmd: replyCmd,
		driver:   name,
		prepare: func(r *request, d *Device, _ any) (any, error) {
			get := driver(r.s.cfg.Backend)
			if get == nil {
				return nil, unix.EOPNOTSUPP // no driver callback
			}
			v, err := get(r.ctx, r.c.caller, *d)
			return &v, err
		},
		fill: func(r *request, b *nlattr.Builder, _, data any, _ bool) error {
			t.Put(b, data.(*T))
			return nil
		},
	}
}

// decodeRequest reads the top-level attributes of r, which its op's policy admitted, into a T by
// the message's wire table, the one the client writes it with; attributes the table does not
// name (the header) are skipped.
func decodeRequest[T any](r *request, t *wire.Table[T]) (T, error) {
	var v T
	off := nlattr.MsgHdrLen + nlattr.GenlHdrLen
	err := t.Decode(r.msg[off:], &v)
	return v, err
}

// ethDoit mirrors ethnl_default_doit.
func (s *Server) ethDoit(g *ethGet, r *request) error {
	hdr := r.attr(g.hdrType())
	if !hdr.Present() { // GENL_REQ_ATTR_CHECK
		return nlattr.Missing(nlattr.Attr{}, g.hdrType())
	}
	dev, flags, err := r.parseHeader(hdr, !g.allowNoDev)
	if err != nil {
		return err
	}
	var req any
	if g.parse != nil {
		if req, err = g.parse(r); err != nil {
			return err
		}
	}
	data, err := g.prepare(r, dev, req)
	if err != nil {
		return err
	}
	return r.reply(g.replyCmd, func(b *nlattr.Builder) error {
		putDevHeader(b, g.hdrType(), dev)
		return g.fill(r, b, req, data, flags&unix.ETHTOOL_FLAG_COMPACT_BITSETS != 0)
	})
}

type ethDumpState struct {
	flags uint32
	req   any
}

// ethDumpStart mirrors ethnl_default_start: the header is parsed (and a named
// device must exist) but the dump ignores it.
func (s *Server) ethDumpStart(g *ethGet, r *request) error {
	_, flags, err := r.parseHeader(r.attr(g.hdrType()), false)
	if err != nil {
		return err
	}
	st := &ethDumpState{flags: flags}
	if g.parse != nil {
		if st.req, err = g.parse(r); err != nil {
			return err
		}
	}
	r.state = st
	return nil
}

// ethDumpit mirrors ethnl_default_dumpit: one reply per device in ifindex
// order; devices answering EOPNOTSUPP are skipped silently; any other error
// ends the dump with that error in NLMSG_DONE.
func (s *Server) ethDumpit(g *ethGet, r *request, d *dumper) error {
	st := r.state.(*ethDumpState)
	devs, err := s.cfg.Backend.Devices(r.ctx, r.c.caller)
	if err != nil {
		return err
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Index < devs[j].Index })
	for i := range devs {
		dev := &devs[i]
		data, err := g.prepare(r, dev, st.req)
		if err == nil {
			err = d.add(g.replyCmd, func(b *nlattr.Builder) error {
				putDevHeader(b, g.hdrType(), dev)
				return g.fill(r, b, st.req, data, st.flags&unix.ETHTOOL_FLAG_COMPACT_BITSETS != 0)
			})
		}
		if errors.Is(err, unix.EOPNOTSUPP) {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ethSetDoit mirrors ethnl_default_set_doit: header required, device
// required, validate, apply; apply hands the backend an Update whose Changed
// queues the *_NTF under the backend's lock.
func (s *Server) ethSetDoit(r *request, validate, apply func(*request, Device) error) error {
	hdr := r.attr(hdrAttr)
	if !hdr.Present() {
		return nlattr.Missing(nlattr.Attr{}, hdrAttr)
	}
	dev, _, err := r.parseHeader(hdr, true)
	if err != nil {
		return err
	}
	if validate != nil {
		if err := validate(r, *dev); err != nil {
			return err
		}
	}
	return apply(r, *dev)
}
