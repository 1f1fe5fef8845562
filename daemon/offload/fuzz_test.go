package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzSegment feeds arbitrary virtio header + frame bytes, as a local user can write them to a
// TAP, to the header parser and the segmenter, and what comes out to the coalescer. Nothing may
// panic; a refusal is a Reason; every emitted frame is at most headers+gso_size long, and a GSO
// superframe's segments parse with valid checksums and coalesce into no more than came in.
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
	seg, co := NewSegmenter(), NewCoalescer(64)
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Header
		if err := h.Decode(data); err != nil {
			if !errors.Is(err, ErrShortHeader) {
				t.Fatalf("Decode: %v", err)
			}
			return
		}
		frame := data[HeaderLen:]
		var segs [][]byte
		st, err := seg.Segment(&h, frame, func(b []byte) {
			if h.GSOType != GSONone && len(b) > st0(frame)+int(h.GSOSize) {
				t.Fatalf("segment of %d bytes from gso_size %d", len(b), h.GSOSize)
			}
			segs = append(segs, bytes.Clone(b))
		})
		if err != nil {
			var r Reason
			if !errors.As(err, &r) || len(segs) != 0 {
				t.Fatalf("Segment: %v (a %T) after %d segments", err, err, len(segs))
			}
			return
		}
		if st.N != len(segs) {
			t.Fatalf("reported %d segments, emitted %d", st.N, len(segs))
		}
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
		if in > len(segs)*MaxFrameLen {
			t.Fatalf("coalesced %d bytes", in)
		}
	})
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
