package uplink

import (
	"encoding/binary"
	"testing"

	"github.com/manad/manad/daemon/offload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verify is the receiver's check (RFC 1071), written independently of completeChecksum: the
// one's complement sum of the pseudo-header and the segment, checksum included, is all ones.
func verify(t *testing.T, src, dst []byte, proto byte, seg []byte) {
	t.Helper()
	var sum uint64
	add := func(b []byte) {
		for i := 0; i < len(b); i += 2 {
			w := uint64(b[i]) << 8
			if i+1 < len(b) {
				w |= uint64(b[i+1])
			}
			sum += w
		}
	}
	add(src)
	add(dst)
	sum += uint64(proto) + uint64(len(seg))
	add(seg)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	require.Equal(t, uint64(0xffff), sum, "checksum does not verify: sum")
}

func ipv4Frame(proto byte, l4 []byte, vlan bool) []byte {
	f := make([]byte, 12)
	if vlan {
		f = append(f, 0x81, 0x00, 0x00, 0x05)
	}
	f = append(f, 0x08, 0x00)
	ip := []byte{0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
	f = append(f, ip...)
	return append(f, l4...)
}

// TestCompleteChecksum: the frames an uplink sees with TP_STATUS_CSUMNOTREADY get a checksum
// the receiver accepts.
func TestCompleteChecksum(t *testing.T) {
	tcp := make([]byte, 20+37) // odd length
	tcp[12] = 5 << 4
	for i := 20; i < len(tcp); i++ {
		tcp[i] = byte(i * 7)
	}
	tcp[16], tcp[17] = 0x12, 0x34 // the pseudo-header sum offload leaves, or garbage
	udp := make([]byte, 8+100)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	for i := 8; i < len(udp); i++ {
		udp[i] = byte(i)
	}
	src, dst := []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}
	for _, tc := range []struct {
		name  string
		frame []byte
		proto byte
		l3    int
	}{
		{"tcp", ipv4Frame(6, tcp, false), 6, 14},
		{"tcp vlan", ipv4Frame(6, tcp, true), 6, 18},
		{"udp", ipv4Frame(17, udp, false), 17, 14},
		{"udp padded", append(ipv4Frame(17, udp, false), 0, 0, 0), 17, 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := append([]byte(nil), tc.frame...)
			require.True(t, offload.CompleteChecksum(f), "frame not recognised")
			total := int(binary.BigEndian.Uint16(f[tc.l3+2:]))
			verify(t, src, dst, tc.proto, f[tc.l3+20:tc.l3+total])
		})
	}
	ipv6 := make([]byte, 14+40+len(udp))
	ipv6[12], ipv6[13] = 0x86, 0xdd
	ipv6[14] = 0x60
	binary.BigEndian.PutUint16(ipv6[18:], uint16(len(udp)))
	ipv6[20] = 17
	for i := 22; i < 54; i++ {
		ipv6[i] = byte(i)
	}
	copy(ipv6[54:], udp)
	require.True(t, offload.CompleteChecksum(ipv6), "IPv6 UDP not recognised")
	verify(t, ipv6[22:38], ipv6[38:54], 17, ipv6[54:])

	// Left alone: what it cannot fill in correctly.
	frag := ipv4Frame(17, udp, false)
	frag[14+6] = 0x20 // more fragments
	short := ipv4Frame(6, tcp, false)[:30]
	icmp := ipv4Frame(1, udp, false)
	for name, f := range map[string][]byte{"fragment": frag, "truncated": short, "icmp": icmp, "runt": {1, 2, 3}, "arp": make([]byte, 60)} {
		assert.False(t, offload.CompleteChecksum(f), "%s: changed a frame it should leave alone", name)
	}
}
