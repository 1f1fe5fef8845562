package nlbridge

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// The bridge's own requests to manad carry this nlmsg_pid (manad echoes it), so that their
// answers are told from the program's (nlmsg_pid = the kernel socket's port id) and from
// notifications (0). A port id is never this value: autobind hands out negative ids from -4096
// down, and a program binding this pid explicitly would only confuse itself.
const bridgePID = 0xfffffffe

// call is one request the bridge made to manad on its own behalf, answered through the manad
// reader.
type call struct {
	msgs [][]byte
	done chan error // buffered: the terminal result
}

// dgram is a datagram connection used synchronously during Open.
type dgram interface {
	send(b []byte) error
	recv(deadline time.Time) ([]byte, error)
}

type kernelDgram struct{ k *ksock }

func (d *kernelDgram) send(b []byte) error { return d.k.send(b) }
func (d *kernelDgram) recv(dl time.Time) ([]byte, error) {
	_ = d.k.f.SetReadDeadline(dl)
	defer d.k.f.SetReadDeadline(time.Time{})
	for {
		b, group, err := d.k.recv()
		if err != nil || group == 0 {
			return b, err
		}
	}
}

type manadDgram struct{ c *net.UnixConn }

func (d *manadDgram) send(b []byte) error { _, err := d.c.Write(b); return err }
func (d *manadDgram) recv(dl time.Time) ([]byte, error) {
	_ = d.c.SetReadDeadline(dl)
	defer d.c.SetReadDeadline(time.Time{})
	buf := make([]byte, 1<<16)
	n, err := d.c.Read(buf)
	if err == nil && n == 0 {
		err = io.EOF
	}
	return buf[:n], err
}

// request builds one generic netlink request.
func buildReq(typ uint16, flags uint16, seq, pid uint32, cmd, version uint8, attrs func(b *nlattr.Builder)) []byte {
	var b nlattr.Builder
	start := b.BeginMsg(typ, nlattr.FlagRequest|flags, seq, pid)
	b.Genl(cmd, version)
	if attrs != nil {
		attrs(&b)
	}
	b.EndMsg(start)
	return b.B
}

// exchange sends req and collects the messages answering it (by seq) until its NLMSG_ERROR or
// NLMSG_DONE; an error answer is a *client.Error.
func exchange(c dgram, req []byte, seq uint32, dl time.Time) ([][]byte, error) {
	out, err := exchangeBatch(c, [][]byte{req}, dl)
	return out[seq], err
}

// exchangeBatch sends reqs in one datagram (answered in order, as netlink_rcv_skb serves a
// datagram) and collects the answers of each, by seq, until every one has ended; the error is the
// first request's that failed (a *client.Error).
func exchangeBatch(c dgram, reqs [][]byte, dl time.Time) (map[uint32][][]byte, error) {
	var d []byte
	pending := map[uint32]bool{}
	var order []uint32
	for _, r := range reqs {
		h, _ := nlattr.ReadHeader(r)
		pending[h.Seq] = true
		order = append(order, h.Seq)
		d = appendMsg(d, r)
	}
	if err := c.send(d); err != nil {
		return nil, err
	}
	out := map[uint32][][]byte{}
	errs := map[uint32]error{}
	for len(pending) > 0 {
		d, err := c.recv(dl)
		if err != nil {
			return nil, err
		}
		msgs, _ := splitMsgs(d)
		for _, m := range msgs {
			h, _ := nlattr.ReadHeader(m)
			if !pending[h.Seq] {
				continue
			}
			switch h.Type {
			case nlattr.MsgError, nlattr.MsgDone:
				errs[h.Seq] = answerErr(m)
				delete(pending, h.Seq)
			default:
				out[h.Seq] = append(out[h.Seq], append([]byte(nil), m...))
			}
		}
	}
	for _, seq := range order {
		if errs[seq] != nil {
			return out, errs[seq]
		}
	}
	return out, nil
}

// manadReq builds a request of the bridge's own to manad, with a fresh seq.
func (s *Socket) manadReq(typ uint16, cmd uint8, flags uint16, attrs func(b *nlattr.Builder)) (req []byte, seq uint32) {
	seq = s.seq.Add(1)
	return buildReq(typ, flags, seq, bridgePID, cmd, wire.FamilyVersion, attrs), seq
}

// setOptionReq is manad's SET_OPTION request for a NETLINK_* option.
func (s *Socket) setOptionReq(opt uint32, on bool) []byte {
	v := uint8(0)
	if on {
		v = 1
	}
	req, _ := s.manadReq(s.mManad, wire.CmdSetOption, nlattr.FlagAck, func(b *nlattr.Builder) {
		b.PutU32(wire.AttrOption, opt)
		b.PutU8(wire.AttrOptionValue, v)
	})
	return req
}

