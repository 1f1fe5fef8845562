package genl

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
	attrMax                  = AttrXDPObject
)

// Attributes inside AttrPort. PORT_NEW accepts DEV_NAME, NETNS, SEGMENT,
// MAC, PERSISTENT, MTU, MAX_MTU, PAGE_SIZE, QUEUES, MAX_QUEUES, RX_RING,
// TX_RING, PRIV_FLAGS and MEMORY_BUDGET; replies carry all of them.
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
	portAttrMax                    = PortAttrNetNSIno
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
	layoutAttrMax                  = LayoutAttrBytesTotal
)

// Attributes inside AttrFault and the PortAttrFaults items.
const (
	FaultAttrPoint uint16 = 1 // string: "prealloc" | "detach" | "attach"
	FaultAttrMode  uint16 = 2 // string: "off" | "once" | "count" | "always"
	FaultAttrCount uint16 = 3 // u32, required (> 0) for "count"
	FaultAttrErrno uint16 = 4 // u32, 0 = the point's default
	faultAttrMax          = FaultAttrErrno
)

// Attributes inside AttrXDP. A program is either BUILTIN or an object sent
// as top-level AttrXDPObject chunks (an attribute, and so a nest, holds
// less than 64 KiB; the request datagram must also fit in the server's
// MaxMessage and the client's socket send buffer).
const (
	XDPAttrBuiltin uint16 = 1 // string: "pass" | "drop" | "tx" | "aborted"
	XDPAttrSection uint16 = 2 // string: ELF section of the program (object only)
	XDPAttrName    uint16 = 3 // string: program name (object only)
	xdpAttrMax            = XDPAttrName
)

// Attributes inside AttrStat.
const (
	StatAttrName  uint16 = 1 // string
	StatAttrValue uint16 = 2 // u64
)

// ListItem is the attribute type of every element of a list nest
// (PortAttrPrivFlagNames, PortAttrFaults).
const ListItem uint16 = 1

// Valid enumeration strings of the manad family, checked by the server.
func xdpBuiltins() []string { return []string{"pass", "drop", "tx", "aborted"} }
func faultPoints() []string { return []string{"prealloc", "detach", "attach"} }
func faultModes() []string  { return []string{"off", "once", "count", "always"} }
func layoutRules() []string { return []string{"upstream", "pre-headroom", "pre-frag"} }
