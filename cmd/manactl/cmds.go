package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/cmd/internal/buildinfo"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/layout"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic/faultpoint"
	"github.com/manad/manad/vnic/rxbuf"
)

// newRoot builds the command tree for one invocation.
func newRoot(a *app, env func(string) string) *cobra.Command {
	socket := env("MANAD_SOCKET")
	if socket == "" {
		socket = client.DefaultPath
	}
	root := &cobra.Command{
		Use:   "manactl",
		Short: "Control manad's software MANA ports, ethtool-style",
		Long: `manactl controls the ports of manad, the software Microsoft MANA NIC daemon. Its
ethtool-family commands (show-priv-flags, set-priv-flags, show-ring, set-ring,
show-channels, set-channels, stats, show-strings, show-link — also plain
"manactl DEV" —, show-time-stamping) print what ethtool prints and
accept ethtool's options as aliases (manactl -g eth0, manactl --set-priv-flags eth0
full-page-rx on). They go to manad, or to the kernel's ethtool netlink for a device
manad does not own (manad answers "no device matches name"), when manad is not
running, or with --kernel: one habit, and one udev rule, for software ports and
real NICs alike. The other commands are manad's own.

Devices are looked up in the caller's network namespace: run manactl inside the
port's namespace (ip netns exec NS manactl ...). list, run by root on the host,
shows the ports of every namespace.

Errors are one line on stderr ("netlink error: <message>: <errno text>"), which
says how to fix the failure where manactl can tell (a port in another namespace,
a change that needs root or the admin_group, an unknown private flag); when manad
is not running, the kernel's error is followed by "manad is not running at PATH".
The exit status is ethtool's for the same failure (81 for set-ring; 70, 94, 96 or
97 for stats; otherwise 1). Usage errors exit with status 1, as ethtool's.`,
		Example: `  manactl -g mana0
  manactl --set-priv-flags mana0 full-page-rx on
  ip netns exec manaA manactl show-rxbuf mana0
  manactl --json list`,
		Version:       buildinfo.Version("manactl"),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				// Plain `ethtool DEV`: a name that is a netdev here is a device, not a command.
				if _, err := net.InterfaceByName(args[0]); err == nil {
					link := showLinkCmd(a)
					link.SetContext(cmd.Context())
					return link.RunE(link, args)
				}
			}
			if len(args) > 0 {
				// A manad port in another namespace reads as an unknown command here: say where
				// it is.
				if h := a.netnsHint(cmd.Context(), args[0], unix.ENODEV); h != nil {
					return failed(h)
				}
				return unknownCommand(cmd, args[0])
			}
			return usageErrorf("no command given")
		},
	}
	pf := root.PersistentFlags()
	pf.BoolVar(&a.json, "json", false, "print JSON (show commands; field names are stable)")
	pf.BoolVar(&a.kernel, "kernel", false, "send ethtool-family commands to the kernel's ethtool netlink")
	pf.StringVar(&a.socket, "socket", socket, "manad's control socket (environment MANAD_SOCKET)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.SetVersionTemplate("{{.Version}}")

	root.AddCommand(topLevel{a}.commands()...)
	return root
}

// devArgs is a cobra.PositionalArgs that wants DEV plus between min and max more arguments
// (max < 0: no limit).
func devArgs(minMore, maxMore int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		if len(args) == 0 || args[0] == "" {
			return usageErrorf("%s needs a device name", name)
		}
		n := len(args) - 1
		if n < minMore || (maxMore >= 0 && n > maxMore) {
			return usageErrorf("%s: wrong number of arguments", name)
		}
		return nil
	}
}

// completeDevs completes a device name: manad's ports in the caller's namespace and the kernel's
// netdevs (/sys/class/net).
func completeDevs(a *app) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		if c, err := client.Dial(a.socket); err == nil {
			// An admin on the host gets every namespace's ports; only this one's resolve.
			var self unix.Stat_t
			if ports, err := c.Ports(cmd.Context()); err == nil && unix.Stat("/proc/thread-self/ns/net", &self) == nil {
				for _, p := range ports {
					if p.Device.NetNS == (wire.NetNS{Dev: self.Dev, Ino: self.Ino}) {
						names = append(names, p.Device.Name)
					}
				}
			}
			c.Close()
		}
		if ents, err := os.ReadDir("/sys/class/net"); err == nil {
			for _, e := range ents {
				names = append(names, e.Name())
			}
		}
		slices.Sort(names)
		return slices.Compact(names), cobra.ShellCompDirectiveNoFileComp
	}
}

// ifname is the device name a reply's header carries, or the requested one.
func ifname(got client.Interface, asked string) string {
	if got.Name != "" {
		return got.Name
	}
	return asked
}

// ---- ethtool-family commands ----

// ShowPrivFlags is a top-level command (see topLevel).
func (t topLevel) ShowPrivFlags() *cobra.Command { return showPrivFlagsCmd(t.app) }

func showPrivFlagsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-priv-flags DEV",
		Short: "Show private flags (ethtool --show-priv-flags)",
		Long: `Show the device's private flags, as ethtool --show-priv-flags prints them. A manad
port has one flag, full-page-rx: one RX buffer per page instead of page-pool
fragments.`,
		Example: `  manactl show-priv-flags mana0
  manactl --show-priv-flags mana0
  manactl --json show-priv-flags mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("--show-priv-flags"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pf *client.PrivateFlags
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				pf, err = c.PrivateFlags(cmd.Context(), client.Interface{Name: args[0]})
				return err
			})
			if err != nil {
				return err
			}
			dev := ifname(pf.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []privFlagsJSON{privFlagsToJSON(dev, pf.Flags)}))
			}
			writePrivFlags(a.stdout, dev, pf.Flags)
			return nil
		},
	}
}

// SetPrivFlags is a top-level command (see topLevel).
func (t topLevel) SetPrivFlags() *cobra.Command { return setPrivFlagsCmd(t.app) }

func setPrivFlagsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "set-priv-flags DEV NAME on|off [NAME on|off ...]",
		Short: "Set private flags (ethtool --set-priv-flags)",
		Long: `Set private flags by name; flags not named keep their value (the request is
ethtool's: a verbose bitset without a mask). On a running manad port a change
rebuilds the RX queues when the layout depends on it, with the driver's
pre-allocate, detach, attach semantics.`,
		Example: `  manactl set-priv-flags mana0 full-page-rx on
  manactl --set-priv-flags mana0 full-page-rx off`,
		Args:              devArgs(2, -1),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("--set-priv-flags"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dev, rest := args[0], args[1:]
			if len(rest)%2 != 0 {
				return usageErrorf("private flag '%s' needs a value (on or off)", rest[len(rest)-1])
			}
			req := client.PrivateFlags{Interface: client.Interface{Name: dev}}
			for i := 0; i < len(rest); i += 2 {
				on, err := parseOnOff(rest[i], rest[i+1])
				if err != nil {
					return err
				}
				req.Flags = append(req.Flags, client.Flag{Name: rest[i], On: on})
			}
			return a.ethtoolDo(cmd.Context(), func(c *client.Client) error {
				err := c.SetPrivateFlags(cmd.Context(), req)
				return privFlagHint(cmd.Context(), c, dev, req.Flags, err)
			})
		},
	}
}

// ShowRing is a top-level command (see topLevel).
func (t topLevel) ShowRing() *cobra.Command { return showRingCmd(t.app) }

func showRingCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-ring DEV",
		Short: "Show RX/TX ring sizes (ethtool -g)",
		Long:  `Show the ring parameters, as ethtool -g (6.15) prints them.`,
		Example: `  manactl -g mana0
  manactl show-ring mana0
  manactl --json show-ring mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-g", "--show-ring"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r *client.Rings
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				r, err = c.Rings(cmd.Context(), client.Interface{Name: args[0]})
				return err
			})
			if err != nil {
				return err
			}
			dev := ifname(r.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []ringsJSON{ringsToJSON(dev, r.Rings)}))
			}
			writeRings(a.stdout, dev, r.Rings)
			return nil
		},
	}
}

// ringParams are set-ring's parameters, ethtool -G's names.
var ringParams = []string{"rx", "rx-mini", "rx-jumbo", "tx", "rx-buf-len", "cqe-size", "tx-push", "rx-push", "tcp-data-split"}

// parseRingsUpdate turns set-ring's "NAME VALUE …" into a client.RingsUpdate.
func parseRingsUpdate(args []string) (client.RingsUpdate, error) {
	var u client.RingsUpdate
	pairs, err := parseParams("ring", args, ringParams)
	if err != nil {
		return u, err
	}
	for _, p := range pairs {
		name, val := p[0], p[1]
		switch name {
		case "tx-push", "rx-push":
			b, err := parseOnOff(name, val)
			if err != nil {
				return u, err
			}
			if name == "tx-push" {
				u.TxPush = &b
			} else {
				u.RxPush = &b
			}
		case "tcp-data-split":
			// ethtool's tcp_data_split_values: auto, off, on.
			v, ok := map[string]uint8{"auto": 0, "off": 1, "on": 2}[val]
			if !ok {
				return u, usageErrorf("invalid value '%s' for parameter '%s' (want auto, off or on)", val, name)
			}
			u.TCPDataSplit = &v
		default:
			n, err := parseU32(name, val)
			if err != nil {
				return u, err
			}
			*map[string]**uint32{"rx": &u.Rx, "rx-mini": &u.RxMini, "rx-jumbo": &u.RxJumbo, "tx": &u.Tx,
				"rx-buf-len": &u.RxBufLen, "cqe-size": &u.CQESize}[name] = &n
		}
	}
	return u, nil
}

// SetRing is a top-level command (see topLevel).
func (t topLevel) SetRing() *cobra.Command { return setRingCmd(t.app) }

func setRingCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "set-ring DEV PARAM VALUE [PARAM VALUE ...]",
		Short: "Change ring sizes (ethtool -G)",
		Long: `Change ring parameters, with ethtool -G's names: rx N, rx-mini N, rx-jumbo N,
tx N, rx-buf-len N, cqe-size N, tx-push on|off, rx-push on|off, tcp-data-split
auto|off|on. A manad port has rx (128..8192) and tx (128..16384) rings, rounded
up to a power of two as the driver does; the rest is refused as the kernel refuses
what a driver does not support.`,
		Example: `  manactl -G mana0 rx 2048 tx 512
  manactl set-ring mana0 rx 512`,
		Args:              devArgs(2, -1),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-G", "--set-ring"),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := parseRingsUpdate(args[1:])
			if err != nil {
				return err
			}
			return a.ethtoolDo(cmd.Context(), func(c *client.Client) error {
				return c.SetRings(cmd.Context(), client.Interface{Name: args[0]}, u)
			})
		},
	}
}

// ShowChannels is a top-level command (see topLevel).
func (t topLevel) ShowChannels() *cobra.Command { return showChannelsCmd(t.app) }

func showChannelsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-channels DEV",
		Short: "Show channel counts (ethtool -l)",
		Long:  `Show the channel counts, as ethtool -l prints them. A manad port has combined channels only.`,
		Example: `  manactl -l mana0
  manactl --json show-channels mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-l", "--show-channels"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ch *client.Channels
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				ch, err = c.Channels(cmd.Context(), client.Interface{Name: args[0]})
				return err
			})
			if err != nil {
				return err
			}
			dev := ifname(ch.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []channelsJSON{channelsToJSON(dev, ch.Channels)}))
			}
			writeChannels(a.stdout, dev, ch.Channels)
			return nil
		},
	}
}

// channelParams are set-channels' parameters, ethtool -L's names.
var channelParams = []string{"rx", "tx", "other", "combined"}

// parseChannelsUpdate turns set-channels' "NAME N …" into a client.ChannelsUpdate.
func parseChannelsUpdate(args []string) (client.ChannelsUpdate, error) {
	var u client.ChannelsUpdate
	pairs, err := parseParams("channel", args, channelParams)
	if err != nil {
		return u, err
	}
	for _, p := range pairs {
		n, err := parseU32(p[0], p[1])
		if err != nil {
			return u, err
		}
		*map[string]**uint32{"rx": &u.Rx, "tx": &u.Tx, "other": &u.Other, "combined": &u.Combined}[p[0]] = &n
	}
	return u, nil
}

// SetChannels is a top-level command (see topLevel).
func (t topLevel) SetChannels() *cobra.Command { return setChannelsCmd(t.app) }

func setChannelsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "set-channels DEV PARAM N [PARAM N ...]",
		Short: "Change channel counts (ethtool -L)",
		Long: `Change channel counts, with ethtool -L's names: rx N, tx N, other N, combined N.
A manad port has combined channels (1..max-queues); its TAP gains or loses queues
with it.`,
		Example: `  manactl -L mana0 combined 8
  manactl set-channels mana0 combined 2`,
		Args:              devArgs(2, -1),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-L", "--set-channels"),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := parseChannelsUpdate(args[1:])
			if err != nil {
				return err
			}
			return a.ethtoolDo(cmd.Context(), func(c *client.Client) error {
				return c.SetChannels(cmd.Context(), client.Interface{Name: args[0]}, u)
			})
		},
	}
}

// Stats is a top-level command (see topLevel).
func (t topLevel) Stats() *cobra.Command { return statsCmd(t.app) }

func statsCmd(a *app) *cobra.Command {
	var allGroups bool
	var groups []string
	cmd := &cobra.Command{
		Use:   "stats DEV [--all-groups | --groups GROUP...]",
		Short: "Show driver statistics (ethtool -S)",
		Long: `Show the driver statistics, as ethtool -S prints them: for a manad port the mana
driver's counters in its order (eth, hc, phy, then rx_<q>_* and tx_<q>_* per queue),
then manad's own, summed over the queues and named manad_*:
` + manadStatsHelp + `
For another device, the kernel driver's, read with the SIOCETHTOOL ioctl as ethtool
does (the kernel's ethtool netlink has no request for them).

--all-groups and --groups (eth-phy, eth-mac, eth-ctrl, rmon, phydev; several
after one --groups, or comma-separated) show the standard IEEE 802.3 and RMON
statistics instead (STATS_GET), as ethtool -S --all-groups prints them. mana
implements none of them, so a manad port (like a veth or a tun) lists no counter:
only "Standard stats for DEV:", and in --json an empty object per group. Another
device's groups come from the kernel.`,
		Example: `  manactl -S mana0
  manactl --json stats mana0 | jq '.[0].statistics.rx_0_packets'
  manactl -S mana0 --all-groups
  manactl -S eth0 --groups eth-mac rmon`,
		Args: func(cmd *cobra.Command, args []string) error {
			more := 0
			if cmd.Flags().Changed("groups") {
				more = -1 // ethtool's --groups G1 G2 …: the names after the device
			}
			return devArgs(0, more)(cmd, args)
		},
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-S", "--statistics"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if allGroups || cmd.Flags().Changed("groups") {
				var names []string // nil: all
				if !allGroups {
					names = append(append([]string{}, groups...), args[1:]...)
				} else if cmd.Flags().Changed("groups") {
					return usageErrorf("stats: --all-groups and --groups are mutually exclusive")
				}
				var v *stdStatsView
				if err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
					v, err = stdStats(cmd.Context(), c, args[0], names)
					return err
				}); err != nil {
					return err
				}
				if a.json {
					return failed(writeJSON(a.stdout, []*stdStatsView{v}))
				}
				v.write(a.stdout)
				return nil
			}
			var stats []wire.Stat
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				if c.Kernel() {
					stats, err = kernelStats(args[0])
				} else {
					stats, err = c.Stats(cmd.Context(), client.Interface{Name: args[0]})
				}
				return err
			})
			if err != nil {
				return err
			}
			if a.json {
				return failed(writeJSON(a.stdout, []statsJSON{{IfName: args[0], Statistics: stats}}))
			}
			writeStats(a.stdout, stats)
			return nil
		},
	}
	cmd.Flags().BoolVar(&allGroups, "all-groups", false, "show every standard statistics group (STATS_GET)")
	cmd.Flags().StringSliceVar(&groups, "groups", nil, "show these standard statistics groups: eth-phy, eth-mac, eth-ctrl, rmon, phydev")
	return cmd
}

