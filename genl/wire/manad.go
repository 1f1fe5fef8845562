package wire

import "net"

// The manad family (see genl's package documentation for its commands and
// conventions): identity, commands, attributes, the structs they carry and
// their tables.

// Identity of the manad family (see the package documentation for its
// commands and conventions).
const (
	FamilyName    = "manad"
	FamilyVersion = 1
	EventsGroup   = "events"
)

// Commands of the manad family.
const (
	CmdPortGet       uint8 = 1
	CmdPortNew       uint8 = 2
	CmdPortDel       uint8 = 3
	CmdPortSetMTU    uint8 = 4
	CmdXDPAttach     uint8 = 5
	CmdXDPDetach     uint8 = 6
	CmdStatsGet      uint8 = 7
	CmdLayoutPlan    uint8 = 8
	CmdFaultSet      uint8 = 9
	CmdGroupJoin     uint8 = 10
	CmdGroupLeave    uint8 = 11
	CmdSetOption     uint8 = 12
	CmdPortNewNtf    uint8 = 13
	CmdPortDelNtf    uint8 = 14
	CmdPortChangeNtf uint8 = 15
)

// Top-level attributes of the manad family.
const (
	AttrHeader        uint16 = 1  // nest: ETHTOOL_A_HEADER_DEV_INDEX (u32), _DEV_NAME (string), _FLAGS (u32, must be 0..3)
	AttrPort          uint16 = 2  // nest: PortAttr*
	AttrMTU           uint16 = 3  // u32
	AttrXDP           uint16 = 4  // nest: XDPAttr*
	AttrStat          uint16 = 5  // nest: StatAttr*; repeated, in driver order
	AttrLayoutRequest uint16 = 6  // nest: LayoutAttr* (request subset, plus LayoutAttrRule repeated)
	AttrLayout        uint16 = 7  // nest: LayoutAttr*; repeated, one per rule
	AttrFault         uint16 = 8  // nest: FaultAttr*
	AttrGroup         uint16 = 9  // u32 multicast group id
	AttrOption        uint16 = 10 // u32 NETLINK_* socket option number
	AttrOptionValue   uint16 = 11 // u8 0/1
	AttrXDPObject     uint16 = 12 // binary: a chunk of an eBPF ELF object; repeated, concatenated in order
	AttrMax                  = AttrXDPObject
)

// Attributes inside AttrPort. PORT_NEW accepts those of PortSpecTable (one
// per key of a configuration file's [[port]] table: DEV_NAME, NETNS, SEGMENT,
// MAC, PERSISTENT, MTU, MAX_MTU, PAGE_SIZE, QUEUES, MAX_QUEUES, RX_RING,
// TX_RING, PRIV_FLAGS, MEMORY_BUDGET, OFFLOAD, RX_ALLOC, RX_RECYCLE, SPEED,
// XDP, RULE, CQE_COALESCE_8, RX_CQE_FRAMES and the NAPI settings); replies
// carry all of them. Attributes are appended, never renumbered; each has a
// row in PortKeys (manactl's JSON key and port add flag), and PortAttrMax
// is the last.
const (
	PortAttrDevIndex        uint16 = 1  // u32
	PortAttrDevName         uint16 = 2  // string
	PortAttrNetNS           uint16 = 3  // string: netns name ("" = the daemon's)
	PortAttrSegment         uint16 = 4  // string: wire segment
	PortAttrMAC             uint16 = 5  // binary, 6 bytes
	PortAttrAdminUp         uint16 = 6  // u8
	PortAttrRunning         uint16 = 7  // u8
	PortAttrDetached        uint16 = 8  // u8
	PortAttrResetPending    uint16 = 9  // u8
	PortAttrPersistent      uint16 = 10 // u8
	PortAttrMTU             uint16 = 11 // u32
	PortAttrMinMTU          uint16 = 12 // u32
	PortAttrMaxMTU          uint16 = 13 // u32
	PortAttrPageSize        uint16 = 14 // u32
	PortAttrQueues          uint16 = 15 // u32
	PortAttrMaxQueues       uint16 = 16 // u32
	PortAttrRxRing          uint16 = 17 // u32
	PortAttrTxRing          uint16 = 18 // u32
	PortAttrPrivFlags       uint16 = 19 // u32 bitmap
	PortAttrPrivFlagNames   uint16 = 20 // nest of ListItem strings, bit order
	PortAttrXDP             uint16 = 21 // string ("" = none)
	PortAttrLayout          uint16 = 22 // nest: LayoutAttr*
	PortAttrPagesPinned     uint16 = 23 // u64
	PortAttrBytesPinned     uint16 = 24 // u64
	PortAttrBuffersInFlight uint16 = 25 // u64
	PortAttrMemoryInUse     uint16 = 26 // u64
	PortAttrMemoryPeak      uint16 = 27 // u64
	PortAttrMemoryBudget    uint16 = 28 // u64
	PortAttrFaults          uint16 = 29 // nest of ListItem nests: FaultAttr*
	PortAttrNetNSDev        uint16 = 30 // u64: st_dev of the port's netns
	PortAttrNetNSIno        uint16 = 31 // u64: st_ino of the port's netns
	PortAttrOffload         uint16 = 32 // u8: the TAP carries virtio headers (config offload; ethtool -K)
	PortAttrRxAlloc         uint16 = 33 // string: "page-pool-frag" | "page-pool-page" | "no-pool" (config rx_alloc)
	PortAttrRxRecycle       uint16 = 34 // u8: RX pages are recycled (config rx_recycle)
	PortAttrSpeed           uint16 = 35 // u32: link speed in Mb/s, LINKMODES_GET's; 0 = unknown (config speed)
	PortAttrNetNSToo        uint16 = 36 // u8: PORT_DEL: delete the port's named netns too (PortDel)
	PortAttrNetNSDeleted    uint16 = 37 // u8: PORT_DEL reply: the netns was deleted
	PortAttrNotice          uint16 = 38 // string: PORT_DEL reply: why the netns was kept
	PortAttrRxShortHeadroom uint16 = 39 // u64: RX frames delivered with less headroom than LL_RESERVED_SPACE
	PortAttrRule            uint16 = 40 // string: RX buffer rule, "upstream" | "pre-headroom" | "pre-frag" (config rule)
	PortAttrCQECoalesce8    uint16 = 41 // u8: the vport may coalesce 8 packets per RX CQE (config cqe_coalesce_8)
	PortAttrRxCQEFrames     uint16 = 42 // u32: packets per RX CQE, ethtool -C rx-cqe-frames (config rx_cqe_frames)
	PortAttrNAPIDeferIRQs   uint16 = 43 // u32: every NAPI's defer-hard-irqs (config napi_defer_hard_irqs)
	PortAttrGROFlushTimeout uint16 = 44 // u64: every NAPI's gro-flush-timeout in ns (config gro_flush_timeout)
	PortAttrIRQSuspendTmo   uint16 = 45 // u64: every NAPI's irq-suspend-timeout in ns (config irq_suspend_timeout)
	PortAttrCoalesce        uint16 = 46 // nest: ETHTOOL_A_COALESCE_* as COALESCE_GET's reply (replies only)
	PortAttrRSSKey          uint16 = 47 // binary: the RSS hash key, ethtool -x's (replies only)
	PortAttrNAPIThreaded    uint16 = 48 // u8: every NAPI's threaded (config napi_threaded)
	PortAttrMSIXVectors     uint16 = 49 // u32: the adapter's usable MSI-X vectors (config msix_vectors; 0 = enough)
	PortAttrMax                    = PortAttrMSIXVectors
)

