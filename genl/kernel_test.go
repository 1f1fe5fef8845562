package genl_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
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
	if err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip link del: %v: %s", err, out)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	n, err := siocethtool.SetLen(fd, dev, set)
	if err != nil {
		t.Fatalf("GSSET_INFO: %v", err)
	}
	out, err := siocethtool.Strings(fd, dev, set, n)
	if err != nil {
		t.Fatalf("GSTRINGS: %v", err)
	}
	return out
}

// TestKernelDecoders decodes the kernel's ethtool family replies with the
// client decoders that decode manad's, and checks them against the ioctl
// interface.
func TestKernelDecoders(t *testing.T) {
	veth := makeVeth(t)
	kc, err := client.DialKernel()
	if err != nil {
		t.Fatalf("DialKernel: %v", err)
	}
	defer kc.Close()
	ctx := ctxT(t)
	ifi := client.Interface{Name: veth}

	stats, err := kc.StringSet(ctx, ifi, ethtool.SSStats)
	if err != nil {
		t.Fatal(err)
	}
	want := ioctlStrings(t, veth, ethtool.SSStats)
	if len(want) == 0 {
		t.Fatal("veth reports no ETH_SS_STATS strings via ioctl")
	}
	if diff := cmp.Diff(want, stats); diff != "" {
		t.Errorf("ETH_SS_STATS netlink vs ioctl (-ioctl +netlink):\n%s", diff)
	}
	ss, err := kc.StringSets(ctx, &ifi, []uint32{ethtool.SSStats}, true)
	if err != nil || len(ss.Sets) != 1 || ss.Sets[0].Count != len(want) || ss.Sets[0].Strings != nil || ss.Interface.Name != veth {
		t.Errorf("counts only: %+v, %v", ss, err)
	}

	ch, err := kc.Channels(ctx, ifi)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 36)
	binary.NativeEndian.PutUint32(raw, unix.ETHTOOL_GCHANNELS)
	if err := ethtoolIoctl(veth, raw); err != nil {
		t.Fatal(err)
	}
	u := func(i int) uint32 { return binary.NativeEndian.Uint32(raw[4+4*i:]) }
	if ch.RxMax != u(0) || ch.TxMax != u(1) || ch.Rx != u(4) || ch.Tx != u(5) || ch.RxMax == 0 {
		t.Errorf("channels netlink %+v vs ioctl % x", ch.Channels, raw)
	}

	// Errors from the kernel compare like manad's.
	_, err = kc.PrivateFlags(ctx, ifi)
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("veth private flags: %v, want EOPNOTSUPP", err)
	}
	_, err = kc.Rings(ctx, client.Interface{Name: "nosuchdev0"})
	var ce *client.Error
	if !errors.Is(err, unix.ENODEV) || !errors.As(err, &ce) || ce.Message != "no device matches name" {
		t.Errorf("unknown device: %v", err)
	}

	// A notification from the kernel, through the same Subscription code.
	sub, err := kc.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	two := uint32(2)
	if err := kc.SetChannels(ctx, ifi, client.ChannelsUpdate{Rx: &two, Tx: &two}); err != nil {
		t.Fatalf("SetChannels on veth: %v", err)
	}
	for {
		ns, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
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
