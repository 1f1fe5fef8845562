package offload

import "encoding/binary"

// IP protocol numbers.
const (
	protoTCP = 6
	protoUDP = 17
)

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
	tcpURG = 0x20
	tcpECE = 0x40
	tcpCWR = 0x80
)

// maxVLANs is how many 802.1Q/802.1ad tags a frame may carry before its IP header.
const maxVLANs = 2

// maxExtHeaders bounds the IPv6 extension headers walked before the L4 header.
const maxExtHeaders = 4

// layout is where a frame's headers lie.
type layout struct {
	l3, l4, payload int // offsets of the IP header, the L4 header and the payload
	v6              bool
	proto           uint8 // protoTCP or protoUDP
	ipExt           bool  // IPv4 options or IPv6 extension headers
}

// parseLayout finds the IP and TCP/UDP headers of an Ethernet frame and checks that the IP
// length matches the frame exactly (exact: a superframe carries no padding). Errors:
// ErrMalformed.
func parseLayout(f []byte, exact bool) (layout, error) {
	var l layout
	off := 12
	et := uint16(0)
	for i := 0; ; i++ {
		if len(f) < off+2 {
			return l, ErrMalformed
		}
		et = binary.BigEndian.Uint16(f[off:])
		if (et != 0x8100 && et != 0x88a8) || i == maxVLANs {
			break
		}
		off += 4
	}
	l.l3 = off + 2
	var proto uint8
	switch et {
	case 0x0800:
		h := f[l.l3:]
		if len(h) < 20 || h[0]>>4 != 4 {
			return l, ErrMalformed
		}
		ihl := int(h[0]&0xf) * 4
		tot := int(binary.BigEndian.Uint16(h[2:]))
		if ihl < 20 || tot < ihl || len(h) < tot || (exact && len(h) != tot) {
			return l, ErrMalformed
		}
		if binary.BigEndian.Uint16(h[6:])&0x3fff != 0 {
			return l, ErrMalformed // a fragment: no L4 header to segment or merge
		}
		proto, l.l4, l.ipExt = h[9], l.l3+ihl, ihl > 20
	case 0x86dd:
		h := f[l.l3:]
		if len(h) < 40 || h[0]>>4 != 6 {
			return l, ErrMalformed
		}
		plen := int(binary.BigEndian.Uint16(h[4:]))
		if len(h) < 40+plen || (exact && len(h) != 40+plen) {
			return l, ErrMalformed
		}
		l.v6 = true
		proto, l.l4 = h[6], l.l3+40
		for i := 0; proto == 0 || proto == 43 || proto == 60; i++ {
			// Hop-by-hop, routing and destination options: (len+1)*8 bytes each.
			if i == maxExtHeaders || len(f) < l.l4+8 {
				return l, ErrMalformed
			}
			proto, l.l4, l.ipExt = f[l.l4], l.l4+(int(f[l.l4+1])+1)*8, true
		}
	default:
		return l, ErrMalformed
	}
	l.proto = proto
	switch proto {
	case protoTCP:
		if len(f) < l.l4+20 {
			return l, ErrMalformed
		}
		doff := int(f[l.l4+12]>>4) * 4
		if doff < 20 || len(f) < l.l4+doff {
			return l, ErrMalformed
		}
		l.payload = l.l4 + doff
	case protoUDP:
		if len(f) < l.l4+8 {
			return l, ErrMalformed
		}
		l.payload = l.l4 + 8
	default:
		return l, ErrMalformed
	}
	if l.payload > l.ipEnd(f) {
		return l, ErrMalformed // the L4 header runs into the Ethernet padding
	}
	return l, nil
}

// ipEnd is the end of the IP datagram in f (before any Ethernet padding).
func (l *layout) ipEnd(f []byte) int {
	if l.v6 {
		return l.l3 + 40 + int(binary.BigEndian.Uint16(f[l.l3+4:]))
	}
	return l.l3 + int(binary.BigEndian.Uint16(f[l.l3+2:]))
}

// addrs returns the source and destination addresses.
func (l *layout) addrs(f []byte) (src, dst []byte) {
	if l.v6 {
		return f[l.l3+8 : l.l3+24], f[l.l3+24 : l.l3+40]
	}
	return f[l.l3+12 : l.l3+16], f[l.l3+16 : l.l3+20]
}

// setIPLen writes the IP length fields for a datagram ending at end, and the IPv4 header
// checksum.
func (l *layout) setIPLen(f []byte, end int) {
	if l.v6 {
		binary.BigEndian.PutUint16(f[l.l3+4:], uint16(end-l.l3-40))
		return
	}
	binary.BigEndian.PutUint16(f[l.l3+2:], uint16(end-l.l3))
	f[l.l3+10], f[l.l3+11] = 0, 0
	binary.BigEndian.PutUint16(f[l.l3+10:], ipv4Csum(f[l.l3:l.l4]))
}

// l4Csum computes the TCP or UDP checksum of f[l4:end] (the field must be zero).
func (l *layout) l4Csum(f []byte, end int) uint16 {
	src, dst := l.addrs(f)
	c := ^fold(sum(f[l.l4:end], pseudo(src, dst, l.proto, end-l.l4)))
	if c == 0 && l.proto == protoUDP {
		c = 0xffff // 0 means "no checksum" in UDP
	}
	return c
}

// csumsValid reports whether f's IPv4 header checksum (none in IPv6) and its TCP or UDP checksum
// over f[l4:end] verify, as a receiver checks a frame it was not told was verified.
func (l *layout) csumsValid(f []byte, end int) bool {
	if !l.v6 && fold(sum(f[l.l3:l.l4], 0)) != 0xffff {
		return false
	}
	src, dst := l.addrs(f)
	return fold(sum(f[l.l4:end], pseudo(src, dst, l.proto, end-l.l4))) == 0xffff
}

// csumField is the offset of the L4 checksum.
func (l *layout) csumField() int {
	if l.proto == protoTCP {
		return l.l4 + 16
	}
	return l.l4 + 6
}
