package xdp

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
)

// recordingHost is a vnic.Host that copies every delivered frame and gives the buffer back.
type recordingHost struct {
	mu     sync.Mutex
	frames map[int][][]byte // by RX queue
}

func (h *recordingHost) Deliver(q int, frame []byte, _ *pagepool.Buffer) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frames[q] = append(h.frames[q], bytes.Clone(frame))
	return false
}

// recordingWire is a vnic.Wire that copies every frame sent.
type recordingWire struct {
	mu     sync.Mutex
	frames map[int][][]byte // by TX queue
}

func (w *recordingWire) Send(q int, frame []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frames[q] = append(w.frames[q], bytes.Clone(frame))
}

// progFilter drops IPv4 UDP to dropPort, reflects IPv4 UDP to echoPort out of the port with
// the Ethernet addresses swapped (XDP_TX), and passes everything else.
func progFilter(dropPort, echoPort uint16) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R1, mdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 42),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 12, asm.Half),
		asm.HostTo(asm.BE, asm.R5, asm.Half),
		asm.JNE.Imm(asm.R5, 0x0800, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14, asm.Byte),
		asm.JNE.Imm(asm.R5, 0x45, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 23, asm.Byte),
		asm.JNE.Imm(asm.R5, 17, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 36, asm.Half),
		asm.HostTo(asm.BE, asm.R5, asm.Half),
		asm.JEq.Imm(asm.R5, int32(echoPort), "echo"),
		asm.JNE.Imm(asm.R5, int32(dropPort), "pass"),
		asm.LoadImm(asm.R0, int64(vnic.XDPDrop), asm.DWord),
		asm.Return(),
		asm.LoadImm(asm.R0, int64(vnic.XDPPass), asm.DWord).WithSymbol("pass"),
		asm.Return(),
	}
	swap := progSwapMACTx()
	swap[0] = swap[0].WithSymbol("echo")
	return append(insns, swap...)
}

// newXDPPort makes a 4K-page port with queues RX/TX queues running prog, shut down and checked
// for leaks at the end of the test.
func newXDPPort(t *testing.T, queues int, prog vnic.XDPProgram) (*vnic.Port, *sync.Mutex, *recordingHost, *recordingWire) {
	t.Helper()
	mu := new(sync.Mutex)
	host := &recordingHost{frames: map[int][][]byte{}}
	wire := &recordingWire{frames: map[int][][]byte{}}
	port, err := vnic.New(vnic.Config{
		Name: "xdp0", Lock: mu, Hardware: vnic.Hardware{PageSize: 4096}, Host: host, Wire: wire,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
		PoolReleaseInterval: 5 * time.Millisecond,
	}, vnic.Settings{MTU: 1500, Queues: queues, RxRing: 128, TxRing: 128, XDP: prog})
	require.NoError(t, err, "vnic.New")
	t.Cleanup(func() {
		mu.Lock()
		td := port.Shutdown()
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, td.Wait(ctx), "port teardown")
	})
	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, port.Open(), "Open")
	return port, mu, host, wire
}

// portStats returns the port's ethtool -S counters by name.
func portStats(port *vnic.Port, mu *sync.Mutex, queues int) map[string]uint64 {
	mu.Lock()
	defer mu.Unlock()
	vals := port.Stats()
	m := map[string]uint64{}
	for i, n := range vnic.StatNames(queues) {
		m[n] = vals[i]
	}
	return m
}

