package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/busypoll"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// unixSocket carries netlink messages over a Unix SOCK_SEQPACKET connection
// to manad: one datagram per Send, one datagram per ReceiveIter.
//
// It implements netlink.Socket, which mdlayher/netlink marks deprecated
// ("awkward to use properly"); it is the only way to run netlink.Conn (and so
// genetlink.Conn) over a transport other than AF_NETLINK, so its use is
// confined to this file. netlink is pinned to v1.11.2 in go.mod because the
// interface changed in v1.10 (ReceiveIter) and may change again.
//
// It also provides the optional capabilities netlink.Conn looks for by type
// assertion: JoinGroup/LeaveGroup and SetOption (carried as manad-family
// requests, since a Unix socket has no SOL_NETLINK options) and deadlines.
// JoinGroup, LeaveGroup and SetOption read the socket for their ACK, so they
// must not run while another goroutine is blocked in Receive on the same
// connection; messages they read that are not their ACK are kept, in order,
// for the next Receive.
type unixSocket struct {
	c   *net.UnixConn
	rc  syscall.RawConn
	pid uint32

	manadFamily atomic.Uint32 // for control requests, once resolved
	seq         atomic.Uint32

	rmu     sync.Mutex
	backlog [][]netlink.Message // datagrams read by control requests

	poll time.Duration // how long read polls before it parks: busyPoll, or 0 on one CPU
}

//lint:ignore SA1019 netlink.Socket is the only way to run netlink.Conn over a Unix socket; see the type comment.
var _ netlink.Socket = (*unixSocket)(nil)

func newUnixSocket(c *net.UnixConn, pid uint32) (*unixSocket, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &unixSocket{c: c, rc: rc, pid: pid, poll: busyPoll}
	if busypoll.Pollers() == 0 {
		// One CPU: the reply cannot come while this polls, as manad needs that CPU to send it.
		s.poll = 0
	}
	s.seq.Store(rand.Uint32())
	return s, nil
}

func (s *unixSocket) Close() error { return s.c.Close() }

func (s *unixSocket) Send(m netlink.Message) error {
	return s.SendMessages([]netlink.Message{m})
}

func (s *unixSocket) SendMessages(ms []netlink.Message) error {
	var buf []byte
	for _, m := range ms {
		b, err := m.MarshalBinary()
		if err != nil {
			return err
		}
		buf = append(buf, b...)
	}
	_, err := s.c.Write(buf)
	return err
}

func (s *unixSocket) Receive() ([]netlink.Message, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.next()
}

func (s *unixSocket) ReceiveIter() iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		msgs, err := s.Receive()
		if err != nil {
			yield(netlink.Message{}, err)
			return
		}
		for _, m := range msgs {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// next returns the oldest kept datagram or reads one; s.rmu must be held.
func (s *unixSocket) next() ([]netlink.Message, error) {
	if len(s.backlog) > 0 {
		d := s.backlog[0]
		s.backlog = s.backlog[1:]
		return d, nil
	}
	return s.read()
}

// busyPoll is how long read polls for a datagram before it parks on the runtime's poller. A
// reply to a request manad's request loop was polling for (genl/transport.Config.BusyPoll) comes
// within about this long, and is then read without a wake-up; manad's loop not polling, the
// wake-up it needs is not held back (busypoll yields the CPU between tries). A process with one
// processor does not poll (unixSocket.poll is 0).
const busyPoll = 50 * time.Microsecond

// read receives one datagram, sized with MSG_PEEK|MSG_TRUNC first (as
// mdlayher/netlink does on AF_NETLINK), honouring the read deadline once it parks.
func (s *unixSocket) read() ([]netlink.Message, error) {
	var n int
	var rerr error
	peek := func(fd int, flags int) bool {
		n, _, rerr = unix.Recvfrom(fd, nil, unix.MSG_PEEK|unix.MSG_TRUNC|flags)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	}
	var err error
	if !busypoll.Poll(s.rc, s.poll, busypoll.Threads, func(fd int) bool { return peek(fd, unix.MSG_DONTWAIT) }) {
		err = s.rc.Read(func(fd uintptr) bool { return peek(int(fd), 0) })
	}
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("manad closed the connection: %w", io.EOF)
	}
	buf := make([]byte, nlattr.Align(n))
	got, err := s.c.Read(buf)
	if err != nil {
		return nil, err
	}
	return parseDatagram(buf[:nlattr.Align(got)])
}

// peerClosed reports whether manad has closed the connection: an end of file is waiting
// (manad never sends an empty datagram). It consumes nothing and does not block.
func (s *unixSocket) peerClosed() bool {
	closed := false
	_ = s.rc.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), nil, unix.MSG_PEEK|unix.MSG_TRUNC|unix.MSG_DONTWAIT)
		closed = (err == nil && n == 0) || errors.Is(err, unix.ECONNRESET)
		return true
	})
	return closed
}

// parseDatagram splits a datagram into messages like mdlayher/netlink's
// parser; b must be 4-byte aligned (zero padding is fine).
func parseDatagram(b []byte) ([]netlink.Message, error) {
	var msgs []netlink.Message
	for len(b) >= nlattr.MsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b))
		if l < nlattr.MsgHdrLen || nlattr.Align(l) > len(b) {
			return nil, errors.New("client: malformed netlink message from manad")
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(b[:nlattr.Align(l)]); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
		b = b[nlattr.Align(l):]
	}
	return msgs, nil
}

