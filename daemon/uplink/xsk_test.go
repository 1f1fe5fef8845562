package uplink

import (
	"context"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/internal/nsrun"
)

// TestXSKRing drives a ring's producer and consumer indexes across the 32-bit wrap, as the
// kernel's free-running indexes do.
func TestXSKRing(t *testing.T) {
	off := unix.XDPRingOffset{Producer: 0, Consumer: 64, Desc: 128}
	mem := make([]byte, 128+8*8)
	r, err := newXSKRing(mem, off, 8, 8)
	require.NoError(t, err)
	*r.producer, *r.consumer = ^uint32(0)-2, ^uint32(0)-2
	tests := []struct {
		produce, consume uint32
		free, ready      uint32
	}{
		{0, 0, 8, 0},
		{5, 0, 3, 5}, // across the wrap
		{3, 0, 0, 8},
		{0, 8, 8, 0},
		{7, 2, 3, 5},
	}
	next := uint64(0)
	for i, tt := range tests {
		for j := range tt.produce {
			*r.addr(*r.producer + j) = next
			next++
		}
		r.produce(tt.produce)
		for j := range tt.consume {
			want := next - uint64(r.ready()) + uint64(j)
			require.Equal(t, want, *r.addr(*r.consumer + j), "step %d: descriptor %d holds", i, j)
		}
		r.consume(tt.consume)
		require.Equal(t, tt.free, r.free(), "step %d: free", i)
		require.Equal(t, tt.ready, r.ready(), "step %d: ready", i)
	}
}

func TestXSKRingRejectsBadGeometry(t *testing.T) {
	tests := []struct {
		name string
		off  unix.XDPRingOffset
		mem  int
		size uint32
		desc uintptr
	}{
		{"size not a power of two", unix.XDPRingOffset{Consumer: 8, Desc: 16}, 1024, 6, 8},
		{"size zero", unix.XDPRingOffset{Consumer: 8, Desc: 16}, 1024, 0, 8},
		{"descriptors beyond the mapping", unix.XDPRingOffset{Consumer: 8, Desc: 16}, 16 + 7*16, 8, 16},
		{"consumer beyond the mapping", unix.XDPRingOffset{Consumer: 1022, Desc: 16}, 1024, 8, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newXSKRing(make([]byte, tt.mem), tt.off, tt.size, tt.desc)
			require.Error(t, err, "accepted")
		})
	}
	require.Equal(t, uintptr(16), unsafe.Sizeof(unix.XDPDesc{}), "struct xdp_desc is 16 bytes")
}

// TestXSKProbeFallsBack: af_xdp takes a device with one or several RX queues; auto takes
// AF_PACKET on every device here, saying why (a veth offers no AF_XDP zero-copy, so AF_XDP
// would copy) and attaching nothing to try; af_xdp on a device whose MTU exceeds a UMEM chunk
// fails with the reason.
func TestXSKProbeFallsBack(t *testing.T) {
	ns := testNS(t)
	run(t, "ip", "-n", ns, "link", "set", "b0", "mtu", "9000")
	run(t, "ip", "-n", ns, "link", "add", "m0", "numrxqueues", "2", "numtxqueues", "2", "type", "veth", "peer", "name", "m1")
	run(t, "ip", "netns", "exec", ns, "ethtool", "-L", "m0", "rx", "2", "tx", "2")
	run(t, "ip", "-n", ns, "link", "set", "m0", "up")
	run(t, "ip", "-n", ns, "link", "set", "m1", "up")
	tests := []struct {
		dev, mode   string
		state       State
		attach      string
		why         string // in Fallback (Up) or Err (Failed)
		xdpAttached bool
	}{
		{"a0", AttachXDP, Up, AttachXDP, "", true},
		{"m0", AttachXDP, Up, AttachXDP, "", true}, // a socket per queue
		{"a0", AttachAuto, Up, AttachPacket, "a0 offers no AF_XDP zero-copy (xdp-features basic,redirect", false},
		{"b0", AttachAuto, Up, AttachPacket, "no AF_XDP zero-copy", false},
		{"m0", AttachAuto, Up, AttachPacket, "no AF_XDP zero-copy", false},
		{"b0", AttachXDP, Failed, "", "MTU 9000", false},
		{"a0", AttachPacket, Up, AttachPacket, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.dev+"/"+tt.mode, func(t *testing.T) {
			u, err := Start(context.Background(), Config{Dev: tt.dev, NetNS: ns, Segment: datapath.NewSegment("t"), Logger: quiet(), Attach: tt.mode})
			require.NoError(t, err)
			st := u.Status()
			if st.State != tt.state || (tt.state == Up && st.Attach != tt.attach) {
				u.Close()
				t.Fatalf("status %+v, want %v with %q", st, tt.state, tt.attach)
			}
			why := st.Fallback
			if tt.state == Failed {
				why = st.Err
			}
			if (tt.why == "") != (why == "") || !strings.Contains(why, tt.why) {
				u.Close()
				t.Fatalf("status %+v: reason %q, want one containing %q", st, why, tt.why)
			}
			if got := hasXDP(t, ns, tt.dev); got != tt.xdpAttached {
				u.Close()
				t.Fatalf("XDP program on %s while attached: %v, want %v", tt.dev, got, tt.xdpAttached)
			}
			u.Close()
			require.False(t, hasXDP(t, ns, tt.dev), "an XDP program is left on %s after Close", tt.dev)
		})
	}
}

