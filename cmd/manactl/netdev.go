package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// The netdev-family commands: queues, page-pools and qstats. Like the ethtool-family commands
// they go to manad, or to the kernel's netdev family for a device manad does not own, when manad
// is not running, or with --kernel (ethtoolDo).

// devIndex resolves DEV in the caller's network namespace (manad's ports are real netdevs there).
func devIndex(dev string) (uint32, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return 0, failed(fmt.Errorf("no device %q in this network namespace: %w", dev, unix.ENODEV))
	}
	return uint32(ifi.Index), nil
}

// optDev resolves the optional DEV argument; 0 without one.
func optDev(args []string) (uint32, error) {
	if len(args) == 0 {
		return 0, nil
	}
	return devIndex(args[0])
}

// ifaceName names an ifindex for output ("if7" when it has no name here).
func ifaceName(i uint32) string {
	if ifi, err := net.InterfaceByIndex(int(i)); err == nil {
		return ifi.Name
	}
	return fmt.Sprintf("if%d", i)
}

func queueTypeName(t uint32) string {
	if t == wire.NetdevQueueTypeTX {
		return "tx"
	}
	return "rx"
}

func dashIfZero(v uint64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

type queueJSON struct {
	Dev     string `json:"dev"`
	Ifindex uint32 `json:"ifindex"`
	Type    string `json:"type"`
	ID      uint32 `json:"id"`
	NAPIID  uint32 `json:"napi_id,omitempty"`
}

// Queues is a top-level command (see topLevel).
func (t topLevel) Queues() *cobra.Command { return queuesCmd(t.app) }

func queuesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "queues DEV",
		Short: "Show a device's queues and their NAPI ids (netdev queue-get)",
		Long: `Show the queues of a running device as the netdev family's queue-get dump lists them:
type (rx, tx), index and the id of the NAPI polling it ("-" for none: manad's TX
queues, like mana's, have no NAPI id). A device that is down has no queues listed.`,
		Example: `  manactl queues mana0
  manactl --json queues mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			ifi, err := devIndex(args[0])
			if err != nil {
				return err
			}
			var qs []wire.NetdevQueue
			if err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				qs, err = c.Queues(cmd.Context(), ifi)
				return err
			}); err != nil {
				return err
			}
			if a.json {
				out := make([]queueJSON, 0, len(qs))
				for _, q := range qs {
					out = append(out, queueJSON{Dev: args[0], Ifindex: q.Ifindex, Type: queueTypeName(q.Type), ID: q.ID, NAPIID: q.NAPIID})
				}
				return failed(writeJSON(a.stdout, out))
			}
			writeQueues(a.stdout, args[0], qs)
			return nil
		},
	}
}

func writeQueues(w io.Writer, dev string, qs []wire.NetdevQueue) {
	fmt.Fprintf(w, "Queues of %s:\n", dev)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tQUEUE\tNAPI-ID")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", queueTypeName(q.Type), q.ID, dashIfZero(uint64(q.NAPIID)))
	}
	tw.Flush()
}

type pagePoolJSON struct {
	ID          uint64 `json:"id"`
	Dev         string `json:"dev"`
	Ifindex     uint32 `json:"ifindex"`
	NAPIID      uint64 `json:"napi_id,omitempty"`
	Inflight    uint64 `json:"inflight"`
	InflightMem uint64 `json:"inflight_mem"`
	// DetachTime is the CLOCK_BOOTTIME second the pool's queue went away (absent while attached).
	DetachTime uint64                    `json:"detach_time,omitempty"`
	Stats      *wire.NetdevPagePoolStats `json:"stats,omitempty"`
}

// PagePools is a top-level command (see topLevel).
func (t topLevel) PagePools() *cobra.Command { return pagePoolsCmd(t.app) }

func pagePoolsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "page-pools [DEV]",
		Short: "Show page pools, live and detached (netdev page-pool-get)",
		Long: `Show the page pools of DEV (or of every device): id, NAPI id, pages in flight and
their bytes, and for a detached pool (its queue was destroyed by a reconfiguration
and some of its buffers are still out) when it was detached, in seconds of
CLOCK_BOOTTIME and how long ago. A detached pool is listed until its last buffer
comes back, as the kernel lists them. --json adds each pool's page-pool-stats.`,
		Example: `  manactl page-pools
  manactl page-pools mana0
  manactl --json page-pools mana0`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			ifi, err := optDev(args)
			if err != nil {
				return err
			}
			var pools []wire.NetdevPagePool
			var stats []wire.NetdevPagePoolStats
			if err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				if pools, err = c.PagePools(cmd.Context()); err != nil {
					return err
				}
				if a.json {
					// A kernel without CONFIG_PAGE_POOL_STATS answers EOPNOTSUPP: pools without stats.
					if stats, err = c.PagePoolStats(cmd.Context()); err != nil && !isNotSupp(err) {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
			var kept []wire.NetdevPagePool
			for _, p := range pools {
				if ifi == 0 || p.Ifindex == ifi {
					kept = append(kept, p)
				}
			}
			if a.json {
				out := make([]pagePoolJSON, 0, len(kept))
				for _, p := range kept {
					j := pagePoolJSON{ID: p.ID, Dev: ifaceName(p.Ifindex), Ifindex: p.Ifindex, NAPIID: p.NAPIID,
						Inflight: p.Inflight, InflightMem: p.InflightMem, DetachTime: p.DetachTime}
					for i := range stats {
						if stats[i].Info.ID == p.ID {
							j.Stats = &stats[i]
						}
					}
					out = append(out, j)
				}
				return failed(writeJSON(a.stdout, out))
			}
			writePagePools(a.stdout, kept, boottimeSeconds())
			return nil
		},
	}
}

