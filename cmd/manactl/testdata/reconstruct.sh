#!/bin/sh
# reconstruct.sh writes testdata/ethtool-6.15/*: what ethtool 6.15 prints for values that no
# device here can show (a manad port's rings, channels and private flags; rings with every
# field; several private flags), by running ethtool's own format strings through printf(1), in
# ethtool's order:
#   netlink/rings.c     rings_reply_cb   (show_u32: "%s%u\n" or "%sn/a\n"; show_bool "%s" on/off/n/a)
#   netlink/channels.c  channels_reply_cb
#   netlink/privflags.c privflags_reply_cb ("%-*s: %s\n", maxlen = longest name)
#   ethtool.c           do_gstats        ("     %.*s: %llu\n"; printf(1) has no %llu, the values are given as text)
#   netlink/monitor.c   nl_monitor       ("listening...\n", then a blank line before each block)
# The installed ethtool is 6.1, whose -g layout is older (see ethtool-6.1/virtio-rings.txt).
set -eu
out=ethtool-6.15
mkdir -p "$out"

u32() { printf '%b%u\n' "$1" "$2"; }  # show_u32 with the attribute present (%b: the label's \t)
na()  { printf '%bn/a\n' "$1"; }      # show_u32 with the attribute absent

# A manad port: mana_get_ringparam gives rx_max 8192, tx_max 16384 (no mini/jumbo, buf len,
# CQE size, push buffers or HDS), tx/rx push off, TCP data split unknown.
{
	printf 'Ring parameters for %s:\n' mana0
	printf 'Pre-set maximums:\n'
	u32 'RX:\t\t\t' 8192; na 'RX Mini:\t\t'; na 'RX Jumbo:\t\t'; u32 'TX:\t\t\t' 16384
	na 'TX push buff len:\t'; na 'HDS thresh:\t\t'
	printf 'Current hardware settings:\n'
	u32 'RX:\t\t\t' 1024; na 'RX Mini:\t\t'; na 'RX Jumbo:\t\t'; u32 'TX:\t\t\t' 256
	na 'RX Buf Len:\t\t'; na 'CQE Size:\t\t'
	printf 'TX Push:\t\t%s\n' off; printf 'RX Push:\t\t%s\n' off
	na 'TX push buff len:\t'
	printf 'TCP data split:\t\t%s\n' n/a
	na 'HDS thresh:\t\t'
} >"$out/manad-rings.txt"

# Every field the client decodes present: mini/jumbo rings, buffer length, CQE size, TCP data
# split on (2), TX push on.
{
	printf 'Ring parameters for %s:\n' eth9
	printf 'Pre-set maximums:\n'
	u32 'RX:\t\t\t' 4096; u32 'RX Mini:\t\t' 512; u32 'RX Jumbo:\t\t' 1024; u32 'TX:\t\t\t' 8192
	na 'TX push buff len:\t'; na 'HDS thresh:\t\t'
	printf 'Current hardware settings:\n'
	u32 'RX:\t\t\t' 2048; u32 'RX Mini:\t\t' 0; u32 'RX Jumbo:\t\t' 256; u32 'TX:\t\t\t' 1024
	u32 'RX Buf Len:\t\t' 2048; u32 'CQE Size:\t\t' 128
	printf 'TX Push:\t\t%s\n' on; printf 'RX Push:\t\t%s\n' off
	na 'TX push buff len:\t'
	printf 'TCP data split:\t\t%s\n' on
	na 'HDS thresh:\t\t'
} >"$out/full-rings.txt"

# A manad port's channels: combined only (mana_get_channels), max 64, current 4.
{
	printf 'Channel parameters for %s:\n' mana0
	printf 'Pre-set maximums:\n'
	na 'RX:\t\t'; na 'TX:\t\t'; na 'Other:\t\t'; u32 'Combined:\t' 64
	printf 'Current hardware settings:\n'
	na 'RX:\t\t'; na 'TX:\t\t'; na 'Other:\t\t'; u32 'Combined:\t' 4
} >"$out/manad-channels.txt"

# A manad port's private flags (mana_priv_flags: one flag).
{
	printf 'Private flags for %s:\n' mana0
	printf '%-*s: %s\n' 12 full-page-rx on
} >"$out/manad-privflags-on.txt"
{
	printf 'Private flags for %s:\n' mana0
	printf '%-*s: %s\n' 12 full-page-rx off
} >"$out/manad-privflags-off.txt"

# Several flags of different lengths, and a bit without a name ("bit%u"): maxlen is 19.
{
	printf 'Private flags for %s:\n' eth9
	printf '%-*s: %s\n' 19 rx_cqe_moder on
	printf '%-*s: %s\n' 19 rx_striding_rq off
	printf '%-*s: %s\n' 19 rx_no_csum_complete off
	printf '%-*s: %s\n' 19 bit3 on
} >"$out/multi-privflags.txt"

# ethtool --monitor seeing a manad port's private flags change.
{
	printf 'listening...\n'
	printf '\n'
	printf 'Private flags for %s:\n' mana0
	printf '%-*s: %s\n' 12 full-page-rx on
} >"$out/manad-monitor-privflags.txt"

# -S of a manad port: the first eth counters, then per-queue ones (do_gstats).
{
	printf 'NIC statistics:\n'
	printf '     %.*s: %s\n' 32 stop_queue 0
	printf '     %.*s: %s\n' 32 wake_queue 3
	printf '     %.*s: %s\n' 32 rx_0_packets 18446744073709551615
	printf '     %.*s: %s\n' 32 a_statistic_name_longer_than_32_bytes 7
} >"$out/manad-stats.txt"
