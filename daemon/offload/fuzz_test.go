package offload

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSegment feeds arbitrary virtio header + frame bytes, as a local user can write them to a
// TAP, to the header parser and the segmenter, and what comes out to the coalescer. Nothing may
// panic; a refusal is a Reason; every emitted frame is at most headers+gso_size long, and a GSO
// superframe's segments parse with valid checksums and coalesce into no more than came in; and
// SegmentInPlace emits the same segments as Segment, or refuses the same frames.
func FuzzSegment(f *testing.F) {
	s := &spec{flags: tcpACK | tcpPSH, ttl: 64, payload: bytes.Repeat([]byte("manad"), 700)}
	copy(s.src[:], []byte{10, 0, 0, 1})
	copy(s.dst[:], []byte{10, 0, 0, 2})
	for _, mod := range []func(*spec){nil, func(s *spec) { s.v6 = true }, func(s *spec) { s.udp = true },
		func(s *spec) { s.vlan, s.tcpOpts = true, []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2} }} {
		c := *s
		if mod != nil {
			mod(&c)
		}
		fr, l := c.build()
		hb := make([]byte, HeaderLen)
		c.gsoHeader(l, 1000).Encode(hb)
		f.Add(append(hb, fr...))
		(&Header{Flags: FlagNeedsCsum, CsumStart: uint16(l.l4), CsumOffset: uint16(l.csumField() - l.l4)}).Encode(hb)
		f.Add(append(hb, fr...))
	}
	f.Add([]byte{})
	seg, co, uco := NewSegmenter(), NewCoalescer(64), NewUDPCoalescer(64)
	inPlace := NewSegmenter()
	rd := inPlace.Buffer()
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Header
		if err := h.Decode(data); err != nil {
			require.ErrorIs(t, err, ErrShortHeader, "Decode")
			return
		}
		frame := data[HeaderLen:]
		// SegmentInPlace, on a copy read into its Buffer, emits what Segment does (or refuses
		// alike).
		var inSegs [][]byte
		var inErr error
		if len(frame) < len(rd) {
			_, inErr = inPlace.SegmentInPlace(&h, rd[:copy(rd, frame)], func(b []byte) { inSegs = append(inSegs, bytes.Clone(b)) })
		}
		var segs [][]byte
		st, err := seg.Segment(&h, frame, func(b []byte) {
			if h.GSOType != GSONone {
				require.LessOrEqual(t, len(b), st0(frame)+int(h.GSOSize), "segment of %d bytes from gso_size %d", len(b), h.GSOSize)
			}
			segs = append(segs, bytes.Clone(b))
		})
		if len(frame) < len(rd) {
			require.Equal(t, err == nil, inErr == nil, "SegmentInPlace: %v and %d segments, Segment: %v and %d", inErr, len(inSegs), err, len(segs))
			require.Len(t, inSegs, len(segs), "SegmentInPlace: %v and %d segments, Segment: %v and %d", inErr, len(inSegs), err, len(segs))
			for i := range inSegs {
				require.Equal(t, segs[i], inSegs[i], "segment %d of SegmentInPlace differs from Segment's", i)
			}
		}
		if err != nil {
			var r Reason
			require.ErrorAs(t, err, &r, "Segment: %v (a %T) after %d segments", err, err, len(segs))
			require.Empty(t, segs, "Segment: %v (a %T) after %d segments", err, err, len(segs))
			return
		}
		require.Equal(t, len(segs), st.N, "reported %d segments, emitted %d", st.N, len(segs))
		if st.GSO {
			for _, b := range segs {
				checkFrame(t, b)
			}
		}
		in := 0
		co.Flush()
		for _, b := range segs {
			if !co.Add(b) {
				in += flushLen(co)
				if !co.Add(b) {
					continue
				}
			}
		}
		in += flushLen(co)
		require.LessOrEqual(t, in, len(segs)*MaxFrameLen, "coalesced %d bytes", in)
		// The UDP datagrams among the segments coalesce into superframes that Segment cuts
		// into the same datagrams again.
		uco.Flush()
		var again [][]byte
		for _, b := range segs {
			if !uco.Add(b) {
				again = resegment(t, seg, uco, again)
				if !uco.Add(b) {
					again = append(again, b)
				}
			}
		}
		again = resegment(t, seg, uco, again)
		require.Len(t, again, len(segs), "%d segments, %d after coalescing and segmenting again", len(segs), len(again))
		for i := range segs {
			if !bytes.Equal(again[i], segs[i]) {
				require.True(t, sameUDP(again[i], segs[i]), "segment %d changed:\n %x\n %x", i, segs[i], again[i])
			}
		}
	})
}

// resegment flushes c, cuts its superframe with seg and appends the datagrams to out.
func resegment(t *testing.T, seg *Segmenter, c *UDPCoalescer, out [][]byte) [][]byte {
	iov, n := c.Flush()
	if n == 0 {
		return out
	}
	b := bytes.Join(iov, nil)
	var h Header
	require.NoError(t, h.Decode(b))
	if n > 1 {
		require.Equal(t, uint8(GSOUDPL4), h.GSOType, "a UDP superframe of %d datagrams with header %+v", n, h)
		require.NotEqual(t, uint16(0), h.GSOSize, "a UDP superframe of %d datagrams with header %+v", n, h)
	}
	before := len(out)
	_, err := seg.Segment(&h, b[HeaderLen:], func(s []byte) { out = append(out, bytes.Clone(s)) })
	require.NoError(t, err, "Segment refuses a coalesced UDP superframe of %d datagrams", n)
	require.Equal(t, n, len(out)-before, "a run of %d datagrams segmented into %d", n, len(out)-before)
	return out
}

// sameUDP reports whether two IPv4 datagrams differ at most in the IP ID and header checksum
// (a DF run of equal IDs comes back with IDs counting up).
func sameUDP(a, b []byte) bool {
	l, err := parseLayout(a, false)
	if err != nil || l.v6 || len(a) != len(b) || a[l.l3+6]&0x40 == 0 {
		return false
	}
	return bytes.Equal(a[:l.l3+4], b[:l.l3+4]) && bytes.Equal(a[l.l3+6:l.l3+10], b[l.l3+6:l.l3+10]) && bytes.Equal(a[l.l3+12:], b[l.l3+12:])
}

// st0 is the header length of a frame Segment accepted as GSO.
func st0(frame []byte) int {
	l, err := parseLayout(frame, true)
	if err != nil {
		return len(frame)
	}
	return l.payload
}

// flushLen flushes c and checks the superframe's IP length against the bytes it has.
func flushLen(c *Coalescer) int {
	iov, n := c.Flush()
	if n == 0 {
		return 0
	}
	f := bytes.Join(append([][]byte{iov[0][HeaderLen:]}, iov[1:]...), nil)
	l, err := parseLayout(f, true)
	if err != nil || l.proto != protoTCP {
		panic("a flushed superframe does not parse")
	}
	if n > 1 && int(binary.LittleEndian.Uint16(iov[0][4:])) == 0 {
		panic("a superframe without gso_size")
	}
	return len(f)
}