// hasXDP reports whether `ip link show` lists an XDP program on dev.
func hasXDP(t *testing.T, ns, dev string) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-d", "link", "show", "dev", dev).CombinedOutput()
	require.NoError(t, err, "ip link show %s: %v\n%s", dev, err, out)
	return strings.Contains(string(out), "prog/xdp")
}

// TestXSKEveryQueue: an AF_XDP uplink on a two-queue veth receives what arrives on either
// queue. A packet socket with PACKET_QDISC_BYPASS sends on the queue of the sending CPU
// (packet_pick_tx_queue) and a veth delivers on the peer's queue of the same number
// (veth_xmit), so sending from each CPU in turn reaches each queue; a queue without a socket
// would pass its frames to the stack, and the uplink would miss them.
func TestXSKEveryQueue(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to reach two queues")
	}
	ns := testNS(t)
	for _, dev := range []string{"a0", "a1"} {
		run(t, "ip", "netns", "exec", ns, "ethtool", "-L", dev, "rx", "2", "tx", "2")
	}
	seg := datapath.NewSegment("t")
	for _, c := range []Config{{Dev: "a0", Attach: AttachXDP}, {Dev: "b0"}} {
		c.NetNS, c.Segment, c.Logger = ns, seg, quiet()
		u, err := Start(context.Background(), c)
		require.NoError(t, err)
		defer u.Close()
		eventually(t, c.Dev+" up", func() bool { return u.Status().State == Up })
		if c.Dev == "a0" {
			require.Equal(t, AttachXDP, u.Status().Attach, "a0 attached with %+v", u.Status())
		}
	}
	a1, b1 := rawSocket(t, ns, "a1"), rawSocket(t, ns, "b1")
	require.NoError(t, unix.SetsockoptInt(a1, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &all))
	defer unix.SchedSetaffinity(0, &all)
	for cpu, tag := 0, byte(20); cpu < 2; cpu, tag = cpu+1, tag+1 {
		var one unix.CPUSet
		one.Set(cpu)
		require.NoError(t, unix.SchedSetaffinity(0, &one))
		send(t, a1, testFrame(tag, 100))
		require.True(t, sees(t, b1, tag), "the frame sent from CPU %d (a0's queue %d) did not cross", cpu, cpu)
	}
}

// TestXSKLeavesAnotherProgramAlone: a device that already runs an XDP program of someone else's
// is not taken over: af_xdp fails, saying so, and the program stays.
func TestXSKLeavesAnotherProgramAlone(t *testing.T) {
	ns := testNS(t)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "MIT", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R0, 2), // XDP_PASS
		asm.Return(),
	}})
	require.NoError(t, err)
	defer prog.Close()
	h, err := netns.GetFromName(ns)
	require.NoError(t, err)
	defer h.Close()
	var theirs link.Link
	require.NoError(t, nsrun.InHandle(h, func() (err error) {
		ifi, err := netIndex("a0")
		if err != nil {
			return err
		}
		theirs, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifi, Flags: link.XDPGenericMode})
		return err
	}))
	defer theirs.Close()
	u, err := Start(context.Background(), Config{Dev: "a0", NetNS: ns, Segment: datapath.NewSegment("t"), Logger: quiet(), Attach: AttachXDP})
	require.NoError(t, err)
	st := u.Status()
	u.Close()
	require.Equal(t, Failed, st.State, "status %+v, want failed with both modes' refusals as the reason", st)
	require.Contains(t, st.Err, "native XDP", "status %+v, want failed with both modes' refusals as the reason", st)
	require.Contains(t, st.Err, "generic XDP", "status %+v, want failed with both modes' refusals as the reason", st)
	require.True(t, hasXDP(t, ns, "a0"), "the other program was detached")
}
