package uplink

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/require"
)

// TestUplinkFollowsItsNetNS: `ip netns del` of an uplink's namespace leaves the uplink gone, with
// the reason, and releases the namespace — the veth whose peer is in the test's namespace goes
// with it, which it cannot while anything holds the namespace; the namespace added again with
// the device, the uplink attaches and carries frames again. A namespace deleted and added again
// at once (between two looks) is a new one too.
func TestUplinkFollowsItsNetNS(t *testing.T) {
	for _, mode := range []string{AttachPacket, AttachXDP} {
		t.Run(mode, func(t *testing.T) { testFollowsItsNetNS(t, mode) })
	}
}

func testFollowsItsNetNS(t *testing.T, mode string) {
	testenv.RequireRoot(t)
	ns := fmt.Sprintf("upd%d%s", os.Getpid()%100000, mode[:1])
	peer := fmt.Sprintf("upd%d%sp", os.Getpid()%100000, mode[:1])
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", ns).Run()
		exec.Command("ip", "link", "del", peer).Run()
	})
	// addNS adds the namespace with device v0 in it, up, its veth peer in the test's namespace.
	addNS := func() {
		run(t, "ip", "netns", "add", ns)
		run(t, "ip", "link", "add", peer, "type", "veth", "peer", "name", "v0", "netns", ns)
		run(t, "ip", "link", "set", peer, "up")
		run(t, "ip", "-n", ns, "link", "set", "v0", "up")
	}
	addNS()
	u, err := Start(context.Background(), Config{Dev: "v0", NetNS: ns, Segment: datapath.NewSegment("t"), Logger: quiet(), Attach: mode})
	require.NoError(t, err)
	defer u.Close()
	eventually(t, "v0 attached", func() bool { return u.Status().State == Up })

	run(t, "ip", "netns", "del", ns)
	eventually(t, "uplink gone with its namespace", func() bool { return u.Status().State == Absent })
	st := u.Status()
	want := fmt.Sprintf("network namespace %q was deleted", ns)
	require.Contains(t, st.Err, want, "status %+v, want no ifindex and the reason %q", st, want)
	require.Equal(t, 0, st.Index, "status %+v, want no ifindex and the reason %q", st, want)
	// Nothing holds the namespace: it goes, and with it the veth pair.
	eventually(t, "the namespace released (its veth peer gone)", func() bool {
		_, err := net.InterfaceByName(peer)
		return err != nil
	})
	st = u.Status()
	require.Equal(t, Absent, st.State, "state %v while the namespace is missing, want absent", st.State)

	addNS()
	eventually(t, "v0 attached in the new namespace", func() bool { return u.Status().State == Up })
	st, n := u.Status(), u.Stats().Attaches
	require.Equal(t, "", st.Err, "status %+v after %d attaches, want no error after 2", st, n)
	require.Equal(t, uint64(2), n, "status %+v after %d attaches, want no error after 2", st, n)
	sendFromHost(t, peer, testFrame(1, 100))
	eventually(t, "a frame received through the new v0", func() bool { return u.Stats().RxFrames >= 1 })

	// Deleted and added again at once: the name is there at every look, the namespace is not
	// the one the uplink holds.
	run(t, "ip", "netns", "del", ns)
	eventually(t, "the old namespace released", func() bool {
		_, err := net.InterfaceByName(peer)
		return err != nil
	})
	addNS()
	eventually(t, "v0 attached in the third namespace", func() bool { return u.Stats().Attaches == 3 && u.Status().State == Up })
	rx := u.Stats().RxFrames
	sendFromHost(t, peer, testFrame(2, 100))
	eventually(t, "a frame received through the third v0", func() bool { return u.Stats().RxFrames > rx })
}

// sendFromHost sends frame out of dev in the test's namespace.
func sendFromHost(t *testing.T, dev string, frame []byte) {
	t.Helper()
	ifi, err := net.InterfaceByName(dev)
	require.NoError(t, err)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	// The veth's carrier follows its peer's up a moment later: retry the first sends.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err = unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(unix.ETH_P_ALL)})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err, "send on %s", dev)
}
