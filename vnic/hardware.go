package vnic

import (
	"math"

	"github.com/manad/manad/vnic/rxbuf"
)

// Defaults of a port's hardware (mana.h, mana_en.c).
const (
	DefaultMaxMTU    = 9000 // adapter_mtu - ETH_HLEN of a jumbo-capable vport
	DefaultMaxQueues = 64   // MANA_MAX_NUM_QUEUES

	// DefaultMemoryBudget is the per-port RX memory budget when the configuration names none.
	DefaultMemoryBudget int64 = 2 << 30
)

// Hardware is what a port's "hardware" is: the vport's and the adapter's properties the driver
// reads at probe (mana_query_device_cfg, mana_query_vport_cfg) and the what-if knobs of its RX
// buffers. It is written once and embedded where a port is described: Config (the model's
// input) and the daemon's port spec, so that a field added here is carried by both without a
// conversion. The zero value of every field is the default (New fills it in: defaults); each
// field's rule is Check's, in check below, next to the field.
type Hardware struct {
	PageSize  int        // 4096, 16384 or 65536; 0 means 4096
	MaxMTU    int        // adapter_mtu - ETH_HLEN; 0 means DefaultMaxMTU
	MaxQueues int        // vport max_rxq/max_txq; 0 means DefaultMaxQueues
	Rule      rxbuf.Rule // which upstream RX buffer rule the port follows
	// CQECoalesce8 is the vport's MANA_CQE_COAL_PKTS_8 capability: rx-cqe-frames may then be 8.
	CQECoalesce8 bool
	// MemoryBudget caps the bytes of RX pages the port may hold, pre-allocations included;
	// 0 means DefaultMemoryBudget, a negative value no limit.
	MemoryBudget int64
	// RxAlloc is how RX buffers are allocated (rxbuf.Alloc): page-pool fragments as the rule
	// decides (the zero value), a page-pool page per buffer, or no pool at all.
	RxAlloc rxbuf.Alloc
	// RxRecycle says whether RX pages that come back are handed out again (the zero value, the
	// page pool's recycling) or released to the port's memory (always so with
	// rxbuf.AllocNoPool).
	RxRecycle Recycle
	// Speed is the link speed the vport reports in Mb/s (newer drivers' max_speed, from
	// MANA_QUERY_LINK_CONFIG); 0 means unknown (SPEED_UNKNOWN), as a vport that reports none.
	Speed int
	// MSIXVectors is how many MSI-X vectors the adapter can use (gc->num_msix_usable): the
	// hardware channel takes one and each queue's EQ one more, so the port has at most
	// MSIXVectors-1 queues (mana_gd_query_max_resources); 0 means enough for MaxQueues.
	MSIXVectors int
}

// Recycle says whether a port recycles its RX pages. It is a flag whose zero value is the
// driver's behaviour (recycling on), so that a zero Hardware is the default port and the flag
// keeps one polarity in every layer: RxRecycle.
type Recycle uint8

// The recycling modes.
const (
	RecycleOn  Recycle = iota // page_pool recycling: a returned page is handed out again
	RecycleOff                // a returned page is released to the port's memory
)

// RecycleIf returns RecycleOn when on is true, else RecycleOff.
func RecycleIf(on bool) Recycle {
	if on {
		return RecycleOn
	}
	return RecycleOff
}

// On reports whether pages are recycled.
func (r Recycle) On() bool { return r == RecycleOn }

// The fields of Hardware that Check refuses values of.
const (
	FieldPageSize  Field = "PageSize"
	FieldMaxMTU    Field = "MaxMTU"
	FieldMaxQueues Field = "MaxQueues"
	FieldRule      Field = "Rule"
	FieldRxAlloc   Field = "RxAlloc"
	FieldRxRecycle Field = "RxRecycle"
	FieldSpeed     Field = "Speed"
	FieldMSIX      Field = "MSIXVectors"
)

// DefaultHardware returns the hardware of a port whose configuration names none of it: every
// default filled in, as New fills in a zero Hardware.
func DefaultHardware() Hardware {
	var h Hardware
	h.defaults()
	return h
}

// defaults fills in the zero values that mean a default.
func (h *Hardware) defaults() {
	if h.PageSize == 0 {
		h.PageSize = 4096
	}
	if h.MaxMTU == 0 {
		h.MaxMTU = DefaultMaxMTU
	}
	if h.MaxQueues == 0 {
		h.MaxQueues = DefaultMaxQueues
	}
	if h.MemoryBudget == 0 {
		h.MemoryBudget = DefaultMemoryBudget
	}
	h.limitQueues()
}

// limitQueues lowers MaxQueues to what the MSI-X vectors allow, as mana_gd_query_max_resources
// caps max_num_queues at num_msix_usable - 1 (one vector is the hardware channel's). A value
// Check refuses (fewer than 2 vectors) leaves MaxQueues as it is.
func (h *Hardware) limitQueues() {
	if h.MSIXVectors >= 2 && h.MaxQueues > h.MSIXVectors-1 {
		h.MaxQueues = h.MSIXVectors - 1
	}
}

// check validates each field of the hardware on its own, in the struct's order; the zero
// values that mean a default are refused (New fills them in first).
func (h *Hardware) check() []*FieldError {
	var errs []*FieldError
	if !rxbuf.ValidPageSize(h.PageSize) {
		errs = append(errs, refuse(FieldPageSize, "page size %d not supported (want 4096, 16384 or 65536)", h.PageSize))
	}
	if h.MaxMTU < MinMTU || h.MaxMTU > rxbuf.MaxMTU {
		errs = append(errs, outOfRange(FieldMaxMTU, h.MaxMTU, MinMTU, rxbuf.MaxMTU, "",
			"max MTU %d out of range %d..%d", h.MaxMTU, MinMTU, rxbuf.MaxMTU))
	}
	if h.MaxQueues < 1 || h.MaxQueues > MaxQueues {
		errs = append(errs, outOfRange(FieldMaxQueues, h.MaxQueues, 1, MaxQueues, "",
			"max queues %d out of range 1..%d", h.MaxQueues, MaxQueues))
	}
	if h.Rule > rxbuf.RulePreFrag {
		errs = append(errs, refuse(FieldRule, "unknown RX buffer rule %d", h.Rule))
	}
	if h.RxAlloc > rxbuf.AllocNoPool {
		errs = append(errs, refuse(FieldRxAlloc, "unknown RX allocation mode %d", h.RxAlloc))
	}
	if h.RxRecycle > RecycleOff {
		errs = append(errs, refuse(FieldRxRecycle, "unknown RX recycling mode %d", h.RxRecycle))
	}
	// ethtool_validate_speed: a speed is at most INT_MAX Mb/s (SPEED_UNKNOWN is the model's 0).
	if h.Speed < 0 || h.Speed > math.MaxInt32 {
		errs = append(errs, outOfRange(FieldSpeed, h.Speed, 0, math.MaxInt32, "",
			"speed %d out of range 0..%d (Mb/s, 0 = unknown)", h.Speed, math.MaxInt32))
	}
	// mana_gd_query_max_resources: with one vector or none there is no queue's EQ (-ENOSPC).
	if h.MSIXVectors < 0 || h.MSIXVectors == 1 || h.MSIXVectors > MaxQueues+1 {
		errs = append(errs, outOfRange(FieldMSIX, h.MSIXVectors, 2, MaxQueues+1, "",
			"MSI-X vectors %d out of range 2..%d (one for the hardware channel, one per queue; 0 = enough)",
			h.MSIXVectors, MaxQueues+1))
	}
	return errs
}
