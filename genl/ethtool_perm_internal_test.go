package genl

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/transport"
)

// TestEthtoolAdminOpsPermFirst: every ethtool op with GENL_UNS_ADMIN_PERM
// (the SETs and ACTs, WOL_GET and MODULE_EEPROM_GET) answers a caller
// without CAP_NET_ADMIN EPERM without extack before anything of the request
// is looked at, as genl_family_rcv_msg: here the request is malformed (an
// attribute of type 0, no header), which an admin gets EINVAL for. Nothing
// reaches the backend either way.
func TestEthtoolAdminOpsPermFirst(t *testing.T) {
	s, be := fuzzServer(t)
	ns := NetNS{Dev: 1, Ino: 1}
	be.AddPort(ns, "mana0")
	fam := s.families[ethtoolID]
	var admin []uint8
	for _, o := range fam.ops {
		if o.perm&unix.GENL_UNS_ADMIN_PERM != 0 {
			admin = append(admin, o.cmd)
		}
	}
	// The kernel's: every SET and ACT, and the two GETs that expose secrets.
	require.Len(t, admin, 25)
	assert.Contains(t, admin, uint8(unix.ETHTOOL_MSG_WOL_GET))
	assert.Contains(t, admin, uint8(unix.ETHTOOL_MSG_MODULE_EEPROM_GET))

	for _, cmd := range admin {
		for _, tc := range []struct {
			admin bool
			want  unix.Errno
		}{{false, unix.EPERM}, {true, unix.EINVAL}} {
			var b nlattr.Builder
			start := b.BeginMsg(ethtoolID, nlattr.FlagRequest|nlattr.FlagAck, 1, 77)
			b.Genl(cmd, 1)
			b.PutU32(0, 1)
			b.EndMsg(start)
			var out [][]byte
			c := newConn(s, transport.Detached(context.Background(), Caller{UID: 1000, Admin: tc.admin, NetNS: ns}, func(b []byte) error { out = append(out, append([]byte(nil), b...)); return nil }))
			s.handleDatagram(context.Background(), c, b.B)
			require.Len(t, out, 1, "op %d admin=%v", cmd, tc.admin)
			h, _ := nlattr.ReadHeader(out[0])
			require.Equal(t, uint16(nlattr.MsgError), h.Type)
			got := unix.Errno(-int32(binary.NativeEndian.Uint32(out[0][16:])))
			assert.Equal(t, tc.want, got, "op %d admin=%v", cmd, tc.admin)
			if !tc.admin {
				assert.Zero(t, h.Flags&nlattr.FlagAckTLVs, "op %d: EPERM carries no extack", cmd)
			}
		}
	}
	assert.Empty(t, be.Calls(), "backend changed")
}
