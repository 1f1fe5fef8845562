package xdp

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic"
)

// BenchmarkRun measures Run per 1500-byte frame in a 4K XDP RX buffer, for a program that
// passes the frame untouched and one that parses it (the UDP port filter). The baseline,
// measured in the same run, is cilium/ebpf's Program.Run on the same program with a
// pre-allocated DataOut and no context: the bare BPF_PROG_TEST_RUN round trip, to which Run
// adds the context, the metadata handling and the copy back into the RX buffer. The two run
// interleaved; ns/op counts both, run-ns/op is Run's own and x-baseline run-ns/op over
// baseline-ns/op.
func BenchmarkRun(b *testing.B) {
	for _, bc := range []struct {
		name  string
		insns asm.Instructions
	}{
		{"pass", progConst(vnic.XDPPass)},
		{"udp-filter", progDropUDPPort(9)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			raw := newRawProg(b, ebpf.XDP, bc.insns)
			p, err := FromProgram(raw, bc.name)
			require.NoError(b, err)
			defer p.Close()
			frame := udpFrame(1500, 1, 53)
			buf, data, end := rxBufArgs(frame)

			out := make([]byte, testBufSize)
			opts := &ebpf.RunOptions{Data: frame, DataOut: out}
			base := func(n int) {
				for range n {
					opts.DataOut = out
					_, err := raw.Run(opts)
					require.NoError(b, err)
				}
			}
			run := func(n int) {
				for range n {
					act, d, e, err := p.Run(0, buf, data, end)
					require.NoError(b, err, "Run: %v [%d:%d] %v", act, d, e, err)
					require.Equal(b, vnic.XDPPass, act, "Run: %v [%d:%d] %v", act, d, e, err)
					require.Equal(b, len(frame), e-d, "Run: %v [%d:%d] %v", act, d, e, err)
				}
			}
			base(16) // warm up both
			run(16)
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			b.ResetTimer()
			// Interleaved in chunks (baseline, Run, baseline, …) so that both see the same
			// machine: a burst of load elsewhere hits the pair, not one side.
			const chunk = 256
			var tBase, tRun time.Duration
			for done := 0; done < b.N; {
				k := min(chunk, b.N-done)
				t0 := time.Now()
				base(k)
				t1 := time.Now()
				run(k)
				t2 := time.Now()
				tBase += t1.Sub(t0)
				tRun += t2.Sub(t1)
				done += k
			}
			b.StopTimer()
			baseline := float64(tBase.Nanoseconds()) / float64(b.N)
			ns := float64(tRun.Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns, "run-ns/op")
			b.ReportMetric(baseline, "baseline-ns/op")
			b.ReportMetric(ns/baseline, "x-baseline")
			b.ReportMetric(1e9/ns, "frames/s")
		})
	}
}

// BenchmarkRunParallel measures Run on several queues at once, one queue per goroutine, as the
// port's per-queue receive goroutines call it.
func BenchmarkRunParallel(b *testing.B) {
	p := newProg(b, "pass", progConst(vnic.XDPPass))
	var next atomic.Int32
	b.ReportAllocs()
	b.SetBytes(1500)
	b.RunParallel(func(pb *testing.PB) {
		q := int(next.Add(1)-1) % vnic.MaxQueues
		buf, data, end := rxBufArgs(udpFrame(1500, 1, 53))
		for pb.Next() {
			if _, _, _, err := p.Run(q, buf, data, end); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
