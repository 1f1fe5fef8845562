package daemon

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic"
)

// TestRSSBackend: the backend reports the running port's Toeplitz key and default table over its
// queues, a table set on the port shows up in RSS_GET, and a channel change through the backend
// restores the default spread over the new queue count.
func TestRSSBackend(t *testing.T) {
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

	b := (*backend)(d)
	ctx := context.Background()
	d.mu.Lock()
	dev := d.ports["hr0"].device()
	d.mu.Unlock()
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
