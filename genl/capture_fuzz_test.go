package genl

import (
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// addCaptureSeeds adds CAPTURE_START and CAPTURE_STOP requests, valid and not, to FuzzDispatch's
// seeds.
func addCaptureSeeds(seeds map[string][]byte, msg func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte) {
	seeds["capture_start"] = msg(manadID, nlattr.FlagAck, wire.CmdCaptureStart, func(b *nlattr.Builder) {
		b.PutString(wire.AttrCaptureTarget, "wire0")
		b.PutU8(wire.AttrCaptureDirection, wire.CaptureIn)
		b.PutU32(wire.AttrCaptureSnaplen, 96)
	})
	seeds["capture_start_no_target"] = msg(manadID, nlattr.FlagAck, wire.CmdCaptureStart, func(b *nlattr.Builder) {
		b.PutU32(wire.AttrCaptureSnaplen, wire.MaxSnaplen+1)
	})
	seeds["capture_start_bad_direction"] = msg(manadID, nlattr.FlagAck, wire.CmdCaptureStart, func(b *nlattr.Builder) {
		b.PutString(wire.AttrCaptureTarget, "mana0")
		b.PutU8(wire.AttrCaptureDirection, 7)
	})
	seeds["capture_stop"] = msg(manadID, nlattr.FlagAck, wire.CmdCaptureStop, nil)
}
