package manactl

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShowRxBufShortHeadroom: after UDP frames cross a port, `manactl show-rxbuf` (text and
// --json) reports how many it delivered with less headroom than LL_RESERVED_SPACE — every one
// under the pre-headroom rule (no headroom on 4K pages), none under the upstream rule — and the
// figure is the one `manactl -S` shows as manad_rx_short_headroom (issue 11 part 5).
func TestShowRxBufShortHeadroom(t *testing.T) {
	dir := worldDir(t)
	nsA, nsB := harness.Name("mcha", ""), harness.Name("mchb", "")
	type port struct{ name, ns, rule, ip string }
	ports := []port{
		{harness.Name("mhs", "0"), nsA, "upstream", "10.223.1.1"},
		{harness.Name("mhp", "0"), nsB, "pre-headroom", "10.223.1.2"},
		{harness.Name("mhs", "1"), nsA, "upstream", "10.223.2.1"},
		{harness.Name("mhu", "0"), nsB, "upstream", "10.223.2.2"},
	}
	var cfg strings.Builder
	for i, p := range ports {
		fmt.Fprintf(&cfg, "[[port]]\nname = %q\nnetns = %q\nsegment = \"s%d\"\npage_size = \"4K\"\nrule = %q\nqueues = 1\nrx_ring = 128\npersistent = false\n",
			p.name, p.ns, i/2, p.rule)
	}
	d := harness.Start(t, dir, "", cfg.String(), nsA, nsB)
	bin := manactlIn(t, dir)
	env := []string{"MANAD_SOCKET=" + d.Socket}
	for _, p := range ports {
		harness.Run(t, p.ns, "ip", "addr", "add", p.ip+"/24", "dev", p.name)
		harness.Run(t, p.ns, "ip", "link", "set", p.name, "up")
	}
	const frames = 200
	for _, pair := range [][2]port{{ports[0], ports[1]}, {ports[2], ports[3]}} {
		src, dst := pair[0], pair[1]
		sink, err := harness.ListenPacket(dst.ns, dst.ip+":9400")
		require.NoError(t, err)
		t.Cleanup(func() { sink.Close() })
		c, err := harness.Dial(src.ns, "udp", dst.ip+":9400")
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		buf := make([]byte, 64)
		sink.SetReadDeadline(time.Now().Add(10 * time.Second))
		for i := 0; i < frames; i++ {
			if _, err := c.Write(buf); err != nil {
				t.Fatal(err)
			}
			// One at a time: the first may wait for ARP, and none may be lost on the way.
			_, _, err := sink.ReadFrom(make([]byte, 128))
			require.NoError(t, err, "%s → %s: datagram %d", src.name, dst.name, i)
		}
	}
	for _, dst := range []port{ports[1], ports[3]} {
		r := run(t, dst.ns, env, bin, "--json", "show-rxbuf", dst.name)
		out := ok(t, "show-rxbuf --json "+dst.name, r)
		var got []struct {
			Layout struct {
				Headroom uint32 `json:"headroom"`
			} `json:"layout"`
			Short *uint64 `json:"rx-short-headroom"`
		}
		err := json.Unmarshal([]byte(out), &got)
		require.NoError(t, err, "show-rxbuf --json %s: %v\n%s", dst.name, err, out)
		require.Len(t, got, 1, "show-rxbuf --json %s: %v\n%s", dst.name, err, out)
		require.NotNil(t, got[0].Short, "show-rxbuf --json %s: %v\n%s", dst.name, err, out)
		short := *got[0].Short
		switch dst.rule {
		case "pre-headroom":
			assert.Equal(t, uint32(0), got[0].Layout.Headroom, "%s (pre-headroom): headroom %d, rx-short-headroom %d; want 0 and at least the %d datagrams", dst.name, got[0].Layout.Headroom, short, frames)
			assert.GreaterOrEqual(t, short, uint64(frames), "%s (pre-headroom): headroom %d, rx-short-headroom %d; want 0 and at least the %d datagrams", dst.name, got[0].Layout.Headroom, short, frames)
		default:
			assert.Equal(t, uint32(256), got[0].Layout.Headroom, "%s (upstream): headroom %d, rx-short-headroom %d; want 256 and 0", dst.name, got[0].Layout.Headroom, short)
			assert.Equal(t, uint64(0), short, "%s (upstream): headroom %d, rx-short-headroom %d; want 256 and 0", dst.name, got[0].Layout.Headroom, short)
		}
		// The text and -S show the same counter, read later: a frame the kernel sends meanwhile
		// (neighbour discovery, MLD) may have added to it, never taken away.
		text := ok(t, "show-rxbuf "+dst.name, run(t, dst.ns, env, bin, "show-rxbuf", dst.name))
		m := regexp.MustCompile(`Short headroom: +(\d+) frames \(headroom < 256, LL_RESERVED_SPACE\)`).FindStringSubmatch(text)
		if n, _ := strconv.ParseUint(group1(m), 10, 64); m == nil || n < short || (dst.rule != "pre-headroom" && n != 0) {
			t.Errorf("show-rxbuf %s: short headroom %v, want at least %d (0 for upstream):\n%s", dst.name, m, short, text)
		}
		stats := ok(t, "-S "+dst.name, run(t, dst.ns, env, bin, "-S", dst.name))
		m = regexp.MustCompile(`manad_rx_short_headroom: (\d+)\n`).FindStringSubmatch(stats)
		if n, _ := strconv.ParseUint(group1(m), 10, 64); m == nil || n < short || (dst.rule != "pre-headroom" && n != 0) {
			t.Errorf("-S %s: manad_rx_short_headroom %v, want at least %d (0 for upstream):\n%s", dst.name, m, short, stats)
		}
	}
}

// group1 is a regexp match's first group, "" without a match.
func group1(m []string) string {
	if len(m) < 2 {
		return ""
	}
	return m[1]
}
