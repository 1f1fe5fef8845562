package genl_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/internal/siocethtool"
)

// makeVeth creates a veth pair with 4 queues each and removes it at the end.
func makeVeth(t testing.TB) string {
	t.Helper()
	requireRoot(t)
	name := fmt.Sprintf("gnlt%d", os.Getpid()%100000)
	peer := name + "p"
	out, err := exec.Command("ip", "link", "add", name, "numtxqueues", "4", "numrxqueues", "4", "type", "veth",
		"peer", "name", peer, "numtxqueues", "4", "numrxqueues", "4").CombinedOutput()
	require.NoError(t, err, "ip link add: %v: %s", err, out)
	t.Cleanup(func() {
		out, err := exec.Command("ip", "link", "del", name).CombinedOutput()
		assert.NoError(t, err, "ip link del: %v: %s", err, out)
	})
	return name
}

// ethtoolIoctl runs SIOCETHTOOL on dev with buf as the command structure.
func ethtoolIoctl(dev string, buf []byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = siocethtool.Do(fd, dev, unsafe.Pointer(&buf[0]))
	return err
}

// ioctlStrings reads a string set with ETHTOOL_GSSET_INFO and
// ETHTOOL_GSTRINGS: an independent path to the same driver data.
func ioctlStrings(t *testing.T, dev string, set uint32) []string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	n, err := siocethtool.SetLen(fd, dev, set)
	require.NoError(t, err, "GSSET_INFO")
	out, err := siocethtool.Strings(fd, dev, set, n)
	require.NoError(t, err, "GSTRINGS")
	return out
}

// TestKernelDecoders decodes the kernel's ethtool family replies with the
// client decoders that decode manad's, and checks them against the ioctl
// interface.
func TestKernelDecoders(t *testing.T) {
	veth := makeVeth(t)
	kc, err := client.DialKernel()
	require.NoError(t, err, "DialKernel")
	defer kc.Close()
	ctx := ctxT(t)
	ifi := client.Interface{Name: veth}

	stats, err := kc.StringSet(ctx, ifi, ethtool.SSStats)
	require.NoError(t, err)
	want := ioctlStrings(t, veth, ethtool.SSStats)
	require.NotEmpty(t, want, "veth reports no ETH_SS_STATS strings via ioctl")
	assert.Empty(t, cmp.Diff(want, stats), "ETH_SS_STATS netlink vs ioctl (-ioctl +netlink)")
	ss, err := kc.StringSets(ctx, &ifi, []uint32{ethtool.SSStats}, true)
	if err != nil || len(ss.Sets) != 1 || ss.Sets[0].Count != len(want) || ss.Sets[0].Strings != nil || ss.Interface.Name != veth {
		t.Errorf("counts only: %+v, %v", ss, err)
	}

	ch, err := kc.Channels(ctx, ifi)
	require.NoError(t, err)
	raw := make([]byte, 36)
	binary.NativeEndian.PutUint32(raw, unix.ETHTOOL_GCHANNELS)
	require.NoError(t, ethtoolIoctl(veth, raw))
	u := func(i int) uint32 { return binary.NativeEndian.Uint32(raw[4+4*i:]) }
	assert.Equal(t, u(0), ch.RxMax, "channels netlink %+v vs ioctl % x", ch.Channels, raw)
	assert.Equal(t, u(1), ch.TxMax, "channels netlink %+v vs ioctl % x", ch.Channels, raw)
	assert.Equal(t, u(4), ch.Rx, "channels netlink %+v vs ioctl % x", ch.Channels, raw)
	assert.Equal(t, u(5), ch.Tx, "channels netlink %+v vs ioctl % x", ch.Channels, raw)
	assert.NotEqual(t, uint32(0), ch.RxMax, "channels netlink %+v vs ioctl % x", ch.Channels, raw)

	// Errors from the kernel compare like manad's.
	_, err = kc.PrivateFlags(ctx, ifi)
	assert.ErrorIs(t, err, unix.EOPNOTSUPP, "veth private flags: %v, want EOPNOTSUPP", err)
	_, err = kc.Rings(ctx, client.Interface{Name: "nosuchdev0"})
	var ce *client.Error
	assert.ErrorIs(t, err, unix.ENODEV, "unknown device")
	if assert.ErrorAs(t, err, &ce, "unknown device") {
		assert.Equal(t, "no device matches name", ce.Message, "unknown device")
	}

	// A notification from the kernel, through the same Subscription code.
	sub, err := kc.Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()
	two := uint32(2)
	require.NoError(t, kc.SetChannels(ctx, ifi, client.ChannelsUpdate{Rx: &two, Tx: &two}), "SetChannels on veth")
	for {
		ns, err := sub.Next(ctx)
		require.NoError(t, err)
		if len(ns) > 0 && ns[0].Kind == client.ChannelsChanged && ns[0].Interface.Name == veth {
			if ns[0].Channels.Rx != 2 || ns[0].Channels.Tx != 2 || ns[0].Sequence == 0 {
				t.Errorf("kernel CHANNELS_NTF: %+v", ns[0].Channels)
			}
			break
		}
	}
	if all, err := kc.AllChannels(ctx); err != nil || !strings.Contains(fmt.Sprint(names(all)), veth) {
		t.Errorf("kernel dump: %v", err)
	}
}

func names(chs []*client.Channels) []string {
	var out []string
	for _, c := range chs {
		out = append(out, c.Interface.Name)
	}
	return out
}
