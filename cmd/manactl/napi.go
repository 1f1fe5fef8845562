package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// The napi commands: a device's NAPI instances and their settings, through the netdev family's
// napi-get and napi-set (6.13+), of manad's ports or, like the other netdev commands, of the
// kernel's devices (ethtoolDo).

// Napi is a top-level command (see topLevel).
func (t topLevel) Napi() *cobra.Command { return napiCmd(t.app) }

func napiCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "napi show DEV | set DEV [--queue N | --id ID] [settings]",
		DisableFlagsInUseLine: true,
		Short:                 "Show or change a device's NAPI settings (netdev napi-get, napi-set)",
		Long: `A NAPI polls one RX queue. Its settings, as the kernel's netdev family has them
since 6.13, are defer-hard-irqs (how many times the poll may find nothing before the
interrupt is re-armed), gro-flush-timeout and irq-suspend-timeout (nanoseconds) and
threaded. manad's data path reads them to decide how long a queue's reader keeps
polling after it found work before it parks (busy polling, bounded by the daemon's
max_pollers), so they trade CPU for round-trip latency.

The settings belong to the queue index, not to the NAPI: a channel change that
destroys a queue's NAPI and creates another finds them there, as the kernel's
napi_config. manad saves them across restarts; a port's napi_defer_hard_irqs,
gro_flush_timeout and irq_suspend_timeout keys in manad.toml set every queue's.
Changes need root or manad's admin group (napi-set is GENL_ADMIN_PERM).`,
		Example: `  manactl napi show mana0
  manactl napi set mana0 --defer-hard-irqs 100 --gro-flush-timeout 200us
  manactl napi set mana0 --queue 2 --irq-suspend-timeout 20ms`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return usageErrorf("napi needs a subcommand: show or set")
		},
	}
	cmd.AddCommand(napiShowCmd(a), napiSetCmd(a))
	return cmd
}

// napiInfo is one NAPI with the RX queue it polls (-1: none known).
type napiInfo struct {
	wire.NetdevNAPI
	Queue int
}

type napiJSON struct {
	Dev                 string `json:"dev"`
	Ifindex             uint32 `json:"ifindex"`
	ID                  uint32 `json:"id"`
	Queue               *int   `json:"queue,omitempty"`
	DeferHardIRQs       uint32 `json:"defer_hard_irqs"`
	GROFlushTimeoutNs   uint64 `json:"gro_flush_timeout_ns"`
	IRQSuspendTimeoutNs uint64 `json:"irq_suspend_timeout_ns"`
	Threaded            bool   `json:"threaded"`
}

// deviceNAPIs lists the NAPIs of the device with ifindex ifi (napi-get dump) in queue order,
// each with the RX queue whose queue-get names it.
func deviceNAPIs(ctx context.Context, c *client.Client, ifi uint32) ([]napiInfo, error) {
	ns, err := c.NAPIs(ctx, ifi)
	if err != nil {
		return nil, err
	}
	qs, err := c.Queues(ctx, ifi)
	if err != nil {
		return nil, err
	}
	queueOf := map[uint32]int{}
	for _, q := range qs {
		if q.Type == wire.NetdevQueueTypeRX && q.NAPIID != 0 {
			if _, seen := queueOf[q.NAPIID]; !seen {
				queueOf[q.NAPIID] = int(q.ID)
			}
		}
	}
	out := make([]napiInfo, len(ns))
	// The kernel lists the newest NAPI first; oldest (lowest id) first reads in queue order.
	for i, n := range ns {
		q, ok := queueOf[n.ID]
		if !ok {
			q = -1
		}
		out[len(ns)-1-i] = napiInfo{NetdevNAPI: n, Queue: q}
	}
	return out, nil
}

func napiShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show DEV",
		Short: "Show a device's NAPIs and their settings (netdev napi-get)",
		Long: `List the NAPIs of DEV: id, the RX queue it polls ("-" when no queue names it),
defer-hard-irqs, gro-flush-timeout, irq-suspend-timeout and threaded. A device
that is down has no NAPI. --json prints the timeouts in nanoseconds.`,
		Example: `  manactl napi show mana0
  manactl --json napi show mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			ifi, err := devIndex(args[0])
			if err != nil {
				return err
			}
			var ns []napiInfo
			if err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				ns, err = deviceNAPIs(cmd.Context(), c, ifi)
				return err
			}); err != nil {
				return err
			}
			if a.json {
				return failed(writeJSON(a.stdout, napisToJSON(args[0], ns)))
			}
			writeNAPIs(a.stdout, args[0], ns)
			return nil
		},
	}
}

func napisToJSON(dev string, ns []napiInfo) []napiJSON {
	out := make([]napiJSON, 0, len(ns))
	for _, n := range ns {
		j := napiJSON{Dev: dev, Ifindex: n.Ifindex, ID: n.ID, DeferHardIRQs: n.DeferHardIRQs,
			GROFlushTimeoutNs: n.GROFlushTimeout, IRQSuspendTimeoutNs: n.IRQSuspendTimeout,
			Threaded: n.Threaded == wire.NetdevNAPIThreadedEnabled}
		if n.Queue >= 0 {
			q := n.Queue
			j.Queue = &q
		}
		out = append(out, j)
	}
	return out
}

// nsText writes nanoseconds as a Go duration ("200µs"), or the number when beyond one.
func nsText(ns uint64) string {
	if ns > math.MaxInt64 {
		return strconv.FormatUint(ns, 10) + "ns"
	}
	return time.Duration(ns).String()
}

func writeNAPIs(w io.Writer, dev string, ns []napiInfo) {
	if len(ns) == 0 {
		// As the kernel's: NAPIs exist while the device is up (mana creates them in
		// mana_alloc_queues); a header over nothing would read as an empty reply.
		fmt.Fprintf(w, "NAPIs of %s: none (a device that is down has none; ip link set %s up)\n", dev, dev)
		return
	}
	fmt.Fprintf(w, "NAPIs of %s:\n", dev)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tDEFER-HARD-IRQS\tGRO-FLUSH-TIMEOUT\tIRQ-SUSPEND-TIMEOUT\tTHREADED")
	for _, n := range ns {
		q := "-"
		if n.Queue >= 0 {
			q = strconv.Itoa(n.Queue)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", n.ID, q, n.DeferHardIRQs, nsText(n.GROFlushTimeout),
			nsText(n.IRQSuspendTimeout), onOff(n.Threaded == wire.NetdevNAPIThreadedEnabled))
	}
	tw.Flush()
}

// parseNAPITimeout reads a timeout flag: a Go duration (200us), or nanoseconds as an integer, as
// the kernel's sysfs gro_flush_timeout takes them; not negative.
func parseNAPITimeout(flag, s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return time.Duration(n), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, usageErrorf("invalid --%s '%s' (want a duration such as 200us, or nanoseconds; not negative)", flag, s)
	}
	return d, nil
}

func napiSetCmd(a *app) *cobra.Command {
	var (
		queue, id                  int
		deferIRQs                  uint32
		groFlush, irqSuspend, thrd string
	)
	cmd := &cobra.Command{
		Use:                   "set DEV [--queue N | --id ID] [--defer-hard-irqs N] [--gro-flush-timeout DUR] [--irq-suspend-timeout DUR] [--threaded on|off]",
		DisableFlagsInUseLine: true,
		Short:                 "Change NAPI settings (netdev napi-set)",
		Long: `Change the settings of DEV's NAPIs with napi-set: of the one polling RX queue N
(--queue), of the NAPI with id ID (--id), or of every NAPI the device has now, as
the kernel's per-device sysfs knobs (napi_defer_hard_irqs, gro_flush_timeout) set
them all. Only the settings given change.

--defer-hard-irqs is 0..2147483647; --gro-flush-timeout and --irq-suspend-timeout
take a duration (200us, 20ms) or nanoseconds. --threaded on|off is napi-set's
threaded (a manad queue always has a reader of its own, so it changes nothing
there, and is kept and shown).

