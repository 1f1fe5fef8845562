package offload

import (
	"bytes"
	"encoding/binary"
)

// UDPCoalescer merges consecutive datagrams of one UDP flow into one USO superframe
// (VIRTIO_NET_HDR_GSO_UDP_L4), which the receiving kernel cuts back into the original datagrams
// (udp_rcv_segment for a socket without UDP_GRO, __udp_gso_segment). It accepts what
// udp_gro_receive_segment merges for UDP_L4 GRO: the same Ethernet header and tags, IP addresses,
// TOS, TTL and flags (IPv4; no options, not a fragment) or traffic class, flow label and hop limit
// (IPv6; no extension headers), the same ports; every datagram but the last exactly as long as the
// first (a shorter one ends the run, a longer one never joins), none empty; valid, non-zero
// checksums; UDP length equal to the IP payload. An IPv4 run's IDs must increment by one, as the
// segments will (inet_gso_segment), or, with DF set, all be the same (an atomic datagram's ID
// means nothing, RFC 6864). The datagrams' payloads stay where they are: the frames given to Add
// must not change until Flush's result was written.
//
// A namespace that forwards the datagrams forwards (and counts) the superframe whole, which
// Linux's own GRO does for UDP only with rx-udp-gro-forwarding or rx-gro-list on
// (udp_gro_receive): the data path uses it only for a TAP with those features
// (datapath.Endpoint.SetUDPGRO).
type UDPCoalescer struct {
	maxSegs int
	n       int
	closed  bool
	l       layout
	gso     int // payload bytes of each datagram but the last
	total   int // payload bytes
	nextID  uint16
	fixedID bool // IPv4 with DF and the first two IDs equal
	hdr     [HeaderLen + maxHeaderLen]byte
	iov     [][]byte
	frames  [][]byte
	Merged  uint64 // datagrams merged into an earlier one (not counting each run's first)
}

// NewUDPCoalescer returns a UDPCoalescer that merges at most maxSegs datagrams per superframe
// (clamped to 2..MaxSegments).
func NewUDPCoalescer(maxSegs int) *UDPCoalescer {
	maxSegs = min(max(maxSegs, 2), MaxSegments)
	return &UDPCoalescer{maxSegs: maxSegs, iov: make([][]byte, 0, maxSegs+1), frames: make([][]byte, 0, maxSegs)}
}

// Len returns the number of datagrams in the current run.
func (c *UDPCoalescer) Len() int { return c.n }

// udpMergeable parses a frame that may start or join a run: UDP with a payload, no IP options,
// extension headers or fragmentation, the UDP length matching the IP length, valid and non-zero
// checksums (udp4_gro_receive, udp6_gro_receive).
func udpMergeable(f []byte) (layout, bool) {
	l, err := parseLayout(f, false)
	if err != nil || l.proto != protoUDP || l.ipExt || l.payload > maxHeaderLen {
		return l, false
	}
	end := l.ipEnd(f)
	if end <= l.payload || int(binary.BigEndian.Uint16(f[l.l4+4:])) != end-l.l4 ||
		binary.BigEndian.Uint16(f[l.l4+6:]) == 0 {
		return l, false
	}
	// A corrupt datagram is delivered as it is, for the stack to drop.
	return l, l.csumsValid(f, end)
}

