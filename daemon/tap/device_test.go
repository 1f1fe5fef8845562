package tap

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openTest opens a TAP and deletes it when the test ends (whatever the test did with it).
func openTest(t *testing.T, cfg Config) *Device {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	d, err := Open(cfg)
	require.NoError(t, err, "Open(%+v)", cfg)
	t.Cleanup(func() { d.Delete() })
	return d
}

func TestOpenCreatesMultiQueueTAPInNetNS(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	mac := net.HardwareAddr{0x02, 0x4d, 0x41, 0x4e, 0x41, 0x01}
	d := openTest(t, Config{Name: name, MAC: mac, MTU: 9000, Queues: 4, NetNS: ns, TxQueueLen: 2048})

	l, ok := taptest.ShowLink(t, ns, name)
	require.True(t, ok, "%s not found in netns %s", name, ns)
	info := l.LinkInfo.Data
	if l.LinkInfo.Kind != "tun" || info.Type != "tap" || info.PI || info.VnetHdr || !info.MultiQueue {
		t.Errorf("link info %+v: want a multi-queue TAP without PI or vnet header", l.LinkInfo)
	}
	assert.Equal(t, 4, info.NumQueues, "queues: kernel %d, device %d; want 4", info.NumQueues, d.NumQueues())
	assert.Equal(t, 4, d.NumQueues(), "queues: kernel %d, device %d; want 4", info.NumQueues, d.NumQueues())
	assert.False(t, info.Persist, "non-persistent TAP has IFF_PERSIST")
	assert.Equal(t, mac.String(), l.Address, "link %s: address %s mtu %d txqlen %d alias %q; want %s 9000 2048 %q", name, l.Address, l.MTU, l.TxQLen, l.Alias, mac, "manad:"+name)
	assert.Equal(t, 9000, l.MTU, "link %s: address %s mtu %d txqlen %d alias %q; want %s 9000 2048 %q", name, l.Address, l.MTU, l.TxQLen, l.Alias, mac, "manad:"+name)
	assert.Equal(t, 2048, l.TxQLen, "link %s: address %s mtu %d txqlen %d alias %q; want %s 9000 2048 %q", name, l.Address, l.MTU, l.TxQLen, l.Alias, mac, "manad:"+name)
	assert.Equal(t, "manad:"+name, l.Alias, "link %s: address %s mtu %d txqlen %d alias %q; want %s 9000 2048 %q", name, l.Address, l.MTU, l.TxQLen, l.Alias, mac, "manad:"+name)
	if d.Index() != l.Index || d.Name() != name || d.NetNS() != ns || d.Reattached() || d.Persistent() {
		t.Errorf("device reports index %d name %s netns %s reattached %v persistent %v; want %d %s %s false false",
			d.Index(), d.Name(), d.NetNS(), d.Reattached(), d.Persistent(), l.Index, name, ns)
	}
	// Created inside the namespace: the daemon's namespace never had it.
	_, ok = taptest.ShowLink(t, "", name)
	assert.False(t, ok, "%s also exists in the daemon's namespace", name)
	var st unix.Stat_t
	require.NoError(t, unix.Stat("/run/netns/"+ns, &st))
	dev, ino := d.NetNSID()
	assert.Equal(t, st.Dev, dev, "NetNSID = %d/%d, want %d/%d", dev, ino, st.Dev, st.Ino)
	assert.Equal(t, st.Ino, ino, "NetNSID = %d/%d, want %d/%d", dev, ino, st.Dev, st.Ino)
	mtu, err := d.MTU()
	if err != nil || mtu != 9000 {
		t.Errorf("MTU() = %d, %v; want 9000", mtu, err)
	}
}

func TestCloseDeletesNonPersistentKeepsPersistent(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	for _, persistent := range []bool{false, true} {
		name := taptest.Name("mt")
		d := openTest(t, Config{Name: name, Queues: 2, NetNS: ns, Persistent: persistent})
		if l, _ := taptest.ShowLink(t, ns, name); l.LinkInfo.Data.Persist != persistent {
			t.Errorf("persistent=%v: kernel says persist=%v", persistent, l.LinkInfo.Data.Persist)
		}
		require.NoError(t, d.Close(), "Close")
		l, exists := taptest.ShowLink(t, ns, name)
		require.Equal(t, persistent, exists, "persistent=%v: after Close the TAP exists=%v", persistent, exists)
		if persistent {
			assert.Equal(t, 0, l.LinkInfo.Data.NumQueues, "persistent TAP still has queues after Close: %+v", l.LinkInfo.Data)
			assert.Equal(t, 0, l.LinkInfo.Data.NumDisabled, "persistent TAP still has queues after Close: %+v", l.LinkInfo.Data)
		}
		assert.NoError(t, d.Close(), "second Close")
		if _, err := d.MTU(); !errors.Is(err, unix.ENODEV) {
			t.Errorf("MTU after Close: %v, want ENODEV", err)
		}
		err := d.SetQueues(3)
		assert.ErrorIs(t, err, unix.ENODEV, "SetQueues after Close: %v, want ENODEV", err)
		if persistent {
			taptest.IP(t, ns, "link", "del", name)
		}
	}
}

