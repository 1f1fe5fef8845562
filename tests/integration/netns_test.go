package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNetNSOutlivesPort (issue 12): deleting a port leaves its namespace alone (a namespace may
// hold more than manad's TAP), and the namespace manad created stays an ordinary `ip netns` one:
// ip can add namespaces next to it and delete it.
func TestNetNSOutlivesPort(t *testing.T) {
	ns, other, name := harness.Name("mnd", ""), harness.Name("mnu", ""), harness.Name("mnd", "0")
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	require.Error(t, err, "namespace %s exists before the test", ns)
	t.Cleanup(func() { _, _ = harness.RunErr("", "ip", "netns", "del", other) })
	d := harness.Start(t, "", "", statePort(name, ns), ns)
	require.NoError(t, d.Client(ns).DeletePort(context.Background(), client.Interface{Name: name}))
	require.Contains(t, harness.Run(t, "", "ip", "netns", "list"), ns, "namespace %s gone with its port", ns)
	assert.NotContains(t, harness.Run(t, ns, "ip", "-o", "link", "show"), name, "TAP %s still in %s after the port was deleted", name, ns)
	harness.Run(t, "", "ip", "netns", "add", other)
	harness.Run(t, "", "ip", "netns", "del", ns)
	harness.Run(t, "", "ip", "netns", "del", other)
	out := harness.Run(t, "", "ip", "netns", "list")
	assert.NotContains(t, out, ns, "namespaces left after ip netns del: %s", out)
	assert.NotContains(t, out, other, "namespaces left after ip netns del: %s", out)
}
