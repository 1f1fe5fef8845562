package wire

// The manad family's wire segment messages (issue 12): a segment's settings, its port members
// and counters, and its uplinks (kernel netdevs the segment is plugged into). Commands and
// top-level attributes are numbered 20..29.

// Segment commands of the manad family. SEGMENT_GET is a do (AttrSegment with SegmentAttrName)
// or a dump (every segment); SEGMENT_NEW, SEGMENT_DEL, UPLINK_ADD and UPLINK_DEL need
// CAP_NET_ADMIN or the admin group (GENL_UNS_ADMIN_PERM). Changes are announced on the events
// group as SEGMENT_{NEW,DEL,CHANGE}_NTF carrying the whole AttrSegment.
const (
	CmdSegmentGet       uint8 = 20
	CmdSegmentNew       uint8 = 21
	CmdSegmentDel       uint8 = 22
	CmdUplinkAdd        uint8 = 23
	CmdUplinkDel        uint8 = 24
	CmdSegmentNewNtf    uint8 = 25
	CmdSegmentDelNtf    uint8 = 26
	CmdSegmentChangeNtf uint8 = 27
)

// Top-level segment attributes of the manad family.
const (
	AttrSegment    uint16 = 20 // nest: SegmentAttr* (requests: SegmentSpecTable; replies: SegmentTable)
	AttrUplink     uint16 = 21 // nest: UplinkAttr* (UPLINK_ADD/DEL: UplinkSpecTable)
	AttrSegmentMax        = AttrUplink
)

// Attributes inside AttrSegment. SEGMENT_NEW accepts NAME, MTU, STORM_PPS and AGEING_MS;
// SEGMENT_GET, SEGMENT_DEL, UPLINK_ADD and UPLINK_DEL only NAME. Replies carry all of them.
const (
	SegmentAttrName       uint16 = 1  // string: 1..64 of [A-Za-z0-9._-]
	SegmentAttrMTU        uint16 = 2  // u32: cap on what the uplinks send (0: each device's MTU)
	SegmentAttrStormPPS   uint16 = 3  // u64: flooded frames per second at most (0: no limit)
	SegmentAttrAgeingMs   uint16 = 4  // u64: ms a learnt address lasts unseen (0: never ages)
	SegmentAttrOrigin     uint16 = 5  // string: "config" | "runtime" | "ports" (no table: ports use it)
	SegmentAttrPorts      uint16 = 6  // nest of ListItem strings: port members, by name
	SegmentAttrLearnt     uint16 = 7  // u32: learnt MAC addresses (not expired)
	SegmentAttrFloods     uint16 = 8  // u64: frames flooded to every other member
	SegmentAttrStormDrops uint16 = 9  // u64: frames not flooded because of storm_pps
	SegmentAttrUplinks    uint16 = 10 // nest of ListItem nests: UplinkAttr*
	SegmentAttrMax               = SegmentAttrUplinks
)

