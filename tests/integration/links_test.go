package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRenamedTAPFollowsIndex renames a configuration-file port's TAP and a runtime port's TAP
// with `ip link set NAME name NEW`: the port is its ifindex, so lookups by the new name work (the
// manad family and the ethtool family), the old name gives ENODEV, the list shows the new name,
// `ip link set NEW up` brings the port up, and the state file keeps a runtime port's spec under
// its new name.
func TestRenamedTAPFollowsIndex(t *testing.T) {
	ns := harness.Name("mrn", "")
	conf, confNew := harness.Name("rc", "a"), harness.Name("rc", "b")
	rt, rtNew := harness.Name("rr", "a"), harness.Name("rr", "b")
	dir := t.TempDir()
	d := harness.Start(t, dir, "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"rn\"\n", conf, ns), ns)
	c := d.Client(ns)
	ctx := context.Background()
	created, err := c.CreatePort(ctx, genl.PortSpec{Name: rt, NetNS: ns, Segment: "rn"})
	require.NoError(t, err)
	// A TAP can only be renamed while it is down; the runtime port came up.
	harness.Run(t, ns, "ip", "link", "set", rt, "down")
	harness.Eventually(t, "the runtime port down", func() bool {
		i, err := c.Port(ctx, client.Interface{Name: rt})
		return err == nil && !i.AdminUp
	})
	before, err := c.Port(ctx, client.Interface{Name: conf})
	require.NoError(t, err)

	var sub *client.Subscription
	require.NoError(t, harness.InNetNS(ns, func() (err error) { sub, err = c.Subscribe(ctx); return err }))
	defer sub.Close()
	harness.Run(t, ns, "ip", "link", "set", conf, "name", confNew)
	// The rename is announced: a change event naming the port by its new name, same ifindex.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for announced := false; !announced; {
		ns, err := sub.Next(wctx)
		require.NoError(t, err, "no change event for the rename of %s", conf)
		for _, n := range ns {
			if n.Kind == client.PortChanged && n.Port != nil && n.Port.Device.Index == before.Device.Index {
				require.Equal(t, confNew, n.Port.Device.Name, "change event for ifindex %d names", before.Device.Index)
				announced = true
			}
		}
	}
	harness.Run(t, ns, "ip", "link", "set", rt, "name", rtNew)
	harness.Eventually(t, "the list to show the new names", func() bool {
		ports, err := c.Ports(ctx)
		require.NoError(t, err)
		names := map[string]bool{}
		for _, p := range ports {
			names[p.Device.Name] = true
		}
		return len(ports) == 2 && names[confNew] && names[rtNew]
	})
	for _, x := range []struct {
		old, renamed string
		index        uint32
	}{{conf, confNew, before.Device.Index}, {rt, rtNew, created.Device.Index}} {
		got, err := c.Port(ctx, client.Interface{Name: x.renamed})
		require.NoError(t, err, "port %s (renamed from %s)", x.renamed, x.old)
		assert.Equal(t, x.index, got.Device.Index, "port %s: device %+v, want ifindex %d", x.renamed, got.Device, x.index)
		assert.Equal(t, x.renamed, got.Device.Name, "port %s: device %+v, want ifindex %d", x.renamed, got.Device, x.index)
		_, err = c.Rings(ctx, client.Interface{Name: x.renamed})
		assert.NoError(t, err, "ethtool rings of %s", x.renamed)
		_, err = c.Port(ctx, client.Interface{Name: x.old})
		assert.ErrorIs(t, err, unix.ENODEV, "port %s after its rename to %s: %v, want ENODEV", x.old, x.renamed, err)
		_, err = c.Rings(ctx, client.Interface{Name: x.old})
		assert.ErrorIs(t, err, unix.ENODEV, "ethtool rings of %s after its rename: %v, want ENODEV", x.old, err)
	}

	harness.Run(t, ns, "ip", "link", "set", confNew, "up")
	harness.Eventually(t, "the renamed port up", func() bool {
		i, err := c.Port(ctx, client.Interface{Name: confNew})
		return err == nil && i.AdminUp && i.Running
	})
	// Changes made with ip link are saved a moment later. The runtime port is saved under its
	// new name; the configuration-file port under its configuration name, now admin-up.
	var state string
	harness.Eventually(t, "the state file to follow", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "state", "state.json"))
		require.NoError(t, err)
		state = string(b)
		return strings.Contains(state, `"`+rtNew+`"`) && !strings.Contains(state, `"`+rt+`"`) &&
			strings.Contains(state, `"`+conf+`"`) && !strings.Contains(state, `"`+confNew+`"`) &&
			strings.Contains(state, `"admin_up": true`)
	})
	assert.Contains(t, d.Log(), "port renamed", "no log line for the renames")
}

