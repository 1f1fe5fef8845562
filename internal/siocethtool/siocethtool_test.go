package siocethtool_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/internal/siocethtool"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
)

func inetSocket(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestDo asks the loopback device for its link state (ETHTOOL_GLINK: lo's is always up) and
// checks the errors for a device that does not exist and a name that does not fit.
func TestDo(t *testing.T) {
	fd := inetSocket(t)
	for _, tc := range []struct {
		name string
		dev  string
		want error
	}{
		{"loopback", "lo", nil},
		{"no such device", "nosuchdev0", unix.ENODEV},
		{"name too long", "a-name-of-16-chars", unix.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := struct{ cmd, data uint32 }{cmd: unix.ETHTOOL_GLINK}
			_, err := siocethtool.Do(fd, tc.dev, unsafe.Pointer(&v))
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, uint32(1), v.data, "lo's link")
		})
	}
}

// TestStringSets reads the kernel's feature names through lo (ETH_SS_FEATURES is kernel-wide)
// and lo's driver statistics, which it has none of; a set's errors are Do's.
func TestStringSets(t *testing.T) {
	fd := inetSocket(t)
	n, err := siocethtool.SetLen(fd, "lo", siocethtool.SSFeatures)
	require.NoError(t, err)
	require.Greater(t, n, 32, "netdev feature names")
	names, err := siocethtool.Strings(fd, "lo", siocethtool.SSFeatures, n)
	require.NoError(t, err)
	require.Len(t, names, n)
	assert.Contains(t, names, "rx-gro")
	assert.Contains(t, names, "tx-checksum-ipv4")
	for _, s := range names {
		assert.LessOrEqual(t, len(s), siocethtool.GStringLen)
	}
	// A set that grew since SetLen: Linux 6.11 and later answer with no strings, older kernels
	// with the whole set, which fits the room Strings leaves.
	grown, err := siocethtool.Strings(fd, "lo", siocethtool.SSFeatures, n-10)
	require.NoError(t, err)
	if len(grown) != 0 {
		assert.Equal(t, names, grown)
	}
	none, err := siocethtool.Strings(fd, "lo", siocethtool.SSFeatures, 0)
	require.NoError(t, err)
	assert.Empty(t, none, "nothing asked for a count of 0")

	n, err = siocethtool.SetLen(fd, "lo", siocethtool.SSStats)
	require.NoError(t, err)
	assert.Zero(t, n, "lo has no driver statistics")

	_, err = siocethtool.SetLen(fd, "nosuchdev0", siocethtool.SSFeatures)
	assert.ErrorIs(t, err, unix.ENODEV)
	_, err = siocethtool.Strings(fd, "nosuchdev0", siocethtool.SSFeatures, 4)
	assert.ErrorIs(t, err, unix.ENODEV)
	_, err = siocethtool.Stats(fd, "nosuchdev0", 4)
	assert.ErrorIs(t, err, unix.ENODEV)
}

// TestStats reads a veth's driver statistics (veth_get_ethtool_stats: peer_ifindex first, then
// per-queue counters) in a namespace of its own and compares them with what ethtool -S prints.
func TestStats(t *testing.T) {
	testenv.RequireRoot(t)
	ethtool := testenv.NeedTool(t, "ethtool")
	ns := harness.Name("ssio", "")
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	out, err = exec.Command("ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb").CombinedOutput()
	require.NoError(t, err, "%s", out)

	var fd int
	require.NoError(t, harness.InNetNS(ns, func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}))
	t.Cleanup(func() { unix.Close(fd) })

	n, err := siocethtool.SetLen(fd, "va", siocethtool.SSStats)
	require.NoError(t, err)
	require.Positive(t, n)
	names, err := siocethtool.Strings(fd, "va", siocethtool.SSStats, n)
	require.NoError(t, err)
	vals, err := siocethtool.Stats(fd, "va", n)
	require.NoError(t, err)
	require.Len(t, names, n)
	require.Len(t, vals, n)
	assert.Equal(t, "peer_ifindex", names[0])

	out, err = exec.Command("ip", "netns", "exec", ns, ethtool, "-S", "va").CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")[1:] // after "NIC statistics:"
	require.Len(t, lines, n)
	for i, l := range lines {
		name, val, ok := strings.Cut(strings.TrimSpace(l), ": ")
		require.True(t, ok, l)
		assert.Equal(t, name, names[i])
		v, err := strconv.ParseUint(val, 10, 64)
		require.NoError(t, err)
		assert.Equal(t, v, vals[i], name)
	}
}
