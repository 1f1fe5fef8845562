package daemon

import (
	"context"
	"errors"
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
		if out, err := exec.Command("ip", "-n", ns, "link", "set", name, "up").CombinedOutput(); err != nil {
			t.Fatalf("ip link set %s up: %v: %s", name, err, out)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	if r.HFunc != vnic.RSSHashTop || string(r.HKey) != string(vnic.DefaultRSSKey[:]) || len(r.Indir) != vnic.RSSIndirSize {
		t.Fatalf("RSS = %+v", r)
	}
	for i, q := range r.Indir {
		if q != uint32(i%3) {
			t.Fatalf("entry %d = %d, want the default spread over 3 queues", i, q)
		}
	}
	all2 := make([]uint32, vnic.RSSIndirSize)
	for i := range all2 {
		all2[i] = 2
	}
	d.mu.Lock()
	err = d.ports["hr0"].vp.SetRSS(vnic.RSSUpdate{Indir: all2})
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if r, err = b.RSS(ctx, genl.Caller{}, dev); err != nil || r.Indir[7] != 2 {
		t.Fatalf("RSS after SetRSS = %+v, %v", r, err)
	}
	err = b.SetChannels(ctx, genl.Caller{}, dev, genl.Update[genl.Channels]{
		Apply: func(cur genl.Channels) (genl.Channels, bool, error) { cur.Combined = 2; return cur, true, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if r, err = b.RSS(ctx, genl.Caller{}, dev); err != nil || r.Indir[1] != 1 || r.Indir[2] != 0 {
		t.Fatalf("RSS after the channel change = %+v, %v; want the default over 2 queues", r, err)
	}
	if _, err := b.RSS(ctx, genl.Caller{}, genl.Device{Name: "nosuch0", NetNS: dev.NetNS}); !errors.Is(err, unix.ENODEV) {
		t.Errorf("RSS of an unknown port: %v, want ENODEV", err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.RSS(ctx, genl.Caller{}, dev)
	if err != nil || r.Indir[3] != 1 || r.Indir[4] != 0 || !slices.Equal(r.HKey, key) {
		t.Fatalf("RSS after the change = %+v, %v", r, err)
	}
	if len(changed) != 1 || !slices.Equal(changed[0].Indir, r.Indir) || !slices.Equal(changed[0].HKey, key) {
		t.Fatalf("Changed calls %+v, want one with the new table and key", changed)
	}
	if err := set(func(cur genl.RSSSetting) genl.RSSSetting { return cur }); err != nil || len(changed) != 1 {
		t.Fatalf("no-op: %v, %d Changed calls", err, len(changed))
	}
	for _, tc := range []struct {
		name  string
		f     func(cur genl.RSSSetting) genl.RSSSetting
		errno unix.Errno
	}{
		{"xor", func(cur genl.RSSSetting) genl.RSSSetting { cur.HFunc = 2; return cur }, unix.EOPNOTSUPP},
		{"queue 3 of 3", func(cur genl.RSSSetting) genl.RSSSetting { cur.Indir[9] = 3; return cur }, unix.EINVAL},
	} {
		if err := set(tc.f); !errors.Is(err, tc.errno) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
		}
	}
	if r2, _ := b.RSS(ctx, genl.Caller{}, dev); !slices.Equal(r2.Indir, r.Indir) || len(changed) != 1 {
		t.Errorf("a refused change changed the table or notified: %v, %d Changed calls", r2.Indir, len(changed))
	}

	err = b.SetChannels(ctx, genl.Caller{}, dev, genl.Update[genl.Channels]{
		Apply: func(cur genl.Channels) (genl.Channels, bool, error) { cur.Combined = 2; return cur, true, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err = b.RSS(ctx, genl.Caller{}, dev)
	if err != nil || r.Indir[5] != 1 || r.Indir[6] != 0 || !slices.Equal(r.HKey, key) {
		t.Fatalf("after the channel change: %+v, %v; want the default over 2 queues and the key kept", r, err)
	}
	// IFF_RXFH_CONFIGURED outlives the table mana reset: the default over 2 queues names queue
	// 1, so one queue is too few (ethtool_check_max_channel), until the default is asked for.
	to1 := genl.Update[genl.Channels]{
		Apply: func(cur genl.Channels) (genl.Channels, bool, error) { cur.Combined = 1; return cur, true, nil },
	}
	var ge *genl.Error
	if err := b.SetChannels(ctx, genl.Caller{}, dev, to1); !errors.As(err, &ge) || ge.Errno != unix.EINVAL ||
		ge.Message != "requested channel counts are too low for existing indirection table (1)" {
		t.Errorf("channels 1 under the configured table: %v", err)
	}
	if err := set(func(cur genl.RSSSetting) genl.RSSSetting { cur.Configured = false; return cur }); err != nil {
		t.Fatal(err)
	}
	if len(changed) != 1 {
		t.Errorf("clearing IFF_RXFH_CONFIGURED alone notified: %d Changed calls", len(changed))
	}
	if err := b.SetChannels(ctx, genl.Caller{}, dev, to1); err != nil {
		t.Errorf("channels 1 after the default: %v", err)
	}

	// Down: mana_set_rxfh refuses while the port is not up.
	if out, err := exec.Command("ip", "-n", ns, "link", "set", dev.Name, "down").CombinedOutput(); err != nil {
		t.Fatalf("ip link set down: %v: %s", err, out)
	}
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
	if err := set(func(cur genl.RSSSetting) genl.RSSSetting { cur.Indir[0] = 1; return cur }); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("set while down: %v, want EOPNOTSUPP", err)
	}
}
