package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/uplink"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSegmentTablesWireUplinks: the daemon applies a [[segment]] table's settings to the segment
// and starts its uplinks; one whose namespace does not exist waits for it, and the others run.
func TestSegmentTablesWireUplinks(t *testing.T) {
	testenv.RequireRoot(t)
	ns := fmt.Sprintf("dseg%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{
		{"link", "add", "up0", "type", "veth", "peer", "name", "up1"},
		{"link", "set", "up0", "up"}, {"link", "set", "up1", "up"},
	} {
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		require.NoError(t, err, "ip %v: %v\n%s", args, err, out)
	}
	dir := t.TempDir()
	cfg, err := config.Parse("t.toml", fmt.Appendf(nil, `
[daemon]
socket = %q
state_dir = %q

[[segment]]
name = "wire0"
uplinks = [{dev = "up0", netns = %q}, {dev = "x0", netns = "no-such-netns-manad"}]
mtu = 1400
ageing_time = 42
storm_pps = 500
`, filepath.Join(dir, "s.sock"), filepath.Join(dir, "state"), ns))
	require.NoError(t, err)
	ready := make(chan struct{})
	d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: func() { close(ready) }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done, "Run")
	}()
	<-ready

	us := d.Uplinks()
	require.Len(t, us, 2, "uplinks %+v, want %s/up0 and one absent", us, ns)
	require.Equal(t, ns+"/up0", us[0].Name, "uplinks %+v, want %s/up0 and one absent", us, ns)
	require.Equal(t, uplink.Absent, us[1].State, "uplinks %+v, want %s/up0 and one absent", us, ns)
	deadline := time.Now().Add(10 * time.Second)
	for d.Uplinks()[0].State != uplink.Up {
		if time.Now().After(deadline) {
			t.Fatalf("uplink %+v never came up", d.Uplinks()[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := d.Uplinks()[0].MTU
	require.Equal(t, 1400, got, "uplink MTU %d, want the segment's cap 1400", got)
	seg := d.segments.Get("wire0")
	require.Equal(t, 42*time.Second, seg.AgeingTime(), "segment ageing %v storm %d, want 42s and 500", seg.AgeingTime(), seg.StormLimit())
	require.Equal(t, int64(500), seg.StormLimit(), "segment ageing %v storm %d, want 42s and 500", seg.AgeingTime(), seg.StormLimit())
}

// TestSegmentDefaultsAgree: the configuration's default ageing time is the segment's own (the
// config package does not import the data path, so the value is written twice).
func TestSegmentDefaultsAgree(t *testing.T) {
	require.Equal(t, datapath.DefaultAgeingTime, config.DefaultAgeingTime, "config.DefaultAgeingTime %v, datapath.DefaultAgeingTime %v", config.DefaultAgeingTime, datapath.DefaultAgeingTime)
}
