package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic/rxbuf"
)

// The text formats of the ethtool-family commands are ethtool 6.15's, byte for byte (its
// netlink/privflags.c, rings.c, channels.c and ethtool.c:do_gstats). The manad-only commands have
// formats of their own.

// writePrivFlags is `ethtool --show-priv-flags` (netlink/privflags.c: privflags_reply_cb):
// "Private flags for DEV:" then printf("%-*s: %s\n", maxlen, name, on|off) per flag in bitset
// order, maxlen being the longest name; a bit without a name prints as "bit<index>".
func writePrivFlags(w io.Writer, dev string, flags []client.Flag) {
	names := make([]string, len(flags))
	maxlen := 0
	for i, f := range flags {
		names[i] = f.Name
		if names[i] == "" {
			names[i] = fmt.Sprintf("bit%d", f.Index)
		}
		maxlen = max(maxlen, len(names[i]))
	}
	fmt.Fprintf(w, "Private flags for %s:\n", dev)
	for i, f := range flags {
		fmt.Fprintf(w, "%-*s: %s\n", maxlen, names[i], onOff(f.On))
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// u32Shown is v as an attribute that is sent only when non-zero (nil: absent). client.Rings and
// client.Channels zero the attributes a reply lacked, and the kernel (rings_fill_reply,
// channels_fill_reply) and manad send each max/current pair, RX_BUF_LEN, TCP_DATA_SPLIT and
// CQE_SIZE only when non-zero, so zero means absent; TX_PUSH and RX_PUSH are always sent.
// TX_PUSH_BUF_LEN(_MAX) and HDS_THRESH(_MAX) come in pairs, only from drivers that support them
// (no manad port does), and are shown when the maximum is non-zero.
func u32Shown(v uint32) *uint32 {
	if v == 0 {
		return nil
	}
	return &v
}

// showU32 is ethtool's show_u32 in text mode: "%s%u\n", or "%sn/a\n" for an absent attribute.
func showU32(w io.Writer, label string, v *uint32) {
	if v == nil {
		fmt.Fprintf(w, "%sn/a\n", label)
		return
	}
	fmt.Fprintf(w, "%s%d\n", label, *v)
}

// pairShown returns max and current of a pair that is sent only when max is non-zero.
func pairShown(maxV, cur uint32) (*uint32, *uint32) {
	if maxV == 0 {
		return nil, nil
	}
	return &maxV, &cur
}

// writeRings is `ethtool -g` (netlink/rings.c: rings_reply_cb, ethtool 6.15).
func writeRings(w io.Writer, dev string, r wire.Rings) {
	rxMax, rx := pairShown(r.RxMax, r.Rx)
	miniMax, mini := pairShown(r.RxMiniMax, r.RxMini)
	jumboMax, jumbo := pairShown(r.RxJumboMax, r.RxJumbo)
	txMax, tx := pairShown(r.TxMax, r.Tx)
	pushMax, push := pairShown(r.TxPushBufLenMax, r.TxPushBufLen)
	hdsMax, hds := pairShown(r.HDSThreshMax, r.HDSThresh)
	fmt.Fprintf(w, "Ring parameters for %s:\n", dev)
	fmt.Fprintf(w, "Pre-set maximums:\n")
	showU32(w, "RX:\t\t\t", rxMax)
	showU32(w, "RX Mini:\t\t", miniMax)
	showU32(w, "RX Jumbo:\t\t", jumboMax)
	showU32(w, "TX:\t\t\t", txMax)
	showU32(w, "TX push buff len:\t", pushMax)
	showU32(w, "HDS thresh:\t\t", hdsMax)
	fmt.Fprintf(w, "Current hardware settings:\n")
	showU32(w, "RX:\t\t\t", rx)
	showU32(w, "RX Mini:\t\t", mini)
	showU32(w, "RX Jumbo:\t\t", jumbo)
	showU32(w, "TX:\t\t\t", tx)
	showU32(w, "RX Buf Len:\t\t", u32Shown(r.RxBufLen))
	showU32(w, "CQE Size:\t\t", u32Shown(r.CQESize))
	fmt.Fprintf(w, "TX Push:\t\t%s\n", onOff(r.TxPush))
	fmt.Fprintf(w, "RX Push:\t\t%s\n", onOff(r.RxPush))
	showU32(w, "TX push buff len:\t", push)
	fmt.Fprintf(w, "TCP data split:\t\t%s\n", tcpDataSplitText(r.TCPDataSplit))
	showU32(w, "HDS thresh:\t\t", hds)
}

// tcpDataSplitText is rings_reply_cb's switch on ETHTOOL_A_RINGS_TCP_DATA_SPLIT, including its
// "unknown(%d)\n" buffer that the format's own "\n" follows.
func tcpDataSplitText(v uint8) string {
	switch v {
	case 0:
		return "n/a"
	case 1:
		return "off"
	case 2:
		return "on"
	}
	return fmt.Sprintf("unknown(%d)\n", v)
}

// writeChannels is `ethtool -l` (netlink/channels.c: channels_reply_cb).
func writeChannels(w io.Writer, dev string, ch wire.Channels) {
	rxMax, rx := pairShown(ch.RxMax, ch.Rx)
	txMax, tx := pairShown(ch.TxMax, ch.Tx)
	otherMax, other := pairShown(ch.OtherMax, ch.Other)
	combMax, comb := pairShown(ch.CombinedMax, ch.Combined)
	fmt.Fprintf(w, "Channel parameters for %s:\n", dev)
	fmt.Fprintf(w, "Pre-set maximums:\n")
	showU32(w, "RX:\t\t", rxMax)
	showU32(w, "TX:\t\t", txMax)
	showU32(w, "Other:\t\t", otherMax)
	showU32(w, "Combined:\t", combMax)
	fmt.Fprintf(w, "Current hardware settings:\n")
	showU32(w, "RX:\t\t", rx)
	showU32(w, "TX:\t\t", tx)
	showU32(w, "Other:\t\t", other)
	showU32(w, "Combined:\t", comb)
}

// writeStats is `ethtool -S` (ethtool.c: do_gstats): "NIC statistics:" then
// "     %.*s: %llu\n" per statistic, the name cut at ETH_GSTRING_LEN (32) bytes.
func writeStats(w io.Writer, stats []wire.Stat) {
	fmt.Fprintf(w, "NIC statistics:\n")
	for _, s := range stats {
		name := s.Name
		if len(name) > 32 {
			name = name[:32]
		}
		fmt.Fprintf(w, "     %s: %d\n", name, s.Value)
	}
}

// stringSetNames are the ETH_SS_* ids (enum ethtool_stringset) as show-strings names them: the
// constant's name in lower case with dashes.
var stringSetNames = []string{
	"test", "stats", "priv-flags", "ntuple-filters", "features", "rss-hash-funcs", "tunables",
	"phy-stats", "phy-tunables", "link-modes", "msg-classes", "wol-modes", "sof-timestamping",
	"ts-tx-types", "ts-rx-filters", "udp-tunnel-types", "stats-std", "stats-eth-phy",
	"stats-eth-mac", "stats-eth-ctrl", "stats-rmon", "stats-phy", "ts-flags",
}

// stringSetName is set id's name, or its number for an id newer than stringSetNames.
func stringSetName(id uint32) string {
	if int(id) < len(stringSetNames) {
		return stringSetNames[id]
	}
	return fmt.Sprint(id)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// writeStringSets is show-strings (ethtool has no such output): per set
// "String set NAME (ID) for DEV: N strings" and "     INDEX: STRING" lines, sets separated by
// a blank line.
func writeStringSets(w io.Writer, dev string, sets []client.StringSet) {
	for i, s := range sets {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "String set %s (%d) for %s: %s\n", stringSetName(s.ID), s.ID, dev, plural(s.Count, "string", "strings"))
		for j, str := range s.Strings {
			fmt.Fprintf(w, "     %d: %s\n", j, str)
		}
	}
	if len(sets) == 0 {
		fmt.Fprintf(w, "No string sets for %s\n", dev)
	}
}

// pageSizeText is 4096 → "4K".
func pageSizeText(b uint32) string {
	if b != 0 && b%1024 == 0 {
		return fmt.Sprintf("%dK", b/1024)
	}
	return fmt.Sprint(b)
}

// portState is a port's state word for list: "up" or "down", plus ",detached" while its queues
// are torn down and ",reset-pending" while its reset work is scheduled.
func portState(p wire.PortInfo) string {
	s := "down"
	if p.AdminUp {
		s = "up"
	}
	if p.Detached {
		s += ",detached"
	}
	if p.ResetPending {
		s += ",reset-pending"
	}
	return s
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writePorts is list: one line per port under a header.
func writePorts(w io.Writer, ports []wire.PortInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNETNS\tSTATE\tMTU\tPAGE\tQUEUES\tRINGS\tFLAGS\tXDP")
	for _, p := range ports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d/%d\t%d/%d\t%s\t%s\n",
			p.Device.Name, dashIfEmpty(p.NetNSName), portState(p), p.MTU, pageSizeText(p.PageSize),
			p.Queues, p.MaxQueues, p.RxRing, p.TxRing,
			dashIfEmpty(strings.Join(p.PrivFlagNames, ",")), dashIfEmpty(p.XDP))
	}
	tw.Flush()
}

// bytesText is a byte count with its binary-unit rendering when that is shorter: 16777216 →
// "16777216 (16 MiB)".
func bytesText(n uint64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), ""
	for _, unit := range units {
		if v < 1024 {
			break
		}
		v, u = v/1024, unit
	}
	if u == "" {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%s %s)", n, strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), "."), u)
}

