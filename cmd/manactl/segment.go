package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// The segment commands: manad's wire segments and their uplinks (issue 12), through the manad
// family's SEGMENT_* and UPLINK_* messages.

// Segment is a top-level command (see topLevel).
func (t topLevel) Segment() *cobra.Command { return segmentCmd(t.app) }

func segmentCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "segment list | show SEG | add SEG [options] | del SEG | uplink add|del SEG DEV [--netns NS]",
		DisableFlagsInUseLine: true,
		Short:                 "List, show, create and delete wire segments and their uplinks",
		Long: `A wire segment is the learning switch manad's ports on it share. It may be
uplinked to kernel netdevs — a VXLAN or Geneve device, a veth into a Linux bridge,
a physical NIC, each in a named network namespace — so that it spans hosts: frames
to unknown or broadcast addresses flood to the local ports and the uplinks, and a
frame never goes back out where it came from.

Segments come from [[segment]] tables of manad.toml, from segment add, or from the
ports that name them (origin config, runtime or ports). Changes (add, del, uplink
add, uplink del) need root or manad's admin group; manad remembers them across
restarts, and a deleted configuration-file segment stays deleted. Everyone may
list and show; a port member is shown to those who may see the port.

An uplink's state is attached (frames flow), down (the device exists but is not up
and running), gone (no such device or namespace yet: it attaches when they appear)
or reattaching (the device is up but attaching failed; the next change of the
device retries). manad logs each transition once and re-attaches on its own.

A failed request exits with status 1: no such segment or uplink (ENOENT), a
segment or uplink that exists (EEXIST), ports still on the segment (EBUSY), not
allowed (EPERM), a bad name or value (EINVAL).`,
		Example: `  manactl segment list
  manactl segment add wire1 --storm-pps 1000 --ageing 5m
  manactl segment uplink add wire1 vx0 --netns hostA
  manactl segment show wire1
  manactl segment uplink del wire1 vx0 --netns hostA
  manactl segment del wire1`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return usageErrorf("segment needs a subcommand: list, show, add, del or uplink")
		},
	}
	cmd.AddCommand(segmentListCmd(a), segmentShowCmd(a), segmentAddCmd(a), segmentDelCmd(a), segmentUplinkCmd(a))
	return cmd
}

// segArgs is a cobra.PositionalArgs that wants SEG plus exactly more arguments named by what.
func segArgs(what ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		if len(args) == 0 || args[0] == "" {
			return usageErrorf("%s needs a segment name", name)
		}
		if len(args) != 1+len(what) {
			return usageErrorf("%s: wrong number of arguments (want %s)", name, strings.Join(append([]string{"SEG"}, what...), " "))
		}
		for i, w := range what {
			if args[1+i] == "" {
				return usageErrorf("%s needs %s", name, w)
			}
		}
		return nil
	}
}

