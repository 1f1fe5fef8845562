package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
)

// BenchmarkGetRoundTrip measures, for every GET that manad serves (each ethtool GET, the manad
// family's PORT_GET and the netdev family's dev-get, queue-get, qstats-get and page-pool-get),
// the round trip of one request to the real manad binary (built without the race detector,
// started in its own namespace, over its Unix socket) and of the same message — the same bytes
// but for the device — to the kernel, through the same client code (mdlayher/genetlink, over
// genl/client's Unix transport for manad). Each iteration sends one of each, the order
// alternating every iteration, so both see the same machine. Reported: manad-p50-ns,
// kernel-p50-ns and p50-ratio (manad over kernel). manad runs with its default busy_poll and
// genl/client polls for its reply (genl/busypoll), as for any client in a request loop: the
// kernel's GET answers inside the sending system call, where two processes that both park
// pay two wake-ups per round trip.
//
// The kernel's peer device is a veth with manad's port's 16 queues, up, with GRO on (so that
// it has page pools); for STRSET_GET (statistics) a second veth whose queue counts give exactly
// as many statistics strings as the manad port has. Where veth does not implement the message
// (ring parameters, coalescing, RSS, private flags, queue statistics) the first device of the
// benchmark's own namespace whose kernel driver answers it is the peer (kernel-host-device 1),
// and when none does, veth's EOPNOTSUPP answer is (kernel-eopnotsupp 1: a round trip that skips
// the driver). No driver here registers its page pools with the netdev family, so the kernel's
// page-pool dump would be empty: page-pool-get's peer is the veth's napi-get dump instead, 16
// messages for its 16 RX queues as the port's 16 pools (kernel-napi-dump 1, see benchNAPIDump).
// Any other kernel dump that finds nothing to list is reported as kernel-empty-dump 1. The
// kernel has no manad family: PORT_GET's peer is rtnetlink's RTM_GETLINK of the veth, the
// kernel's own "show this port".
func BenchmarkGetRoundTrip(b *testing.B) {
	bin, _ := harness.PlainBinaries(b)
	ns, vethNS := harness.Name("mbr", ""), harness.Name("mbv", "")
	port := harness.Name("mr", "0")
	d := harness.StartBinary(b, bin, "", "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"rt\"\n", port, ns), ns)
	harness.Run(b, ns, "ip", "link", "set", port, "up") // an up port has page pools
	harness.Run(b, "", "ip", "netns", "add", vethNS)
	b.Cleanup(func() { harness.RunErr("", "ip", "netns", "del", vethNS) })
	ctx := context.Background()

	tc := d.Client(ns)
	mp, err := tc.Port(ctx, client.Interface{Name: port})
	require.NoError(b, err)
	stats, err := tc.StringSet(ctx, client.Interface{Name: port}, ethSSStats)
	require.NoError(b, err)
	// The veth peer: as many queues as the port, up, GRO on.
	q := strconv.Itoa(int(mp.Queues))
	harness.Run(b, vethNS, "ip", "link", "add", "rt0", "numrxqueues", q, "numtxqueues", q, "type", "veth",
		"peer", "name", "rt1", "numrxqueues", q, "numtxqueues", q)
	// The STRSET peer: veth_get_sset_count is 1 + 7 per RX queue + 2 per TX queue.
	rxq, txq := vethQueuesFor(len(stats))
	harness.Run(b, vethNS, "ip", "link", "add", "rs0", "numrxqueues", strconv.Itoa(rxq), "numtxqueues", strconv.Itoa(txq),
		"type", "veth", "peer", "name", "rs1")
	var kc *client.Client
	require.NoError(b, harness.InNetNS(vethNS, func() (err error) { kc, err = client.DialKernel(); return err }))
	b.Cleanup(func() { kc.Close() })
	_, err = kc.SetFeatures(ctx, client.Interface{Name: "rt0"}, map[string]bool{"rx-gro": true})
	require.NoError(b, err)
	harness.Run(b, vethNS, "ip", "link", "set", "rt0", "up")
	harness.Run(b, vethNS, "ip", "link", "set", "rt1", "up")
	ks, err := kc.StringSet(ctx, client.Interface{Name: "rs0"}, ethSSStats)
	require.NoError(b, err, "STRSET peer: veth with %d RX and %d TX queues has %d statistics strings (%v), manad's port %d", rxq, txq, len(ks), err, len(stats))
	require.Len(b, ks, len(stats), "STRSET peer: veth with %d RX and %d TX queues has %d statistics strings (%v), manad's port %d", rxq, txq, len(ks), err, len(stats))

	manad := dialPeer(b, ns, func() (*genetlink.Conn, error) { return client.DialGenetlink(d.Socket) })
	veth := dialPeer(b, vethNS, func() (*genetlink.Conn, error) { return genetlink.Dial(&netlink.Config{Strict: true}) })
	host := dialPeer(b, "", func() (*genetlink.Conn, error) { return genetlink.Dial(&netlink.Config{Strict: true}) })
	mdev := benchDev{index: mp.Device.Index, name: port}
	vdev := benchDev{index: uint32(ifindexIn(b, vethNS, "rt0")), name: "rt0"}
	sdev := benchDev{index: uint32(ifindexIn(b, vethNS, "rs0")), name: "rs0"}
	var hostDevs []benchDev
	ifs, err := net.Interfaces()
	require.NoError(b, err)
	for _, i := range ifs {
		hostDevs = append(hostDevs, benchDev{index: uint32(i.Index), name: i.Name})
	}

	for _, g := range benchGets {
		b.Run(g.name, func(b *testing.B) {
			m := func() error { return manad.get(g, mdev) }
			mn, err := manad.replies(g, mdev)
			require.NoError(b, err)
			k, how, kn := kernelPeer(b, g, veth, vdev, sdev, host, hostDevs)
			if g.dump {
				b.Logf("%s dump: manad %d messages, kernel %d", g.name, mn, kn)
			}
			for range 50 { // warm up both paths
				require.NoError(b, errors.Join(m(), k()))
			}
			var tm, tk []time.Duration
			timed := func(f func() error, into *[]time.Duration) {
				t0 := time.Now()
				require.NoError(b, f())
				*into = append(*into, time.Since(t0))
			}
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					timed(m, &tm)
					timed(k, &tk)
				} else {
					timed(k, &tk)
					timed(m, &tm)
				}
				i++
			}
			pm, pk := p50(tm), p50(tk)
			b.ReportMetric(float64(pm.Nanoseconds()), "manad-p50-ns")
			b.ReportMetric(float64(pk.Nanoseconds()), "kernel-p50-ns")
			b.ReportMetric(float64(pm)/float64(pk), "p50-ratio")
			switch how {
			case peerEOPNOTSUPP:
				b.ReportMetric(1, "kernel-eopnotsupp")
			case peerHost:
				b.ReportMetric(1, "kernel-host-device")
			case peerOther:
				b.ReportMetric(1, "kernel-napi-dump")
			}
			if g.dump && kn == 0 && mn > 0 {
				b.ReportMetric(1, "kernel-empty-dump") // nothing of the kind here for the kernel to list
			}
		})
	}
}