// Attributes inside AttrUplink and the SegmentAttrUplinks items. UPLINK_ADD and UPLINK_DEL accept
// DEV and NETNS.
const (
	UplinkAttrDev          uint16 = 1  // string: interface name
	UplinkAttrNetNS        uint16 = 2  // string: named network namespace ("" = manad's own)
	UplinkAttrState        uint16 = 3  // string: "attached" | "down" | "gone" | "reattaching"
	UplinkAttrError        uint16 = 4  // string: why the last attach failed, or what it waits for
	UplinkAttrKind         uint16 = 5  // string: the device's rtnetlink kind ("vxlan", "veth", ""…)
	UplinkAttrIfindex      uint16 = 6  // u32: while attached
	UplinkAttrMTU          uint16 = 7  // u32: largest payload sent out (device MTU, capped by the segment's)
	UplinkAttrMaxPortMTU   uint16 = 8  // u32: largest port MTU carried whole (less encapsulation overhead)
	UplinkAttrChanges      uint16 = 9  // u64: state changes since the uplink started
	UplinkAttrRxPackets    uint16 = 10 // u64: frames received from the device and switched
	UplinkAttrRxBytes      uint16 = 11 // u64
	UplinkAttrTxPackets    uint16 = 12 // u64: frames the device took
	UplinkAttrTxBytes      uint16 = 13 // u64
	UplinkAttrRxRunts      uint16 = 14 // u64: drops: shorter than an Ethernet header
	UplinkAttrRxOversize   uint16 = 15 // u64: drops: beyond the device's MTU, not a TCP aggregate
	UplinkAttrRxTruncated  uint16 = 16 // u64: drops: not handed over whole (beyond 64 KiB, or the socket queue full)
	UplinkAttrTxErrors     uint16 = 17 // u64: drops: the device refused the frame
	UplinkAttrTxDown       uint16 = 18 // u64: drops: the uplink was not attached
	UplinkAttrTxMTUDrops   uint16 = 19 // u64: drops: beyond the uplink's MTU
	UplinkAttrRxSegmented  uint16 = 20 // u64: TCP aggregates cut into MTU-sized frames
	UplinkAttrRxCsumFilled uint16 = 21 // u64: checksums left to offload filled in
	UplinkAttrAttaches     uint16 = 22 // u64: how often the packet socket was opened
	UplinkAttrAttach       uint16 = 23 // string: UPLINK_ADD: UplinkAttach* mode asked; SEGMENT_GET: in use ("af_packet", "af_xdp")
	UplinkAttrTxAggregates uint16 = 24 // u64: GSO superframes written (each several of the frames TX_PACKETS counts)
	UplinkAttrTxWhole      uint16 = 25 // u64: of TX_AGGREGATES, the port superframes written as they came, never cut
	UplinkAttrRxWhole      uint16 = 26 // u64: TCP aggregates received that a port took whole (RX_PACKETS counts their frames)
	UplinkAttrXDPMode      uint16 = 27 // string: an af_xdp attachment's mode: "native copy", "generic copy", "native zero-copy"…
	UplinkAttrFallback     uint16 = 28 // string: why auto took af_packet rather than af_xdp
	UplinkAttrBusyPollUs   uint16 = 29 // u32: UPLINK_ADD and SEGMENT_GET: the busy-poll window, µs (0: off)
	UplinkAttrPolls        uint16 = 30 // u64: looks at the socket while busy-polling
	UplinkAttrPollHits     uint16 = 31 // u64: of POLLS, those that found frames
	UplinkAttrPollNanos    uint16 = 32 // u64: CPU time spent busy-polling, ns
	UplinkAttrMax                 = UplinkAttrPollNanos
)

// Uplink states as SEGMENT_GET reports them.
const (
	UplinkAttached    = "attached"    // the packet socket is open; frames flow
	UplinkDown        = "down"        // the device exists but is not up and running
	UplinkGone        = "gone"        // no such device (or namespace) yet: attaches when it appears
	UplinkReattaching = "reattaching" // the device is up but attaching failed; the next change retries
)

// SegmentSpec is the AttrSegment of SEGMENT_NEW (and, name only, of the other requests). Zero
// fields are not sent and mean the defaults, except AgeingMs, which is sent when AgeingSet.
type SegmentSpec struct {
	Name     string
	MTU      uint32
	StormPPS uint64
	AgeingMs uint64
	// AgeingSet says AgeingMs was given (0 then means never age); the server sets it from the
	// attribute's presence.
	AgeingSet bool
}

// UplinkSpec is the AttrUplink of UPLINK_ADD and UPLINK_DEL.
type UplinkSpec struct {
	Dev, NetNS string
	Attach     string // UplinkAttach*; "" = the daemon's default (af_packet)
	BusyPollUs uint32 // the busy-poll window, µs; 0 = off
}

// Uplink attachment modes: the socket an uplink joins its device with (UplinkAttrAttach, the
// uplinks entries' attach key).
const (
	UplinkAttachAuto   = "auto"      // AF_XDP where the device offers AF_XDP zero-copy, else AF_PACKET
	UplinkAttachPacket = "af_packet" // AF_PACKET with a TPACKET_V2 ring (the default)
	UplinkAttachXDP    = "af_xdp"    // AF_XDP, a socket per RX queue of the device, or fail
)

