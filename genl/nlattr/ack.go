package nlattr

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// Netlink message types and flags used in replies (include/uapi/linux/netlink.h).
const (
	MsgNoop  uint16 = 0x1 // NLMSG_NOOP
	MsgError uint16 = 0x2 // NLMSG_ERROR
	MsgDone  uint16 = 0x3 // NLMSG_DONE
	// MsgMinType is NLMSG_MIN_TYPE: lower types are control messages.
	MsgMinType uint16 = 0x10

	FlagRequest uint16 = 0x1   // NLM_F_REQUEST
	FlagMulti   uint16 = 0x2   // NLM_F_MULTI
	FlagAck     uint16 = 0x4   // NLM_F_ACK
	FlagEcho    uint16 = 0x8   // NLM_F_ECHO
	FlagDump    uint16 = 0x300 // NLM_F_DUMP (ROOT|MATCH)
	FlagCapped  uint16 = 0x100 // NLM_F_CAPPED (in NLMSG_ERROR)
	FlagAckTLVs uint16 = 0x200 // NLM_F_ACK_TLVS (in NLMSG_ERROR / NLMSG_DONE)
)

// Extended ACK attributes (enum nlmsgerr_attrs).
const (
	ErrAttrMsg      uint16 = 1 // NLMSGERR_ATTR_MSG
	ErrAttrOffs     uint16 = 2 // NLMSGERR_ATTR_OFFS
	ErrAttrCookie   uint16 = 3 // NLMSGERR_ATTR_COOKIE
	ErrAttrPolicy   uint16 = 4 // NLMSGERR_ATTR_POLICY
	ErrAttrMissType uint16 = 5 // NLMSGERR_ATTR_MISS_TYPE
	ErrAttrMissNest uint16 = 6 // NLMSGERR_ATTR_MISS_NEST
)

// Header is a decoded struct nlmsghdr.
type Header struct {
	Len   uint32
	Type  uint16
	Flags uint16
	Seq   uint32
	PID   uint32
}

// ReadHeader decodes the nlmsghdr at the start of b; ok is false when b is
// shorter than 16 bytes.
func ReadHeader(b []byte) (h Header, ok bool) {
	if len(b) < MsgHdrLen {
		return Header{}, false
	}
	return Header{
		Len:   binary.NativeEndian.Uint32(b),
		Type:  binary.NativeEndian.Uint16(b[4:]),
		Flags: binary.NativeEndian.Uint16(b[6:]),
		Seq:   binary.NativeEndian.Uint32(b[8:]),
		PID:   binary.NativeEndian.Uint32(b[12:]),
	}, true
}

// Error is manad's one error type (genl/nlerr): the errno and every extended ACK field
// netlink_ack() sends (message, offset, policy, missing attribute). It unwraps to the errno.
type Error = nlerr.Error

// Errorf returns an *Error with a formatted extack message and no offset.
func Errorf(errno unix.Errno, format string, args ...any) *Error {
	return nlerr.Errorf(errno, format, args...)
}

// AttrError returns an *Error blaming attribute a (NL_SET_ERR_MSG_ATTR).
// An absent attribute gives no offset, as in the kernel.
func AttrError(errno unix.Errno, a Attr, msg string) *Error {
	return &Error{Errno: errno, Message: msg, Offset: a.Off}
}

// Missing returns the error of NL_REQ_ATTR_CHECK: EINVAL, no message,
// MISS_TYPE = t and MISS_NEST = the nest's offset (absent nest = top level).
func Missing(nest Attr, t uint16) *Error {
	return &Error{Errno: unix.EINVAL, MissType: t, MissNest: nest.Off}
}

// AckOptions are the per-socket options that shape an ACK.
type AckOptions struct {
	ExtAck bool // NETLINK_EXT_ACK: append extack TLVs
	CapAck bool // NETLINK_CAP_ACK: never echo the request payload
}

