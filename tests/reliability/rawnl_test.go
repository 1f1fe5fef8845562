package reliability

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// A raw netlink client for the bad-input tests, written from the uAPI headers alone (no
// mdlayher/netlink, no genl/nlattr), so that it can send anything and checks manad's framing
// independently of manad's own encoder.

const (
	nlHdrLen   = 16 // struct nlmsghdr
	genlHdrLen = 4  // struct genlmsghdr

	nlmNoop  = 1 // NLMSG_NOOP
	nlmError = 2 // NLMSG_ERROR
	nlmDone  = 3 // NLMSG_DONE
	nlmMin   = 16

	fRequest = 0x1
	fMulti   = 0x2
	fAck     = 0x4
	fEcho    = 0x8
	fDump    = 0x300 // NLM_F_ROOT | NLM_F_MATCH
	fCapped  = 0x100
	fAckTLVs = 0x200

	nlaNested   = 0x8000
	nlaByteOrd  = 0x4000
	nlaTypeMask = 0x3fff

	nlctrlID = 0x10

	errAttrMsg  = 1 // NLMSGERR_ATTR_MSG
	errAttrOffs = 2 // NLMSGERR_ATTR_OFFS
)

var ne = binary.NativeEndian

func align4(n int) int { return (n + 3) &^ 3 }