// parseStringSet accepts a string set's name (stringSetNames) or number.
func parseStringSet(s string) (uint32, error) {
	if i := slices.Index(stringSetNames, s); i >= 0 {
		return uint32(i), nil
	}
	if v, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(v), nil
	}
	return 0, usageErrorf("unknown string set '%s' (want a number or one of: %s)", s, strings.Join(stringSetNames, ", "))
}

// ShowStrings is a top-level command (see topLevel).
func (t topLevel) ShowStrings() *cobra.Command { return showStringsCmd(t.app) }

func showStringsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-strings DEV [SET]",
		Short: "Show a device's string sets (ETHTOOL_MSG_STRSET_GET)",
		Long: `Show the device's string sets (the names of its statistics, private flags, ...):
all per-device sets that are not empty, or the one SET named (a name such as stats,
priv-flags, features, link-modes, or an ETH_SS_* number).`,
		Example: `  manactl show-strings mana0
  manactl show-strings mana0 priv-flags
  manactl --json show-strings mana0 stats`,
		Args:              devArgs(0, 1),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids []uint32
			if len(args) == 2 {
				id, err := parseStringSet(args[1])
				if err != nil {
					return err
				}
				ids = []uint32{id}
			}
			var ss *client.StringSets
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				ss, err = c.StringSets(cmd.Context(), &client.Interface{Name: args[0]}, ids, false)
				return err
			})
			if err != nil {
				return err
			}
			dev := ifname(ss.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []stringSetsJSON{stringSetsToJSON(dev, ss.Sets)}))
			}
			writeStringSets(a.stdout, dev, ss.Sets)
			return nil
		},
	}
}

// ---- manad-only commands ----

