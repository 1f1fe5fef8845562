package genl

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The kernel's netdev family (net/core/netdev-genl.c, page_pool_user.c) for
// manad's ports: dev-get, page-pool-get, page-pool-stats-get, queue-get,
// napi-get, napi-set and qstats-get, with the kernel's policies, errors and
// reply shapes. bind-rx and bind-tx (dmabuf) are EOPNOTSUPP, as an unknown
// command.

// netdevID is the family id manad gives netdev (after ethtool and manad).
const netdevID = 0x15

// NetdevPort is one port as the netdev family shows it: its views from the
// vnic model, converted to the wire.
type NetdevPort struct {
	Dev    wire.NetdevDev
	Queues []wire.NetdevQueue // RX then TX; none while down
	NAPIs  []wire.NetdevNAPI
	// QStats: the device's totals (Scoped false) and per running queue.
	Device     wire.NetdevQStats
	QueueStats []wire.NetdevQStats
	Pools      []NetdevPool // running, then detached until drained
}

// NetdevPool is one page pool and its stats.
type NetdevPool struct {
	Pool  wire.NetdevPagePool
	Stats wire.NetdevPagePoolStats
}

// NetdevView is a set of the views of a NetdevPort.
type NetdevView uint8

// The views of a NetdevPort.
const (
	NetdevViewDev    NetdevView = 1 << iota // Dev
	NetdevViewQueues                        // Queues
	NetdevViewNAPIs                         // NAPIs
	NetdevViewQStats                        // Device and QueueStats
	NetdevViewPools                         // Pools
	// NetdevViewQStatsDevice, with NetdevViewQStats, says that only Device is needed (a
	// qstats-get of the device scope), so QueueStats may be left empty. A backend may ignore
	// it and fill QueueStats too.
	NetdevViewQStatsDevice

	NetdevViewAll = NetdevViewDev | NetdevViewQueues | NetdevViewNAPIs | NetdevViewQStats | NetdevViewPools
)

// netdevViewOf is what the requests of netdev command cmd answer from.
func netdevViewOf(cmd uint8) NetdevView {
	switch cmd {
	case wire.NetdevCmdDevGet:
		return NetdevViewDev
	case wire.NetdevCmdQueueGet:
		return NetdevViewQueues
	case wire.NetdevCmdNAPIGet:
		return NetdevViewNAPIs
	case wire.NetdevCmdQStatsGet:
		return NetdevViewQStats
	case wire.NetdevCmdPagePoolGet, wire.NetdevCmdPagePoolStatsGet:
		return NetdevViewPools
	}
	return NetdevViewAll
}

// netdevViews asks nb for the views of d that r's command needs.
func (r *request) netdevViews(d Device) (NetdevPort, error) {
	nb := r.s.cfg.Backend
	if nb.NetdevViews != nil {
		want := netdevViewOf(r.cmd)
		if r.cmd == wire.NetdevCmdQStatsGet {
			// The device scope (no scope, or 0) answers from the totals alone.
			if a := r.attr(wire.NetdevAQStatsScope); !a.Present() {
				want |= NetdevViewQStatsDevice
			} else if v, err := nlUint(a); err == nil && v == 0 {
				want |= NetdevViewQStatsDevice
			}
		}
		return nb.NetdevViews(r.ctx, r.c.caller, d, want)
	}
	return nb.NetdevPort(r.ctx, r.c.caller, d)
}

