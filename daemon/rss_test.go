package daemon

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startRSSPort runs a daemon with one 3-queue port, brings it up and returns the daemon, the
// port's device and the name of its network namespace.
func startRSSPort(t *testing.T) (*Daemon, genl.Device, string) {
	t.Helper()
	taptest.Require(t)
	ns := taptest.NetNS(t)
	dir := t.TempDir()
	doc := fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q

[[port]]
name = "hr0"
netns = %q
persistent = false
queues = 3
`, filepath.Join(dir, "manad.sock"), filepath.Join(dir, "state"), ns)
	d := runTest(t, doc, Options{})

	// Ports start down; bring the TAPs up as an administrator would and let the link watchers
	// open the ports.
	names := []string{"hr0"}
	for _, name := range names {
		out, err := exec.Command("ip", "-n", ns, "link", "set", name, "up").CombinedOutput()
		require.NoError(t, err, "ip link set %s up: %v: %s", name, err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d.mu.Lock()
		up := 0
		for _, name := range names {
			if p := d.ports[name]; p != nil && p.vp.State().Running {
				up++
			}
		}
		d.mu.Unlock()
		if up == len(names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d ports came up", up, len(names))
		}
		time.Sleep(10 * time.Millisecond)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	return d, d.ports["hr0"].device(), ns
}

// TestRSSBackend: the backend reports the running port's Toeplitz key and default table over its
// queues, a table set on the port shows up in RSS_GET, and a channel change through the backend
// restores the default spread over the new queue count.
func TestRSSBackend(t *testing.T) {
	d, dev, _ := startRSSPort(t)
	b := (*backend)(d)
	ctx := context.Background()
	r, err := b.RSS(ctx, genl.Caller{}, dev)
	require.NoError(t, err)
	require.Equal(t, uint32(vnic.RSSHashTop), r.HFunc, "RSS = %+v", r)
	require.Equal(t, string(vnic.DefaultRSSKey[:]), string(r.HKey), "RSS = %+v", r)
	require.Len(t, r.Indir, vnic.RSSIndirSize, "RSS = %+v", r)
	for i, q := range r.Indir {
		require.Equal(t, uint32(i%3), q, "entry %d = %d, want the default spread over 3 queues", i, q)
	}
	all2 := make([]uint32, vnic.RSSIndirSize)
	for i := range all2 {
		all2[i] = 2
	}
	d.mu.Lock()
	err = d.ports["hr0"].vp.SetRSS(vnic.RSSUpdate{Indir: all2})
	d.mu.Unlock()
	require.NoError(t, err)
	r, err = b.RSS(ctx, genl.Caller{}, dev)
	require.NoError(t, err, "RSS after SetRSS")
	require.Equal(t, uint32(2), r.Indir[7], "RSS after SetRSS = %+v", r)
	err = b.SetChannels(ctx, genl.Caller{}, dev, genl.Update[genl.Channels]{
		Apply: func(cur genl.Channels) (genl.Channels, bool, error) { cur.Combined = 2; return cur, true, nil },
	})
	require.NoError(t, err)
	r, err = b.RSS(ctx, genl.Caller{}, dev)
	require.NoError(t, err, "RSS after the channel change")
	require.Equal(t, uint32(1), r.Indir[1], "RSS after the channel change = %+v; want the default over 2 queues", r)
	require.Equal(t, uint32(0), r.Indir[2], "RSS after the channel change = %+v; want the default over 2 queues", r)
	_, err = b.RSS(ctx, genl.Caller{}, genl.Device{Name: "nosuch0", NetNS: dev.NetNS})
	assert.ErrorIs(t, err, unix.ENODEV, "RSS of an unknown port: %v, want ENODEV", err)
}

// TestRSSSetBackend: SetRSS through the backend onto a real port with mana_set_rxfh's rules:
// a change reaches the port (RSS_GET shows it) and calls Changed once with the port's state; a
// no-op reaches neither; the driver refuses a hash function other than Toeplitz (EOPNOTSUPP), an
// entry naming a queue the port does not have (EINVAL) and any change while the port is down
// (EOPNOTSUPP), changing nothing. A channel change restores the default table; the key stays.
func TestRSSSetBackend(t *testing.T) {
	d, dev, ns := startRSSPort(t)
	b := (*backend)(d)
	ctx := context.Background()
	var changed []genl.RSSSetting
	set := func(f func(cur genl.RSSSetting) genl.RSSSetting) error {
		return b.SetRSS(ctx, genl.Caller{}, dev, genl.Update[genl.RSSSetting]{
			Apply: func(cur genl.RSSSetting) (genl.RSSSetting, bool, error) {
				hf := cur.HFunc
				c := cur
				c.Indir, c.HKey = slices.Clone(cur.Indir), slices.Clone(cur.HKey)
				next := f(c)
				return next, !slices.Equal(next.Indir, cur.Indir) || !slices.Equal(next.HKey, cur.HKey) ||
					(next.HFunc != 0 && next.HFunc != hf), nil
			},
			Changed: func(v genl.RSSSetting) { changed = append(changed, v) },
		})
	}
	key := make([]byte, vnic.RSSKeySize)
	for i := range key {
		key[i] = byte(i * 7)
	}
	err := set(func(cur genl.RSSSetting) genl.RSSSetting {
		if cur.RxRings != 3 || len(cur.Indir) != vnic.RSSIndirSize || cur.HFunc != vnic.RSSHashTop {
			t.Errorf("current setting %+v, want 3 rings, %d entries, Toeplitz", cur, vnic.RSSIndirSize)
		}
		for i := range cur.Indir {
			cur.Indir[i] = uint32(i % 2)
		}
		cur.HKey, cur.HFunc, cur.Configured = key, 0, true
		return cur
	})
	require.NoError(t, err)
	r, err := b.RSS(ctx, genl.Caller{}, dev)
	require.NoError(t, err, "RSS after the change = %+v, %v", r, err)
	require.Equal(t, uint32(1), r.Indir[3], "RSS after the change = %+v, %v", r, err)
	require.Equal(t, uint32(0), r.Indir[4], "RSS after the change = %+v, %v", r, err)
	require.True(t, slices.Equal(r.HKey, key), "RSS after the change = %+v, %v", r, err)
	require.Len(t, changed, 1, "Changed calls %+v, want one with the new table and key", changed)
	require.True(t, slices.Equal(changed[0].Indir, r.Indir), "Changed calls %+v, want one with the new table and key", changed)
	require.True(t, slices.Equal(changed[0].HKey, key), "Changed calls %+v, want one with the new table and key", changed)
	err = set(func(cur genl.RSSSetting) genl.RSSSetting { return cur })
	require.NoError(t, err, "no-op: %v, %d Changed calls", err, len(changed))
	require.Len(t, changed, 1, "no-op: %v, %d Changed calls", err, len(changed))
	for _, tc := range []struct {
		name  string
		f     func(cur genl.RSSSetting) genl.RSSSetting
		errno unix.Errno
	}{
		{"xor", func(cur genl.RSSSetting) genl.RSSSetting { cur.HFunc = 2; return cur }, unix.EOPNOTSUPP},
		{"queue 3 of 3", func(cur genl.RSSSetting) genl.RSSSetting { cur.Indir[9] = 3; return cur }, unix.EINVAL},
	} {
		assert.ErrorIs(t, set(tc.f), tc.errno, "%s", tc.name)
	}
	r2, _ := b.RSS(ctx, genl.Caller{}, dev)
	assert.Equal(t, r.Indir, r2.Indir, "a refused change changed the table")
	assert.Len(t, changed, 1, "a refused change notified: %d Changed calls", len(changed))

	err = b.SetChannels(ctx, genl.Caller{}, dev, genl.Update[genl.Channels]{
		Apply: func(cur genl.Channels) (genl.Channels, bool, error) { cur.Combined = 2; return cur, true, nil },
	})
	require.NoError(t, err)
	r, err = b.RSS(ctx, genl.Caller{}, dev)
	require.NoError(t, err, "after the channel change: %+v, %v; want the default over 2 queues and the key kept", r, err)
	require.Equal(t, uint32(1), r.Indir[5], "after the channel change: %+v, %v; want the default over 2 queues and the key kept", r, err)
	require.Equal(t, uint32(0), r.Indir[6], "after the channel change: %+v, %v; want the default over 2 queues and the key kept", r, err)
	require.True(t, slices.Equal(r.HKey, key), "after the channel change: %+v, %v; want the default over 2 queues and the key kept", r, err)
	// IFF_RXFH_CONFIGURED outlives the table mana reset: the default over 2 queues names queue
	// 1, so one queue is too few (ethtool_check_max_channel), until the default is asked for.
	to1 := genl.Update[genl.Channels]{
		Apply: func(cur genl.Channels) (genl.Channels, bool, error) { cur.Combined = 1; return cur, true, nil },
	}
	var ge *genl.Error
	if err := b.SetChannels(ctx, genl.Caller{}, dev, to1); assert.ErrorAs(t, err, &ge, "channels 1 under the configured table") {
		assert.Equal(t, unix.EINVAL, ge.Errno, "channels 1 under the configured table: %v", err)
		assert.Equal(t, "requested channel counts are too low for existing indirection table (1)", ge.Message, "channels 1 under the configured table")
	}
	require.NoError(t, set(func(cur genl.RSSSetting) genl.RSSSetting { cur.Configured = false; return cur }))
	assert.Len(t, changed, 1, "clearing IFF_RXFH_CONFIGURED alone notified: %d Changed calls", len(changed))
	assert.NoError(t, b.SetChannels(ctx, genl.Caller{}, dev, to1), "channels 1 after the default")

	// Down: mana_set_rxfh refuses while the port is not up.
	out, err := exec.Command("ip", "-n", ns, "link", "set", dev.Name, "down").CombinedOutput()
	require.NoError(t, err, "ip link set down: %v: %s", err, out)
	deadline := time.Now().Add(30 * time.Second)
	for {
		d.mu.Lock()
		running := d.ports["hr0"].vp.State().Running
		d.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("port still running after link down")
		}
		time.Sleep(10 * time.Millisecond)
	}
	err = set(func(cur genl.RSSSetting) genl.RSSSetting { cur.Indir[0] = 1; return cur })
	assert.ErrorIs(t, err, unix.EOPNOTSUPP, "set while down: %v, want EOPNOTSUPP", err)
}
