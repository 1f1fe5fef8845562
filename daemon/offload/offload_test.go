package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// maxTestPayload keeps every drawn superframe within MaxFrameLen and the IP length limits.
const maxTestPayload = MaxFrameLen - (14 + 4 + 60 + 60)

// segmentAll runs Segment and returns copies of what it emitted.
func segmentAll(s *Segmenter, h Header, f []byte) ([][]byte, Segments, error) {
	var out [][]byte
	st, err := s.Segment(&h, f, func(b []byte) { out = append(out, bytes.Clone(b)) })
	return out, st, err
}

// TestSegmentTCPProperty: a TCP superframe (IPv4 with or without options, IPv6, VLAN or not,
// any TCP options and flags) cut at any gso_size gives frames no longer than headers+gso_size,
// each with valid checksums, its IP length, its IPv4 ID one up, its sequence number advanced,
// CWR only on the first and PSH/FIN only on the last, whose payloads are the original's.
func TestSegmentTCPProperty(t *testing.T) {
	seg := NewSegmenter()
	rapid.Check(t, func(t *rapid.T) {
		s := drawSpec(t, 0, true, maxTestPayload)
		f, l := s.build()
		mss := rapid.IntRange(max(1, len(s.payload)/MaxSegments+1), 9000).Draw(t, "mss")
		h := s.gsoHeader(l, mss)
		planned, perr := seg.Plan(&h, f)
		out, st, err := segmentAll(seg, h, f)
		if err != nil || perr != nil || planned != st {
			t.Fatalf("Segment: %v; Plan: %+v, %v; Segment's %+v", err, planned, perr, st)
		}
		want := max(1, (len(s.payload)+mss-1)/mss)
		if len(out) != want || st.N != want || !st.GSO || st.HeaderLen != l.payload || st.PayloadLen != len(s.payload) {
			t.Fatalf("%d segments, stats %+v; want %d", len(out), st, want)
		}
		var payload []byte
		for i, o := range out {
			ol := checkFrame(t, o)
			if ol != l || len(o) > l.payload+mss {
				t.Fatalf("segment %d: layout %+v len %d; want %+v, at most %d", i, ol, len(o), l, l.payload+mss)
			}
			if !bytes.Equal(o[:l.l3], f[:l.l3]) {
				t.Fatalf("segment %d: Ethernet header changed", i)
			}
			if !l.v6 && binary.BigEndian.Uint16(o[l.l3+4:]) != s.id+uint16(i) {
				t.Fatalf("segment %d: IPv4 ID %d, want %d", i, binary.BigEndian.Uint16(o[l.l3+4:]), s.id+uint16(i))
			}
			if got := binary.BigEndian.Uint32(o[l.l4+4:]); got != s.seq+uint32(i*mss) {
				t.Fatalf("segment %d: seq %d, want %d", i, got, s.seq+uint32(i*mss))
			}
			fl := s.flags
			if i > 0 {
				fl &^= tcpCWR
			}
			if i < len(out)-1 {
				fl &^= tcpPSH | tcpFIN
			}
			if o[l.l4+13] != fl {
				t.Fatalf("segment %d of %d: flags %#x, want %#x", i, len(out), o[l.l4+13], fl)
			}
			payload = append(payload, o[l.payload:]...)
		}
		if !bytes.Equal(payload, s.payload) {
			t.Fatal("the segments' payloads are not the superframe's")
		}
	})
}

