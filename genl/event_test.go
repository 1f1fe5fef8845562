package genl

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/manad/manad/genl/wire"
)

// TestEvent: each event's name, and the notification command each family sends for it; a value
// that is no Event has none.
func TestEvent(t *testing.T) {
	for _, tc := range []struct {
		ev                        Event
		name                      string
		port, segment, dev, ppool uint8
	}{
		{EventNew, "new", wire.CmdPortNewNtf, wire.CmdSegmentNewNtf, wire.NetdevCmdDevAddNtf, wire.NetdevCmdPagePoolAddNtf},
		{EventChange, "change", wire.CmdPortChangeNtf, wire.CmdSegmentChangeNtf, wire.NetdevCmdDevChangeNtf, wire.NetdevCmdPagePoolChangeNtf},
		{EventDel, "del", wire.CmdPortDelNtf, wire.CmdSegmentDelNtf, wire.NetdevCmdDevDelNtf, wire.NetdevCmdPagePoolDelNtf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.name, tc.ev.String())
			for _, c := range []struct {
				cmds *eventCmds
				want uint8
			}{{&portNtf, tc.port}, {&segmentNtf, tc.segment}, {&netdevDevNtf, tc.dev}, {&pagePoolNtf, tc.ppool}} {
				got, ok := c.cmds.cmd(tc.ev)
				assert.True(t, ok)
				assert.Equal(t, c.want, got)
			}
		})
	}
	for _, ev := range []Event{0, EventDel + 1, 255} {
		_, ok := portNtf.cmd(ev)
		assert.False(t, ok, "%d", ev)
		assert.Equal(t, "event("+map[Event]string{0: "0", EventDel + 1: "4", 255: "255"}[ev]+")", ev.String())
	}
}
