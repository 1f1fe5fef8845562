package tap

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newWatcherTest starts a Watcher of ns and closes it when the test ends.
func newWatcherTest(t *testing.T, ns string, opts WatcherOptions) *Watcher {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	w, err := NewWatcher(ns, opts)
	require.NoError(t, err, "NewWatcher(%q)", ns)
	t.Cleanup(func() { w.Close() })
	return w
}

// ipBatch runs `ip -n ns -batch -` with the given commands, one a line.
func ipBatch(t *testing.T, ns string, cmds []string) {
	t.Helper()
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "ip -batch: %v: %s", err, out)
}

// TestSharedWatcherDispatchesByIndex opens several TAPs on one Watcher and changes them all in one
// burst: each watch sees exactly its own TAP's final state.
func TestSharedWatcherDispatchesByIndex(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	w := newWatcherTest(t, ns, WatcherOptions{})
	const n = 8
	devs := make([]*Device, n)
	chs := make([]<-chan LinkEvent, n)
	var cmds []string
	for i := range devs {
		devs[i] = openTest(t, Config{Name: taptest.Name("mw"), Queues: 1, NetNS: ns, MTU: 1500, Watcher: w})
		ch, err := devs[i].Watch(t.Context())
		require.NoError(t, err)
		chs[i] = ch
		ev := next(t, chs[i])
		require.Equal(t, devs[i].Index(), ev.Index, "first event of %s: %+v", devs[i].Name(), ev)
		require.Equal(t, 1500, ev.MTU, "first event of %s: %+v", devs[i].Name(), ev)
		require.False(t, ev.Up, "first event of %s: %+v", devs[i].Name(), ev)
		cmds = append(cmds, fmt.Sprintf("link set %s mtu %d up", devs[i].Name(), 1300+i))
	}
	ipBatch(t, ns, cmds)
	for i, d := range devs {
		ev := waitState(t, chs[i], "MTU and up", func(e LinkEvent) bool { return e.MTU == 1300+i && e.Up })
		assert.Equal(t, d.Index(), ev.Index, "%s got the event of another link: %+v", d.Name(), ev)
		assert.Equal(t, d.Name(), ev.Name, "%s got the event of another link: %+v", d.Name(), ev)
	}
}

// TestWatcherResyncsAfterOverrun gives the watcher's socket the smallest receive buffer the kernel
// allows and changes many TAPs in bursts until the socket overruns (ENOBUFS). The notifications
// lost in the overrun must not matter: after the resync every watch reports its TAP's real final
// state, and a TAP deleted in the burst is reported deleted.
func TestWatcherResyncsAfterOverrun(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	w := newWatcherTest(t, ns, WatcherOptions{ReadBuffer: 1})
	const n = 24
	devs := make([]*Device, n)
	chs := make([]<-chan LinkEvent, n)
	for i := range devs {
		devs[i] = openTest(t, Config{Name: taptest.Name("mo"), Queues: 1, NetNS: ns, MTU: 1500, Watcher: w})
		ch, err := devs[i].Watch(t.Context())
		require.NoError(t, err)
		chs[i] = ch
		next(t, ch)
	}
	victim := devs[n-1]
	var final int
	// Opening the TAPs may have overrun the socket already; the bursts must overrun it again.
	before := w.Overruns()
	for round := 0; round == 0 || w.Overruns() == before; round++ {
		require.NotEqual(t, 20, round, "no overrun after 20 bursts: the test hook did not shrink the receive buffer")
		var cmds []string
		for step := range 10 {
			final = 1000 + 20*round + step
			for _, d := range devs[:n-1] {
				cmds = append(cmds, fmt.Sprintf("link set %s mtu %d", d.Name(), final))
			}
		}
		for _, d := range devs[:n-1] {
			cmds = append(cmds, "link set "+d.Name()+" up")
		}
		if round == 0 {
			cmds = append(cmds, "link del "+victim.Name())
		}
		ipBatch(t, ns, cmds)
	}
	for i, d := range devs[:n-1] {
		waitState(t, chs[i], fmt.Sprintf("%s at MTU %d and up", d.Name(), final),
			func(e LinkEvent) bool { return e.MTU == final && e.Up && !e.Deleted })
	}
	waitState(t, chs[n-1], "the deleted TAP's deletion", func(e LinkEvent) bool { return e.Deleted })
	_, ok := <-chs[n-1]
	assert.False(t, ok, "the deleted TAP's channel stays open")
}

