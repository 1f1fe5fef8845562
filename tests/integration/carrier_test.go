package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ipLink is what `ip -j link show` reports about a link's state.
type ipLink struct {
	Flags     []string `json:"flags"`
	OperState string   `json:"operstate"`
}

func showLink(t *testing.T, ns, dev string) ipLink {
	t.Helper()
	var l []ipLink
	out := harness.Run(t, ns, "ip", "-j", "link", "show", "dev", dev)
	err := json.Unmarshal([]byte(out), &l)
	require.NoError(t, err, "ip -j link show %s: %v: %s", dev, err, out)
	require.Len(t, l, 1, "ip -j link show %s: %v: %s", dev, err, out)
	return l[0]
}

// carrier reports whether the link has a carrier by its flags, failing on an inconsistent view.
func carrier(t *testing.T, ns, dev string) bool {
	t.Helper()
	l := showLink(t, ns, dev)
	on, off := slices.Contains(l.Flags, "LOWER_UP"), slices.Contains(l.Flags, "NO-CARRIER")
	require.NotEqual(t, off, on, "%s: flags %v: want exactly one of LOWER_UP and NO-CARRIER", dev, l.Flags)
	if on != (l.OperState == "UP") {
		assert.Equal(t, "UNKNOWN", l.OperState, "%s: flags %v but operstate", dev, l.Flags)
	}
	return on
}

// TestCarrierFollowsAttach: the TAP has a carrier while its port passes traffic. An attach fault
// armed "always" makes a reconfiguration leave the port detached with the reset work failing:
// the link shows NO-CARRIER (operstate DOWN) the whole time, and the peer's ping goes
// unanswered. Once the fault is off the reset restores the port and the carrier comes back.
func TestCarrierFollowsAttach(t *testing.T) {
	p := startPair(t, "", "")
	p.ping(t)
	require.True(t, carrier(t, p.nsB, p.portB), "a running port has no carrier")
	_, manactl := harness.Binaries(t)
	mctl := func(args ...string) (string, error) {
		return harness.RunErr(p.nsB, append([]string{"env", "MANAD_SOCKET=" + p.d.Socket, manactl}, args...)...)
	}
	if out, err := mctl("fault", p.portB, "attach", "always"); err != nil {
		t.Fatalf("manactl fault: %v\n%s", err, out)
	}
	out, err := mctl("-G", p.portB, "rx", "512")
	require.Error(t, err, "-G into an attach fault: err %v, output %q: want the attach failure", err, out)
	require.Contains(t, out, "attach", "-G into an attach fault: err %v, output %q: want the attach failure", err, out)
	harness.Eventually(t, "a failed reset attempt", func() bool {
		i := p.info(t, p.clientB, p.portB)
		return i.Detached && i.ResetPending && strings.Contains(p.d.Log(), "reset attempt failed")
	})
	assert.False(t, carrier(t, p.nsB, p.portB), "a detached port with a reset pending has a carrier")
	if l := showLink(t, p.nsB, p.portB); !slices.Contains(l.Flags, "UP") || l.OperState != "DOWN" {
		t.Errorf("detached: flags %v operstate %s: want UP (admin) with operstate DOWN", l.Flags, l.OperState)
	}
	_, err = harness.RunErr(p.nsA, "ping", "-c", "1", "-W", "1", p.ipB)
	assert.Error(t, err, "a detached port answered ping")
	out, err = mctl("fault", p.portB, "attach", "off")
	require.NoError(t, err, "manactl fault off: %v\n%s", err, out)
	harness.Eventually(t, "the reset to restore the port", func() bool {
		i := p.info(t, p.clientB, p.portB)
		return i.Running && !i.ResetPending
	})
	harness.Eventually(t, "the carrier to come back", func() bool { return carrier(t, p.nsB, p.portB) })
	p.ping(t)

	// Down and up by the administrator: carrier off with the port, on again when it runs.
	harness.Run(t, p.nsB, "ip", "link", "set", p.portB, "down")
	harness.Eventually(t, "the port to go down", func() bool { return !p.info(t, p.clientB, p.portB).Running })
	l := showLink(t, p.nsB, p.portB)
	assert.False(t, slices.Contains(l.Flags, "LOWER_UP"), "port down: flags %v still LOWER_UP", l.Flags)
	harness.Run(t, p.nsB, "ip", "link", "set", p.portB, "up")
	harness.Eventually(t, "the port to come up with its carrier", func() bool {
		return p.info(t, p.clientB, p.portB).Running && carrier(t, p.nsB, p.portB)
	})
	p.ping(t)
}
