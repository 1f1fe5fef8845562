package offload

import "golang.org/x/sys/cpu"

// hasAVX2 says whether sumVector may use sumAVX2; fixed at start-up.
var hasAVX2 = cpu.X86.HasAVX2

// sumAVX2 returns the sum of the little-endian 16-bit words of b[:len(b)&^63] (sum_amd64.s).
// len(b) must not exceed 2 MiB, where a 32-bit lane would wrap; sumVector hands it 1 MiB at a
// time.
//
//go:noescape
func sumAVX2(b []byte) uint64

// sumVector adds the little-endian 16-bit words of a prefix of b to s with AVX2, as the
// kernel's csum_partial does with whatever the CPU offers, and returns the new sum (not folded)
// and how many bytes it covered (a multiple of 64; 0 without AVX2).
func sumVector(b []byte) (s uint64, n int) {
	if !hasAVX2 || len(b) < 256 {
		return 0, 0
	}
	for len(b) >= 64 {
		c := min(len(b), 1<<20) &^ 63
		s += sumAVX2(b[:c])
		b = b[c:]
		n += c
	}
	return s, n
}
