package xdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/tests/testenv"
	"github.com/manad/manad/vnic"
)

// runFrame runs p on frame laid out in a standard XDP RX buffer and returns the verdict and
// the output frame, failing the test on an error or on bounds outside the buffer.
func runFrame(t *testing.T, p *Program, q int, frame []byte) (vnic.XDPAction, []byte, int, int) {
	t.Helper()
	buf, data, end := rxBuf(frame, testBufSize, testHeadroom)
	act, d, e, err := p.Run(q, buf, data, end)
	require.NoError(t, err, "Run")
	require.GreaterOrEqual(t, d, 0, "Run returned bounds [%d:%d] outside the %d-byte buffer", d, e, len(buf))
	require.GreaterOrEqual(t, e, d, "Run returned bounds [%d:%d] outside the %d-byte buffer", d, e, len(buf))
	require.LessOrEqual(t, e, len(buf), "Run returned bounds [%d:%d] outside the %d-byte buffer", d, e, len(buf))
	return act, buf[d:e], d, e
}

func TestRunConstantVerdicts(t *testing.T) {
	frame := udpFrame(100, 1, 2)
	for _, tc := range []struct {
		name string
		ret  vnic.XDPAction
	}{
		{"aborted", vnic.XDPAborted},
		{"drop", vnic.XDPDrop},
		{"pass", vnic.XDPPass},
		{"tx", vnic.XDPTx},
		{"redirect", vnic.XDPRedirect},
		{"invalid", 7}, // returned as is: vnic treats it as aborted
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProg(t, tc.name, progConst(tc.ret))
			act, out, d, e := runFrame(t, p, 0, frame)
			assert.Equal(t, tc.ret, act, "verdict")
			assert.Equal(t, testHeadroom, d, "bounds [%d:%d], want the input's [%d:%d]", d, e, testHeadroom, testHeadroom+len(frame))
			assert.Equal(t, testHeadroom+len(frame), e, "bounds [%d:%d], want the input's [%d:%d]", d, e, testHeadroom, testHeadroom+len(frame))
			assert.Equal(t, frame, out, "frame changed by a program that does not touch it")
		})
	}
}

func TestRunDropUDPPort(t *testing.T) {
	p := newProg(t, "drop-udp-9", progDropUDPPort(9))
	tcp := udpFrame(100, 1, 9)
	tcp[23] = 6
	arp := udpFrame(60, 1, 9)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	ipOpts := udpFrame(100, 1, 9)
	ipOpts[14] = 0x46
	for _, tc := range []struct {
		name  string
		frame []byte
		want  vnic.XDPAction
	}{
		{"udp to 9", udpFrame(100, 1, 9), vnic.XDPDrop},
		{"full-size udp to 9", udpFrame(1514, 5000, 9), vnic.XDPDrop},
		{"udp to 10", udpFrame(100, 1, 10), vnic.XDPPass},
		{"udp from 9", udpFrame(100, 9, 53), vnic.XDPPass},
		{"udp to 2304 (9 byte-swapped)", udpFrame(100, 1, 0x0900), vnic.XDPPass},
		{"tcp to 9", tcp, vnic.XDPPass},
		{"arp", arp, vnic.XDPPass},
		{"ipv4 with options", ipOpts, vnic.XDPPass},
		{"ethernet header only", udpFrame(42, 1, 9)[:14], vnic.XDPPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act, out, _, _ := runFrame(t, p, 3, tc.frame)
			assert.Equal(t, tc.want, act, "verdict")
			assert.Equal(t, tc.frame, out, "frame changed")
		})
	}
}

func TestRunRewritesHeaderByte(t *testing.T) {
	p := newProg(t, "ttl1", progSetByte(22, 1, vnic.XDPPass)) // IPv4 TTL
	frame := udpFrame(1514, 1, 2)
	act, out, d, e := runFrame(t, p, 1, frame)
	require.Equal(t, vnic.XDPPass, act, "verdict %v, want pass", act)
	want := bytes.Clone(frame)
	want[22] = 1
	assert.Equal(t, want, out, "output differs from the input with TTL 1 (first difference at %d)", firstDiff(out, want))
	assert.Equal(t, testHeadroom, d, "bounds [%d:%d] moved for a same-size rewrite", d, e)
	assert.Equal(t, testHeadroom+len(frame), e, "bounds [%d:%d] moved for a same-size rewrite", d, e)
}

