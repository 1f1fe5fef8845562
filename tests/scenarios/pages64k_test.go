package scenarios

import (
	"fmt"
	"testing"
	"time"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scenario 2's port: 64K pages at MTU 1500.
const (
	bigPage   = 65536
	bigRing   = 256 // ceil(256/31) = 9 pages per queue in fragment mode, 256 in full-page mode
	bigQueues = 2
)

// pinned is one consistent reading of a port's RX memory: the port's state through the Go
// client (PortInfo: the page pools' Pages and PinnedBytes summed over the running queues, and the
// port's memory accountant, MemoryInUse) and what manactl --json show-rxbuf printed in between.
type pinned struct {
	info *genl.PortInfo
	show rxBufJSON
}

// readPinned returns the port's RX memory once it is steady: two client readings around a
// manactl show-rxbuf agree, and the pools' pinned bytes equal the memory accountant's (they
// differ only while a replaced pool still drains or a queue is taking a page).
func readPinned(t *testing.T, d *harness.Daemon, c *client.Client, ns, port string) pinned {
	t.Helper()
	var p pinned
	harness.Eventually(t, port+"'s pinned memory to settle", func() bool {
		before := portInfo(t, c, port)
		p.show = showRxBuf(t, d, ns, port)
		p.info = portInfo(t, c, port)
		return before.BytesPinned == p.info.BytesPinned && before.MemoryInUse == p.info.MemoryInUse &&
			p.info.BytesPinned == p.info.MemoryInUse && p.show.BytesPinned == p.info.BytesPinned
	})
	return p
}

// checkPinned checks one steady reading against the layout the mode gives on 64K pages at MTU
// 1500, and returns the pinned bytes.
//
// Each queue posts bigRing buffers, and the pool holds ceil(bigRing / frags) pages for them. A
// queue that has received a frame holds at most ceil((bigRing+1) / frags): mana_refill_rx_oob
// allocates the replacement buffer before the filled one goes up the stack and comes back, so
// one more buffer than the ring is out for a moment — in full-page mode that is one more page
// (257 instead of 256), in fragment mode it still fits in the 9th page (9 × 31 = 279 ≥ 257).
// With offloads (the default) a queue also holds the buffers of a coalesced run until it is
// written to the TAP, as GRO holds skbs until the poll ends: up to datapath.GROMaxSegs more
// buffers, which may spread over one more page than they fill.
func checkPinned(t *testing.T, p pinned, fullPage bool) uint64 {
	t.Helper()
	frags := fragsPerPage(bigPage, 1500)
	require.Equal(t, 31, frags, "the upstream rule gives %d buffers per 64K page at MTU 1500, want 31", frags)
	if fullPage {
		frags = 1
	}
	minPages := uint64(bigQueues * ((bigRing + frags - 1) / frags))
	maxPages := uint64(bigQueues * ((bigRing+frags)/frags + (datapath.GROMaxSegs+frags-1)/frags + 1))
	l, s := p.info.Layout, p.show
	wantMode := map[bool]string{false: "fragments", true: "single"}[fullPage]
	assert.Equal(t, fullPage, l.Single, "%s mode layout: client %+v; show-rxbuf %+v; want %d buffers per 64K page, headroom %d", mode(fullPage), l, s.Layout, frags, headroom)
	assert.Equal(t, uint32(frags), l.FragCount, "%s mode layout: client %+v; show-rxbuf %+v; want %d buffers per 64K page, headroom %d", mode(fullPage), l, s.Layout, frags, headroom)
	assert.Equal(t, uint32(headroom), l.Headroom, "%s mode layout: client %+v; show-rxbuf %+v; want %d buffers per 64K page, headroom %d", mode(fullPage), l, s.Layout, frags, headroom)
	assert.Equal(t, wantMode, s.Layout.Mode, "%s mode layout: client %+v; show-rxbuf %+v; want %d buffers per 64K page, headroom %d", mode(fullPage), l, s.Layout, frags, headroom)
	assert.Equal(t, uint32(frags), s.Layout.FragCount, "%s mode layout: client %+v; show-rxbuf %+v; want %d buffers per 64K page, headroom %d", mode(fullPage), l, s.Layout, frags, headroom)
	assert.Equal(t, uint32(bigPage), s.Layout.PageSize, "%s mode layout: client %+v; show-rxbuf %+v; want %d buffers per 64K page, headroom %d", mode(fullPage), l, s.Layout, frags, headroom)
	want := uint64(bigQueues) * uint64((bigRing+frags-1)/frags) * bigPage
	assert.Equal(t, want, l.BytesTotal, "%s mode: a full ring pins %d bytes (show-rxbuf %d), want %d", mode(fullPage), l.BytesTotal, s.Layout.BytesTotal, want)
	assert.Equal(t, want, s.Layout.BytesTotal, "%s mode: a full ring pins %d bytes (show-rxbuf %d), want %d", mode(fullPage), l.BytesTotal, s.Layout.BytesTotal, want)
	assert.GreaterOrEqual(t, p.info.PagesPinned, minPages, "%s mode: %d pages / %d bytes pinned (show-rxbuf %d / %d), want %d..%d pages of 64K", mode(fullPage), p.info.PagesPinned, p.info.BytesPinned, s.PagesPinned, s.BytesPinned, minPages, maxPages)
	assert.LessOrEqual(t, p.info.PagesPinned, maxPages, "%s mode: %d pages / %d bytes pinned (show-rxbuf %d / %d), want %d..%d pages of 64K", mode(fullPage), p.info.PagesPinned, p.info.BytesPinned, s.PagesPinned, s.BytesPinned, minPages, maxPages)
	assert.Equal(t, p.info.PagesPinned*bigPage, p.info.BytesPinned, "%s mode: %d pages / %d bytes pinned (show-rxbuf %d / %d), want %d..%d pages of 64K", mode(fullPage), p.info.PagesPinned, p.info.BytesPinned, s.PagesPinned, s.BytesPinned, minPages, maxPages)
	assert.Equal(t, p.info.PagesPinned, s.PagesPinned, "%s mode: %d pages / %d bytes pinned (show-rxbuf %d / %d), want %d..%d pages of 64K", mode(fullPage), p.info.PagesPinned, p.info.BytesPinned, s.PagesPinned, s.BytesPinned, minPages, maxPages)
	return p.info.BytesPinned
}

// TestPinnedMemory64K is scenario 2, from seed 001 (001_5d42868898e98dc8: "net: mana: Use page
// pool fragments for RX buffers instead of full pages to improve memory efficiency", written for
// 64KB-page VMs; 35 buffers per page there, 31 after the headroom fix of seed 002). Two ports with
// 64K pages at MTU 1500 (2 queues, rings of 256) carry a TCP stream; on the receiving port the
// test checks:
//   - show-rxbuf (manactl --json) reports 31 buffers per page, the 256-byte headroom, and pinned
//     pages/bytes equal to the page pools' own accounting (PortInfo.PagesPinned/BytesPinned) and
//     to the port's memory accountant (MemoryInUse): ceil(256/31) = 9 pages per queue;
//   - flipping full-page-rx on during the traffic changes the pinned memory by the expected
//     factor (256 or 257 pages per queue instead of 9, i.e. 256/9 ≈ 28.4× for the full rings),
//     and flipping it off brings it back; traffic resumes after each flip (RX packets grow);
//   - the stream arrives intact (sha256) and every buffer comes back when it ends.
func TestPinnedMemory64K(t *testing.T) {
	nsA, nsB := harness.Name("s2a", ""), harness.Name("s2b", "")
	portA, portB := harness.Name("pa", "0"), harness.Name("pb", "0")
	ipA, ipB := "10.207.0.1", "10.207.0.2"
	cfg := []string{`page_size = "64K"`, "mtu = 1500", fmt.Sprintf("queues = %d", bigQueues), fmt.Sprintf("rx_ring = %d", bigRing)}
	d := harness.Start(t, "", "", portTOML(portA, nsA, "s", cfg...)+portTOML(portB, nsB, "s", cfg...), nsA, nsB)
	for _, x := range []struct{ ns, port, ip string }{{nsA, portA, ipA}, {nsB, portB, ipB}} {
		harness.Run(t, x.ns, "ip", "addr", "add", x.ip+"/24", "dev", x.port)
		harness.Run(t, x.ns, "ip", "link", "set", x.port, "up")
	}
	harness.Run(t, nsA, "ping", "-c", "2", "-i", "0.2", "-W", "2", ipB)
	c := d.Client(nsB)

	tr, err := harness.StartTransfer(nsA, nsB, ipB+":5301", 0, 61)
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			tr.Stop()
		}
	}()
	rxPackets := func() uint64 { return total(stats(t, c, portB), "rx", "packets") }
	// resumes waits until portB has received another 200 frames: the stream is flowing.
	resumes := func(what string) {
		t.Helper()
		from := rxPackets()
		harness.Eventually(t, "traffic to flow "+what, func() bool { return rxPackets() >= from+200 })
	}
	resumes("before the first flip")

	frag := checkPinned(t, readPinned(t, d, c, nsB, portB), false)
	start := time.Now()
	setFlag(t, c, portB, true)
	took := time.Since(start)
	resumes("after full-page-rx on")
	full := checkPinned(t, readPinned(t, d, c, nsB, portB), true)
	setFlag(t, c, portB, false)
	resumes("after full-page-rx off")
	back := checkPinned(t, readPinned(t, d, c, nsB, portB), false)
	t.Logf("pinned on %s: fragment %d KiB, full-page %d KiB (%.1f×; full rings alone %d/%d = %.1f×), fragment again %d KiB; flip on took %v",
		portB, frag>>10, full>>10, float64(full)/float64(frag), bigRing, (bigRing+30)/31,
		float64(bigRing)/float64((bigRing+30)/31), back>>10, took)

	tr.Stop()
	stopped = true
	require.NoError(t, tr.Check(), "the stream across the flips")
	t.Logf("stream: %d MiB intact across both flips", tr.Received>>20)
	harness.Eventually(t, "every RX buffer to come back", func() bool {
		i := portInfo(t, c, portB)
		return i.BuffersInFlight == 0 && i.BytesPinned == i.MemoryInUse
	})
}
