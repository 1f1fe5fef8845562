package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
)

// TestNetNSOutlivesPort (issue 12): deleting a port leaves its namespace alone (a namespace may
// hold more than manad's TAP), and the namespace manad created stays an ordinary `ip netns` one:
// ip can add namespaces next to it and delete it.
func TestNetNSOutlivesPort(t *testing.T) {
	ns, other, name := harness.Name("mnd", ""), harness.Name("mnu", ""), harness.Name("mnd", "0")
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
		t.Fatalf("namespace %s exists before the test", ns)
	}
	t.Cleanup(func() { _, _ = harness.RunErr("", "ip", "netns", "del", other) })
	d := harness.Start(t, "", "", statePort(name, ns), ns)
	if err := d.Client(ns).DeletePort(context.Background(), client.Interface{Name: name}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(harness.Run(t, "", "ip", "netns", "list"), ns) {
		t.Fatalf("namespace %s gone with its port", ns)
	}
	if out := harness.Run(t, ns, "ip", "-o", "link", "show"); strings.Contains(out, name) {
		t.Errorf("TAP %s still in %s after the port was deleted: %s", name, ns, out)
	}
	harness.Run(t, "", "ip", "netns", "add", other)
	harness.Run(t, "", "ip", "netns", "del", ns)
	harness.Run(t, "", "ip", "netns", "del", other)
	if out := harness.Run(t, "", "ip", "netns", "list"); strings.Contains(out, ns) || strings.Contains(out, other) {
		t.Errorf("namespaces left after ip netns del: %s", out)
	}
}
