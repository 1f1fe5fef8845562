package offload

import (
	"encoding/binary"

	"pgregory.net/rapid"
)

// spec describes a test frame.
type spec struct {
	v6, vlan, udp bool
	ipOpts        int // IPv4 option bytes (multiple of 4)
	tcpOpts       []byte
	flags         byte
	id            uint16
	df            bool
	seq, ack      uint32
	win           uint16
	ttl, tos      uint8
	payload       []byte
	src, dst      [16]byte
}

// build returns the frame s describes, with a valid IPv4 header checksum and, as the kernel hands
// a superframe over with NEEDS_CSUM, the pseudo-header sum in the L4 checksum field. It also
// returns the layout's offsets.
func (s *spec) build() ([]byte, layout) {
	f := []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1}
	if s.vlan {
		f = append(f, 0x81, 0x00, 0x00, 0x2a)
	}
	var l layout
	l.v6 = s.v6
	l.proto = protoTCP
	if s.udp {
		l.proto = protoUDP
	}
	if s.v6 {
		f = append(f, 0x86, 0xdd)
		l.l3 = len(f)
		f = append(f, 0x60|s.tos>>4, s.tos<<4, 0x12, 0x34, 0, 0, l.proto, s.ttl)
		f = append(f, s.src[:]...)
		f = append(f, s.dst[:]...)
	} else {
		f = append(f, 0x08, 0x00)
		l.l3 = len(f)
		frag := uint16(0)
		if s.df {
			frag = 0x4000
		}
		f = append(f, 0x45+byte(s.ipOpts/4), s.tos, 0, 0, byte(s.id>>8), byte(s.id), byte(frag>>8), byte(frag), s.ttl, l.proto, 0, 0)
		f = append(f, s.src[:4]...)
		f = append(f, s.dst[:4]...)
		for range s.ipOpts {
			f = append(f, 1) // NOP
		}
	}
	l.l4 = len(f)
	if s.udp {
		f = append(f, 0x30, 0x39, 0x00, 0x35, 0, 0, 0, 0)
	} else {
		doff := (20 + len(s.tcpOpts)) / 4
		f = binary.BigEndian.AppendUint16(f, 40000)
		f = binary.BigEndian.AppendUint16(f, 5201)
		f = binary.BigEndian.AppendUint32(f, s.seq)
		f = binary.BigEndian.AppendUint32(f, s.ack)
		f = append(f, byte(doff<<4), s.flags)
		f = binary.BigEndian.AppendUint16(f, s.win)
		f = append(f, 0, 0, 0, 0)
		f = append(f, s.tcpOpts...)
	}
	l.payload = len(f)
	l.ipExt = s.ipOpts > 0
	f = append(f, s.payload...)
	l.setIPLen(f, len(f))
	if s.udp {
		binary.BigEndian.PutUint16(f[l.l4+4:], uint16(len(f)-l.l4))
	}
	src, dst := l.addrs(f)
	binary.BigEndian.PutUint16(f[l.csumField():], fold(pseudo(src, dst, l.proto, len(f)-l.l4)))
	return f, l
}

// gsoHeader is the header the kernel gives the superframe of s cut at mss.
func (s *spec) gsoHeader(l layout, mss int) Header {
	h := Header{Flags: FlagNeedsCsum, HdrLen: uint16(l.payload), GSOSize: uint16(mss), CsumStart: uint16(l.l4),
		CsumOffset: uint16(l.csumField() - l.l4)}
	switch {
	case s.udp:
		h.GSOType = GSOUDPL4
	case s.v6:
		h.GSOType = GSOTCPv6
	default:
		h.GSOType = GSOTCPv4
	}
	if !s.udp && s.flags&tcpCWR != 0 {
		h.GSOType |= GSOECN
	}
	return h
}

// drawSpec draws a frame: TCP or UDP (udp < 0: either), over IPv4 or IPv6, with a payload of at
// most maxPayload bytes. ipOpts allows IPv4 options.
func drawSpec(t *rapid.T, udp int, ipOpts bool, maxPayload int) *spec {
	s := &spec{
		v6: rapid.Bool().Draw(t, "v6"), vlan: rapid.Bool().Draw(t, "vlan"),
		id: rapid.Uint16().Draw(t, "id"), df: rapid.Bool().Draw(t, "df"),
		seq: rapid.Uint32().Draw(t, "seq"), ack: rapid.Uint32().Draw(t, "ack"), win: rapid.Uint16().Draw(t, "win"),
		ttl: rapid.Uint8().Draw(t, "ttl"), tos: rapid.Uint8().Draw(t, "tos"),
	}
	switch udp {
	case 0:
	case 1:
		s.udp = true
	default:
		s.udp = rapid.Bool().Draw(t, "udp")
	}
	copy(s.src[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "src"))
	copy(s.dst[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "dst"))
	if ipOpts && !s.v6 {
		s.ipOpts = 4 * rapid.IntRange(0, 10).Draw(t, "ipopts")
	}
	if !s.udp {
		s.tcpOpts = rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "tcpopts")
		s.tcpOpts = s.tcpOpts[:len(s.tcpOpts)/4*4]
		s.flags = tcpACK
		for _, fl := range []struct {
			name string
			bit  byte
		}{{"psh", tcpPSH}, {"fin", tcpFIN}, {"cwr", tcpCWR}, {"ece", tcpECE}} {
			if rapid.Bool().Draw(t, fl.name) {
				s.flags |= fl.bit
			}
		}
	}
	n := rapid.IntRange(0, maxPayload).Draw(t, "payload_len")
	s.payload = make([]byte, n)
	seed := rapid.Uint64().Draw(t, "payload_seed")
	for i := range s.payload {
		seed = seed*6364136223846793005 + 1442695040888963407
		s.payload[i] = byte(seed >> 56)
	}
	return s
}

// tb is what checkFrame needs of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkFrame fails unless f parses exactly and carries valid IP and L4 checksums.
func checkFrame(t tb, f []byte) layout {
	t.Helper()
	l, err := parseLayout(f, true)
	if err != nil {
		t.Fatalf("emitted frame does not parse: %v", err)
	}
	if !l.v6 && fold(sum(f[l.l3:l.l4], 0)) != 0xffff {
		t.Fatalf("bad IPv4 header checksum")
	}
	src, dst := l.addrs(f)
	if fold(sum(f[l.l4:], pseudo(src, dst, l.proto, len(f)-l.l4))) != 0xffff {
		t.Fatalf("bad L4 checksum")
	}
	return l
}
