package offload

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestAddCheckedLikeAdd segments TCP superframes and offers copies of the segments (as an RX
// buffer holds them) to two Coalescers, one through Add and one through AddChecked with what the
// Segmenter vouched for inside emit: both take the same segments and flush the same superframes.
// The Segmenter vouches only for its own slice while emitting it: not for a copy, not after
// Segment returned, not for a frame without GSO. A copy corrupted after the Segmenter vouched for
// it, offered with the zero Checked, is verified and refused as by Add.
func TestAddCheckedLikeAdd(t *testing.T) {
	seg := NewSegmenter()
	plain, checked := NewCoalescer(64), NewCoalescer(64)
	rapid.Check(t, func(t *rapid.T) {
		plain.Flush()
		checked.Flush()
		s := drawSpec(t, 0, false, maxTestPayload)
		if len(s.payload) == 0 {
			s.payload = []byte{1}
		}
		f, l := s.build()
		mss := rapid.IntRange(max(1, (len(s.payload)+63)/64), 9000).Draw(t, "mss")
		h := s.gsoHeader(l, mss)
		var outs [][]byte
		var vs []Checked
		var last []byte
		if _, err := seg.Segment(&h, f, func(o []byte) {
			c := bytes.Clone(o)
			if seg.Checked(c).Valid(c) {
				t.Fatal("the Segmenter vouched for a copy of its segment")
			}
			v := seg.Checked(o)
			if !v.Valid(o) {
				t.Fatal("the Segmenter did not vouch for the segment it is emitting")
			}
			outs, vs, last = append(outs, c), append(vs, v), o
		}); err != nil {
			t.Fatalf("Segment: %v", err)
		}
		if seg.Checked(last).Valid(last) {
			t.Fatal("the Segmenter vouched for a segment after Segment returned")
		}
		for i, o := range outs {
			a, b := plain.Add(o), checked.AddChecked(o, vs[i])
			if a != b {
				t.Fatalf("segment %d of %d: Add %v, AddChecked %v", i, len(outs), a, b)
			}
		}
		if plain.Merged != checked.Merged {
			t.Fatalf("merged %d by Add, %d by AddChecked", plain.Merged, checked.Merged)
		}
		iov1, n1 := plain.Flush()
		got1 := bytes.Join(iov1, nil)
		iov2, n2 := checked.Flush()
		if n1 != n2 || !bytes.Equal(got1, bytes.Join(iov2, nil)) {
			t.Fatalf("Add flushed %d segments, AddChecked %d, or their superframes differ", n1, n2)
		}
		bad := bytes.Clone(outs[0])
		bad[len(bad)-1] ^= 0x5a
		if checked.AddChecked(bad, Checked{}) {
			t.Fatal("AddChecked took a corrupt segment nothing vouched for")
		}
		if checked.AddChecked(bad[:len(bad)-1], vs[0]) {
			t.Fatal("AddChecked trusted a Checked made for a frame of another length")
		}
		checked.Flush()
	})
	// Without GSO the Segmenter wrote no IP header: it vouches for nothing.
	s := spec{payload: []byte("x"), flags: tcpACK}
	f, _ := s.build()
	h := Header{}
	_, err := seg.Segment(&h, f, func(o []byte) {
		require.False(t, seg.Checked(o).Valid(o), "the Segmenter vouched for a frame without GSO")
	})
	require.NoError(t, err)
}

// TestSegmentInPlaceLikeSegment segments TCP superframes read into the Segmenter's Buffer with
// SegmentInPlace and copies of them with Segment: both emit the same segments, and the Segmenter
// vouches for each in-place segment while emitting it (for a copy of it, not).
func TestSegmentInPlaceLikeSegment(t *testing.T) {
	seg, ref := NewSegmenter(), NewSegmenter()
	rd := seg.Buffer()
	rapid.Check(t, func(t *rapid.T) {
		s := drawSpec(t, 0, false, maxTestPayload)
		if len(s.payload) == 0 {
			s.payload = []byte{1}
		}
		f, l := s.build()
		mss := rapid.IntRange(max(1, (len(s.payload)+63)/64), 9000).Draw(t, "mss")
		h := s.gsoHeader(l, mss)
		var want [][]byte
		if _, err := ref.Segment(&h, bytes.Clone(f), func(o []byte) { want = append(want, bytes.Clone(o)) }); err != nil {
			t.Fatalf("Segment: %v", err)
		}
		in := rd[HeaderLen : HeaderLen+copy(rd[HeaderLen:], f)]
		i := 0
		if _, err := seg.SegmentInPlace(&h, in, func(o []byte) {
			if i >= len(want) || !bytes.Equal(o, want[i]) {
				t.Fatalf("in-place segment %d differs from Segment's (%d segments)", i, len(want))
			}
			if !seg.Checked(o).Valid(o) {
				t.Fatalf("the Segmenter did not vouch for in-place segment %d", i)
			}
			if c := bytes.Clone(o); seg.Checked(c).Valid(c) {
				t.Fatal("the Segmenter vouched for a copy of an in-place segment")
			}
			i++
		}); err != nil {
			t.Fatalf("SegmentInPlace: %v", err)
		}
		if i != len(want) {
			t.Fatalf("SegmentInPlace emitted %d segments, Segment %d", i, len(want))
		}
	})
}
