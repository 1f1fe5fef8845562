package uplink

import "encoding/binary"

// completeChecksum fills in the TCP or UDP checksum of an IPv4 or IPv6 frame whose checksum the
// kernel left for hardware to finish (TP_STATUS_CSUMNOTREADY: the frame came from a local stack
// through a veth or a bridge, with checksum offload). A TAP is no hardware: the port's stack
// would drop the frame as corrupt. It reports whether it recognised and fixed the frame; frames
// it does not understand (other protocols, IP fragments, IPv6 extension headers, truncated ones)
// are left alone.
func completeChecksum(f []byte) bool {
	if len(f) < 14 {
		return false
	}
	l3, etype := 14, binary.BigEndian.Uint16(f[12:])
	if etype == 0x8100 || etype == 0x88a8 {
		if len(f) < 18 {
			return false
		}
		l3, etype = 18, binary.BigEndian.Uint16(f[16:])
	}
	var proto byte
	var l4 int
	var sum uint32
	switch etype {
	case 0x0800:
		if len(f) < l3+20 || f[l3]>>4 != 4 {
			return false
		}
		ihl := int(f[l3]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(f[l3+2:]))
		if ihl < 20 || total < ihl || len(f) < l3+total || binary.BigEndian.Uint16(f[l3+6:])&0x3fff != 0 {
			return false // short, or a fragment: its checksum covers the whole datagram
		}
		proto, l4 = f[l3+9], l3+ihl
		f = f[:l3+total] // Ethernet padding is not part of the segment
		sum = sum16(f[l3+12:l3+20], 0)
	case 0x86dd:
		if len(f) < l3+40 {
			return false
		}
		plen := int(binary.BigEndian.Uint16(f[l3+4:]))
		if len(f) < l3+40+plen {
			return false
		}
		proto, l4 = f[l3+6], l3+40
		f = f[:l3+40+plen]
		sum = sum16(f[l3+8:l3+40], 0)
	default:
		return false
	}
	var at int
	switch proto {
	case 6:
		at = l4 + 16
		if len(f) < l4+20 {
			return false
		}
	case 17:
		at = l4 + 6
		if len(f) < l4+8 {
			return false
		}
	default:
		return false
	}
	n := len(f) - l4
	sum += uint32(proto) + uint32(n)
	f[at], f[at+1] = 0, 0
	c := ^fold(sum16(f[l4:], sum))
	if proto == 17 && c == 0 {
		c = 0xffff // 0 means "no checksum" in UDP
	}
	binary.BigEndian.PutUint16(f[at:], c)
	return true
}

// sum16 adds b as big-endian 16-bit words to sum (RFC 1071), without folding.
func sum16(b []byte, sum uint32) uint32 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
		if sum >= 1<<31 {
			sum = sum&0xffff + sum>>16
		}
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

func fold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