// Attributes inside AttrLayout, PortAttrLayout and AttrLayoutRequest. A
// request accepts PAGE_SIZE, MTU, XDP, FULL_PAGE_RX, RING_SIZE, QUEUES and
// RULE (repeated).
const (
	LayoutAttrRule          uint16 = 1  // string: "upstream" | "pre-headroom" | "pre-frag"
	LayoutAttrPageSize      uint16 = 2  // u32
	LayoutAttrMTU           uint16 = 3  // u32
	LayoutAttrXDP           uint16 = 4  // u8
	LayoutAttrFullPageRx    uint16 = 5  // u8
	LayoutAttrDataSize      uint16 = 6  // u32
	LayoutAttrAllocSize     uint16 = 7  // u32
	LayoutAttrHeadroom      uint16 = 8  // u32
	LayoutAttrBufSize       uint16 = 9  // u32
	LayoutAttrFragCount     uint16 = 10 // u32
	LayoutAttrOrder         uint16 = 11 // u32
	LayoutAttrPoolSize      uint16 = 12 // u32
	LayoutAttrSingle        uint16 = 13 // u8
	LayoutAttrReason        uint16 = 14 // string
	LayoutAttrRingSize      uint16 = 15 // u32
	LayoutAttrQueues        uint16 = 16 // u32
	LayoutAttrPagesPerQueue uint16 = 17 // u32
	LayoutAttrBytesPerQueue uint16 = 18 // u64
	LayoutAttrBytesTotal    uint16 = 19 // u64
	LayoutAttrMax                  = LayoutAttrBytesTotal
)

// Attributes inside AttrFault and the PortAttrFaults items.
const (
	FaultAttrPoint uint16 = 1 // string: a fault point's name (vnic/faultpoint.Names)
	FaultAttrMode  uint16 = 2 // string: "off" | "once" | "count" | "always"
	FaultAttrCount uint16 = 3 // u32, required (> 0) for "count"
	FaultAttrErrno uint16 = 4 // u32, 0 = the point's default
	FaultAttrMax          = FaultAttrErrno
)

// Attributes inside AttrXDP. A program is either BUILTIN or an object sent
// as top-level AttrXDPObject chunks (an attribute, and so a nest, holds
// less than 64 KiB; the request datagram must also fit in the server's
// MaxMessage and the client's socket send buffer).
const (
	XDPAttrBuiltin uint16 = 1 // string: "pass" | "drop" | "tx" | "aborted"
	XDPAttrSection uint16 = 2 // string: ELF section of the program (object only)
	XDPAttrName    uint16 = 3 // string: program name (object only)
	XDPAttrMax            = XDPAttrName
)

