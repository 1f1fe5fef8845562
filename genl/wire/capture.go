package wire

// Capture: the manad-family commands that stream what a wire segment or a port carries
// (`manactl capture`), like a packet socket streams what an interface carries to tcpdump.
//
// A client sends CAPTURE_START (admin only: seeing other users' traffic is a privilege, as
// tcpdump needs CAP_NET_RAW) naming a port or a segment. The reply (CAPTURE_START, the request's
// sequence number) says what the name resolved to; from then on the connection receives
// CAPTURE_FRAME messages, unsolicited (sequence number 0, several per datagram), until the client
// sends CAPTURE_STOP or closes the connection. CAPTURE_STOP's reply carries the counters, after
// the last frame: a client that reads up to that reply has every frame manad queued for it.
// Frames the client is too slow for are dropped by manad and counted, never waited for.
//
// A capture also ends by itself when its port goes away (deleted, or manad stopping): manad then
// sends, after the last frame, an end notice: CAPTURE_STOP with sequence number 0, the counters
// and AttrCaptureEnd saying why. The connection may start another capture; a CAPTURE_STOP the
// client sends meanwhile is answered ENOENT.

// Commands of capture; CmdCaptureFrame is only ever sent by manad.
const (
	CmdCaptureStart uint8 = 30
	CmdCaptureStop  uint8 = 31
	CmdCaptureFrame uint8 = 32
)

// Top-level attributes of the capture commands.
const (
	AttrCaptureTarget    uint16 = 30 // string: a port or segment name (START); what it resolved to (reply)
	AttrCaptureDirection uint16 = 31 // u8: CaptureBoth, CaptureIn or CaptureOut (ports only)
	AttrCaptureSnaplen   uint16 = 32 // u32: bytes kept of each frame, 0 = MaxSnaplen
	AttrCaptureKind      uint16 = 33 // string: "port" | "segment" (START reply)
	AttrCaptureFrame     uint16 = 34 // nest: CaptureFrameAttr* (CAPTURE_FRAME)
	AttrCaptureStats     uint16 = 35 // nest: CaptureStatsAttr* (STOP reply, end notice)
	AttrCaptureEnd       uint16 = 36 // string: why the capture ended by itself (end notice)
	AttrCaptureMax              = AttrCaptureEnd
)

// Directions of a captured frame, as the port or uplink it passed sees it (tcpdump -Q): In is a
// frame the wire delivered to it, Out one it put on the wire. CaptureBoth (0) selects both.
const (
	CaptureBoth uint8 = 0
	CaptureIn   uint8 = 1
	CaptureOut  uint8 = 2
)

// MaxSnaplen is the largest snapshot length (and the default): more than any frame on manad's
// wire (the largest MTU plus the Ethernet header and a VLAN tag), within one attribute.
const MaxSnaplen = 65000

// Kinds of capture target.
const (
	CaptureKindPort    = "port"
	CaptureKindSegment = "segment"
)

// Attributes inside AttrCaptureFrame.
const (
	CaptureFrameAttrTime    uint16 = 1 // u64: ns since the Unix epoch, when manad saw the frame
	CaptureFrameAttrDir     uint16 = 2 // u8: CaptureIn or CaptureOut
	CaptureFrameAttrMember  uint16 = 3 // string: the port, or "uplink:DEV", that sent or received it
	CaptureFrameAttrOrigLen uint16 = 4 // u32: the frame's length on the wire
	CaptureFrameAttrData    uint16 = 5 // binary: its first snaplen bytes
)

// Attributes inside AttrCaptureStats.
const (
	CaptureStatsAttrMatched uint16 = 1 // u64: frames the capture saw
	CaptureStatsAttrDropped uint16 = 2 // u64: of those, dropped because the client fell behind
	CaptureStatsAttrSent    uint16 = 3 // u64: frames sent to the client
)

// CaptureRequest is CAPTURE_START.
type CaptureRequest struct {
	Target    string
	Direction uint8  // CaptureBoth, CaptureIn, CaptureOut
	Snaplen   uint32 // 0 = MaxSnaplen
}

// CaptureInfo is CAPTURE_START's reply: what the target resolved to.
type CaptureInfo struct {
	Target  string
	Kind    string // CaptureKindPort or CaptureKindSegment
	Snaplen uint32
}

// CaptureFrame is one captured frame.
type CaptureFrame struct {
	Time    uint64 // ns since the Unix epoch
	Dir     uint8  // CaptureIn or CaptureOut
	Member  string // port name, or "uplink:DEV"
	OrigLen uint32 // length on the wire; len(Data) is at most the snaplen
	Data    []byte
}

// CaptureStats are a capture's counters, in CAPTURE_STOP's reply.
type CaptureStats struct {
	Matched, Dropped, Sent uint64
}

// Tables of the capture messages. Request and START reply attributes are top-level.
var (
	// CaptureRequestTable is CAPTURE_START's request; zero fields are not sent.
	CaptureRequestTable = NewTable(
		String(AttrCaptureTarget, func(r *CaptureRequest) *string { return &r.Target }),
		U8(AttrCaptureDirection, func(r *CaptureRequest) *uint8 { return &r.Direction }),
		U32(AttrCaptureSnaplen, func(r *CaptureRequest) *uint32 { return &r.Snaplen }),
	).OmitZero()

	// CaptureInfoTable is CAPTURE_START's reply.
	CaptureInfoTable = NewTable(
		String(AttrCaptureTarget, func(i *CaptureInfo) *string { return &i.Target }),
		String(AttrCaptureKind, func(i *CaptureInfo) *string { return &i.Kind }),
		U32(AttrCaptureSnaplen, func(i *CaptureInfo) *uint32 { return &i.Snaplen }),
	)

	// CaptureFrameTable is AttrCaptureFrame.
	CaptureFrameTable = NewTable(
		U64(CaptureFrameAttrTime, func(f *CaptureFrame) *uint64 { return &f.Time }),
		U8(CaptureFrameAttrDir, func(f *CaptureFrame) *uint8 { return &f.Dir }),
		String(CaptureFrameAttrMember, func(f *CaptureFrame) *string { return &f.Member }),
		U32(CaptureFrameAttrOrigLen, func(f *CaptureFrame) *uint32 { return &f.OrigLen }),
		Binary(CaptureFrameAttrData, func(f *CaptureFrame) *[]byte { return &f.Data }),
	)

	// CaptureStatsTable is AttrCaptureStats.
	CaptureStatsTable = NewTable(
		U64(CaptureStatsAttrMatched, func(s *CaptureStats) *uint64 { return &s.Matched }),
		U64(CaptureStatsAttrDropped, func(s *CaptureStats) *uint64 { return &s.Dropped }),
		U64(CaptureStatsAttrSent, func(s *CaptureStats) *uint64 { return &s.Sent }),
	)
)
