package offload

import "encoding/binary"

// sum adds b to the ones' complement sum acc as big-endian 16-bit words (an odd last byte is
// padded with zero).
func sum(b []byte, acc uint64) uint64 {
	for len(b) >= 8 {
		acc += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
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