// attr encodes one attribute (type t, payload p), padded to 4 bytes.
func attr(t uint16, p []byte) []byte {
	b := make([]byte, align4(4+len(p)))
	ne.PutUint16(b[0:], uint16(4+len(p)))
	ne.PutUint16(b[2:], t)
	copy(b[4:], p)
	return b
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// nest encodes a nest with NLA_F_NESTED; nestNoFlag without it (what the kernel's strict
// validation refuses).
func nest(t uint16, children ...[]byte) []byte       { return attr(t|nlaNested, cat(children...)) }
func nestNoFlag(t uint16, children ...[]byte) []byte { return attr(t, cat(children...)) }
func u8a(t uint16, v uint8) []byte                   { return attr(t, []byte{v}) }
func flagA(t uint16) []byte                          { return attr(t, nil) }
func strA(t uint16, s string) []byte                 { return attr(t, append([]byte(s), 0)) }

func u16a(t uint16, v uint16) []byte {
	b := make([]byte, 2)
	ne.PutUint16(b, v)
	return attr(t, b)
}

func u32a(t uint16, v uint32) []byte {
	b := make([]byte, 4)
	ne.PutUint32(b, v)
	return attr(t, b)
}

// nlmsg encodes a netlink message: header with nlmsg_len = the real length, then payload.
func nlmsg(typ, flags uint16, seq, pid uint32, payload []byte) []byte {
	b := make([]byte, nlHdrLen, nlHdrLen+len(payload))
	ne.PutUint32(b[0:], uint32(nlHdrLen+len(payload)))
	ne.PutUint16(b[4:], typ)
	ne.PutUint16(b[6:], flags)
	ne.PutUint32(b[8:], seq)
	ne.PutUint32(b[12:], pid)
	return append(b, payload...)
}

// genlmsg encodes a generic netlink request.
func genlmsg(family, flags uint16, seq uint32, cmd, version uint8, attrs ...[]byte) []byte {
	return nlmsg(family, flags, seq, 0, cat([]byte{cmd, version, 0, 0}, cat(attrs...)))
}

// nlHeader is a decoded struct nlmsghdr.
type nlHeader struct {
	Len      uint32
	Type     uint16
	Flags    uint16
	Seq, PID uint32
}

func readHeader(b []byte) nlHeader {
	return nlHeader{Len: ne.Uint32(b[0:]), Type: ne.Uint16(b[4:]), Flags: ne.Uint16(b[6:]),
		Seq: ne.Uint32(b[8:]), PID: ne.Uint32(b[12:])}
}

// rawMsg is one message of a reply datagram.
type rawMsg struct {
	nlHeader
	Body []byte // nlmsg_len - 16 bytes after the header
}

// parseReply splits a reply datagram into messages; anything that is not a sequence of whole,
// aligned messages is an error (manad must never send that).
func parseReply(d []byte) ([]rawMsg, error) {
	var out []rawMsg
	for len(d) > 0 {
		if len(d) < nlHdrLen {
			return out, fmt.Errorf("reply datagram has %d stray bytes after its messages", len(d))
		}
		h := readHeader(d)
		if h.Len < nlHdrLen || int(h.Len) > len(d) {
			return out, fmt.Errorf("reply message with nlmsg_len %d in %d bytes", h.Len, len(d))
		}
		out = append(out, rawMsg{nlHeader: h, Body: d[nlHdrLen:h.Len]})
		d = d[min(align4(int(h.Len)), len(d)):]
	}
	return out, nil
}

// ackInfo is a decoded NLMSG_ERROR or NLMSG_DONE.
type ackInfo struct {
	Errno  unix.Errno // positive; 0 for an ACK or a successful DONE
	Msg    string     // NLMSGERR_ATTR_MSG
	Offs   uint32     // NLMSGERR_ATTR_OFFS, 0 when absent
	Echo   nlHeader   // the echoed request header (NLMSG_ERROR only)
	Capped bool
}

// parseAck decodes an NLMSG_ERROR (struct nlmsgerr + extack TLVs) or NLMSG_DONE (int error +
// TLVs) as netlink_ack and netlink_dump_done lay them out.
func parseAck(m rawMsg) (ackInfo, error) {
	var a ackInfo
	if len(m.Body) < 4 {
		return a, fmt.Errorf("type %d message of %d bytes has no error code", m.Type, len(m.Body))
	}
	code := int32(ne.Uint32(m.Body))
	if code > 0 {
		return a, fmt.Errorf("positive error code %d", code)
	}
	a.Errno = unix.Errno(-code)
	tlvs := m.Body[4:]
	if m.Type == nlmError {
		if len(m.Body) < 4+nlHdrLen {
			return a, fmt.Errorf("NLMSG_ERROR of %d bytes has no echoed header", len(m.Body))
		}
		a.Echo = readHeader(m.Body[4:])
		a.Capped = m.Flags&fCapped != 0
		skip := nlHdrLen
		if !a.Capped {
			skip = align4(int(a.Echo.Len))
		}
		if 4+skip > len(m.Body) {
			if m.Flags&fAckTLVs != 0 || 4+int(a.Echo.Len) > len(m.Body) {
				return a, fmt.Errorf("NLMSG_ERROR echoes %d bytes but carries %d", a.Echo.Len, len(m.Body)-4)
			}
			skip = len(m.Body) - 4
		}
		tlvs = m.Body[4+skip:]
	}
	if m.Flags&fAckTLVs == 0 {
		return a, nil
	}
	for len(tlvs) >= 4 {
		l := int(ne.Uint16(tlvs))
		t := ne.Uint16(tlvs[2:]) & nlaTypeMask
		if l < 4 || l > len(tlvs) {
			return a, fmt.Errorf("malformed extack TLV (len %d, %d bytes left)", l, len(tlvs))
		}
		p := tlvs[4:l]
		switch t {
		case errAttrMsg:
			if n := len(p); n > 0 && p[n-1] == 0 {
				p = p[:n-1]
			}
			a.Msg = string(p)
		case errAttrOffs:
			if len(p) == 4 {
				a.Offs = ne.Uint32(p)
			}
		}
		tlvs = tlvs[min(align4(l), len(tlvs)):]
	}
	return a, nil
}

// errClosed is what rawConn returns when manad closed the connection.
var errClosed = errors.New("connection closed by manad")

// rawConn is a Unix SOCK_SEQPACKET connection driven with plain syscalls.
type rawConn struct {
	fd      int
	manadID uint16   // when set, the sentinel also resets the connection's ACK options
	pending []rawMsg // messages read but not yet consumed
	buf     []byte
}

// replyTimeout is how long a raw client waits for an answer before calling it a hang.
const replyTimeout = 20 * time.Second

// dialRaw connects to socket from the calling thread (its namespace and credentials).
func dialRaw(socket string) (*rawConn, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: socket}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect %s: %w", socket, err)
	}
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &rawConn{fd: fd, buf: make([]byte, 1<<20)}, nil
}

