package offload

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"pgregory.net/rapid"
)

// TestAggregateIsTheCoalescedSuperframe: a TCP aggregate (IPv4 or IPv6, VLAN or not, any TCP
// options and flags) whose checksum fields hold anything becomes, through Aggregate, exactly
// the header and frame that cutting it and coalescing the segments again produces, and stands
// for as many segments.
func TestAggregateIsTheCoalescedSuperframe(t *testing.T) {
	seg := NewSegmenter()
	co := NewCoalescer(64)
	rapid.Check(t, func(t *rapid.T) {
		co.Flush()
		s := drawSpec(t, 0, false, maxTestPayload)
		if len(s.payload) < 2 {
			s.payload = []byte{1, 2}
		}
		f, l := s.build()
		mss := rapid.IntRange(max(1, (len(s.payload)+63)/64), (len(s.payload)+1)/2).Draw(t, "mss")
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
		iov, n := co.Flush()
		var want Header
		if err := want.Decode(iov[0]); err != nil {
			t.Fatal(err)
		}
		wantFrame := bytes.Join(append([][]byte{iov[0][HeaderLen:]}, iov[1:]...), nil)

		agg := bytes.Clone(f)
		agg[l.csumField()] ^= 0x5a
		if !l.v6 {
			agg[l.l3+10] ^= 0xa5 // the IPv4 header checksum
		}
		got, st, err := Aggregate(agg, h.GSOType, uint16(mss))
		if err != nil {
			t.Fatalf("Aggregate: %v", err)
		}
		if got != want || !bytes.Equal(agg, wantFrame) || st.N != n || !st.GSO || st.HeaderLen != l.payload {
			t.Fatalf("Aggregate: header %+v, %+v; want %+v and the coalesced frame of %d segments", got, st, want, n)
		}
	})
	_, _, err := Aggregate(make([]byte, 100), GSOUDPL4, 1000)
	assert.Error(t, err, "a UDP GSO type accepted")
}

// TestAggregateRefusesWhatCoalescingWouldNot: an aggregate with IPv4 options, or SYN, RST or
// URG set, is refused with ErrUnmergeable (an EINVAL) and left unchanged, exactly when a
// Coalescer refuses the segments cutting it makes: whoever passes an aggregate on whole (a
// port's TSO superframe to another port) then cuts it instead.
func TestAggregateRefusesWhatCoalescingWouldNot(t *testing.T) {
	seg := NewSegmenter()
	co := NewCoalescer(64)
	rapid.Check(t, func(t *rapid.T) {
		co.Flush()
		s := drawSpec(t, 0, true, maxTestPayload)
		if len(s.payload) < 2 {
			s.payload = []byte{1, 2}
		}
		s.flags |= rapid.SampledFrom([]byte{0, tcpSYN, tcpRST, tcpURG}).Draw(t, "bad_flag")
		f, l := s.build()
		mss := (len(s.payload) + 1) / 2
		h := s.gsoHeader(l, mss)
		out, _, err := segmentAll(seg, h, f)
		if err != nil {
			t.Fatalf("Segment: %v", err)
		}
		merges := true
		for i, o := range out {
			if !co.Add(o) {
				if i > 0 {
					t.Fatalf("segment %d of %d refused, the first taken", i, len(out))
				}
				merges = false
				break
			}
		}
		agg := bytes.Clone(f)
		_, _, err = Aggregate(agg, h.GSOType, uint16(mss))
		switch {
		case merges && err != nil:
			t.Fatalf("Aggregate: %v for segments a Coalescer merges", err)
		case !merges && (!errors.Is(err, ErrUnmergeable) || !errors.Is(err, unix.EINVAL)):
			t.Fatalf("Aggregate: %v for segments a Coalescer refuses, want ErrUnmergeable", err)
		case !merges && !bytes.Equal(agg, f):
			t.Fatal("a refused aggregate was changed")
		}
	})
}
