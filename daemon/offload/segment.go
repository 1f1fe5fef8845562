package offload

import (
	"encoding/binary"
	"unsafe"
)

// Segmenter cuts superframes into wire frames. Its buffer holds one segment at a time; it is
// reused, so a Segmenter allocates nothing after NewSegmenter.
type Segmenter struct {
	buf   []byte
	rd    []byte         // Buffer's, nil until asked for
	cur   Checked        // the segment being emitted (GSO only), for Checked
	curAt unsafe.Pointer // where that segment starts
}

// NewSegmenter returns a Segmenter.
func NewSegmenter() *Segmenter {
	return &Segmenter{buf: make([]byte, MaxFrameLen)}
}

// Buffer returns a buffer of HeaderLen+MaxFrameLen+1 bytes (room for any frame a TAP hands over
// behind its virtio header, and one byte more to tell a truncated read apart) for the caller to
// read superframes into and give to SegmentInPlace, whose segments Checked then vouches for. It
// is allocated at the first call, which must come before the Segmenter is shared with another
// goroutine; later calls return the same buffer.
func (s *Segmenter) Buffer() []byte {
	if s.rd == nil {
		s.rd = make([]byte, HeaderLen+MaxFrameLen+1)
	}
	return s.rd
}

// Segments describes what Segment did, for the driver's TX counters.
type Segments struct {
	N          int  // frames emitted
	GSO        bool // the frame was a GSO superframe (a TSO/USO work item)
	CsumDone   bool // a checksum was completed or computed (CHECKSUM_PARTIAL on TX)
	HeaderLen  int  // bytes of headers each GSO segment repeats
	PayloadLen int  // payload bytes of a GSO superframe
}

// check validates a frame (what follows the virtio header) against its header without
// emitting anything, returning the frame's layout for a GSO frame. Errors: a Reason.
func check(h *Header, frame []byte) (layout, error) {
	var l layout
	if len(frame) > MaxFrameLen {
		return l, ErrTooLarge
	}
	gt := h.GSOType &^ GSOECN
	switch gt {
	case GSONone, GSOTCPv4, GSOTCPv6, GSOUDPL4:
	case GSOUDP:
		return l, ErrUnsupportedGSO
	default:
		return l, ErrUnknownGSOType
	}
	if h.GSOType&GSOECN != 0 && gt != GSOTCPv4 && gt != GSOTCPv6 {
		return l, ErrUnknownGSOType
	}
	if h.Flags&FlagNeedsCsum != 0 {
		if int(h.CsumStart)+int(h.CsumOffset)+2 > len(frame) {
			return l, ErrCsumPastEnd
		}
	}
	if gt == GSONone {
		return l, nil
	}
	if h.GSOSize == 0 {
		return l, ErrGSOSizeZero
	}
	if int(h.HdrLen) > len(frame) {
		return l, ErrHdrLenPastFrame
	}
	l, err := parseLayout(frame, true)
	if err != nil {
		return l, err
	}
	switch {
	case gt == GSOTCPv4 && (l.v6 || l.proto != protoTCP),
		gt == GSOTCPv6 && (!l.v6 || l.proto != protoTCP),
		gt == GSOUDPL4 && l.proto != protoUDP:
		return l, ErrProtoMismatch
	}
	if h.Flags&FlagNeedsCsum != 0 && (int(h.CsumStart) != l.l4 || int(h.CsumStart)+int(h.CsumOffset) != l.csumField()) {
		return l, ErrCsumMismatch
	}
	if n := len(frame) - l.payload; n > 0 && (n+int(h.GSOSize)-1)/int(h.GSOSize) > MaxSegments {
		return l, ErrTooManySegments
	}
	return l, nil
}

// Plan validates what Segment would be given and returns what it would do, emitting nothing: a
// NIC driver accounts a work item before the hardware segments it. Errors as Segment.
func (s *Segmenter) Plan(h *Header, frame []byte) (Segments, error) {
	l, err := check(h, frame)
	if err != nil {
		return Segments{}, err
	}
	return plan(h, frame, &l), nil
}

// plan is the Segments of a frame check accepted.
func plan(h *Header, frame []byte, l *layout) Segments {
	if h.GSOType&^GSOECN == GSONone {
		return Segments{N: 1, CsumDone: h.Flags&FlagNeedsCsum != 0}
	}
	payload := len(frame) - l.payload
	mss := int(h.GSOSize)
	return Segments{N: max(1, (payload+mss-1)/mss), GSO: true, CsumDone: true, HeaderLen: l.payload, PayloadLen: payload}
}