// TestSegmentUDPProperty: a USO superframe gives UDP datagrams of gso_size (the last shorter),
// each with its own UDP length and valid checksums.
func TestSegmentUDPProperty(t *testing.T) {
	seg := NewSegmenter()
	rapid.Check(t, func(t *rapid.T) {
		s := drawSpec(t, 1, true, maxTestPayload)
		f, l := s.build()
		mss := rapid.IntRange(max(1, len(s.payload)/MaxSegments+1), 9000).Draw(t, "mss")
		out, _, err := segmentAll(seg, s.gsoHeader(l, mss), f)
		if err != nil {
			t.Fatalf("Segment: %v", err)
		}
		var payload []byte
		for i, o := range out {
			checkFrame(t, o)
			if n := int(binary.BigEndian.Uint16(o[l.l4+4:])); n != len(o)-l.l4 || len(o)-l.payload > mss {
				t.Fatalf("segment %d: UDP length %d, frame %d", i, n, len(o))
			}
			if i < len(out)-1 && len(o)-l.payload != mss {
				t.Fatalf("segment %d of %d carries %d bytes, want %d", i, len(out), len(o)-l.payload, mss)
			}
			payload = append(payload, o[l.payload:]...)
		}
		if !bytes.Equal(payload, s.payload) {
			t.Fatal("the datagrams' payloads are not the superframe's")
		}
	})
}

// TestCompleteChecksumProperty: a frame without GSO but with NEEDS_CSUM leaves with its
// checksum completed, in place, and nothing else changed.
func TestCompleteChecksumProperty(t *testing.T) {
	seg := NewSegmenter()
	rapid.Check(t, func(t *rapid.T) {
		s := drawSpec(t, -1, true, 9000)
		f, l := s.build()
		h := Header{Flags: FlagNeedsCsum, CsumStart: uint16(l.l4), CsumOffset: uint16(l.csumField() - l.l4)}
		orig := bytes.Clone(f)
		out, st, err := segmentAll(seg, h, f)
		if err != nil || len(out) != 1 || st.GSO || !st.CsumDone {
			t.Fatalf("Segment: %v, %d frames, %+v", err, len(out), st)
		}
		checkFrame(t, out[0])
		at := l.csumField()
		if !bytes.Equal(out[0][:at], orig[:at]) || !bytes.Equal(out[0][at+2:], orig[at+2:]) {
			t.Fatal("more than the checksum changed")
		}
	})
}

// TestSegmentCoalesceRoundTrip: segmenting a TCP superframe and coalescing the segments gives
// back the superframe byte for byte, and the header the kernel gave with it.
func TestSegmentCoalesceRoundTrip(t *testing.T) {
	seg := NewSegmenter()
	co := NewCoalescer(64)
	rapid.Check(t, func(t *rapid.T) {
		co.Flush() // a run left by an earlier failed check
		s := drawSpec(t, 0, false, maxTestPayload)
		if len(s.payload) == 0 {
			s.payload = []byte{1}
		}
		f, l := s.build()
		mss := rapid.IntRange(max(1, (len(s.payload)+63)/64), 9000).Draw(t, "mss")
		h := s.gsoHeader(l, mss)
		out, _, err := segmentAll(seg, h, f)
		if err != nil {
			t.Fatalf("Segment: %v", err)
		}
		for i, o := range out {
			if !co.Add(o) {
				t.Fatalf("segment %d of %d refused", i, len(out))
			}
		}
		merged := co.Merged
		iov, n := co.Flush()
		if co.Merged-merged != 0 {
			t.Fatal("Flush changed Merged")
		}
		if n != len(out) || co.Len() != 0 {
			t.Fatalf("flushed %d segments of %d; %d left", n, len(out), co.Len())
		}
		var gh Header
		if err := gh.Decode(iov[0]); err != nil {
			t.Fatal(err)
		}
		got := bytes.Join(append([][]byte{iov[0][HeaderLen:]}, iov[1:]...), nil)
		if n == 1 {
			if gh != (Header{}) || !bytes.Equal(got, out[0]) {
				t.Fatalf("a single segment came back as %+v and %d bytes", gh, len(got))
			}
			return
		}
		if gh != h {
			t.Fatalf("header %+v, want %+v", gh, h)
		}
		if !bytes.Equal(got, f) {
			t.Fatalf("coalesced frame differs from the superframe (%d vs %d bytes)", len(got), len(f))
		}
	})
}

