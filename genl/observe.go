package genl

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// Observer is told about the server's control traffic, for metrics. Its methods are called from
// the connections' goroutines, concurrently, and must not block.
type Observer interface {
	// Request reports one completed request message (or a datagram answered as malformed or
	// oversize, as family and command "unknown"): its family and command names, and the
	// errno it was answered with (0 for success; for a dump, the errno NLMSG_DONE carried).
	// Names are those of the served families and commands, or "unknown": a client cannot
	// make up label values.
	Request(family, cmd string, errno unix.Errno)
	// SubscriberDropped reports a connection dropped because it did not read its
	// notifications.
	SubscriberDropped()
}

// nopObserver is the Observer of a server configured without one.
type nopObserver struct{}

func (nopObserver) Request(string, string, unix.Errno) {}
func (nopObserver) SubscriberDropped()                 {}

// observer returns the configured Observer, or one that does nothing.
func (s *Server) observer() Observer {
	if s.cfg.Observer == nil {
		return nopObserver{}
	}
	return s.cfg.Observer
}

// observeRequest reports a request message msg (with header h) that ended with err. A dump
// (dumped) is reported when it finishes instead, with the error its NLMSG_DONE carries.
func (s *Server) observeRequest(h nlattr.Header, msg []byte, err error, dumped bool) {
	if s.cfg.Observer == nil || dumped || h.Flags&nlattr.FlagRequest == 0 || h.Type < nlattr.MsgMinType {
		return
	}
	fam, cmd := "unknown", "unknown"
	if f := s.families[h.Type]; f != nil {
		fam = f.name
		if len(msg) >= nlattr.MsgHdrLen+nlattr.GenlHdrLen {
			cmd = f.cmdName(msg[nlattr.MsgHdrLen])
		}
	}
	s.cfg.Observer.Request(fam, cmd, requestErrno(err))
}

// requestErrno is the errno a request that ended with err was answered with, as toNLError
// finds it, without its logging.
func requestErrno(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var ne *nlattr.Error
	var errno unix.Errno
	switch {
	case errors.As(err, &ne):
		return ne.Errno
	case errors.As(err, &errno) && errno != 0:
		return errno
	case errors.Is(err, context.DeadlineExceeded):
		return unix.ETIMEDOUT
	case errors.Is(err, context.Canceled), errors.Is(err, errConnGone):
		return unix.ECANCELED
	}
	return unix.EIO
}

// cmdName names a served command by its op's name, as the uAPI does (ETHTOOL_MSG_RINGS_GET is
// "rings-get", CTRL_CMD_GETFAMILY "getfamily"), for the command label of the request metrics;
// "unknown" for a command the family does not serve.
func (f *family) cmdName(cmd uint8) string {
	if o := f.op(cmd); o != nil && o.name != "" {
		return o.name
	}
	return "unknown"
}
