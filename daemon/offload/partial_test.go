package offload

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestCompletePartialChecksumProperty: a frame whose field holds the pseudo-header sum (as a
// local stack leaves it for offload) is completed, in place, nothing else changed; a complete
// frame and one with any other wrong value are left alone.
func TestCompletePartialChecksumProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawSpec(t, -1, true, 9000)
		f, l := s.build()
		at := l.csumField()
		src, dst := l.addrs(f)
		end := l.ipEnd(f)
		binary.BigEndian.PutUint16(f[at:], fold(pseudo(src, dst, l.proto, end-l.l4)))
		partial := bytes.Clone(f)
		full := bytes.Clone(f)
		if !CompleteChecksum(full) {
			t.Fatal("CompleteChecksum refused the frame")
		}
		if !CompletePartialChecksum(f) {
			t.Fatal("a partial checksum was not completed")
		}
		if !bytes.Equal(f, full) {
			t.Fatal("completed frame differs from CompleteChecksum's")
		}
		checkFrame(t, f)
		if CompletePartialChecksum(f) || !bytes.Equal(f, full) {
			t.Fatal("a complete frame was changed")
		}
		wrong := bytes.Clone(partial)
		v := rapid.Uint16().Draw(t, "wrong")
		if v == binary.BigEndian.Uint16(partial[at:]) || v == binary.BigEndian.Uint16(full[at:]) {
			v ^= 0x5a5a
		}
		binary.BigEndian.PutUint16(wrong[at:], v)
		orig := bytes.Clone(wrong)
		if CompletePartialChecksum(wrong) || !bytes.Equal(wrong, orig) {
			t.Fatalf("a frame with checksum %#04x (neither partial nor complete) was changed", v)
		}
	})
	for _, f := range [][]byte{nil, make([]byte, 14), make([]byte, 60)} {
		require.False(t, CompletePartialChecksum(f), "an unparsable frame of %d bytes was changed", len(f))
	}
}
