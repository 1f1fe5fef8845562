package datapath

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/require"
)

// BenchmarkForwardOverhead measures what manad adds per frame in user space: one frame through
// port A's Transmit, the segment, port B's SteerRx and Receive, and B's Deliver, whose TAP write
// goes to /dev/null instead (a write syscall that does no work). The baseline, measured in the
// same run, is the bare /dev/null write; "overhead-ns/frame" is the difference. No TAP, no
// namespace: this isolates the CPU cost of the model from the kernel's.
func BenchmarkForwardOverhead(b *testing.B) {
	for _, size := range []int{64, 1400} {
		b.Run(map[int]string{64: "frame=64B", 1400: "frame=1400B"}[size], func(b *testing.B) {
			mu := new(sync.Mutex)
			seg := NewSegment("overhead")
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			fd, err := unix.Open(os.DevNull, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			require.NoError(b, err)
			devnull := tap.NewQueue(fd, os.DevNull)
			defer devnull.Close()
			mk := func(name string, mac net.HardwareAddr) (*Endpoint, *vnic.Port) {
				ep := NewEndpoint(seg, mac, log)
				p, err := vnic.New(vnic.Config{Name: name, Lock: mu, Hardware: vnic.Hardware{PageSize: 16384}, Host: ep, Wire: ep, Logger: log},
					vnic.Settings{MTU: 1500, Queues: 1, RxRing: 256, TxRing: 256})
				require.NoError(b, err)
				qq := ep.newQueueIdle(0, devnull, false, false)
				// Wire the endpoint by hand: no TAP, so no goroutines either.
				ep.vp.Store(p)
				ep.qs.Store(&queueSet{q: []*queue{qq}})
				ep.handle.Store(seg.join(ep))
				mu.Lock()
				require.NoError(b, p.Open())
				mu.Unlock()
				b.Cleanup(func() {
					seg.leave(ep.handle.Load())
					mu.Lock()
					td := p.Shutdown()
					mu.Unlock()
					td.Wait(b.Context())
				})
				return ep, p
			}
			macA, macB := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
			_, pa := mk("a", macA)
			epB, _ := mk("b", macB)
			f := udpFrameFor(size, macB, macA)
			// Teach the segment where B is, as B's first frame would.
			seg.forward(epB.handle.Load(), udpFrameFor(64, macA, macB), true)

			// The baseline is timed by hand (testing.Benchmark cannot nest in a benchmark),
			// before and after the measured loop.
			devnullWrite := func() time.Duration {
				const n = 200000
				start := time.Now()
				for range n {
					devnull.Write(f)
				}
				return time.Since(start) / n
			}
			before := devnullWrite()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				pa.Transmit(0, f)
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			base := float64(before+devnullWrite()) / 2
			b.ReportMetric(base, "devnull-write-ns")
			b.ReportMetric(per-base, "overhead-ns/frame")
			st := epB.Stats()[0]
			require.GreaterOrEqual(b, st.RxInline, uint64(b.N), "B's queue: %+v after %d frames", st, b.N)
			require.Equal(b, uint64(0), st.RxWriteErrors, "B's queue: %+v after %d frames", st, b.N)
		})
	}
}

// udpFrameFor builds an Ethernet/IPv4/UDP frame of length bytes from src to dst.
func udpFrameFor(length int, dst, src net.HardwareAddr) []byte {
	f := make([]byte, length)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(length-14))
	ip[8], ip[9] = 64, 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[20:], 40000)
	binary.BigEndian.PutUint16(ip[22:], 9999)
	return f
}