// benchGet is one GET message of BenchmarkGetRoundTrip.
type benchGet struct {
	name   string // the sub-benchmark, named after the message
	family string
	cmd    uint8
	dump   bool
	attrs  func(ae *netlink.AttributeEncoder, d benchDev)
	strset bool // the kernel's peer is the veth sized for the statistics strings
	// rtnl is the kernel's peer message when the kernel has no such family (PORT_GET).
	rtnl bool
	// kernel, when set, is the kernel's peer message instead of the same one: for a dump the
	// kernel can answer only with nothing here (page-pool-get), a dump of the same device's
	// objects of another kind, as many messages of about the same size.
	kernel *benchGet
}

// benchDev names a device to one server.
type benchDev struct {
	index uint32
	name  string
}

// ethHeader puts an ethtool request header naming d, with flags.
func ethHeader(t uint16, flags uint32) func(*netlink.AttributeEncoder, benchDev) {
	return func(ae *netlink.AttributeEncoder, d benchDev) {
		ae.Nested(t, func(n *netlink.AttributeEncoder) error {
			n.String(unix.ETHTOOL_A_HEADER_DEV_NAME, d.name)
			if flags != 0 {
				n.Uint32(unix.ETHTOOL_A_HEADER_FLAGS, flags)
			}
			return nil
		})
	}
}

