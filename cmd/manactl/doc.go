// Command manactl controls manad's software Microsoft MANA NIC ports, ethtool-style.
//
// # Commands
//
// ethtool-family commands; the ethtool option in brackets is accepted as an alias
// (manactl -g eth0, manactl --set-priv-flags eth0 full-page-rx on):
//
//	show-priv-flags DEV                          [--show-priv-flags]  private flags
//	set-priv-flags DEV NAME on|off [NAME on|off]… [--set-priv-flags]  only the named flags change
//	show-ring DEV                                [-g, --show-ring]    ring sizes
//	set-ring DEV PARAM VALUE…                    [-G, --set-ring]     rx, rx-mini, rx-jumbo, tx,
//	                                                                  rx-buf-len, cqe-size N;
//	                                                                  tx-push, rx-push on|off;
//	                                                                  tcp-data-split auto|off|on
//	show-coalesce DEV                            [-c, --show-coalesce] coalescing
//	set-coalesce DEV PARAM VALUE…                [-C, --coalesce]     ethtool -C's names, rx-cqe-frames
//	show-channels DEV                            [-l, --show-channels]
//	set-channels DEV PARAM N…                    [-L, --set-channels] rx, tx, other, combined
//	stats DEV                                    [-S, --statistics]   driver statistics
//	show-strings DEV [SET]                                            string sets (SET: a name
//	                                                                  such as stats, priv-flags,
//	                                                                  features, or an ETH_SS_ id)
//	show-link DEV                                [DEV alone]          link settings, link detected
//	show-time-stamping DEV                       [-T, --show-time-stamping]
//	show-features DEV                            [-k, --show-features, --show-offload]
//	set-features DEV FEATURE on|off...           [-K, --features, --offload]
//	show-rxfh DEV                                [-x, --show-rxfh-indir] RSS table, key, hash
//	set-rxfh DEV [equal N | weight W… | default] [start N] [hkey XX:…] [hfunc toeplitz]
//	         [context 0]                         [-X, --set-rxfh-indir, --rxfh] the table is lost
//	                                                                  on detach/attach, as mana's
//
// They print what ethtool 6.15 prints, byte for byte. They go to manad, or to the kernel's ethtool
// netlink (the SIOCETHTOOL ioctl for stats, as ethtool -S) with --kernel, when manad is not
// running (nothing listens on the socket), or when manad answers ENODEV "no device matches name"
// (the device is not a manad port in the caller's network namespace). So one command, and one
// udev rule, serve manad's ports and real NICs.
//
// manad's own commands:
//
//	list [--netns NS]                     ports: name, netns, state, MTU, page size, queues,
//	                                      rings, flags, XDP; every namespace's for root (or the
//	                                      admin group) on the host, else the caller's namespace's
//	show-rxbuf DEV                        live RX buffer layout, memory pinned, why fragment or
//	                                      single-buffer mode, and the frames delivered with short
//	                                      headroom
//	rxbuf-plan --page-size S --mtu N [--xdp] [--full-page-rx] [--rule R]… [--ring-size N] [--queues N] [--rx-alloc M]
//	                                      layouts for hypothetical parameters, rules side by side
//	                                      (computed by manactl itself: no daemon needed)
//	set-mtu DEV N
//	xdp DEV attach pass|drop|tx|aborted|FILE.o [--section S] [--name N]
//	xdp DEV detach
//	port add NAME [--netns NS] [--segment S] [--mac M] [--mtu N] [--max-mtu N] [--page-size S]
//	         [--queues N] [--max-queues N] [--rx-ring N] [--tx-ring N] [--priv-flags F]
//	         [--memory-budget B] [--persistent] [--offload=false] [--rx-alloc A] [--rx-recycle=false]
//	         [--speed N] [--xdp P] [--rule R] [--cqe-coalesce-8] [--rx-cqe-frames N]
//	         [--napi-defer-hard-irqs N] [--gro-flush-timeout D] [--irq-suspend-timeout D]
//	         [--napi-threaded] [--msix-vectors N]
//	                                 one flag per [[port]] key of manad.toml, in kebab case
//	port del NAME
//	fault DEV prealloc|detach|attach once|N|always|off [--errno E]
//	monitor [DEV] [--netdev]              notifications as they arrive, like ethtool --monitor
//	capture SEG|PORT [-w FILE|-] [-c N] [--direction in|out] [-s N]
//	                                      what a segment or port carries, as pcap (tcpdump -r,
//	                                      Wireshark) or one line per frame; admin only
//	segment list                          wire segments: origin, MTU cap, storm limit, ageing,
//	                                      ports, learnt MACs, uplinks and their state
//	segment show SEG                      one segment, each uplink's state, MTU, largest port MTU
//	                                      and counters
//	segment add SEG [--mtu N] [--storm-pps N] [--ageing DUR]
//	segment del SEG                       refused (EBUSY) while ports are on it
//	segment uplink add|del SEG DEV [--netns NS]
//	completion bash|zsh|fish|powershell   shell completion script (cobra's)
//
// Global options: --json (JSON output of the show commands), --socket PATH (default
// $MANAD_SOCKET, else /run/manad/manad.sock), --kernel. Every command has --help with examples;
// --version prints the build's version (cmd/internal/buildinfo). The hidden gen-man DIR writes
// the manual page manactl.8 (make man).
//
// # Errors and exit status
//
// 0 on success. A failed command prints one line on stderr: a netlink error as ethtool prints it,
// the extack message and then the errno text ("netlink error: requested ring size exceeds
// maximum: Invalid argument"), or "cannot connect to manad at PATH: …" for a manad command when
// manad cannot be reached, or ethtool's ioctl messages for kernel statistics ("Cannot get stats
// strings information: No such device"). Where manactl can tell how to fix the failure, the line
// says so (hints.go): "DEV is a manad port in netns NS: run ip netns exec NS manactl …" for a
// device the caller's namespace lacks; "netlink error: changes need root or the admin_group
// (GROUP): Operation not permitted" for manad's EPERM; the device's valid names for an unknown
// private flag; "network namespace NS does not exist" for list --netns. The kernel's error for a
// request that went there because manad is not running is followed by a second line, "manad is
// not running at PATH". The exit status is ethtool's for the same failure (exitStatuses: 81 for
// set-ring; 70, 94, 96, 97 for stats), 1 otherwise. 1 for a usage error: "manactl: <problem>"
// (for a misspelt command, the closest ones: "Did you mean this?") and "Try 'manactl CMD
// --help'.".
//
// # JSON (--json)
//
// Each show command prints an array with one object per device, as ethtool --json does. Keys:
//
//	show-priv-flags  ifname, flags: [{name, index, on}]
//	show-ring        ifname, rx-max, rx-mini-max, rx-jumbo-max, tx-max, rx, rx-mini, rx-jumbo,
//	                 tx, rx-buf-len, cqe-size, tx-push, rx-push, tcp-data-split
//	                 (ethtool 6.15's keys; what the device does not report is left out)
//	show-coalesce    ifname, adaptive-rx, adaptive-tx, rx-usecs, rx-frames, tx-usecs, tx-frames,
//	                 …, rx-cqe-frames, rx-cqe-nsecs (only what the device reports)
//	show-channels    ifname, rx-max, tx-max, other-max, combined-max, rx, tx, other, combined
//	                 (ethtool's keys; likewise)
//	stats            ifname, statistics: {NAME: VALUE, …} in driver order
//	show-strings     ifname, string-sets: [{id, name, count, strings: […]}]
//	show-link        ifname, supported-ports, supported-link-modes, advertised-link-modes,
//	                 link-partner-advertised-link-modes (when reported), speed (Mb/s; null
//	                 when unknown), lanes (when reported), duplex, auto-negotiation, port,
//	                 phyad, transceiver, link-detected
//	show-time-stamping ifname, capabilities, phc-index (null: none),
//	                 hardware-transmit-timestamp-modes, hardware-receive-filter-modes
//	show-features    ifname, features: {NAME: {active, requested, fixed}} (ethtool has no
//	                 JSON for -k)
//	list             ifname, ifindex, netns, segment, mac, admin-up, running, detached,
//	                 reset-pending, persistent, mtu, min-mtu, max-mtu, page-size, queues,
//	                 max-queues, rx-ring, tx-ring, priv-flags: [names that are on], xdp
//	                 ("" | pass | drop | tx | aborted | ebpf:NAME), pages-pinned, bytes-pinned,
//	                 buffers-in-flight, memory-in-use, memory-peak, memory-budget,
//	                 faults: [{point, mode, count, errno}], offload, rx-alloc, rx-recycle,
//	                 speed, rule, cqe-coalesce-8, rx-cqe-frames, napi-defer-hard-irqs,
//	                 gro-flush-timeout, irq-suspend-timeout (ns; the value most queues have),
//	                 coalesce: {show-coalesce's keys}, rss-hash-key, napi-threaded,
//	                 msix-vectors; the
//	                 configuration's [[port]] keys in kebab case (name is ifname)
//	                 (port add --json prints the same)
//	show-rxbuf       ifname, layout: LAYOUT, pages-pinned, bytes-pinned, buffers-in-flight,
//	                 rx-short-headroom
//	rxbuf-plan       [LAYOUT, …] one per rule
//	LAYOUT           rule, page-size, mtu, xdp, full-page-rx, mode (single | fragments), reason,
//	                 datasize, alloc-size, headroom, buf-size, frag-count, order, pool-size,
//	                 ring-size, queues, pages-per-queue, bytes-per-queue, bytes-total
//	monitor          one object per line: kind (privflags | rings | channels | coalesce | rss |
//	                 port-new | port-del | port-change | segment-new | segment-del |
//	                 segment-change), seq, ifname, ifindex, and one of priv-flags, rings,
//	                 channels, coalesce, rss (the show objects), port (a list object) or
//	                 segment (a SEGMENT object); with --netdev also kind
//	                 dev-add | dev-del | dev-change with dev (dev, ifindex, xdp_features) and
//	                 page-pool-add | page-pool-change | page-pool-del with page-pool (a
//	                 page-pools object)
//	segment list     [SEGMENT, …]   (segment show, segment add and segment uplink add --json:
//	                 the same, one element)
//	SEGMENT          name, origin (config | runtime | ports), mtu (0: each uplink device's),
//	                 storm-pps (0: no limit), ageing-ms (0: never), ports: [names], learnt-macs,
//	                 floods, storm-drops, uplinks: [{dev, netns, state (attached | down | gone |
//	                 reattaching), error, kind, ifindex, mtu, max-port-mtu, state-changes,
//	                 rx-packets, rx-bytes, tx-packets, tx-bytes, tx-aggregates, tx-whole, rx-whole,
//	                 rx-drops: {runt, oversize, truncated}, tx-drops: {device, down, mtu},
//	                 rx-segmented, rx-checksum-filled, attaches, attach (af_packet | af_xdp),
//	                 xdp-mode (af_xdp: native | generic, copy | zero-copy), fallback (why auto
//	                 took af_packet)}]
//
// Sizes are bytes; booleans are JSON booleans. New keys may be added; existing ones keep their
// name and meaning.
package main
