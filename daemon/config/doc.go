// Package config reads manad's configuration file, holds its embedded default, and keeps the
// state file that carries runtime changes across restarts.
//
// # Configuration file
//
// The file is TOML (1.1, parsed by github.com/BurntSushi/toml). It has an optional [daemon]
// table and any number of [[port]] tables; any other key or table is an error, as is a value of
// the wrong type. Keys left out take the defaults below.
//
//	[daemon]
//	socket      = "/run/manad/manad.sock" # absolute path of the control socket (at most 107 bytes)
//	socket_mode = "0666"                  # its permission bits: octal string, or TOML octal 0o666.
//	                                      # Anyone who can connect may read; changes need admin.
//	admin_group = "netdev"                # group name or gid allowed to change ports besides root;
//	                                      # default none. A name must exist when the file is read.
//	                                      # The socket's group is set to it (so "0660" admits only
//	                                      # root and the group).
//	state_dir   = "/var/lib/manad"        # absolute; holds state.json
//	log_level   = "info"                  # debug, info, warn or error
//	log_format  = "text"                  # text or json
//	metrics_listen = "127.0.0.1:9469"     # host:port of a Prometheus /metrics endpoint; default
//	                                      # "" (none). Anyone who can reach it may read it.
//	max_connections = 256                 # connections served at once, 1..65536. Root is never
//	                                      # refused; the last 1/8 is kept for root and admin_group
//	max_connections_per_uid = 32          # connections of one non-root uid, 1..65536
//	idle_timeout = "5m"                   # close a connection with no request for this long and
//	                                      # no multicast group joined; 1s..24h
//	busy_poll = "200us"                   # after answering, poll for the next request this long
//	                                      # before parking (as busy_read); "0" (none)..1ms
//	max_pollers = 1                       # port queues that may busy-poll at once (their NAPI
//	                                      # settings), 0..the CPUs manad may use but one;
//	                                      # default 1 with two CPUs or more, 0 on one
//
//	[[port]]
//	name          = "mana0"      # required; the TAP netdev's name: 1-15 bytes, no '/', ':' or
//	                             # whitespace; unique in the file
//	mac           = "02:…"       # unicast EUI-48; default: locally administered, derived from
//	                             # the name (the same on every start); unique in the file
//	mtu           = 1500         # 68..max_mtu (default 1500, or max_mtu if lower)
//	max_mtu       = 9000         # 68..65535: the adapter's limit
//	page_size     = "4K"         # 4096, 16384, 65536 or "4K", "16K", "64K": the host page size
//	                             # the RX buffer layout models (x86 or ARM64 kernels)
//	queues        = 16           # combined channels, 1..max_queues (default 16, or max_queues)
//	max_queues    = 64           # 1..256
//	speed         = 0            # link speed the port reports (ethtool DEV), Mb/s; 0 = unknown
//	                             # ("Speed: Unknown!"), as mana without a hardware-reported speed
//	msix_vectors  = 0            # MSI-X vectors the adapter can use: one is the hardware
//	                             # channel's, one per queue, so at most msix_vectors-1 queues
//	                             # (mana_gd_query_max_resources); 2..257, 0 = enough
//	rx_ring       = 1024         # 128..8192, rounded up to a power of two as the driver does
//	tx_ring       = 256          # 128..16384, likewise
//	priv_flags    = []           # private flag names: "full-page-rx"
//	xdp           = ""           # built-in XDP program: "pass", "drop", "tx", "aborted"; its
//	                             # MTU limit applies (3506 on 4K pages)
//	rule          = "upstream"   # RX buffer rule: "upstream", "pre-headroom" or "pre-frag"
//	memory_budget = "2GiB"       # RX memory cap: bytes, or a number with K/KiB, M/MiB, G/GiB,
//	                             # T/TiB (binary), or "unlimited"
//	rx_alloc      = "page-pool-frag"
//	                             # what-if: how RX buffers are allocated: "page-pool-frag" (the
//	                             # rule's choice), "page-pool-page" (a page-pool page per buffer)
//	                             # or "no-pool" (every buffer allocated and freed by itself, the
//	                             # pre-page-pool baseline)
//	rx_recycle    = true         # what-if: false releases RX pages instead of recycling them (the
//	                             # pre-recycling driver); no-pool never recycles
//	segment       = "default"    # wire segment (learning L2 switch) to plug into; ports on one
//	                             # segment reach each other. 1-64 of [A-Za-z0-9._-]
//	netns         = ""           # named network namespace (/run/netns/NAME) for the TAP; "" is
//	                             # manad's own. manad creates it if missing, like `ip netns add`,
//	                             # and deletes it only for `manactl port del --netns-too`
//	persistent    = true         # the TAP outlives manad, keeping addresses and routes; manad
//	                             # re-attaches to it on restart
//	offload       = true         # the TAP carries virtio headers: the kernel hands manad TCP/UDP
//	                             # superframes and partial checksums, manad segments and
//	                             # completes them (and coalesces what it delivers); false: plain
//	                             # frames, every offload off on the TAP
//	rx_cqe_frames = 1            # packets one RX CQE may carry (ethtool -C rx-cqe-frames): 1
//	                             # (no CQE coalescing) or 4, or 8 with cqe_coalesce_8
//	cqe_coalesce_8 = false       # the vport has MANA_CQE_COAL_PKTS_8: rx-cqe-frames may be 8
//	napi_defer_hard_irqs = 0     # every queue's NAPI defer-hard-irqs, as the kernel's sysfs
//	                             # knob of that name: 0..2147483647 (napi-set per NAPI at runtime)
//	gro_flush_timeout = "0"      # every queue's NAPI gro-flush-timeout: a duration ("20us") or
//	                             # nanoseconds (an integer, as sysfs); not negative
//	irq_suspend_timeout = "0"    # every queue's NAPI irq-suspend-timeout, likewise
//	napi_threaded = false        # every queue's NAPI threaded, as the kernel's sysfs threaded
//	                             # (kept and reported; manad's data path does not use it)
//
//	[[segment]]                  # optional: settings and uplinks of a segment ports name;
//	                             # at most 1024 tables (and segments defined at runtime with
//	                             # them); at most 1024 ports on a segment, as a Linux bridge
//	name        = "wire0"        # required; the segment's name, as in a port's segment key
//	uplinks     = [{dev = "vx0", netns = "hostA"}]  # existing kernel netdevs (VXLAN, Geneve,
//	                             # a veth into a bridge, a NIC) joined with AF_PACKET; at most 16;
//	                             # an entry's attach = "af_packet" (default) | "af_xdp" | "auto"
//	                             # (AF_XDP where the device offers AF_XDP zero-copy, else
//	                             # AF_PACKET)
//	mtu         = 1450           # 68..65535: larger frames are not sent out of the uplinks
//	                             # (dropped and counted); default each uplink device's own MTU
//	ageing_time = 300            # seconds, or a duration string ("5m"); 0 never forgets
//	storm_pps   = 0              # frames flooded per second (broadcast, unknown unicast); 0 no limit
//
// Every problem, syntax or semantic, is reported as "FILE:LINE: message", for example
//
//	manad.toml:12: port "eth0": page_size 8192 not supported (want 4096, 16384 or 65536, or "4K", "16K", "64K")
//
// and Parse reports all of a file's problems at once (Errors). BurntSushi/toml does not tell
// where the keys of the second and later [[port]] tables are, so a small scanner (locate.go)
// walks the accepted text again to find each key's line.
//
// Without a file the daemon uses the embedded default (Default, default.toml): ports mana0 and
// mana1 on segment wire0, in namespaces manaA and manaB, ready for a ping between the two.
//
// # State file
//
// STATE_DIR/state.json is JSON:
//
//	{
//	  "version": 1,
//	  "ports": {
//	    "mana0": {"settings": {"mtu": 1500, "queues": 4, "rx_ring": 1024, "tx_ring": 256,
//	              "priv_flags": ["full-page-rx"], "xdp": "", "admin_up": true,
//	              "coalesce": {"rx_usecs": 0, "rx_frames": 0, "tx_usecs": 0, "tx_frames": 0,
//	                           "adaptive_rx": false, "adaptive_tx": false, "rx_cqe_frames": 4},
//	              "offload": true, "rss_key": "6d5a56da…"}},
//	    "mana7": {"spec": {"name": "mana7", "mac": "02:…", …}, "settings": {…}}
//	  },
//	  "deleted": ["mana1"],
//	  "netns_created": {"manaA": 4026532321}
//	}
//
// "ports" holds every port's runtime settings (ethtool -G, -L, --set-priv-flags, -C, -K and the
// RSS hash key of -X; not the indirection table, which mana rewrites on every attach; "coalesce",
// "offload" and "rss_key" are absent from files of older manads and then come from the
// configuration), and for a port created at runtime also its full spec, under the [[port]]
// keys with the same values (bytes for memory_budget, -1 for unlimited; nanoseconds for the
// NAPI timeouts; a key an older file lacks takes its default, and its rx_no_recycle is read
// as the opposite of rx_recycle); "netns_created" the
// named namespaces manad created, with their nsfs inode (State.NetNS); "deleted" lists the
// configuration's ports deleted at runtime. State.Save writes it atomically (temporary file in
// the same directory, fsync, rename, fsync of the directory), so a kill -9 at any moment leaves
// the old or the new state. LoadState treats a missing file as an empty state and a corrupt one
// as an error (EBADMSG) naming the file; the daemon then keeps it as state.json.bad-<time>
// (SetAsideState) and starts from the configuration. A file of a newer version, or one with a
// key this manad does not know (a newer manad's field), is an error of its own (ErrStateNewer):
// the daemon refuses to start and leaves it be; so it does for a file that is not a regular
// file of at most MaxStateSize bytes (ErrStateFile: a FIFO, a symbolic link, a directory, a
// huge file), which LoadState neither blocks on nor reads without bound. Reserve and
// Reservation.Commit split a save in two, so that the daemon refuses a change whose state a
// read-only or full directory could not take before it applies it. Merge combines the
// configuration with the state into the ports to create: the state's settings win, ports deleted
// at runtime stay deleted, ports created at runtime come back.
package config