// Attribute numbers x/sys does not name: ETHTOOL_A_STATS_HEADER and ETHTOOL_A_STATS_GROUPS,
// ETHTOOL_A_RSS_HEADER.
const (
	benchStatsHeader = 2
	benchStatsGroups = 3
)

var benchGets = []benchGet{
	{name: "CHANNELS_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_CHANNELS_GET, attrs: ethHeader(unix.ETHTOOL_A_CHANNELS_HEADER, 0)},
	{name: "STRSET_GET-stats", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_STRSET_GET, strset: true,
		attrs: func(ae *netlink.AttributeEncoder, d benchDev) {
			ethHeader(unix.ETHTOOL_A_STRSET_HEADER, 0)(ae, d)
			ae.Nested(unix.ETHTOOL_A_STRSET_STRINGSETS, func(n *netlink.AttributeEncoder) error {
				n.Nested(unix.ETHTOOL_A_STRINGSETS_STRINGSET, func(s *netlink.AttributeEncoder) error {
					s.Uint32(unix.ETHTOOL_A_STRINGSET_ID, ethSSStats)
					return nil
				})
				return nil
			})
		}},
	{name: "RINGS_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_RINGS_GET, attrs: ethHeader(unix.ETHTOOL_A_RINGS_HEADER, 0)},
	{name: "PRIVFLAGS_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET, attrs: ethHeader(unix.ETHTOOL_A_PRIVFLAGS_HEADER, 0)},
	{name: "LINKINFO_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_LINKINFO_GET, attrs: ethHeader(unix.ETHTOOL_A_LINKINFO_HEADER, 0)},
	{name: "LINKMODES_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_LINKMODES_GET, attrs: ethHeader(unix.ETHTOOL_A_LINKMODES_HEADER, 0)},
	{name: "LINKSTATE_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_LINKSTATE_GET, attrs: ethHeader(unix.ETHTOOL_A_LINKSTATE_HEADER, 0)},
	// Compact bitsets, as ethtool asks for them.
	{name: "FEATURES_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_FEATURES_GET,
		attrs: ethHeader(unix.ETHTOOL_A_FEATURES_HEADER, unix.ETHTOOL_FLAG_COMPACT_BITSETS)},
	{name: "COALESCE_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_COALESCE_GET, attrs: ethHeader(unix.ETHTOOL_A_COALESCE_HEADER, 0)},
	{name: "RSS_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_RSS_GET, attrs: ethHeader(wire.RSSHeader, 0)},
	{name: "TSINFO_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_TSINFO_GET, attrs: ethHeader(unix.ETHTOOL_A_TSINFO_HEADER, 0)},
	// The four standard groups (eth-phy, eth-mac, eth-ctrl, rmon) as a compact bitset.
	{name: "STATS_GET", family: ethtool.FamilyName, cmd: unix.ETHTOOL_MSG_STATS_GET,
		attrs: func(ae *netlink.AttributeEncoder, d benchDev) {
			ethHeader(benchStatsHeader, 0)(ae, d)
			ae.Nested(benchStatsGroups, func(n *netlink.AttributeEncoder) error {
				n.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
				n.Uint32(unix.ETHTOOL_A_BITSET_SIZE, 4)
				n.Bytes(unix.ETHTOOL_A_BITSET_VALUE, []byte{0xf, 0, 0, 0})
				return nil
			})
		}},
	{name: "PORT_GET", family: wire.FamilyName, cmd: wire.CmdPortGet, rtnl: true,
		attrs: func(ae *netlink.AttributeEncoder, d benchDev) {
			ae.Nested(wire.AttrHeader, func(n *netlink.AttributeEncoder) error {
				n.String(unix.ETHTOOL_A_HEADER_DEV_NAME, d.name)
				return nil
			})
		}},
	{name: "netdev-dev-get", family: wire.NetdevFamilyName, cmd: wire.NetdevCmdDevGet,
		attrs: func(ae *netlink.AttributeEncoder, d benchDev) { ae.Uint32(wire.NetdevADevIfindex, d.index) }},
	{name: "netdev-queue-get", family: wire.NetdevFamilyName, cmd: wire.NetdevCmdQueueGet,
		attrs: func(ae *netlink.AttributeEncoder, d benchDev) {
			ae.Uint32(wire.NetdevAQueueIfindex, d.index)
			ae.Uint32(wire.NetdevAQueueType, wire.NetdevQueueTypeRX)
			ae.Uint32(wire.NetdevAQueueID, 0)
		}},
	// qstats-get and page-pool-get are dumps (qstats-get has no do); the device's totals, and
	// every pool of the namespace (16: one per RX queue; the kernel's peer is benchNAPIDump).
	{name: "netdev-qstats-get", family: wire.NetdevFamilyName, cmd: wire.NetdevCmdQStatsGet, dump: true,
		attrs: func(ae *netlink.AttributeEncoder, d benchDev) { ae.Uint32(wire.NetdevAQStatsIfindex, d.index) }},
	{name: "netdev-page-pool-get", family: wire.NetdevFamilyName, cmd: wire.NetdevCmdPagePoolGet, dump: true,
		attrs: func(ae *netlink.AttributeEncoder, d benchDev) {}, kernel: &benchNAPIDump},
}

// benchNAPIDump is page-pool-get's kernel peer: no driver here lists page pools with the netdev
// family (veth's have no netdev: page_pool_list skips them), so the kernel's page-pool dump is
// empty. napi-get of the veth lists the NAPIs of its 16 RX queues, one message each, as the
// port's page-pool dump lists the pools of its 16: netdev_nl_napi_get_dumpit walks the device's
// objects and fills a message of a few attributes per object (id, ifindex, and the NAPI's
// settings), as netdev_nl_page_pool_get_dumpit does its pools (id, ifindex, napi-id, inflight,
// inflight-mem).
var benchNAPIDump = benchGet{name: "netdev-napi-get", family: wire.NetdevFamilyName, cmd: wire.NetdevCmdNAPIGet, dump: true,
	attrs: func(ae *netlink.AttributeEncoder, d benchDev) { ae.Uint32(wire.NetdevANAPIIfindex, d.index) }}

// benchPeer is a generic netlink connection to manad or to the kernel in one namespace, with
// the families it resolved.
type benchPeer struct {
	c    *genetlink.Conn
	ns   string
	fams map[string]genetlink.Family
}

func dialPeer(b *testing.B, ns string, dial func() (*genetlink.Conn, error)) *benchPeer {
	p := &benchPeer{ns: ns, fams: map[string]genetlink.Family{}}
	require.NoError(b, harness.InNetNS(ns, func() (err error) { p.c, err = dial(); return err }))
	b.Cleanup(func() { p.c.Close() })
	for _, name := range []string{ethtool.FamilyName, wire.FamilyName, wire.NetdevFamilyName} {
		if f, err := p.c.GetFamily(name); err == nil {
			p.fams[name] = f
		}
	}
	return p
}

// get sends g for d and waits for its answer: nil, or the error it carried.
func (p *benchPeer) get(g benchGet, d benchDev) error {
	_, err := p.replies(g, d)
	return err
}

// replies sends g for d and returns how many messages answered it.
func (p *benchPeer) replies(g benchGet, d benchDev) (int, error) {
	f, ok := p.fams[g.family]
	if !ok {
		return 0, fmt.Errorf("%s: no %q family: %w", g.name, g.family, unix.ENOENT)
	}
	ae := netlink.NewAttributeEncoder()
	g.attrs(ae, d)
	data, err := ae.Encode()
	if err != nil {
		return 0, err
	}
	flags := netlink.Request
	if g.dump {
		flags |= netlink.Dump
	}
	msgs, err := p.c.Execute(genetlink.Message{Header: genetlink.Header{Command: g.cmd, Version: f.Version}, Data: data}, f.ID, flags)
	if err == nil && len(msgs) == 0 && !g.dump {
		err = fmt.Errorf("%s: no reply", g.name)
	}
	return len(msgs), err
}

// How the kernel's peer answers a message.
const (
	peerVeth       = iota // the veth answers it
	peerHost              // a device of the benchmark's namespace does, veth does not
	peerEOPNOTSUPP        // no device here implements it: veth's EOPNOTSUPP is the peer
	peerOther             // veth answers g.kernel, another message (benchGet.kernel)
)

// kernelPeer returns the kernel's round trip for g, which peer answers it, and with how many
// messages.
func kernelPeer(b *testing.B, g benchGet, veth *benchPeer, vdev, sdev benchDev, host *benchPeer, hostDevs []benchDev) (func() error, int, int) {
	if g.rtnl {
		rc := dialRTNL(b, veth.ns)
		return func() error { return getLink(rc, vdev.name) }, peerVeth, 1
	}
	if g.kernel != nil {
		n, err := veth.replies(*g.kernel, vdev)
		require.NoError(b, err, "kernel %s peer %s on veth: %d messages, %v", g.name, g.kernel.name, n, err)
		require.NotEqual(b, 0, n, "kernel %s peer %s on veth: %d messages, %v", g.name, g.kernel.name, n, err)
		b.Logf("kernel peer of %s: %s of veth, %d messages", g.name, g.kernel.name, n)
		return func() error { return veth.get(*g.kernel, vdev) }, peerOther, n
	}
	dev := vdev
	if g.strset {
		dev = sdev
	}
	n, err := veth.replies(g, dev)
	if err == nil {
		return func() error { return veth.get(g, dev) }, peerVeth, n
	}
	require.ErrorIs(b, err, unix.EOPNOTSUPP, "kernel %s on veth", g.name)
	for _, hd := range hostDevs {
		if n, err := host.replies(g, hd); err == nil {
			b.Logf("kernel peer of %s: %s (veth answers EOPNOTSUPP)", g.name, hd.name)
			return func() error { return host.get(g, hd) }, peerHost, n
		}
	}
	return func() error {
		if err := veth.get(g, dev); !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("want EOPNOTSUPP from veth, got %v", err)
		}
		return nil
	}, peerEOPNOTSUPP, 0
}

// dialRTNL opens an rtnetlink socket in ns.
func dialRTNL(b *testing.B, ns string) *netlink.Conn {
	var c *netlink.Conn
	require.NoError(b, harness.InNetNS(ns, func() (err error) {
		c, err = netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{Strict: true})
		return err
	}))
	b.Cleanup(func() { c.Close() })
	return c
}

// getLink is RTM_GETLINK of the device named name (what `ip link show NAME` sends).
func getLink(c *netlink.Conn, name string) error {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.IFLA_IFNAME, name)
	ae.Uint32(unix.IFLA_EXT_MASK, rtextFilterVF)
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	ifi := make([]byte, unix.SizeofIfInfomsg)
	ifi[0] = unix.AF_UNSPEC
	msgs, err := c.Execute(netlink.Message{Header: netlink.Header{Type: unix.RTM_GETLINK, Flags: netlink.Request},
		Data: append(ifi, attrs...)})
	if err == nil && len(msgs) != 1 {
		err = fmt.Errorf("RTM_GETLINK %s: %d replies", name, len(msgs))
	}
	return err
}

// rtextFilterVF is RTEXT_FILTER_VF, the extension mask iproute2 sends (x/sys does not name it).
const rtextFilterVF = 1

// ifindexIn returns the ifindex of name in namespace ns.
func ifindexIn(b *testing.B, ns, name string) int {
	var idx int
	require.NoError(b, harness.InNetNS(ns, func() error {
		i, err := net.InterfaceByName(name)
		if err == nil {
			idx = i.Index
		}
		return err
	}))
	return idx
}

// vethQueuesFor returns RX and TX queue counts that give a veth n statistics strings
// (veth_get_sset_count: 1 + 7 per RX queue + 2 per TX queue), or the nearest below.
func vethQueuesFor(n int) (rx, tx int) {
	rx = max((n-3)/7, 1)
	if (n-1-7*rx)%2 != 0 {
		rx--
	}
	return max(rx, 1), max((n-1-7*rx)/2, 1)
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// ethSSStats is ETH_SS_STATS, the statistics string set (golang.org/x/sys/unix does not name it).
const ethSSStats = 1
