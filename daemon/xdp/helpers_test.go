package xdp

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/tests/testenv"
	"github.com/manad/manad/vnic"
)

// Offsets in struct xdp_md.
const (
	mdData           = 0
	mdDataEnd        = 4
	mdIngressIfindex = 12
	mdRxQueueIndex   = 16
)

// Test frame geometry: a 4K-page XDP RX buffer (single buffer per page, XDP_PACKET_HEADROOM).
const (
	testBufSize  = 4096
	testHeadroom = 256
)

// progConst returns verdict v without looking at the frame.
func progConst(v vnic.XDPAction) asm.Instructions {
	return asm.Instructions{
		asm.LoadImm(asm.R0, int64(v), asm.DWord),
		asm.Return(),
	}
}

// progDropUDPPort drops IPv4 (IHL 5) UDP frames to dport and passes everything else.
func progDropUDPPort(dport uint16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, mdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 42),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 12, asm.Half),
		asm.HostTo(asm.BE, asm.R5, asm.Half),
		asm.JNE.Imm(asm.R5, 0x0800, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14, asm.Byte),
		asm.JNE.Imm(asm.R5, 0x45, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 23, asm.Byte),
		asm.JNE.Imm(asm.R5, 17, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 36, asm.Half),
		asm.HostTo(asm.BE, asm.R5, asm.Half),
		asm.JNE.Imm(asm.R5, int32(dport), "pass"),
		asm.LoadImm(asm.R0, int64(vnic.XDPDrop), asm.DWord),
		asm.Return(),
		asm.LoadImm(asm.R0, int64(vnic.XDPPass), asm.DWord).WithSymbol("pass"),
		asm.Return(),
	}
}

// progSetByte writes val at frame offset off (when the frame is long enough) and returns v.
func progSetByte(off int16, val byte, v vnic.XDPAction) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, mdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, int32(off)+1),
		asm.JGT.Reg(asm.R4, asm.R3, "out"),
		asm.StoreImm(asm.R2, off, int64(val), asm.Byte),
		asm.LoadImm(asm.R0, int64(v), asm.DWord).WithSymbol("out"),
		asm.Return(),
	}
}

// progSwapMACTx swaps the Ethernet addresses and returns XDP_TX: a reflector.
func progSwapMACTx() asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, mdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 12),
		asm.JGT.Reg(asm.R4, asm.R3, "abort"),
	}
	for i := int16(0); i < 6; i++ {
		insns = append(insns,
			asm.LoadMem(asm.R5, asm.R2, i, asm.Byte),
			asm.LoadMem(asm.R6, asm.R2, 6+i, asm.Byte),
			asm.StoreMem(asm.R2, i, asm.R6, asm.Byte),
			asm.StoreMem(asm.R2, 6+i, asm.R5, asm.Byte),
		)
	}
	return append(insns,
		asm.LoadImm(asm.R0, int64(vnic.XDPTx), asm.DWord),
		asm.Return(),
		asm.LoadImm(asm.R0, int64(vnic.XDPAborted), asm.DWord).WithSymbol("abort"),
		asm.Return(),
	)
}

// progPushHeader grows the frame at the front by len(hdr) bytes with bpf_xdp_adjust_head,
// writes hdr there and returns XDP_PASS (XDP_ABORTED if the helper fails).
func progPushHeader(hdr []byte) asm.Instructions {
	// R1 is clobbered by the call: keep the context in R6.
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.Mov.Imm(asm.R2, -int32(len(hdr))),
		asm.FnXdpAdjustHead.Call(),
		asm.JNE.Imm(asm.R0, 0, "abort"),
		asm.LoadMem(asm.R2, asm.R6, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, mdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, int32(len(hdr))),
		asm.JGT.Reg(asm.R4, asm.R3, "abort"),
	}
	for i, b := range hdr {
		insns = append(insns, asm.StoreImm(asm.R2, int16(i), int64(b), asm.Byte))
	}
	return append(insns,
		asm.LoadImm(asm.R0, int64(vnic.XDPPass), asm.DWord),
		asm.Return(),
		asm.LoadImm(asm.R0, int64(vnic.XDPAborted), asm.DWord).WithSymbol("abort"),
		asm.Return(),
	)
}

