// Package client is the Go client of manad's generic netlink families. Its
// typed methods speak the kernel's ethtool netlink protocol, so the same
// code (and the same decoders) work against manad over its Unix socket
// (Dial) and against the kernel's own ethtool family for real NICs
// (DialKernel). The manad-family methods work only with Dial.
//
// It is built on mdlayher/netlink and mdlayher/genetlink: with Dial, a
// netlink.Conn runs over a SOCK_SEQPACKET connection (see socket.go).
//
// Errors from a request are *Error, which unwraps to the unix.Errno the
// server sent (errors.Is(err, unix.ENODEV)) and carries its extack message
// and offset. A cancelled or expired context gives an error wrapping
// ctx.Err().
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/genl/wire"
)

// DefaultPath is manad's default socket.
const DefaultPath = "/run/manad/manad.sock"

// dialTimeout bounds the family lookups done by Dial and DialKernel.
const dialTimeout = 5 * time.Second

// Interface selects a network interface by index, name, or both (then they
// must agree), as in mdlayher/ethtool.
type Interface struct {
	Index int
	Name  string
}

// Error is a request that the server (manad or the kernel) answered with an error: manad's one
// error type (genl/nlerr), with the errno, the extack message (NLMSGERR_ATTR_MSG) and the offset
// of the offending attribute in the request (NLMSGERR_ATTR_OFFS) when the server sent them. It
// unwraps to the errno.
type Error = nlerr.Error

// Client is a connection to manad or to the kernel's ethtool family. It is
// safe for concurrent use; requests are serialized.
type Client struct {
	path   string // "" for the kernel
	mu     sync.Mutex
	conn   *genetlink.Conn
	sock   *unixSocket // conn's socket; nil for the kernel
	fams   families
	broken bool // a request was abandoned mid-way: redial before the next
	// lastAnswer is when manad last answered on conn: within peerCheckAfter of it, the
	// connection cannot have been closed for idleness, and execute skips peerClosed.
	lastAnswer time.Time
}

// peerCheckAfter is how long after manad's last answer execute first checks whether manad closed
// the connection meanwhile: well below manad's shortest idle_timeout (1s), so that a request made
// within it finds the connection open, and a request then saves the check's system call.
const peerCheckAfter = 100 * time.Millisecond

type families struct {
	ethtool genetlink.Family
	manad   *genetlink.Family // nil on the kernel
	netdev  uint16            // the netdev family's id once resolved (netdevExec); 0 before
}

// Dial connects to manad at path (DefaultPath if empty) and resolves the
// ethtool and manad families through its nlctrl. When manad is not running
// the error reads "cannot connect to manad at PATH: …" and wraps the
// underlying errno (ENOENT, ECONNREFUSED, EACCES).
func Dial(path string) (*Client, error) {
	if path == "" {
		path = DefaultPath
	}
	c := &Client{path: path}
	conn, fams, sock, err := c.connect()
	if err != nil {
		return nil, err
	}
	c.conn, c.fams, c.sock = conn, fams, sock
	return c, nil
}

// DialKernel connects to the kernel's generic netlink and resolves its
// ethtool family. Only the ethtool methods work; manad-family methods fail
// with an error wrapping EOPNOTSUPP.
func DialKernel() (*Client, error) {
	c := &Client{}
	conn, fams, _, err := c.connect()
	if err != nil {
		return nil, err
	}
	c.conn, c.fams = conn, fams
	return c, nil
}

// DialGenetlink returns a plain genetlink.Conn over manad's socket at path
// (DefaultPath if empty), for raw generic netlink requests with
// mdlayher/genetlink. Its JoinGroup, LeaveGroup and SetOption work: they are
// carried as manad-family requests (GROUP_JOIN, GROUP_LEAVE, SET_OPTION),
// and must not run while another goroutine is blocked receiving on it.
func DialGenetlink(path string) (*genetlink.Conn, error) {
	if path == "" {
		path = DefaultPath
	}
	uc, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to manad at %s: %w", path, err)
	}
	pid := uint32(os.Getpid())
	sock, err := newUnixSocket(uc, pid)
	if err != nil {
		uc.Close()
		return nil, err
	}
	conn := genetlink.NewConn(netlink.NewConn(sock, pid))
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	f, err := conn.GetFamily(wire.FamilyName)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("client: resolve the %q family: %w", wire.FamilyName, wrapErr(err))
	}
	sock.manadFamily.Store(uint32(f.ID))
	if err := conn.SetDeadline(time.Time{}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// connect opens a new connection and resolves the families; sock is nil for the kernel.
func (c *Client) connect() (conn *genetlink.Conn, fams families, sock *unixSocket, err error) {
	if c.path == "" {
		conn, err = genetlink.Dial(&netlink.Config{Strict: true})
		if err != nil {
			return nil, families{}, nil, fmt.Errorf("client: dial kernel generic netlink: %w", err)
		}
	} else {
		uc, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: c.path, Net: "unixpacket"})
		if err != nil {
			return nil, families{}, nil, fmt.Errorf("cannot connect to manad at %s: %w", c.path, err)
		}
		pid := uint32(os.Getpid())
		if sock, err = newUnixSocket(uc, pid); err != nil {
			uc.Close()
			return nil, families{}, nil, err
		}
		conn = genetlink.NewConn(netlink.NewConn(sock, pid))
	}
	fail := func(err error) (*genetlink.Conn, families, *unixSocket, error) {
		conn.Close()
		return nil, families{}, nil, err
	}
	if err := conn.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
		return fail(err)
	}
	if fams.ethtool, err = conn.GetFamily(ethtool.FamilyName); err != nil {
		return fail(fmt.Errorf("client: resolve the %q family: %w", ethtool.FamilyName, wrapErr(err)))
	}
	if sock != nil {
		f, err := conn.GetFamily(wire.FamilyName)
		if err != nil {
			return fail(fmt.Errorf("client: resolve the %q family: %w", wire.FamilyName, wrapErr(err)))
		}
		fams.manad = &f
		sock.manadFamily.Store(uint32(f.ID))
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fail(err)
	}
	return conn, fams, sock, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return nil // already closed when the request was abandoned
	}
	return c.conn.Close()
}

