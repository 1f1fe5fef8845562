package daemon

import (
	"context"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic/extack"
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

// kernelFeatures are features a port's netdev has as every netdev does, off until turned on
// (NETIF_F_SOFT_FEATURES_OFF, which register_netdevice adds to hw_features): the kernel keeps
// them on the TAP, where -K turns them on and off (tap.Device.SetFeatures) as `ethtool -K` on
// the TAP would, and they decide whether the RX coalescer merges UDP datagrams too
// (tap.Features.UDPGRO), as they decide it for the kernel's own GRO.
var kernelFeatures = []tap.Features{tap.FeatureGROUDPFwd, tap.FeatureGROList}

// offloadFeatures lists every feature a port can change.
func offloadFeatures() []string {
	out := []string{groFeature}
	for _, f := range tapFeatures {
		out = append(out, f.name)
	}
	for _, f := range kernelFeatures {
		out = append(out, f.Name())
	}
	return out
}

// isKernelFeature says whether name is one of kernelFeatures.
func isKernelFeature(name string) bool {
	return slices.ContainsFunc(kernelFeatures, func(f tap.Features) bool { return f.Name() == name })
}

// features is what the port's TAP does now; wanted is active, as the features are one switch.
func features(p *port) genl.Features {
	f := genl.Features{HW: offloadFeatures()}
	if p.dev != nil && p.dev.VnetHdr() {
		bits := p.dev.Offloads()
		f.Active = append(f.Active, groFeature)
		for _, tf := range tapFeatures {
			if bits&tf.bit != 0 {
				f.Active = append(f.Active, tf.name)
			}
		}
	}
	for _, kf := range kernelFeatures {
		if p.tapFeatures&kf != 0 {
			f.Active = append(f.Active, kf.Name())
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
// queues and the carrier is set again). The kernelFeatures it changes on the TAP alone, first.
func (b *backend) SetFeatures(ctx context.Context, c genl.Caller, dev genl.Device, u genl.Update[genl.Features]) error {
	return update(b, c, dev, "features", u, features,
		func(f genl.Features) any { return f.Wanted },
		func(p *port, next genl.Features) error {
			cur := features(p)
			var mask, value tap.Features
			for _, kf := range kernelFeatures {
				if on := slices.Contains(next.Wanted, kf.Name()); on != (p.tapFeatures&kf != 0) {
					mask |= kf
					if on {
						value |= kf
					}
				}
			}
			if mask != 0 {
				if p.dev == nil {
					return extack.New(unix.ENODEV, "port %s has no TAP", p.spec.Name)
				}
				f, err := p.dev.SetFeatures(mask, value)
				if err != nil {
					return err
				}
				p.tapFeatures = f
				p.ep.SetUDPGRO(f.UDPGRO())
			}
			curOff := slices.DeleteFunc(slices.Clone(cur.Wanted), isKernelFeature)
			nextOff := slices.DeleteFunc(slices.Clone(next.Wanted), isKernelFeature)
			missing := func(from, in []string) bool {
				return slices.ContainsFunc(from, func(n string) bool { return !slices.Contains(in, n) })
			}
			on := missing(nextOff, curOff) // one turned on: all on; else one turned off: all off
			if !on && !missing(curOff, nextOff) {
				return nil // only kernel features changed
			}
			err := p.ep.SetOffload(on)
			b.d().syncCarrier(p)
			return err
		})
}