// TestCoalesceEndsRuns checks the frames that end or cannot join a run.
func TestCoalesceEndsRuns(t *testing.T) {
	base := &spec{flags: tcpACK, seq: 1000, ack: 7, win: 512, ttl: 64, id: 10, payload: bytes.Repeat([]byte{7}, 100)}
	copy(base.src[:], []byte{10, 0, 0, 1})
	copy(base.dst[:], []byte{10, 0, 0, 2})
	// valid completes the checksum of a built frame, as it arrives from the wire.
	valid := func(s spec) []byte {
		f, l := s.build()
		binary.BigEndian.PutUint16(f[l.l4+16:], 0)
		binary.BigEndian.PutUint16(f[l.l4+16:], l.l4Csum(f, len(f)))
		return f
	}
	next := func(mod func(s *spec)) []byte {
		s := *base
		s.seq += 100
		s.id++
		if mod != nil {
			mod(&s)
		}
		return valid(s)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		joins bool
	}{
		{"next in order", next(nil), true},
		{"PSH joins", next(func(s *spec) { s.flags |= tcpPSH }), true},
		{"gap in sequence", next(func(s *spec) { s.seq += 1 }), false},
		{"IPv4 ID not one up", next(func(s *spec) { s.id += 2 }), false},
		{"other ACK", next(func(s *spec) { s.ack++ }), false},
		{"other window", next(func(s *spec) { s.win++ }), false},
		{"CWR", next(func(s *spec) { s.flags |= tcpCWR }), false},
		{"SYN", next(func(s *spec) { s.flags |= tcpSYN }), false},
		{"longer than the first", next(func(s *spec) { s.payload = make([]byte, 101) }), false},
		{"no payload", next(func(s *spec) { s.payload = nil }), false},
		{"other TTL", next(func(s *spec) { s.ttl-- }), false},
		{"other flow", next(func(s *spec) { s.dst[3] = 9 }), false},
		{"other options", next(func(s *spec) { s.tcpOpts = []byte{1, 1, 1, 1} }), false},
		{"corrupt checksum", func() []byte { f := next(nil); f[len(f)-1]++; return f }(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCoalescer(8)
			require.True(t, c.Add(valid(*base)), "first segment refused")
			require.Equal(t, tc.joins, c.Add(tc.frame), "Add")
			// A third in-order segment joins unless the second ended the run (PSH).
			third := c.Add(next(func(s *spec) { s.seq += 100; s.id++ }))
			assert.Equal(t, tc.joins && tc.frame[34+13]&tcpPSH == 0, third, "third segment joined")
		})
	}
	t.Run("shorter segment ends the run", func(t *testing.T) {
		c := NewCoalescer(8)
		c.Add(valid(*base))
		require.True(t, c.Add(next(func(s *spec) { s.payload = s.payload[:50] })), "shorter segment refused")
		assert.False(t, c.Add(next(func(s *spec) { s.seq += 50; s.id++ })), "a segment joined after a short one")
	})
	t.Run("maxSegs", func(t *testing.T) {
		c := NewCoalescer(2)
		c.Add(valid(*base))
		c.Add(next(nil))
		assert.False(t, c.Add(next(func(s *spec) { s.seq += 100; s.id++ })), "a third segment joined a run limited to 2")
		_, n := c.Flush()
		assert.Equal(t, 2, n, "flushed")
	})
}

