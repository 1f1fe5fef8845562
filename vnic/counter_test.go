package vnic

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCounterTable: a table's port counters are sums over the queues, its queue blocks repeat for
// every queue in order, metric-only rows show nowhere, and a row without Field or Derive is 0.
func TestCounterTable(t *testing.T) {
	type snap struct{ a, b uint64 }
	cs := []Counter[snap]{
		{Name: "zero"},
		{Name: "a_sum", Field: func(s *snap) *uint64 { return &s.a }},
		{Name: "a", Scope: RxQueueScope, Field: func(s *snap) *uint64 { return &s.a }},
		{Metric: "hidden_total", Field: func(s *snap) *uint64 { return &s.b }},
		{Name: "ab", Scope: RxQueueScope, Derive: func(s *snap) uint64 { return s.a + s.b }},
		{Name: "b", Scope: TxQueueScope, Field: func(s *snap) *uint64 { return &s.b }},
		{Name: "b_sum", Field: func(s *snap) *uint64 { return &s.b }},
	}
	for _, tt := range []struct {
		name   string
		qs     []snap
		names  []string
		values []uint64
	}{
		{"no queue", nil, []string{"zero", "a_sum", "b_sum"}, []uint64{0, 0, 0}},
		{"one queue", []snap{{1, 2}}, []string{"zero", "a_sum", "rx_0_a", "rx_0_ab", "tx_0_b", "b_sum"},
			[]uint64{0, 1, 1, 3, 2, 2}},
		{"two queues", []snap{{1, 2}, {10, 20}},
			[]string{"zero", "a_sum", "rx_0_a", "rx_0_ab", "rx_1_a", "rx_1_ab", "tx_0_b", "tx_1_b", "b_sum"},
			[]uint64{0, 11, 1, 3, 10, 30, 2, 20, 22}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.names, CounterNames(cs, len(tt.qs)))
			assert.Equal(t, tt.values, CounterValues(cs, tt.qs))
			assert.Equal(t, len(tt.names), CounterCount(cs, len(tt.qs)))
		})
	}
}
