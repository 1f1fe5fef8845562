package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/internal/jsonobj"
)

// JSON output (--json). Field names are stable and documented in doc.go. As ethtool --json does,
// every show command prints an array (one element per device); the ring and channel objects use
// ethtool 6.15's own keys (netlink/rings.c, channels.c) and leave out what ethtool leaves out
// (attributes the device did not report), so that `jq '.[0].rx'` works on either tool's output.
// Keys are kebab-case throughout.

// writeJSON prints v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// privFlagJSON is one private flag.
type privFlagJSON struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	On    bool   `json:"on"`
}

// privFlagsJSON is show-priv-flags.
type privFlagsJSON struct {
	IfName string         `json:"ifname"`
	Flags  []privFlagJSON `json:"flags"`
}

func privFlagsToJSON(dev string, flags []client.Flag) privFlagsJSON {
	out := privFlagsJSON{IfName: dev, Flags: []privFlagJSON{}}
	for _, f := range flags {
		out.Flags = append(out.Flags, privFlagJSON{Name: f.Name, Index: f.Index, On: f.On})
	}
	return out
}

// ringsJSON is show-ring, with ethtool 6.15's keys and order.
type ringsJSON struct {
	IfName          string  `json:"ifname"`
	RxMax           *uint32 `json:"rx-max,omitempty"`
	RxMiniMax       *uint32 `json:"rx-mini-max,omitempty"`
	RxJumboMax      *uint32 `json:"rx-jumbo-max,omitempty"`
	TxMax           *uint32 `json:"tx-max,omitempty"`
	Rx              *uint32 `json:"rx,omitempty"`
	RxMini          *uint32 `json:"rx-mini,omitempty"`
	RxJumbo         *uint32 `json:"rx-jumbo,omitempty"`
	Tx              *uint32 `json:"tx,omitempty"`
	RxBufLen        *uint32 `json:"rx-buf-len,omitempty"`
	CQESize         *uint32 `json:"cqe-size,omitempty"`
	TxPush          bool    `json:"tx-push"`
	RxPush          bool    `json:"rx-push"`
	TxPushBufLenMax *uint32 `json:"tx-push-buf-len-max,omitempty"`
	TxPushBufLen    *uint32 `json:"tx-push-buf-len,omitempty"`
	TCPDataSplit    string  `json:"tcp-data-split,omitempty"`
	HDSThresh       *uint32 `json:"hds-thresh,omitempty"`
	HDSThreshMax    *uint32 `json:"hds-thresh-max,omitempty"`
}

func ringsToJSON(dev string, r wire.Rings) ringsJSON {
	out := ringsJSON{IfName: dev, TxPush: r.TxPush, RxPush: r.RxPush,
		RxBufLen: u32Shown(r.RxBufLen), CQESize: u32Shown(r.CQESize)}
	out.RxMax, out.Rx = pairShown(r.RxMax, r.Rx)
	out.RxMiniMax, out.RxMini = pairShown(r.RxMiniMax, r.RxMini)
	out.RxJumboMax, out.RxJumbo = pairShown(r.RxJumboMax, r.RxJumbo)
	out.TxMax, out.Tx = pairShown(r.TxMax, r.Tx)
	out.TxPushBufLenMax, out.TxPushBufLen = pairShown(r.TxPushBufLenMax, r.TxPushBufLen)
	out.HDSThreshMax, out.HDSThresh = pairShown(r.HDSThreshMax, r.HDSThresh)
	switch r.TCPDataSplit {
	case 0: // ethtool prints "n/a" in text mode only
	case 1, 2:
		out.TCPDataSplit = tcpDataSplitText(r.TCPDataSplit)
	default:
		out.TCPDataSplit = "unknown(" + strconv.Itoa(int(r.TCPDataSplit)) + ")"
	}
	return out
}

// channelsJSON is show-channels, with ethtool's keys and order.
type channelsJSON struct {
	IfName      string  `json:"ifname"`
	RxMax       *uint32 `json:"rx-max,omitempty"`
	TxMax       *uint32 `json:"tx-max,omitempty"`
	OtherMax    *uint32 `json:"other-max,omitempty"`
	CombinedMax *uint32 `json:"combined-max,omitempty"`
	Rx          *uint32 `json:"rx,omitempty"`
	Tx          *uint32 `json:"tx,omitempty"`
	Other       *uint32 `json:"other,omitempty"`
	Combined    *uint32 `json:"combined,omitempty"`
}

func channelsToJSON(dev string, ch wire.Channels) channelsJSON {
	out := channelsJSON{IfName: dev}
	out.RxMax, out.Rx = pairShown(ch.RxMax, ch.Rx)
	out.TxMax, out.Tx = pairShown(ch.TxMax, ch.Tx)
	out.OtherMax, out.Other = pairShown(ch.OtherMax, ch.Other)
	out.CombinedMax, out.Combined = pairShown(ch.CombinedMax, ch.Combined)
	return out
}

