package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
)

// BenchmarkGetRoundTrip measures, for each ethtool GET that manad serves, the round trip of one
// request to the real manad binary (built without the race detector, started in its own
// namespace, over its Unix socket) and of the same message to the kernel's ethtool family for a
// veth, through the same client code. Each iteration sends one of each, the order alternating
// every iteration, so both see the same machine. Reported: manad-p50-ns, kernel-p50-ns and
// p50-ratio (manad over kernel).
//
// veth has channels and statistics strings but neither ring parameters nor private flags: for
// RINGS_GET and PRIVFLAGS_GET the kernel's answer is EOPNOTSUPP (checked: any other error fails
// the benchmark), a round trip that skips the driver; kernel-eopnotsupp is 1 for those.
func BenchmarkGetRoundTrip(b *testing.B) {
	bin, _ := harness.PlainBinaries(b)
	ns, vethNS := harness.Name("mbr", ""), harness.Name("mbv", "")
	port := harness.Name("mr", "0")
	d := harness.StartBinary(b, bin, "", "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"rt\"\n", port, ns), ns)
	harness.Run(b, "", "ip", "netns", "add", vethNS)
	b.Cleanup(func() { harness.RunErr("", "ip", "netns", "del", vethNS) })
	harness.Run(b, vethNS, "ip", "link", "add", "rt0", "type", "veth", "peer", "name", "rt1")
	mc := d.Client(ns) // manad resolves names in the caller's namespace, as the kernel does
	var kc *client.Client
	if err := harness.InNetNS(vethNS, func() (err error) { kc, err = client.DialKernel(); return err }); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { kc.Close() })
	ctx := context.Background()
	mana, veth := client.Interface{Name: port}, client.Interface{Name: "rt0"}

	for _, g := range []struct {
		name       string
		noKernelOp bool // veth does not implement the op: the kernel answers EOPNOTSUPP
		get        func(*client.Client, client.Interface) error
	}{
		{"CHANNELS_GET", false, func(c *client.Client, i client.Interface) error { _, err := c.Channels(ctx, i); return err }},
		{"STRSET_GET-stats", false, func(c *client.Client, i client.Interface) error {
			_, err := c.StringSet(ctx, i, ethSSStats)
			return err
		}},
		{"RINGS_GET", true, func(c *client.Client, i client.Interface) error { _, err := c.Rings(ctx, i); return err }},
		{"PRIVFLAGS_GET", true, func(c *client.Client, i client.Interface) error { _, err := c.PrivateFlags(ctx, i); return err }},
	} {
		b.Run(g.name, func(b *testing.B) {
			kernel := func() error {
				err := g.get(kc, veth)
				if g.noKernelOp {
					if errors.Is(err, unix.EOPNOTSUPP) {
						return nil
					}
					return fmt.Errorf("want EOPNOTSUPP from veth, got %v", err)
				}
				return err
			}
			manad := func() error { return g.get(mc, mana) }
			for range 50 { // warm up both paths
				if err := errors.Join(manad(), kernel()); err != nil {
					b.Fatal(err)
				}
			}
			var tm, tk []time.Duration
			timed := func(f func() error, into *[]time.Duration) {
				t0 := time.Now()
				if err := f(); err != nil {
					b.Fatal(err)
				}
				*into = append(*into, time.Since(t0))
			}
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					timed(manad, &tm)
					timed(kernel, &tk)
				} else {
					timed(kernel, &tk)
					timed(manad, &tm)
				}
				i++
			}
			pm, pk := p50(tm), p50(tk)
			b.ReportMetric(float64(pm.Nanoseconds()), "manad-p50-ns")
			b.ReportMetric(float64(pk.Nanoseconds()), "kernel-p50-ns")
			b.ReportMetric(float64(pm)/float64(pk), "p50-ratio")
			if g.noKernelOp {
				b.ReportMetric(1, "kernel-eopnotsupp")
			}
		})
	}
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// ethSSStats is ETH_SS_STATS, the statistics string set (golang.org/x/sys/unix does not name it).
const ethSSStats = 1