// ValidUplinkAttach reports whether mode is an attachment mode ("" included: the default).
func ValidUplinkAttach(mode string) bool {
	switch mode {
	case "", UplinkAttachAuto, UplinkAttachPacket, UplinkAttachXDP:
		return true
	}
	return false
}

// UplinkInfo is one uplink's state and counters.
type UplinkInfo struct {
	Dev, NetNS, State, Error, Kind string
	Ifindex, MTU, MaxPortMTU       uint32
	Changes                        uint64
	RxPackets, RxBytes             uint64
	TxPackets, TxBytes             uint64
	RxRunts, RxOversize            uint64
	RxTruncated, TxErrors          uint64
	TxDown, TxMTUDrops             uint64
	RxSegmented, RxCsumFilled      uint64
	Attaches                       uint64
	TxAggregates                   uint64 // GSO superframes written, each several of TxPackets
	TxWhole                        uint64 // of TxAggregates, port superframes written as they came
	RxWhole                        uint64 // TCP aggregates received that a port took whole
	Attach                         string // the attachment in use (or last used): "af_packet", "af_xdp"
	XDPMode                        string // with Attach "af_xdp": where the program runs, and copy or zero-copy
	Fallback                       string // why auto took af_packet; "" otherwise
	BusyPollUs                     uint32 // the busy-poll window, µs; 0 = off
	Polls, PollHits, PollNanos     uint64 // busy polling: looks, looks that found frames, CPU ns
}

// SegmentInfo is a segment's full state.
type SegmentInfo struct {
	Name               string
	MTU                uint32
	StormPPS, AgeingMs uint64
	Origin             string
	Ports              []string
	Learnt             uint32
	Floods, StormDrops uint64
	Uplinks            []UplinkInfo
}