// completeSegments completes a segment name from manad's SEGMENT_GET dump.
func completeSegments(a *app) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		if c, err := client.Dial(a.socket); err == nil {
			if segs, err := c.Segments(cmd.Context()); err == nil {
				for _, s := range segs {
					names = append(names, s.Name)
				}
			}
			c.Close()
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

func segmentListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the wire segments",
		Long: `List every wire segment: name, origin (config, runtime, or ports: no definition,
ports use it), the MTU cap of its uplinks ("-": each device's own), the storm limit
in flooded frames per second ("-": none), the ageing time of learnt addresses
("never": they do not age), its ports, the MAC addresses learnt, and its uplinks
with their state (NETNS/DEV=STATE).`,
		Example: `  manactl segment list
  manactl --json segment list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withManad(cmd, func(c *client.Client) error {
				segs, err := c.Segments(cmd.Context())
				if err != nil {
					return err
				}
				if a.json {
					out := make([]segmentJSON, 0, len(segs))
					for _, s := range segs {
						out = append(out, segmentToJSON(s))
					}
					return writeJSON(a.stdout, out)
				}
				writeSegments(a.stdout, segs)
				return nil
			})
		},
	}
}

func segmentShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show SEG",
		Short: "Show a wire segment, its uplinks and their counters",
		Long: `Show a segment's settings, ports, learnt addresses and counters (frames flooded,
frames the storm limit dropped), then each uplink: its state and why (the error of
the last attach, or what it waits for), the socket it is attached with (af_xdp with
where its program runs and whether it copies; af_packet chosen by auto with the
reason), the device's kind and ifindex, the MTU it
sends (the device's, capped by the segment's mtu), the largest port MTU it carries
whole (for a VXLAN device on a lower device: that MTU less the 50-byte
encapsulation, 70 over IPv6), and its counters: frames and bytes each way, drops by
reason, TCP aggregates segmented, checksums filled in, attaches and state changes.`,
		Example: `  manactl segment show wire0
  manactl --json segment show wire0`,
		Args:              segArgs(),
		ValidArgsFunction: completeSegments(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withManad(cmd, func(c *client.Client) error {
				s, err := c.Segment(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.stdout, []segmentJSON{segmentToJSON(*s)})
				}
				writeSegment(a.stdout, *s)
				return nil
			})
		},
	}
}

func segmentAddCmd(a *app) *cobra.Command {
	var s wire.SegmentSpec
	var ageing string
	cmd := &cobra.Command{
		Use:                   "add SEG [--mtu N] [--storm-pps N] [--ageing DUR]",
		DisableFlagsInUseLine: true,
		Short:                 "Create a wire segment",
		Long: `Define a wire segment, as a [[segment]] table does (a segment that ports already
use gets the settings at once). --mtu caps what its uplinks send (68..65535; default:
each device's MTU); --storm-pps limits the frames it floods per second (default: no
limit); --ageing is how long learnt addresses last unseen: seconds or a duration
such as 90s or 5m, 0 for never (default 5m, as a Linux bridge). SEG is 1 to 64
letters, digits, '.', '_' and '-'. With --json the new segment is printed.`,
		Example: `  manactl segment add wire1
  manactl segment add wire2 --mtu 1450 --storm-pps 1000 --ageing 90s
  manactl --json segment add wire3 --ageing 0`,
		Args: segArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			s.Name = args[0]
			if cmd.Flags().Changed("ageing") {
				d, err := parseAgeing(ageing)
				if err != nil {
					return err
				}
				s.AgeingMs, s.AgeingSet = uint64(d.Milliseconds()), true
			}
			return a.withManad(cmd, func(c *client.Client) error {
				info, err := c.CreateSegment(cmd.Context(), s)
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.stdout, []segmentJSON{segmentToJSON(*info)})
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&s.MTU, "mtu", 0, "largest payload the uplinks send (68..65535; default: each device's MTU)")
	f.Uint64Var(&s.StormPPS, "storm-pps", 0, "flooded frames per second at most (default: no limit)")
	f.StringVar(&ageing, "ageing", "", "how long learnt addresses last: seconds or a duration (5m); 0: never")
	return cmd
}

// parseAgeing reads --ageing as the ageing_time key: whole seconds, or a Go duration; 0 never.
func parseAgeing(s string) (time.Duration, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, usageErrorf("invalid --ageing '%s' (want seconds or a duration such as 90s or 5m)", s)
	}
	if d%time.Millisecond != 0 {
		return 0, usageErrorf("invalid --ageing '%s' (finer than a millisecond)", s)
	}
	return d, nil
}

func segmentDelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "del SEG",
		Aliases: []string{"delete"},
		Short:   "Delete a wire segment and its uplinks",
		Long: `Delete a segment: its uplinks detach from their devices (which stay as they are)
