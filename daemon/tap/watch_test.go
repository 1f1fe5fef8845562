package tap

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// next returns the next event, failing the test if none comes within a generous deadline.
func next(t *testing.T, ch <-chan LinkEvent) LinkEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "watch channel closed")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no link event")
	}
	panic("unreachable")
}

// waitClosed reads events until ch closes, failing the test if it stays open past a generous
// deadline.
func waitClosed(t *testing.T, ch <-chan LinkEvent, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("%s stays open", what)
		}
	}
}

// waitState reads events until one satisfies cond (events are coalesced snapshots, so
// intermediate states may or may not be seen).
func waitState(t *testing.T, ch <-chan LinkEvent, what string, cond func(LinkEvent) bool) LinkEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "watch channel closed while waiting for %s", what)
			if cond(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestWatchFollowsLinkState changes the TAP both through the Device and with ip(8), as an
// administrator would, and checks the watcher reports each change, then the deletion.
func TestWatchFollowsLinkState(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	d := openTest(t, Config{Name: name, Queues: 2, NetNS: ns, MTU: 1500})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := d.Watch(ctx)
	require.NoError(t, err, "Watch")
	first := next(t, ch)
	require.False(t, first.Up, "first event %+v: want the current state (down, MTU 1500)", first)
	require.Equal(t, 1500, first.MTU, "first event %+v: want the current state (down, MTU 1500)", first)
	require.Equal(t, name, first.Name, "first event %+v: want the current state (down, MTU 1500)", first)
	require.Equal(t, d.Index(), first.Index, "first event %+v: want the current state (down, MTU 1500)", first)
	require.False(t, first.Deleted, "first event %+v: want the current state (down, MTU 1500)", first)

	steps := []struct {
		what string
		do   func() error
		want func(LinkEvent) bool
	}{
		{"SetUp(true)", func() error { return d.SetUp(true) }, func(e LinkEvent) bool { return e.Up }},
		{"ip link set mtu 2000", func() error { _, err := taptest.TryIP(ns, "link", "set", name, "mtu", "2000"); return err },
			func(e LinkEvent) bool { return e.MTU == 2000 && e.Up }},
		{"SetMTU(1400)", func() error { return d.SetMTU(1400) }, func(e LinkEvent) bool { return e.MTU == 1400 }},
		{"ip link set down", func() error { _, err := taptest.TryIP(ns, "link", "set", name, "down"); return err },
			func(e LinkEvent) bool { return !e.Up && e.MTU == 1400 }},
		{"ip link set up", func() error { _, err := taptest.TryIP(ns, "link", "set", name, "up"); return err },
			func(e LinkEvent) bool { return e.Up }},
		{"SetMAC", func() error { return d.SetMAC(net.HardwareAddr{2, 1, 2, 3, 4, 5}) },
			func(e LinkEvent) bool { return e.MAC.String() == "02:01:02:03:04:05" }},
	}
	for _, s := range steps {
		require.NoError(t, s.do(), "%s", s.what)
		ev := waitState(t, ch, s.what, s.want)
		require.False(t, ev.Deleted, "%s: event says deleted: %+v", s.what, ev)
	}
	// Refused values change nothing and send nothing.
	for _, mtu := range []int{MinMTU - 1, MaxMTU + 1} {
		err := d.SetMTU(mtu)
		assert.ErrorIs(t, err, unix.EINVAL, "SetMTU(%d): %v, want EINVAL", mtu, err)
	}
	err = d.SetMAC(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	assert.ErrorIs(t, err, unix.EADDRNOTAVAIL, "SetMAC(broadcast): %v, want EADDRNOTAVAIL", err)
	select {
	case ev := <-ch:
		t.Errorf("event after refused changes: %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}

	taptest.IP(t, ns, "link", "del", name)
	ev := waitState(t, ch, "deletion", func(e LinkEvent) bool { return e.Deleted })
	assert.Equal(t, d.Index(), ev.Index, "deleted event for index")
	_, ok := <-ch
	assert.False(t, ok, "channel not closed after the deleted event")
}

// TestWatchCoalescesToLatest changes the MTU many times without reading: the reader then sees
// the final state, not a backlog.
func TestWatchCoalescesToLatest(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	d := openTest(t, Config{Name: name, Queues: 1, NetNS: ns, MTU: 1500})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := d.Watch(ctx)
	require.NoError(t, err)
	for mtu := 1000; mtu < 1050; mtu++ {
		require.NoError(t, d.SetMTU(mtu))
	}
	ev := waitState(t, ch, "MTU 1049", func(e LinkEvent) bool { return e.MTU == 1049 })
	require.False(t, ev.Deleted, "%+v", ev)
	select {
	case ev := <-ch:
		t.Errorf("stale event after the latest state: %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
	// Cancelling ends the watch.
	cancel()
	select {
	case _, ok := <-ch:
		assert.False(t, ok, "event after cancel")
	case <-time.After(10 * time.Second):
		t.Fatal("channel not closed after cancel")
	}
	d.Close()
	_, err = d.Watch(context.Background())
	assert.ErrorIs(t, err, unix.ENODEV, "Watch after Close: %v, want ENODEV", err)
}

// TestWatchOnlyItsOwnLink checks that changes of another link in the namespace are not reported.
func TestWatchOnlyItsOwnLink(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	a := openTest(t, Config{Name: taptest.Name("mt"), Queues: 1, NetNS: ns})
	b := openTest(t, Config{Name: taptest.Name("mt"), Queues: 1, NetNS: ns})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := a.Watch(ctx)
	require.NoError(t, err)
	next(t, ch)
	for i := range 5 {
		require.NoError(t, b.SetMTU(1300+i))
	}
	require.NoError(t, a.SetMTU(1234))
	ev := next(t, ch)
	assert.Equal(t, 1234, ev.MTU, "event %+v: want only a's MTU change (%s)", ev, fmt.Sprint(a.Index()))
	assert.Equal(t, a.Index(), ev.Index, "event %+v: want only a's MTU change (%s)", ev, fmt.Sprint(a.Index()))
}

// TestCloseEndsWatch: a persistent TAP outlives Close, but its watches do not.
func TestCloseEndsWatch(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("mt")
	d := openTest(t, Config{Name: name, Queues: 1, NetNS: ns, Persistent: true})
	ch, err := d.Watch(context.Background())
	require.NoError(t, err)
	next(t, ch)
	require.NoError(t, d.Close())
	select {
	case ev, ok := <-ch:
		assert.False(t, ok, "event after Close: %+v", ev)
	case <-time.After(10 * time.Second):
		t.Fatal("watch still running after Close")
	}
	taptest.IP(t, ns, "link", "del", name)
}