// Tables of the segment attribute sets.
var (
	// SegmentSpecTable is AttrSegment in requests.
	SegmentSpecTable = NewTable(
		String(SegmentAttrName, func(s *SegmentSpec) *string { return &s.Name }).OmitZero(),
		U32(SegmentAttrMTU, func(s *SegmentSpec) *uint32 { return &s.MTU }).OmitZero(),
		U64(SegmentAttrStormPPS, func(s *SegmentSpec) *uint64 { return &s.StormPPS }).OmitZero(),
		U64(SegmentAttrAgeingMs, func(s *SegmentSpec) *uint64 { return &s.AgeingMs }).When(func(s *SegmentSpec) bool { return s.AgeingSet }),
	)

	// UplinkSpecTable is AttrUplink in requests; an empty netns is not sent.
	UplinkSpecTable = NewTable(
		String(UplinkAttrDev, func(u *UplinkSpec) *string { return &u.Dev }),
		String(UplinkAttrNetNS, func(u *UplinkSpec) *string { return &u.NetNS }).OmitZero(),
		String(UplinkAttrAttach, func(u *UplinkSpec) *string { return &u.Attach }).OmitZero(),
		U32(UplinkAttrBusyPollUs, func(u *UplinkSpec) *uint32 { return &u.BusyPollUs }).OmitZero(),
	)

	// UplinkTable is one SegmentAttrUplinks item.
	UplinkTable = NewTable(
		String(UplinkAttrDev, func(u *UplinkInfo) *string { return &u.Dev }),
		String(UplinkAttrNetNS, func(u *UplinkInfo) *string { return &u.NetNS }),
		String(UplinkAttrState, func(u *UplinkInfo) *string { return &u.State }),
		String(UplinkAttrError, func(u *UplinkInfo) *string { return &u.Error }),
		String(UplinkAttrKind, func(u *UplinkInfo) *string { return &u.Kind }),
		U32(UplinkAttrIfindex, func(u *UplinkInfo) *uint32 { return &u.Ifindex }),
		U32(UplinkAttrMTU, func(u *UplinkInfo) *uint32 { return &u.MTU }),
		U32(UplinkAttrMaxPortMTU, func(u *UplinkInfo) *uint32 { return &u.MaxPortMTU }),
		U64(UplinkAttrChanges, func(u *UplinkInfo) *uint64 { return &u.Changes }),
		U64(UplinkAttrRxPackets, func(u *UplinkInfo) *uint64 { return &u.RxPackets }),
		U64(UplinkAttrRxBytes, func(u *UplinkInfo) *uint64 { return &u.RxBytes }),
		U64(UplinkAttrTxPackets, func(u *UplinkInfo) *uint64 { return &u.TxPackets }),
		U64(UplinkAttrTxBytes, func(u *UplinkInfo) *uint64 { return &u.TxBytes }),
		U64(UplinkAttrRxRunts, func(u *UplinkInfo) *uint64 { return &u.RxRunts }),
		U64(UplinkAttrRxOversize, func(u *UplinkInfo) *uint64 { return &u.RxOversize }),
		U64(UplinkAttrRxTruncated, func(u *UplinkInfo) *uint64 { return &u.RxTruncated }),
		U64(UplinkAttrTxErrors, func(u *UplinkInfo) *uint64 { return &u.TxErrors }),
		U64(UplinkAttrTxDown, func(u *UplinkInfo) *uint64 { return &u.TxDown }),
		U64(UplinkAttrTxMTUDrops, func(u *UplinkInfo) *uint64 { return &u.TxMTUDrops }),
		U64(UplinkAttrRxSegmented, func(u *UplinkInfo) *uint64 { return &u.RxSegmented }),
		U64(UplinkAttrRxCsumFilled, func(u *UplinkInfo) *uint64 { return &u.RxCsumFilled }),
		U64(UplinkAttrAttaches, func(u *UplinkInfo) *uint64 { return &u.Attaches }),
		String(UplinkAttrAttach, func(u *UplinkInfo) *string { return &u.Attach }).OmitZero(),
		U64(UplinkAttrTxAggregates, func(u *UplinkInfo) *uint64 { return &u.TxAggregates }),
		U64(UplinkAttrTxWhole, func(u *UplinkInfo) *uint64 { return &u.TxWhole }),
		U64(UplinkAttrRxWhole, func(u *UplinkInfo) *uint64 { return &u.RxWhole }),
		String(UplinkAttrXDPMode, func(u *UplinkInfo) *string { return &u.XDPMode }).OmitZero(),
		String(UplinkAttrFallback, func(u *UplinkInfo) *string { return &u.Fallback }).OmitZero(),
		U32(UplinkAttrBusyPollUs, func(u *UplinkInfo) *uint32 { return &u.BusyPollUs }).OmitZero(),
		U64(UplinkAttrPolls, func(u *UplinkInfo) *uint64 { return &u.Polls }).OmitZero(),
		U64(UplinkAttrPollHits, func(u *UplinkInfo) *uint64 { return &u.PollHits }).OmitZero(),
		U64(UplinkAttrPollNanos, func(u *UplinkInfo) *uint64 { return &u.PollNanos }).OmitZero(),
	)

	// SegmentTable is AttrSegment in replies and notifications.
	SegmentTable = NewTable(
		String(SegmentAttrName, func(s *SegmentInfo) *string { return &s.Name }),
		U32(SegmentAttrMTU, func(s *SegmentInfo) *uint32 { return &s.MTU }),
		U64(SegmentAttrStormPPS, func(s *SegmentInfo) *uint64 { return &s.StormPPS }),
		U64(SegmentAttrAgeingMs, func(s *SegmentInfo) *uint64 { return &s.AgeingMs }),
		String(SegmentAttrOrigin, func(s *SegmentInfo) *string { return &s.Origin }),
		Strings(SegmentAttrPorts, func(s *SegmentInfo) *[]string { return &s.Ports }),
		U32(SegmentAttrLearnt, func(s *SegmentInfo) *uint32 { return &s.Learnt }),
		U64(SegmentAttrFloods, func(s *SegmentInfo) *uint64 { return &s.Floods }),
		U64(SegmentAttrStormDrops, func(s *SegmentInfo) *uint64 { return &s.StormDrops }),
		NestList(SegmentAttrUplinks, func(s *SegmentInfo) *[]UplinkInfo { return &s.Uplinks }, UplinkTable),
	)
)