func TestRunPushHeader(t *testing.T) {
	hdr := []byte{0xde, 0xad, 0xbe, 0xef}
	p := newProg(t, "push4", progPushHeader(hdr))
	frame := udpFrame(1514, 1, 2)
	act, out, d, e := runFrame(t, p, 0, frame)
	require.Equal(t, vnic.XDPPass, act, "verdict %v, want pass (the program aborts when bpf_xdp_adjust_head fails)", act)
	want := append(bytes.Clone(hdr), frame...)
	assert.Equal(t, want, out, "output is not the header followed by the frame (first difference at %d)", firstDiff(out, want))
	// bpf_xdp_adjust_head moves data, not data_end: the frame grew into the headroom.
	assert.Equal(t, int(testHeadroom-4), d, "bounds [%d:%d], want [%d:%d]", d, e, testHeadroom-4, testHeadroom+len(frame))
	assert.Equal(t, testHeadroom+len(frame), e, "bounds [%d:%d], want [%d:%d]", d, e, testHeadroom-4, testHeadroom+len(frame))
}

func TestRunAdjustTail(t *testing.T) {
	frame := udpFrame(100, 1, 2)
	for _, tc := range []struct {
		name           string
		delta          int32
		bufSize, head  int
		wantD, wantE   int
		wantErr        unix.Errno
		wantZeroSuffix int
	}{
		// Shrinking: the end stays put (Run cannot tell head from tail moves; the bytes are
		// what matter).
		{name: "trim 4", delta: -4, bufSize: testBufSize, head: testHeadroom, wantD: testHeadroom + 4, wantE: testHeadroom + 100},
		// Growing within the headroom: the end stays put.
		{name: "grow 100", delta: 100, bufSize: testBufSize, head: testHeadroom, wantD: testHeadroom - 100, wantE: testHeadroom + 100, wantZeroSuffix: 100},
		// Growing by more than the headroom: the start stays put.
		{name: "grow 300", delta: 300, bufSize: testBufSize, head: testHeadroom, wantD: testHeadroom, wantE: testHeadroom + 400, wantZeroSuffix: 300},
		// Neither fits, the whole buffer does: the frame starts the buffer.
		{name: "grow 60 in a tight buffer", delta: 60, bufSize: 16 + 100 + 50, head: 16, wantD: 0, wantE: 160, wantZeroSuffix: 60},
		// The output is longer than the buffer: the kernel says ENOSPC.
		{name: "grow 300 past the buffer", delta: 300, bufSize: testHeadroom + 100 + 10, head: testHeadroom, wantErr: unix.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProg(t, "tail", progAdjustTail(tc.delta))
			buf, data, end := rxBuf(frame, tc.bufSize, tc.head)
			act, d, e, err := p.Run(0, buf, data, end)
			if tc.wantErr != 0 {
				require.ErrorIs(t, err, tc.wantErr, "Run error")
				return
			}
			require.NoError(t, err, "Run")
			require.Equal(t, vnic.XDPPass, act, "verdict %v, want pass (the program aborts when bpf_xdp_adjust_tail fails)", act)
			assert.Equal(t, tc.wantD, d, "bounds [%d:%d], want [%d:%d]", d, e, tc.wantD, tc.wantE)
			assert.Equal(t, tc.wantE, e, "bounds [%d:%d], want [%d:%d]", d, e, tc.wantD, tc.wantE)
			want := frame[:min(len(frame), len(frame)+int(tc.delta))]
			want = append(bytes.Clone(want), make([]byte, tc.wantZeroSuffix)...)
			out := buf[d:e]
			assert.Equal(t, want, out, "output of %d bytes differs from the expected %d (first difference at %d)", len(out), len(want), firstDiff(out, want))
		})
	}
}

