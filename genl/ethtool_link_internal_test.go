package genl

import (
	"context"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinkSetAdminOnly: LINKINFO_SET and LINKMODES_SET are EPERM for a peer
// that is not an admin (GENL_UNS_ADMIN_PERM, checked before the device) and
// EOPNOTSUPP for an admin, as for mana; the backend is not asked to change.
func TestLinkSetAdminOnly(t *testing.T) {
	seeds := seedRequests()
	for _, tc := range []struct {
		seed  string
		admin bool
		want  unix.Errno
	}{
		{"linkinfo_set", false, unix.EPERM},
		{"linkinfo_set", true, unix.EOPNOTSUPP},
		{"linkmodes_set", false, unix.EPERM},
		{"linkmodes_set", true, unix.EOPNOTSUPP},
	} {
		s, be := fuzzServer(t)
		ns := NetNS{Dev: 1, Ino: 1}
		be.AddPort(ns, "mana0")
		var out [][]byte
		c := newConn(s, transport.Detached(context.Background(), Caller{UID: 1000, Admin: tc.admin, NetNS: ns}, func(b []byte) error { out = append(out, append([]byte(nil), b...)); return nil }))
		s.handleDatagram(context.Background(), c, seeds[tc.seed])
		require.Len(t, out, 1, "%s admin=%v: %d datagrams", tc.seed, tc.admin, len(out))
		h, _ := nlattr.ReadHeader(out[0])
		require.Equal(t, nlattr.MsgError, h.Type, "%s admin=%v: reply type %d, want NLMSG_ERROR", tc.seed, tc.admin, h.Type)
		assert.Equal(t, tc.want, unix.Errno(-int32(binary.NativeEndian.Uint32(out[0][16:]))), "%s admin=%v", tc.seed, tc.admin)
		assert.Empty(t, be.Calls(), "%s admin=%v: backend changed", tc.seed, tc.admin)
	}
}
