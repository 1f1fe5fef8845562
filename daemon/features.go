package daemon

import (
	"context"
	"slices"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/genl"
)

// The port's netdev features (ethtool -k/-K), by the kernel's names. They are the offloads of
// its TAP and move together: the TAP's virtio header is one switch (tap.Device.SetOffload), and
// with it go the TX offloads the kernel may hand over unfinished and the RX coalescer (rx-gro).

// tapFeatures maps the TAP's offload bits to the features they are.
var tapFeatures = []struct {
	bit  uint
	name string
}{
	{tap.OffloadCsum, "tx-checksum-ip-generic"}, {tap.OffloadCsum, "tx-scatter-gather"},
	{tap.OffloadTSO4, "tx-tcp-segmentation"}, {tap.OffloadTSOECN, "tx-tcp-ecn-segmentation"},
	{tap.OffloadTSO6, "tx-tcp6-segmentation"}, {tap.OffloadUSO4 | tap.OffloadUSO6, "tx-udp-segmentation"},
}

// groFeature is the RX coalescer, on with the virtio header.
const groFeature = "rx-gro"

// offloadFeatures lists every feature a port can change.
func offloadFeatures() []string {
	out := []string{groFeature}
	for _, f := range tapFeatures {
		out = append(out, f.name)
	}
	return out
}

// features is what the port's TAP does now; wanted is active, as the features are one switch.
func features(p *port) genl.Features {
	f := genl.Features{HW: offloadFeatures()}
	if p.dev == nil || !p.dev.VnetHdr() {
		return f
	}
	bits := p.dev.Offloads()
	f.Active = append(f.Active, groFeature)
	for _, tf := range tapFeatures {
		if bits&tf.bit != 0 {
			f.Active = append(f.Active, tf.name)
		}
	}
	f.Wanted = f.Active
	return f
}

// Features is the port's features (ethtool -k).
func (b *backend) Features(ctx context.Context, c genl.Caller, dev genl.Device) (f genl.Features, err error) {
	err = b.withPort(dev, func(p *port) error {
		f = features(p)
		return nil
	})
	return f, err
}

// SetFeatures is ethtool -K: a request that turns any offload on turns the TAP's offloads on,
// one that only turns some off turns them off; the port stays up (the endpoint re-attaches its
// queues and the carrier is set again).
func (b *backend) SetFeatures(ctx context.Context, c genl.Caller, dev genl.Device, u genl.Update[genl.Features]) error {
	return update(b, c, dev, "features", u, features,
		func(f genl.Features) any { return f.Wanted },
		func(p *port, next genl.Features) error {
			cur := features(p)
			missing := func(from, in []string) bool {
				return slices.ContainsFunc(from, func(n string) bool { return !slices.Contains(in, n) })
			}
			on := missing(next.Wanted, cur.Wanted) || len(cur.Active) > 0 && !missing(cur.Wanted, next.Wanted)
			err := p.ep.SetOffload(on)
			b.d().syncCarrier(p)
			return err
		})
}
