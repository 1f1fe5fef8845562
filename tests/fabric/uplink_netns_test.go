package fabric

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// uplinkShown is one uplink as `manactl --json segment show` prints it, with its error.
type uplinkShown struct {
	State   string `json:"state"`
	Error   string `json:"error"`
	IfIndex uint32 `json:"ifindex"`
}

func showUplink(t *testing.T, d *harness.Daemon, seg string) uplinkShown {
	t.Helper()
	out := manactlOK(t, d, "--json", "segment", "show", seg)
	var v []struct {
		Uplinks []uplinkShown `json:"uplinks"`
	}
	err := json.Unmarshal([]byte(out), &v)
	require.NoError(t, err, "manactl --json segment show %s: %v\n%s", seg, err, out)
	require.Len(t, v, 1, "manactl --json segment show %s: %v\n%s", seg, err, out)
	require.Len(t, v[0].Uplinks, 1, "manactl --json segment show %s: %v\n%s", seg, err, out)
	return v[0].Uplinks[0]
}

// TestUplinkNetNSDeletedEndToEnd (issue 28 item 2): the real manad and manactl, a port pinging a
// plain namespace through an uplink to a veth into a Linux bridge in namespace br. `ip netns
// del br` makes the uplink gone, with the reason in `segment show` (text and --json), and manad
// lets go of br: the bridge's veth into the plain namespace goes with it, which it cannot while
// anything holds br. br added again with its bridge and the device, the uplink attaches again and
// the ping crosses it.
func TestUplinkNetNSDeletedEndToEnd(t *testing.T) {
	testenv.RequireRoot(t)
	br, plain := netns(t, harness.Name("fnb", "")), netns(t, harness.Name("fnp", ""))
	pns, port := harness.Name("fnq", ""), harness.Name("fn", "0")
	const portIP, plainIP = "10.82.0.1", "10.82.0.9"
	bridgeUplink(t, br, plain, plainIP)
	d := harness.Start(t, "", "", "", pns)
	manactlOK(t, d, "segment", "add", "wire8")
	manactlOK(t, d, "segment", "uplink", "add", "wire8", "upl", "--netns", br)
	manactlOK(t, d, "port", "add", port, "--netns", pns, "--segment", "wire8")
	harness.Run(t, pns, "ip", "addr", "add", portIP+"/24", "dev", port)
	harness.Run(t, pns, "ip", "link", "set", port, "up")
	harness.Eventually(t, "the uplink to attach", func() bool { return showUplink(t, d, "wire8").State == "attached" })
	harness.Run(t, pns, "ping", "-c", "2", "-i", "0.2", "-W", "2", plainIP)

	harness.Run(t, "", "ip", "netns", "del", br)
	harness.Eventually(t, "show to say gone", func() bool { return showUplink(t, d, "wire8").State == "gone" })
	want := fmt.Sprintf("network namespace %q was deleted", br)
	if u := showUplink(t, d, "wire8"); !strings.Contains(u.Error, want) || u.IfIndex != 0 {
		t.Errorf("gone uplink %+v, want no ifindex and the error %q", u, want)
	}
	assert.Contains(t, manactlOK(t, d, "segment", "show", "wire8"), want, "segment show does not say why the uplink is gone")
	harness.Eventually(t, "br released (its veth into the plain namespace gone)", func() bool {
		_, err := harness.RunErr(plain, "ip", "link", "show", "pv")
		return err != nil
	})

	harness.Run(t, "", "ip", "netns", "add", br)
	bridgeUplink(t, br, plain, plainIP)
	harness.Eventually(t, "show to say attached again", func() bool { return showUplink(t, d, "wire8").State == "attached" })
	u := showUplink(t, d, "wire8")
	assert.Equal(t, "", u.Error, "re-attached uplink %+v, want an ifindex and no error", u)
	assert.NotEqual(t, uint32(0), u.IfIndex, "re-attached uplink %+v, want an ifindex and no error", u)
	// The plain namespace's end of the new veth has a new MAC: the port must ask again.
	harness.Run(t, pns, "ip", "neigh", "flush", "dev", port)
	harness.Run(t, pns, "ping", "-c", "2", "-i", "0.2", "-W", "2", plainIP)
	n := strings.Count(d.Log(), `msg="uplink released its network namespace" uplink=`+br+`/upl`)
	assert.Equal(t, 1, n, "the namespace's deletion logged %d times, want once", n)
	// The port is in a namespace manad made; remove it with it.
	_, bin := harness.Binaries(t)
	harness.Run(t, pns, "env", "GORACE=atexit_sleep_ms=0", bin, "--socket", d.Socket, "port", "del", port, "--netns-too")
}
