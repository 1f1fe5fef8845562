package offload

import "unsafe"

// Checked vouches for one segment a Segmenter built: where its headers lie, and that its IPv4
// header checksum and TCP or UDP checksum are the ones Segment computed over exactly these bytes.
// The zero value vouches for nothing. It is how a receiver that gets the segment unchanged (no
// XDP program ran on it, it was copied as it is) skips parsing and verifying what the Segmenter
// just computed: the kernel's counterpart is CHECKSUM_UNNECESSARY on an skb a driver's hardware
// verified, which lets tcp_gro_receive's caller (tcp4_gro_receive's skb_gro_checksum_validate)
// skip the sum.
type Checked struct {
	l  layout
	n  int // the segment's length
	ok bool
}

// Valid reports whether c vouches for a frame of f's length (a frame that is not the segment
// c was made for, or was truncated or grown since, is not vouched for).
func (c Checked) Valid(f []byte) bool { return c.ok && c.n == len(f) }

// Checked returns what s vouches for about frame, when frame is the segment Segment (or
// SegmentInPlace, on a frame inside Buffer) is emitting right now (the very slice emit was
// given); the zero Checked for anything else, including a frame without GSO, whose IP header
// the Segmenter did not write. Any goroutine may ask about a frame that lies outside the
// Segmenter's buffers (the answer is then the zero Checked, without touching what Segment
// writes); a frame inside them only emit has.
func (s *Segmenter) Checked(frame []byte) Checked {
	if len(frame) == 0 {
		return Checked{}
	}
	// Decided on s.buf and s.rd alone, which Segment never changes, before looking at what it
	// does change.
	p := uintptr(unsafe.Pointer(unsafe.SliceData(frame)))
	if p != uintptr(unsafe.Pointer(unsafe.SliceData(s.buf))) &&
		(len(s.rd) == 0 || p < uintptr(unsafe.Pointer(&s.rd[0])) || p >= uintptr(unsafe.Pointer(&s.rd[0]))+uintptr(len(s.rd))) {
		return Checked{}
	}
	if !s.cur.ok || len(frame) != s.cur.n || unsafe.Pointer(unsafe.SliceData(frame)) != s.curAt {
		return Checked{}
	}
	return s.cur
}

// AddChecked is Add for a frame that c vouches for (c.Valid(f)): the frame's layout is taken
// from c and its checksums are not verified again. For a frame c does not vouch for it is Add.
// Whoever passes a Checked must know that f holds the bytes of the segment it was made for: a
// frame an XDP program ran on, or that anything else may have written, gets Add.
func (co *Coalescer) AddChecked(f []byte, c Checked) bool {
	if !c.Valid(f) {
		return co.Add(f)
	}
	if co.closed || co.n == co.maxSegs || !mergeableShape(f, &c.l) {
		return false
	}
	return co.add(f, &c.l)
}
