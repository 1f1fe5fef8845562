package offload

import "encoding/binary"

// CompletePartialChecksum fills in the TCP or UDP checksum of an Ethernet frame in place when
// the field holds what a local stack leaves for checksum offload (CHECKSUM_PARTIAL: the folded
// pseudo-header sum, as tcp_v4_send_check, __tcp_v6_send_check and udp4_hwcsum write it) and
// the checksum does not verify. It is for receivers that see a frame without its skb's
// ip_summed, as an AF_XDP socket does; a packet socket says so (CompleteChecksum). A corrupted
// frame whose field happens to equal that sum is indistinguishable and is filled in too (one
// chance in 65,536 per corrupted frame). It reports whether it filled one in; false, changing
// nothing, for a frame it cannot parse, an IP fragment, another protocol or a complete
// checksum.
func CompletePartialChecksum(f []byte) bool {
	l, err := parseLayout(f, false)
	if err != nil {
		return false
	}
	end, at := l.ipEnd(f), l.csumField()
	src, dst := l.addrs(f)
	ph := pseudo(src, dst, l.proto, end-l.l4)
	if binary.BigEndian.Uint16(f[at:]) != fold(ph) {
		return false
	}
	if fold(sum(f[l.l4:end], ph)) == 0xffff {
		return false // it verifies: the segment is complete and the field only looks partial
	}
	f[at], f[at+1] = 0, 0
	binary.BigEndian.PutUint16(f[at:], l.l4Csum(f, end))
	return true
}
