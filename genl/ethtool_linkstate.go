package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/wire"
)

// LINKSTATE messages, as net/ethtool/linkstate.c for a device without a
// PHY or get_link_ext_state (mana): the link only.

var linkStateGetPolicy = headerOnly()

func (s *Server) linkStateGet() *ethGet {
	return tableGet(unix.ETHTOOL_MSG_LINKSTATE_GET_REPLY, s.cfg.Backend.LinkState, wire.LinkStateTable)
}