A device that is down has no NAPI to set (the configuration file's keys set the
queues of a manad port that is down). Needs root or manad's admin group (EPERM);
an unknown queue or id fails with ENOENT.`,
		Example: `  manactl napi set mana0 --defer-hard-irqs 100 --gro-flush-timeout 200us
  manactl napi set mana0 --queue 0 --irq-suspend-timeout 20ms
  manactl napi set mana0 --id 8193 --defer-hard-irqs 0 --gro-flush-timeout 0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			if fl.Changed("queue") && fl.Changed("id") {
				return usageErrorf("napi set: --queue and --id name the NAPI two ways: give one")
			}
			var s wire.NetdevNAPISet
			if fl.Changed("defer-hard-irqs") {
				if deferIRQs > math.MaxInt32 {
					return usageErrorf("invalid --defer-hard-irqs %d (want 0..%d)", deferIRQs, math.MaxInt32)
				}
				s.DeferHardIRQs = &deferIRQs
			}
			for _, t := range []struct {
				name string
				s    string
				dst  **time.Duration
			}{{"gro-flush-timeout", groFlush, &s.GROFlushTimeout}, {"irq-suspend-timeout", irqSuspend, &s.IRQSuspendTimeout}} {
				if fl.Changed(t.name) {
					d, err := parseNAPITimeout(t.name, t.s)
					if err != nil {
						return err
					}
					*t.dst = &d
				}
			}
			if fl.Changed("threaded") {
				on, ok := map[string]bool{"on": true, "off": false}[thrd]
				if !ok {
					return usageErrorf("invalid --threaded '%s' (want on or off)", thrd)
				}
				s.Threaded = &on
			}
			if s == (wire.NetdevNAPISet{}) {
				return usageErrorf("napi set: nothing to change (give --defer-hard-irqs, --gro-flush-timeout, --irq-suspend-timeout or --threaded)")
			}
			if fl.Changed("queue") && queue < 0 || fl.Changed("id") && (id < 1 || id > math.MaxUint32) {
				return usageErrorf("napi set: invalid --queue or --id")
			}
			ifi, err := devIndex(args[0])
			if err != nil {
				return err
			}
			return a.ethtoolDo(cmd.Context(), func(c *client.Client) error {
				ns, err := deviceNAPIs(cmd.Context(), c, ifi)
				if err != nil {
					return err
				}
				var ids []uint32
				for _, n := range ns {
					if fl.Changed("queue") && n.Queue != queue || fl.Changed("id") && n.ID != uint32(id) {
						continue
					}
					ids = append(ids, n.ID)
				}
				switch {
				case len(ids) > 0:
				case fl.Changed("queue"):
					return fmt.Errorf("%s has no NAPI polling RX queue %d (is it up, with that many queues? napi show lists the NAPIs: use --id): %w", args[0], queue, unix.ENOENT)
				case fl.Changed("id"):
					return fmt.Errorf("%s has no NAPI %d: %w", args[0], id, unix.ENOENT)
				default:
					return fmt.Errorf("%s has no NAPI (a device that is down has none): bring it up first (ip link set %s up), "+
						"or set the port's napi_defer_hard_irqs, gro_flush_timeout and irq_suspend_timeout in manad.toml: %w",
						args[0], args[0], unix.ENOENT)
				}
				for _, nid := range ids {
					if err := c.NAPISet(cmd.Context(), nid, s); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&queue, "queue", 0, "the NAPI polling this RX queue")
	f.IntVar(&id, "id", 0, "the NAPI with this id")
	f.Uint32Var(&deferIRQs, "defer-hard-irqs", 0, "defer-hard-irqs, 0..2147483647")
	f.StringVar(&groFlush, "gro-flush-timeout", "", "gro-flush-timeout: a duration (200us) or nanoseconds")
	f.StringVar(&irqSuspend, "irq-suspend-timeout", "", "irq-suspend-timeout: a duration (20ms) or nanoseconds")
	f.StringVar(&thrd, "threaded", "", "threaded: on or off")
	return cmd
}
