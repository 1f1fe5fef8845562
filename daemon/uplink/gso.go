package uplink

import "encoding/binary"

// virtio_net_hdr's gso_type values (linux/virtio_net.h), without the ECN bit.
const (
	gsoNone  = 0
	gsoTCPv4 = 1
	gsoTCPv6 = 4
	gsoECN   = 0x80
)

// vnetHdrLen is the size of struct virtio_net_hdr, which PACKET_VNET_HDR puts before each frame.
const vnetHdrLen = 10

// vnetHdr is what the kernel says about a frame that is really several (GSO): the segment size
// its stack chose, and of which kind.
type vnetHdr struct {
	gsoType byte
	gsoSize int
}

func parseVnetHdr(b []byte) vnetHdr {
	if len(b) < vnetHdrLen {
		return vnetHdr{}
	}
	return vnetHdr{gsoType: b[1] &^ gsoECN, gsoSize: int(binary.LittleEndian.Uint16(b[4:]))}
}

// segmentTCP cuts a TCP super-frame (a TSO or GRO aggregate the kernel handed over in one piece)
// into frames of at most mss payload bytes each, as the kernel's software GSO would for a device
// without TSO, and calls emit with each (valid during the call). Each gets its own IPv4 length,
// identification and header checksum (or IPv6 payload length), sequence number and TCP
// checksum; FIN and PSH stay on the last segment only, CWR on the first. buf is scratch space of
// at least the largest segment. It reports false, emitting nothing, for a frame it cannot parse
// (not IPv4 or IPv6 without extension headers carrying TCP, truncated), for mss 0, and when a
// segment would carry more than mtu bytes beyond its Ethernet header and VLAN tag.
func segmentTCP(f []byte, mss, mtu int, buf []byte, emit func([]byte)) bool {
	if mss <= 0 || len(f) < 14 {
		return false
	}
	l3, etype := 14, binary.BigEndian.Uint16(f[12:])
	if etype == 0x8100 || etype == 0x88a8 {
		if len(f) < 18 {
			return false
		}
		l3, etype = 18, binary.BigEndian.Uint16(f[16:])
	}
	var l4, ipEnd int
	v4 := etype == 0x0800
	switch {
	case v4:
		if len(f) < l3+20 || f[l3]>>4 != 4 || f[l3+9] != 6 {
			return false
		}
		ihl := int(f[l3]&0x0f) * 4
		ipEnd = l3 + int(binary.BigEndian.Uint16(f[l3+2:]))
		if ihl < 20 || ipEnd < l3+ihl || ipEnd > len(f) {
			return false
		}
		l4 = l3 + ihl
	case etype == 0x86dd:
		if len(f) < l3+40 || f[l3+6] != 6 {
			return false
		}
		l4, ipEnd = l3+40, l3+40+int(binary.BigEndian.Uint16(f[l3+4:]))
		if ipEnd > len(f) {
			return false
		}
	default:
		return false
	}
	if ipEnd < l4+20 {
		return false
	}
	hdrEnd := l4 + int(f[l4+12]>>4)*4
	if hdrEnd < l4+20 || hdrEnd > ipEnd || len(buf) < hdrEnd+mss || hdrEnd-l3+mss > mtu {
		return false
	}
	payload := f[hdrEnd:ipEnd]
	seq := binary.BigEndian.Uint32(f[l4+4:])
	flags := f[l4+13]
	var id uint16
	if v4 {
		id = binary.BigEndian.Uint16(f[l3+4:])
	}
	for i, off := 0, 0; off < len(payload) || (off == 0 && len(payload) == 0); i, off = i+1, off+mss {
		n := min(mss, len(payload)-off)
		seg := buf[:hdrEnd+n]
		copy(seg, f[:hdrEnd])
		copy(seg[hdrEnd:], payload[off:off+n])
		if v4 {
			binary.BigEndian.PutUint16(seg[l3+2:], uint16(hdrEnd-l3+n))
			binary.BigEndian.PutUint16(seg[l3+4:], id+uint16(i))
			seg[l3+10], seg[l3+11] = 0, 0
			binary.BigEndian.PutUint16(seg[l3+10:], ^fold(sum16(seg[l3:l4], 0)))
		} else {
			binary.BigEndian.PutUint16(seg[l3+4:], uint16(hdrEnd-l4+n))
		}
		binary.BigEndian.PutUint32(seg[l4+4:], seq+uint32(off))
		fl := flags
		if off+n < len(payload) {
			fl &^= 0x01 | 0x08 // FIN, PSH: the last segment's
		}
		if i > 0 {
			fl &^= 0x80 // CWR: the first segment's
		}
		seg[l4+13] = fl
		completeChecksum(seg)
		emit(seg)
		if n == 0 {
			break
		}
	}
	return true
}
