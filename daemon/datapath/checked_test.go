package datapath

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// corruptXDP passes every frame, flipping one payload byte (the checksum left as it was) of the
// TCP segment to segPort whose sequence number is seq: an XDP program that writes a frame
// without fixing its checksum.
type corruptXDP struct {
	seq  uint32
	done atomic.Bool
}

func (x *corruptXDP) Name() string { return "corrupt" }

func (x *corruptXDP) Run(_ int, buf []byte, data, end int) (vnic.XDPAction, int, int, error) {
	f := buf[data:end]
	if len(f) > 60 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && f[23] == 6 && binary.BigEndian.Uint16(f[36:]) == segPort &&
		binary.BigEndian.Uint32(f[38:]) == x.seq {
		f[60] ^= 0xff
		x.done.Store(true)
	}
	return vnic.XDPPass, data, end, nil
}

// tcpCsumErrors reads TcpExt-less Tcp: InCsumErrors of namespace ns.
func tcpCsumErrors(t *testing.T, ns string) uint64 {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").Output()
	require.NoError(t, err, "read /proc/net/snmp in %s", ns)
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "InCsumErrors" && i < len(f) {
				v, err := strconv.ParseUint(f[i], 10, 64)
				require.NoError(t, err)
				return v
			}
		}
	}
	t.Fatalf("no Tcp InCsumErrors in %s's /proc/net/snmp", ns)
	return 0
}

// TestCheckedSegments sends TCP superframes between two ports with offloads. Without XDP the
// segments the sender's Segmenter built reach the receiver's coalescer vouched for, merge into
// one superframe, and the receiving kernel finds no checksum error. With an XDP program on the
// receiver that rewrites one segment's payload and passes it, that segment is not vouched for:
// the coalescer verifies it, refuses it, and the kernel gets it alone and drops it for its
// checksum (merged, its corruption would have been hidden by the superframe's fresh checksum).
func TestCheckedSegments(t *testing.T) {
	const segs, mss = 10, 1000
	for _, xdp := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-xdp", true: "xdp-rewrites"}[xdp], func(t *testing.T) {
			h := newHarness(t)
			a := h.addPort(portOpts{queues: 1, offload: true, noIPv6: true})
			b := h.addPort(portOpts{queues: 1, offload: true, noIPv6: true})
			x := &corruptXDP{seq: 5000 + 4*mss}
			if xdp {
				h.locked(func() {
					require.NoError(t, b.port.SetXDP(x))
				})
			}
			a.pingOK(t, b) // the switch learns both MACs
			errsBefore := tcpCsumErrors(t, b.ns)
			mergedBefore := b.ep.Stats()[0].RxCoalesced
			rxBefore, _ := b.queueStats("packets")
			sendSuperframe(t, a, b, 5000, segs, mss)
			waitFor(t, "every segment to reach b", func() bool {
				rx, _ := b.queueStats("packets")
				return sum(rx)-sum(rxBefore) >= segs
			})
			merged := b.ep.Stats()[0].RxCoalesced - mergedBefore
			if !xdp {
				waitFor(t, "the run to be written", func() bool { return b.ep.Stats()[0].RxCoalesced-mergedBefore == segs-1 })
				n := tcpCsumErrors(t, b.ns) - errsBefore
				assert.Equal(t, uint64(0), n, "b's kernel counted %d TCP checksum errors, want 0", n)
				return
			}
			require.True(t, x.done.Load(), "the program did not see the segment to rewrite")
			waitFor(t, "b's kernel to drop the rewritten segment", func() bool { return tcpCsumErrors(t, b.ns)-errsBefore >= 1 })
			assert.LessOrEqual(t, merged, uint64(segs-3), "b merged %d segments into earlier ones, want at most %d (the rewritten one alone)", merged, segs-3)
		})
	}
}