func isNotSupp(err error) bool { return errors.Is(err, unix.EOPNOTSUPP) }

// boottimeSeconds is CLOCK_BOOTTIME in seconds, the clock of detach-time; 0 if unreadable.
func boottimeSeconds() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return uint64(ts.Sec)
}

func writePagePools(w io.Writer, pools []wire.NetdevPagePool, now uint64) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDEV\tNAPI-ID\tINFLIGHT\tMEMORY\tDETACHED")
	for _, p := range pools {
		det := "-"
		if p.DetachTime != 0 {
			det = fmt.Sprintf("at %ds", p.DetachTime)
			if now >= p.DetachTime {
				det += fmt.Sprintf(" (%ds ago)", now-p.DetachTime)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", p.ID, ifaceName(p.Ifindex), dashIfZero(p.NAPIID), p.Inflight, bytesText(p.InflightMem), det)
	}
	tw.Flush()
}

type qstatsJSON struct {
	Dev              string  `json:"dev"`
	Ifindex          uint32  `json:"ifindex"`
	Type             string  `json:"type,omitempty"`
	Queue            *uint32 `json:"queue,omitempty"`
	RxPackets        *uint64 `json:"rx_packets,omitempty"`
	RxBytes          *uint64 `json:"rx_bytes,omitempty"`
	RxAllocFail      *uint64 `json:"rx_alloc_fail,omitempty"`
	RxHwDrops        *uint64 `json:"rx_hw_drops,omitempty"`
	RxHwDropOverruns *uint64 `json:"rx_hw_drop_overruns,omitempty"`
	TxPackets        *uint64 `json:"tx_packets,omitempty"`
	TxBytes          *uint64 `json:"tx_bytes,omitempty"`
}

func qstatsToJSON(s wire.NetdevQStats) qstatsJSON {
	j := qstatsJSON{Dev: ifaceName(s.Ifindex), Ifindex: s.Ifindex}
	if s.Scoped {
		j.Type, j.Queue = queueTypeName(s.Type), &s.QueueID
	}
	for _, f := range []struct {
		t   uint16
		dst **uint64
		v   *uint64
	}{
		{wire.NetdevAQStatsRxPackets, &j.RxPackets, &s.RxPackets}, {wire.NetdevAQStatsRxBytes, &j.RxBytes, &s.RxBytes},
		{wire.NetdevAQStatsRxAllocFail, &j.RxAllocFail, &s.RxAllocFail}, {wire.NetdevAQStatsRxHwDrops, &j.RxHwDrops, &s.RxHwDrops},
		{wire.NetdevAQStatsRxHwDropOverruns, &j.RxHwDropOverruns, &s.RxHwDropOverruns},
		{wire.NetdevAQStatsTxPackets, &j.TxPackets, &s.TxPackets}, {wire.NetdevAQStatsTxBytes, &j.TxBytes, &s.TxBytes},
	} {
		if s.Present&(1<<f.t) != 0 {
			*f.dst = f.v
		}
	}
	return j
}

// Qstats is a top-level command (see topLevel).
func (t topLevel) Qstats() *cobra.Command { return qstatsCmd(t.app) }

func qstatsCmd(a *app) *cobra.Command {
	var perQueue bool
	cmd := &cobra.Command{
		Use:   "qstats [DEV] [--queue]",
		Short: "Show queue statistics (netdev qstats-get)",
		Long: `Show the netdev family's queue statistics of DEV (or of every device): per device,
counted since the device was created (queues since destroyed included), or with
--queue per running queue, counted since that queue was created. manad keeps
rx-packets, rx-bytes, rx-alloc-fail, rx-hw-drops and rx-hw-drop-overruns, tx-packets
and tx-bytes; it has no checksum counters.`,
		Example: `  manactl qstats
  manactl qstats mana0 --queue
  manactl --json qstats mana0`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			ifi, err := optDev(args)
			if err != nil {
				return err
			}
			var qs []wire.NetdevQStats
			if err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				qs, err = c.QStats(cmd.Context(), ifi, perQueue)
				return err
			}); err != nil {
				return err
			}
			if a.json {
				out := make([]qstatsJSON, 0, len(qs))
				for _, s := range qs {
					out = append(out, qstatsToJSON(s))
				}
				return failed(writeJSON(a.stdout, out))
			}
			writeQStats(a.stdout, qs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&perQueue, "queue", false, "per running queue instead of per device")
	return cmd
}