// prepareManad sets a new manad connection up for the program before its reader runs, in one
// round trip: the program's NETLINK_EXT_ACK and NETLINK_CAP_ACK (the kernel's defaults at Open:
// manad's own default is extended ACKs on), the groups to join, and the port cache.
func (s *Socket) prepareManad(mc *manadConn, dl time.Time, extAck, capAck bool, groups []uint32) error {
	reqs := [][]byte{s.setOptionReq(unix.NETLINK_EXT_ACK, extAck), s.setOptionReq(unix.NETLINK_CAP_ACK, capAck)}
	for _, g := range groups {
		req, _ := s.manadReq(s.mManad, wire.CmdGroupJoin, nlattr.FlagAck, func(b *nlattr.Builder) { b.PutU32(wire.AttrGroup, g) })
		reqs = append(reqs, req)
	}
	ports, seq := s.manadReq(s.mManad, wire.CmdPortGet, nlattr.FlagDump, nil)
	reqs = append(reqs, ports)
	out, err := exchangeBatch(&manadDgram{c: mc.c}, reqs, dl)
	if err != nil {
		return fmt.Errorf("nlbridge: prepare the manad connection: %w", err)
	}
	return s.cache.load(func() ([][]byte, error) { return out[seq], nil })
}

// answerErr turns a terminal NLMSG_ERROR or NLMSG_DONE into nil or a *client.Error.
func answerErr(m []byte) error {
	errno, ok := errnoOf(m)
	if !ok {
		return fmt.Errorf("nlbridge: truncated netlink answer: %w", unix.EINVAL)
	}
	if errno == 0 {
		return nil
	}
	return &client.Error{Errno: errno, Message: extackMsg(m)}
}

// dumpFamilies lists the families nlctrl reports (CTRL_CMD_GETFAMILY dump).
func dumpFamilies(c dgram, dl time.Time) ([]famInfo, error) {
	const seq = 1
	req := buildReq(unix.GENL_ID_CTRL, nlattr.FlagDump, seq, 0, unix.CTRL_CMD_GETFAMILY, 1, nil)
	msgs, err := exchange(c, req, seq, dl)
	if err != nil {
		return nil, err
	}
	var out []famInfo
	for _, m := range msgs {
		if f, ok := parseFamily(m); ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// parseFamily reads a CTRL_CMD_NEWFAMILY message.
func parseFamily(m []byte) (famInfo, bool) {
	if cmd, ok := genlCmd(m); !ok || cmd != unix.CTRL_CMD_NEWFAMILY {
		return famInfo{}, false
	}
	id := genlAttr(m, unix.CTRL_ATTR_FAMILY_ID)
	name := genlAttr(m, unix.CTRL_ATTR_FAMILY_NAME)
	if len(id.Data) < 2 || !name.Present() {
		return famInfo{}, false
	}
	f := famInfo{id: id.U16(), name: name.Str(), groups: map[string]uint32{}}
	for it := nlattr.NestedIter(m, genlAttr(m, unix.CTRL_ATTR_MCAST_GROUPS)); it.Next(); {
		g := it.Attr()
		gid, ok := u32Of(nestedAttr(m, g, unix.CTRL_ATTR_MCAST_GRP_ID))
		gname := nestedAttr(m, g, unix.CTRL_ATTR_MCAST_GRP_NAME)
		if ok && gname.Present() {
			f.groups[gname.Str()] = gid
		}
	}
	return f, true
}

// manadCall makes a request to manad on the bridge's behalf and waits (at most callTimeout) for
// the manad reader to deliver its answer.
func (s *Socket) manadCall(typ uint16, cmd uint8, flags uint16, attrs func(b *nlattr.Builder)) ([][]byte, error) {
	if s.manadDead.Load() {
		return nil, s.deadError()
	}
	version := uint8(wire.FamilyVersion)
	if typ == s.mNetdev {
		version = wire.NetdevFamilyVersion
	}
	seq := s.seq.Add(1)
	c := &call{done: make(chan error, 1)}
	s.callMu.Lock()
	s.calls[seq] = c
	s.callMu.Unlock()
	defer func() {
		s.callMu.Lock()
		delete(s.calls, seq)
		s.callMu.Unlock()
	}()
	if _, err := s.manad().c.Write(buildReq(typ, flags, seq, bridgePID, cmd, version, attrs)); err != nil {
		return nil, err
	}
	t := time.NewTimer(callTimeout)
	defer t.Stop()
	select {
	case err := <-c.done:
		return c.msgs, err
	case <-t.C:
		return nil, fmt.Errorf("nlbridge: manad did not answer within %v: %w", callTimeout, unix.ETIMEDOUT)
	case <-s.done:
		return nil, errClosed
	}
}

// callAnswer hands one of manad's messages for the bridge to its call; the manad reader calls it.
func (s *Socket) callAnswer(m []byte, h nlattr.Header) {
	s.callMu.Lock()
	c := s.calls[h.Seq]
	s.callMu.Unlock()
	if c == nil {
		return // answered after its caller gave up
	}
	switch h.Type {
	case nlattr.MsgError, nlattr.MsgDone:
		c.done <- answerErr(m)
		s.callMu.Lock()
		delete(s.calls, h.Seq)
		s.callMu.Unlock()
	default:
		c.msgs = append(c.msgs, append([]byte(nil), m...))
	}
}

// failCalls ends every call waiting for manad with err.
func (s *Socket) failCalls(err error) {
	if err == nil {
		err = errors.New("nlbridge: manad connection closed")
	}
	s.callMu.Lock()
	defer s.callMu.Unlock()
	for seq, c := range s.calls {
		select {
		case c.done <- err:
		default:
		}
		delete(s.calls, seq)
	}
}