// orderedStats is a JSON object whose keys are the statistics in driver order (encoding/json
// would sort a map's keys).
type orderedStats []wire.Stat

// MarshalJSON writes {"name": value, …} in slice order.
func (s orderedStats) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, st := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(st.Name)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(st.Value, 10))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// statsJSON is stats.
type statsJSON struct {
	IfName     string       `json:"ifname"`
	Statistics orderedStats `json:"statistics"`
}

// stringSetJSON is one string set of show-strings.
type stringSetJSON struct {
	ID      uint32   `json:"id"`
	Name    string   `json:"name"`
	Count   int      `json:"count"`
	Strings []string `json:"strings"`
}

// stringSetsJSON is show-strings.
type stringSetsJSON struct {
	IfName     string          `json:"ifname"`
	StringSets []stringSetJSON `json:"string-sets"`
}

func stringSetsToJSON(dev string, sets []client.StringSet) stringSetsJSON {
	out := stringSetsJSON{IfName: dev, StringSets: []stringSetJSON{}}
	for _, s := range sets {
		strs := s.Strings
		if strs == nil {
			strs = []string{}
		}
		out.StringSets = append(out.StringSets, stringSetJSON{ID: s.ID, Name: stringSetName(s.ID), Count: s.Count, Strings: strs})
	}
	return out
}

// faultJSON is an armed fault.
type faultJSON struct {
	Point string `json:"point"`
	Mode  string `json:"mode"`
	Count uint32 `json:"count"`
	Errno uint32 `json:"errno"`
}

// portJSON is one port of list (and of port add, and of monitor's port events): every
// attribute of the reply that wire.PortKeys shows, under its key, in the rows' order.
type portJSON struct{ p wire.PortInfo }

func portToJSON(p wire.PortInfo) portJSON { return portJSON{p} }

