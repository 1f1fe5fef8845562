package daemon

import (
	"context"
	"fmt"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/uplink"
)

// segment returns the wire segment named name with the settings its [[segment]] table gives
// (or the defaults), creating it on first use. Caller holds the configuration lock.
func (d *Daemon) segment(name string) *datapath.Segment {
	seg := d.segments.Get(name)
	spec := d.cfg.Segment(name)
	seg.SetAgeingTime(spec.AgeingTime)
	seg.SetStormLimit(spec.StormPPS)
	return seg
}

// startUplinks starts the uplinks of every [[segment]] table. One whose namespace or device is
// missing or down starts anyway and attaches when they are there; one that cannot start at all
// (no rtnetlink socket) is logged and left out. Caller holds the configuration lock.
func (d *Daemon) startUplinks(ctx context.Context) {
	for _, ss := range d.cfg.Segments {
		seg := d.segment(ss.Name)
		for _, us := range ss.Uplinks {
			u, err := uplink.Start(ctx, uplink.Config{Dev: us.Dev, NetNS: us.NetNS, MTU: ss.MTU, Segment: seg, Logger: d.log})
			if err != nil {
				d.log.Error("uplink not started", "segment", ss.Name, "uplink", us.String(), "err", err)
				continue
			}
			d.uplinks = append(d.uplinks, u)
		}
	}
}

// stopUplinks closes every uplink (each logs its counters) and logs each segment's counters.
func (d *Daemon) stopUplinks() {
	d.mu.Lock()
	us := d.uplinks
	d.uplinks = nil
	d.mu.Unlock()
	for _, u := range us {
		u.Close()
	}
	for _, s := range d.segments.List() {
		d.log.Info("segment counters", "segment", s.Name(), "stats", fmt.Sprintf("%+v", s.Stats()))
	}
}

// Uplinks returns the state of every uplink, in configuration order.
func (d *Daemon) Uplinks() []uplink.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]uplink.Status, len(d.uplinks))
	for i, u := range d.uplinks {
		out[i] = u.Status()
	}
	return out
}
