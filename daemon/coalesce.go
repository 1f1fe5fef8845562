package daemon

import (
	"context"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic"
)

// Coalesce is mana_get_coalesce.
func (b *backend) Coalesce(ctx context.Context, c genl.Caller, dev genl.Device) (co genl.Coalesce, err error) {
	err = b.withPort(dev, func(p *port) error {
		co = genl.Coalesce(p.vp.Settings().Coalesce)
		return nil
	})
	return co, err
}

// SetCoalesce is mana_set_coalesce: vnic checks the driver's rules; a port that is down keeps
// the change for its next attach.
func (b *backend) SetCoalesce(ctx context.Context, c genl.Caller, dev genl.Device, u genl.Update[genl.Coalesce]) error {
	return update(b, c, dev, "coalesce", u, func(p *port) genl.Coalesce { return genl.Coalesce(p.vp.Settings().Coalesce) },
		func(co genl.Coalesce) any { return co },
		func(p *port, co genl.Coalesce) error { return p.vp.SetCoalesce(vnic.Coalesce(co)) })
}