// withManad runs f with a manad connection.
func (a *app) withManad(cmd *cobra.Command, f func(c *client.Client) error) error {
	c, err := a.dialManad(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "))
	if err != nil {
		return err
	}
	defer c.Close()
	return failed(f(c))
}

// List is a top-level command (see topLevel).
func (t topLevel) List() *cobra.Command { return listCmd(t.app) }

func listCmd(a *app) *cobra.Command {
	var netns string
	cmd := &cobra.Command{
		Use:     "list [--netns NS]",
		Aliases: []string{"ls"},
		Short:   "List manad's ports",
		Long: `List manad's ports: name, network namespace ("-" for manad's own), state (admin
up/down, detached while being reconfigured, reset-pending while its reset work is
due), MTU, page size, queues (current/max), rings (rx/tx), private flags that are
on, and XDP program.

Run by root (or a member of manad's admin group) in manad's own network namespace
(the host's), list shows every port in every namespace; anyone else sees the ports
of the namespace manactl runs in. --netns NS keeps the ports of namespace NS ("-"
for manad's own); a namespace that does not exist (ip netns list) is an error, not
an empty table.`,
		Example: `  manactl list                       # as root on the host: every port
  manactl list --netns manaA
  ip netns exec manaA manactl list   # the ports in manaA
  manactl --json list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withManad(cmd, func(c *client.Client) error {
				ports, err := c.Ports(cmd.Context())
				if err != nil {
					return err
				}
				if cmd.Flags().Changed("netns") {
					ports = portsInNetNS(ports, netns)
					if len(ports) == 0 {
						if err := netnsExists(netns); err != nil {
							return err
						}
					}
				}
				if a.json {
					out := make([]portJSON, 0, len(ports))
					for _, p := range ports {
						out = append(out, portToJSON(p))
					}
					return writeJSON(a.stdout, out)
				}
				writePorts(a.stdout, ports)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&netns, "netns", "", `only the ports in this named network namespace ("-": manad's own)`)
	return cmd
}

// netnsExists returns nil when ns names an existing network namespace (or manad's own, "-" or
// ""), as ip netns does (a file in /run/netns), else an error wrapping ENOENT that says how to
// list them (or the error of looking): list --netns with a misspelt name must not print an empty table and succeed.
func netnsExists(ns string) error {
	if ns == "-" || ns == "" {
		return nil
	}
	_, err := os.Stat(filepath.Join(netnsDir, ns))
	if strings.Contains(ns, "/") || ns == "." || ns == ".." || errors.Is(err, os.ErrNotExist) {
		return &hintError{"network namespace " + ns + " does not exist (ip netns list shows those that do)", unix.ENOENT}
	}
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", ns, err)
	}
	return nil
}

// netnsDir is where ip netns keeps the named network namespaces.
const netnsDir = "/run/netns"

// portsInNetNS keeps the ports in the named namespace; "-" (and "") name manad's own, as list
// prints it.
func portsInNetNS(ports []wire.PortInfo, ns string) []wire.PortInfo {
	if ns == "-" {
		ns = ""
	}
	return slices.DeleteFunc(ports, func(p wire.PortInfo) bool { return p.NetNSName != ns })
}

// ShowRxBuf is a top-level command (see topLevel).
func (t topLevel) ShowRxBuf() *cobra.Command { return showRxBufCmd(t.app) }

func showRxBufCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-rxbuf DEV",
		Short: "Show a port's live RX buffer layout and why",
		Long: `Show the port's live RX buffer layout, as mana_get_rxbuf_cfg computes it: datasize,
alloc size, headroom, buffer size, buffers per page, page order, page-pool size, the
pages and bytes a full ring pins per queue and in total, what is pinned right now,
why the port is in fragment or single-buffer mode, and how many frames it delivered
with less headroom than LL_RESERVED_SPACE (256): those the kernel would copy with
pskb_expand_head to forward out of a MANA port (rx_short_headroom in stats).`,
		Example: `  manactl show-rxbuf mana0
  manactl --json show-rxbuf mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withManad(cmd, func(c *client.Client) error {
				p, err := c.Port(cmd.Context(), client.Interface{Name: args[0]})
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.stdout, []rxBufJSON{rxBufToJSON(*p)})
				}
				writeRxBuf(a.stdout, *p)
				return nil
			})
		},
	}
}

// rxBufRules are the RX buffer rules manad models.
var rxBufRules = []string{"upstream", "pre-headroom", "pre-frag"}

// RxBufPlan is a top-level command (see topLevel).
func (t topLevel) RxBufPlan() *cobra.Command { return rxBufPlanCmd(t.app) }

func rxBufPlanCmd(a *app) *cobra.Command {
	var pageSize string
	var mtu, ring, queues uint32
	var xdp, fullPage bool
	var rules []string
	var rxAlloc string
	cmd := &cobra.Command{
		Use:                   "rxbuf-plan --page-size SIZE --mtu N [--xdp] [--full-page-rx] [--rule RULE]... [--ring-size N] [--queues N] [--rx-alloc MODE]",
		DisableFlagsInUseLine: true,
		Short:                 "Compute RX buffer layouts for hypothetical parameters",
		Long: `Compute the RX buffer layout for a page size and MTU (with or without XDP and
full-page-rx) under several driver rules side by side: upstream (current mana, with
the headroom fix), pre-headroom (page-pool fragments without headroom) and pre-frag
(one buffer per page always). Without --rule all three are shown. --rx-alloc shows
a port's rx_alloc what-if mode: page-pool-frag (the rule's choice, the default),
page-pool-page (one page-pool page per buffer) or no-pool (every buffer allocated by
itself). manactl computes the layouts itself, with the model manad uses: manad need
not run.`,
		Example: `  manactl rxbuf-plan --page-size 4K --mtu 1500
  manactl rxbuf-plan --page-size 64K --mtu 9000 --rule upstream --rule pre-headroom
  manactl rxbuf-plan --page-size 16K --mtu 1500 --xdp --ring-size 2048 --queues 16
  manactl rxbuf-plan --page-size 16K --mtu 1500 --rx-alloc no-pool`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ps, err := parsePageSize(pageSize)
			if err != nil {
				return err
			}
			var rs []string
			for _, r := range rules {
				for _, x := range strings.Split(r, ",") {
					if !slices.Contains(rxBufRules, x) {
						return usageErrorf("unknown rule '%s' (want %s)", x, strings.Join(rxBufRules, ", "))
					}
					rs = append(rs, x)
				}
			}
			alloc, err := rxbuf.ParseAlloc(rxAlloc)
			if err != nil {
				return usageErrorf("unknown rx-alloc mode '%s' (want page-pool-frag, page-pool-page or no-pool)", rxAlloc)
			}
			req := wire.LayoutRequest{PageSize: ps, MTU: mtu, RingSize: ring, Queues: queues, XDP: xdp, FullPageRx: fullPage, Rules: rs}
			// Computed here, with the model manad uses (genl/layout): no daemon needed.
			ls, err := layout.PlanAlloc(req, alloc)
			if err != nil {
				var xe *nlerr.Error
				if errors.As(err, &xe) {
					err = &errnoError{xe.Message, xe.Errno, failRequest}
				}
				return failed(err)
			}
			if a.json {
				out := make([]layoutJSON, 0, len(ls))
				for _, l := range ls {
					out = append(out, layoutToJSON(l))
				}
				return failed(writeJSON(a.stdout, out))
			}
			writePlan(a.stdout, req, ls)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&pageSize, "page-size", "", "page size: 4K, 16K or 64K (or 4096, 16384, 65536)")
	f.Uint32Var(&mtu, "mtu", 0, "MTU")
	f.BoolVar(&xdp, "xdp", false, "an XDP program is attached")
	f.BoolVar(&fullPage, "full-page-rx", false, "the full-page-rx private flag is on")
	f.StringSliceVar(&rules, "rule", nil, "rule(s): upstream, pre-headroom, pre-frag (repeat or comma-separate; default all)")
	f.Uint32Var(&ring, "ring-size", 0, "RX ring size (default 1024)")
	f.Uint32Var(&queues, "queues", 0, "RX queues (default 1)")
	f.StringVar(&rxAlloc, "rx-alloc", rxbuf.AllocPagePoolFrag.String(), "RX allocation mode: page-pool-frag, page-pool-page or no-pool")
	_ = cmd.MarkFlagRequired("page-size")
	_ = cmd.MarkFlagRequired("mtu")
	return cmd
}

// SetMTU is a top-level command (see topLevel).
func (t topLevel) SetMTU() *cobra.Command { return setMTUCmd(t.app) }

func setMTUCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "set-mtu DEV N",
		Short: "Change a port's MTU (reconfigures its RX buffers)",
		Long: `Change the port's MTU through the driver's reconfiguration (mana_change_mtu: new RX
buffers pre-allocated in the new layout, queues detached and re-attached), then on
its TAP. ip link set DEV mtu N has the same effect.`,
		Example:           `  manactl set-mtu mana0 9000`,
		Args:              devArgs(1, 1),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			mtu, err := parseU32("mtu", args[1])
			if err != nil {
				return err
			}
			return a.withManad(cmd, func(c *client.Client) error {
				return c.SetMTU(cmd.Context(), client.Interface{Name: args[0]}, mtu)
			})
		},
	}
}

// builtinXDP are manad's built-in XDP programs.
var builtinXDP = []string{"pass", "drop", "tx", "aborted"}

// maxXDPObject bounds the object file xdp attach reads (manad's own limit, xdp.MaxObjectSize);
// in practice the request must also fit one datagram, about 200 KiB.
const maxXDPObject = 4 << 20

// Xdp is a top-level command (see topLevel).
func (t topLevel) Xdp() *cobra.Command { return xdpCmd(t.app) }

func xdpCmd(a *app) *cobra.Command {
	var section, name string
	cmd := &cobra.Command{
		Use:                   "xdp DEV attach pass|drop|tx|aborted|FILE.o [--section S] [--name N] | xdp DEV detach",
		DisableFlagsInUseLine: true,
		Short:                 "Attach or detach a port's XDP program",
		Long: `Attach a built-in XDP program (pass, drop, tx, aborted) or an eBPF object file
(its only XDP program, or the one in --section; list and show-rxbuf then show it as
ebpf:NAME, NAME being --name or the program's function name), or detach it. The program runs per frame with the real headroom; attaching or detaching
switches the port to and from one buffer per page, as mana_xdp_set does. To load
a file named like a built-in, give a path: ./pass.`,
		Example: `  manactl xdp mana0 attach drop
  manactl xdp mana0 attach ./filter.o --section xdp --name udp-filter
  manactl xdp mana0 detach`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := devArgs(1, 2)(cmd, args); err != nil {
				return err
			}
			switch {
			case args[1] == "attach" && len(args) == 3:
			case args[1] == "detach" && len(args) == 2:
			case args[1] == "attach":
				return usageErrorf("xdp attach needs a program: pass, drop, tx, aborted or FILE.o")
			case args[1] == "detach":
				return usageErrorf("xdp detach takes no program")
			default:
				return usageErrorf("unknown xdp action '%s' (want attach or detach)", args[1])
			}
			return nil
		},
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			dev := client.Interface{Name: args[0]}
			if args[1] == "detach" {
				if section != "" || name != "" {
					return usageErrorf("--section and --name apply to xdp attach FILE.o")
				}
				return a.withManad(cmd, func(c *client.Client) error { return c.DetachXDP(cmd.Context(), dev) })
			}
			var prog wire.XDPProgram
			if slices.Contains(builtinXDP, args[2]) {
				if section != "" || name != "" {
					return usageErrorf("--section and --name apply to an object file, not to built-in %q", args[2])
				}
				prog.Builtin = args[2]
			} else {
				obj, err := readObject(args[2])
				if err != nil {
					return err
				}
				prog = wire.XDPProgram{Object: obj, Section: section, Name: name}
			}
			return a.withManad(cmd, func(c *client.Client) error {
				err := c.AttachXDP(cmd.Context(), dev, prog)
				if errors.Is(err, unix.EMSGSIZE) && len(prog.Object) > 0 {
					// The object travels in one datagram: the socket's send buffer and manad's
					// request limit bound it (about 200 KiB with default sysctls).
					return &errnoError{fmt.Sprintf("%s (%d bytes) does not fit in one request to manad", args[2], len(prog.Object)), unix.EMSGSIZE, failRequest}
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&section, "section", "", "ELF section of the program (object files)")
	cmd.Flags().StringVar(&name, "name", "", "name to show the program as (default: its function name)")
	return cmd
}

// readObject reads an eBPF object file for xdp attach.
func readObject(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(path, "/.") {
			return nil, usageErrorf("unknown XDP program '%s' (want pass, drop, tx, aborted or an object file)", path)
		}
		return nil, failed(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, failed(err)
	}
	if !st.Mode().IsRegular() || st.Size() > maxXDPObject {
		return nil, failed(fmt.Errorf("%s: not a regular file of at most %d bytes: %w", path, maxXDPObject, unix.EINVAL))
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, failed(fmt.Errorf("read %s: %w", path, err))
	}
	return b, nil
}

// Port is a top-level command (see topLevel).
func (t topLevel) Port() *cobra.Command { return portCmd(t.app) }

func portCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "port add NAME [options] | port del NAME",
		DisableFlagsInUseLine: true,
		Short:                 "Create or delete a port",
		Long: `Create a port at runtime (its TAP appears in --netns, manad's own namespace by
default; unset options take the daemon's defaults), or delete one and its TAP,
persistent or not. manad remembers both across restarts.`,
		Example: `  manactl port add mana2 --netns manaC --segment wire0 --queues 4
  manactl port del mana2`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return usageErrorf("port needs a subcommand: add or del")
		},
	}
	cmd.AddCommand(portAddCmd(a), portDelCmd(a))
	return cmd
}

func portDelCmd(a *app) *cobra.Command {
	var netnsToo bool
	cmd := &cobra.Command{
		Use:     "del NAME [--netns-too]",
		Aliases: []string{"delete"},
		Short:   "Delete a port and its TAP",
		Long: `Delete a port and its TAP, persistent or not. Its network namespace stays, unless
--netns-too is given: manad then deletes the namespace as ip netns del does, when
it is one manad created, holds no other manad port and no link but lo. Otherwise
the port is still deleted, the namespace kept, and a warning on stderr says why
(the exit status is 0).`,
		Example: `  manactl port del mana2
  manactl port del mana2 --netns-too`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withManad(cmd, func(c *client.Client) error {
				ifi := client.Interface{Name: args[0]}
				if !netnsToo {
					return c.DeletePort(cmd.Context(), ifi)
				}
				res, err := c.DeletePortNetNS(cmd.Context(), ifi)
				if err != nil {
					return err
				}
				if res.Notice != "" {
					fmt.Fprintf(a.stderr, "Warning: network namespace kept: %s\n", res.Notice)
				}
				if a.json {
					return writeJSON(a.stdout, []portDelJSON{{IfName: res.Name, NetNS: res.NetNS,
						NetNSDeleted: res.NetNSDeleted, Notice: res.Notice}})
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&netnsToo, "netns-too", false, "also delete the port's network namespace when it is empty and manad created it")
	return cmd
}

// Fault is a top-level command (see topLevel).
func (t topLevel) Fault() *cobra.Command { return faultCmd(t.app) }

func faultCmd(a *app) *cobra.Command {
	var errno string
	cmd := &cobra.Command{
		Use:                   "fault DEV " + strings.Join(faultpoint.Names(), "|") + " once|N|always|off [--errno E]",
		DisableFlagsInUseLine: true,
		Short:                 "Inject failures into a port's reconfigurations",
		Long: `Make a reconfiguration step of the port fail once, N times, always, or no more (off):
` + faultPointHelp() + `
Reaches every branch of the driver's pre-allocate, detach, attach, revert-or-reset
logic.`,
		Example: `  manactl fault mana0 attach once
  manactl fault mana0 prealloc 3 --errno ENOMEM
  manactl fault mana0 attach off`,
		Args:              devArgs(2, 2),
		ValidArgsFunction: completeFault(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The point is the daemon's to check (faultpoint.Parse): its error comes back
			// as any other netlink error.
			f := wire.Fault{Point: args[1]}
			switch m := args[2]; m {
			case "once", "always", "off":
				f.Mode = m
			default:
				n, err := strconv.ParseUint(m, 10, 32)
				if err != nil || n == 0 {
					return usageErrorf("invalid fault mode '%s' (want once, N > 0, always or off)", m)
				}
				f.Mode, f.Count = "count", uint32(n)
			}
			if errno != "" {
				if f.Mode == "off" {
					return usageErrorf("--errno does not apply to off")
				}
				var err error
				if f.Errno, err = parseErrno(errno); err != nil {
					return err
				}
			}
			return a.withManad(cmd, func(c *client.Client) error {
				return c.SetFault(cmd.Context(), client.Interface{Name: args[0]}, f)
			})
		},
	}
	cmd.Flags().StringVar(&errno, "errno", "", "errno the failure returns (ENOMEM, EIO, ... or a number)")
	return cmd
}

// faultPointHelp describes every fault point (faultpoint's declarations): its name, the step it
// fails, its default errno and what it leaves the port in, wrapped under the name.
func faultPointHelp() string {
	var b strings.Builder
	for _, p := range faultpoint.Points {
		d := p.Decl()
		line := fmt.Sprintf("  %-9s", d.Name)
		for _, w := range strings.Fields(fmt.Sprintf("%s fails (%s), by default with %s (%s), leaving %s.",
			d.Step, d.Mirrors, unix.ErrnoName(d.Errno), d.Why, d.Leaves)) {
			if len(line)+1+len(w) > 80 {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", 11)
			}
			line += " " + w
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// completeFault completes fault's arguments: the device, the point, the mode.
func completeFault(a *app) cobra.CompletionFunc {
	devs := completeDevs(a)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return devs(cmd, args, toComplete)
		case 1:
			return faultpoint.Names(), cobra.ShellCompDirectiveNoFileComp
		case 2:
			return []cobra.Completion{"once", "always", "off"}, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// Monitor is a top-level command (see topLevel).
func (t topLevel) Monitor() *cobra.Command { return monitorCmd(t.app) }

func monitorCmd(a *app) *cobra.Command {
	var netdev bool
	cmd := &cobra.Command{
		Use:   "monitor [DEV]",
		Short: "Print notifications as they arrive (ethtool --monitor)",
		Long: `Print each notification as it arrives until interrupted, as ethtool --monitor does:
"listening..." first, then, after a blank line, the private flags, rings or
channels of the device that changed, in the show command's format; manad's port
events (added, removed, changed) too. With DEV, only that device's. With --json,
one JSON object per line (and "listening..." on stderr). With --kernel, the
kernel's ethtool notifications. With --netdev, also the netdev family's: devices
added, removed or changed, and page pools added (a queue started), changed (its
queue was destroyed while buffers were still out: detached) and removed (destroyed
with nothing out, or its last buffer came back), as the kernel's dev-*-ntf and
page-pool-*-ntf.`,
		Example: `  manactl monitor
  ip netns exec manaA manactl monitor mana0
  manactl --kernel --json monitor
  manactl monitor --netdev`,
		Args:        cobra.MaximumNArgs(1),
		Annotations: ethtoolAlias("--monitor"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c *client.Client
			var err error
			if a.kernel {
				c, err = client.DialKernel()
			} else {
				c, err = client.Dial(a.socket)
			}
			if err != nil {
				return failed(&connectError{err})
			}
			defer c.Close()
			ctx := cmd.Context()
			var opts []client.SubscribeOption
			if netdev {
				opts = append(opts, client.WithNetdev())
			}
			sub, err := c.Subscribe(ctx, opts...)
			if err != nil {
				return failed(err)
			}
			// netdev notifications name no device, only its index.
			var devIfi int
			if len(args) == 1 {
				if ifi, err := net.InterfaceByName(args[0]); err == nil {
					devIfi = ifi.Index
				}
			}
			defer sub.Close()
			if a.json {
				fmt.Fprintln(a.stderr, "listening...")
			} else {
				fmt.Fprintln(a.stdout, "listening...")
			}
			for {
				ns, err := sub.Next(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil // interrupted: the normal end
					}
					return failed(err)
				}
				for _, n := range ns {
					if len(args) == 1 && n.Interface.Name != args[0] && (n.Interface.Name != "" || n.Interface.Index != devIfi || devIfi == 0) {
						continue
					}
					if err := writeNotification(a, n); err != nil {
						return failed(err)
					}
				}
			}
		},
	}
	cmd.Flags().BoolVar(&netdev, "netdev", false, "also the netdev family's dev and page-pool notifications")
	return cmd
}

// writeNotification prints one notification as monitor does.
func writeNotification(a *app, n client.Notification) error {
	if a.json {
		return writeJSONLine(a.stdout, eventToJSON(n))
	}
	switch {
	case n.PrivateFlags != nil:
		fmt.Fprintln(a.stdout)
		writePrivFlags(a.stdout, n.Interface.Name, n.PrivateFlags.Flags)
	case n.Rings != nil:
		fmt.Fprintln(a.stdout)
		writeRings(a.stdout, n.Interface.Name, n.Rings.Rings)
	case n.Channels != nil:
		fmt.Fprintln(a.stdout)
		writeChannels(a.stdout, n.Interface.Name, n.Channels.Channels)
	case n.Port != nil:
		writePortEvent(a.stdout, n.Kind, *n.Port)
	case n.NetdevDev != nil, n.PagePool != nil:
		writeNetdevEvent(a.stdout, n)
	case n.Segment != nil:
		writeSegmentEvent(a.stdout, n.Kind, *n.Segment)
	case n.Coalesce != nil:
		fmt.Fprintln(a.stdout)
		writeCoalesce(a.stdout, n.Interface.Name, n.Coalesce)
	case n.RSS != nil:
		// ethtool 6.1's monitor knows no RSS_NTF: -x's layout under a header of its own, as
		// the notification does not say how many RX rings the device has.
		fmt.Fprintf(a.stdout, "\nRSS settings for %s:\n", n.Interface.Name)
		writeRSSTables(a.stdout, n.RSS)
	}
	return nil
}
