package genl

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
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
		if len(msg) >= nlattr.MsgHdrLen+nlattr.GenlHdrLen && f.op(msg[nlattr.MsgHdrLen]) != nil {
			cmd = cmdName(f.id, msg[nlattr.MsgHdrLen])
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

// cmdName names a served command as the uAPI does (ETHTOOL_MSG_RINGS_GET is "rings-get",
// CTRL_CMD_GETFAMILY "getfamily"), for the command label of the request metrics.
func cmdName(fam uint16, cmd uint8) string {
	switch fam {
	case nlctrlID:
		if cmd == unix.CTRL_CMD_GETFAMILY {
			return "getfamily"
		}
		if cmd == unix.CTRL_CMD_GETPOLICY {
			return "getpolicy"
		}
	case ethtoolID:
		switch cmd {
		case unix.ETHTOOL_MSG_STRSET_GET:
			return "strset-get"
		case unix.ETHTOOL_MSG_PRIVFLAGS_GET:
			return "privflags-get"
		case unix.ETHTOOL_MSG_PRIVFLAGS_SET:
			return "privflags-set"
		case unix.ETHTOOL_MSG_RINGS_GET:
			return "rings-get"
		case unix.ETHTOOL_MSG_RINGS_SET:
			return "rings-set"
		case unix.ETHTOOL_MSG_CHANNELS_GET:
			return "channels-get"
		case unix.ETHTOOL_MSG_CHANNELS_SET:
			return "channels-set"
		case unix.ETHTOOL_MSG_COALESCE_GET:
			return "coalesce-get"
		case unix.ETHTOOL_MSG_COALESCE_SET:
			return "coalesce-set"
		case unix.ETHTOOL_MSG_LINKINFO_GET:
			return "linkinfo-get"
		case unix.ETHTOOL_MSG_LINKINFO_SET:
			return "linkinfo-set"
		case unix.ETHTOOL_MSG_LINKMODES_GET:
			return "linkmodes-get"
		case unix.ETHTOOL_MSG_LINKMODES_SET:
			return "linkmodes-set"
		case unix.ETHTOOL_MSG_LINKSTATE_GET:
			return "linkstate-get"
		case unix.ETHTOOL_MSG_TSINFO_GET:
			return "tsinfo-get"
		case unix.ETHTOOL_MSG_STATS_GET:
			return "stats-get"
		case unix.ETHTOOL_MSG_RSS_GET:
			return "rss-get"
		case unix.ETHTOOL_MSG_FEATURES_GET:
			return "features-get"
		case unix.ETHTOOL_MSG_FEATURES_SET:
			return "features-set"
		case wire.MsgRSSSet:
			return "rss-set"
		}
	case manadID:
		switch cmd {
		case wire.CmdCaptureStart:
			return "capture-start"
		case wire.CmdCaptureStop:
			return "capture-stop"
		}
		if n := int(cmd) - 1; n >= 0 && n < len(manadCmdNames) {
			return manadCmdNames[n]
		}
		if name, ok := segmentCmdNames[cmd]; ok {
			return name
		}
	case netdevID:
		if name, ok := netdevCmdNames[cmd]; ok {
			return name
		}
	}
	return "unknown"
}

// manadCmdNames are the manad family's request commands, wire.CmdPortGet (1) to wire.CmdSetOption.
var manadCmdNames = [...]string{"port-get", "port-new", "port-del", "port-set-mtu", "xdp-attach",
	"xdp-detach", "stats-get", "layout-plan", "fault-set", "group-join", "group-leave", "set-option"}
