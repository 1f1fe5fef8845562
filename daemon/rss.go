package daemon

import (
	"context"
	"slices"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic"
)

// RSS is mana_get_rxfh: Toeplitz, the port's 40-byte key and its indirection table of
// MANA_INDIRECT_TABLE_DEF_SIZE entries (get_rxfh_indir_size), also while the port is down.
func (b *backend) RSS(ctx context.Context, c genl.Caller, dev genl.Device) (r genl.RSS, err error) {
	err = b.withPort(dev, func(p *port) error {
		r = rssOf(p).RSS
		return nil
	})
	return r, err
}

// rssOf is the port's RSS setting: mana_get_rxfh, mana_get_rx_ring_count (apc->num_queues) as
// the RX ring count RSS_SET checks the table against, and the netdev's IFF_RXFH_CONFIGURED.
// Caller holds the lock.
func rssOf(p *port) genl.RSSSetting {
	v := p.vp.RSS()
	return genl.RSSSetting{
		RSS:        genl.RSS{HFunc: vnic.RSSHashTop, Indir: slices.Clone(v.Indir[:]), HKey: slices.Clone(v.Key[:])},
		RxRings:    uint32(p.vp.Settings().Queues),
		Configured: v.Configured,
	}
}

// SetRSS is ethnl_rss_set's tail and mana_set_rxfh: for a change, vnic checks the driver's rules
// (port up, Toeplitz, entries below the queue count), steers by the new table from the next
// frame, and the change is logged and notified; IFF_RXFH_CONFIGURED follows the request once it
// succeeded, also without a change. The table lasts until the next detach/attach, as mana's;
// the key and IFF_RXFH_CONFIGURED stay.
func (b *backend) SetRSS(ctx context.Context, c genl.Caller, dev genl.Device, u genl.Update[genl.RSSSetting]) error {
	return b.withPort(dev, func(p *port) error {
		next, mod, err := u.Apply(rssOf(p))
		if err != nil {
			return err
		}
		if mod {
			value := map[string]any{"hfunc": next.HFunc, "indir": next.Indir, "hkey": next.HKey}
			err := b.changeLocked(c, p, "rss", value, func() error {
				return p.vp.SetRSS(vnic.RSSUpdate{HFunc: next.HFunc, Key: next.HKey, Indir: next.Indir})
			})
			if err != nil {
				return err
			}
		}
		p.vp.SetRSSConfigured(next.Configured)
		if mod && u.Changed != nil {
			u.Changed(rssOf(p))
		}
		return nil
	})
}

// checkRSSChannels is CHANNELS_SET's ethtool_check_max_channel on the port's RSS state under
// the configuration lock (genl.CheckRSSChannels): while the user's table is in force, the new
// queue count must exceed every queue it names.
func checkRSSChannels(p *port, next genl.Channels) error {
	return genl.CheckRSSChannels(rssOf(p), next)
}