// Segment turns the frame a TAP read (its virtio header h, already decoded, and the frame that
// followed it) into wire frames, calling emit for each. A frame without GSO is emitted as it is,
// its partial checksum completed in place when NEEDS_CSUM is set (Segment writes into frame
// only then). A GSO superframe becomes ceil(payload/gso_size) frames built in the Segmenter's
// buffer, each with its own IP length, IPv4 ID, TCP sequence number or UDP length, and every
// checksum computed afresh (the partial one in the superframe is not trusted). The slice emit
// gets is valid only during the call.
//
// Errors: a Reason (see Reason) when the header and the frame disagree; nothing is emitted
// then. emit is never called with a frame longer than hdr+gso_size.
func (s *Segmenter) Segment(h *Header, frame []byte, emit func(frame []byte)) (Segments, error) {
	return s.segment(h, frame, emit, false)
}

// SegmentInPlace is Segment without copying a GSO superframe's payload: each segment is built
// where its payload already lies in frame, its headers written over the tail of the segment
// before it (already emitted), so frame holds none of its original bytes afterwards. That saves
// one copy of every payload byte, the one tcp_gso_segment avoids by building the segments' skbs
// around the superframe's page fragments (skb_segment). Checked vouches for the segments of a
// frame inside Buffer only. Errors as Segment; frame is unchanged then.
func (s *Segmenter) SegmentInPlace(h *Header, frame []byte, emit func(frame []byte)) (Segments, error) {
	return s.segment(h, frame, emit, true)
}

func (s *Segmenter) segment(h *Header, frame []byte, emit func(frame []byte), inPlace bool) (Segments, error) {
	l, err := check(h, frame)
	if err != nil {
		return Segments{}, err
	}
	st := plan(h, frame, &l)
	if !st.GSO {
		if st.CsumDone {
			at := int(h.CsumStart) + int(h.CsumOffset)
			binary.BigEndian.PutUint16(frame[at:], ^fold(sum(frame[h.CsumStart:], 0)))
		}
		emit(frame)
		return st, nil
	}
	hl := l.payload
	payload := frame[hl:]
	mss := int(h.GSOSize)
	n := st.N
	// tmpl holds the superframe's headers, which every segment starts from.
	tmpl := s.buf[:hl]
	copy(tmpl, frame[:hl])
	var seq uint32
	var id uint16
	var flags byte
	if l.proto == protoTCP {
		seq = binary.BigEndian.Uint32(frame[l.l4+4:])
		flags = frame[l.l4+13]
	}
	if !l.v6 {
		id = binary.BigEndian.Uint16(frame[l.l3+4:])
	}
	for i := range n {
		chunk := min((i+1)*mss, len(payload)) - min(i*mss, len(payload))
		var b []byte
		if inPlace {
			// Segment i's payload starts at hl+i*mss: its headers go right before it.
			// Capped at its end: the payload after it is the next segments', not yet sent.
			b = frame[i*mss : i*mss+hl+chunk : i*mss+hl+chunk]
			if i > 0 {
				copy(b, tmpl)
			}
		} else {
			b = s.buf[:hl+copy(s.buf[hl:], payload[i*mss:i*mss+chunk])]
		}
		end := hl + chunk
		if !l.v6 {
			binary.BigEndian.PutUint16(b[l.l3+4:], id+uint16(i))
		}
		l.setIPLen(b, end)
		if l.proto == protoTCP {
			binary.BigEndian.PutUint32(b[l.l4+4:], seq+uint32(i*mss))
			f := flags
			if i > 0 {
				f &^= tcpCWR // tcp_gso_segment: CWR on the first segment only
			}
			if i < n-1 {
				f &^= tcpFIN | tcpPSH // FIN and PSH on the last one only
			}
			b[l.l4+13] = f
		} else {
			binary.BigEndian.PutUint16(b[l.l4+4:], uint16(end-l.l4))
		}
		at := l.csumField()
		b[at], b[at+1] = 0, 0
		binary.BigEndian.PutUint16(b[at:], l.l4Csum(b, end))
		s.cur, s.curAt = Checked{l: l, n: end, ok: true}, unsafe.Pointer(unsafe.SliceData(b))
		emit(b)
	}
	s.cur, s.curAt = Checked{}, nil
	return st, nil
}

// CompleteChecksum computes the TCP or UDP checksum of an Ethernet frame (up to two VLAN tags,
// IPv4 or IPv6 with extension headers, Ethernet padding allowed) in place, whatever the field
// held: for a frame whose checksum a local stack left partial and nothing says where it lies (a
// packet socket's TP_STATUS_CSUMNOTREADY). It reports false, changing nothing, for a frame it
// cannot parse, an IP fragment, or another protocol.
func CompleteChecksum(f []byte) bool {
	l, err := parseLayout(f, false)
	if err != nil {
		return false
	}
	at := l.csumField()
	f[at], f[at+1] = 0, 0
	binary.BigEndian.PutUint16(f[at:], l.l4Csum(f, l.ipEnd(f)))
	return true
}