// TestRunJumboFrame runs a 9000-byte frame in a 16K buffer (a port modelling 16K pages): the
// kernel passes it as a multi-buffer xdp_buff, and Run still returns the whole frame.
func TestRunJumboFrame(t *testing.T) {
	hdr := []byte{0xca, 0xfe}
	frame := udpFrame(9014, 1, 9)
	for _, tc := range []struct {
		name string
		prog *Program
		act  vnic.XDPAction
		want []byte
	}{
		{"drop-udp-9", newProg(t, "drop9", progDropUDPPort(9)), vnic.XDPDrop, frame},
		{"ttl1", newProg(t, "ttl1", progSetByte(22, 1, vnic.XDPPass)), vnic.XDPPass, func() []byte {
			f := bytes.Clone(frame)
			f[22] = 1
			return f
		}()},
		{"push2", newProg(t, "push2", progPushHeader(hdr)), vnic.XDPPass, append(bytes.Clone(hdr), frame...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf, data, end := rxBuf(frame, 16384, testHeadroom)
			act, d, e, err := tc.prog.Run(0, buf, data, end)
			require.NoError(t, err, "Run: %v, %v; want %v", act, err, tc.act)
			require.Equal(t, tc.act, act, "Run: %v, %v; want %v", act, err, tc.act)
			assert.Equal(t, tc.want, buf[d:e], "output of %d bytes differs from the expected %d (first difference at %d)", e-d, len(tc.want), firstDiff(buf[d:e], tc.want))
		})
	}
}

func TestRunStripsMetadata(t *testing.T) {
	p := newProg(t, "meta", progMeta())
	frame := udpFrame(200, 1, 2)
	act, out, d, e := runFrame(t, p, 0, frame)
	require.Equal(t, vnic.XDPPass, act, "verdict %v, want pass (the program aborts when bpf_xdp_adjust_meta fails)", act)
	assert.Equal(t, frame, out, "output is not the frame: metadata leaked into it (first difference at %d)", firstDiff(out, frame))
	assert.Equal(t, testHeadroom, d, "bounds [%d:%d], want the input's", d, e)
	assert.Equal(t, testHeadroom+len(frame), e, "bounds [%d:%d], want the input's", d, e)
}

func TestRunErrors(t *testing.T) {
	p := newProg(t, "pass", progConst(vnic.XDPPass))
	frame := udpFrame(100, 1, 2)
	for _, tc := range []struct {
		name      string
		q         int
		buf       []byte
		data, end int
		want      unix.Errno
	}{
		{"negative queue", -1, make([]byte, 512), 256, 356, unix.EINVAL},
		{"queue 256", vnic.MaxQueues, make([]byte, 512), 256, 356, unix.EINVAL},
		{"negative data", 0, make([]byte, 512), -1, 356, unix.EINVAL},
		{"end before data", 0, make([]byte, 512), 300, 299, unix.EINVAL},
		{"end past the buffer", 0, make([]byte, 512), 256, 513, unix.EINVAL},
		{"13-byte frame", 0, make([]byte, 512), 256, 256 + 13, unix.EINVAL},
		{"empty frame", 0, make([]byte, 512), 256, 256, unix.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copy(tc.buf[max(tc.data, 0):], frame)
			act, _, _, err := p.Run(tc.q, tc.buf, tc.data, tc.end)
			assert.ErrorIs(t, err, tc.want, "Run error")
			assert.Equal(t, vnic.XDPAborted, act, "verdict %v with an error, want aborted", act)
		})
	}
}

func TestRunAfterClose(t *testing.T) {
	raw := newRawProg(t, ebpf.XDP, progConst(vnic.XDPPass))
	p, err := FromProgram(raw, "pass")
	require.NoError(t, err)
	_, _, _, err = runOn(p, 5, udpFrame(64, 1, 2))
	require.NoError(t, err, "Run before Close")
	require.NoError(t, p.Close(), "Close")
	assert.NoError(t, p.Close(), "second Close")
	for _, q := range []int{0, 5, vnic.MaxQueues - 1} {
		_, _, _, err := runOn(p, q, udpFrame(64, 1, 2))
		assert.ErrorIs(t, err, unix.EBADF, "Run on queue %d after Close: %v, want EBADF", q, err)
	}
	// The caller's program is untouched by the wrapper's Close.
	if ret, _, err := raw.Test(udpFrame(64, 1, 2)); err != nil || vnic.XDPAction(ret) != vnic.XDPPass {
		t.Errorf("caller's program after the wrapper closed: %v, %v", ret, err)
	}
}

func rxBufArgs(frame []byte) ([]byte, int, int) { return rxBuf(frame, testBufSize, testHeadroom) }

// runOn runs p on frame in a standard XDP RX buffer.
func runOn(p *Program, q int, frame []byte) (vnic.XDPAction, int, int, error) {
	buf, data, end := rxBufArgs(frame)
	return p.Run(q, buf, data, end)
}

