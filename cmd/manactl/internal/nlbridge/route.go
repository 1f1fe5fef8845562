package nlbridge

import (
	"encoding/binary"
	"math"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// netdev commands of netdev.yaml that the bridge routes (beyond wire's).
const (
	netdevADMABufIfindex = 1 // NETDEV_A_DMABUF_IFINDEX of bind-rx
)

// route decides where the program's message m goes.
func (s *Socket) route(m []byte) *request {
	h, _ := nlattr.ReadHeader(m)
	r := &request{orig: m, hdr: h, doneCh: make(chan struct{})}
	r.mode = modeKernel
	defer func() {
		if r.mode == modeKernel {
			r.marker = s.seq.Add(1)
		}
	}()
	if !isGenlReq(h) {
		return r
	}
	if isDump(h) {
		r.mode = modeKernelDump
	}
	cmd, ok := genlCmd(m)
	if !ok {
		return r // too short for a genlmsghdr: the kernel says EINVAL
	}
	switch {
	case h.Type == unix.GENL_ID_CTRL:
		s.routeCtrl(r, cmd)
	case h.Type == s.kEthtool && s.kEthtool != 0 && s.mEthtool != 0:
		s.routeEthtool(r)
	case h.Type == s.kNetdev && s.kNetdev != 0 && s.mNetdev != 0:
		s.routeNetdev(r, cmd)
	case h.Type == s.rManad:
		s.toManad(r, s.mManad)
	}
	return r
}

// toManad sends r to manad alone, as manad's family typ.
func (s *Socket) toManad(r *request, typ uint16) {
	r.mode = modeManad
	if cmd, ok := genlCmd(r.orig); ok && !isDump(r.hdr) && r.hdr.Flags&nlattr.FlagAck == 0 && s.replyEnds(typ, cmd) {
		r.replyEnds = true
	}
	r.fwd = s.forward(r, typ)
}

// ethtoolGets are the ethtool commands whose do request is answered by one reply message, or
// an NLMSG_ERROR, never by nothing (ethnl_default_doit: a reply or an error).
var ethtoolGets = map[uint8]bool{
	unix.ETHTOOL_MSG_STRSET_GET: true, unix.ETHTOOL_MSG_LINKINFO_GET: true, unix.ETHTOOL_MSG_LINKMODES_GET: true,
	unix.ETHTOOL_MSG_LINKSTATE_GET: true, unix.ETHTOOL_MSG_DEBUG_GET: true, unix.ETHTOOL_MSG_WOL_GET: true,
	unix.ETHTOOL_MSG_FEATURES_GET: true, unix.ETHTOOL_MSG_PRIVFLAGS_GET: true, unix.ETHTOOL_MSG_RINGS_GET: true,
	unix.ETHTOOL_MSG_CHANNELS_GET: true, unix.ETHTOOL_MSG_COALESCE_GET: true, unix.ETHTOOL_MSG_PAUSE_GET: true,
	unix.ETHTOOL_MSG_EEE_GET: true, unix.ETHTOOL_MSG_TSINFO_GET: true, unix.ETHTOOL_MSG_TUNNEL_INFO_GET: true,
	unix.ETHTOOL_MSG_FEC_GET: true, unix.ETHTOOL_MSG_MODULE_EEPROM_GET: true, unix.ETHTOOL_MSG_STATS_GET: true,
	unix.ETHTOOL_MSG_PHC_VCLOCKS_GET: true, unix.ETHTOOL_MSG_MODULE_GET: true, unix.ETHTOOL_MSG_PSE_GET: true,
	unix.ETHTOOL_MSG_RSS_GET: true, unix.ETHTOOL_MSG_PLCA_GET_CFG: true, unix.ETHTOOL_MSG_PLCA_GET_STATUS: true,
	unix.ETHTOOL_MSG_MM_GET: true, unix.ETHTOOL_MSG_PHY_GET: true, unix.ETHTOOL_MSG_TSCONFIG_GET: true,
}

// replyEnds reports whether manad answers a do request of its family typ with command cmd by
// one reply message or an NLMSG_ERROR (a GET): the reply then ends the request, and the bridge
// asks for no ACK to see the end. The ACK would be one more datagram, which manad writes after
// the reply (tens of microseconds later), and which the bridge would wait for and read.
func (s *Socket) replyEnds(typ uint16, cmd uint8) bool {
	switch {
	case typ == unix.GENL_ID_CTRL:
		return cmd == unix.CTRL_CMD_GETFAMILY
	case typ == s.mEthtool && s.mEthtool != 0:
		return ethtoolGets[cmd]
	case typ == s.mNetdev && s.mNetdev != 0:
		switch cmd {
		case wire.NetdevCmdDevGet, wire.NetdevCmdPagePoolGet, wire.NetdevCmdPagePoolStatsGet,
			wire.NetdevCmdQueueGet, wire.NetdevCmdNAPIGet:
			return true
		}
	}
	return false
}

// merge sends the dump r to both, manad's half as its family typ. Kernel entries for manad's
// ports are dropped (the kernel knows them as tun devices).
func (s *Socket) merge(r *request, typ uint16, ethtoolFam bool) {
	r.mode = modeMerged
	r.fwd = s.forward(r, typ)
	r.kstart = make(chan verdict, 1)
	if typ != unix.GENL_ID_CTRL {
		s.cache.fresh()
		r.kernelDrop = func(m []byte) bool {
			idx, ok := s.devOf(m, ethtoolFam, !ethtoolFam)
			return ok && s.cache.hasPort(idx)
		}
	}
}

// forward is r's message as manad gets it: manad's family id, NLM_F_ACK so that every request
// ends with an answer the bridge can see (but a GET, whose reply is one: see replyEnds), and
// the kernel socket's port id as nlmsg_pid, which manad echoes in its answers.
func (s *Socket) forward(r *request, typ uint16) []byte {
	f := append([]byte(nil), r.orig...)
	if typ == s.mNetdev && s.mNetdev != 0 {
		shiftIDs(f, false)
	}
	putType(f, typ)
	if !r.replyEnds {
		putFlags(f, r.hdr.Flags|nlattr.FlagAck)
	}
	putPID(f, s.PortID())
	return f
}

// routeCtrl routes nlctrl: the kernel answers for its families (ethtool and netdev included:
// the program sees the kernel's ids, ops and groups), manad for its own family, whose id the
// program knows as rManad; a family dump is the kernel's plus manad's family.
func (s *Socket) routeCtrl(r *request, cmd uint8) {
	switch cmd {
	case unix.CTRL_CMD_GETFAMILY, unix.CTRL_CMD_GETPOLICY:
	default:
		return
	}
	name := genlAttr(r.orig, unix.CTRL_ATTR_FAMILY_NAME)
	id := genlAttr(r.orig, unix.CTRL_ATTR_FAMILY_ID)
	mine := (name.Present() && name.Str() == wire.FamilyName) || (len(id.Data) >= 2 && id.U16() == s.rManad)
	switch {
	case mine:
		s.toManad(r, unix.GENL_ID_CTRL)
		if len(id.Data) >= 2 && id.U16() == s.rManad {
			putU16At(r.fwd, id, s.mManad)
		}
	case cmd == unix.CTRL_CMD_GETFAMILY && isDump(r.hdr) && !name.Present() && !id.Present():
		s.merge(r, unix.GENL_ID_CTRL, false)
		r.manadKeep = func(m []byte) bool {
			f, ok := parseFamily(m)
			return ok && f.id == s.mManad
		}
	}
}

// routeEthtool routes the kernel's ethtool family by the device its header names: manad's ports
// to manad, anything else (or no device) to the kernel. Dumps go to both (the kernel's ethtool
// dumps ignore the header's device).
func (s *Socket) routeEthtool(r *request) {
	if isDump(r.hdr) {
		s.merge(r, s.mEthtool, true)
		return
	}
	idx, name := ethtoolDev(r.orig)
	if idx == 0 && name != "" {
		idx = s.k.ifindex(name)
	}
	if s.cache.isPort(idx) {
		s.toManad(r, s.mEthtool)
	}
}

// idBase is where the page-pool and NAPI ids of manad's ports begin as the program sees them:
// manad numbers its own from 1 and from the kernel's MIN_NAPI_ID, as the kernel numbers its
// (globally and upwards), so the same id could name a kernel page pool or NAPI of the program's
// namespace and one of manad's. The bridge adds idBase to manad's ids in everything manad sends
// and takes it off in what the program sends manad, so that an id names one of them only, and a
// by-id request is routed by its range: the kernel would need 2^31 page pools or NAPIs since
// boot to reach it.
const idBase = 1 << 31

// idAttrs are, per netdev command, the page-pool and NAPI id attributes (top-level, or in the
// page-pool-stats info nest) that shiftIDs translates.
var idAttrs = map[uint8][]uint16{
	wire.NetdevCmdPagePoolGet:       {wire.NetdevAPagePoolID, wire.NetdevAPagePoolNAPIID},
	wire.NetdevCmdPagePoolAddNtf:    {wire.NetdevAPagePoolID, wire.NetdevAPagePoolNAPIID},
	wire.NetdevCmdPagePoolDelNtf:    {wire.NetdevAPagePoolID, wire.NetdevAPagePoolNAPIID},
	wire.NetdevCmdPagePoolChangeNtf: {wire.NetdevAPagePoolID, wire.NetdevAPagePoolNAPIID},
	wire.NetdevCmdQueueGet:          {wire.NetdevAQueueNAPIID},
	wire.NetdevCmdNAPIGet:           {wire.NetdevANAPIID},
	wire.NetdevCmdNAPISet:           {wire.NetdevANAPIID},
}

// shiftIDs translates the page-pool and NAPI ids of a message of manad's netdev family in place:
// up by idBase when toProgram (manad's answers and notifications), else down (the program's
// request, whose ids below idBase, not manad's, are left alone for manad to refuse). A value that
// would not fit its attribute is left alone.
func shiftIDs(m []byte, toProgram bool) {
	cmd, ok := genlCmd(m)
	if !ok {
		return
	}
	shift := func(a nlattr.Attr) {
		v, ok := uintOf(a)
		switch {
		case !ok:
		case toProgram && v < idBase && (len(a.Data) >= 8 || v+idBase <= math.MaxUint32):
			putUintAt(m, a, v+idBase)
		case !toProgram && v >= idBase:
			putUintAt(m, a, v-idBase)
		}
	}
	if cmd == wire.NetdevCmdPagePoolStatsGet {
		shift(nestedAttr(m, genlAttr(m, wire.NetdevAPagePoolStatsInfo), wire.NetdevAPagePoolID))
		return
	}
	for _, t := range idAttrs[cmd] {
		shift(genlAttr(m, t))
	}
}

// putUintAt overwrites a u32 or u64 attribute's value.
func putUintAt(m []byte, a nlattr.Attr, v uint64) {
	switch {
	case len(a.Data) >= 8:
		binary.NativeEndian.PutUint64(m[a.PayloadOff():], v)
	case len(a.Data) >= 4:
		binary.NativeEndian.PutUint32(m[a.PayloadOff():], uint32(v))
	}
}

// routeNetdev routes the kernel's netdev family: by ifindex (dev-get, queue-get, the filtered
// dumps of queue-get, napi-get and qstats-get, bind-rx), by page-pool id or NAPI id in manad's
// range (idBase); unfiltered dumps go to both.
func (s *Socket) routeNetdev(r *request, cmd uint8) {
	var (
		ifindex uint32
		byIdx   bool
		ownID   bool
	)
	dump := isDump(r.hdr)
	switch cmd {
	case wire.NetdevCmdDevGet:
		ifindex, byIdx = u32Of(genlAttr(r.orig, wire.NetdevADevIfindex))
	case wire.NetdevCmdPagePoolGet:
		if !dump {
			if id, ok := uintOf(genlAttr(r.orig, wire.NetdevAPagePoolID)); ok {
				ownID = id >= idBase
			}
		}
	case wire.NetdevCmdPagePoolStatsGet:
		info := genlAttr(r.orig, wire.NetdevAPagePoolStatsInfo)
		if id, ok := uintOf(nestedAttr(r.orig, info, wire.NetdevAPagePoolID)); ok {
			ownID = id >= idBase
		} else {
			ifindex, byIdx = u32Of(nestedAttr(r.orig, info, wire.NetdevAPagePoolIfindex))
		}
	case wire.NetdevCmdQueueGet:
		ifindex, byIdx = u32Of(genlAttr(r.orig, wire.NetdevAQueueIfindex))
	case wire.NetdevCmdNAPIGet, wire.NetdevCmdNAPISet:
		if dump {
			ifindex, byIdx = u32Of(genlAttr(r.orig, wire.NetdevANAPIIfindex))
		} else if id, ok := uintOf(genlAttr(r.orig, wire.NetdevANAPIID)); ok {
			ownID = id >= idBase
		}
	case wire.NetdevCmdQStatsGet:
		ifindex, byIdx = u32Of(genlAttr(r.orig, wire.NetdevAQStatsIfindex))
	case wire.NetdevCmdBindRX:
		ifindex, byIdx = u32Of(genlAttr(r.orig, netdevADMABufIfindex))
	default:
		return
	}
	switch {
	case ownID || (byIdx && s.cache.isPort(ifindex)):
		s.toManad(r, s.mNetdev)
	case dump && !byIdx && cmd != wire.NetdevCmdBindRX:
		s.merge(r, s.mNetdev, false)
	}
}

// devOf returns the ifindex an ethtool or netdev message (a reply, a dump entry or a
// notification) is about; ok is false when it names none or is of another family.
func (s *Socket) devOf(m []byte, ethtoolFam, netdevFam bool) (uint32, bool) {
	switch {
	case ethtoolFam:
		idx, _ := ethtoolDev(m)
		return idx, idx != 0
	case netdevFam:
		cmd, ok := genlCmd(m)
		if !ok {
			return 0, false
		}
		switch cmd {
		case wire.NetdevCmdDevGet, wire.NetdevCmdDevAddNtf, wire.NetdevCmdDevDelNtf, wire.NetdevCmdDevChangeNtf:
			return u32Of(genlAttr(m, wire.NetdevADevIfindex))
		case wire.NetdevCmdPagePoolGet, wire.NetdevCmdPagePoolAddNtf, wire.NetdevCmdPagePoolDelNtf, wire.NetdevCmdPagePoolChangeNtf:
			return u32Of(genlAttr(m, wire.NetdevAPagePoolIfindex))
		case wire.NetdevCmdPagePoolStatsGet:
			return u32Of(nestedAttr(m, genlAttr(m, wire.NetdevAPagePoolStatsInfo), wire.NetdevAPagePoolIfindex))
		case wire.NetdevCmdQueueGet:
			return u32Of(genlAttr(m, wire.NetdevAQueueIfindex))
		case wire.NetdevCmdNAPIGet:
			return u32Of(genlAttr(m, wire.NetdevANAPIIfindex))
		case wire.NetdevCmdQStatsGet:
			return u32Of(genlAttr(m, wire.NetdevAQStatsIfindex))
		}
	}
	return 0, false
}

// translate turns one of manad's messages into what the program sees: the kernel's family ids
// (ethtool, netdev) or rManad for manad's family, manad's family id and group ids inside nlctrl
// answers, nlmsg_pid = pid (the port id for answers, 0 for notifications).
func (s *Socket) translate(m []byte, pid uint32) {
	putPID(m, pid)
	switch t := msgType(m); {
	case t < nlattr.MsgMinType:
	case t == unix.GENL_ID_CTRL:
		s.translateCtrl(m)
	case t == s.mEthtool:
		putType(m, s.kEthtool)
	case t == s.mNetdev:
		shiftIDs(m, true)
		putType(m, s.kNetdev)
	case t == s.mManad:
		putType(m, s.rManad)
	}
}

// translateCtrl rewrites manad's family id and its group ids in an nlctrl answer (NEWFAMILY, a
// policy dump entry) to the ids the program knows.
func (s *Socket) translateCtrl(m []byte) {
	id := genlAttr(m, unix.CTRL_ATTR_FAMILY_ID)
	if len(id.Data) < 2 || id.U16() != s.mManad {
		return
	}
	putU16At(m, id, s.rManad)
	for it := nlattr.NestedIter(m, genlAttr(m, unix.CTRL_ATTR_MCAST_GROUPS)); it.Next(); {
		a := nestedAttr(m, it.Attr(), unix.CTRL_ATTR_MCAST_GRP_ID)
		if g, ok := u32Of(a); ok {
			if r, ok := s.manadGroupIDs[g]; ok {
				putU32At(m, a, r)
			}
		}
	}
}

// portEvent keeps the port cache current from manad's PORT_NEW_NTF and PORT_DEL_NTF (sent only
// for the program's namespace).
func (c *cache) portEvent(m []byte, cmd uint8) {
	switch cmd {
	case wire.CmdPortNewNtf, wire.CmdPortDelNtf:
	default:
		return
	}
	idx, ok := c.portOf(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !ok:
		c.dirty = true
	case cmd == wire.CmdPortNewNtf:
		c.ports[idx] = true
	default:
		delete(c.ports, idx)
	}
}
