package client

import (
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/nlerr"
)

// TestAckErrorRoundTrip: the error a server puts in an NLMSG_ERROR (nlattr.AppendAck) comes back
// from ackError as the same nlerr.Error, every extack field included.
func TestAckErrorRoundTrip(t *testing.T) {
	req := make([]byte, 48) // a request whose attributes start at 20
	req[0] = 48
	for _, tc := range []struct {
		name string
		sent *nlerr.Error
		opt  nlattr.AckOptions
		want *nlerr.Error
	}{
		{"errno only", &nlerr.Error{Errno: unix.EOPNOTSUPP}, nlattr.AckOptions{ExtAck: true}, &nlerr.Error{Errno: unix.EOPNOTSUPP}},
		{"message and offset", &nlerr.Error{Errno: unix.EINVAL, Message: "requested channel count exceeds maximum", Offset: 32},
			nlattr.AckOptions{ExtAck: true, CapAck: true}, &nlerr.Error{Errno: unix.EINVAL, Message: "requested channel count exceeds maximum", Offset: 32}},
		{"policy", &nlerr.Error{Errno: unix.ERANGE, Message: "integer out of range", Offset: 24, Policy: []byte{8, 0, 1, 0, 3, 0, 0, 0}},
			nlattr.AckOptions{ExtAck: true}, &nlerr.Error{Errno: unix.ERANGE, Message: "integer out of range", Offset: 24, Policy: []byte{8, 0, 1, 0, 3, 0, 0, 0}}},
		{"missing attribute", &nlerr.Error{Errno: unix.EINVAL, MissType: 2, MissNest: 20}, nlattr.AckOptions{ExtAck: true},
			&nlerr.Error{Errno: unix.EINVAL, MissType: 2, MissNest: 20}},
		{"no extack", &nlerr.Error{Errno: unix.EINVAL, Message: "dropped"}, nlattr.AckOptions{}, &nlerr.Error{Errno: unix.EINVAL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ack := nlattr.AppendAck(nil, req, 1, tc.sent.Errno, tc.sent, tc.opt)
			h, ok := nlattr.ReadHeader(ack)
			require.True(t, ok)
			m := netlink.Message{Header: netlink.Header{Length: h.Len, Type: netlink.HeaderType(h.Type), Flags: netlink.HeaderFlags(h.Flags)},
				Data: ack[nlattr.MsgHdrLen:]}
			err := ackError(m)
			var got *Error
			require.ErrorAs(t, err, &got)
			assert.Equal(t, tc.want, got)
			assert.ErrorIs(t, err, tc.sent.Errno)
		})
	}
}