// TestReattachKeepsAddresses is the crash-and-restart story: a persistent TAP whose daemon went
// away keeps its addresses and routes, and a new Open attaches to it instead of recreating it.
func TestReattachKeepsAddresses(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0x4d, 0x01}
	d := openTest(t, Config{Name: name, MAC: mac, Queues: 4, NetNS: ns, Persistent: true, TxQueueLen: 1000})
	idx := d.Index()
	taptest.IP(t, ns, "link", "set", name, "txqueuelen", "3000") // the user's, after manad's 1000
	taptest.IP(t, ns, "addr", "add", "192.0.2.1/24", "dev", name)
	taptest.IP(t, ns, "link", "set", name, "up")
	taptest.IP(t, ns, "route", "add", "198.51.100.0/24", "via", "192.0.2.254")
	if err := d.Close(); err != nil { // as the kernel does for a killed daemon: fds closed
		t.Fatal(err)
	}

	d2 := openTest(t, Config{Name: name, Queues: 2, NetNS: ns, Persistent: true, TxQueueLen: 1000})
	require.True(t, d2.Reattached(), "second Open: reattached=%v index %d; want true, %d", d2.Reattached(), d2.Index(), idx)
	require.Equal(t, idx, d2.Index(), "second Open: reattached=%v index %d; want true, %d", d2.Reattached(), d2.Index(), idx)
	l, _ := taptest.ShowLink(t, ns, name)
	if l.LinkInfo.Data.NumQueues != 2 || l.Address != mac.String() || !l.Up() || l.TxQLen != 3000 {
		t.Errorf("after re-attach: %d queues, address %s, up %v, txqueuelen %d; want 2, %s, true, 3000 (the user's)",
			l.LinkInfo.Data.NumQueues, l.Address, l.Up(), l.TxQLen, mac)
	}
	assert.Contains(t, taptest.IP(t, ns, "addr", "show", "dev", name), "192.0.2.1/24", "address lost across re-attach")
	assert.Contains(t, taptest.IP(t, ns, "route", "show", "198.51.100.0/24"), "via 192.0.2.254", "route lost across re-attach")

	// Re-attaching with Persistent false adopts the TAP as non-persistent: Close removes it.
	require.NoError(t, d2.Close())
	d3 := openTest(t, Config{Name: name, Queues: 1, NetNS: ns})
	require.True(t, d3.Reattached(), "third Open did not re-attach")
	require.NoError(t, d3.Close())
	_, ok := taptest.ShowLink(t, ns, name)
	assert.False(t, ok, "non-persistent re-attached TAP survived Close")
}

func TestDeleteRemovesPersistentTAP(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	d := openTest(t, Config{Name: name, Queues: 3, NetNS: ns, Persistent: true})
	require.NoError(t, d.Delete(), "Delete")
	_, ok := taptest.ShowLink(t, ns, name)
	assert.False(t, ok, "persistent TAP survived Delete")
}