// TestPortRunsProgram drives frames through vnic.Port.Receive with a loaded eBPF program and
// checks the verdicts' effects: counters, delivered frames and bytes, reflected frames.
func TestPortRunsProgram(t *testing.T) {
	prog := newProg(t, "filter", progFilter(9, 7))
	const queues = 2
	port, mu, host, wire := newXDPPort(t, queues, prog)

	type sent struct {
		q     int
		frame []byte
	}
	var (
		pass = []sent{{0, udpFrame(1514, 1, 53)}, {1, udpFrame(60, 1, 10)}, {1, udpFrame(200, 9, 8)}}
		drop = []sent{{0, udpFrame(100, 1, 9)}, {0, udpFrame(1514, 2, 9)}, {1, udpFrame(60, 3, 9)}}
		echo = []sent{{0, udpFrame(300, 1, 7)}, {1, udpFrame(1000, 1, 7)}, {1, udpFrame(64, 2, 7)}}
		// Shorter than an Ethernet header: BPF_PROG_TEST_RUN cannot run it, so it is aborted.
		runt = []sent{{0, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}}
	)
	want := map[string]uint64{}
	wantHost := map[int][][]byte{}
	wantWire := map[int][][]byte{}
	key := func(q int, n string) string { return "rx_" + strconv.Itoa(q) + "_" + n }
	for _, s := range pass {
		want[key(s.q, "packets")]++
		want[key(s.q, "bytes")] += uint64(len(s.frame))
		wantHost[s.q] = append(wantHost[s.q], s.frame)
	}
	for _, s := range drop {
		want[key(s.q, "xdp_drop")]++
	}
	for _, s := range runt {
		want[key(s.q, "xdp_drop")]++
	}
	for _, s := range echo {
		// XDP_TX is counted as received, then sent from the TX queue of the same index.
		want[key(s.q, "packets")]++
		want[key(s.q, "bytes")] += uint64(len(s.frame))
		want[key(s.q, "xdp_tx")]++
		want["tx_"+strconv.Itoa(s.q)+"_packets"]++
		r := bytes.Clone(s.frame)
		copy(r[0:6], s.frame[6:12])
		copy(r[6:12], s.frame[0:6])
		wantWire[s.q] = append(wantWire[s.q], r)
	}
	for _, group := range []struct {
		frames []sent
		want   vnic.RxResult
	}{{pass, vnic.RxDelivered}, {drop, vnic.RxXDPDrop}, {echo, vnic.RxXDPTx}, {runt, vnic.RxXDPDrop}} {
		for _, s := range group.frames {
			assert.Equal(t, group.want, port.Receive(s.q, s.frame), "Receive(q%d, %d bytes)", s.q, len(s.frame))
		}
	}

	st := portStats(port, mu, queues)
	for q := range queues {
		for _, n := range []string{"packets", "bytes", "xdp_drop", "xdp_tx", "xdp_redirect"} {
			assert.Equal(t, want[key(q, n)], st[key(q, n)], "%s", key(q, n))
		}
		tx := "tx_" + strconv.Itoa(q) + "_packets"
		assert.Equal(t, want[tx], st[tx], "%s", tx)
		assert.True(t, framesEqual(host.frames[q], wantHost[q]), "queue %d delivered %d frames, not the %d passed ones", q, len(host.frames[q]), len(wantHost[q]))
		assert.True(t, framesEqual(wire.frames[q], wantWire[q]), "TX queue %d sent %d frames, not the %d reflected ones", q, len(wire.frames[q]), len(wantWire[q]))
	}
}

// TestPortDeliversRewrittenFrame checks that the port delivers the frame as the program left it:
// grown into the headroom by bpf_xdp_adjust_head.
func TestPortDeliversRewrittenFrame(t *testing.T) {
	hdr := []byte{0x81, 0x00, 0x00, 0x2a} // an 802.1Q tag's bytes
	prog := newProg(t, "push-tag", progPushHeader(hdr))
	port, mu, host, _ := newXDPPort(t, 1, prog)
	frame := udpFrame(1514, 1, 2)
	if got := port.Receive(0, frame); got != vnic.RxDelivered {
		t.Fatalf("Receive = %v, want delivered", got)
	}
	want := append(bytes.Clone(hdr), frame...)
	assert.True(t, framesEqual(host.frames[0], [][]byte{want}), "delivered %d frames; want the frame with the pushed header", len(host.frames[0]))
	// The driver counts the received length, before the program ran (mana_rx_skb).
	got := portStats(port, mu, 1)["rx_0_bytes"]
	assert.Equal(t, uint64(len(frame)), got, "rx_0_bytes = %d, want %d", got, len(frame))
}

// TestPortAttachDetach attaches a program to a running port and detaches it again (SetXDP).
func TestPortAttachDetach(t *testing.T) {
	prog := newProg(t, "drop-udp-9", progDropUDPPort(9))
	port, mu, host, _ := newXDPPort(t, 1, nil)
	frame := udpFrame(500, 1, 9)
	for i, step := range []struct {
		attach vnic.XDPProgram
		want   vnic.RxResult
	}{{nil, vnic.RxDelivered}, {prog, vnic.RxXDPDrop}, {nil, vnic.RxDelivered}} {
		mu.Lock()
		err := port.SetXDP(step.attach)
		mu.Unlock()
		require.NoError(t, err, "step %d: SetXDP", i)
		assert.Equal(t, step.want, port.Receive(0, frame), "step %d: Receive", i)
	}
	st := portStats(port, mu, 1)
	if st["rx_0_xdp_drop"] != 1 || len(host.frames[0]) != 2 {
		t.Errorf("rx_0_xdp_drop = %d, %d frames delivered; want 1 and 2", st["rx_0_xdp_drop"], len(host.frames[0]))
	}
}

func framesEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
