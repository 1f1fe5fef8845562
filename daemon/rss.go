package daemon

import (
	"context"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic"
)

var _ genl.RSSBackend = (*backend)(nil)

// RSS is mana_get_rxfh: Toeplitz, the port's 40-byte key and its indirection table of
// MANA_INDIRECT_TABLE_DEF_SIZE entries (get_rxfh_indir_size), also while the port is down.
func (b *backend) RSS(ctx context.Context, c genl.Caller, dev genl.Device) (r genl.RSS, err error) {
	err = b.withPort(dev, func(p *port) error {
		v := p.vp.RSS()
		r = genl.RSS{HFunc: vnic.RSSHashTop, Indir: v.Indir[:], HKey: v.Key[:]}
		return nil
	})
	return r, err
}
