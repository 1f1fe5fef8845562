package nlbridge

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/stretchr/testify/require"
)

// FuzzProgramMessage feeds arbitrary datagrams, as a hostile program could send, through the
// parsing the bridge does on them (splitting, routing, the device lookup), and arbitrary answers
// through the translation of manad's messages: none may panic, and a routed message keeps its
// length (the bridge translates in place, so that extack offsets stay true).
func FuzzProgramMessage(f *testing.F) {
	f.Add(msg(tkEthtool, nlattr.FlagRequest, 1, 0, unix.ETHTOOL_MSG_RINGS_GET, func(b *nlattr.Builder) {
		n := b.Nest(1)
		b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 41)
		b.EndNest(n)
	}))
	f.Add(msg(unix.GENL_ID_CTRL, nlattr.FlagRequest|nlattr.FlagDump, 1, 0, unix.CTRL_CMD_GETFAMILY, nil))
	f.Add(msg(unix.GENL_ID_CTRL, nlattr.FlagRequest, 1, 0, unix.CTRL_CMD_GETFAMILY, func(b *nlattr.Builder) {
		b.PutU16(unix.CTRL_ATTR_FAMILY_ID, trManad)
	}))
	f.Add(msg(tkNetdev, nlattr.FlagRequest, 1, 0, 9, func(b *nlattr.Builder) {
		n := b.Nest(1)
		b.PutU32(2, 41)
		b.EndNest(n)
	}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, d []byte) {
		s := unitSocket(t, 41)
		msgs, _ := splitMsgs(d)
		for _, m := range msgs {
			r := s.route(m)
			if r.fwd != nil {
				require.Equal(t, len(m), len(r.fwd), "forwarded message is %d bytes, the program's %d", len(r.fwd), len(m))
			}
			c := append([]byte(nil), m...)
			s.translate(c, tPortID)
			s.fixError(r, c)
			s.devOf(c, true, false)
			s.devOf(c, false, true)
			shiftIDs(c, true)
			shiftIDs(c, false)
			s.cache.portEvent(c, 13)
			extackMsg(c)
			markerAck(c)
			parseFamily(c)
		}
	})
}
