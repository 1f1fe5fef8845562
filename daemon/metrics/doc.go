// Package metrics exports manad's counters to Prometheus: a Collector that reads the live
// counters of vnic and the data path at every scrape (no second copy of them on the per-frame
// path), the control-request counts of the netlink server (Control, a genl.Observer), and an
// HTTP server for /metrics. A SegmentCollector does the same for the wire segments and their
// uplinks (segment, dev, netns labels: names from the configuration or an admin's runtime change).
//
// The per-queue families are not written here one by one: each is the Metric of rows of counter
// tables (vnic.Counter), which also declare the ethtool -S counters: vnic.ManaCounters and
// vnic.ManadCounters, datapath.Counters (the data path's manad_* counters), and the page pools',
// RX rings' and pollers' tables (queues.go). A family's help is its row's Help, or for a family
// whose rows carry a reason label, its reasonHelp and each reason's Help.
//
// Every family is named manad_*, counters end in _total, sizes are bytes and durations seconds.
// Labels are bounded: port, netns (the port's namespace name, "" for manad's own), queue (below
// the port's queue count), and small fixed sets (reason, op, outcome, family, command, errno).
// No label carries a uid, pid or anything else a client chooses. README.md ("Metrics") lists
// the families.
package metrics