func TestFromProgramKeepsOwnDescriptor(t *testing.T) {
	raw := newRawProg(t, ebpf.XDP, progConst(vnic.XDPTx))
	p, err := FromProgram(raw, "")
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, raw.Close())
	act, _, _, err := runOn(p, 0, udpFrame(64, 1, 2))
	if err != nil || act != vnic.XDPTx {
		t.Errorf("Run after the caller closed its program: %v, %v; want tx", act, err)
	}
	if !strings.HasPrefix(p.Name(), "ebpf:") || p.Name() == "ebpf:" {
		t.Errorf("Name() = %q, want ebpf:<something>", p.Name())
	}
}

func TestFromProgramErrors(t *testing.T) {
	if _, err := FromProgram(nil, "x"); !errors.Is(err, unix.EINVAL) {
		t.Errorf("FromProgram(nil): %v, want EINVAL", err)
	}
	cls := newRawProg(t, ebpf.SchedCLS, progConst(0))
	_, err := FromProgram(cls, "cls")
	require.ErrorIs(t, err, unix.EINVAL, "FromProgram(SchedCLS): %v, want EINVAL", err)
	var le *nlerr.Error
	if !errors.As(err, &le) || !strings.Contains(le.ExtackMessage(), "is not an XDP program (type SchedCLS)") {
		t.Errorf("extack message %q, want it to name the type", err)
	}
}

func TestName(t *testing.T) {
	p := newProg(t, "drop-udp", progConst(vnic.XDPDrop))
	got := p.Name()
	assert.Equal(t, "ebpf:drop-udp", got, "Name() = %q, want ebpf:drop-udp", got)
	var _ vnic.XDPProgram = p
}

