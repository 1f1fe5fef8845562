package datapath

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/manad/manad/daemon/offload"
	"github.com/manad/manad/internal/rrclient"
	"github.com/stretchr/testify/require"
)

// gsoLog is the device side of an uplink with transmit coalescing: every write, alone (tx) or
// coalesced (gso), in order.
type gsoLog struct {
	writes []gsoWrite
}

type gsoWrite struct {
	gso   bool
	hdr   offload.Header
	frame []byte // headers and payloads joined
}

func (l *gsoLog) tx(f []byte) error {
	l.writes = append(l.writes, gsoWrite{frame: append([]byte(nil), f...)})
	return nil
}

func (l *gsoLog) gso(iov [][]byte) error {
	w := gsoWrite{gso: true}
	if err := w.hdr.Decode(iov[0]); err != nil {
		return err
	}
	w.frame = append([]byte(nil), iov[0][offload.HeaderLen:]...)
	for _, b := range iov[1:] {
		w.frame = append(w.frame, b...)
	}
	l.writes = append(l.writes, w)
	return nil
}

// uplinkTCP returns a TCP segment with valid checksums from a to the station behind the uplink.
func uplinkTCP(id uint16, seq uint32, payload int) []byte {
	src := &testPort{mac: mac(1), ip: net.IPv4(10, 77, 0, 1).To4()}
	dst := &testPort{mac: mac(9), ip: net.IPv4(10, 77, 0, 9).To4()}
	f := tcpFrameFor(dst, src, id, seq, payload)
	for i := range payload {
		f[54+i] = byte(seq) + byte(i)
	}
	// Refresh the TCP checksum over the new payload.
	tcp := f[34:]
	binary.BigEndian.PutUint16(tcp[16:], 0)
	ps := append(append(append([]byte(nil), src.ip...), dst.ip...), 0, 6, byte(len(tcp)>>8), byte(len(tcp)))
	binary.BigEndian.PutUint16(tcp[16:], rrclient.Checksum(append(ps, tcp...)))
	return f
}

