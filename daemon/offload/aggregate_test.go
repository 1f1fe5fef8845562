package offload

import (
	"bytes"
	"testing"

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
	if _, _, err := Aggregate(make([]byte, 100), GSOUDPL4, 1000); err == nil {
		t.Error("a UDP GSO type accepted")
	}
}
