package vnic

import "strconv"

// Scope says how ethtool -S shows a counter: once for the port, or once per queue.
type Scope uint8

// The scopes of a counter.
const (
	// PortScope shows one value named Name: the sum over the port's queues.
	PortScope Scope = iota
	// RxQueueScope shows one value per queue, named rx_<q>_<Name>.
	RxQueueScope
	// TxQueueScope shows one value per queue, named tx_<q>_<Name>.
	TxQueueScope
)

// Counter declares one counter, once: its name in ethtool -S, what it counts, its Prometheus
// series, and where it is counted (the field of a queue's snapshot S that holds it). The ethtool
// -S strings and values (CounterNames, CounterValues), the Prometheus families (daemon/metrics)
// and the list in manactl stats --help (generated, daemon/statnames_test.go) are derived from
// tables of Counters: ManaCounters (the mana driver's, in mana_get_strings order), ManadCounters
// (the model's own) and the daemon's tables of the data path's and the page pools'; no other
// list names a counter.
//
// Adding a counter the model keeps: its field in rxStats or txStats and its row (this package,
// stats.go), and the increment where it is counted; for a manad_ counter, regenerate manactl's
// list (go test -run TestManactlStatsHelp ./daemon/ -update-stats-help). TestEveryCounterDeclared
// fails for a field without a row.
//
// A table is in ethtool -S order. Consecutive rows of one queue scope form a block that ethtool
// -S repeats for every queue (rx_0_packets … rx_0_coalesced_cqe_4, rx_1_packets …), as
// mana_get_strings does.
type Counter[S any] struct {
	// Name is the counter's ethtool -S string, after the rx_<q>_ or tx_<q>_ prefix of a queue
	// scope; "" when ethtool -S does not show it (a metric only). Names of manad's own counters
	// begin with ManadStatPrefix; every shown name fits ETH_GSTRING_LEN.
	Name  string
	Scope Scope
	// Help says what it counts. In a Prometheus family with a reason label it is the reason's
	// explanation in the family's help ("reason (Help)"), else the family's help.
	Help string
	// Metric is the Prometheus family after "manad_", one series per queue (port, netns, queue
	// labels); "" when not exported. Reason is the series' reason label; "" when the family has
	// none.
	Metric, Reason string
	// Gauge marks a level that goes up and down rather than a count. Scale converts the value
	// to the metric's unit (0 means 1): 1e-9 exports nanoseconds as seconds.
	Gauge bool
	Scale float64
	// Field is where the counter is kept: its field in a queue's snapshot. Derive instead
	// computes it from a snapshot's other counters. With neither, the model never counts it
	// (hardware it does not have): ethtool -S shows 0, as for a NIC that saw no such event.
	Field  func(*S) *uint64
	Derive func(*S) uint64
}

// Read returns the counter's value in the queue snapshot s.
func (c *Counter[S]) Read(s *S) uint64 {
	switch {
	case c.Field != nil:
		return *c.Field(s)
	case c.Derive != nil:
		return c.Derive(s)
	}
	return 0
}

// shown calls f for every value ethtool -S shows of the counters cs on a port with queues
// queues, in order: q is the queue of a queue-scope counter, -1 for a port-scope one.
func shown[S any](cs []Counter[S], queues int, f func(c *Counter[S], q int)) {
	for i := 0; i < len(cs); {
		c := &cs[i]
		if c.Name == "" || c.Scope == PortScope {
			if c.Name != "" {
				f(c, -1)
			}
			i++
			continue
		}
		j := i + 1 // the block: following rows of the same scope, metric-only rows skipped
		for j < len(cs) && (cs[j].Name == "" || cs[j].Scope == c.Scope) {
			j++
		}
		for q := 0; q < queues; q++ {
			for k := i; k < j; k++ {
				if cs[k].Name != "" {
					f(&cs[k], q)
				}
			}
		}
		i = j
	}
}

// CounterNames returns the ethtool -S strings of the counters cs for a port with queues queues.
func CounterNames[S any](cs []Counter[S], queues int) []string {
	names := make([]string, 0, CounterCount(cs, queues))
	shown(cs, queues, func(c *Counter[S], q int) {
		switch c.Scope {
		case RxQueueScope:
			names = append(names, "rx_"+strconv.Itoa(q)+"_"+c.Name)
		case TxQueueScope:
			names = append(names, "tx_"+strconv.Itoa(q)+"_"+c.Name)
		default:
			names = append(names, c.Name)
		}
	})
	return names
}

// CounterValues returns the values of CounterNames(cs, len(qs)), read from the snapshots of
// queues 0..len(qs)-1: a port-scope counter is the sum over them.
func CounterValues[S any](cs []Counter[S], qs []S) []uint64 {
	out := make([]uint64, 0, CounterCount(cs, len(qs)))
	shown(cs, len(qs), func(c *Counter[S], q int) {
		if q >= 0 {
			out = append(out, c.Read(&qs[q]))
			return
		}
		var sum uint64
		for i := range qs {
			sum += c.Read(&qs[i])
		}
		out = append(out, sum)
	})
	return out
}

// CounterCount returns len(CounterNames(cs, queues)) without building the names.
func CounterCount[S any](cs []Counter[S], queues int) int {
	n := 0
	shown(cs, queues, func(*Counter[S], int) { n++ })
	return n
}