// Attributes inside AttrStat.
const (
	StatAttrName  uint16 = 1 // string
	StatAttrValue uint16 = 2 // u64
)

// ListItem is the attribute type of every element of a list nest
// (PortAttrPrivFlagNames, PortAttrFaults).
const ListItem uint16 = 1

// NetNS identifies a network namespace (st_dev/st_ino of /proc/<pid>/ns/net).
type NetNS struct{ Dev, Ino uint64 }

// Device is a netdev as the backend resolved it.
type Device struct {
	Index uint32
	Name  string
	NetNS NetNS
}

// Stat is one driver statistic, as ethtool -S shows it.
type Stat struct {
	Name  string
	Value uint64
}

// RxBufLayout is the wire form of an RX buffer layout (the daemon converts
// from vnic/rxbuf).
type RxBufLayout struct {
	Rule                                                               string // "upstream" | "pre-headroom" | "pre-frag"
	PageSize, MTU                                                      uint32
	XDP, FullPageRx                                                    bool
	DataSize, AllocSize, Headroom, BufSize, FragCount, Order, PoolSize uint32
	Single                                                             bool
	Reason                                                             string // why single-buffer or fragment mode
	RingSize, Queues, PagesPerQueue                                    uint32
	BytesPerQueue, BytesTotal                                          uint64
}

// LayoutRequest asks for the layouts of hypothetical parameters. Empty Rules
// means the backend's default set.
type LayoutRequest struct {
	PageSize, MTU, RingSize, Queues uint32
	XDP, FullPageRx                 bool
	Rules                           []string
}

// Fault is a fault-injection setting for one reconfiguration point.
type Fault struct {
	Point string // a fault point's name (vnic/faultpoint.Names)
	Mode  string // "off" | "once" | "count" | "always"
	Count uint32 // for "count"
	Errno uint32 // 0 = default for the point
}

// XDPProgram is an XDP program to attach: a built-in verdict program or an
// eBPF ELF object.
type XDPProgram struct {
	Builtin string // "pass" | "drop" | "tx" | "aborted"
	Object  []byte // ELF object
	Section string
	Name    string
}

// PortSpec describes a port to create.
type PortSpec struct {
	Name                                                     string
	MAC                                                      net.HardwareAddr
	MTU, MaxMTU, PageSize, Queues, MaxQueues, RxRing, TxRing uint32
	Segment, NetNS                                           string
	MemoryBudget                                             uint64
	Persistent                                               bool
	PrivFlags                                                uint32
	// Offload and RxRecycle are nil when not given: the daemon's default, on.
	Offload, RxRecycle *bool
	RxAlloc            string // "" = the rule's choice (page-pool-frag)
	Speed              uint32 // Mb/s; 0 = unknown
	XDP                string // built-in program name; "" = none
	Rule               string // "" = upstream
	CQECoalesce8       bool
	RxCQEFrames        uint32 // 0 = the default (1)
	// NAPI settings every queue starts with; zero = the default (none).
	NAPIDeferHardIRQs                      uint32
	GROFlushTimeoutNs, IRQSuspendTimeoutNs uint64
	NAPIThreaded                           bool
	MSIXVectors                            uint32
}

// PortDel is PORT_DEL's AttrPort: the request's NetNSToo (delete the port's
// named network namespace too, when it is empty and one manad created) and,
// for such a request, the reply: the port and namespace names, whether the
// namespace was deleted and, when not, why.
type PortDel struct {
	Name, NetNS  string
	NetNSToo     bool
	NetNSDeleted bool
	Notice       string
}

// PortInfo is the full state of a port.
type PortInfo struct {
	Device                                               Device
	NetNSName, Segment                                   string
	MAC                                                  net.HardwareAddr
	AdminUp, Running, Detached, ResetPending, Persistent bool
	MTU, MinMTU, MaxMTU, PageSize, Queues, MaxQueues     uint32
	RxRing, TxRing                                       uint32
	PrivFlags                                            uint32
	PrivFlagNames                                        []string
	XDP                                                  string // "" = none, else "pass"/"drop"/"tx"/"aborted" or "ebpf:<name>"
	Layout                                               RxBufLayout
	PagesPinned, BytesPinned, BuffersInFlight            uint64 // live, from the page pools
	MemoryInUse, MemoryPeak, MemoryBudget                uint64
	Faults                                               []Fault
	Offload, RxRecycle                                   bool
	RxAlloc                                              string
	Speed                                                uint32 // Mb/s; 0 = unknown
	// RxShortHeadroom counts the frames delivered with less headroom than LL_RESERVED_SPACE
	// (256): those the kernel would pskb_expand_head to forward out of a MANA port (seed 002).
	RxShortHeadroom uint64
	Rule            string // "upstream" | "pre-headroom" | "pre-frag"
	CQECoalesce8    bool
	RxCQEFrames     uint32
	// NAPI settings: the value most queues have (napi-get shows each queue's).
	NAPIDeferHardIRQs                      uint32
	GROFlushTimeoutNs, IRQSuspendTimeoutNs uint64
	NAPIThreaded                           bool
	MSIXVectors                            uint32
	Coalesce                               Coalesce // as COALESCE_GET's
	RSSKey                                 []byte
}

