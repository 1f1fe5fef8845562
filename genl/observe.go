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
		if int(cmd) < len(ethtoolCmdNames) && ethtoolCmdNames[cmd] != "" {
			return ethtoolCmdNames[cmd]
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

// ethtoolCmdNames are the ethtool family's request commands by number, as ethtool.yaml names
// them (ETHTOOL_MSG_STRSET_GET, 1, to ETHTOOL_MSG_RSS_DELETE_ACT, 50).
var ethtoolCmdNames = [...]string{1: "strset-get", "linkinfo-get", "linkinfo-set", "linkmodes-get", "linkmodes-set",
	"linkstate-get", "debug-get", "debug-set", "wol-get", "wol-set", "features-get", "features-set",
	"privflags-get", "privflags-set", "rings-get", "rings-set", "channels-get", "channels-set",
	"coalesce-get", "coalesce-set", "pause-get", "pause-set", "eee-get", "eee-set", "tsinfo-get",
	"cable-test-act", "cable-test-tdr-act", "tunnel-info-get", "fec-get", "fec-set", "module-eeprom-get",
	"stats-get", "phc-vclocks-get", "module-get", "module-set", "pse-get", "pse-set", "rss-get",
	"plca-get-cfg", "plca-set-cfg", "plca-get-status", "mm-get", "mm-set", "module-fw-flash-act", "phy-get",
	"tsconfig-get", "tsconfig-set", "rss-set", "rss-create-act", "rss-delete-act"}

// manadCmdNames are the manad family's request commands, wire.CmdPortGet (1) to wire.CmdSetOption.
var manadCmdNames = [...]string{"port-get", "port-new", "port-del", "port-set-mtu", "xdp-attach",
	"xdp-detach", "stats-get", "layout-plan", "fault-set", "group-join", "group-leave", "set-option"}