// TestSegmentRefuses is every malformed header the data path must drop and count.
func TestSegmentRefuses(t *testing.T) {
	s := &spec{flags: tcpACK, ttl: 64, payload: make([]byte, 3000)}
	copy(s.src[:], []byte{10, 0, 0, 1})
	copy(s.dst[:], []byte{10, 0, 0, 2})
	tcp, l := s.build()
	u := *s
	u.udp = true
	udp, ul := u.build()
	good := s.gsoHeader(l, 1400)
	for _, tc := range []struct {
		name  string
		mod   func(h *Header)
		frame []byte
		want  Reason
		errno unix.Errno
		udp   bool
	}{
		{"unknown gso_type", func(h *Header) { h.GSOType = 2 }, tcp, ErrUnknownGSOType, unix.EINVAL, false},
		{"ECN on UDP", func(h *Header) { h.GSOType = GSOUDPL4 | GSOECN }, udp, ErrUnknownGSOType, unix.EINVAL, true},
		{"UFO", func(h *Header) { h.GSOType = GSOUDP }, udp, ErrUnsupportedGSO, unix.EOPNOTSUPP, true},
		{"gso_size 0", func(h *Header) { h.GSOSize = 0 }, tcp, ErrGSOSizeZero, unix.EINVAL, false},
		{"hdr_len past the frame", func(h *Header) { h.HdrLen = uint16(len(tcp) + 1) }, tcp, ErrHdrLenPastFrame, unix.EINVAL, false},
		{"csum_start past the end", func(h *Header) { h.CsumStart = uint16(len(tcp)) }, tcp, ErrCsumPastEnd, unix.EINVAL, false},
		{"csum_offset past the end", func(h *Header) { h.CsumOffset = uint16(len(tcp)) }, tcp, ErrCsumPastEnd, unix.EINVAL, false},
		{"csum_start not L4", func(h *Header) { h.CsumStart -= 4 }, tcp, ErrCsumMismatch, unix.EINVAL, false},
		{"superframe > 64 KiB", nil, make([]byte, MaxFrameLen+1), ErrTooLarge, unix.EMSGSIZE, false},
		{"TCPv6 on IPv4", func(h *Header) { h.GSOType = GSOTCPv6 }, tcp, ErrProtoMismatch, unix.EINVAL, false},
		{"TCPv4 on UDP", func(h *Header) { h.GSOType = GSOTCPv4 }, udp, ErrProtoMismatch, unix.EINVAL, true},
		{"truncated frame", nil, tcp[:len(tcp)-1], ErrMalformed, unix.EINVAL, false},
		{"not IP", nil, append([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x06}, make([]byte, 100)...), ErrMalformed, unix.EINVAL, false},
		{"too many segments", func(h *Header) { h.GSOSize = 1 }, func() []byte {
			b := *s
			b.payload = make([]byte, MaxSegments+1)
			f, _ := b.build()
			return f
		}(), ErrTooManySegments, unix.EINVAL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := good
			if tc.udp {
				h = u.gsoHeader(ul, 1400)
			}
			if tc.mod != nil {
				tc.mod(&h)
			}
			called := false
			if _, err := NewSegmenter().Plan(&h, tc.frame); !errors.Is(err, tc.want) {
				t.Errorf("Plan = %v, want %v", err, tc.want)
			}
			_, err := NewSegmenter().Segment(&h, tc.frame, func([]byte) { called = true })
			assert.ErrorIs(t, err, tc.want, "Segment = %v (emitted %v), want %v (%v)", err, called, tc.want, tc.errno)
			assert.ErrorIs(t, err, tc.errno, "Segment = %v (emitted %v), want %v (%v)", err, called, tc.want, tc.errno)
			assert.False(t, called, "Segment = %v (emitted %v), want %v (%v)", err, called, tc.want, tc.errno)
		})
	}
	var h Header
	assert.ErrorIs(t, h.Decode(make([]byte, HeaderLen-1)), ErrShortHeader, "Decode of a short header")
}

// TestNoAllocations: segmenting and coalescing allocate nothing once set up.
func TestNoAllocations(t *testing.T) {
	s := &spec{flags: tcpACK, ttl: 64, payload: make([]byte, 20000)}
	f, l := s.build()
	h := s.gsoHeader(l, 1448)
	seg, co := NewSegmenter(), NewCoalescer(64)
	var bufs [16][2048]byte
	var lens [16]int
	k := 0
	store := func(b []byte) { lens[k] = copy(bufs[k][:], b); k++ }
	allocs := testing.AllocsPerRun(50, func() {
		k = 0
		_, err := seg.Segment(&h, f, store)
		require.NoError(t, err)
		for i := range k {
			co.Add(bufs[i][:lens[i]])
		}
		co.Flush()
	})
	assert.Equal(t, float64(0), allocs, "%v allocations per superframe", allocs)
}
