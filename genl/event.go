package genl

import (
	"strconv"

	"github.com/manad/manad/genl/wire"
)

// Event is what happened to an object the daemon announces (a port, a segment, a port's netdev, a
// page pool): the genl core turns it into the notification command of each family that carries
// the object, as it does for its own ethtool SETs (ethtool's NTFs). An enum rather than a string,
// so a kind that does not exist does not compile.
type Event uint8

// The events. The wire names differ by family: manad's commands are *_NEW/*_DEL/*_CHANGE_NTF,
// netdev's *_ADD/*_DEL/*_CHANGE_NTF (netdev.yaml).
const (
	// EventNew: the object now exists (PORT_NEW_NTF, SEGMENT_NEW_NTF, NETDEV_CMD_DEV_ADD_NTF,
	// NETDEV_CMD_PAGE_POOL_ADD_NTF).
	EventNew Event = iota + 1
	// EventChange: the object changed; the notification carries its new state
	// (PORT_CHANGE_NTF, SEGMENT_CHANGE_NTF, NETDEV_CMD_DEV_CHANGE_NTF,
	// NETDEV_CMD_PAGE_POOL_CHANGE_NTF).
	EventChange
	// EventDel: the object is gone; the notification carries the state it had (PORT_DEL_NTF,
	// SEGMENT_DEL_NTF, NETDEV_CMD_DEV_DEL_NTF, NETDEV_CMD_PAGE_POOL_DEL_NTF).
	EventDel
)

// String returns "new", "change" or "del", for logs; an unknown value reads "event(N)".
func (e Event) String() string {
	switch e {
	case EventNew:
		return "new"
	case EventChange:
		return "change"
	case EventDel:
		return "del"
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// eventCmds is one family's notification command for each event.
type eventCmds [EventDel + 1]uint8

// The notification commands of each kind of object.
var (
	portNtf      = eventCmds{EventNew: wire.CmdPortNewNtf, EventChange: wire.CmdPortChangeNtf, EventDel: wire.CmdPortDelNtf}
	segmentNtf   = eventCmds{EventNew: wire.CmdSegmentNewNtf, EventChange: wire.CmdSegmentChangeNtf, EventDel: wire.CmdSegmentDelNtf}
	netdevDevNtf = eventCmds{EventNew: wire.NetdevCmdDevAddNtf, EventChange: wire.NetdevCmdDevChangeNtf,
		EventDel: wire.NetdevCmdDevDelNtf}
	pagePoolNtf = eventCmds{EventNew: wire.NetdevCmdPagePoolAddNtf, EventChange: wire.NetdevCmdPagePoolChangeNtf,
		EventDel: wire.NetdevCmdPagePoolDelNtf}
)

// cmd returns the command for ev; false for a value that is no Event (one made by conversion).
func (c *eventCmds) cmd(ev Event) (uint8, bool) {
	if ev < EventNew || ev > EventDel {
		return 0, false
	}
	return c[ev], true
}