func (c *rawConn) Close() { unix.Close(c.fd) }

// forceSendBuffer raises the socket's send buffer (root only), so that one datagram can exceed
// the default limit of about 208 KiB.
func (c *rawConn) forceSendBuffer(n int) error {
	return unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n)
}

// send writes one datagram (a zero-length one too).
func (c *rawConn) send(d []byte) error {
	n, err := unix.Write(c.fd, d)
	switch {
	case errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET):
		return errClosed
	case err != nil:
		return err
	case n != len(d):
		return fmt.Errorf("short write %d of %d", n, len(d))
	}
	return nil
}

// recvDatagram reads one datagram; errClosed at EOF (manad never sends an empty datagram).
func (c *rawConn) recvDatagram() ([]byte, error) {
	for {
		n, _, flags, _, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return nil, fmt.Errorf("no answer from manad within %v", replyTimeout)
		case errors.Is(err, unix.ECONNRESET):
			return nil, errClosed
		case err != nil:
			return nil, err
		case n == 0:
			return nil, errClosed
		case flags&unix.MSG_TRUNC != 0:
			return nil, fmt.Errorf("reply datagram larger than %d bytes", len(c.buf))
		}
		return append([]byte(nil), c.buf[:n]...), nil
	}
}

// next returns the next reply message, reading a datagram when none is pending.
func (c *rawConn) next() (rawMsg, error) {
	for len(c.pending) == 0 {
		d, err := c.recvDatagram()
		if err != nil {
			return rawMsg{}, err
		}
		msgs, err := parseReply(d)
		if err != nil {
			return rawMsg{}, fmt.Errorf("malformed reply datagram %x: %w", head(d), err)
		}
		c.pending = msgs
	}
	m := c.pending[0]
	c.pending = c.pending[1:]
	return m, nil
}

// roundTrip sends one datagram and returns the messages of its first reply datagram.
func (c *rawConn) roundTrip(d []byte) ([]rawMsg, error) {
	if err := c.send(d); err != nil {
		return nil, err
	}
	b, err := c.recvDatagram()
	if err != nil {
		return nil, err
	}
	return parseReply(b)
}

// sentinel is the datagram sent after each datagram under test: SET_OPTION requests that put
// NETLINK_EXT_ACK and NETLINK_CAP_ACK back to a new connection's defaults (a mutated request may
// have changed them; without NLM_F_ACK they succeed silently), then nlctrl CTRL_CMD_GETFAMILY for
// "manad", whose single reply marks the end of the answers to what came before. manadID 0 leaves
// out the SET_OPTIONs.
func sentinel(seq uint32, manadID uint16) []byte {
	get := genlmsg(nlctrlID, fRequest, seq, unix.CTRL_CMD_GETFAMILY, 1, strA(unix.CTRL_ATTR_FAMILY_NAME, "manad"))
	if manadID == 0 {
		return get
	}
	return cat(
		genlmsg(manadID, fRequest, seq, genlCmdSetOption, 1, u32a(genlAttrOption, unix.NETLINK_EXT_ACK), u8a(genlAttrOptionValue, 1)),
		genlmsg(manadID, fRequest, seq, genlCmdSetOption, 1, u32a(genlAttrOption, unix.NETLINK_CAP_ACK), u8a(genlAttrOptionValue, 0)),
		get)
}

// Numbers of the manad family used by the sentinel (wire.CmdSetOption, wire.AttrOption,
// wire.AttrOptionValue).
const (
	genlCmdSetOption    = 12
	genlAttrOption      = 10
	genlAttrOptionValue = 11
)