// TestManyPortsBatchUp is the stuck-port case of issue 13: many ports in one namespace, all
// brought up (and down, and up again) at once with one `ip -batch`; every port must report the
// state its TAP has. The wait is a generous correctness bound, not a performance target.
func TestManyPortsBatchUp(t *testing.T) {
	const n = 200
	ns := harness.Name("mmp", "")
	names := make([]string, n)
	var cfg strings.Builder
	for i := range names {
		names[i] = fmt.Sprintf("b%d.%d", os.Getpid()%10000, i)
		fmt.Fprintf(&cfg, "[[port]]\nname = %q\nnetns = %q\nsegment = %[1]q\nqueues = 1\nmax_queues = 1\nrx_ring = 128\ntx_ring = 128\npersistent = false\n\n", names[i], ns)
	}
	d := harness.Start(t, "", "", cfg.String(), ns)
	c := d.Client(ns)
	for _, up := range []bool{true, false, true} {
		word := map[bool]string{true: "up", false: "down"}[up]
		var batch strings.Builder
		for _, name := range names {
			fmt.Fprintf(&batch, "link set %s %s\n", name, word)
		}
		cmd := exec.Command("ip", "-n", ns, "-batch", "-")
		cmd.Stdin = strings.NewReader(batch.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ip -batch: %v: %s", err, out)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			ports, err := c.Ports(context.Background())
			require.NoError(t, err)
			var wrong []string
			for _, p := range ports {
				if p.AdminUp != up {
					wrong = append(wrong, p.Device.Name)
				}
			}
			if len(ports) == n && len(wrong) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d ports listed, %d not admin-%s after `ip -batch … %s`: %v", len(ports), len(wrong), word, word, wrong)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestRenameToAnotherPortsNameIsUndone: port names are unique across namespaces in manad, so
// renaming a TAP to the name of a port in another namespace is undone (the TAP gets its name
// back) and logged; the port keeps working under its name.
func TestRenameToAnotherPortsNameIsUndone(t *testing.T) {
	ns1, ns2 := harness.Name("mu1", ""), harness.Name("mu2", "")
	x, y := harness.Name("ux", ""), harness.Name("uy", "")
	d := harness.Start(t, "", "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"u\"\n\n[[port]]\nname = %q\nnetns = %q\nsegment = \"u\"\n",
		x, ns1, y, ns2), ns1, ns2)
	c := d.Client(ns1)
	harness.Run(t, ns1, "ip", "link", "set", x, "name", y)
	harness.Eventually(t, "the TAP renamed back", func() bool {
		_, err := harness.RunErr(ns1, "ip", "link", "show", "dev", x)
		return err == nil && strings.Contains(d.Log(), "renaming it back")
	})
	if _, err := c.Port(context.Background(), client.Interface{Name: x}); err != nil {
		t.Errorf("port %s after the undone rename: %v", x, err)
	}
	if _, err := c.Port(context.Background(), client.Interface{Name: y}); !errors.Is(err, unix.ENODEV) {
		t.Errorf("port %s looked up from %s: %v, want ENODEV (it lives in %s)", y, ns1, err, ns2)
	}
	harness.Run(t, ns1, "ip", "link", "set", x, "up")
	harness.Eventually(t, "the port up", func() bool {
		i, err := c.Port(context.Background(), client.Interface{Name: x})
		return err == nil && i.AdminUp
	})
}