// Tables of the manad family's attribute sets. Put writes the attributes in
// row order, which is the order of the replies on the wire.
var (
	// LayoutTable is AttrLayout and PortAttrLayout.
	LayoutTable = NewTable(
		String(LayoutAttrRule, func(l *RxBufLayout) *string { return &l.Rule }),
		U32(LayoutAttrPageSize, func(l *RxBufLayout) *uint32 { return &l.PageSize }),
		U32(LayoutAttrMTU, func(l *RxBufLayout) *uint32 { return &l.MTU }),
		Bool(LayoutAttrXDP, func(l *RxBufLayout) *bool { return &l.XDP }),
		Bool(LayoutAttrFullPageRx, func(l *RxBufLayout) *bool { return &l.FullPageRx }),
		U32(LayoutAttrDataSize, func(l *RxBufLayout) *uint32 { return &l.DataSize }),
		U32(LayoutAttrAllocSize, func(l *RxBufLayout) *uint32 { return &l.AllocSize }),
		U32(LayoutAttrHeadroom, func(l *RxBufLayout) *uint32 { return &l.Headroom }),
		U32(LayoutAttrBufSize, func(l *RxBufLayout) *uint32 { return &l.BufSize }),
		U32(LayoutAttrFragCount, func(l *RxBufLayout) *uint32 { return &l.FragCount }),
		U32(LayoutAttrOrder, func(l *RxBufLayout) *uint32 { return &l.Order }),
		U32(LayoutAttrPoolSize, func(l *RxBufLayout) *uint32 { return &l.PoolSize }),
		Bool(LayoutAttrSingle, func(l *RxBufLayout) *bool { return &l.Single }),
		String(LayoutAttrReason, func(l *RxBufLayout) *string { return &l.Reason }),
		U32(LayoutAttrRingSize, func(l *RxBufLayout) *uint32 { return &l.RingSize }),
		U32(LayoutAttrQueues, func(l *RxBufLayout) *uint32 { return &l.Queues }),
		U32(LayoutAttrPagesPerQueue, func(l *RxBufLayout) *uint32 { return &l.PagesPerQueue }),
		U64(LayoutAttrBytesPerQueue, func(l *RxBufLayout) *uint64 { return &l.BytesPerQueue }),
		U64(LayoutAttrBytesTotal, func(l *RxBufLayout) *uint64 { return &l.BytesTotal }),
	)

	// LayoutRequestTable is AttrLayoutRequest.
	LayoutRequestTable = NewTable(
		U32(LayoutAttrPageSize, func(r *LayoutRequest) *uint32 { return &r.PageSize }),
		U32(LayoutAttrMTU, func(r *LayoutRequest) *uint32 { return &r.MTU }),
		U32(LayoutAttrRingSize, func(r *LayoutRequest) *uint32 { return &r.RingSize }),
		U32(LayoutAttrQueues, func(r *LayoutRequest) *uint32 { return &r.Queues }),
		Bool(LayoutAttrXDP, func(r *LayoutRequest) *bool { return &r.XDP }),
		Bool(LayoutAttrFullPageRx, func(r *LayoutRequest) *bool { return &r.FullPageRx }),
		Repeated(LayoutAttrRule, func(r *LayoutRequest) *[]string { return &r.Rules }),
	)

	// FaultTable is AttrFault and the PortAttrFaults items. A request leaves
	// out a zero count and errno.
	FaultTable = NewTable(
		String(FaultAttrPoint, func(f *Fault) *string { return &f.Point }),
		String(FaultAttrMode, func(f *Fault) *string { return &f.Mode }),
		U32(FaultAttrCount, func(f *Fault) *uint32 { return &f.Count }),
		U32(FaultAttrErrno, func(f *Fault) *uint32 { return &f.Errno }),
	)

	// XDPTable is AttrXDP (the object travels in AttrXDPObject chunks).
	XDPTable = NewTable(
		String(XDPAttrBuiltin, func(p *XDPProgram) *string { return &p.Builtin }),
		String(XDPAttrSection, func(p *XDPProgram) *string { return &p.Section }),
		String(XDPAttrName, func(p *XDPProgram) *string { return &p.Name }),
	).OmitZero()

	// StatTable is one AttrStat.
	StatTable = NewTable(
		String(StatAttrName, func(s *Stat) *string { return &s.Name }),
		U64(StatAttrValue, func(s *Stat) *uint64 { return &s.Value }),
	)

	// PortSpecTable is AttrPort in PORT_NEW; zero fields are not sent and
	// mean the daemon's defaults.
	PortSpecTable = NewTable(
		String(PortAttrDevName, func(s *PortSpec) *string { return &s.Name }),
		String(PortAttrNetNS, func(s *PortSpec) *string { return &s.NetNS }),
		String(PortAttrSegment, func(s *PortSpec) *string { return &s.Segment }),
		MAC(PortAttrMAC, func(s *PortSpec) *net.HardwareAddr { return &s.MAC }),
		Bool(PortAttrPersistent, func(s *PortSpec) *bool { return &s.Persistent }),
		U32(PortAttrMTU, func(s *PortSpec) *uint32 { return &s.MTU }),
		U32(PortAttrMaxMTU, func(s *PortSpec) *uint32 { return &s.MaxMTU }),
		U32(PortAttrPageSize, func(s *PortSpec) *uint32 { return &s.PageSize }),
		U32(PortAttrQueues, func(s *PortSpec) *uint32 { return &s.Queues }),
		U32(PortAttrMaxQueues, func(s *PortSpec) *uint32 { return &s.MaxQueues }),
		U32(PortAttrRxRing, func(s *PortSpec) *uint32 { return &s.RxRing }),
		U32(PortAttrTxRing, func(s *PortSpec) *uint32 { return &s.TxRing }),
		U32(PortAttrPrivFlags, func(s *PortSpec) *uint32 { return &s.PrivFlags }),
		U64(PortAttrMemoryBudget, func(s *PortSpec) *uint64 { return &s.MemoryBudget }),
		OptBool(PortAttrOffload, func(s *PortSpec) **bool { return &s.Offload }),
		String(PortAttrRxAlloc, func(s *PortSpec) *string { return &s.RxAlloc }),
		OptBool(PortAttrRxRecycle, func(s *PortSpec) **bool { return &s.RxRecycle }),
		U32(PortAttrSpeed, func(s *PortSpec) *uint32 { return &s.Speed }),
		String(PortAttrXDP, func(s *PortSpec) *string { return &s.XDP }),
		String(PortAttrRule, func(s *PortSpec) *string { return &s.Rule }),
		Bool(PortAttrCQECoalesce8, func(s *PortSpec) *bool { return &s.CQECoalesce8 }),
		U32(PortAttrRxCQEFrames, func(s *PortSpec) *uint32 { return &s.RxCQEFrames }),
		U32(PortAttrNAPIDeferIRQs, func(s *PortSpec) *uint32 { return &s.NAPIDeferHardIRQs }),
		U64(PortAttrGROFlushTimeout, func(s *PortSpec) *uint64 { return &s.GROFlushTimeoutNs }),
		U64(PortAttrIRQSuspendTmo, func(s *PortSpec) *uint64 { return &s.IRQSuspendTimeoutNs }),
		Bool(PortAttrNAPIThreaded, func(s *PortSpec) *bool { return &s.NAPIThreaded }),
		U32(PortAttrMSIXVectors, func(s *PortSpec) *uint32 { return &s.MSIXVectors }),
	).OmitZero()

	// PortDelTable is AttrPort in PORT_DEL and its reply.
	PortDelTable = NewTable(
		String(PortAttrDevName, func(d *PortDel) *string { return &d.Name }),
		String(PortAttrNetNS, func(d *PortDel) *string { return &d.NetNS }),
		Bool(PortAttrNetNSToo, func(d *PortDel) *bool { return &d.NetNSToo }),
		Bool(PortAttrNetNSDeleted, func(d *PortDel) *bool { return &d.NetNSDeleted }),
		String(PortAttrNotice, func(d *PortDel) *string { return &d.Notice }),
	).OmitZero()

	// PortTable is AttrPort in replies and notifications.
	PortTable = NewTable(
		U32(PortAttrDevIndex, func(p *PortInfo) *uint32 { return &p.Device.Index }),
		String(PortAttrDevName, func(p *PortInfo) *string { return &p.Device.Name }),
		String(PortAttrNetNS, func(p *PortInfo) *string { return &p.NetNSName }),
		String(PortAttrSegment, func(p *PortInfo) *string { return &p.Segment }),
		MAC(PortAttrMAC, func(p *PortInfo) *net.HardwareAddr { return &p.MAC }),
		Bool(PortAttrAdminUp, func(p *PortInfo) *bool { return &p.AdminUp }),
		Bool(PortAttrRunning, func(p *PortInfo) *bool { return &p.Running }),
		Bool(PortAttrDetached, func(p *PortInfo) *bool { return &p.Detached }),
		Bool(PortAttrResetPending, func(p *PortInfo) *bool { return &p.ResetPending }),
		Bool(PortAttrPersistent, func(p *PortInfo) *bool { return &p.Persistent }),
		U32(PortAttrMTU, func(p *PortInfo) *uint32 { return &p.MTU }),
		U32(PortAttrMinMTU, func(p *PortInfo) *uint32 { return &p.MinMTU }),
		U32(PortAttrMaxMTU, func(p *PortInfo) *uint32 { return &p.MaxMTU }),
		U32(PortAttrPageSize, func(p *PortInfo) *uint32 { return &p.PageSize }),
		U32(PortAttrQueues, func(p *PortInfo) *uint32 { return &p.Queues }),
		U32(PortAttrMaxQueues, func(p *PortInfo) *uint32 { return &p.MaxQueues }),
		U32(PortAttrRxRing, func(p *PortInfo) *uint32 { return &p.RxRing }),
		U32(PortAttrTxRing, func(p *PortInfo) *uint32 { return &p.TxRing }),
		U32(PortAttrPrivFlags, func(p *PortInfo) *uint32 { return &p.PrivFlags }),
		Strings(PortAttrPrivFlagNames, func(p *PortInfo) *[]string { return &p.PrivFlagNames }),
		String(PortAttrXDP, func(p *PortInfo) *string { return &p.XDP }),
		Nest(PortAttrLayout, func(p *PortInfo) *RxBufLayout { return &p.Layout }, LayoutTable),
		U64(PortAttrPagesPinned, func(p *PortInfo) *uint64 { return &p.PagesPinned }),
		U64(PortAttrBytesPinned, func(p *PortInfo) *uint64 { return &p.BytesPinned }),
		U64(PortAttrBuffersInFlight, func(p *PortInfo) *uint64 { return &p.BuffersInFlight }),
		U64(PortAttrMemoryInUse, func(p *PortInfo) *uint64 { return &p.MemoryInUse }),
		U64(PortAttrMemoryPeak, func(p *PortInfo) *uint64 { return &p.MemoryPeak }),
		U64(PortAttrMemoryBudget, func(p *PortInfo) *uint64 { return &p.MemoryBudget }),
		NestList(PortAttrFaults, func(p *PortInfo) *[]Fault { return &p.Faults }, FaultTable),
		U64(PortAttrNetNSDev, func(p *PortInfo) *uint64 { return &p.Device.NetNS.Dev }),
		U64(PortAttrNetNSIno, func(p *PortInfo) *uint64 { return &p.Device.NetNS.Ino }),
		Bool(PortAttrOffload, func(p *PortInfo) *bool { return &p.Offload }),
		String(PortAttrRxAlloc, func(p *PortInfo) *string { return &p.RxAlloc }),
		Bool(PortAttrRxRecycle, func(p *PortInfo) *bool { return &p.RxRecycle }),
		U32(PortAttrSpeed, func(p *PortInfo) *uint32 { return &p.Speed }),
		U64(PortAttrRxShortHeadroom, func(p *PortInfo) *uint64 { return &p.RxShortHeadroom }),
		String(PortAttrRule, func(p *PortInfo) *string { return &p.Rule }),
		Bool(PortAttrCQECoalesce8, func(p *PortInfo) *bool { return &p.CQECoalesce8 }),
		U32(PortAttrRxCQEFrames, func(p *PortInfo) *uint32 { return &p.RxCQEFrames }),
		U32(PortAttrNAPIDeferIRQs, func(p *PortInfo) *uint32 { return &p.NAPIDeferHardIRQs }),
		U64(PortAttrGROFlushTimeout, func(p *PortInfo) *uint64 { return &p.GROFlushTimeoutNs }),
		U64(PortAttrIRQSuspendTmo, func(p *PortInfo) *uint64 { return &p.IRQSuspendTimeoutNs }),
		Nest(PortAttrCoalesce, func(p *PortInfo) *Coalesce { return &p.Coalesce }, CoalesceTable),
		Binary(PortAttrRSSKey, func(p *PortInfo) *[]byte { return &p.RSSKey }),
		Bool(PortAttrNAPIThreaded, func(p *PortInfo) *bool { return &p.NAPIThreaded }),
		U32(PortAttrMSIXVectors, func(p *PortInfo) *uint32 { return &p.MSIXVectors }),
	)
)

