package offload

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// refSum is the ones' complement sum of b as RFC 1071 states it: big-endian 16-bit words, an
// odd last byte padded with zero, folded to 16 bits.
func refSum(b []byte, acc uint64) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		acc += uint64(b[len(b)-1]) << 8
	}
	return fold(acc)
}

// sumsEqual reports whether two folded sums are the same ones' complement value (0 and 0xffff
// are both zero).
func sumsEqual(a, b uint16) bool { return a == b || (a == 0 || a == 0xffff) && (b == 0 || b == 0xffff) }

func TestSumMatchesRFC1071(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 9100)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	ones := make([]byte, 4096)
	for i := range ones {
		ones[i] = 0xff
	}
	big := make([]byte, 3<<20+6)
	for i := range big {
		big[i] = 0xff
	}
	tests := []struct {
		name string
		b    []byte
		acc  uint64
	}{
		{"empty", nil, 0},
		{"one byte", buf[:1], 0},
		{"seven bytes", buf[:7], 3},
		{"eight bytes", buf[:8], 0},
		{"31 bytes", buf[1:32], 0},
		{"a 1500-byte MTU payload", buf[:1500], 0x1234},
		{"odd length and offset", buf[3:1454], 0},
		{"jumbo", buf[:9001], 0},
		{"all ones (every add carries)", ones, 0},
		{"all ones, odd", ones[:4095], 0xffffffff},
		// Past the vector part's chunk (sumVector), where a lane that kept 32 bits too few
		// would wrap.
		{"3 MiB of ones, odd length and offset", big[1:], 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := fold(sum(tt.b, tt.acc)), refSum(tt.b, tt.acc)
			require.True(t, sumsEqual(got, want), "sum = %#04x, want %#04x", got, want)
		})
	}
	for range 2000 {
		off := r.IntN(64)
		n := r.IntN(len(buf) - off)
		acc := r.Uint64() >> 20
		got, want := fold(sum(buf[off:off+n], acc)), refSum(buf[off:off+n], acc)
		require.True(t, sumsEqual(got, want), "sum(buf[%d:%d], %#x) = %#04x, want %#04x", off, off+n, acc, got, want)
	}
}

func BenchmarkSum1500(b *testing.B) {
	buf := make([]byte, 1500)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		_ = fold(sum(buf, 0))
	}
}

func BenchmarkSum9000(b *testing.B) {
	buf := make([]byte, 9000)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		_ = fold(sum(buf, 0))
	}
}

// BenchmarkSegment64K cuts a 64 KB TCP superframe into MTU 1500 and MTU 9000 segments, the
// Segmenter's work per superframe a TAP hands over.
func BenchmarkSegment64K(b *testing.B) {
	for _, mss := range []int{1448, 8948} {
		b.Run(strconv.Itoa(mss), func(b *testing.B) {
			s := &spec{flags: tcpACK, ttl: 64, payload: make([]byte, 65000)}
			for i := range s.payload {
				s.payload[i] = byte(i * 7)
			}
			f, l := s.build()
			h := s.gsoHeader(l, mss)
			seg := NewSegmenter()
			b.SetBytes(int64(len(s.payload)))
			for b.Loop() {
				_, err := seg.Segment(&h, f, func([]byte) {})
				require.NoError(b, err)
			}
		})
	}
}
