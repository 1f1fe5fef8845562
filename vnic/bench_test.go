package vnic

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic/privflag"
)

// flipTarget is issue 2's target for one full private-flag flip of an up port with 16 queues of
// 1024 buffers at MTU 1500 on 4K pages.
const flipTarget = 20 * time.Millisecond

// BenchmarkPrivFlagFlip measures a full full-page-rx flip (pre-allocate 16×1024 buffers, detach,
// attach, free the old rings) and reports the peak memory the port held while doing it. The
// baseline, interleaved with the flips (one after each, off the clock), is bringing a second,
// identical port down and up again (close + open): the least work any reconfiguration that
// rebuilds the rings can do.
func BenchmarkPrivFlagFlip(b *testing.B) {
	for _, page := range []int{4096, 65536} {
		b.Run(map[int]string{4096: "4K", 65536: "64K"}[page], func(b *testing.B) {
			mod := func(c *Config, s *Settings) {
				c.PageSize, c.MemoryBudget = page, -1
				s.Queues, s.RxRing = 16, 1024
			}
			base := newTestPort(b, mod)
			base.open()
			closeOpen := func() {
				base.locked(func() {
					base.Close()
					require.NoError(b, base.Open())
				})
			}
			closeOpen() // warm up

			tp := newTestPort(b, mod)
			tp.open()
			steady := tp.state().MemoryInUse
			tp.locked(func() { tp.Memory().ResetPeak() })
			b.ReportAllocs()
			b.ResetTimer()
			// Each flip is followed by one close + open of the other port, off the clock, so the
			// baseline runs interleaved with the figure it is set against.
			var flips, baseline time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				tp.locked(func() {
					require.NoError(b, tp.SetPrivFlags(uint32(i+1)&1))
				})
				t1 := time.Now()
				b.StopTimer()
				closeOpen()
				baseline += time.Since(t1)
				b.StartTimer()
				flips += t1.Sub(t0)
			}
			per, basePer := flips/time.Duration(b.N), baseline/time.Duration(b.N)
			b.StopTimer()
			b.ReportMetric(float64(basePer.Nanoseconds()), "close+open-ns/op")
			st := tp.state()
			b.ReportMetric(float64(st.MemoryPeak), "peak-bytes")
			b.ReportMetric(float64(st.MemoryPeak)/float64(max(steady, 1)), "peak/steady")
			b.ReportMetric(float64(per)/float64(basePer), "flip/close+open")
			if page == 4096 {
				b.ReportMetric(float64(per)/float64(flipTarget), "flip/target(20ms)")
			}
		})
	}
}

// BenchmarkReceive measures the per-frame cost of the RX model (DMA copy, refill, stats,
// delivery, recycle) on one queue, in both buffer modes.
func BenchmarkReceive(b *testing.B) {
	for _, fp := range []bool{false, true} {
		name := map[bool]string{false: "fragment", true: "full-page"}[fp]
		b.Run(name, func(b *testing.B) {
			tp := newTestPort(b, func(c *Config, s *Settings) {
				c.PageSize = 65536
				s.Queues = 1
				if fp {
					s.PrivFlags = privflag.FullPageRx
				}
			})
			tp.open()
			f := udpFrame(1400, 1, 2)
			b.ReportAllocs()
			b.SetBytes(int64(len(f)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				require.Equal(b, RxDelivered, tp.Receive(0, f), "not delivered")
			}
		})
	}
}

// BenchmarkSteerRx measures RSS queue selection per frame: the Toeplitz hash by table lookups,
// with the bit-serial definition as the baseline.
func BenchmarkSteerRx(b *testing.B) {
	f := udpFrame(1400, 1234, 5201)
	var buf [36]byte
	in := flowHashInput(f, &buf)
	b.Run("table", func(b *testing.B) {
		b.ReportAllocs()
		var h uint32
		for i := 0; i < b.N; i++ {
			h += defaultToeplitz.sum(in)
		}
		_ = h
	})
	b.Run("bitwise-baseline", func(b *testing.B) {
		var h uint32
		for i := 0; i < b.N; i++ {
			h += Toeplitz(&DefaultRSSKey, in)
		}
		_ = h
	})
}
