package genl

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/transport"
)

// defaultDumpBudget is how many bytes of dump messages go into one datagram at most.
const defaultDumpBudget = 16 << 10

// Server answers nlctrl, ethtool, manad and netdev generic netlink requests
// as the kernel does, and builds their notifications. It carries them over
// its transport.Server (listening, credentials, admission, busy polling,
// writing and notification fan-out), which calls it as its Handler. A Server
// is safe for concurrent use.
type Server struct {
	cfg        ServerConfig
	t          *transport.Server
	noOps      map[string]bool // the Backend's nil ops, by field name (nilOps)
	log        *slog.Logger
	families   map[uint16]*family
	ethtoolSeq atomic.Uint32 // ethnl_bcast_seq
	manadSeq   atomic.Uint32
	// notifyMu keeps the notifications in the order of their sequence numbers: a
	// notification is numbered, built and broadcast under it.
	notifyMu   sync.Mutex
	dumpBudget int
	global     globalStrings
	strsets    strsetCache
	featIdx    featureIndex // the kernel's feature names' bits (ethtool_features.go)

	captures captureAdmission // running captures by uid (manad_capture.go)
}

// BusyPollStats counts the request loops' busy polls (transport.Config.BusyPoll).
type BusyPollStats = transport.BusyPollStats

// BusyPolls returns the counts of the request loops' busy polls since the server started.
func (s *Server) BusyPolls() BusyPollStats { return s.t.BusyPolls() }

// NewServer checks cfg and returns a Server with its transport. It fails with
// EINVAL when cfg.Backend lacks a device lookup (Devices, DeviceByIndex,
// DeviceByName) or a limit is out of range (transport.New).
func NewServer(cfg ServerConfig) (*Server, error) {
	noOps := nilOps(&cfg.Backend)
	for _, op := range []string{"Devices", "DeviceByIndex", "DeviceByName"} {
		if noOps[op] {
			return nil, fmt.Errorf("genl: ServerConfig.Backend.%s is nil: %w", op, unix.EINVAL)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:        cfg,
		noOps:      noOps,
		log:        cfg.Logger,
		dumpBudget: defaultDumpBudget,
	}
	tcfg := cfg.Transport
	tcfg.Handler = s
	if tcfg.Logger == nil {
		tcfg.Logger = cfg.Logger
	}
	if tcfg.Observer == nil && cfg.Observer != nil {
		tcfg.Observer = cfg.Observer
	}
	t, err := transport.New(tcfg)
	if err != nil {
		return nil, err
	}
	s.t = t
	s.families = map[uint16]*family{}
	for _, f := range []*family{nlctrlFamily(), ethtoolFamily(), manadFamily(), netdevFamily()} {
		s.families[f.id] = f
	}
	return s, nil
}

// nilOps returns the names of b's nil ops. The ops a message calls are named
// in its op (op.driver); the manad family's commands check them here, once,
// rather than each handler comparing its func with nil.
func nilOps(b *Backend) map[string]bool {
	v := reflect.ValueOf(b).Elem()
	out := map[string]bool{}
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Func && f.IsNil() {
			out[v.Type().Field(i).Name] = true
		}
	}
	return out
}

// Serve serves the families on l until ctx ends or l is closed, as
// transport.Server.Serve: it then closes every connection, waits for their
// goroutines and returns nil; other accept failures are returned. The
// kernel's global string tables are read meanwhile, rather than on the first
// STRSET_GET (see globalStrings).
func (s *Server) Serve(ctx context.Context, l *net.UnixListener) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.globalSet(0)
	}()
	err := s.t.Serve(ctx, l)
	wg.Wait()
	return err
}

// Open is the transport's Handler: it returns the protocol's state of the
// new connection c.
func (s *Server) Open(c *transport.Conn) transport.Session { return newConn(s, c) }

// conn is the protocol's side of one client connection (a transport.Session):
// its socket options and the request loop's scratch buffer.
type conn struct {
	s      *Server
	t      *transport.Conn
	caller Caller
	ctx    context.Context // the connection's: cancelled when it closes
	// maxReply is the largest datagram this connection can send (transport.Config.MaxReply).
	maxReply int

	// Owned by the request loop.
	extAck, capAck bool
	scratch        nlattr.Builder

	cap captureSlot // the connection's capture (manad_capture.go)
}

func newConn(s *Server, t *transport.Conn) *conn {
	return &conn{s: s, t: t, caller: t.Caller(), ctx: t.Context(), maxReply: t.MaxReply(), extAck: true}
}

// Datagram answers one request datagram (transport.Session).
func (c *conn) Datagram(ctx context.Context, d []byte) { c.s.handleDatagram(ctx, c, d) }

// Busy reports whether a capture runs: the connection is then not idle, though the client
// sends nothing (transport.Session).
func (c *conn) Busy() bool { return c.cap.active() }

// Close waits for the connection's capture writer, if any (transport.Session).
func (c *conn) Close() { c.cap.wait() }

func (c *conn) ackOptions() nlattr.AckOptions {
	return nlattr.AckOptions{ExtAck: c.extAck, CapAck: c.capAck}
}

// send writes one datagram synchronously, within the write deadline; errConnGone when the
// connection is gone.
func (c *conn) send(b []byte) error { return c.t.Send(b) }

// done returns a channel closed when the connection is closed.
func (c *conn) done() <-chan struct{} { return c.t.Done() }

// sendMalformed answers a datagram that holds no complete message.
func (c *conn) sendMalformed(d []byte, msg string) {
	c.s.observer().Request("unknown", "unknown", unix.EINVAL)
	hdr := make([]byte, nlattr.MsgHdrLen)
	copy(hdr, d)
	h, _ := nlattr.ReadHeader(hdr)
	// Echo only what was understood: a 16-byte header.
	hdr[0], hdr[1], hdr[2], hdr[3] = nlattr.MsgHdrLen, 0, 0, 0
	e := &nlattr.Error{Errno: unix.EINVAL, Message: msg}
	_ = c.send(nlattr.AppendAck(nil, hdr, h.PID, e.Errno, e, c.ackOptions()))
}

// Oversize answers a datagram longer than MaxMessage (the excess was already discarded by the
// socket) with EMSGSIZE, honouring the connection's ACK options like any other reply
// (transport.Session).
func (c *conn) Oversize(_ context.Context, d []byte, limit int) {
	c.s.observer().Request("unknown", "unknown", unix.EMSGSIZE)
	hdr := make([]byte, nlattr.MsgHdrLen)
	copy(hdr, d)
	h, _ := nlattr.ReadHeader(hdr)
	hdr[0], hdr[1], hdr[2], hdr[3] = nlattr.MsgHdrLen, 0, 0, 0
	e := nlattr.Errorf(unix.EMSGSIZE, "request datagram exceeds the %d-byte limit", limit)
	_ = c.send(nlattr.AppendAck(nil, hdr, h.PID, e.Errno, e, c.ackOptions()))
}
