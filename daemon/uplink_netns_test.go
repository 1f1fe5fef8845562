package daemon

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/require"
)

// uplinkOf returns uplink dev of segment seg as SEGMENT_GET reports it.
func uplinkOf(t *testing.T, c *client.Client, seg, dev string) wire.UplinkInfo {
	t.Helper()
	s, err := c.Segment(context.Background(), seg)
	require.NoError(t, err, "Segment %s", seg)
	for _, u := range s.Uplinks {
		if u.Dev == dev {
			return u
		}
	}
	t.Fatalf("segment %s has no uplink %s: %+v", seg, dev, s.Uplinks)
	return wire.UplinkInfo{}
}

// TestUplinkFollowsItsNetNS: a VXLAN uplink whose namespace is deleted (`ip netns del`) is
// reported gone by SEGMENT_GET, with the reason; the namespace added again with a VXLAN device of
// the same name, it is attached again, with no error, having attached twice.
func TestUplinkFollowsItsNetNS(t *testing.T) {
	c, _, _ := startWith(t, func(*strings.Builder, string) {})
	ctx := context.Background()
	ns, seg := taptest.Name("upns"), taptest.Name("wire")
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	addNS := func() {
		taptest.IP(t, "", "netns", "add", ns)
		taptest.IP(t, ns, "link", "set", "lo", "up")
		taptest.IP(t, ns, "link", "add", "vx0", "type", "vxlan", "id", "42", "dstport", "4789",
			"local", "127.0.0.1", "remote", "127.0.0.2", "dev", "lo")
		taptest.IP(t, ns, "link", "set", "vx0", "up")
	}
	addNS()
	if _, err := c.CreateSegment(ctx, wire.SegmentSpec{Name: seg}); err != nil {
		t.Fatal(err)
	}
	_, err := c.AddUplink(ctx, seg, wire.UplinkSpec{Dev: "vx0", NetNS: ns})
	require.NoError(t, err)
	eventually(t, "the uplink attached", func() bool { return uplinkOf(t, c, seg, "vx0").State == wire.UplinkAttached })
	if u := uplinkOf(t, c, seg, "vx0"); u.Kind != "vxlan" || u.Ifindex == 0 {
		t.Fatalf("attached uplink %+v, want a vxlan with an ifindex", u)
	}

	taptest.IP(t, "", "netns", "del", ns)
	eventually(t, "the uplink gone", func() bool { return uplinkOf(t, c, seg, "vx0").State == wire.UplinkGone })
	if u, want := uplinkOf(t, c, seg, "vx0"), fmt.Sprintf("network namespace %q was deleted", ns); !strings.Contains(u.Error, want) || u.Ifindex != 0 {
		t.Fatalf("gone uplink %+v, want no ifindex and the reason %q", u, want)
	}

	addNS()
	eventually(t, "the uplink attached again", func() bool { return uplinkOf(t, c, seg, "vx0").State == wire.UplinkAttached })
	u := uplinkOf(t, c, seg, "vx0")
	require.Equal(t, "", u.Error, "re-attached uplink %+v, want no error and 2 attaches", u)
	require.Equal(t, uint64(2), u.Attaches, "re-attached uplink %+v, want no error and 2 attaches", u)
}