// layoutMode is "single buffer per page" or "page-pool fragments, N per page".
func layoutMode(l wire.RxBufLayout) string {
	if l.Single {
		return "single buffer per page"
	}
	return fmt.Sprintf("page-pool fragments, %d per page", l.FragCount)
}

// writeRxBuf is show-rxbuf: the port's live RX buffer layout, why it is in that mode, and the
// memory its rings pin.
func writeRxBuf(w io.Writer, p wire.PortInfo) {
	l := p.Layout
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(w, "RX buffer layout for %s:\n", p.Device.Name)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	row("Mode", layoutMode(l))
	row("Why", l.Reason)
	row("Rule", l.Rule)
	row("Page size", l.PageSize)
	row("MTU", l.MTU)
	row("XDP", onOff(l.XDP))
	row("full-page-rx", onOff(l.FullPageRx))
	row("Datasize", l.DataSize)
	row("Alloc size", l.AllocSize)
	row("Headroom", l.Headroom)
	row("Buffer size", l.BufSize)
	row("Buffers per page", l.FragCount)
	row("Page order", l.Order)
	row("Page pool size", l.PoolSize)
	row("Ring size", l.RingSize)
	row("Queues", l.Queues)
	row("Pages per queue", l.PagesPerQueue)
	row("Bytes per queue", bytesText(l.BytesPerQueue))
	row("Bytes total", bytesText(l.BytesTotal))
	row("Pages pinned now", p.PagesPinned)
	row("Bytes pinned now", bytesText(p.BytesPinned))
	row("Buffers in flight", p.BuffersInFlight)
	// The frames ip_forward would pskb_expand_head out of a MANA port (seed 002): non-zero only
	// under a rule that reserves less than LL_RESERVED_SPACE.
	row("Short headroom", fmt.Sprintf("%d frames (headroom < %d, LL_RESERVED_SPACE)", p.RxShortHeadroom, rxbuf.LLReservedSpace))
	tw.Flush()
}