// TestWatchFollowsRename renames a TAP with ip(8): the watch reports the new name for the same
// ifindex, Name follows it, and queues are attached to the renamed TAP (not to a new TAP of the
// old name).
func TestWatchFollowsRename(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	old, renamed := taptest.Name("mr"), taptest.Name("mn")
	d := openTest(t, Config{Name: old, Queues: 1, NetNS: ns})
	ch, err := d.Watch(t.Context())
	require.NoError(t, err)
	next(t, ch)
	taptest.IP(t, ns, "link", "set", old, "name", renamed)
	ev := waitState(t, ch, "the rename", func(e LinkEvent) bool { return e.Name == renamed })
	require.Equal(t, d.Index(), ev.Index, "rename event %+v: want ifindex %d, not deleted", ev, d.Index())
	require.False(t, ev.Deleted, "rename event %+v: want ifindex %d, not deleted", ev, d.Index())
	got := d.Name()
	assert.Equal(t, renamed, got, "Name() = %q after the rename, want %q", got, renamed)
	require.NoError(t, d.SetQueues(3), "SetQueues(3) after the rename")
	l, ok := taptest.ShowLink(t, ns, renamed)
	if !ok || l.LinkInfo.Data.NumQueues != 3 {
		t.Errorf("renamed TAP has %d queues (exists: %v), want 3", l.LinkInfo.Data.NumQueues, ok)
	}
	_, ok = taptest.ShowLink(t, ns, old)
	assert.False(t, ok, "a TAP named %s exists again after the rename", old)
	require.NoError(t, d.SetUp(true))
	waitState(t, ch, "up under the new name", func(e LinkEvent) bool { return e.Up && e.Name == renamed })
}

// TestWatcherRefusals: a device cannot be opened with the watcher of another namespace, and a
// closed watcher ends its watches and takes no new ones.
func TestWatcherRefusals(t *testing.T) {
	taptest.Require(t)
	ns, other := taptest.NetNS(t), taptest.NetNS(t)
	w := newWatcherTest(t, other, WatcherOptions{})
	if _, err := Open(Config{Name: taptest.Name("mx"), Queues: 1, NetNS: ns, Watcher: w, Logger: quietLogger()}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Open with another namespace's watcher: %v, want EINVAL", err)
	}
	if _, err := NewWatcher("no-such-netns-"+taptest.Name("x"), WatcherOptions{}); !errors.Is(err, unix.ENOENT) {
		t.Errorf("NewWatcher(missing namespace): %v, want ENOENT", err)
	}
	d := openTest(t, Config{Name: taptest.Name("mx"), Queues: 1, NetNS: other, Watcher: w})
	ch, err := d.Watch(context.Background())
	require.NoError(t, err)
	next(t, ch)
	assert.NoError(t, w.Close(), "Close")
	// A snapshot sent before the close (the kernel may still report the new TAP's late
	// changes, such as its features) may be taken first; then the channel must close.
	waitClosed(t, ch, "the watch of a closed watcher")
	_, err = d.Watch(context.Background())
	assert.ErrorIs(t, err, unix.ENODEV, "Watch on a closed watcher: %v, want ENODEV", err)
	// The device shares the watcher's namespace handle, which stays open while the device is:
	// it still configures its TAP, in its namespace.
	require.NoError(t, d.SetMTU(1400), "SetMTU after the watcher closed")
	if l, ok := taptest.ShowLink(t, other, d.Name()); !ok || l.MTU != 1400 {
		t.Errorf("TAP in %s after SetMTU(1400): %+v (exists: %v)", other, l, ok)
	}
	_, err = Open(Config{Name: taptest.Name("mx"), Queues: 1, NetNS: other, Watcher: w, Logger: quietLogger()})
	assert.ErrorIs(t, err, unix.ENODEV, "Open with a closed watcher: %v, want ENODEV", err)
}

// TestSharedWatcherTwoWatchesOfOneTAP: two Watches of one TAP on a shared Watcher both follow it,
// and ending one leaves the other.
func TestSharedWatcherTwoWatchesOfOneTAP(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	w := newWatcherTest(t, ns, WatcherOptions{})
	d := openTest(t, Config{Name: taptest.Name("m2"), Queues: 1, NetNS: ns, MTU: 1500, Watcher: w})
	ctx1, cancel1 := context.WithCancel(t.Context())
	ch1, err := d.Watch(ctx1)
	require.NoError(t, err)
	ch2, err := d.Watch(t.Context())
	require.NoError(t, err)
	next(t, ch1)
	next(t, ch2)
	require.NoError(t, d.SetMTU(1300))
	for _, ch := range []<-chan LinkEvent{ch1, ch2} {
		waitState(t, ch, "MTU 1300", func(e LinkEvent) bool { return e.MTU == 1300 })
	}
	cancel1()
	for range ch1 {
	}
	require.NoError(t, d.SetMTU(1200))
	waitState(t, ch2, "MTU 1200 on the remaining watch", func(e LinkEvent) bool { return e.MTU == 1200 })
}