// PortKeys are the port attributes as manactl's port JSON shows them and port add asks for
// them (see PortKey), one row per PortAttr*, in the JSON's order: ifname first, as every
// object manactl shows, then the attributes by number.
var PortKeys = []PortKey{
	{Attr: PortAttrDevName, Key: "ifname", Flag: FlagArg,
		Spec: func(s *PortSpec) any { return &s.Name }, Info: func(p *PortInfo) any { return &p.Device.Name }},
	{Attr: PortAttrDevIndex, Key: "ifindex", Info: func(p *PortInfo) any { return &p.Device.Index }},
	{Attr: PortAttrNetNS, Key: "netns", Flag: FlagString, Help: "named network namespace for the TAP (created if missing)",
		Spec: func(s *PortSpec) any { return &s.NetNS }, Info: func(p *PortInfo) any { return &p.NetNSName }},
	{Attr: PortAttrSegment, Key: "segment", Flag: FlagString, Help: "wire segment to plug into",
		Spec: func(s *PortSpec) any { return &s.Segment }, Info: func(p *PortInfo) any { return &p.Segment }},
	{Attr: PortAttrMAC, Key: "mac", Flag: FlagMAC, Help: "MAC address (default: derived from the name)",
		Spec: func(s *PortSpec) any { return &s.MAC }, Info: func(p *PortInfo) any { return &p.MAC }},
	{Attr: PortAttrAdminUp, Key: "admin-up", Info: func(p *PortInfo) any { return &p.AdminUp }},
	{Attr: PortAttrRunning, Key: "running", Info: func(p *PortInfo) any { return &p.Running }},
	{Attr: PortAttrDetached, Key: "detached", Info: func(p *PortInfo) any { return &p.Detached }},
	{Attr: PortAttrResetPending, Key: "reset-pending", Info: func(p *PortInfo) any { return &p.ResetPending }},
	{Attr: PortAttrPersistent, Key: "persistent", Flag: FlagBool, Help: "the TAP outlives manad",
		Spec: func(s *PortSpec) any { return &s.Persistent }, Info: func(p *PortInfo) any { return &p.Persistent }},
	{Attr: PortAttrMTU, Key: "mtu", Flag: FlagUint, Help: "MTU",
		Spec: func(s *PortSpec) any { return &s.MTU }, Info: func(p *PortInfo) any { return &p.MTU }},
	{Attr: PortAttrMinMTU, Key: "min-mtu", Info: func(p *PortInfo) any { return &p.MinMTU }},
	{Attr: PortAttrMaxMTU, Key: "max-mtu", Flag: FlagUint, Help: "the adapter's maximum MTU",
		Spec: func(s *PortSpec) any { return &s.MaxMTU }, Info: func(p *PortInfo) any { return &p.MaxMTU }},
	{Attr: PortAttrPageSize, Key: "page-size", Flag: FlagPageSize, Help: "host page size the layout models: 4K, 16K or 64K",
		Spec: func(s *PortSpec) any { return &s.PageSize }, Info: func(p *PortInfo) any { return &p.PageSize }},
	{Attr: PortAttrQueues, Key: "queues", Flag: FlagUint, Help: "combined channels",
		Spec: func(s *PortSpec) any { return &s.Queues }, Info: func(p *PortInfo) any { return &p.Queues }},
	{Attr: PortAttrMaxQueues, Key: "max-queues", Flag: FlagUint, Help: "maximum combined channels",
		Spec: func(s *PortSpec) any { return &s.MaxQueues }, Info: func(p *PortInfo) any { return &p.MaxQueues }},
	{Attr: PortAttrRxRing, Key: "rx-ring", Flag: FlagUint, Help: "RX ring size",
		Spec: func(s *PortSpec) any { return &s.RxRing }, Info: func(p *PortInfo) any { return &p.RxRing }},
	{Attr: PortAttrTxRing, Key: "tx-ring", Flag: FlagUint, Help: "TX ring size",
		Spec: func(s *PortSpec) any { return &s.TxRing }, Info: func(p *PortInfo) any { return &p.TxRing }},
	// The flag sends the bitmap; the JSON shows the names of the bits that are on (the next row).
	{Attr: PortAttrPrivFlags, Key: "priv-flags", Hidden: "priv-flags shows PortAttrPrivFlagNames", Flag: FlagPrivFlags,
		Help: "private flags to turn on, comma-separated",
		Spec: func(s *PortSpec) any { return &s.PrivFlags }, Info: func(p *PortInfo) any { return &p.PrivFlags }},
	{Attr: PortAttrPrivFlagNames, Key: "priv-flags", Info: func(p *PortInfo) any { return &p.PrivFlagNames }},
	{Attr: PortAttrXDP, Key: "xdp", Flag: FlagString, Help: "built-in XDP program to start with: pass, drop, tx or aborted",
		Spec: func(s *PortSpec) any { return &s.XDP }, Info: func(p *PortInfo) any { return &p.XDP }},
	{Attr: PortAttrLayout, Key: "layout", Hidden: "show-rxbuf's layout", Info: func(p *PortInfo) any { return &p.Layout }},
	{Attr: PortAttrPagesPinned, Key: "pages-pinned", Info: func(p *PortInfo) any { return &p.PagesPinned }},
	{Attr: PortAttrBytesPinned, Key: "bytes-pinned", Info: func(p *PortInfo) any { return &p.BytesPinned }},
	{Attr: PortAttrBuffersInFlight, Key: "buffers-in-flight", Info: func(p *PortInfo) any { return &p.BuffersInFlight }},
	{Attr: PortAttrMemoryInUse, Key: "memory-in-use", Info: func(p *PortInfo) any { return &p.MemoryInUse }},
	{Attr: PortAttrMemoryPeak, Key: "memory-peak", Info: func(p *PortInfo) any { return &p.MemoryPeak }},
	{Attr: PortAttrMemoryBudget, Key: "memory-budget", Flag: FlagBytes,
		Help: "RX memory cap: bytes, a number with K, M, G, T (KiB…TiB), or unlimited",
		Spec: func(s *PortSpec) any { return &s.MemoryBudget }, Info: func(p *PortInfo) any { return &p.MemoryBudget }},
	{Attr: PortAttrFaults, Key: "faults", Info: func(p *PortInfo) any { return &p.Faults }},
	{Attr: PortAttrNetNSDev, Hidden: "identifies the netns, for manactl's namespace checks and hints", Info: func(p *PortInfo) any { return &p.Device.NetNS.Dev }},
	{Attr: PortAttrNetNSIno, Hidden: "identifies the netns, for manactl's namespace checks and hints", Info: func(p *PortInfo) any { return &p.Device.NetNS.Ino }},
	{Attr: PortAttrOffload, Key: "offload", Flag: FlagDefaultOn,
		Help: "the TAP carries virtio headers (TSO/USO, checksum offloads); --offload=false for plain frames",
		Spec: func(s *PortSpec) any { return &s.Offload }, Info: func(p *PortInfo) any { return &p.Offload }},
	{Attr: PortAttrRxAlloc, Key: "rx-alloc", Flag: FlagString, Help: "what-if RX allocation: page-pool-frag, page-pool-page or no-pool",
		Spec: func(s *PortSpec) any { return &s.RxAlloc }, Info: func(p *PortInfo) any { return &p.RxAlloc }},
	{Attr: PortAttrRxRecycle, Key: "rx-recycle", Flag: FlagDefaultOn, Help: "recycle RX pages; --rx-recycle=false releases them (what-if)",
		Spec: func(s *PortSpec) any { return &s.RxRecycle }, Info: func(p *PortInfo) any { return &p.RxRecycle }},
	{Attr: PortAttrSpeed, Key: "speed", Flag: FlagUint, Help: "link speed in Mb/s that LINKMODES reports (0 = unknown)",
		Spec: func(s *PortSpec) any { return &s.Speed }, Info: func(p *PortInfo) any { return &p.Speed }},
	{Attr: PortAttrNetNSToo, Hidden: "PORT_DEL's request (port del --netns-too)"},
	{Attr: PortAttrNetNSDeleted, Hidden: "PORT_DEL's reply (port del --json: netns-deleted)"},
	{Attr: PortAttrNotice, Hidden: "PORT_DEL's reply (port del --json: notice)"},
	{Attr: PortAttrRxShortHeadroom, Key: "rx-short-headroom", Hidden: "show-rxbuf's rx-short-headroom",
		Info: func(p *PortInfo) any { return &p.RxShortHeadroom }},
	{Attr: PortAttrRule, Key: "rule", Flag: FlagString, Help: "RX buffer rule: upstream, pre-headroom or pre-frag",
		Spec: func(s *PortSpec) any { return &s.Rule }, Info: func(p *PortInfo) any { return &p.Rule }},
	{Attr: PortAttrCQECoalesce8, Key: "cqe-coalesce-8", Flag: FlagBool, Help: "the vport may coalesce 8 packets per RX CQE",
		Spec: func(s *PortSpec) any { return &s.CQECoalesce8 }, Info: func(p *PortInfo) any { return &p.CQECoalesce8 }},
	{Attr: PortAttrRxCQEFrames, Key: "rx-cqe-frames", Flag: FlagUint, Help: "packets per RX CQE: 1 or 4, or 8 with --cqe-coalesce-8",
		Spec: func(s *PortSpec) any { return &s.RxCQEFrames }, Info: func(p *PortInfo) any { return &p.RxCQEFrames }},
	{Attr: PortAttrNAPIDeferIRQs, Key: "napi-defer-hard-irqs", Flag: FlagUint, Help: "every NAPI's defer-hard-irqs",
		Spec: func(s *PortSpec) any { return &s.NAPIDeferHardIRQs }, Info: func(p *PortInfo) any { return &p.NAPIDeferHardIRQs }},
	{Attr: PortAttrGROFlushTimeout, Key: "gro-flush-timeout", Flag: FlagDuration,
		Help: "every NAPI's gro-flush-timeout: a duration (20us) or nanoseconds",
		Spec: func(s *PortSpec) any { return &s.GROFlushTimeoutNs }, Info: func(p *PortInfo) any { return &p.GROFlushTimeoutNs }},
	{Attr: PortAttrIRQSuspendTmo, Key: "irq-suspend-timeout", Flag: FlagDuration, Help: "every NAPI's irq-suspend-timeout, likewise",
		Spec: func(s *PortSpec) any { return &s.IRQSuspendTimeoutNs }, Info: func(p *PortInfo) any { return &p.IRQSuspendTimeoutNs }},
	{Attr: PortAttrCoalesce, Key: "coalesce", Info: func(p *PortInfo) any { return &p.Coalesce }},
	{Attr: PortAttrRSSKey, Key: "rss-hash-key", Info: func(p *PortInfo) any { return &p.RSSKey }},
	{Attr: PortAttrNAPIThreaded, Key: "napi-threaded", Flag: FlagBool, Help: "every NAPI's threaded",
		Spec: func(s *PortSpec) any { return &s.NAPIThreaded }, Info: func(p *PortInfo) any { return &p.NAPIThreaded }},
	{Attr: PortAttrMSIXVectors, Key: "msix-vectors", Flag: FlagUint, Help: "the adapter's usable MSI-X vectors: at most one less queues (0 = enough)",
		Spec: func(s *PortSpec) any { return &s.MSIXVectors }, Info: func(p *PortInfo) any { return &p.MSIXVectors }},
}
