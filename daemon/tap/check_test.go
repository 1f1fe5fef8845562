package tap

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic"
)

// TestMaxQueuesIsThePortModels: a port's queues are its TAP's, so the port model's limit
// (vnic.MaxQueues, which the configuration and the XDP programs check) is the kernel's
// MAX_TAP_QUEUES that this package checks.
func TestMaxQueuesIsThePortModels(t *testing.T) {
	assert.Equal(t, vnic.MaxQueues, MaxQueues)
}

// TestCheckMAC: is_valid_ether_addr, with the errno and the message that names the address.
func TestCheckMAC(t *testing.T) {
	for _, tc := range []struct {
		mac   string
		errno unix.Errno
		msg   string
	}{
		{"02:00:00:00:00:01", 0, ""},
		{"00:15:5d:00:00:01", 0, ""},
		{"01:00:5e:00:00:01", unix.EADDRNOTAVAIL, "MAC address 01:00:5e:00:00:01 is a multicast address"},
		{"ff:ff:ff:ff:ff:ff", unix.EADDRNOTAVAIL, "MAC address ff:ff:ff:ff:ff:ff is a multicast address"},
		{"00:00:00:00:00:00", unix.EADDRNOTAVAIL, "MAC address 00:00:00:00:00:00 is the zero address"},
		{"02:00:00:00:00:00:00:01", unix.EINVAL, "MAC address 02:00:00:00:00:00:00:01 is not a 6-byte Ethernet address"},
	} {
		t.Run(tc.mac, func(t *testing.T) {
			mac, err := net.ParseMAC(tc.mac)
			require.NoError(t, err)
			err = CheckMAC(mac)
			if tc.errno == 0 {
				assert.NoError(t, err)
				return
			}
			var e *nlerr.Error
			require.True(t, errors.As(err, &e), "%v", err)
			assert.Equal(t, tc.errno, e.Errno)
			assert.Equal(t, tc.msg, e.Message)
		})
	}
}
