package datapath

import (
	"strings"
	"testing"

	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/require"
)

// TestStatTotals: the endpoint's ETH_SS_STATS extras are its queues' counters summed, named
// under manad's prefix.
func TestStatTotals(t *testing.T) {
	h := newHarness(t)
	a := h.addPort(portOpts{})
	b := h.addPort(portOpts{})
	a.pingOK(t, b)
	// Read the queues first: other traffic (IPv6 neighbour discovery) may still arrive, so the
	// totals read afterwards can only be larger.
	var inline, deferred uint64
	for _, q := range b.ep.Stats() {
		inline += q.RxInline
		deferred += q.RxDeferred
	}
	names, totals := vnic.CounterNames(Counters, 0), vnic.CounterValues(Counters, b.ep.Stats())
	require.Len(t, names, len(totals), "%d names, %d values", len(names), len(totals))
	for _, n := range names {
		if !strings.HasPrefix(n, vnic.ManadStatPrefix) || len(n) >= 32 {
			t.Errorf("name %q", n)
		}
	}
	if totals[0] < inline || totals[1] < deferred || inline+deferred == 0 {
		t.Errorf("totals %v; queues say inline %d, deferred %d (the ping reached b)", totals, inline, deferred)
	}
}
