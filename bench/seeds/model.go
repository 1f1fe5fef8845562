package main

import (
	"fmt"
	"strings"

	"github.com/manad/manad/vnic/rxbuf"
)

// variant is one configuration a seed table compares: the RX buffer parameters of the port under
// test. The same values write the port's [[port]] table and feed the model, so the modelled and
// the measured columns of a row are about the same port.
type variant struct {
	label     string
	rule      rxbuf.Rule
	pageSize  int
	mtu       int
	fullPage  bool // private flag full-page-rx
	alloc     rxbuf.Alloc
	noRecycle bool // rx_recycle = false
	queues    int
	ring      int
}

// params is the variant as the model's input.
func (v variant) params() rxbuf.Params {
	return rxbuf.Params{Rule: v.rule, PageSize: v.pageSize, MTU: v.mtu, FullPageRx: v.fullPage,
		RingSize: v.ring, Queues: v.queues, Alloc: v.alloc}
}

// layout is the model's layout of the variant; the variants are constants of this program, so
// an invalid one is a bug.
func (v variant) layout() rxbuf.Layout { return rxbuf.MustCompute(v.params()) }

// portTOML is the [[port]] table of a port with the variant's settings.
func (v variant) portTOML(name, netns, segment string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[[port]]\nname = %q\nnetns = %q\nsegment = %q\npersistent = false\n", name, netns, segment)
	fmt.Fprintf(&b, "page_size = %d\nrule = %q\nmax_mtu = 9000\nmtu = %d\nqueues = %d\nrx_ring = %d\n",
		v.pageSize, v.rule, v.mtu, v.queues, v.ring)
	fmt.Fprintf(&b, "rx_alloc = %q\nrx_recycle = %t\n", v.alloc, !v.noRecycle)
	if v.fullPage {
		b.WriteString("priv_flags = [\"full-page-rx\"]\n")
	}
	return b.String()
}

// The variants of each table, in the thread's order: the "before" first.
var (
	// Seed 001: 64K pages (the thread's ARM64 VMs), the driver before and after 730ff06d3f5c.
	variants001 = []variant{
		{label: "MTU 1500, pre-frag (1 buffer per page)", rule: rxbuf.RulePreFrag, pageSize: 65536, mtu: 1500, queues: 1, ring: rxbuf.DefaultRingSize},
		{label: "MTU 1500, frag (page-pool fragments)", rule: rxbuf.RulePreHeadroom, pageSize: 65536, mtu: 1500, queues: 1, ring: rxbuf.DefaultRingSize},
		{label: "MTU 9000, pre-frag", rule: rxbuf.RulePreFrag, pageSize: 65536, mtu: 9000, queues: 1, ring: rxbuf.DefaultRingSize},
		{label: "MTU 9000, frag", rule: rxbuf.RulePreHeadroom, pageSize: 65536, mtu: 9000, queues: 1, ring: rxbuf.DefaultRingSize},
	}
	// Seed 000: 4K pages, the driver before the headroom rule; the flag flips one port between
	// the two rows.
	variants000 = []variant{
		{label: "fragment (default)", rule: rxbuf.RulePreHeadroom, pageSize: 4096, mtu: 1500, queues: 4, ring: rxbuf.DefaultRingSize},
		{label: "full-page-rx on", rule: rxbuf.RulePreHeadroom, pageSize: 4096, mtu: 1500, fullPage: true, queues: 4, ring: rxbuf.DefaultRingSize},
	}
	// Seed 002: the forwarding node's ports before and after 259c4a519100.
	variants002 = []variant{
		{label: "before (no headroom)", rule: rxbuf.RulePreHeadroom, pageSize: 4096, mtu: 1500, queues: 4, ring: 256},
		{label: "after (LL_RESERVED_SPACE headroom)", rule: rxbuf.RuleUpstream, pageSize: 4096, mtu: 1500, queues: 4, ring: 256},
	}
	// Seed 003: one RX queue, 4K pages, an MTU at which two buffers share a page.
	variants003 = []variant{
		{label: "baseline (no page pool)", rule: rxbuf.RulePreHeadroom, pageSize: 4096, mtu: 1500, alloc: rxbuf.AllocNoPool, queues: 1, ring: rxbuf.DefaultRingSize},
		{label: "pp page", rule: rxbuf.RulePreHeadroom, pageSize: 4096, mtu: 1500, alloc: rxbuf.AllocPagePoolPage, queues: 1, ring: rxbuf.DefaultRingSize},
		{label: "pp 2 frags", rule: rxbuf.RulePreHeadroom, pageSize: 4096, mtu: 1500, alloc: rxbuf.AllocPagePoolFrag, queues: 1, ring: rxbuf.DefaultRingSize},
	}
	// Seed 004: mvneta before and after "recycle buffers": one page per buffer, as mvneta.
	variants004 = []variant{
		{label: "recycling off", rule: rxbuf.RulePreHeadroom, pageSize: 4096, mtu: 1500, alloc: rxbuf.AllocPagePoolPage, noRecycle: true, queues: 1, ring: rxbuf.DefaultRingSize},
		{label: "recycling on", rule: rxbuf.RulePreHeadroom, pageSize: 4096, mtu: 1500, alloc: rxbuf.AllocPagePoolPage, queues: 1, ring: rxbuf.DefaultRingSize},
	}
)

// Column names shared by the model and the tests.
const (
	colPerPage     = "buffers per page"
	colBufSize     = "buffer stride"
	colMemQueue    = "RX memory per queue"
	colPagesQueue  = "pages per queue"
	colHeadroom    = "headroom"
	colExpandModel = "would pskb_expand_head"
	colPagesPer1k  = "pages allocated"
)

// modelCells are the modelled columns of a variant's row; every table takes the ones its
// thread is about.
func modelCells(v variant) map[string]cell {
	l := v.layout()
	expand := "no"
	if l.Headroom < rxbuf.LLReservedSpace {
		expand = "yes"
	}
	// Without recycling every buffer that comes back gives its page up once the page's last
	// buffer is back, and the refill allocates a new one: 1000/frag-count pages per 1000
	// frames. With recycling a page comes back to the pool and none is allocated once the
	// ring is full.
	perK := 0.0
	if v.noRecycle || v.alloc == rxbuf.AllocNoPool {
		perK = 1000 / float64(l.FragCount)
	}
	return map[string]cell{
		colPerPage:     num(float64(l.FragCount)),
		colBufSize:     num(float64(l.BufSize)),
		colMemQueue:    num(float64(l.BytesPerQueue) / (1 << 20)),
		colPagesQueue:  num(float64(l.PagesPerQueue)),
		colHeadroom:    num(float64(l.Headroom)),
		colExpandModel: text(expand),
		colPagesPer1k:  num(perK),
	}
}
