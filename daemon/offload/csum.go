package offload

import (
	"encoding/binary"
	"math/bits"
)

// sum adds b to the ones' complement sum acc as big-endian 16-bit words (an odd last byte is
// padded with zero).
//
// The bulk is summed as little-endian 64-bit words with end-around carry, 32 bytes per
// iteration, then folded and byte-swapped: the ones' complement sum does not depend on the
// byte order it is computed in, as long as the result is swapped back (RFC 1071 §2(B)), and
// 64-bit words with carries are what the kernel's csum_partial does on x86-64 (there in
// assembly). It is four to eight times faster than 16- or 32-bit big-endian words, and a TCP
// stream through two ports with offloads runs every payload byte through it once (the segmenter
// computes each segment's checksum; the coalescer verifies only what it was not vouched for).
// Where the CPU has AVX2, a long b's bulk is summed 64 bytes at a time in 16-bit lanes
// (sumVector), three times faster again at MTU 9000 (BenchmarkSum9000): the ADC chain above
// adds at most 8 bytes per cycle.
func sum(b []byte, acc uint64) uint64 {
	if len(b) >= 8 {
		var s, c uint64
		// A sum of 16-bit words is congruent to the one of 64-bit words modulo 0xffff (2^16
		// and 2^64 are both 1 there), so the vector part joins the same carry chain.
		if v, n := sumVector(b); n > 0 {
			s, b = v, b[n:]
		}
		// 128 bytes per iteration: the carry is materialised (SBB, NEG) once per 16 ADCs
		// instead of once per 4, which shortens the dependency chain per byte by half.
		for len(b) >= 128 {
			w := b[:128]
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[0:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[8:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[16:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[24:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[32:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[40:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[48:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[56:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[64:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[72:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[80:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[88:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[96:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[104:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[112:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(w[120:]), c)
			b = b[128:]
		}
		for len(b) >= 32 {
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:]), c)
			b = b[32:]
		}
		for len(b) >= 8 {
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
			b = b[8:]
		}
		s, c = bits.Add64(s, c, 0)
		s += c // cannot carry again: a sum that wrapped is at most 2^64-2
		acc += uint64(bits.ReverseBytes16(fold(s)))
	}
	// What is left is fewer than 8 bytes at an even offset from the start: big-endian words
	// pair the same bytes as above.
	for len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

// fold folds a sum to 16 bits (not complemented).
func fold(acc uint64) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// pseudo is the sum of the IPv4 or IPv6 pseudo-header for an L4 segment of length n.
func pseudo(src, dst []byte, proto uint8, n int) uint64 {
	return sum(dst, sum(src, 0)) + uint64(proto) + uint64(n)
}

// ipv4Csum computes an IPv4 header checksum (the field must be zero).
func ipv4Csum(h []byte) uint16 { return ^fold(sum(h, 0)) }