// TestUplinkTxCoalescing forwards TCP segments of one flow to an uplink with transmit
// coalescing, as an inline sender's batch does: consecutive segments go out as one GSO
// superframe when the batch ends, a frame that cannot merge ends the run and goes out alone in
// its place, a segment beyond the MTU is dropped and counted on its own, frames of a sender
// that is not inline are never held, and the counters count wire frames and superframes.
func TestUplinkTxCoalescing(t *testing.T) {
	s, _, _, ports := testSegment("a")
	dev := &gsoLog{}
	u := s.AttachUplink("vx0", dev.tx)
	u.SetMTU(1500)
	u.SetUp(true)
	u.SetTxGSO(dev.gso)
	u.Receive(frame(mac(1), mac(9), 0)) // the remote station is behind the uplink
	a := ports["a"]
	const seg = 1000

	segs := [][]byte{uplinkTCP(1, 0, seg), uplinkTCP(2, seg, seg), uplinkTCP(3, 2*seg, seg)}
	for _, f := range segs {
		s.forward(a, f, true)
	}
	require.Empty(t, dev.writes, "%d writes before the batch ended, want the run held", len(dev.writes))
	other := frame(mac(9), mac(1), 7)
	s.forward(a, other, true)                     // not TCP: ends the run, goes alone after it
	s.forward(a, uplinkTCP(4, 3*seg, seg), true)  // starts a new run, written at the batch's end
	s.forward(a, uplinkTCP(5, 4*seg, 1480), true) // beyond the MTU: dropped, the run stays
	s.gro.flush()

	require.Len(t, dev.writes, 3, "%d writes, want 3 (superframe, lone frame, run of one)", len(dev.writes))
	w := dev.writes[0]
	require.True(t, w.gso, "first write: gso %v header %+v, %d bytes; want a TCPv4 superframe of 3 segments", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint8(offload.GSOTCPv4), w.hdr.GSOType, "first write: gso %v header %+v, %d bytes; want a TCPv4 superframe of 3 segments", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint16(seg), w.hdr.GSOSize, "first write: gso %v header %+v, %d bytes; want a TCPv4 superframe of 3 segments", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint8(offload.FlagNeedsCsum), w.hdr.Flags, "first write: gso %v header %+v, %d bytes; want a TCPv4 superframe of 3 segments", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint16(34), w.hdr.CsumStart, "first write: gso %v header %+v, %d bytes; want a TCPv4 superframe of 3 segments", w.gso, w.hdr, len(w.frame))
	require.Equal(t, uint16(16), w.hdr.CsumOffset, "first write: gso %v header %+v, %d bytes; want a TCPv4 superframe of 3 segments", w.gso, w.hdr, len(w.frame))
	require.Equal(t, 54+3*seg, len(w.frame), "first write: gso %v header %+v, %d bytes; want a TCPv4 superframe of 3 segments", w.gso, w.hdr, len(w.frame))
	var payload []byte
	for _, f := range segs {
		payload = append(payload, f[54:]...)
	}
	require.Equal(t, payload, w.frame[54:], "superframe: payloads out of order or IP total length not the run's")
	require.Equal(t, uint16(40+3*seg), binary.BigEndian.Uint16(w.frame[16:]), "superframe: payloads out of order or IP total length not the run's")
	w = dev.writes[1]
	require.False(t, w.gso, "second write: gso %v, want the non-TCP frame alone", w.gso)
	require.Equal(t, other, w.frame, "second write: gso %v, want the non-TCP frame alone", w.gso)
	w = dev.writes[2]
	require.True(t, w.gso, "third write: header %+v, want segment 4 unchanged with a header asking nothing", w.hdr)
	require.Equal(t, uint8(offload.GSONone), w.hdr.GSOType, "third write: header %+v, want segment 4 unchanged with a header asking nothing", w.hdr)
	require.Equal(t, uplinkTCP(4, 3*seg, seg), w.frame, "third write: header %+v, want segment 4 unchanged with a header asking nothing", w.hdr)
	st := u.Stats()
	wantBytes := uint64(len(other) + 4*len(segs[0]))
	require.Equal(t, uint64(5), st.TxFrames, "stats %+v, want TxFrames 5, TxAggregates 1, TxMTUDrops 1, TxBytes %d", st, wantBytes)
	require.Equal(t, uint64(1), st.TxAggregates, "stats %+v, want TxFrames 5, TxAggregates 1, TxMTUDrops 1, TxBytes %d", st, wantBytes)
	require.Equal(t, uint64(1), st.TxMTUDrops, "stats %+v, want TxFrames 5, TxAggregates 1, TxMTUDrops 1, TxBytes %d", st, wantBytes)
	require.Equal(t, wantBytes, st.TxBytes, "stats %+v, want TxFrames 5, TxAggregates 1, TxMTUDrops 1, TxBytes %d", st, wantBytes)
	require.Equal(t, uint64(0), st.TxErrors, "stats %+v, want TxFrames 5, TxAggregates 1, TxMTUDrops 1, TxBytes %d", st, wantBytes)

	// A sender that is not inline has no batch end that would write a run: its frames go
	// out at once, alone.
	dev.writes = nil
	s.forward(a, uplinkTCP(6, 0, seg), false)
	s.forward(a, uplinkTCP(7, seg, seg), false)
	require.Len(t, dev.writes, 2, "frames of a sender that is not inline: %d writes, want 2 alone", len(dev.writes))
	require.False(t, dev.writes[0].gso, "frames of a sender that is not inline: %d writes, want 2 alone", len(dev.writes))
	require.False(t, dev.writes[1].gso, "frames of a sender that is not inline: %d writes, want 2 alone", len(dev.writes))

	// Switching coalescing off writes the run first.
	dev.writes = nil
	s.forward(a, uplinkTCP(8, 0, seg), true)
	u.SetTxGSO(nil)
	s.forward(a, uplinkTCP(9, seg, seg), true)
	s.gro.flush()
	require.Len(t, dev.writes, 2, "after SetTxGSO(nil): %d writes, want the held run then a frame alone", len(dev.writes))
	require.True(t, dev.writes[0].gso, "after SetTxGSO(nil): %d writes, want the held run then a frame alone", len(dev.writes))
	require.False(t, dev.writes[1].gso, "after SetTxGSO(nil): %d writes, want the held run then a frame alone", len(dev.writes))
}