// Add offers the next frame received. It returns true when the frame was taken: it started a
// run (the UDPCoalescer was empty) or joined the current one. On false the caller flushes the
// current run, if any (Len > 0), and offers the frame again; a frame refused by an empty
// UDPCoalescer cannot be coalesced and is delivered alone.
func (c *UDPCoalescer) Add(f []byte) bool {
	if c.closed || c.n == c.maxSegs {
		return false
	}
	l, ok := udpMergeable(f)
	if !ok {
		return false
	}
	end := l.ipEnd(f)
	plen := end - l.payload
	if c.n == 0 {
		c.l, c.gso, c.total = l, plen, plen
		c.iov = append(c.iov[:0], nil, f[l.payload:end])
		c.frames = append(c.frames[:0], f)
		c.n, c.fixedID = 1, false
		if !l.v6 {
			c.nextID = binary.BigEndian.Uint16(f[l.l3+4:]) + 1
		}
		return true
	}
	p := c.frames[0]
	if l != c.l || plen > c.gso || c.l.payload-c.l.l3+c.total+plen > maxCoalesced || !c.sameHeaders(f, p) {
		return false
	}
	if !l.v6 {
		id := binary.BigEndian.Uint16(f[l.l3+4:])
		switch {
		case c.n == 1 && f[l.l3+6]&0x40 != 0 && id == c.nextID-1:
			// DF and the same ID again. The segments will get IDs counting up from the
			// first (inet_gso_segment), which the originals did not have; with DF nobody
			// reads them.
			c.fixedID = true
		case c.fixedID && id == c.nextID-1:
		case !c.fixedID && id == c.nextID:
			c.nextID++
		default:
			return false
		}
	}
	c.iov = append(c.iov, f[l.payload:end])
	c.frames = append(c.frames, f)
	c.n++
	c.Merged++
	c.total += plen
	c.closed = plen < c.gso
	return true
}

// sameHeaders compares the fields of f's headers that must match the run's first frame p, given
// that the layouts are the same: Ethernet header and tags; the IP header but its lengths, ID and
// checksum; the ports.
func (c *UDPCoalescer) sameHeaders(f, p []byte) bool {
	l := c.l
	if !bytes.Equal(f[:l.l3], p[:l.l3]) || !bytes.Equal(f[l.l4:l.l4+4], p[l.l4:l.l4+4]) {
		return false
	}
	ip, pip := f[l.l3:l.l4], p[l.l3:l.l4]
	if l.v6 {
		// Version, traffic class, flow label; next header, hop limit; addresses.
		return bytes.Equal(ip[:4], pip[:4]) && bytes.Equal(ip[6:40], pip[6:40])
	}
	// Version and header length, TOS; flags and fragment offset, TTL, protocol; addresses.
	return ip[0] == pip[0] && ip[1] == pip[1] && bytes.Equal(ip[6:10], pip[6:10]) && bytes.Equal(ip[12:20], pip[12:20])
}

// Flush ends the current run and returns it as one frame to write to a TAP: iov[0] is the
// virtio header followed by the run's headers, the other elements the datagrams' payloads in
// order. A run of one datagram is that frame unchanged (without Ethernet padding), with a header
// that asks for nothing; a longer one is a USO superframe: gso_type UDP_L4, gso_size the first
// datagram's payload, IP and UDP lengths of the whole, NEEDS_CSUM with the pseudo-header sum in
// the UDP checksum (as udp_send_skb leaves a GSO superframe). iov and what it points to stay
// valid until the next Add. n is the number of datagrams; 0 and nil when the UDPCoalescer was
// empty.
func (c *UDPCoalescer) Flush() (iov [][]byte, n int) {
	if c.n == 0 {
		return nil, 0
	}
	n, l, p := c.n, c.l, c.frames[0]
	h := c.hdr[HeaderLen : HeaderLen+l.payload]
	copy(h, p[:l.payload])
	var vh Header
	if n > 1 {
		end := l.payload + c.total
		l.setIPLen(h, end)
		binary.BigEndian.PutUint16(h[l.l4+4:], uint16(end-l.l4))
		src, dst := l.addrs(h)
		binary.BigEndian.PutUint16(h[l.l4+6:], fold(pseudo(src, dst, protoUDP, end-l.l4)))
		vh = Header{Flags: FlagNeedsCsum, GSOType: GSOUDPL4, HdrLen: uint16(l.payload), GSOSize: uint16(c.gso),
			CsumStart: uint16(l.l4), CsumOffset: 6}
	}
	vh.Encode(c.hdr[:HeaderLen])
	c.iov[0] = c.hdr[:HeaderLen+l.payload]
	iov = c.iov
	c.n, c.closed, c.total = 0, false, 0
	return iov, n
}

// Frames returns the datagrams of the run the last Flush returned, whole and in order, for a
// caller whose TAP refused the superframe (a kernel without USO in tun: EINVAL) to write one by
// one. They stay valid until the next Add.
func (c *UDPCoalescer) Frames() [][]byte { return c.frames }