// writePlan is rxbuf-plan: the layouts of one set of parameters under several rules, side by
// side, then why each rule chose its mode.
func writePlan(w io.Writer, r wire.LayoutRequest, ls []wire.RxBufLayout) {
	ring, queues := r.RingSize, r.Queues
	if len(ls) > 0 {
		ring, queues = ls[0].RingSize, ls[0].Queues
	}
	fmt.Fprintf(w, "RX buffer layouts for page size %d, MTU %d, XDP %s, full-page-rx %s, %s x %s:\n",
		r.PageSize, r.MTU, onOff(r.XDP), onOff(r.FullPageRx),
		plural(int(ring), "buffer", "buffers"), plural(int(queues), "queue", "queues"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k string, f func(l wire.RxBufLayout) any) {
		fmt.Fprint(tw, k)
		for _, l := range ls {
			fmt.Fprintf(tw, "\t%v", f(l))
		}
		fmt.Fprintln(tw)
	}
	row("", func(l wire.RxBufLayout) any { return l.Rule })
	row("Mode", func(l wire.RxBufLayout) any {
		if l.Single {
			return "single"
		}
		return "fragments"
	})
	row("Datasize", func(l wire.RxBufLayout) any { return l.DataSize })
	row("Alloc size", func(l wire.RxBufLayout) any { return l.AllocSize })
	row("Headroom", func(l wire.RxBufLayout) any { return l.Headroom })
	row("Buffer size", func(l wire.RxBufLayout) any { return l.BufSize })
	row("Buffers per page", func(l wire.RxBufLayout) any { return l.FragCount })
	row("Page order", func(l wire.RxBufLayout) any { return l.Order })
	row("Page pool size", func(l wire.RxBufLayout) any { return l.PoolSize })
	row("Pages per queue", func(l wire.RxBufLayout) any { return l.PagesPerQueue })
	row("Bytes per queue", func(l wire.RxBufLayout) any { return l.BytesPerQueue })
	row("Bytes total", func(l wire.RxBufLayout) any { return l.BytesTotal })
	tw.Flush()
	fmt.Fprintln(w, "Why:")
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, l := range ls {
		fmt.Fprintf(tw, "  %s:\t%s\n", l.Rule, l.Reason)
	}
	tw.Flush()
}

// writePortEvent is how monitor prints a manad port notification (ethtool has none): a blank
// line, then "Port DEV added|removed|changed:" and the port's list line.
func writePortEvent(w io.Writer, kind client.NotificationKind, p wire.PortInfo) {
	what := map[client.NotificationKind]string{
		client.PortAdded: "added", client.PortRemoved: "removed", client.PortChanged: "changed",
	}[kind]
	fmt.Fprintf(w, "\nPort %s %s:\n", p.Device.Name, what)
	fmt.Fprintf(w, "netns %s, %s, MTU %d, page size %s, queues %d/%d, rings %d/%d, flags %s, XDP %s\n",
		dashIfEmpty(p.NetNSName), portState(p), p.MTU, pageSizeText(p.PageSize), p.Queues, p.MaxQueues,
		p.RxRing, p.TxRing, dashIfEmpty(strings.Join(p.PrivFlagNames, ",")), dashIfEmpty(p.XDP))
}