// TestOpenRefuses checks every refusal: the errno, and that the device that already had the
// name is left exactly as it was.
func TestOpenRefuses(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	busy := taptest.Name("mt")
	openTest(t, Config{Name: busy, Queues: 1, NetNS: ns})

	tests := []struct {
		name  string
		setup []string // ip command creating the device that has the name, "%s" = the name
		cfg   Config   // Name filled in when empty
		errno unix.Errno
		msg   string
	}{
		{name: "veth", setup: []string{"link", "add", "%s", "type", "veth", "peer", "name", "%sp"}, errno: unix.EEXIST, msg: "veth device, not a TAP"},
		{name: "tun", setup: []string{"tuntap", "add", "mode", "tun", "multi_queue", "name", "%s"}, errno: unix.EEXIST, msg: "TUN"},
		{name: "single-queue tap", setup: []string{"tuntap", "add", "mode", "tap", "name", "%s"}, errno: unix.EINVAL, msg: "single-queue"},
		{name: "in use", cfg: Config{Name: busy}, errno: unix.EBUSY, msg: "in use"},
		{name: "empty name", cfg: Config{Name: "-"}, errno: unix.EINVAL},
		{name: "long name", cfg: Config{Name: "abcdefghijklmnop"}, errno: unix.EINVAL},
		{name: "template", cfg: Config{Name: "tap%d"}, errno: unix.EINVAL},
		{name: "slash", cfg: Config{Name: "a/b"}, errno: unix.EINVAL},
		{name: "no queues", cfg: Config{Queues: -1}, errno: unix.EINVAL},
		{name: "too many queues", cfg: Config{Queues: MaxQueues + 1}, errno: unix.EINVAL},
		{name: "small MTU", cfg: Config{MTU: 67}, errno: unix.EINVAL},
		{name: "multicast MAC", cfg: Config{MAC: net.HardwareAddr{1, 0, 0, 0, 0, 1}}, errno: unix.EADDRNOTAVAIL},
		{name: "short MAC", cfg: Config{MAC: net.HardwareAddr{2, 0, 0}}, errno: unix.EINVAL},
		{name: "no netns", cfg: Config{NetNS: "manad-no-such-ns"}, errno: unix.ENOENT, msg: "does not exist"},
		{name: "bad netns name", cfg: Config{NetNS: "../etc"}, errno: unix.EINVAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			switch cfg.Name {
			case "":
				cfg.Name = taptest.Name("mt")
			case "-":
				cfg.Name = ""
			}
			if cfg.NetNS == "" {
				cfg.NetNS = ns
			}
			switch cfg.Queues {
			case 0:
				cfg.Queues = 2
			case -1:
				cfg.Queues = 0
			}
			cfg.Logger = quietLogger()
			var before taptest.Link
			if tc.setup != nil {
				args := make([]string, len(tc.setup))
				for i, a := range tc.setup {
					args[i] = strings.ReplaceAll(a, "%s", cfg.Name)
				}
				taptest.IP(t, ns, args...)
				t.Cleanup(func() { taptest.TryIP(ns, "link", "del", cfg.Name) })
				before, _ = taptest.ShowLink(t, ns, cfg.Name)
			}
			d, err := Open(cfg)
			if err == nil {
				d.Delete()
				t.Fatalf("Open succeeded, want %v", tc.errno)
			}
			assert.ErrorIs(t, err, tc.errno, "Open: %v; want errno %v with %q", err, tc.errno, tc.msg)
			assert.Contains(t, err.Error(), tc.msg, "Open: %v; want errno %v with %q", err, tc.errno, tc.msg)
			if tc.setup != nil {
				after, ok := taptest.ShowLink(t, ns, cfg.Name)
				if !ok || after.Index != before.Index || after.LinkInfo != before.LinkInfo || after.Alias != before.Alias {
					t.Errorf("the existing device changed: before %+v, after %+v", before, after)
				}
			}
		})
	}
}

func TestSetQueuesAttachesAndDetaches(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	d := openTest(t, Config{Name: name, Queues: 2, NetNS: ns})
	taptest.IP(t, ns, "link", "set", name, "up")
	for _, n := range []int{5, 1, 3, 3} {
		old := d.Queues()
		require.NoError(t, d.SetQueues(n), "SetQueues(%d)", n)
		l, _ := taptest.ShowLink(t, ns, name)
		require.Equal(t, n, l.LinkInfo.Data.NumQueues, "after SetQueues(%d): kernel %d, device %d", n, l.LinkInfo.Data.NumQueues, d.NumQueues())
		require.Equal(t, n, d.NumQueues(), "after SetQueues(%d): kernel %d, device %d", n, l.LinkInfo.Data.NumQueues, d.NumQueues())
		// Removed queues are closed; kept ones are the same files.
		for i, f := range old {
			if i < n {
				assert.Same(t, f, d.Queue(i), "queue %d replaced by SetQueues(%d)", i, n)
			} else if _, err := f.Write(make([]byte, 60)); !errors.Is(err, os.ErrClosed) {
				t.Errorf("removed queue %d: write gave %v, want os.ErrClosed", i, err)
			}
		}
		// Every queue carries frames into the kernel: each write is one received packet.
		before := l.Stats64.RX.Packets
		for i := 0; i < n; i++ {
			_, err := d.Queue(i).Write(testFrame())
			require.NoError(t, err, "write to queue %d", i)
		}
		l, _ = taptest.ShowLink(t, ns, name)
		got := l.Stats64.RX.Packets - before
		assert.Equal(t, uint64(n), got, "%d queues: kernel received %d frames, want %d", n, got, n)
	}
	if d.Queue(3) != nil || d.Queue(-1) != nil {
		t.Error("Queue out of range is not nil")
	}
	for _, n := range []int{0, MaxQueues + 1} {
		err := d.SetQueues(n)
		assert.ErrorIs(t, err, unix.EINVAL, "SetQueues(%d): %v, want EINVAL", n, err)
	}
	assert.Equal(t, 3, d.NumQueues(), "a refused SetQueues changed the queue count to")
	require.NoError(t, d.SetTxQueueLen(4000))
	err := d.SetTxQueueLen(-1)
	assert.ErrorIs(t, err, unix.EINVAL, "SetTxQueueLen(-1): %v, want EINVAL", err)
	l, _ := taptest.ShowLink(t, ns, name)
	assert.Equal(t, 4000, l.TxQLen, "tx queue length %d, want 4000", l.TxQLen)
}