func (s *unixSocket) SetDeadline(t time.Time) error      { return s.c.SetDeadline(t) }
func (s *unixSocket) SetReadDeadline(t time.Time) error  { return s.c.SetReadDeadline(t) }
func (s *unixSocket) SetWriteDeadline(t time.Time) error { return s.c.SetWriteDeadline(t) }

// JoinGroup subscribes to a multicast group with a manad GROUP_JOIN request.
func (s *unixSocket) JoinGroup(group uint32) error {
	return s.control(wire.CmdGroupJoin, func(ae *netlink.AttributeEncoder) { ae.Uint32(wire.AttrGroup, group) })
}

// LeaveGroup unsubscribes with a manad GROUP_LEAVE request.
func (s *unixSocket) LeaveGroup(group uint32) error {
	return s.control(wire.CmdGroupLeave, func(ae *netlink.AttributeEncoder) { ae.Uint32(wire.AttrGroup, group) })
}

// SetOption sets NETLINK_EXT_ACK, NETLINK_CAP_ACK or NETLINK_GET_STRICT_CHK
// with a manad SET_OPTION request; other options are ENOPROTOOPT, as
// setsockopt would say.
func (s *unixSocket) SetOption(option netlink.ConnOption, enable bool) error {
	var opt uint32
	switch option {
	case netlink.ExtendedAcknowledge:
		opt = unix.NETLINK_EXT_ACK
	case netlink.CapAcknowledge:
		opt = unix.NETLINK_CAP_ACK
	case netlink.GetStrictCheck:
		opt = unix.NETLINK_GET_STRICT_CHK
	default:
		return unix.ENOPROTOOPT
	}
	var v uint8
	if enable {
		v = 1
	}
	return s.control(wire.CmdSetOption, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(wire.AttrOption, opt)
		ae.Uint8(wire.AttrOptionValue, v)
	})
}

// control sends a manad request with NLM_F_ACK and waits for its ACK,
// keeping any other message for later Receive calls.
func (s *unixSocket) control(cmd uint8, attrs func(*netlink.AttributeEncoder)) error {
	fam := uint16(s.manadFamily.Load())
	if fam == 0 {
		return fmt.Errorf("client: manad family not resolved: %w", unix.EOPNOTSUPP)
	}
	ae := netlink.NewAttributeEncoder()
	attrs(ae)
	data, err := ae.Encode()
	if err != nil {
		return err
	}
	gm, err := (genetlink.Message{Header: genetlink.Header{Command: cmd, Version: wire.FamilyVersion}, Data: data}).MarshalBinary()
	if err != nil {
		return err
	}
	seq := s.seq.Add(1)
	m := netlink.Message{Header: netlink.Header{
		Length: uint32(nlattr.Align(nlattr.MsgHdrLen + len(gm))), Type: netlink.HeaderType(fam),
		Flags: netlink.Request | netlink.Acknowledge, Sequence: seq, PID: s.pid,
	}, Data: gm}

	s.rmu.Lock()
	defer s.rmu.Unlock()
	if err := s.Send(m); err != nil {
		return err
	}
	for {
		msgs, err := s.read()
		if err != nil {
			return err
		}
		var rest []netlink.Message
		var ack *netlink.Message
		for i := range msgs {
			if msgs[i].Header.Type == netlink.Error && msgs[i].Header.Sequence == seq && ack == nil {
				ack = &msgs[i]
				continue
			}
			rest = append(rest, msgs[i])
		}
		if len(rest) > 0 {
			s.backlog = append(s.backlog, rest)
		}
		if ack != nil {
			return ackError(*ack)
		}
	}
}

// ackError decodes an NLMSG_ERROR into nil or an *Error carrying the errno
// and extack (netlink.Conn wraps it in a *netlink.OpError naming the
// operation).
func ackError(m netlink.Message) error {
	if len(m.Data) < 4 {
		return errors.New("client: not enough data for netlink error code")
	}
	code := int32(binary.NativeEndian.Uint32(m.Data))
	if code == 0 {
		return nil
	}
	e := &Error{Errno: unix.Errno(-code)}
	if m.Header.Flags&netlink.AcknowledgeTLVs == 0 || len(m.Data) < 4+nlattr.MsgHdrLen {
		return e
	}
	// The TLVs follow the echoed request: its header alone when the ACK is capped (the echoed
	// nlmsg_len still gives the whole request's length), else the whole request (netlink_ack).
	off := 4 + nlattr.MsgHdrLen
	if m.Header.Flags&netlink.Capped == 0 {
		off = 4 + int(binary.NativeEndian.Uint32(m.Data[4:]))
	}
	if off > len(m.Data) {
		return e
	}
	it := nlattr.NewIter(m.Data, off, len(m.Data)-off)
	for it.Next() {
		switch it.Attr().Type() {
		case nlattr.ErrAttrMsg:
			e.Message = it.Attr().Str()
		case nlattr.ErrAttrOffs:
			e.Offset = int(it.Attr().U32())
		case nlattr.ErrAttrPolicy:
			e.Policy = append([]byte(nil), it.Attr().Data...)
		case nlattr.ErrAttrMissType:
			e.MissType = uint16(it.Attr().U32())
		case nlattr.ErrAttrMissNest:
			e.MissNest = int(it.Attr().U32())
		}
	}
	return e
}