var (
	netdevIfindex = nlattr.Policy{Kind: nlattr.U32, Check: nlattr.CheckMin, Min: 1}
	// NLA_UINT attributes: 4 or 8 bytes (nlUint refuses the lengths between).
	netdevUint = nlattr.Policy{Kind: nlattr.Binary, Check: nlattr.CheckRange, Min: 4, Max: 8}

	netdevDevGetPolicy   = nlattr.NewSet(wire.NetdevADevIfindex, map[uint16]nlattr.Policy{wire.NetdevADevIfindex: netdevIfindex})
	netdevPoolGetPolicy  = nlattr.NewSet(wire.NetdevAPagePoolID, map[uint16]nlattr.Policy{wire.NetdevAPagePoolID: netdevUint})
	netdevPoolInfoPolicy = nlattr.NewSet(wire.NetdevAPagePoolIfindex, map[uint16]nlattr.Policy{
		wire.NetdevAPagePoolID: netdevUint, wire.NetdevAPagePoolIfindex: netdevIfindex})
	netdevPoolStatsPolicy = nlattr.NewSet(wire.NetdevAPagePoolStatsInfo, map[uint16]nlattr.Policy{
		wire.NetdevAPagePoolStatsInfo: {Kind: nlattr.Nested, Nested: netdevPoolInfoPolicy}})
	netdevQueueGetPolicy = nlattr.NewSet(wire.NetdevAQueueType, map[uint16]nlattr.Policy{
		wire.NetdevAQueueID: {Kind: nlattr.U32}, wire.NetdevAQueueIfindex: netdevIfindex,
		wire.NetdevAQueueType: {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: 1}})
	netdevQueueDumpPolicy = nlattr.NewSet(wire.NetdevAQueueIfindex, map[uint16]nlattr.Policy{wire.NetdevAQueueIfindex: netdevIfindex})
	netdevNAPIGetPolicy   = nlattr.NewSet(wire.NetdevANAPIID, map[uint16]nlattr.Policy{wire.NetdevANAPIID: {Kind: nlattr.U32}})
	netdevNAPIDumpPolicy  = nlattr.NewSet(wire.NetdevANAPIIfindex, map[uint16]nlattr.Policy{wire.NetdevANAPIIfindex: netdevIfindex})
	// netdev_napi_set_nl_policy of 6.18 (netdev-genl-gen.c): maxattr threaded.
	netdevNAPISetPolicy = nlattr.NewSet(wire.NetdevANAPIThreaded, map[uint16]nlattr.Policy{
		wire.NetdevANAPIID:                {Kind: nlattr.U32},
		wire.NetdevANAPIDeferHardIRQs:     {Kind: nlattr.U32, Check: nlattr.CheckRange, Min: 0, Max: math.MaxInt32},
		wire.NetdevANAPIGROFlushTimeout:   {Kind: nlattr.Uint},
		wire.NetdevANAPIIRQSuspendTimeout: {Kind: nlattr.Uint},
		wire.NetdevANAPIThreaded:          {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: 1},
	})
	netdevQStatsPolicy = nlattr.NewSet(wire.NetdevAQStatsScope, map[uint16]nlattr.Policy{
		wire.NetdevAQStatsIfindex: netdevIfindex, wire.NetdevAQStatsScope: netdevUint})
)

// nlUint reads an NLA_UINT (nla_get_uint: 4 bytes or 8); longer or odd
// lengths are the kernel's EINVAL of its policy.
func nlUint(a nlattr.Attr) (uint64, error) {
	switch len(a.Data) {
	case 4:
		return uint64(a.U32()), nil
	case 8:
		return a.U64(), nil
	}
	return 0, nlattr.AttrError(unix.EINVAL, a, "invalid attribute length")
}

// netdevGetOp is a netdev GET: do and dump (either may be nil), strict validation.
func netdevGetOp(cmd uint8, name string, pol *nlattr.Set, do func(*Server, *request) error, dump func(*Server, *request, *dumper) error) op {
	return op{cmd: cmd, name: name, policy: pol, mode: nlattr.Strict, dumpMode: nlattr.Strict, driver: "NetdevPort", doit: do, dumpit: dump}
}

// splitOp gives o the dump policy of a split do/dump op (netdev-genl-gen.c's queue-get and napi-get).
func splitOp(o op, dump *nlattr.Set) op { o.dumpPolicy = dump; return o }

// netdevMsgs are the netdev family's messages (netdev_nl_ops, by netdev.yaml's names): each
// method is one op, as for ethtoolMsgs.
type netdevMsgs struct{}