// TestRunConcurrent runs frames on several queues at once, two goroutines sharing one queue,
// and checks every result: with -race it also checks the per-queue state is not shared.
func TestRunConcurrent(t *testing.T) {
	hdr := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	p := newProg(t, "push8", progPushHeader(hdr))
	queues := []int{0, 1, 2, 200, 255, 255}
	var wg sync.WaitGroup
	errs := make(chan error, len(queues))
	for g, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				frame := udpFrame(60+(g*97+i*13)%1400, uint16(g), uint16(i))
				buf, data, end := rxBufArgs(frame)
				act, d, e, err := p.Run(q, buf, data, end)
				if err != nil || act != vnic.XDPPass {
					errs <- fmt.Errorf("goroutine %d queue %d frame %d: %v, %v", g, q, i, act, err)
					return
				}
				if want := append(bytes.Clone(hdr), frame...); !bytes.Equal(buf[d:e], want) {
					errs <- fmt.Errorf("goroutine %d queue %d frame %d: wrong output", g, q, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRunDoesNotAllocate(t *testing.T) {
	p := newProg(t, "ttl1", progSetByte(22, 1, vnic.XDPPass))
	frame := udpFrame(1500, 1, 2)
	buf, data, end := rxBufArgs(frame)
	for _, tc := range []struct {
		name    string
		ingress int
		q       int
	}{
		{"no ingress", 0, 7},
		{"ingress lo queue 0", 1, 0},
		{"ingress refused (lo has one queue)", 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, p.SetIngress(tc.ingress))
			allocs := testing.AllocsPerRun(200, func() {
				_, _, _, err := p.Run(tc.q, buf, data, end)
				require.NoError(t, err)
			})
			assert.Equal(t, float64(0), allocs, "Run allocates %.1f times per frame, want 0", allocs)
		})
	}
	require.NoError(t, p.SetIngress(0))
	allocs := testing.AllocsPerRun(200, func() {
		_, _, _, err := p.Run(0, buf, data, data+5)
		require.Error(t, err, "5-byte frame accepted")
	})
	assert.Equal(t, float64(0), allocs, "a refused frame allocates %.1f times, want 0", allocs)
}

// ctxSeen runs the context-storing program and returns what it saw.
func ctxSeen(t *testing.T, p *Program, q int) (ifindex, queue uint32) {
	t.Helper()
	_, out, _, _ := runFrame(t, p, q, udpFrame(64, 1, 2))
	return binary.NativeEndian.Uint32(out[0:]), binary.NativeEndian.Uint32(out[4:])
}

func TestSetIngressLoopback(t *testing.T) {
	p := newProg(t, "ctx", progStoreCtx())
	err := p.SetIngress(-1)
	assert.ErrorIs(t, err, unix.EINVAL, "SetIngress(-1): %v, want EINVAL", err)
	// Without an ingress device the kernel uses the loopback's queue 0 whatever the queue.
	if ifx, q := ctxSeen(t, p, 9); ifx != 1 || q != 0 {
		t.Errorf("no ingress: program saw ifindex %d queue %d, want 1 0", ifx, q)
	}
	require.NoError(t, p.SetIngress(1))
	if ifx, q := ctxSeen(t, p, 0); ifx != 1 || q != 0 || p.IngressFallbacks() != 0 {
		t.Errorf("lo queue 0: program saw ifindex %d queue %d, %d fallbacks; want 1 0 0", ifx, q, p.IngressFallbacks())
	}
	// lo has one RX queue: queue 2 is refused and the frame runs without the context.
	ifx, q := ctxSeen(t, p, 2)
	assert.Equal(t, uint32(1), ifx, "lo queue 2: program saw ifindex %d queue %d, %d fallbacks; want 1 0 1", ifx, q, p.IngressFallbacks())
	assert.Equal(t, uint32(0), q, "lo queue 2: program saw ifindex %d queue %d, %d fallbacks; want 1 0 1", ifx, q, p.IngressFallbacks())
	assert.Equal(t, uint64(1), p.IngressFallbacks(), "lo queue 2: program saw ifindex %d queue %d, %d fallbacks; want 1 0 1", ifx, q, p.IngressFallbacks())
}

// TestSetIngressTAP checks that the program sees the TAP's ifindex and the RX queue, in a
// private network namespace with a 3-queue TAP.
func TestSetIngressTAP(t *testing.T) {
	testenv.RequireRoot(t)
	p := newProg(t, "ctx", progStoreCtx())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread enters a new network namespace and is never unlocked, so the runtime
		// discards it when this goroutine ends.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare(CLONE_NEWNET): %v", err)
			return
		}
		const name = "mxdp0"
		for range 3 {
			fd, err := openTAPQueue(name)
			if err != nil {
				t.Errorf("opening a queue of TAP %s: %v", name, err)
				return
			}
			defer unix.Close(fd)
		}
		ifindex, err := ifindexOf(name)
		if err != nil {
			t.Errorf("ifindex of %s: %v", name, err)
			return
		}
		if err := p.SetIngress(ifindex); err != nil {
			t.Error(err)
			return
		}
		for q := range 3 {
			ifx, sq := ctxSeen(t, p, q)
			assert.Equal(t, ifindex, int(ifx), "queue %d: program saw ifindex %d queue %d (%d fallbacks); want %d %d 0", q, ifx, sq, p.IngressFallbacks(), ifindex, q)
			assert.Equal(t, q, int(sq), "queue %d: program saw ifindex %d queue %d (%d fallbacks); want %d %d 0", q, ifx, sq, p.IngressFallbacks(), ifindex, q)
			assert.Equal(t, uint64(0), p.IngressFallbacks(), "queue %d: program saw ifindex %d queue %d (%d fallbacks); want %d %d 0", q, ifx, sq, p.IngressFallbacks(), ifindex, q)
		}
		// Queue 3 is at real_num_rx_queues: EINVAL, run without the context.
		if ifx, sq := ctxSeen(t, p, 3); ifx != 1 || sq != 0 || p.IngressFallbacks() != 1 {
			t.Errorf("queue 3 of a 3-queue TAP: program saw ifindex %d queue %d (%d fallbacks); want 1 0 1", ifx, sq, p.IngressFallbacks())
		}
		// A device that does not exist in this namespace: ENODEV, run without the context.
		if err := p.SetIngress(ifindex + 100); err != nil {
			t.Error(err)
			return
		}
		ifx, sq := ctxSeen(t, p, 0)
		assert.Equal(t, uint32(1), ifx, "missing device: program saw ifindex %d queue %d (%d fallbacks); want 1 0 2", ifx, sq, p.IngressFallbacks())
		assert.Equal(t, uint32(0), sq, "missing device: program saw ifindex %d queue %d (%d fallbacks); want 1 0 2", ifx, sq, p.IngressFallbacks())
		assert.Equal(t, uint64(2), p.IngressFallbacks(), "missing device: program saw ifindex %d queue %d (%d fallbacks); want 1 0 2", ifx, sq, p.IngressFallbacks())
	}()
	<-done
}

// openTAPQueue opens one queue of the multi-queue TAP device name, creating it with the first.
func openTAPQueue(name string) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_MULTI_QUEUE)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// ifindexOf returns the index of the device name in the calling thread's network namespace.
func ifindexOf(name string) (int, error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, err
	}
	return int(ifr.Uint32()), nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
