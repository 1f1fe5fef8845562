package offload

import (
	"bytes"
	"encoding/binary"
)

// maxHeaderLen bounds the headers a coalesced superframe repeats: Ethernet with two VLAN tags,
// IPv6 (the larger IP header, without extension headers) and TCP with the most options.
const maxHeaderLen = 14 + 4*maxVLANs + 40 + 60

// maxCoalesced is the largest IP datagram a merged superframe may be: the IPv4 total length
// field's limit, and the kernel's default gro_max_size.
const maxCoalesced = 65535

// Coalescer merges consecutive in-order TCP segments of one flow into one superframe, the way
// tcp_gro_receive does: same addresses, ports, IP fields and TCP options; sequence numbers
// contiguous; IPv4 IDs incrementing; ACK number and window unchanged; every segment but the last
// exactly gso_size long; a segment with PSH or FIN ends the run, one with CWR, SYN, RST or URG
// (or no payload) never joins one. The superframe's payloads stay where the segments are: the
// frames given to Add must not change until Flush's result was written.
type Coalescer struct {
	maxSegs int
	n       int
	closed  bool
	first   []byte
	l       layout
	gso     int
	total   int // payload bytes
	nextSeq uint32
	nextID  uint16
	flags   byte // of the last segment
	hdr     [HeaderLen + maxHeaderLen]byte
	iov     [][]byte
	Merged  uint64 // segments merged into an earlier one (not counting each run's first)
}

// NewCoalescer returns a Coalescer that merges at most maxSegs segments per superframe
// (clamped to 2..MaxSegments).
func NewCoalescer(maxSegs int) *Coalescer {
	maxSegs = min(max(maxSegs, 2), MaxSegments)
	return &Coalescer{maxSegs: maxSegs, iov: make([][]byte, 0, maxSegs+1)}
}

// Len returns the number of segments in the current run.
func (c *Coalescer) Len() int { return c.n }

// mergeable parses a frame that may start or join a run: TCP with a payload, no IP options or
// extension headers, no SYN/RST/URG, valid checksums.
func mergeable(f []byte) (layout, bool) {
	l, err := parseLayout(f, false)
	if err != nil || !mergeableShape(f, &l) {
		return l, false
	}
	// A corrupt segment is delivered as it is, for the stack to drop.
	return l, l.csumsValid(f, l.ipEnd(f))
}

// mergeableShape reports whether a frame of layout l may start or join a run, checksums aside.
func mergeableShape(f []byte, l *layout) bool {
	return l.proto == protoTCP && !l.ipExt && l.payload <= maxHeaderLen && l.ipEnd(f) > l.payload &&
		f[l.l4+13]&(tcpSYN|tcpRST|tcpURG) == 0
}

// Add offers the next frame received. It returns true when the frame was taken: it started a
// run (the Coalescer was empty) or joined the current one. On false the caller flushes the
// current run, if any (Len > 0), and offers the frame again; a frame refused by an empty
// Coalescer cannot be coalesced and is delivered alone.
func (c *Coalescer) Add(f []byte) bool {
	if c.closed || c.n == c.maxSegs {
		return false
	}
	l, ok := mergeable(f)
	if !ok {
		return false
	}
	return c.add(f, &l)
}