// testFrame is a broadcast Ethernet frame of an unknown EtherType: the kernel counts it as
// received and drops it.
func testFrame() []byte {
	f := make([]byte, 60)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 9, 0x88, 0xb5})
	return f
}

// TestQueuesCarryTransmittedFrames reads what the kernel transmits on the TAP from the queues,
// which never wait: with nothing queued a read fails with EAGAIN at once.
func TestQueuesCarryTransmittedFrames(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	d := openTest(t, Config{Name: name, Queues: 2, NetNS: ns})
	taptest.IP(t, ns, "addr", "add", "192.0.2.1/24", "dev", name)
	taptest.IP(t, ns, "link", "set", name, "up")
	// IPv6 router solicitations and the like may come first: drain them until 20 ms pass
	// without a frame.
	q0 := d.Queue(0)
	buf := make([]byte, 2048)
	for {
		_, err := readWait(q0, buf, time.Now().Add(20*time.Millisecond))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		require.NoError(t, err, "read")
	}
	_, err := q0.Read(buf)
	require.ErrorIs(t, err, unix.EAGAIN, "a read with nothing queued")
	// A datagram to a neighbour without an ARP entry makes the kernel send an ARP request on one
	// of the queues.
	taptest.InNetNS(t, ns, func() {
		c, err := net.Dial("udp4", "192.0.2.2:9")
		if err != nil {
			t.Errorf("dial: %v", err)
			return
		}
		defer c.Close()
		c.Write([]byte("hello"))
	})
	seen := false
	deadline := time.Now().Add(5 * time.Second)
	for !seen && time.Now().Before(deadline) {
		for _, q := range d.Queues() {
			n, err := readWait(q, buf, time.Now().Add(10*time.Millisecond))
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			require.NoError(t, err, "read")
			// ARP (0x0806) request for 192.0.2.2
			if n >= 42 && buf[12] == 0x08 && buf[13] == 0x06 && net.IP(buf[38:42]).Equal(net.IPv4(192, 0, 2, 2)) {
				seen = true
			}
		}
	}
	assert.True(t, seen, "no ARP request for 192.0.2.2 was read from any queue")
	require.NoError(t, q0.Close())
	_, err = q0.Read(buf)
	assert.ErrorIs(t, err, os.ErrClosed, "a read after Close")
	_, err = q0.Write(testFrame())
	assert.ErrorIs(t, err, os.ErrClosed, "a write after Close")
	assert.NoError(t, q0.Close(), "a second Close")
}