// MarshalJSON writes the shown attributes in wire.PortKeys' order (encoding/json would sort a
// map's keys). Errors: an attribute whose type portValueJSON does not know.
func (j portJSON) MarshalJSON() ([]byte, error) {
	var o jsonobj.Object
	for i := range wire.PortKeys {
		k := &wire.PortKeys[i]
		if !k.Shown() {
			continue
		}
		v, err := portValueJSON(k.Info(&j.p))
		if err != nil {
			return nil, fmt.Errorf("port attribute %d (%s): %w", k.Attr, k.Key, err)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		o.Add(k.Key, raw)
	}
	return o.Bytes(), nil
}

// portValueJSON is how the port JSON shows a reply's field (p points to it, see
// wire.PortKey.Info): numbers, strings and booleans as they are, a MAC and the RSS key as
// text, lists as arrays (empty, not null), faults and coalescing as objects. Errors: a type
// not listed here.
func portValueJSON(p any) (any, error) {
	switch v := p.(type) {
	case *uint32:
		return *v, nil
	case *uint64:
		return *v, nil
	case *string:
		return *v, nil
	case *bool:
		return *v, nil
	case *net.HardwareAddr:
		return v.String(), nil
	case *[]string:
		return append([]string{}, *v...), nil
	case *[]byte:
		return hexKey(*v), nil
	case *[]wire.Fault:
		out := []faultJSON{}
		for _, f := range *v {
			out = append(out, faultJSON(f))
		}
		return out, nil
	case *wire.Coalesce:
		return portCoalesceJSON{RxUsecs: v.RxUsecs, RxFrames: v.RxMaxFrames, TxUsecs: v.TxUsecs,
			TxFrames: v.TxMaxFrames, AdaptiveRx: v.AdaptiveRx, AdaptiveTx: v.AdaptiveTx,
			RxCQEFrames: v.RxCQEFrames, RxCQENsecs: v.RxCQENsecs}, nil
	}
	return nil, fmt.Errorf("no JSON form for %T", p)
}

// portCoalesceJSON is a port's coalescing, with show-coalesce's (ethtool's) keys.
type portCoalesceJSON struct {
	RxUsecs     uint32 `json:"rx-usecs"`
	RxFrames    uint32 `json:"rx-frames"`
	TxUsecs     uint32 `json:"tx-usecs"`
	TxFrames    uint32 `json:"tx-frames"`
	AdaptiveRx  bool   `json:"adaptive-rx"`
	AdaptiveTx  bool   `json:"adaptive-tx"`
	RxCQEFrames uint32 `json:"rx-cqe-frames"`
	RxCQENsecs  uint32 `json:"rx-cqe-nsecs"`
}

// portDelJSON is port del --netns-too.
type portDelJSON struct {
	IfName       string `json:"ifname"`
	NetNS        string `json:"netns"`
	NetNSDeleted bool   `json:"netns-deleted"`
	Notice       string `json:"notice"`
}

// layoutJSON is an RX buffer layout (show-rxbuf, rxbuf-plan).
type layoutJSON struct {
	Rule          string `json:"rule"`
	PageSize      uint32 `json:"page-size"`
	MTU           uint32 `json:"mtu"`
	XDP           bool   `json:"xdp"`
	FullPageRx    bool   `json:"full-page-rx"`
	Mode          string `json:"mode"`
	Reason        string `json:"reason"`
	DataSize      uint32 `json:"datasize"`
	AllocSize     uint32 `json:"alloc-size"`
	Headroom      uint32 `json:"headroom"`
	BufSize       uint32 `json:"buf-size"`
	FragCount     uint32 `json:"frag-count"`
	Order         uint32 `json:"order"`
	PoolSize      uint32 `json:"pool-size"`
	RingSize      uint32 `json:"ring-size"`
	Queues        uint32 `json:"queues"`
	PagesPerQueue uint32 `json:"pages-per-queue"`
	BytesPerQueue uint64 `json:"bytes-per-queue"`
	BytesTotal    uint64 `json:"bytes-total"`
}

func layoutToJSON(l wire.RxBufLayout) layoutJSON {
	mode := "fragments"
	if l.Single {
		mode = "single"
	}
	return layoutJSON{
		Rule: l.Rule, PageSize: l.PageSize, MTU: l.MTU, XDP: l.XDP, FullPageRx: l.FullPageRx,
		Mode: mode, Reason: l.Reason, DataSize: l.DataSize, AllocSize: l.AllocSize,
		Headroom: l.Headroom, BufSize: l.BufSize, FragCount: l.FragCount, Order: l.Order,
		PoolSize: l.PoolSize, RingSize: l.RingSize, Queues: l.Queues,
		PagesPerQueue: l.PagesPerQueue, BytesPerQueue: l.BytesPerQueue, BytesTotal: l.BytesTotal,
	}
}

// rxBufJSON is show-rxbuf.
type rxBufJSON struct {
	IfName          string     `json:"ifname"`
	Layout          layoutJSON `json:"layout"`
	PagesPinned     uint64     `json:"pages-pinned"`
	BytesPinned     uint64     `json:"bytes-pinned"`
	BuffersInFlight uint64     `json:"buffers-in-flight"`
	RxShortHeadroom uint64     `json:"rx-short-headroom"`
}

func rxBufToJSON(p wire.PortInfo) rxBufJSON {
	return rxBufJSON{IfName: p.Device.Name, Layout: layoutToJSON(p.Layout), PagesPinned: p.PagesPinned,
		BytesPinned: p.BytesPinned, BuffersInFlight: p.BuffersInFlight, RxShortHeadroom: p.RxShortHeadroom}
}

// eventJSON is one monitor notification (one JSON object per line). Exactly one of the payload
// fields is present, according to kind: "privflags", "rings", "channels", "port-new",
// "port-del" or "port-change"; with monitor --netdev also "dev-add", "dev-del", "dev-change"
// (dev) and "page-pool-add", "page-pool-change", "page-pool-del" (page-pool).
type eventJSON struct {
	Kind         string         `json:"kind"`
	Seq          uint32         `json:"seq"`
	IfName       string         `json:"ifname"`
	IfIndex      int            `json:"ifindex"`
	PrivateFlags *privFlagsJSON `json:"priv-flags,omitempty"`
	Rings        *ringsJSON     `json:"rings,omitempty"`
	Channels     *channelsJSON  `json:"channels,omitempty"`
	Port         *portJSON      `json:"port,omitempty"`
	NetdevDev    *netdevDevJSON `json:"dev,omitempty"`
	PagePool     *pagePoolJSON  `json:"page-pool,omitempty"`
	Segment      *segmentJSON   `json:"segment,omitempty"`
	Coalesce     *coalesceJSON  `json:"coalesce,omitempty"`
	RSS          *rssJSON       `json:"rss,omitempty"`
}

func eventToJSON(n client.Notification) eventJSON {
	e := eventJSON{Kind: n.Kind.String(), Seq: n.Sequence, IfName: n.Interface.Name, IfIndex: n.Interface.Index}
	switch {
	case n.PrivateFlags != nil:
		v := privFlagsToJSON(n.Interface.Name, n.PrivateFlags.Flags)
		e.PrivateFlags = &v
	case n.Rings != nil:
		v := ringsToJSON(n.Interface.Name, n.Rings.Rings)
		e.Rings = &v
	case n.Channels != nil:
		v := channelsToJSON(n.Interface.Name, n.Channels.Channels)
		e.Channels = &v
	case n.Port != nil:
		v := portToJSON(*n.Port)
		e.Port = &v
	case n.NetdevDev != nil, n.PagePool != nil:
		netdevEventToJSON(n, &e)
	case n.Segment != nil:
		v := segmentToJSON(*n.Segment)
		e.Segment = &v
	case n.Coalesce != nil:
		e.Coalesce = &coalesceJSON{dev: n.Interface.Name, co: n.Coalesce}
	case n.RSS != nil:
		v := rssToJSON(n.Interface.Name, n.RSS)
		e.RSS = &v
	}
	return e
}
