// Package layout turns the RX buffer model (vnic/rxbuf) into the manad family's layout form
// (wire.RxBufLayout): the live layout a port reports, and the plans of LAYOUT_PLAN, which manad
// answers and manactl rxbuf-plan computes by itself. One conversion, so both print the same.
package layout

import (
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic/rxbuf"
)

// Wire converts a layout to its wire form.
func Wire(l rxbuf.Layout) wire.RxBufLayout {
	return wire.RxBufLayout{
		Rule: l.Rule.String(), PageSize: uint32(l.PageSize), MTU: uint32(l.MTU), XDP: l.XDP,
		FullPageRx: l.FullPageRx, DataSize: uint32(l.DataSize), AllocSize: uint32(l.AllocSize),
		Headroom: uint32(l.Headroom), BufSize: uint32(l.BufSize), FragCount: uint32(l.FragCount),
		Order: uint32(l.Order), PoolSize: uint32(l.PoolSize), Single: l.Single, Reason: l.Reason,
		RingSize: uint32(l.RingSize), Queues: uint32(l.Queues), PagesPerQueue: uint32(l.PagesPerQueue),
		BytesPerQueue: uint64(l.BytesPerQueue), BytesTotal: uint64(l.BytesTotal),
	}
}

// Plan computes the layouts for hypothetical parameters under the requested rules (all three,
// newest first, when none is named). Errors are rxbuf's *extack.Error: EINVAL for an unknown
// rule or parameters out of range, EOPNOTSUPP for an MTU too large for XDP.
func Plan(r wire.LayoutRequest) ([]wire.RxBufLayout, error) {
	return PlanAlloc(r, rxbuf.AllocPagePoolFrag)
}

// PlanAlloc is Plan with RX buffers allocated as alloc says (the rx_alloc what-if knob, which
// the manad family's request does not carry); the layouts' Reason names a mode other than the
// default.
func PlanAlloc(r wire.LayoutRequest, alloc rxbuf.Alloc) ([]wire.RxBufLayout, error) {
	rules := rxbuf.Rules[:]
	if len(r.Rules) > 0 {
		rules = nil
		for _, name := range r.Rules {
			rule, err := rxbuf.ParseRule(name)
			if err != nil {
				return nil, err
			}
			rules = append(rules, rule)
		}
	}
	out := make([]wire.RxBufLayout, 0, len(rules))
	for _, rule := range rules {
		l, err := rxbuf.Compute(rxbuf.Params{
			Rule: rule, PageSize: int(r.PageSize), MTU: int(r.MTU), XDP: r.XDP, FullPageRx: r.FullPageRx,
			RingSize: int(r.RingSize), Queues: int(r.Queues), Alloc: alloc,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, Wire(l))
	}
	return out, nil
}