// DevGet is dev-get.
func (netdevMsgs) DevGet() op {
	return netdevGetOp(wire.NetdevCmdDevGet, "dev-get", netdevDevGetPolicy, (*Server).netdevDevGet, (*Server).netdevDevDump)
}

// PagePoolGet is page-pool-get.
func (netdevMsgs) PagePoolGet() op {
	return netdevGetOp(wire.NetdevCmdPagePoolGet, "page-pool-get", netdevPoolGetPolicy, (*Server).netdevPoolGet, (*Server).netdevPoolDump)
}

// PagePoolStatsGet is page-pool-stats-get.
func (netdevMsgs) PagePoolStatsGet() op {
	return netdevGetOp(wire.NetdevCmdPagePoolStatsGet, "page-pool-stats-get", netdevPoolStatsPolicy, (*Server).netdevPoolStatsGet, (*Server).netdevPoolStatsDump)
}

// QueueGet is queue-get, a split op.
func (netdevMsgs) QueueGet() op {
	return splitOp(netdevGetOp(wire.NetdevCmdQueueGet, "queue-get", netdevQueueGetPolicy, (*Server).netdevQueueGet, (*Server).netdevQueueDump), netdevQueueDumpPolicy)
}

// NAPIGet is napi-get, a split op.
func (netdevMsgs) NAPIGet() op {
	return splitOp(netdevGetOp(wire.NetdevCmdNAPIGet, "napi-get", netdevNAPIGetPolicy, (*Server).netdevNAPIGet, (*Server).netdevNAPIDump), netdevNAPIDumpPolicy)
}

// QStatsGet is qstats-get, dump only.
func (netdevMsgs) QStatsGet() op {
	return netdevGetOp(wire.NetdevCmdQStatsGet, "qstats-get", netdevQStatsPolicy, nil, (*Server).netdevQStatsDump)
}

// NAPISet is napi-set: GENL_ADMIN_PERM | GENL_CMD_CAP_DO, as netdev.yaml's (flags: admin-perm).
func (netdevMsgs) NAPISet() op {
	return op{cmd: wire.NetdevCmdNAPISet, name: "napi-set", perm: unix.GENL_ADMIN_PERM, policy: netdevNAPISetPolicy,
		mode: nlattr.Strict, driver: "SetNAPI", doit: (*Server).netdevNAPISet}
}

func netdevFamily() *family {
	return &family{
		id: netdevID, name: wire.NetdevFamilyName, version: wire.NetdevFamilyVersion,
		ops:    opsOf(netdevMsgs{}),
		groups: []mcGroup{{id: netdevMgmtGroup, name: wire.NetdevGroupMgmt}, {id: netdevPagePoolGroup, name: wire.NetdevGroupPagePool}},
	}
}

// needNetdev is the EOPNOTSUPP of a Backend without NetdevPort.
func (s *Server) needNetdev() error {
	if s.cfg.Backend.NetdevPort == nil {
		return nlattr.Errorf(unix.EOPNOTSUPP, "the backend has no netdev views")
	}
	return nil
}

// netdevPort returns the views of the port with ifindex a (which the
// caller checked is present): ENODEV without extack when there is none, as
// __dev_get_by_index failing in the kernel.
func (r *request) netdevPort(a nlattr.Attr) (NetdevPort, error) {
	if err := r.s.needNetdev(); err != nil {
		return NetdevPort{}, err
	}
	d, err := r.s.cfg.Backend.DeviceByIndex(r.ctx, r.c.caller, a.U32())
	if err != nil {
		return NetdevPort{}, err
	}
	return r.netdevViews(d)
}

