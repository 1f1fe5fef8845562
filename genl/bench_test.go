package genl_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/manad/manad/genl/client"
	"github.com/stretchr/testify/require"
)

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkPrivFlagsGetRoundTrip measures, in the same run and interleaved,
// a PRIVFLAGS_GET round trip to this package's server over a Unix socket (in
// process, on the test backend: the cost of the server code alone; the manad
// binary's round trips are tests/integration's BenchmarkGetRoundTrip) and a GET
// round trip to the kernel's ethtool family on a veth (CHANNELS_GET: veth
// has no private flags, and an EOPNOTSUPP answer would skip the driver), both
// through the same client code. It also times CHANNELS_GET on manad for a
// like-for-like figure. The target is manad's PRIVFLAGS_GET p50 at most 3×
// the kernel's; the ratio is reported as p50-ratio.
func BenchmarkPrivFlagsGetRoundTrip(b *testing.B) {
	veth := makeVeth(b)
	ts := startServer(b, nil)
	mc, err := client.Dial(ts.path)
	require.NoError(b, err)
	defer mc.Close()
	kc, err := client.DialKernel()
	require.NoError(b, err)
	defer kc.Close()
	ctx := context.Background()
	mana0, vif := client.Interface{Name: "mana0"}, client.Interface{Name: veth}
	for range 100 { // warm up both paths
		if _, err := mc.PrivateFlags(ctx, mana0); err != nil {
			b.Fatal(err)
		}
		_, err := kc.Channels(ctx, vif)
		require.NoError(b, err)
	}
	var manad, manadCh, kernel []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := mc.PrivateFlags(ctx, mana0); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := kc.Channels(ctx, vif); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		_, err := mc.Channels(ctx, mana0)
		require.NoError(b, err)
		t3 := time.Now()
		manad = append(manad, t1.Sub(t0))
		kernel = append(kernel, t2.Sub(t1))
		manadCh = append(manadCh, t3.Sub(t2))
	}
	b.StopTimer()
	pm, pk, pc := p50(manad), p50(kernel), p50(manadCh)
	b.ReportMetric(float64(pm.Nanoseconds()), "manad-privflags-p50-ns")
	b.ReportMetric(float64(pc.Nanoseconds()), "manad-channels-p50-ns")
	b.ReportMetric(float64(pk.Nanoseconds()), "kernel-channels-p50-ns")
	b.ReportMetric(float64(pm)/float64(pk), "p50-ratio")
}