func writeQStats(w io.Writer, qs []wire.NetdevQStats) {
	for _, s := range qs {
		if s.Scoped {
			fmt.Fprintf(w, "%s %s-%d:\n", ifaceName(s.Ifindex), queueTypeName(s.Type), s.QueueID)
		} else {
			fmt.Fprintf(w, "%s:\n", ifaceName(s.Ifindex))
		}
		for _, c := range qstatsCounters(s) {
			fmt.Fprintf(w, "     %s: %d\n", c.name, c.v)
		}
	}
}

// qstatsCounters lists the counters a qstats message carried, in the kernel's order, by
// netdev.yaml's names.
func qstatsCounters(s wire.NetdevQStats) (out []struct {
	name string
	v    uint64
}) {
	for _, c := range []struct {
		t    uint16
		name string
		v    uint64
	}{
		{wire.NetdevAQStatsRxPackets, "rx-packets", s.RxPackets}, {wire.NetdevAQStatsRxBytes, "rx-bytes", s.RxBytes},
		{wire.NetdevAQStatsRxAllocFail, "rx-alloc-fail", s.RxAllocFail}, {wire.NetdevAQStatsRxHwDrops, "rx-hw-drops", s.RxHwDrops},
		{wire.NetdevAQStatsRxHwDropOverruns, "rx-hw-drop-overruns", s.RxHwDropOverruns},
		{wire.NetdevAQStatsTxPackets, "tx-packets", s.TxPackets}, {wire.NetdevAQStatsTxBytes, "tx-bytes", s.TxBytes},
	} {
		if s.Present&(1<<c.t) != 0 {
			out = append(out, struct {
				name string
				v    uint64
			}{c.name, c.v})
		}
	}
	return out
}

// netdevDevJSON is a netdev-family device (monitor's dev events).
type netdevDevJSON struct {
	Dev         string   `json:"dev"`
	Ifindex     uint32   `json:"ifindex"`
	XDPFeatures []string `json:"xdp_features"`
}

// netdevIfaceName names a netdev-family ifindex for monitor: "-" for none (a pool whose netdev
// is gone).
func netdevIfaceName(i uint32) string {
	if i == 0 {
		return "-"
	}
	return ifaceName(i)
}

// netdevEventToJSON fills the payload of a netdev-family notification (monitor --netdev).
func netdevEventToJSON(n client.Notification, e *eventJSON) {
	switch {
	case n.NetdevDev != nil:
		e.NetdevDev = &netdevDevJSON{Dev: netdevIfaceName(n.NetdevDev.Ifindex), Ifindex: n.NetdevDev.Ifindex,
			XDPFeatures: wire.NetdevXDPActList(n.NetdevDev.XDPFeatures)}
	case n.PagePool != nil:
		p := n.PagePool
		e.PagePool = &pagePoolJSON{ID: p.ID, Dev: netdevIfaceName(p.Ifindex), Ifindex: p.Ifindex, NAPIID: p.NAPIID,
			Inflight: p.Inflight, InflightMem: p.InflightMem, DetachTime: p.DetachTime}
	}
}

// writeNetdevEvent prints a netdev-family notification as monitor --netdev does: a blank line,
// then "Page pool ID added|changed|removed:" or "Netdev DEV added|removed|changed:" and the
// page-pools or dev line.
func writeNetdevEvent(w io.Writer, n client.Notification) {
	what := map[client.NotificationKind]string{
		client.NetdevDevAdded: "added", client.NetdevDevRemoved: "removed", client.NetdevDevChanged: "changed",
		client.PagePoolAdded: "added", client.PagePoolChanged: "changed", client.PagePoolRemoved: "removed",
	}[n.Kind]
	switch {
	case n.NetdevDev != nil:
		d := n.NetdevDev
		fmt.Fprintf(w, "\nNetdev %s %s:\n", netdevIfaceName(d.Ifindex), what)
		fmt.Fprintf(w, "ifindex %d, xdp-features %s\n", d.Ifindex, dashIfEmpty(strings.Join(wire.NetdevXDPActList(d.XDPFeatures), ",")))
	case n.PagePool != nil:
		p := n.PagePool
		fmt.Fprintf(w, "\nPage pool %d %s:\n", p.ID, what)
		det := "-"
		if p.DetachTime != 0 {
			det = fmt.Sprintf("at %ds", p.DetachTime)
		}
		fmt.Fprintf(w, "dev %s, napi-id %s, inflight %d, memory %s, detached %s\n", netdevIfaceName(p.Ifindex),
			dashIfZero(p.NAPIID), p.Inflight, bytesText(p.InflightMem), det)
	}
}
