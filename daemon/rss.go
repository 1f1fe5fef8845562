package daemon

import (
	"context"
	"slices"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic"
)

var _ genl.RSSBackend = (*backend)(nil)

// RSS is mana_get_rxfh: Toeplitz, the port's 40-byte key and its indirection table of
// MANA_INDIRECT_TABLE_DEF_SIZE entries (get_rxfh_indir_size), also while the port is down.
func (b *backend) RSS(ctx context.Context, c genl.Caller, dev genl.Device) (r genl.RSS, err error) {
	err = b.withPort(dev, func(p *port) error {
		r = rssOf(p).RSS
		return nil
	})
	return r, err
}

// rssOf is the port's RSS setting: mana_get_rxfh and, as the RX ring count RSS_SET checks the
// table against, mana_get_rxnfc's ETHTOOL_GRXRINGS (apc->num_queues). Caller holds the lock.
func rssOf(p *port) genl.RSSSetting {
	v := p.vp.RSS()
	return genl.RSSSetting{
		RSS:     genl.RSS{HFunc: vnic.RSSHashTop, Indir: slices.Clone(v.Indir[:]), HKey: slices.Clone(v.Key[:])},
		RxRings: uint32(p.vp.Settings().Queues),
	}
}

// SetRSS is mana_set_rxfh: vnic checks the driver's rules (port up, Toeplitz, entries below the
// queue count) and steers by the new table from the next frame. The table lasts until the next
// detach/attach, as mana's; the key stays.
func (b *backend) SetRSS(ctx context.Context, c genl.Caller, dev genl.Device, u genl.Update[genl.RSSSetting]) error {
	return update(b, c, dev, "rss", u, rssOf,
		func(v genl.RSSSetting) any { return map[string]any{"hfunc": v.HFunc, "indir": v.Indir, "hkey": v.HKey} },
		func(p *port, v genl.RSSSetting) error {
			return p.vp.SetRSS(vnic.RSSUpdate{HFunc: v.HFunc, Key: v.HKey, Indir: v.Indir})
		})
}
