package metrics

import (
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
)

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
