package daemon

import (
	"context"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlerr"
)

// The port's netdev features (ethtool -k/-K), by the kernel's names, as a mana netdev has them:
// mana_probe_port's hw_features (SG, IP_CSUM, IPV6_CSUM, RXCSUM, TSO, TSO6, RXHASH) and features
// (those and the VLAN offloads, which it cannot turn off), plus what register_netdevice gives
// every netdev (GSO and GRO on; GRO_FRAGLIST, GRO_UDP_FWD, NOCACHE_COPY and, with TSO,
// TSO_MANGLEID changeable but off). Nothing else is changeable, nothing else is on: mana has no
// tx-checksum-ip-generic, tx-tcp-ecn-segmentation or tx-udp-segmentation, whatever its TAP has.
//
// What the features do is the port's TAP's: its offloads are one switch (the virtio header,
// tap.Device.SetOffload) that carries the transmit offloads the kernel may hand over unfinished,
// the receive checksum and the RX coalescer (rx-gro) with it; rx-gro-list and
// rx-udp-gro-forwarding are the TAP's own kernel features. Scatter-gather, GSO, receive hashing,
// nocache copy and TSO mangleid are the kernel's and manad's, always as mana has them by
// default: a request to change them is answered as by a driver that does not make the change
// (the reply lists them as wanted and not active).

// offloadFeature is a feature of the one switch and the TAP offload bit it needs.
type offloadFeature struct {
	bit  uint
	name string
}

// offloadGroup maps the features of the one switch to the TAP's offload bits that make them (0:
// on with the virtio header itself).
var offloadGroup = []offloadFeature{
	{tap.OffloadCsum, "tx-checksum-ipv4"}, {tap.OffloadCsum, "tx-checksum-ipv6"},
	{0, "rx-checksum"},
	{tap.OffloadTSO4, "tx-tcp-segmentation"}, {tap.OffloadTSO6, "tx-tcp6-segmentation"},
	{0, groFeature},
}

// groFeature is the RX coalescer, on with the virtio header.
const groFeature = "rx-gro"

// kernelFeatures are features a port's netdev has as every netdev does, off until turned on
// (NETIF_F_SOFT_FEATURES_OFF, which register_netdevice adds to hw_features): the kernel keeps
// them on the TAP, where -K turns them on and off (tap.Device.SetFeatures) as `ethtool -K` on
// the TAP would, and they decide whether the RX coalescer merges UDP datagrams too
// (tap.Features.UDPGRO), as they decide it for the kernel's own GRO.
var kernelFeatures = []tap.Features{tap.FeatureGROUDPFwd, tap.FeatureGROList}

// fixedFeatures are the features whose value is mana's and stays: changeable on a mana netdev
// (hw_features) but not by manad, with their value (mana_probe_port: SG, which the TAP keeps
// whatever its offloads, and RXHASH, which manad's RSS always computes, on; register_netdevice:
// GSO on, NOCACHE_COPY and TSO_MANGLEID off).
var fixedFeatures = []struct {
	name string
	on   bool
}{{"tx-scatter-gather", true}, {"rx-hashing", true}, {"tx-generic-segmentation", true}, {"tx-nocache-copy", false},
	{"tx-tcp-mangleid-segmentation", false}}

// vlanFeatures are on and not changeable, as mana_probe_port sets them in features only
// (NETIF_F_HW_VLAN_CTAG_TX, NETIF_F_HW_VLAN_CTAG_RX).
var vlanFeatures = []string{"tx-vlan-hw-insert", "rx-vlan-hw-parse"}

// offloadFeatures lists every feature a port has in hw_features.
func offloadFeatures() []string {
	var out []string
	for _, f := range offloadGroup {
		out = append(out, f.name)
	}
	for _, f := range kernelFeatures {
		out = append(out, f.Name())
	}
	for _, f := range fixedFeatures {
		out = append(out, f.name)
	}
	return out
}

// isOffload says whether name is one of offloadGroup.
func isOffload(name string) bool {
	return slices.ContainsFunc(offloadGroup, func(f offloadFeature) bool { return f.name == name })
}

// features is what the port's TAP does now; wanted is active, as the features are one switch.
func features(p *port) genl.Features {
	f := genl.Features{HW: offloadFeatures()}
	if p.dev != nil && p.dev.VnetHdr() {
		bits := p.dev.Offloads()
		for _, of := range offloadGroup {
			if of.bit == 0 || bits&of.bit != 0 {
				f.Active = append(f.Active, of.name)
			}
		}
	}
	for _, kf := range kernelFeatures {
		if p.tapFeatures&kf != 0 {
			f.Active = append(f.Active, kf.Name())
		}
	}
	for _, ff := range fixedFeatures {
		if ff.on {
			f.Active = append(f.Active, ff.name)
		}
	}
	f.Active = append(f.Active, vlanFeatures...)
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

// SetFeatures is ethtool -K: a request that turns any of the offload group on turns the TAP's
// offloads on, one that only turns some off turns them off; the port stays up (the endpoint
// re-attaches its queues and the carrier is set again). The kernelFeatures it changes on the TAP
// alone, first; the fixedFeatures it leaves as they are.
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
					return nlerr.New(unix.ENODEV, "port %s has no TAP", p.spec.Name)
				}
				f, err := p.dev.SetFeatures(mask, value)
				if err != nil {
					return err
				}
				p.tapFeatures = f
				p.ep.SetUDPGRO(f.UDPGRO())
			}
			curOff := slices.DeleteFunc(slices.Clone(cur.Wanted), func(n string) bool { return !isOffload(n) })
			nextOff := slices.DeleteFunc(slices.Clone(next.Wanted), func(n string) bool { return !isOffload(n) })
			missing := func(from, in []string) bool {
				return slices.ContainsFunc(from, func(n string) bool { return !slices.Contains(in, n) })
			}
			on := missing(nextOff, curOff) // one turned on: all on; else one turned off: all off
			if !on && !missing(curOff, nextOff) {
				return nil // only kernel or fixed features changed
			}
			err := p.ep.SetOffload(on)
			b.d().syncCarrier(p)
			return err
		})
}