// AppendAck appends the NLMSG_ERROR message that netlink_ack() sends for the
// request req (its full bytes, nlmsg_len long). errno 0 is a plain ACK.
// e may be nil; when given, its extack fields become TLVs (MSG is also sent
// with errno 0, as a warning, exactly like the kernel).
//
// The echoed nlmsghdr is copied from req verbatim, keeping its nlmsg_len; the
// payload follows unless the ACK is capped (a success ACK always is).
func AppendAck(dst []byte, req []byte, pid uint32, errno unix.Errno, e *Error, opt AckOptions) []byte {
	h, _ := ReadHeader(req)
	flags := uint16(0)
	echo := len(req) > MsgHdrLen && errno != 0 && !opt.CapAck
	if !echo {
		flags |= FlagCapped
	}
	var tlv Builder
	if opt.ExtAck {
		appendTLVs(&tlv, e, errno, len(req))
	}
	if tlv.Len() > 0 {
		flags |= FlagAckTLVs
	}
	b := Builder{B: dst}
	start := b.BeginMsg(MsgError, flags, h.Seq, pid)
	v := b.grow(4 + MsgHdrLen)
	binary.NativeEndian.PutUint32(v, uint32(-int32(errno)))
	copy(v[4:], req[:min(len(req), MsgHdrLen)])
	if echo {
		p := b.grow(Align(len(req) - MsgHdrLen))
		copy(p, req[MsgHdrLen:])
	}
	b.B = append(b.B, tlv.B...)
	b.EndMsg(start)
	return b.B
}

// appendTLVs appends e's extack TLVs (netlink_ack_tlv_fill) for a request of reqLen bytes;
// nothing when e is nil. Only the message is sent with errno 0.
func appendTLVs(tlv *Builder, e *Error, errno unix.Errno, reqLen int) {
	if e == nil {
		return
	}
	if e.Message != "" {
		tlv.PutString(ErrAttrMsg, e.Message)
	}
	if errno == 0 {
		return
	}
	if e.Offset > 0 && e.Offset < reqLen {
		tlv.PutU32(ErrAttrOffs, uint32(e.Offset))
	}
	if e.Policy != nil {
		n := tlv.Nest(ErrAttrPolicy)
		tlv.B = append(tlv.B, e.Policy...)
		tlv.EndNest(n)
	}
	if e.MissType != 0 {
		tlv.PutU32(ErrAttrMissType, uint32(e.MissType))
	}
	if e.MissNest > 0 && e.MissNest <= reqLen {
		tlv.PutU32(ErrAttrMissNest, uint32(e.MissNest))
	}
}

// AppendDone appends the NLMSG_DONE that ends a dump (netlink_dump_done):
// flags NLM_F_MULTI, payload the int32 -errno, and NLMSGERR_ATTR_MSG when
// extack is enabled and msg is set.
func AppendDone(dst []byte, seq, pid uint32, errno unix.Errno, msg string, extAck bool) []byte {
	var e *Error
	if msg != "" {
		e = &Error{Errno: errno, Message: msg}
	}
	return AppendDoneError(dst, 0, seq, pid, errno, e, extAck)
}

// AppendDoneError is AppendDone with all of e's extack (message, offset, policy, missing
// attribute), as netlink_dump_done sends since Linux 6.0; reqLen is the dump request's
// length, which bounds the offsets.
func AppendDoneError(dst []byte, reqLen int, seq, pid uint32, errno unix.Errno, e *Error, extAck bool) []byte {
	var tlv Builder
	if extAck {
		appendTLVs(&tlv, e, errno, reqLen)
	}
	flags := FlagMulti
	if tlv.Len() > 0 {
		flags |= FlagAckTLVs
	}
	b := Builder{B: dst}
	start := b.BeginMsg(MsgDone, flags, seq, pid)
	v := b.grow(4)
	binary.NativeEndian.PutUint32(v, uint32(-int32(errno)))
	b.B = append(b.B, tlv.B...)
	b.EndMsg(start)
	return b.B
}