// Kernel reports whether the client talks to the kernel rather than manad.
func (c *Client) Kernel() bool { return c.path == "" }

// EthtoolFamily returns the resolved ethtool family (id and groups).
func (c *Client) EthtoolFamily() genetlink.Family { return c.fams.ethtool }

// wrapErr turns a netlink error reply into an *Error.
func wrapErr(err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	var oe *netlink.OpError
	if errors.As(err, &oe) {
		var errno unix.Errno
		if errors.As(oe.Err, &errno) {
			return &Error{Errno: errno, Message: oe.Message, Offset: oe.Offset}
		}
	}
	return err
}

// errManadOnly is what manad-family methods return on a kernel client.
func errManadOnly(op string) error {
	return fmt.Errorf("client: %s is a manad request, the kernel has no manad family: %w", op, unix.EOPNOTSUPP)
}

// execute runs one request. The context's deadline becomes the socket
// deadline and its cancellation interrupts the exchange; a request
// interrupted that way leaves the connection to be replaced before the next
// request, so a late reply cannot be mistaken for the next one's.
func (c *Client) execute(ctx context.Context, family uint16, version, cmd uint8, flags netlink.HeaderFlags, attrs []byte) ([]genetlink.Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.broken && c.sock != nil && time.Since(c.lastAnswer) >= peerCheckAfter && c.sock.peerClosed() {
		// manad closed the connection while it was idle (its idle_timeout): nothing was
		// in flight, so a new connection serves this request.
		c.conn.Close()
		c.broken = true
	}
	if c.broken {
		conn, fams, sock, err := c.connect()
		if err != nil {
			return nil, err
		}
		c.conn, c.fams, c.sock, c.broken = conn, fams, sock, false
	}
	dl, _ := ctx.Deadline()
	if err := c.conn.SetDeadline(dl); err != nil {
		return nil, err
	}
	conn := c.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	msgs, err := c.conn.Execute(genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: version},
		Data:   attrs,
	}, family, flags)
	stop()
	if err != nil {
		var oe *netlink.OpError
		if cerr := ctxErr(ctx, err); cerr != nil || (errors.As(err, &oe) && oe.Timeout()) {
			// Close now, so that the server cancels the abandoned request.
			c.broken = true
			c.conn.Close()
			if cerr != nil {
				return nil, fmt.Errorf("client: request abandoned: %w", cerr)
			}
		}
		return nil, wrapErr(err)
	}
	c.lastAnswer = time.Now()
	return msgs, nil
}

// ctxErr returns ctx's error, also when the socket deadline taken from ctx
// fired a moment before the context's own timer.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var oe *netlink.OpError
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) && errors.As(err, &oe) && oe.Timeout() {
		return context.DeadlineExceeded
	}
	return nil
}

// ethtoolExec runs an ethtool-family request.
func (c *Client) ethtoolExec(ctx context.Context, cmd uint8, flags netlink.HeaderFlags, ae *netlink.AttributeEncoder) ([]genetlink.Message, error) {
	data, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return c.execute(ctx, c.fams.ethtool.ID, ethtool.Version, cmd, flags, data)
}

// manadExec runs a manad-family request.
func (c *Client) manadExec(ctx context.Context, op string, cmd uint8, flags netlink.HeaderFlags, ae *netlink.AttributeEncoder) ([]genetlink.Message, error) {
	if c.fams.manad == nil {
		return nil, errManadOnly(op)
	}
	data, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return c.execute(ctx, c.fams.manad.ID, wire.FamilyVersion, cmd, flags, data)
}

// putHeader encodes an ethtool request header (also used by manad requests).
func putHeader(ae *netlink.AttributeEncoder, t uint16, ifi Interface, flags uint32) error {
	if ifi.Index <= 0 && ifi.Name == "" {
		return fmt.Errorf("client: interface needs an index or a name: %w", unix.EINVAL)
	}
	h := wire.Header{Name: ifi.Name, Flags: flags}
	if ifi.Index > 0 {
		h.Index = uint32(ifi.Index)
	}
	putNest(ae, t, wire.HeaderTable, &h)
	return nil
}

// decodeHeader reads a reply header nest at ad's position.
func decodeHeader(ad *netlink.AttributeDecoder) Interface {
	ifi, _ := decodeHeaderAttr(nlattr.Attr{Data: ad.Bytes()})
	return ifi
}

// one returns the only reply of a do request.
func one(msgs []genetlink.Message, what string) (genetlink.Message, error) {
	if len(msgs) != 1 {
		return genetlink.Message{}, fmt.Errorf("client: %s: expected 1 reply, got %d", what, len(msgs))
	}
	return msgs[0], nil
}