// exchange sends datagram d, then the sentinel, and returns every message manad sent before
// the sentinel's reply. closed reports that manad closed the connection instead (the messages
// received before that are returned).
func (c *rawConn) exchange(d []byte, sentinelSeq uint32) (replies []rawMsg, closed bool, err error) {
	sent := sentinel(sentinelSeq, c.manadID)
	if err := c.send(d); err != nil {
		if errors.Is(err, errClosed) {
			return nil, true, nil
		}
		return nil, false, err
	}
	if err := c.send(sent); err != nil {
		if errors.Is(err, errClosed) {
			replies, err = c.drain()
			return replies, true, err
		}
		return nil, false, err
	}
	for {
		m, err := c.next()
		if errors.Is(err, errClosed) {
			return replies, true, nil
		}
		if err != nil {
			return replies, false, err
		}
		if m.Type == nlctrlID && m.Seq == sentinelSeq && m.Flags&fMulti == 0 {
			if len(c.pending) != 0 {
				return replies, false, fmt.Errorf("%d messages after the sentinel's reply", len(c.pending))
			}
			return replies, false, nil
		}
		replies = append(replies, m)
	}
}

// drain reads what is left before EOF.
func (c *rawConn) drain() ([]rawMsg, error) {
	var out []rawMsg
	for {
		m, err := c.next()
		if errors.Is(err, errClosed) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// head returns at most the first 64 bytes of b, for messages.
func head(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// familyInfo is a family as nlctrl describes it.
type familyInfo struct {
	ID    uint16
	Admin map[uint8]bool // command → needs GENL_UNS_ADMIN_PERM
	Ops   map[uint8]bool // commands that exist
}

// resolveFamily asks manad's nlctrl for a family by name.
func (c *rawConn) resolveFamily(name string, seq uint32) (familyInfo, error) {
	msgs, err := c.roundTrip(genlmsg(nlctrlID, fRequest, seq, unix.CTRL_CMD_GETFAMILY, 1, strA(unix.CTRL_ATTR_FAMILY_NAME, name)))
	if err != nil {
		return familyInfo{}, err
	}
	if len(msgs) != 1 || msgs[0].Type != nlctrlID {
		return familyInfo{}, fmt.Errorf("GETFAMILY %s: unexpected reply %+v", name, msgs)
	}
	f := familyInfo{Admin: map[uint8]bool{}, Ops: map[uint8]bool{}}
	forAttrs(msgs[0].Body[genlHdrLen:], func(t uint16, p []byte) {
		switch t {
		case unix.CTRL_ATTR_FAMILY_ID:
			f.ID = ne.Uint16(p)
		case unix.CTRL_ATTR_OPS:
			forAttrs(p, func(_ uint16, op []byte) {
				var id, flags uint32
				forAttrs(op, func(t uint16, v []byte) {
					switch t {
					case unix.CTRL_ATTR_OP_ID:
						id = ne.Uint32(v)
					case unix.CTRL_ATTR_OP_FLAGS:
						flags = ne.Uint32(v)
					}
				})
				f.Ops[uint8(id)] = true
				f.Admin[uint8(id)] = flags&unix.GENL_UNS_ADMIN_PERM != 0
			})
		}
	})
	if f.ID == 0 || len(f.Ops) == 0 {
		return f, fmt.Errorf("GETFAMILY %s: no id or ops in the reply", name)
	}
	return f, nil
}

// forAttrs calls f for each attribute of b (type without flag bits).
func forAttrs(b []byte, f func(t uint16, payload []byte)) {
	for len(b) >= 4 {
		l := int(ne.Uint16(b))
		if l < 4 || l > len(b) {
			return
		}
		f(ne.Uint16(b[2:])&nlaTypeMask, b[4:l])
		b = b[min(align4(l), len(b)):]
	}
}
