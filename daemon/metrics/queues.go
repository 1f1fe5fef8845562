package metrics

import (
	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
)

// ringCounters declare the RX ring's fill by queue (vnic.QueueCounters).
var ringCounters = []vnic.Counter[vnic.QueueCounters]{
	{Metric: "rx_ring_posted_buffers", Help: "RX buffers posted in the queue's ring (0 while it is not running).", Gauge: true,
		Derive: func(q *vnic.QueueCounters) uint64 { return uint64(max(q.RingPosted, 0)) }},
	{Metric: "rx_ring_size_buffers", Help: "Size of the queue's RX ring (0 while it is not running).", Gauge: true,
		Derive: func(q *vnic.QueueCounters) uint64 { return uint64(max(q.RingSize, 0)) }},
}

// pollCounters declare the data path's busy polling by queue (datapath.PollStats).
var pollCounters = []vnic.Counter[datapath.PollStats]{
	{Metric: "napi_polls_total", Help: "Polls the queue's reader made while busy-polling after it found work, as its NAPI settings " +
		"(defer-hard-irqs, gro-flush-timeout) ask and the daemon's max_pollers allows.",
		Field: func(s *datapath.PollStats) *uint64 { return &s.Polls }},
	{Metric: "napi_poll_hits_total", Help: "Polls counted in manad_napi_polls_total that found work.",
		Field: func(s *datapath.PollStats) *uint64 { return &s.Hits }},
	{Metric: "napi_poll_cpu_seconds_total", Help: "CPU time the queue's reader spent busy-polling (the cost of manad_napi_polls_total).",
		Scale: 1e-9, Derive: func(s *datapath.PollStats) uint64 { return uint64(max(s.CPUTime, 0)) }},
}

// poolCounters declare the metrics of a queue's page pool (pagepool.Stats of the running queue's
// pool, vnic.QueueCounters.Pool); ethtool -S shows none of them, as mana's does not.
var poolCounters = []vnic.Counter[pagepool.Stats]{
	{Metric: "page_pool_buffer_allocs_total", Help: "Buffers the queue's current page pool handed out (restarts with each rebuild of the queues).",
		Field: func(s *pagepool.Stats) *uint64 { return &s.Allocs }},
	{Metric: "page_pool_buffer_recycles_total", Help: "Buffers given back to the queue's current page pool directly by its owner.",
		Field: func(s *pagepool.Stats) *uint64 { return &s.Recycles }},
	{Metric: "page_pool_buffer_puts_total", Help: "Buffers given back to the queue's current page pool from other goroutines.",
		Field: func(s *pagepool.Stats) *uint64 { return &s.Puts }},
	{Metric: "page_pool_ring_overflows_total", Help: "Puts that found the page pool's return ring full.",
		Field: func(s *pagepool.Stats) *uint64 { return &s.RingOverflow }},
	{Metric: "page_pool_page_allocs_total", Help: "Pages the queue's current page pool took from the port's memory.",
		Field: func(s *pagepool.Stats) *uint64 { return &s.PageAllocs }},
	{Metric: "page_pool_page_releases_total", Help: "Pages the queue's current page pool gave back.",
		Field: func(s *pagepool.Stats) *uint64 { return &s.PageReleases }},
	{Metric: "page_pool_alloc_failures_total", Help: "Allocations the queue's current page pool failed (memory budget exhausted).",
		Field: func(s *pagepool.Stats) *uint64 { return &s.AllocFails }},
	{Metric: "page_pool_pages", Help: "Pages the queue's current page pool holds.", Gauge: true,
		Derive: func(s *pagepool.Stats) uint64 { return uint64(max(s.Pages, 0)) }},
	{Metric: "page_pool_buffers_in_flight", Help: "Buffers of the queue's current page pool that are out (posted or held).", Gauge: true,
		Derive: func(s *pagepool.Stats) uint64 { return uint64(max(s.InFlight, 0)) }},
}
