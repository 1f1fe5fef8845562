package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// Capture is a running capture of a port or wire segment (StartCapture), on a connection of its
// own: Next returns the frames as manad sends them, Stop ends the capture and returns the frames
// still queued and the counters. It is not safe for concurrent use.
type Capture struct {
	conn *genetlink.Conn
	sock *unixSocket
	fam  uint16
	info wire.CaptureInfo

	pending []wire.CaptureFrame // frames read while waiting for a reply
	done    bool
	ended   error             // the end notice, once read (ErrCaptureEnded)
	endStat wire.CaptureStats // its counters
}

// ErrCaptureEnded is what Next returns, wrapped with the reason, after the last frame of a
// capture that ended by itself (its port was deleted, manad is stopping); Stop then returns the
// counters manad sent with it.
var ErrCaptureEnded = errors.New("capture ended")

// StartCapture starts capturing what r.Target, a port or a segment name, carries (CAPTURE_START,
// admin only). Errors: an *Error wrapping EPERM for a caller that is not an admin, ENOENT when
// manad has no port or segment of that name, EBUSY or EUSERS past the capture limits, EINVAL for
// a direction on a segment; EOPNOTSUPP on a kernel client.
func (c *Client) StartCapture(ctx context.Context, r wire.CaptureRequest) (*Capture, error) {
	if c.fams.manad == nil {
		return nil, errManadOnly("StartCapture")
	}
	conn, fams, sock, err := c.connect()
	if err != nil {
		return nil, err
	}
	cp := &Capture{conn: conn, sock: sock, fam: fams.manad.ID}
	var b nlattr.Builder
	wire.CaptureRequestTable.Put(&b, &r)
	var info wire.CaptureInfo
	err = cp.request(ctx, wire.CmdCaptureStart, b.B, func(data []byte) error {
		return wire.CaptureInfoTable.Decode(data, &info)
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	cp.info = info
	return cp, nil
}

// Info says what the capture's target resolved to: the name, "port" or "segment", and the
// snapshot length.
func (cp *Capture) Info() wire.CaptureInfo { return cp.info }

// Next waits for the next frames. It returns an error wrapping ctx.Err() when ctx ends, and one
// wrapping io.EOF when manad closed the connection.
func (cp *Capture) Next(ctx context.Context) ([]wire.CaptureFrame, error) {
	if len(cp.pending) > 0 {
		f := cp.pending
		cp.pending = nil
		return f, nil
	}
	if cp.ended != nil {
		return nil, cp.ended
	}
	if cp.done {
		return nil, fmt.Errorf("client: capture stopped: %w", unix.EBADF)
	}
	var out []wire.CaptureFrame
	for len(out) == 0 && cp.ended == nil {
		msgs, err := cp.receive(ctx)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			f, ok, err := cp.frame(m)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		return nil, cp.ended
	}
	return out, nil
}

// Stop ends the capture (CAPTURE_STOP) and returns the frames manad still sent before its reply,
// and its counters; it closes the connection. Give it a context of its own: the one that ended
// the capture (an interrupt) has ended already.
func (cp *Capture) Stop(ctx context.Context) ([]wire.CaptureFrame, wire.CaptureStats, error) {
	defer cp.Close()
	var st wire.CaptureStats
	if cp.ended != nil {
		// manad ended it and sent its counters; a STOP now would be ENOENT.
		rest := cp.pending
		cp.pending = nil
		return rest, cp.endStat, nil
	}
	if cp.done {
		return nil, st, fmt.Errorf("client: capture stopped: %w", unix.EBADF)
	}
	err := cp.request(ctx, wire.CmdCaptureStop, nil, func(data []byte) error {
		return eachAttr(data, func(a nlattr.Attr) error {
			if a.Type() == wire.AttrCaptureStats {
				return wire.CaptureStatsTable.Decode(a.Data, &st)
			}
			return nil
		})
	})
	if cp.ended != nil && errors.Is(err, unix.ENOENT) {
		err, st = nil, cp.endStat // it ended by itself before the STOP arrived
	}
	rest := cp.pending
	cp.pending = nil
	return rest, st, err
}

// Close closes the capture's connection, which ends the capture without its counters.
func (cp *Capture) Close() error {
	if cp.done {
		return nil
	}
	cp.done = true
	return cp.conn.Close()
}

// request sends a capture command with NLM_F_ACK and reads up to its ACK, handing its reply's
// attributes to reply and keeping the frames that arrive meanwhile (they are sent by another
// goroutine of manad's and may come before or after the reply) for Next.
func (cp *Capture) request(ctx context.Context, cmd uint8, attrs []byte, reply func(data []byte) error) error {
	gm, err := (genetlink.Message{Header: genetlink.Header{Command: cmd, Version: wire.FamilyVersion}, Data: attrs}).MarshalBinary()
	if err != nil {
		return err
	}
	seq := cp.sock.seq.Add(1)
	m := netlink.Message{Header: netlink.Header{
		Length: uint32(nlattr.Align(nlattr.MsgHdrLen + len(gm))), Type: netlink.HeaderType(cp.fam),
		Flags: netlink.Request | netlink.Acknowledge, Sequence: seq, PID: cp.sock.pid,
	}, Data: gm}
	if err := cp.sock.Send(m); err != nil {
		return fmt.Errorf("client: capture: %w", err)
	}
	for {
		msgs, err := cp.receive(ctx)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			switch {
			case m.Header.Type == netlink.Error && m.Header.Sequence == seq:
				return ackError(m)
			case m.Header.Sequence == seq && uint16(m.Header.Type) == cp.fam && len(m.Data) >= nlattr.GenlHdrLen && m.Data[0] == cmd:
				if err := reply(m.Data[nlattr.GenlHdrLen:]); err != nil {
					return fmt.Errorf("client: capture reply: %w", err)
				}
			default:
				f, ok, err := cp.frame(m)
				if err != nil {
					return err
				}
				if ok {
					cp.pending = append(cp.pending, f)
				}
			}
		}
	}
}

// frame decodes a CAPTURE_FRAME message; ok is false for any other message manad may send
// (none today), which is skipped.
func (cp *Capture) frame(m netlink.Message) (f wire.CaptureFrame, ok bool, err error) {
	if m.Header.Type == netlink.Error {
		// Not the ACK of a request of ours: manad answered something it could not parse.
		return f, false, ackError(m)
	}
	if uint16(m.Header.Type) != cp.fam || len(m.Data) < nlattr.GenlHdrLen {
		return f, false, nil
	}
	if m.Data[0] == wire.CmdCaptureStop && m.Header.Sequence == 0 {
		return f, false, cp.endNotice(m.Data[nlattr.GenlHdrLen:])
	}
	if m.Data[0] != wire.CmdCaptureFrame {
		return f, false, nil
	}
	err = eachAttr(m.Data[nlattr.GenlHdrLen:], func(a nlattr.Attr) error {
		if a.Type() == wire.AttrCaptureFrame {
			ok = true
			return wire.CaptureFrameTable.Decode(a.Data, &f)
		}
		return nil
	})
	if err != nil {
		return f, false, fmt.Errorf("client: capture frame: %w", err)
	}
	return f, ok, nil
}

// endNotice records manad's notice that the capture ended by itself: its counters and reason.
func (cp *Capture) endNotice(data []byte) error {
	reason := "ended by manad"
	err := eachAttr(data, func(a nlattr.Attr) error {
		switch a.Type() {
		case wire.AttrCaptureStats:
			return wire.CaptureStatsTable.Decode(a.Data, &cp.endStat)
		case wire.AttrCaptureEnd:
			reason = a.Str()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("client: capture end notice: %w", err)
	}
	cp.ended = fmt.Errorf("%s: %w", reason, ErrCaptureEnded)
	return nil
}

// receive reads one datagram, within ctx.
func (cp *Capture) receive(ctx context.Context) ([]netlink.Message, error) {
	dl, _ := ctx.Deadline()
	if err := cp.sock.SetReadDeadline(dl); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = cp.sock.SetReadDeadline(time.Unix(1, 0)) })
	msgs, err := cp.sock.Receive()
	stop()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("client: capture: %w", cerr)
		}
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) && errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("client: capture: %w", context.DeadlineExceeded)
		}
		return nil, err
	}
	return msgs, nil
}
