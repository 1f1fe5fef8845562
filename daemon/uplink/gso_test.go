package uplink

import (
	"encoding/binary"
	"testing"

	"github.com/manad/manad/daemon/offload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// segTCP cuts a TCP aggregate as the uplink does for one that came with a TCP GSO type.
func segTCP(f []byte, mss, mtu int, emit func([]byte)) bool {
	gt := byte(offload.GSOTCPv4)
	if len(f) > 13 && f[12] == 0x86 && f[13] == 0xdd {
		gt = offload.GSOTCPv6
	}
	return segmentAggregate(offload.NewSegmenter(), f, vnetHdr{gsoType: gt, gsoSize: mss}, mtu, emit)
}

// ipv4HeaderOK checks an IPv4 header's checksum (RFC 1071), independently of the offload code.
func ipv4HeaderOK(h []byte) bool {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// tcpSuper builds an IPv4 (or IPv6) TCP frame carrying payload bytes, as a TSO aggregate.
func tcpSuper(v6 bool, payload int, flags byte) []byte {
	f := make([]byte, 12, 14+40+20+payload)
	if v6 {
		f = append(f, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(20+payload))
		ip[6], ip[7] = 6, 64
		ip[23], ip[39] = 1, 2
		f = append(f, ip...)
	} else {
		f = append(f, 0x08, 0x00)
		ip := []byte{0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+20+payload))
		f = append(f, ip...)
	}
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12], tcp[13] = 5<<4, flags
	f = append(f, tcp...)
	for i := range payload {
		f = append(f, byte(i*13))
	}
	return f
}

func TestSegmentTCP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v6      bool
		payload int
		mss     int
		segs    int
	}{
		{"v4 exact", false, 3000, 1000, 3},
		{"v4 remainder", false, 64000, 1448, 45},
		{"v6", true, 5000, 1428, 4},
		{"smaller than mss", false, 100, 1448, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tcpSuper(tc.v6, tc.payload, 0x80|0x10|0x08|0x01) // CWR ACK PSH FIN
			l3, l4 := 14, 34
			if tc.v6 {
				l4 = 54
			}
			var got [][]byte
			require.True(t, segTCP(f, tc.mss, 1500, func(s []byte) { got = append(got, append([]byte(nil), s...)) }), "not segmented")
			require.Len(t, got, tc.segs, "%d segments, want %d", len(got), tc.segs)
			var data []byte
			for i, s := range got {
				n := len(s) - l4 - 20
				require.LessOrEqual(t, n, tc.mss, "segment %d carries %d bytes (mss %d)", i, n, tc.mss)
				if i < len(got)-1 {
					require.Equal(t, tc.mss, n, "segment %d carries %d bytes (mss %d)", i, n, tc.mss)
				}
				require.Equal(t, 1000+uint32(i*tc.mss), binary.BigEndian.Uint32(s[l4+4:]), "segment %d seq", i)
				fl := s[l4+13]
				last := i == len(got)-1
				require.Equal(t, last, fl&0x09 != 0, "segment %d flags %#x", i, fl)
				require.Equal(t, i == 0, fl&0x80 != 0, "segment %d flags %#x", i, fl)
				require.NotEqual(t, byte(0), fl&0x10, "segment %d flags %#x", i, fl)
				var src, dst []byte
				if tc.v6 {
					require.Equal(t, 20+n, int(binary.BigEndian.Uint16(s[l3+4:])), "segment %d IPv6 payload length", i)
					src, dst = s[l3+8:l3+24], s[l3+24:l3+40]
				} else {
					require.Equal(t, 40+n, int(binary.BigEndian.Uint16(s[l3+2:])), "segment %d total length", i)
					require.Equal(t, 0x1234+uint16(i), binary.BigEndian.Uint16(s[l3+4:]), "segment %d id", i)
					require.True(t, ipv4HeaderOK(s[l3:l4]), "segment %d IPv4 header checksum does not verify", i)
					src, dst = s[l3+12:l3+16], s[l3+16:l3+20]
				}
				verify(t, src, dst, 6, s[l4:])
				data = append(data, s[l4+20:]...)
			}
			require.Equal(t, string(f[l4+20:]), string(data), "the segments' payloads do not add up to the original")
		})
	}
	for name, f := range map[string][]byte{
		"udp":       ipv4Frame(17, make([]byte, 3000), false),
		"truncated": tcpSuper(false, 3000, 0)[:1000],
		"runt":      {1, 2},
	} {
		assert.False(t, segTCP(f, 1000, 1500, func([]byte) { t.Errorf("%s: emitted a segment", name) }), "%s: accepted", name)
	}
	assert.False(t, segTCP(tcpSuper(false, 3000, 0), 0, 1500, func([]byte) {}), "mss 0 accepted")
	// IPv4 and TCP headers (40 bytes) and a 1461-byte segment exceed an MTU of 1500.
	assert.False(t, segTCP(tcpSuper(false, 3000, 0), 1461, 1500, func([]byte) {}), "segments beyond the MTU accepted")
	assert.True(t, segTCP(tcpSuper(false, 3000, 0), 1460, 1500, func([]byte) {}), "segments at the MTU refused")
}

// FuzzFrameFixups: whatever a device hands over, filling in checksums and cutting aggregates
// neither panic nor produce a segment beyond the MTU.
func FuzzFrameFixups(f *testing.F) {
	f.Add(tcpSuper(false, 3000, 0x18), uint16(1000), byte(offload.GSOTCPv4))
	f.Add(tcpSuper(true, 5000, 0x10), uint16(1428), byte(offload.GSOTCPv6|offload.GSOECN))
	f.Add(ipv4Frame(17, make([]byte, 4000), true), uint16(1400), byte(offload.GSOUDPL4))
	f.Add(ipv4Frame(17, make([]byte, 40), true), uint16(0), byte(0))
	seg := offload.NewSegmenter()
	f.Fuzz(func(t *testing.T, frame []byte, mss uint16, gsoType byte) {
		offload.CompleteChecksum(append([]byte(nil), frame...))
		const mtu = 1500
		segmentAggregate(seg, frame, vnetHdr{gsoType: gsoType, gsoSize: int(mss)}, mtu, func(s []byte) {
			n := len(s) - 14
			require.LessOrEqual(t, n, mtu+4, "segment of %d bytes beyond the MTU", n)
		})
		// What a port takes whole (datapath.Uplink.ReceiveWhole) stays within the frame.
		agg := append([]byte(nil), frame...)
		if h, st, err := offload.Aggregate(agg, gsoType, mss); err == nil {
			require.Equal(t, st.HeaderLen, int(h.HdrLen), "Aggregate: header %+v, %+v for a frame of %d bytes", h, st, len(agg))
			require.LessOrEqual(t, st.HeaderLen, len(agg), "Aggregate: header %+v, %+v for a frame of %d bytes", h, st, len(agg))
			require.LessOrEqual(t, int(h.CsumStart)+int(h.CsumOffset)+2, len(agg), "Aggregate: header %+v, %+v for a frame of %d bytes", h, st, len(agg))
		}
	})
}