and its learnt addresses are forgotten. Refused (EBUSY) while ports are on it: move
or delete them first. A segment of manad.toml stays deleted across restarts until
it is added again.`,
		Example:           `  manactl segment del wire1`,
		Args:              segArgs(),
		ValidArgsFunction: completeSegments(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withManad(cmd, func(c *client.Client) error {
				return c.DeleteSegment(cmd.Context(), args[0])
			})
		},
	}
}

func segmentUplinkCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "uplink add SEG DEV [--netns NS] [--attach MODE] | uplink del SEG DEV [--netns NS]",
		DisableFlagsInUseLine: true,
		Short:                 "Plug a wire segment into a kernel netdev, or unplug it",
		Long: `Plug a segment into an existing kernel netdev (a VXLAN or Geneve device, a veth
into a bridge, a NIC) in named network namespace NS (default: manad's own), or
unplug it. The device need not exist yet: the uplink attaches when it appears and is
up. A device is the uplink of one segment at most.`,
		Example: `  manactl segment uplink add wire0 vx0 --netns hostA
  manactl segment uplink del wire0 vx0 --netns hostA`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return usageErrorf("segment uplink needs a subcommand: add or del")
		},
	}
	cmd.AddCommand(uplinkChangeCmd(a, true), uplinkChangeCmd(a, false))
	return cmd
}

// uplinkChangeCmd is segment uplink add (add) or del.
func uplinkChangeCmd(a *app, add bool) *cobra.Command {
	var u wire.UplinkSpec
	var busyPoll time.Duration
	cmd := &cobra.Command{
		Use:                   "add SEG DEV [--netns NS] [--attach MODE] [--busy-poll DUR]",
		DisableFlagsInUseLine: true,
		Short:                 "Plug a segment into a kernel netdev",
		Long: `Plug segment SEG into netdev DEV of named network namespace NS (default: manad's
own). SEG may be a segment only ports use so far; it is then defined. With --json
the segment is printed.

--attach chooses the socket: af_packet (the default; every device), af_xdp (an XDP
program redirects each RX queue of the device to an AF_XDP socket; devices with at
most 8 RX queues whose MTU fits a 4 KiB frame, else the uplink fails) or auto (af_xdp where the
device's driver offers AF_XDP zero-copy and takes the sockets, else af_packet, and manad
logs why: a copying AF_XDP socket, as on VXLAN, Geneve and veth devices, carries no GSO
and is slower than af_packet). segment show says which is in use.

--busy-poll keeps the uplink's reader polling its socket for that long after it found
frames before it parks (as the kernel's SO_BUSY_POLL; on af_xdp the socket also gets
SO_PREFER_BUSY_POLL): whole microseconds, 0 (off, the default) to 1ms. A poller holds one
of the daemon's max_pollers slots while it polls (none free: it parks as without), so it
trades a CPU for round-trip latency; segment show counts its polls, hits and CPU time.`,
		Example: `  manactl segment uplink add wire0 vx0 --netns hostA
  manactl segment uplink add wire0 upl --attach auto
  manactl segment uplink add wire0 vx0 --netns hostA --busy-poll 50us`,
		Args:              segArgs("DEV"),
		ValidArgsFunction: completeSegments(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			u.Dev = args[1]
			if !wire.ValidUplinkAttach(u.Attach) {
				return usageErrorf("--attach %q: want af_packet, af_xdp or auto", u.Attach)
			}
			switch {
			case busyPoll < 0 || busyPoll > time.Millisecond:
				return usageErrorf("--busy-poll %v: want 0 (off) to 1ms", busyPoll)
			case busyPoll%time.Microsecond != 0:
				return usageErrorf("--busy-poll %v: want whole microseconds", busyPoll)
			}
			u.BusyPollUs = uint32(busyPoll / time.Microsecond)
			return a.withManad(cmd, func(c *client.Client) error {
				if !add {
					return c.DeleteUplink(cmd.Context(), args[0], u)
				}
				info, err := c.AddUplink(cmd.Context(), args[0], u)
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.stdout, []segmentJSON{segmentToJSON(*info)})
				}
				return nil
			})
		},
	}
	if !add {
		cmd.Use, cmd.Aliases, cmd.Short = "del SEG DEV [--netns NS]", []string{"delete"}, "Unplug a segment from a kernel netdev"
		cmd.Long = `Unplug segment SEG from netdev DEV of named network namespace NS (default: manad's
own). The device stays as it is; the addresses learnt through it are forgotten.`
		cmd.Example = `  manactl segment uplink del wire0 vx0 --netns hostA`
	}
	cmd.Flags().StringVar(&u.NetNS, "netns", "", "named network namespace of the device (default: manad's own)")
	if add {
		cmd.Flags().StringVar(&u.Attach, "attach", "", "socket to attach with: af_packet, af_xdp or auto (default af_packet)")
		cmd.Flags().DurationVar(&busyPoll, "busy-poll", 0, "poll the socket this long after it found frames before parking, 0 (off) to 1ms")
	}
	return cmd
}

// ---- output ----

// mtuText is a segment's MTU cap: "-" for none.
func mtuText(v uint32) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatUint(uint64(v), 10)
}

func stormText(v uint64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatUint(v, 10)
}

func ageingText(ms uint64) string {
	if ms == 0 {
		return "never"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// uplinkName is "NETNS/DEV", or "DEV" in manad's namespace, as manad's logs name uplinks.
func uplinkName(u wire.UplinkInfo) string {
	if u.NetNS == "" {
		return u.Dev
	}
	return u.NetNS + "/" + u.Dev
}

// writeSegments is segment list: one line per segment under a header.
func writeSegments(w io.Writer, segs []wire.SegmentInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tORIGIN\tMTU\tSTORM\tAGEING\tPORTS\tLEARNT\tUPLINKS")
	for _, s := range segs {
		var ups []string
		for _, u := range s.Uplinks {
			ups = append(ups, uplinkName(u)+"="+u.State)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Origin, mtuText(s.MTU), stormText(s.StormPPS),
			ageingText(s.AgeingMs), dashIfEmpty(strings.Join(s.Ports, ",")), s.Learnt, dashIfEmpty(strings.Join(ups, ",")))
	}
	tw.Flush()
}

// writeSegment is segment show.
func writeSegment(w io.Writer, s wire.SegmentInfo) {
	fmt.Fprintf(w, "Segment %s:\n", s.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	row := func(indent, k string, v any) { fmt.Fprintf(tw, "%s%s:\t%v\n", indent, k, v) }
	row("", "Origin", s.Origin)
	row("", "MTU", mtuText(s.MTU))
	row("", "Storm limit (pps)", stormText(s.StormPPS))
	row("", "Ageing time", ageingText(s.AgeingMs))
	row("", "Ports", dashIfEmpty(strings.Join(s.Ports, ", ")))
	row("", "Learnt MACs", s.Learnt)
	row("", "Floods", s.Floods)
	row("", "Storm drops", s.StormDrops)
	tw.Flush()
	if len(s.Uplinks) == 0 {
		fmt.Fprintln(w, "Uplinks: none")
	}
	for _, u := range s.Uplinks {
		fmt.Fprintf(w, "Uplink %s:\n", uplinkName(u))
		tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
		state := u.State
		if u.State == "attached" {
			state += fmt.Sprintf(" (%s, ifindex %d)", dashIfEmpty(u.Kind), u.Ifindex)
		}
		row := func(k string, v any) { fmt.Fprintf(tw, "  %s:\t%v\n", k, v) }
		row("State", state)
		switch {
		case u.XDPMode != "":
			row("Attachment", u.Attach+" ("+u.XDPMode+")")
		case u.Fallback != "":
			row("Attachment", u.Attach+" (auto: "+u.Fallback+")")
		default:
			row("Attachment", dashIfEmpty(u.Attach))
		}
		if u.Error != "" {
			row("Error", u.Error)
		}
		row("MTU", u.MTU)
		row("Max port MTU", u.MaxPortMTU)
		row("RX packets", u.RxPackets)
		row("RX bytes", u.RxBytes)
		row("TX packets", u.TxPackets)
		row("TX bytes", u.TxBytes)
		row("TX aggregates", u.TxAggregates)
		row("TX whole", u.TxWhole)
		row("RX whole", u.RxWhole)
		row("RX drops", fmt.Sprintf("runt %d, oversize %d, truncated %d", u.RxRunts, u.RxOversize, u.RxTruncated))
		row("TX drops", fmt.Sprintf("device %d, down %d, mtu %d", u.TxErrors, u.TxDown, u.TxMTUDrops))
		row("RX segmented", u.RxSegmented)
		row("RX checksums filled", u.RxCsumFilled)
		row("Attaches", u.Attaches)
		row("State changes", u.Changes)
		if u.BusyPollUs != 0 {
			row("Busy poll", fmt.Sprintf("%v: %d polls, %d hits, %v CPU", time.Duration(u.BusyPollUs)*time.Microsecond,
				u.Polls, u.PollHits, time.Duration(u.PollNanos).Round(time.Microsecond)))
		}
		tw.Flush()
	}
}

// writeSegmentEvent is how monitor prints a segment notification: a blank line, then "Segment
// SEG added|removed|changed:" and its list line without the header.
func writeSegmentEvent(w io.Writer, kind client.NotificationKind, s wire.SegmentInfo) {
	what := map[client.NotificationKind]string{
		client.SegmentAdded: "added", client.SegmentRemoved: "removed", client.SegmentChanged: "changed",
	}[kind]
	fmt.Fprintf(w, "\nSegment %s %s:\n", s.Name, what)
	var ups []string
	for _, u := range s.Uplinks {
		ups = append(ups, uplinkName(u)+"="+u.State)
	}
	fmt.Fprintf(w, "origin %s, MTU %s, storm limit %s, ageing %s, ports %s, uplinks %s\n", s.Origin, mtuText(s.MTU),
		stormText(s.StormPPS), ageingText(s.AgeingMs), dashIfEmpty(strings.Join(s.Ports, ",")), dashIfEmpty(strings.Join(ups, ",")))
}

// segmentJSON is a segment in segment list, show, add and uplink add --json, and in monitor.
type segmentJSON struct {
	Name       string       `json:"name"`
	Origin     string       `json:"origin"`
	MTU        uint32       `json:"mtu"`       // 0: each uplink device's own
	StormPPS   uint64       `json:"storm-pps"` // 0: no limit
	AgeingMs   uint64       `json:"ageing-ms"` // 0: never
	Ports      []string     `json:"ports"`
	LearntMACs uint32       `json:"learnt-macs"`
	Floods     uint64       `json:"floods"`
	StormDrops uint64       `json:"storm-drops"`
	Uplinks    []uplinkJSON `json:"uplinks"`
}

type uplinkJSON struct {
	Dev          string `json:"dev"`
	NetNS        string `json:"netns"`
	State        string `json:"state"`
	Error        string `json:"error"`
	Kind         string `json:"kind"`
	IfIndex      uint32 `json:"ifindex"`
	MTU          uint32 `json:"mtu"`
	MaxPortMTU   uint32 `json:"max-port-mtu"`
	StateChanges uint64 `json:"state-changes"`
	RxPackets    uint64 `json:"rx-packets"`
	RxBytes      uint64 `json:"rx-bytes"`
	TxPackets    uint64 `json:"tx-packets"`
	TxBytes      uint64 `json:"tx-bytes"`
	TxAggregates uint64 `json:"tx-aggregates"`
	TxWhole      uint64 `json:"tx-whole"`
	RxWhole      uint64 `json:"rx-whole"`
	RxDrops      struct {
		Runt      uint64 `json:"runt"`
		Oversize  uint64 `json:"oversize"`
		Truncated uint64 `json:"truncated"`
	} `json:"rx-drops"`
	TxDrops struct {
		Device uint64 `json:"device"`
		Down   uint64 `json:"down"`
		MTU    uint64 `json:"mtu"`
	} `json:"tx-drops"`
	RxSegmented      uint64 `json:"rx-segmented"`
	RxChecksumFilled uint64 `json:"rx-checksum-filled"`
	Attaches         uint64 `json:"attaches"`
	Attach           string `json:"attach"`       // "af_packet", "af_xdp"; "" before the first attach
	XDPMode          string `json:"xdp-mode"`     // af_xdp: "native copy", "generic copy", "native zero-copy"…
	Fallback         string `json:"fallback"`     // why auto took af_packet
	BusyPollUs       uint32 `json:"busy-poll-us"` // 0: off
	BusyPoll         struct {
		Polls      uint64  `json:"polls"`
		Hits       uint64  `json:"hits"`
		CPUSeconds float64 `json:"cpu-seconds"`
	} `json:"busy-poll"`
}

func segmentToJSON(s wire.SegmentInfo) segmentJSON {
	out := segmentJSON{
		Name: s.Name, Origin: s.Origin, MTU: s.MTU, StormPPS: s.StormPPS, AgeingMs: s.AgeingMs,
		Ports: append([]string{}, s.Ports...), LearntMACs: s.Learnt, Floods: s.Floods, StormDrops: s.StormDrops,
		Uplinks: []uplinkJSON{},
	}
	for _, u := range s.Uplinks {
		j := uplinkJSON{
			Dev: u.Dev, NetNS: u.NetNS, State: u.State, Error: u.Error, Kind: u.Kind, IfIndex: u.Ifindex, MTU: u.MTU,
			MaxPortMTU: u.MaxPortMTU, StateChanges: u.Changes, RxPackets: u.RxPackets, RxBytes: u.RxBytes,
			TxPackets: u.TxPackets, TxBytes: u.TxBytes, RxSegmented: u.RxSegmented, RxChecksumFilled: u.RxCsumFilled,
			Attaches: u.Attaches, Attach: u.Attach, XDPMode: u.XDPMode, Fallback: u.Fallback,
			TxAggregates: u.TxAggregates, TxWhole: u.TxWhole, RxWhole: u.RxWhole,
		}
		j.RxDrops.Runt, j.RxDrops.Oversize, j.RxDrops.Truncated = u.RxRunts, u.RxOversize, u.RxTruncated
		j.TxDrops.Device, j.TxDrops.Down, j.TxDrops.MTU = u.TxErrors, u.TxDown, u.TxMTUDrops
		j.BusyPollUs, j.BusyPoll.Polls, j.BusyPoll.Hits = u.BusyPollUs, u.Polls, u.PollHits
		j.BusyPoll.CPUSeconds = time.Duration(u.PollNanos).Seconds()
		out.Uplinks = append(out.Uplinks, j)
	}
	return out
}
