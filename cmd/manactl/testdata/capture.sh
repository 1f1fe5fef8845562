#!/bin/sh
# capture.sh regenerates testdata/ethtool-6.1/*: real output of the installed ethtool (Debian 12's
# ethtool 6.1) for kernel devices whose values the golden tests feed to manactl's formatters.
# Needs root, iproute2 and ethtool; run it from this directory. The virtio capture needs a
# virtio_net eth0 (it is only read). Everything else lives in a throw-away namespace.
set -eu
out=ethtool-6.1
ns=mctlcap$$
mkdir -p "$out"
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
x() { ip netns exec "$ns" "$@"; }

# veth: channels RX/TX only (max = numrx/numtxqueues), no rings, no private flags.
x ip link add va type veth peer name vb numrxqueues 4 numtxqueues 4
x ethtool -L vb rx 3 tx 2
x ethtool -l vb >"$out/veth-channels.txt"
# The same change seen by ethtool --monitor (line-buffered so that the kill loses nothing).
x stdbuf -oL ethtool --monitor >"$out/veth-monitor.txt" 2>&1 &
mon=$!
sleep 0.5
x ethtool -L vb rx 1 tx 4
sleep 0.5
kill "$mon"
wait "$mon" 2>/dev/null || true
# Errors: extack message + offset, then perror; and an op the driver lacks (no extack).
x ethtool -L vb rx 5 2>"$out/veth-set-channels-rx5.stderr" || echo "exit $?" >>"$out/veth-set-channels-rx5.stderr"
x ethtool -g vb 2>"$out/veth-rings.stderr" || echo "exit $?" >>"$out/veth-rings.stderr"

# TAP: combined channels only, max 1, current 0 (the shape of a manad port's channels).
x ip tuntap add dev t0 mode tap
x ethtool -l t0 >"$out/tap-channels.txt"

# ifb: four driver statistics, all 0 on a new device (ethtool -S is the ioctl path).
x ip link add i0 type ifb
x ethtool -S i0 >"$out/ifb-stats.txt"

# virtio_net rings, ethtool 6.1's older -g layout (fewer tabs, no RX Push / HDS lines).
if ethtool -i eth0 2>/dev/null | grep -q '^driver: virtio_net'; then
	ethtool -g eth0 >"$out/virtio-rings.txt"
fi
ethtool --version >"$out/VERSION"
