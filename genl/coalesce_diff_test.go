package genl_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/stretchr/testify/assert"
)

// TestCoalesceMatchesKernel compares COALESCE requests with the kernel's answers on a veth.
// A veth has no get/set_coalesce, so the kernel answers GET and SET with a bare EOPNOTSUPP, as
// manad must for its device without coalescing (lo0). A malformed request is refused by the
// policy before any device is asked: then manad's mana0 must get the kernel's errno, message
// and offset exactly.
func TestCoalesceMatchesKernel(t *testing.T) {
	requireRoot(t)
	veth := makeVeth(t)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kc := dialKernel(t)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")
	for _, tc := range []struct {
		name   string
		cmd    uint8
		manad  string // the device asked of manad (the kernel is asked about the veth)
		put    func(m *msgBuilder)
		errno  unix.Errno
		hasOff bool
	}{
		{"GET without coalescing", unix.ETHTOOL_MSG_COALESCE_GET, "lo0", func(*msgBuilder) {}, unix.EOPNOTSUPP, false},
		{"SET without coalescing", unix.ETHTOOL_MSG_COALESCE_SET, "lo0",
			func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_COALESCE_RX_USECS, 8) }, unix.EOPNOTSUPP, false},
		{"SET unsupported without coalescing", unix.ETHTOOL_MSG_COALESCE_SET, "lo0",
			func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_COALESCE_RX_USECS_IRQ, 8) }, unix.EOPNOTSUPP, false},
		{"SET u32 too short", unix.ETHTOOL_MSG_COALESCE_SET, "mana0",
			func(m *msgBuilder) { m.Put(unix.ETHTOOL_A_COALESCE_RX_USECS, []byte{1, 2}) }, unix.EINVAL, true},
		{"SET cqe mode above 1", unix.ETHTOOL_MSG_COALESCE_SET, "mana0",
			func(m *msgBuilder) { m.PutU8(unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_RX, 2) }, unix.ERANGE, true},
		{"SET adaptive u8 too short", unix.ETHTOOL_MSG_COALESCE_SET, "mana0",
			func(m *msgBuilder) { m.Put(unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, nil) }, unix.EINVAL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func(id uint16, dev string) []byte {
				m := newMsg(id, nlattr.FlagRequest|nlattr.FlagAck, 9, tc.cmd, 1)
				header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, dev) })
				tc.put(m)
				return m.done()
			}
			kc.send(build(kid, veth))
			rc.send(build(mid, tc.manad))
			k, m := decodeAck(t, kc.recv()[0]), decodeAck(t, rc.recv()[0])
			assert.Equal(t, tc.errno, m.errno, "manad: %+v, want %v (offset %v)", m, tc.errno, tc.hasOff)
			assert.Equal(t, tc.hasOff, m.off != 0, "manad: %+v, want %v (offset %v)", m, tc.errno, tc.hasOff)
			// The offsets count from the message start: take out the header's name, whose
			// length differs between the veth and manad's device.
			rel := func(off int, dev string) int {
				if off == 0 {
					return 0
				}
				return off - nlattr.Align(len(dev)+1)
			}
			assert.Equal(t, m.errno, k.errno, "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, m.msg, k.msg, "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, rel(m.off, tc.manad), rel(k.off, veth), "kernel %+v\nmanad  %+v", k, m)
			assert.Equal(t, m.policy, k.policy, "kernel %+v\nmanad  %+v", k, m)
		})
	}
}