// netdevPorts returns the views of every port in the caller's netns, by
// ifindex; ports that vanish meanwhile are skipped.
func (r *request) netdevPorts() ([]NetdevPort, error) {
	if err := r.s.needNetdev(); err != nil {
		return nil, err
	}
	devs, err := r.s.cfg.Backend.Devices(r.ctx, r.c.caller)
	if err != nil {
		return nil, err
	}
	out := make([]NetdevPort, 0, len(devs))
	for _, d := range devs {
		p, err := r.netdevViews(d)
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EOPNOTSUPP) {
			continue // gone meanwhile, or no netdev views (not a port)
		} else if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (r *request) requiredAttr(t uint16) (nlattr.Attr, error) {
	a := r.attr(t)
	if !a.Present() { // GENL_REQ_ATTR_CHECK
		return a, nlattr.Missing(nlattr.Attr{}, t)
	}
	return a, nil
}

func (s *Server) netdevDevGet(r *request) error {
	a, err := r.requiredAttr(wire.NetdevADevIfindex)
	if err != nil {
		return err
	}
	p, err := r.netdevPort(a)
	if err != nil {
		return err
	}
	return r.reply(wire.NetdevCmdDevGet, func(b *nlattr.Builder) error { wire.NetdevDevTable.Put(b, &p.Dev); return nil })
}

func (s *Server) netdevDevDump(r *request, d *dumper) error {
	ports, err := r.netdevPorts()
	if err != nil {
		return err
	}
	for i := range ports {
		if err := d.add(wire.NetdevCmdDevGet, func(b *nlattr.Builder) error { wire.NetdevDevTable.Put(b, &ports[i].Dev); return nil }); err != nil {
			return err
		}
	}
	return nil
}

// netdevPoolByID finds a page pool of the caller's netns; ENOENT as
// netdev_nl_page_pool_get_do.
func (r *request) netdevPoolByID(id uint64) (NetdevPool, error) {
	ports, err := r.netdevPorts()
	if err != nil {
		return NetdevPool{}, err
	}
	for _, p := range ports {
		for _, pp := range p.Pools {
			if pp.Pool.ID == id {
				return pp, nil
			}
		}
	}
	return NetdevPool{}, unix.ENOENT
}

func (s *Server) netdevPoolGet(r *request) error {
	a, err := r.requiredAttr(wire.NetdevAPagePoolID)
	if err != nil {
		return err
	}
	id, err := nlUint(a)
	if err != nil {
		return err
	}
	if id < 1 || id > 0xffffffff { // netdev_a_page_pool_id_range
		return nlattr.AttrError(unix.ERANGE, a, "integer out of range")
	}
	pp, err := r.netdevPoolByID(id)
	if err != nil {
		return err
	}
	return r.reply(wire.NetdevCmdPagePoolGet, func(b *nlattr.Builder) error { wire.NetdevPagePoolTable.Put(b, &pp.Pool); return nil })
}

// poolsNewestFirst orders a device's pools as the kernel's dumps list them: newest (highest id)
// first, since page_pool_list adds each pool at the head of netdev->page_pools.
func poolsNewestFirst(ports []NetdevPort) {
	for _, p := range ports {
		slices.SortFunc(p.Pools, func(a, b NetdevPool) int { return cmp.Compare(b.Pool.ID, a.Pool.ID) })
	}
}

func (s *Server) netdevPoolDump(r *request, d *dumper) error {
	ports, err := r.netdevPorts()
	if err != nil {
		return err
	}
	poolsNewestFirst(ports)
	for _, p := range ports {
		for i := range p.Pools {
			if err := d.add(wire.NetdevCmdPagePoolGet, func(b *nlattr.Builder) error { wire.NetdevPagePoolTable.Put(b, &p.Pools[i].Pool); return nil }); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) netdevPoolStatsGet(r *request) error {
	nest, err := r.requiredAttr(wire.NetdevAPagePoolStatsInfo)
	if err != nil {
		return err
	}
	tb, err := nlattr.ParseNested(r.msg, nest, netdevPoolInfoPolicy)
	if err != nil {
		return err
	}
	idA := tb[wire.NetdevAPagePoolID]
	if !idA.Present() {
		return nlattr.Missing(nest, wire.NetdevAPagePoolID)
	}
	if ifA := tb[wire.NetdevAPagePoolIfindex]; ifA.Present() {
		return nlattr.AttrError(unix.EINVAL, ifA, "selecting by ifindex not supported")
	}
	id, err := nlUint(idA)
	if err != nil {
		return err
	}
	pp, err := r.netdevPoolByID(id)
	if err != nil {
		return err
	}
	return r.reply(wire.NetdevCmdPagePoolStatsGet, func(b *nlattr.Builder) error { wire.NetdevPagePoolStatsTable.Put(b, &pp.Stats); return nil })
}

func (s *Server) netdevPoolStatsDump(r *request, d *dumper) error {
	ports, err := r.netdevPorts()
	if err != nil {
		return err
	}
	poolsNewestFirst(ports)
	for _, p := range ports {
		for i := range p.Pools {
			if err := d.add(wire.NetdevCmdPagePoolStatsGet, func(b *nlattr.Builder) error {
				wire.NetdevPagePoolStatsTable.Put(b, &p.Pools[i].Stats)
				return nil
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) netdevQueueGet(r *request) error {
	var as [3]nlattr.Attr
	for i, t := range []uint16{wire.NetdevAQueueID, wire.NetdevAQueueType, wire.NetdevAQueueIfindex} {
		a, err := r.requiredAttr(t)
		if err != nil {
			return err
		}
		as[i] = a
	}
	p, err := r.netdevPort(as[2])
	if err != nil {
		return err
	}
	if len(p.Queues) == 0 { // netdev_nl_queue_fill: !(netdev->flags & IFF_UP)
		return unix.ENOENT
	}
	for i := range p.Queues {
		if q := &p.Queues[i]; q.ID == as[0].U32() && q.Type == as[1].U32() {
			return r.reply(wire.NetdevCmdQueueGet, func(b *nlattr.Builder) error { wire.NetdevQueueTable.Put(b, q); return nil })
		}
	}
	return unix.EINVAL // netdev_nl_queue_validate: q_id >= real_num_*x_queues
}

// dumpPorts runs each for the port named by the request's ifindex attribute
// t, or for every port of the caller's netns.
func (r *request) dumpPorts(t uint16, each func(p *NetdevPort) error) error {
	if a := r.attr(t); a.Present() {
		p, err := r.netdevPort(a)
		if err != nil {
			return err
		}
		return each(&p)
	}
	ports, err := r.netdevPorts()
	if err != nil {
		return err
	}
	for i := range ports {
		if err := each(&ports[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) netdevQueueDump(r *request, d *dumper) error {
	return r.dumpPorts(wire.NetdevAQueueIfindex, func(p *NetdevPort) error {
		for i := range p.Queues {
			if err := d.add(wire.NetdevCmdQueueGet, func(b *nlattr.Builder) error { wire.NetdevQueueTable.Put(b, &p.Queues[i]); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Server) netdevNAPIGet(r *request) error {
	a, err := r.requiredAttr(wire.NetdevANAPIID)
	if err != nil {
		return err
	}
	ports, err := r.netdevPorts()
	if err != nil {
		return err
	}
	for _, p := range ports {
		for i := range p.NAPIs {
			if n := &p.NAPIs[i]; n.ID == a.U32() {
				return r.reply(wire.NetdevCmdNAPIGet, func(b *nlattr.Builder) error { wire.NetdevNAPITable.Put(b, n); return nil })
			}
		}
	}
	return nlattr.AttrError(unix.ENOENT, a, "")
}

func (s *Server) netdevNAPIDump(r *request, d *dumper) error {
	return r.dumpPorts(wire.NetdevANAPIIfindex, func(p *NetdevPort) error {
		// The kernel walks dev->napi_list, newest first: highest id first.
		for i := len(p.NAPIs) - 1; i >= 0; i-- {
			if err := d.add(wire.NetdevCmdNAPIGet, func(b *nlattr.Builder) error { wire.NetdevNAPITable.Put(b, &p.NAPIs[i]); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
}

// netdevQStatsDump mirrors netdev_nl_qstats_get_dumpit: scope 0 gives one
// message per device, scope queue one per running queue (none while down).
func (s *Server) netdevQStatsDump(r *request, d *dumper) error {
	var scope uint64
	if a := r.attr(wire.NetdevAQStatsScope); a.Present() {
		var err error
		if scope, err = nlUint(a); err != nil {
			return err
		}
		if scope&^wire.NetdevQStatsScopeQueue != 0 { // NLA_POLICY_MASK(NLA_UINT, 0x1)
			return nlattr.AttrError(unix.EINVAL, a, "unsupported flags")
		}
	}
	err := r.dumpPorts(wire.NetdevAQStatsIfindex, func(p *NetdevPort) error {
		if scope == 0 {
			return d.add(wire.NetdevCmdQStatsGet, func(b *nlattr.Builder) error { wire.NetdevQStatsTable.Put(b, &p.Device); return nil })
		}
		for i := range p.QueueStats {
			if err := d.add(wire.NetdevCmdQStatsGet, func(b *nlattr.Builder) error { wire.NetdevQStatsTable.Put(b, &p.QueueStats[i]); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	// NL_SET_BAD_ATTR on the ifindex: no such device, or one without stat_ops.
	for _, errno := range []unix.Errno{unix.ENODEV, unix.EOPNOTSUPP} {
		if errors.Is(err, errno) {
			return nlattr.AttrError(errno, r.attr(wire.NetdevAQStatsIfindex), "")
		}
	}
	return err
}

// NAPISet is what a napi-set request changes on one NAPI (wire.NetdevNAPISet).
type NAPISet = wire.NetdevNAPISet

// netdevNAPISet mirrors netdev_nl_napi_set_doit: the id is required (GENL_REQ_ATTR_CHECK), a
// NAPI of another namespace or none is ENOENT with the id as the bad attribute, and the settings
// present are applied (threaded, defer-hard-irqs, irq-suspend-timeout, gro-flush-timeout).
// The admin check (GENL_ADMIN_PERM) is the dispatcher's, before the policy.
func (s *Server) netdevNAPISet(r *request) error {
	idA, err := r.requiredAttr(wire.NetdevANAPIID)
	if err != nil {
		return err
	}
	req, err := decodeRequest(r, wire.NetdevNAPISetTable)
	if err != nil {
		return err
	}
	set := req.NetdevNAPISet
	unknown := nlattr.AttrError(unix.ENOENT, idA, "")
	if s.cfg.Backend.SetNAPI == nil {
		return unknown // no NAPI the server could change
	}
	d, found, err := r.napiDevice(idA.U32())
	if err != nil {
		return err
	}
	if !found {
		return unknown
	}
	if err := s.cfg.Backend.SetNAPI(r.ctx, r.c.caller, d, idA.U32(), set); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
			return unknown // gone meanwhile: as if it had never been there
		}
		return err
	}
	return nil
}

// napiDevice finds the device of the caller's netns that has the NAPI with id (napi-get's view).
func (r *request) napiDevice(id uint32) (Device, bool, error) {
	if err := r.s.needNetdev(); err != nil {
		return Device{}, false, err
	}
	devs, err := r.s.cfg.Backend.Devices(r.ctx, r.c.caller)
	if err != nil {
		return Device{}, false, err
	}
	for _, d := range devs {
		var p NetdevPort
		if nb := r.s.cfg.Backend; nb.NetdevViews != nil {
			p, err = nb.NetdevViews(r.ctx, r.c.caller, d, NetdevViewNAPIs)
		} else {
			p, err = nb.NetdevPort(r.ctx, r.c.caller, d)
		}
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EOPNOTSUPP) {
			continue
		} else if err != nil {
			return Device{}, false, err
		}
		for _, n := range p.NAPIs {
			if n.ID == id {
				return d, true, nil
			}
		}
	}
	return Device{}, false, nil
}
