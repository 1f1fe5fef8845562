package client

import (
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// FuzzDecodeReplies feeds arbitrary reply payloads to every decoder the
// client uses for manad's and the kernel's replies, and arbitrary datagrams
// to the socket's message splitter and ACK decoder. None may panic.
func FuzzDecodeReplies(f *testing.F) {
	var b nlattr.Builder
	n := b.Nest(unix.ETHTOOL_A_PRIVFLAGS_HEADER)
	b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 3)
	b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "eth0")
	b.EndNest(n)
	f.Add(append([]byte(nil), b.B...))
	n = b.Nest(unix.ETHTOOL_A_PRIVFLAGS_FLAGS)
	b.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 1)
	bits := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
	bit := b.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
	b.PutU32(unix.ETHTOOL_A_BITSET_BIT_INDEX, 0)
	b.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, "full-page-rx")
	b.EndNest(bit)
	b.EndNest(bits)
	b.EndNest(n)
	f.Add(append([]byte(nil), b.B...))
	b.Reset()
	n = b.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
	set := b.Nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
	b.PutU32(unix.ETHTOOL_A_STRINGSET_ID, 1)
	b.PutU32(unix.ETHTOOL_A_STRINGSET_COUNT, 1)
	strs := b.Nest(unix.ETHTOOL_A_STRINGSET_STRINGS)
	s := b.Nest(unix.ETHTOOL_A_STRINGS_STRING)
	b.PutU32(unix.ETHTOOL_A_STRING_INDEX, 0)
	b.PutString(unix.ETHTOOL_A_STRING_VALUE, "rx_packets")
	b.EndNest(s)
	b.EndNest(strs)
	b.EndNest(set)
	b.EndNest(n)
	f.Add(append([]byte(nil), b.B...))
	b.Reset()
	n = b.Nest(wire.AttrPort)
	b.PutU32(wire.PortAttrDevIndex, 4)
	faults := b.Nest(wire.PortAttrFaults)
	item := b.Nest(wire.ListItem)
	b.PutString(wire.FaultAttrPoint, "attach")
	b.EndNest(item)
	b.EndNest(faults)
	b.EndNest(n)
	f.Add(append([]byte(nil), b.B...))
	b.Reset()
	wire.NetdevPagePoolTable.Put(&b, &wire.NetdevPagePool{ID: 3, Ifindex: 4, Inflight: 1, InflightMem: 4096, DetachTime: 1 << 40})
	f.Add(append([]byte(nil), b.B...))
	b.Reset()
	b.Genl(wire.CmdCaptureFrame, wire.FamilyVersion) // a CAPTURE_FRAME payload, genl header first
	wire.CaptureFrameTable.PutNest(&b, wire.AttrCaptureFrame, &wire.CaptureFrame{Time: 1, Dir: wire.CaptureIn, Member: "p", OrigLen: 60, Data: make([]byte, 14)})
	f.Add(append([]byte(nil), b.B...))
	f.Add(nlattr.AppendAck(nil, make([]byte, 24), 1, unix.EINVAL, &nlattr.Error{Errno: unix.EINVAL, Message: "x", Offset: 20}, nlattr.AckOptions{ExtAck: true}))

	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = DecodePrivateFlags(data, []string{"a"})
		_, _ = DecodeRings(data)
		_, _ = DecodeChannels(data)
		_, _ = DecodeStringSets(data)
		_, _ = DecodePort(data)
		_, _ = DecodeStats(data)
		for cmd := uint8(wire.NetdevCmdDevAddNtf); cmd <= wire.NetdevCmdPagePoolChangeNtf; cmd++ {
			_, _, _ = decodeNetdevNotification(genetlink.Message{Header: genetlink.Header{Command: cmd}, Data: data})
		}
		aligned := make([]byte, nlattr.Align(len(data)))
		copy(aligned, data)
		if msgs, err := parseDatagram(aligned); err == nil {
			for _, m := range msgs {
				_ = ackError(m)
			}
		}
		_ = ackError(netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: netlink.AcknowledgeTLVs}, Data: data})
		_, _, _ = (&Capture{fam: 0x14}).frame(netlink.Message{Header: netlink.Header{Type: 0x14}, Data: data})
	})
}
