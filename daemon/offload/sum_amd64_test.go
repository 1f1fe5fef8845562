package offload

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSumVectorAgainstGo sums random buffers up to 3 MiB, at odd offsets, with the AVX2 bulk and
// without it (the Go path every other CPU takes), and checks both against RFC 1071's sum; then
// calls sumAVX2 on exactly its 2 MiB limit of 0xff bytes, where every 32-bit lane comes closest
// to wrapping.
func TestSumVectorAgainstGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("this CPU has no AVX2: sum never takes the vector path here")
	}
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 3<<20+7)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	defer func() { hasAVX2 = true }()
	for _, n := range []int{256, 4095, 9001, 1 << 20, 1<<20 + 65, 3 << 20} {
		off := r.IntN(8)
		b := buf[off : off+n]
		want := refSum(b, 0)
		for _, avx := range []bool{true, false} {
			hasAVX2 = avx
			got := fold(sum(b, 0))
			assert.True(t, sumsEqual(got, want), "%d bytes at offset %d, AVX2 %v: sum %#04x, want %#04x", n, off, avx, got, want)
		}
	}
	ones := make([]byte, 2<<20)
	for i := range ones {
		ones[i] = 0xff
	}
	// 2^20 words of 0xffff: the 64-bit total must come back unwrapped.
	assert.Equal(t, uint64(len(ones)/2)*0xffff, sumAVX2(ones), "sumAVX2 of 2 MiB of 0xff")
}