// add is Add for a frame whose layout l passed mergeable (or whose checksums are known good and
// whose shape passed mergeableShape).
func (c *Coalescer) add(f []byte, lp *layout) bool {
	l := *lp
	end := l.ipEnd(f)
	plen := end - l.payload
	th := f[l.l4:]
	if c.n == 0 {
		c.first, c.l, c.gso, c.total = f, l, plen, plen
		c.iov = append(c.iov[:0], nil, f[l.payload:end])
		c.n = 1
		c.nextSeq = binary.BigEndian.Uint32(th[4:]) + uint32(plen)
		if !l.v6 {
			c.nextID = binary.BigEndian.Uint16(f[l.l3+4:]) + 1
		}
		c.flags = th[13]
		c.closed = th[13]&(tcpPSH|tcpFIN) != 0
		return true
	}
	p := c.first
	if l != c.l || plen > c.gso || c.l.payload-c.l.l3+c.total+plen > maxCoalesced || th[13]&tcpCWR != 0 ||
		binary.BigEndian.Uint32(th[4:]) != c.nextSeq ||
		!bytes.Equal(f[:c.l.l3], p[:c.l.l3]) || // Ethernet header and tags
		!bytes.Equal(th[8:13], p[c.l.l4+8:c.l.l4+13]) || // ACK number, data offset
		!bytes.Equal(th[14:16], p[c.l.l4+14:c.l.l4+16]) || // window
		!bytes.Equal(th[:4], p[c.l.l4:c.l.l4+4]) || // ports
		!bytes.Equal(th[20:l.payload-l.l4], p[c.l.l4+20:c.l.payload]) || // options
		th[13]&^(tcpPSH|tcpFIN) != c.flags&^(tcpPSH|tcpFIN|tcpCWR) {
		return false
	}
	ip, pip := f[l.l3:l.l4], p[c.l.l3:c.l.l4]
	if l.v6 {
		// Version, traffic class, flow label; next header, hop limit; addresses.
		if !bytes.Equal(ip[:4], pip[:4]) || !bytes.Equal(ip[6:40], pip[6:40]) {
			return false
		}
	} else if ip[1] != pip[1] || !bytes.Equal(ip[6:10], pip[6:10]) || !bytes.Equal(ip[12:20], pip[12:20]) ||
		binary.BigEndian.Uint16(ip[4:]) != c.nextID {
		// TOS; flags and fragment offset, TTL, protocol; addresses; the ID one up.
		return false
	}
	c.iov = append(c.iov, f[l.payload:end])
	c.n++
	c.Merged++
	c.total += plen
	c.nextSeq += uint32(plen)
	c.nextID++
	c.flags = th[13]
	c.closed = plen < c.gso || th[13]&(tcpPSH|tcpFIN) != 0
	return true
}

// tcpSuperframe makes h, the headers of a TCP superframe of end bytes (h may be the whole
// frame or only its headers), what the kernel's tcp_gro_complete leaves: the IP length (and the
// IPv4 header checksum) for the whole, the TCP checksum field the pseudo-header sum; and returns
// the virtio header that asks the receiver to complete the checksums (NEEDS_CSUM) and says how
// to cut it (gsoType, gsoSize).
func (l *layout) tcpSuperframe(h []byte, end int, gsoType uint8, gsoSize uint16) Header {
	l.setIPLen(h, end)
	src, dst := l.addrs(h)
	binary.BigEndian.PutUint16(h[l.l4+16:], fold(pseudo(src, dst, protoTCP, end-l.l4)))
	return Header{Flags: FlagNeedsCsum, GSOType: gsoType, HdrLen: uint16(l.payload), GSOSize: gsoSize,
		CsumStart: uint16(l.l4), CsumOffset: 16}
}

// Flush ends the current run and returns it as one frame to write to a TAP: iov[0] is the
// virtio header followed by the run's headers, the other elements the segments' payloads in
// order. A run of one segment is that frame unchanged, with a header that asks for nothing;
// a longer one is a GSO superframe (gso_type TCPv4 or TCPv6, with ECN when its first segment
// had CWR; gso_size the first segment's payload; NEEDS_CSUM with the pseudo-header sum in the
// TCP checksum, as the kernel's own superframes carry), PSH and FIN from its last segment. iov
// and what it points to stay valid until the next Add. n is the number of segments; 0 and nil
// when the Coalescer was empty.
func (c *Coalescer) Flush() (iov [][]byte, n int) {
	if c.n == 0 {
		return nil, 0
	}
	n, l, p := c.n, c.l, c.first
	h := c.hdr[HeaderLen : HeaderLen+l.payload]
	copy(h, p[:l.payload])
	var vh Header
	if n > 1 {
		h[l.l4+13] = h[l.l4+13]&^(tcpPSH|tcpFIN) | c.flags&(tcpPSH|tcpFIN)
		gt := uint8(GSOTCPv4)
		if l.v6 {
			gt = GSOTCPv6
		}
		if h[l.l4+13]&tcpCWR != 0 {
			gt |= GSOECN
		}
		vh = l.tcpSuperframe(h, l.payload+c.total, gt, uint16(c.gso))
	}
	vh.Encode(c.hdr[:HeaderLen])
	c.iov[0] = c.hdr[:HeaderLen+l.payload]
	iov = c.iov
	c.n, c.closed, c.first, c.total = 0, false, nil, 0
	return iov, n
}