// readWait reads one frame from q, waiting for one with poll(2) until deadline. Errors:
// os.ErrDeadlineExceeded when none came; q.Read's.
func readWait(q *Queue, b []byte, deadline time.Time) (int, error) {
	for {
		n, err := q.Read(b)
		if !errors.Is(err, unix.EAGAIN) {
			return n, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		var perr error
		if err := q.Control(func(fd int) {
			_, perr = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		}); err != nil {
			return 0, err
		}
		if perr != nil && perr != unix.EINTR {
			return 0, perr
		}
	}
}

// TestMoveTo moves a TAP between namespaces with its queues attached: frames keep flowing, new
// queues attach in the new namespace, watchers of the old one see the TAP leave, and a name
// clash refuses the move.
func TestMoveTo(t *testing.T) {
	taptest.Require(t)
	ns1, ns2 := taptest.NetNS(t), taptest.NetNS(t)
	name := taptest.Name("mt")
	d := openTest(t, Config{Name: name, Queues: 2, NetNS: ns1, MTU: 1400})
	ch, err := d.Watch(t.Context())
	require.NoError(t, err)
	next(t, ch)

	require.NoError(t, d.MoveTo(ns2), "MoveTo")
	waitState(t, ch, "the TAP leaving ns1", func(e LinkEvent) bool { return e.Deleted })
	if _, ok := taptest.ShowLink(t, ns1, name); ok {
		t.Errorf("%s still in %s", name, ns1)
	}
	l, ok := taptest.ShowLink(t, ns2, name)
	require.True(t, ok, "after the move: in ns2 %v, %+v; device index %d netns %q", ok, l, d.Index(), d.NetNS())
	require.Equal(t, 2, l.LinkInfo.Data.NumQueues, "after the move: in ns2 %v, %+v; device index %d netns %q", ok, l, d.Index(), d.NetNS())
	require.Equal(t, 1400, l.MTU, "after the move: in ns2 %v, %+v; device index %d netns %q", ok, l, d.Index(), d.NetNS())
	require.Equal(t, d.Index(), l.Index, "after the move: in ns2 %v, %+v; device index %d netns %q", ok, l, d.Index(), d.NetNS())
	require.Equal(t, ns2, d.NetNS(), "after the move: in ns2 %v, %+v; device index %d netns %q", ok, l, d.Index(), d.NetNS())
	var st unix.Stat_t
	unix.Stat("/run/netns/"+ns2, &st)
	dev, ino := d.NetNSID()
	assert.Equal(t, st.Dev, dev, "NetNSID after the move = %d/%d, want ns2's %d/%d", dev, ino, st.Dev, st.Ino)
	assert.Equal(t, st.Ino, ino, "NetNSID after the move = %d/%d, want ns2's %d/%d", dev, ino, st.Dev, st.Ino)
	// The queues still carry frames, and new ones attach in the new namespace.
	taptest.IP(t, ns2, "link", "set", name, "up")
	require.NoError(t, d.SetQueues(3), "SetQueues after the move")
	for i := range 3 {
		_, err := d.Queue(i).Write(testFrame())
		require.NoError(t, err, "queue %d", i)
	}
	l, _ = taptest.ShowLink(t, ns2, name)
	assert.Equal(t, 3, l.LinkInfo.Data.NumQueues, "in ns2: %d queues, %d frames received; want 3 and 3", l.LinkInfo.Data.NumQueues, l.Stats64.RX.Packets)
	assert.Equal(t, uint64(3), l.Stats64.RX.Packets, "in ns2: %d queues, %d frames received; want 3 and 3", l.LinkInfo.Data.NumQueues, l.Stats64.RX.Packets)
	assert.NoError(t, d.SetMTU(1300), "SetMTU after the move")
	ch2, err := d.Watch(t.Context())
	require.NoError(t, err)
	ev := next(t, ch2)
	assert.Equal(t, 1300, ev.MTU, "watch in the new namespace starts with %+v", ev)
	assert.True(t, ev.Up, "watch in the new namespace starts with %+v", ev)

	// A clash in the target namespace refuses the move and changes nothing.
	taptest.IP(t, ns1, "link", "add", name, "type", "veth", "peer", "name", name+"p")
	err = d.MoveTo(ns1)
	assert.ErrorIs(t, err, unix.EEXIST, "MoveTo into a clash: %v, want EEXIST", err)
	err = d.MoveTo("manad-no-such-ns")
	assert.ErrorIs(t, err, unix.ENOENT, "MoveTo a missing namespace: %v, want ENOENT", err)
	assert.NoError(t, d.MoveTo(ns2), "MoveTo where it is")
	if _, ok := taptest.ShowLink(t, ns2, name); !ok || d.NetNS() != ns2 {
		t.Error("a refused move moved the TAP")
	}
	// Close deletes a non-persistent TAP in its new namespace.
	require.NoError(t, d.Close())
	_, ok = taptest.ShowLink(t, ns2, name)
	assert.False(t, ok, "Close left the moved TAP behind")
	err = d.MoveTo(ns1)
	assert.ErrorIs(t, err, unix.ENODEV, "MoveTo after Close: %v, want ENODEV", err)
}
