package nlbridge

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// splitMsgs splits a datagram into its netlink messages as netlink_rcv_skb walks them: each
// message is nlmsg_len bytes (its padding excluded); the walk stops at the first header that is
// short or claims more than is left, and rest is what it did not take (the kernel ignores it).
func splitMsgs(d []byte) (msgs [][]byte, rest []byte) {
	for len(d) >= nlattr.MsgHdrLen {
		l := int(binary.NativeEndian.Uint32(d))
		if l < nlattr.MsgHdrLen || l > len(d) {
			return msgs, d
		}
		msgs = append(msgs, d[:l:l])
		d = d[min(nlattr.Align(l), len(d)):]
	}
	return msgs, d
}

// appendMsg appends message m to a datagram being built, padded to the netlink alignment.
func appendMsg(dst, m []byte) []byte {
	dst = append(dst, m...)
	for len(dst)%4 != 0 {
		dst = append(dst, 0)
	}
	return dst
}

// putType, putFlags, putPID overwrite fields of the nlmsghdr at the start of m.
func putType(m []byte, t uint16)  { binary.NativeEndian.PutUint16(m[4:], t) }
func putFlags(m []byte, f uint16) { binary.NativeEndian.PutUint16(m[6:], f) }
func putPID(m []byte, pid uint32) { binary.NativeEndian.PutUint32(m[12:], pid) }
func msgType(m []byte) uint16     { return binary.NativeEndian.Uint16(m[4:]) }
func isDump(h nlattr.Header) bool { return h.Flags&nlattr.FlagDump == nlattr.FlagDump }
func isGenlReq(h nlattr.Header) bool {
	return h.Flags&nlattr.FlagRequest != 0 && h.Type >= nlattr.MsgMinType
}

// errOff is where an NLMSG_ERROR's embedded request header starts.
const errOff = nlattr.MsgHdrLen + 4

// errnoOf returns the errno an NLMSG_ERROR or NLMSG_DONE carries (0 for an ACK or a clean end);
// ok is false when m is too short to carry one.
func errnoOf(m []byte) (unix.Errno, bool) {
	if len(m) < nlattr.MsgHdrLen+4 {
		return 0, false
	}
	return unix.Errno(-int32(binary.NativeEndian.Uint32(m[nlattr.MsgHdrLen:]))), true
}

// extackMsg returns NLMSGERR_ATTR_MSG of an NLMSG_ERROR or NLMSG_DONE that carries TLVs.
func extackMsg(m []byte) string {
	h, ok := nlattr.ReadHeader(m)
	if !ok || h.Flags&nlattr.FlagAckTLVs == 0 {
		return ""
	}
	off := nlattr.MsgHdrLen + 4
	if h.Type == nlattr.MsgError {
		// The TLVs follow the embedded request: its header alone when capped, else all of it.
		if len(m) < errOff+nlattr.MsgHdrLen {
			return ""
		}
		off = errOff + nlattr.MsgHdrLen
		if h.Flags&nlattr.FlagCapped == 0 {
			eh, _ := nlattr.ReadHeader(m[errOff:])
			off = errOff + nlattr.Align(int(eh.Len))
		}
	}
	if off > len(m) {
		return ""
	}
	it := nlattr.NewIter(m, off, len(m)-off)
	for it.Next() {
		if it.Attr().Type() == nlattr.ErrAttrMsg {
			return it.Attr().Str()
		}
	}
	return ""
}

// genlAttr returns top-level attribute t of a generic netlink message (after its genlmsghdr),
// absent when the message is too short or has no such attribute.
func genlAttr(m []byte, t uint16) nlattr.Attr {
	const off = nlattr.MsgHdrLen + nlattr.GenlHdrLen
	if len(m) < off {
		return nlattr.Attr{}
	}
	it := nlattr.NewIter(m, off, len(m)-off)
	for it.Next() {
		if it.Attr().Type() == t {
			return it.Attr()
		}
	}
	return nlattr.Attr{}
}

// genlCmd returns the genlmsghdr command of m; ok is false when m has no genlmsghdr.
func genlCmd(m []byte) (cmd uint8, ok bool) {
	if len(m) < nlattr.MsgHdrLen+nlattr.GenlHdrLen {
		return 0, false
	}
	return m[nlattr.MsgHdrLen], true
}

// nestedAttr returns attribute t inside nest a of message m.
func nestedAttr(m []byte, a nlattr.Attr, t uint16) nlattr.Attr {
	it := nlattr.NestedIter(m, a)
	for it.Next() {
		if it.Attr().Type() == t {
			return it.Attr()
		}
	}
	return nlattr.Attr{}
}

// u32Of returns a u32 attribute's value; ok is false when it is absent or shorter than 4 bytes.
func u32Of(a nlattr.Attr) (uint32, bool) {
	if !a.Present() || len(a.Data) < 4 {
		return 0, false
	}
	return a.U32(), true
}

// ethtoolDev reads the device an ethtool message names in its header nest (attribute 1 of every
// ETHTOOL_MSG_*, ETHTOOL_A_HEADER_DEV_INDEX and _DEV_NAME). Both are zero when there is no
// header or it names no device.
func ethtoolDev(m []byte) (index uint32, name string) {
	hdr := genlAttr(m, unix.ETHTOOL_A_HEADER_DEV_INDEX) // ETHTOOL_A_*_HEADER is 1 in every message
	if !hdr.Present() {
		return 0, ""
	}
	index, _ = u32Of(nestedAttr(m, hdr, unix.ETHTOOL_A_HEADER_DEV_INDEX))
	if a := nestedAttr(m, hdr, unix.ETHTOOL_A_HEADER_DEV_NAME); a.Present() {
		name = a.Str()
	}
	return index, name
}

// putU16At and putU32At overwrite the payload of an attribute of m in place.
func putU16At(m []byte, a nlattr.Attr, v uint16) {
	if a.Present() && len(a.Data) >= 2 {
		binary.NativeEndian.PutUint16(m[a.PayloadOff():], v)
	}
}

func putU32At(m []byte, a nlattr.Attr, v uint32) {
	if a.Present() && len(a.Data) >= 4 {
		binary.NativeEndian.PutUint32(m[a.PayloadOff():], v)
	}
}