// progAdjustTail moves the frame's end by delta bytes with bpf_xdp_adjust_tail and returns
// XDP_PASS, or XDP_ABORTED when the helper refuses.
func progAdjustTail(delta int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R2, delta),
		asm.FnXdpAdjustTail.Call(),
		asm.JNE.Imm(asm.R0, 0, "abort"),
		asm.LoadImm(asm.R0, int64(vnic.XDPPass), asm.DWord),
		asm.Return(),
		asm.LoadImm(asm.R0, int64(vnic.XDPAborted), asm.DWord).WithSymbol("abort"),
		asm.Return(),
	}
}

// progMeta reserves 8 bytes of metadata with bpf_xdp_adjust_meta, fills them with 0xee and
// returns XDP_PASS (XDP_ABORTED if the helper fails).
func progMeta() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.Mov.Imm(asm.R2, -8),
		asm.FnXdpAdjustMeta.Call(),
		asm.JNE.Imm(asm.R0, 0, "abort"),
		asm.LoadMem(asm.R2, asm.R6, 8, asm.Word), // data_meta
		asm.LoadMem(asm.R3, asm.R6, mdData, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 8),
		asm.JGT.Reg(asm.R4, asm.R3, "abort"),
		asm.StoreImm(asm.R2, 0, -0x11111112, asm.Word), // 0xeeeeeeee
		asm.StoreImm(asm.R2, 4, -0x11111112, asm.Word),
		asm.LoadImm(asm.R0, int64(vnic.XDPPass), asm.DWord),
		asm.Return(),
		asm.LoadImm(asm.R0, int64(vnic.XDPAborted), asm.DWord).WithSymbol("abort"),
		asm.Return(),
	}
}

// progStoreCtx writes ctx->ingress_ifindex and ctx->rx_queue_index (native byte order) over the
// first 8 bytes of the frame and returns XDP_PASS.
func progStoreCtx() asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, mdDataEnd, asm.Word),
		asm.LoadMem(asm.R4, asm.R1, mdIngressIfindex, asm.Word),
		asm.LoadMem(asm.R5, asm.R1, mdRxQueueIndex, asm.Word),
		asm.Mov.Reg(asm.R6, asm.R2),
		asm.Add.Imm(asm.R6, 8),
		asm.JGT.Reg(asm.R6, asm.R3, "out"),
		asm.StoreMem(asm.R2, 0, asm.R4, asm.Word),
		asm.StoreMem(asm.R2, 4, asm.R5, asm.Word),
		asm.LoadImm(asm.R0, int64(vnic.XDPPass), asm.DWord).WithSymbol("out"),
		asm.Return(),
	}
}

// newRawProg loads insns as a program of type typ; the test fails if the kernel refuses it.
func newRawProg(t testing.TB, typ ebpf.ProgramType, insns asm.Instructions) *ebpf.Program {
	t.Helper()
	testenv.RequireRoot(t)
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: typ, License: "GPL", Instructions: insns})
	require.NoError(t, err, "loading %s program", typ)
	t.Cleanup(func() { p.Close() })
	return p
}

// newProg loads insns as an XDP program and wraps it; both are closed at the end of the test.
func newProg(t testing.TB, name string, insns asm.Instructions) *Program {
	t.Helper()
	raw := newRawProg(t, ebpf.XDP, insns)
	p, err := FromProgram(raw, name)
	require.NoError(t, err, "FromProgram")
	t.Cleanup(func() {
		assert.NoError(t, p.Close(), "Close")
	})
	return p
}

// udpFrame builds an Ethernet/IPv4/UDP frame of the given total length to dport, with a
// recognisable payload.
func udpFrame(length int, sport, dport uint16) []byte {
	f := make([]byte, max(length, 42))
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	binary.BigEndian.PutUint16(ip[24:], uint16(len(f)-34))
	for i := 42; i < len(f); i++ {
		f[i] = byte(i * 7)
	}
	return f
}

// rxBuf lays frame out as a port with XDP does: a bufSize buffer with the frame after
// headroom bytes. The rest of the buffer is filled with 0xa5 so that stray writes show.
func rxBuf(frame []byte, bufSize, headroom int) (buf []byte, data, end int) {
	buf = bytes.Repeat([]byte{0xa5}, bufSize)
	return buf, headroom, headroom + copy(buf[headroom:], frame)
}
