package main

import (
	"net"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic/privflag"
)

// portAddFlags are port add's options: one per key of the configuration's [[port]] table (its
// port schema) but name, which is the argument, each named as the key in kebab case, as the
// port's JSON shows it. PORT_NEW carries them; the daemon checks them with the file's rules.
type portAddFlags struct {
	s                                wire.PortSpec
	mac, pageSize, privFlags, budget string
	groFlush, irqSuspend             string
	offload, recycle                 bool
}

func (o *portAddFlags) register(f *pflag.FlagSet) {
	s := &o.s
	f.StringVar(&s.NetNS, "netns", "", "named network namespace for the TAP (created if missing)")
	f.StringVar(&s.Segment, "segment", "", "wire segment to plug into")
	f.StringVar(&o.mac, "mac", "", "MAC address (default: derived from the name)")
	f.Uint32Var(&s.MTU, "mtu", 0, "MTU")
	f.Uint32Var(&s.MaxMTU, "max-mtu", 0, "the adapter's maximum MTU")
	f.StringVar(&o.pageSize, "page-size", "", "host page size the layout models: 4K, 16K or 64K")
	f.Uint32Var(&s.Queues, "queues", 0, "combined channels")
	f.Uint32Var(&s.MaxQueues, "max-queues", 0, "maximum combined channels")
	f.Uint32Var(&s.RxRing, "rx-ring", 0, "RX ring size")
	f.Uint32Var(&s.TxRing, "tx-ring", 0, "TX ring size")
	f.StringVar(&o.privFlags, "priv-flags", "", "private flags to turn on, comma-separated: "+strings.Join(privflag.Names[:], ", "))
	f.StringVar(&o.budget, "memory-budget", "", "RX memory cap: bytes, a number with K, M, G, T (KiB…TiB), or unlimited")
	f.BoolVar(&s.Persistent, "persistent", false, "the TAP outlives manad")
	f.BoolVar(&o.offload, "offload", true, "the TAP carries virtio headers (TSO/USO, checksum offloads); --offload=false for plain frames")
	f.StringVar(&s.RxAlloc, "rx-alloc", "", "what-if RX allocation: page-pool-frag, page-pool-page or no-pool")
	f.BoolVar(&o.recycle, "rx-recycle", true, "recycle RX pages; --rx-recycle=false releases them (what-if)")
	f.Uint32Var(&s.Speed, "speed", 0, "link speed in Mb/s that LINKMODES reports (0 = unknown)")
	f.StringVar(&s.XDP, "xdp", "", "built-in XDP program to start with: pass, drop, tx or aborted")
	f.StringVar(&s.Rule, "rule", "", "RX buffer rule: upstream, pre-headroom or pre-frag")
	f.BoolVar(&s.CQECoalesce8, "cqe-coalesce-8", false, "the vport may coalesce 8 packets per RX CQE")
	f.Uint32Var(&s.RxCQEFrames, "rx-cqe-frames", 0, "packets per RX CQE: 1 or 4, or 8 with --cqe-coalesce-8")
	f.Uint32Var(&s.NAPIDeferHardIRQs, "napi-defer-hard-irqs", 0, "every NAPI's defer-hard-irqs")
	f.StringVar(&o.groFlush, "gro-flush-timeout", "", "every NAPI's gro-flush-timeout: a duration (20us) or nanoseconds")
	f.StringVar(&o.irqSuspend, "irq-suspend-timeout", "", "every NAPI's irq-suspend-timeout, likewise")
	f.BoolVar(&s.NAPIThreaded, "napi-threaded", false, "every NAPI's threaded")
}

// request returns the PORT_NEW request for a port named name; f tells which flags were given.
// Errors: a usage error naming the flag whose value cannot be read.
func (o *portAddFlags) request(f *pflag.FlagSet, name string) (wire.PortSpec, error) {
	s := o.s
	s.Name = name
	var err error
	if o.mac != "" {
		if s.MAC, err = net.ParseMAC(o.mac); err != nil {
			return s, usageErrorf("invalid --mac '%s'", o.mac)
		}
	}
	if o.pageSize != "" {
		if s.PageSize, err = parsePageSize(o.pageSize); err != nil {
			return s, err
		}
	}
	if s.PrivFlags, err = parsePrivFlags(o.privFlags); err != nil {
		return s, err
	}
	if f.Changed("offload") {
		offload := o.offload
		s.Offload = &offload
	}
	if f.Changed("rx-recycle") {
		recycle := o.recycle
		s.RxRecycle = &recycle
	}
	if o.budget != "" {
		if s.MemoryBudget, err = parseMemory("--memory-budget", o.budget); err != nil {
			return s, err
		}
	}
	for _, t := range []struct {
		flag, text string
		into       *uint64
	}{{"gro-flush-timeout", o.groFlush, &s.GROFlushTimeoutNs}, {"irq-suspend-timeout", o.irqSuspend, &s.IRQSuspendTimeoutNs}} {
		if t.text != "" {
			d, err := parseNAPITimeout(t.flag, t.text)
			if err != nil {
				return s, err
			}
			*t.into = uint64(d)
		}
	}
	return s, nil
}

func portAddCmd(a *app) *cobra.Command {
	var o portAddFlags
	cmd := &cobra.Command{
		Use:   "add NAME [options]",
		Short: "Create a port",
		Long: `Create a port and its TAP. Options not given take the daemon's defaults (MTU 1500,
max MTU 9000, page size 4K, 16 of 64 queues, rings 1024/256, segment "default",
2 GiB memory budget, not persistent, offloads on, link speed unknown, RX buffers
allocated as the rule chooses and recycled, the upstream rule, one packet per RX
CQE, no NAPI deferral). Each option is the configuration's [[port]] key of that
name (--offload=false is offload = false, --rx-cqe-frames is rx_cqe_frames, …),
checked by the same rules.`,
		Example: `  manactl port add mana2 --netns manaC --segment wire0 --queues 4 --priv-flags full-page-rx
  manactl --json port add mana3 --mtu 9000 --page-size 64K --rule pre-frag`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageErrorf("port add needs one port name")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.request(cmd.Flags(), args[0])
			if err != nil {
				return err
			}
			return a.withManad(cmd, func(c *client.Client) error {
				p, err := c.CreatePort(cmd.Context(), s)
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.stdout, []portJSON{portToJSON(*p)})
				}
				return nil
			})
		},
	}
	o.register(cmd.Flags())
	return cmd
}
