package reliability

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/xdp/xdptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
)

// badInputRig is manad with two ports (nsA, nsB) and an empty namespace nsE, where no port
// lives, for the bad-input tests.
type badInputRig struct {
	*rig
	nsA, nsB, nsE string
	portA         string
	indexA        uint32
	fams          families
	ethtool       familyInfo
	manad         familyInfo
	netdev        familyInfo
}

func startBadInputRig(t *testing.T) *badInputRig {
	t.Helper()
	b := &badInputRig{nsA: harness.Name("rbia", ""), nsB: harness.Name("rbib", ""), nsE: harness.Name("rbie", "")}
	b.portA = harness.Name("rbi", "a")
	ports := []portDef{
		{name: b.portA, ns: b.nsA, segment: "rbi", ip: "10.211.0.1"},
		{name: harness.Name("rbi", "b"), ns: b.nsB, segment: "rbi", ip: "10.211.0.2"},
	}
	b.rig = startRig(t, openDir(t), "", ports, b.nsE) // nobody must reach the socket
	harness.Run(t, "", "ip", "netns", "add", b.nsE)
	b.indexA = portInfo(t, b.clients[b.nsA], b.portA).Device.Index

	c := b.dial(t, b.nsA, 0)
	defer c.Close()
	var err error
	if b.ethtool, err = c.resolveFamily("ethtool", 1); err != nil {
		t.Fatal(err)
	}
	if b.manad, err = c.resolveFamily("manad", 2); err != nil {
		t.Fatal(err)
	}
	ctrl, err := c.resolveFamily("nlctrl", 3)
	require.NoError(t, err)
	netdev, err := c.resolveFamily("netdev", 4)
	require.NoError(t, err)
	b.netdev = netdev
	b.fams = families{}
	for name, f := range map[string]familyInfo{"ethtool": b.ethtool, "manad": b.manad, "nlctrl": ctrl, "netdev": netdev} {
		b.fams[f.ID] = struct {
			name string
			info familyInfo
		}{name, f}
	}
	return b
}

// dial opens a raw connection from namespace ns as uid (0 or nobody).
func (b *badInputRig) dial(t testing.TB, ns string, uid uint32) *rawConn {
	t.Helper()
	var c *rawConn
	err := asUser(ns, uid, uid, nil, func() (err error) {
		c, err = dialRaw(b.d.Socket)
		return err
	})
	require.NoError(t, err)
	c.manadID = b.manad.ID
	return c
}

// corpus returns valid requests for every command of the four families (capture aside: its
// frames are unsolicited answers the checker does not expect), addressed to port
// name/index (some by name, some by index, some by both), each with a distinct seq.
func (b *badInputRig) corpus(name string, index uint32, obj []byte) [][]byte {
	eth, man := b.ethtool.ID, b.manad.ID
	seq := uint32(1000)
	next := func() uint32 { seq++; return seq }
	byName := func(t uint16) []byte { return nest(t, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, name)) }
	byIndex := func(t uint16) []byte { return nest(t, u32a(unix.ETHTOOL_A_HEADER_DEV_INDEX, index)) }
	both := func(t uint16) []byte {
		return nest(t, u32a(unix.ETHTOOL_A_HEADER_DEV_INDEX, index), strA(unix.ETHTOOL_A_HEADER_DEV_NAME, name))
	}
	req := func(fam, flags uint16, cmd uint8, attrs ...[]byte) []byte {
		return genlmsg(fam, fRequest|flags, next(), cmd, 1, attrs...)
	}
	strsets := nest(unix.ETHTOOL_A_STRSET_STRINGSETS,
		nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET, u32a(unix.ETHTOOL_A_STRINGSET_ID, ethtool.SSStats)),
		nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET, u32a(unix.ETHTOOL_A_STRINGSET_ID, ethtool.SSPrivFlags)))
	verbose := nest(unix.ETHTOOL_A_PRIVFLAGS_FLAGS, nest(unix.ETHTOOL_A_BITSET_BITS,
		nest(unix.ETHTOOL_A_BITSET_BITS_BIT, strA(unix.ETHTOOL_A_BITSET_BIT_NAME, "full-page-rx"), flagA(unix.ETHTOOL_A_BITSET_BIT_VALUE))))
	compact := nest(unix.ETHTOOL_A_PRIVFLAGS_FLAGS, u32a(unix.ETHTOOL_A_BITSET_SIZE, 1),
		attr(unix.ETHTOOL_A_BITSET_VALUE, []byte{1, 0, 0, 0}), attr(unix.ETHTOOL_A_BITSET_MASK, []byte{1, 0, 0, 0}))
	mhdr := byName(wire.AttrHeader)
	base := [][]byte{
		req(nlctrlID, 0, unix.CTRL_CMD_GETFAMILY, strA(unix.CTRL_ATTR_FAMILY_NAME, "ethtool")),
		req(nlctrlID, 0, unix.CTRL_CMD_GETFAMILY, u16a(unix.CTRL_ATTR_FAMILY_ID, man)),
		req(nlctrlID, fDump, unix.CTRL_CMD_GETFAMILY),
		req(eth, 0, unix.ETHTOOL_MSG_STRSET_GET, byName(unix.ETHTOOL_A_STRSET_HEADER), strsets),
		req(eth, fDump, unix.ETHTOOL_MSG_STRSET_GET, flagA(unix.ETHTOOL_A_STRSET_COUNTS_ONLY)),
		req(eth, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, byIndex(unix.ETHTOOL_A_PRIVFLAGS_HEADER)),
		req(eth, fDump, unix.ETHTOOL_MSG_PRIVFLAGS_GET),
		req(eth, fAck, unix.ETHTOOL_MSG_PRIVFLAGS_SET, byName(unix.ETHTOOL_A_PRIVFLAGS_HEADER), verbose),
		req(eth, fAck, unix.ETHTOOL_MSG_PRIVFLAGS_SET, both(unix.ETHTOOL_A_PRIVFLAGS_HEADER), compact),
		req(eth, 0, unix.ETHTOOL_MSG_RINGS_GET, both(unix.ETHTOOL_A_RINGS_HEADER)),
		req(eth, fAck, unix.ETHTOOL_MSG_RINGS_SET, byName(unix.ETHTOOL_A_RINGS_HEADER), u32a(unix.ETHTOOL_A_RINGS_RX, 256), u32a(unix.ETHTOOL_A_RINGS_TX, 256)),
		req(eth, 0, unix.ETHTOOL_MSG_CHANNELS_GET, byName(unix.ETHTOOL_A_CHANNELS_HEADER)),
		req(eth, fDump, unix.ETHTOOL_MSG_CHANNELS_GET),
		req(eth, fAck, unix.ETHTOOL_MSG_CHANNELS_SET, byIndex(unix.ETHTOOL_A_CHANNELS_HEADER), u32a(unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT, 2)),
		req(man, 0, wire.CmdPortGet, mhdr),
		req(man, fDump, wire.CmdPortGet),
		req(man, 0, wire.CmdStatsGet, both(wire.AttrHeader)),
		req(man, fDump, wire.CmdStatsGet),
		req(man, 0, wire.CmdLayoutPlan, nest(wire.AttrLayoutRequest, u32a(wire.LayoutAttrPageSize, 16384), u32a(wire.LayoutAttrMTU, 1500),
			u32a(wire.LayoutAttrRingSize, 128), u32a(wire.LayoutAttrQueues, 4), u8a(wire.LayoutAttrXDP, 0), u8a(wire.LayoutAttrFullPageRx, 1),
			strA(wire.LayoutAttrRule, "upstream"), strA(wire.LayoutAttrRule, "pre-frag"))),
		req(man, fAck, wire.CmdPortSetMTU, mhdr, u32a(wire.AttrMTU, 1400)),
		req(man, fAck, wire.CmdXDPAttach, mhdr, nest(wire.AttrXDP, strA(wire.XDPAttrBuiltin, "drop"))),
		req(man, fAck, wire.CmdXDPAttach, byIndex(wire.AttrHeader), nest(wire.AttrXDP, strA(wire.XDPAttrSection, "xdp"), strA(wire.XDPAttrName, "p")),
			attr(wire.AttrXDPObject, obj)),
		req(man, fAck, wire.CmdXDPDetach, mhdr),
		req(man, fAck, wire.CmdFaultSet, mhdr, nest(wire.AttrFault, strA(wire.FaultAttrPoint, "attach"), strA(wire.FaultAttrMode, "count"),
			u32a(wire.FaultAttrCount, 2))),
		req(man, fAck, wire.CmdPortDel, mhdr),
		req(man, fAck, wire.CmdPortNew, nest(wire.AttrPort, strA(wire.PortAttrDevName, "rbizz"), attr(wire.PortAttrMAC, []byte{2, 0, 0, 0x7a, 0x7a, 1}),
			strA(wire.PortAttrNetNS, b.nsE), u32a(wire.PortAttrQueues, 1))),
		req(man, fAck, wire.CmdGroupJoin, u32a(wire.AttrGroup, 3)),
		req(man, fAck, wire.CmdGroupLeave, u32a(wire.AttrGroup, 3)),
		req(man, fAck, wire.CmdSetOption, u32a(wire.AttrOption, unix.NETLINK_EXT_ACK), u8a(wire.AttrOptionValue, 1)),

		// The rest of the ethtool surface, the netdev family and the segment commands.
		req(eth, 0, unix.ETHTOOL_MSG_LINKINFO_GET, byName(unix.ETHTOOL_A_LINKINFO_HEADER)),
		req(eth, fDump, unix.ETHTOOL_MSG_LINKMODES_GET),
		req(eth, 0, unix.ETHTOOL_MSG_LINKSTATE_GET, byIndex(unix.ETHTOOL_A_LINKSTATE_HEADER)),
		req(eth, 0, unix.ETHTOOL_MSG_TSINFO_GET, byName(unix.ETHTOOL_A_TSINFO_HEADER)),
		req(eth, 0, unix.ETHTOOL_MSG_FEATURES_GET, both(unix.ETHTOOL_A_FEATURES_HEADER)),
		req(eth, fAck, unix.ETHTOOL_MSG_FEATURES_SET, byName(unix.ETHTOOL_A_FEATURES_HEADER),
			nest(unix.ETHTOOL_A_FEATURES_WANTED, nest(unix.ETHTOOL_A_BITSET_BITS, nest(unix.ETHTOOL_A_BITSET_BITS_BIT,
				strA(unix.ETHTOOL_A_BITSET_BIT_NAME, "rx-gro"), flagA(unix.ETHTOOL_A_BITSET_BIT_VALUE))))),
		req(eth, 0, unix.ETHTOOL_MSG_COALESCE_GET, byName(unix.ETHTOOL_A_COALESCE_HEADER)),
		req(eth, fAck, unix.ETHTOOL_MSG_COALESCE_SET, byIndex(unix.ETHTOOL_A_COALESCE_HEADER), u32a(unix.ETHTOOL_A_COALESCE_RX_USECS, 0)),
		req(eth, 0, unix.ETHTOOL_MSG_RSS_GET, byName(wire.RSSHeader)),
		req(eth, fAck, wire.MsgRSSSet, byName(wire.RSSHeader), attr(wire.RSSHKey, make([]byte, 40))),
		req(eth, 0, unix.ETHTOOL_MSG_STATS_GET, byName(wire.StatsHeader)),
		req(b.netdev.ID, 0, wire.NetdevCmdDevGet, u32a(wire.NetdevADevIfindex, index)),
		req(b.netdev.ID, fDump, wire.NetdevCmdQueueGet, u32a(wire.NetdevAQueueIfindex, index)),
		req(b.netdev.ID, fDump, wire.NetdevCmdQStatsGet),
		req(b.netdev.ID, fDump, wire.NetdevCmdPagePoolGet),
		req(man, fDump, wire.CmdSegmentGet),
		req(man, 0, wire.CmdSegmentGet, nest(wire.AttrSegment, strA(wire.SegmentAttrName, "rbi"))),
		req(man, fAck, wire.CmdSegmentNew, nest(wire.AttrSegment, strA(wire.SegmentAttrName, "rbiseg"), u32a(wire.SegmentAttrMTU, 1400))),
		req(man, fAck, wire.CmdUplinkAdd, nest(wire.AttrSegment, strA(wire.SegmentAttrName, "rbiseg")),
			nest(wire.AttrUplink, strA(wire.UplinkAttrDev, "lo"), strA(wire.UplinkAttrNetNS, b.nsE))),
	}
	return base
}

// mutate applies 1 to 4 random mutations to a copy of d. It never duplicates a message, so the
// messages of a datagram keep distinct seqs (see checkAnswers).
func mutate(rng *rand.Rand, d []byte) []byte {
	b := bytes.Clone(d)
	interesting16 := []uint16{0, 1, 3, 4, 5, 8, 0x7fff, 0x8000, 0xffff, nlaNested | 1, nlaNested | 2}
	interesting32 := []uint32{0, 1, 4, 16, 20, 0x7fffffff, 0x80000000, 0xffffffff, 1 << 16, uint32(len(d)), uint32(len(d)) + 4}
	for n := 1 + rng.IntN(4); n > 0; n-- {
		if len(b) == 0 {
			b = append(b, byte(rng.Uint32()))
		}
		switch rng.IntN(11) {
		case 0: // flip a bit
			i := rng.IntN(len(b))
			b[i] ^= 1 << rng.IntN(8)
		case 1: // a random byte
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		case 2: // an interesting 16-bit value (attribute lengths and types live here)
			if len(b) >= 2 {
				i := rng.IntN(len(b) - 1)
				ne.PutUint16(b[i:], interesting16[rng.IntN(len(interesting16))])
			}
		case 3: // an interesting 32-bit value
			if len(b) >= 4 {
				i := rng.IntN(len(b) - 3)
				ne.PutUint32(b[i:], interesting32[rng.IntN(len(interesting32))])
			}
		case 4: // truncate
			b = b[:rng.IntN(len(b))]
		case 5: // append random bytes
			extra := make([]byte, 1+rng.IntN(64))
			for i := range extra {
				extra[i] = byte(rng.Uint32())
			}
			b = append(b, extra...)
		case 6: // insert random bytes
			i := rng.IntN(len(b) + 1)
			extra := make([]byte, 1+rng.IntN(8))
			for k := range extra {
				extra[k] = byte(rng.Uint32())
			}
			b = append(b[:i], append(extra, b[i:]...)...)
		case 7: // delete a range
			i := rng.IntN(len(b))
			j := min(len(b), i+1+rng.IntN(8))
			b = append(b[:i], b[j:]...)
		case 8: // toggle NLA_F_NESTED or NLA_F_NET_BYTEORDER on an attribute header
			if off := attrOffsets(b); len(off) > 0 {
				i := off[rng.IntN(len(off))]
				bit := uint16(nlaNested)
				if rng.IntN(3) == 0 {
					bit = nlaByteOrd
				}
				ne.PutUint16(b[i+2:], ne.Uint16(b[i+2:])^bit)
			}
		case 9: // nlmsg_len
			if len(b) >= 4 {
				ne.PutUint32(b, interesting32[rng.IntN(len(interesting32))]+uint32(rng.IntN(8)))
			}
		case 10: // flags
			if len(b) >= 8 {
				ne.PutUint16(b[6:], ne.Uint16(b[6:])^uint16(1)<<rng.IntN(16))
			}
		}
	}
	// Two times in three keep a single message's nlmsg_len right, so that the mutation reaches
	// the attribute parsers instead of being a framing error.
	if len(b) >= nlHdrLen && int(ne.Uint32(d)) == len(d) && rng.IntN(3) != 0 {
		ne.PutUint32(b, uint32(len(b)))
	}
	return b
}

// attrOffsets returns the offsets of the attribute headers of a single genl message, walking
// nests (those with NLA_F_NESTED, or that parse as attributes).
func attrOffsets(b []byte) []int {
	var out []int
	var walk func(off, end, depth int)
	walk = func(off, end, depth int) {
		for off+4 <= end && depth < 5 {
			l := int(ne.Uint16(b[off:]))
			if l < 4 || off+l > end {
				return
			}
			out = append(out, off)
			if l > 8 {
				walk(off+4, off+l, depth+1)
			}
			off += align4(l)
		}
	}
	if len(b) >= nlHdrLen+genlHdrLen {
		walk(nlHdrLen+genlHdrLen, len(b), 0)
	}
	return out
}

// getLoop starts the "other client": GETs from root until stopped, each of which must succeed.
// progress gets a value after each successful round. stop ends the loop, waits for it and returns
// the number of rounds.
func getLoop(t *testing.T, c *client.Client, port string, progress chan<- struct{}) (stop func() int64) {
	var rounds atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		ifi := client.Interface{Name: port}
		for {
			select {
			case <-quit:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err1 := c.Port(ctx, ifi)
			_, err2 := c.PrivateFlags(ctx, ifi)
			_, err3 := c.Rings(ctx, ifi)
			_, err4 := c.Stats(ctx, ifi)
			cancel()
			for _, err := range []error{err1, err2, err3, err4} {
				if err != nil {
					t.Errorf("GET from the other client failed during the flood: %v", err)
					return
				}
			}
			rounds.Add(1)
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	var once sync.Once
	stop = func() int64 {
		once.Do(func() { close(quit); <-done })
		return rounds.Load()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// flood sends n mutated valid requests, and after every 7th one a datagram of random bytes, on a
// raw connection from namespace ns as uid; each is followed by the sentinel and its answers are
// checked. keep filters the mutated datagrams (false: mutate again). Every 500 mutations it waits
// for the other client to complete a round of GETs, so that serving it is interleaved with the
// flood.
func (b *badInputRig) flood(t *testing.T, ns string, uid uint32, n int, seed uint64, corpus [][]byte,
	keep func([]byte) bool, progress <-chan struct{}) *answerStats {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	c := b.dial(t, ns, uid)
	defer func() { c.Close() }()
	st := newAnswerStats()
	failures, sent := 0, 0
	send := func(d []byte) {
		sent++
		replies, closed, err := c.exchange(d, 0xf0000000+uint32(sent))
		if err == nil {
			err = checkAnswers(d, replies, closed, b.fams, uid != 0, st)
		}
		if err != nil {
			failures++
			t.Errorf("datagram %d (%d bytes) %x: %v", sent, len(d), head(d), err)
			require.Less(t, failures, 10, "giving up after %d failures", failures)
		}
		if closed || err != nil {
			// manad reads a zero-length datagram as the end of the stream (read returns 0 on
			// SOCK_SEQPACKET for both) and closes; it has no other reason to close.
			if closed {
				assert.Equal(t, 0, len(d), "manad closed the connection after datagram %d (%d bytes) %x", sent, len(d), head(d))
			}
			c.Close()
			c = b.dial(t, ns, uid)
		}
	}
	for i := 0; i < n; i++ {
		var d []byte
		for {
			base := corpus[rng.IntN(len(corpus))]
			if rng.IntN(10) == 0 {
				// Two messages in one datagram, with distinct seqs even when they are the
				// same request (checkAnswers tells answers apart by seq).
				second := bytes.Clone(corpus[rng.IntN(len(corpus))])
				ne.PutUint32(second[8:], ne.Uint32(second[8:])+1<<16)
				base = cat(base, second)
			}
			d = mutate(rng, base)
			if keep == nil || keep(d) {
				break
			}
		}
		send(d)
		if i%7 == 6 {
			d = make([]byte, rng.IntN(200))
			for k := range d {
				d[k] = byte(rng.Uint32())
			}
			if len(d) >= 8 && rng.IntN(2) == 0 {
				ne.PutUint16(d[6:], ne.Uint16(d[6:])|fRequest) // reach the family lookup more often
			}
			if keep == nil || keep(d) {
				send(d)
			}
		}
		if i%500 == 499 && progress != nil {
			select {
			case <-progress:
			case <-time.After(time.Minute):
				t.Fatalf("the other client made no progress during mutations %d..%d", i-499, i)
			}
		}
	}
	return st
}

// TestBadInput sends malformed, oversized and mutated netlink input from a raw socket (random
// bytes, truncated headers, nlmsg_len past the datagram, datagrams over the size limit, unknown
// family ids, nests without NLA_F_NESTED, reserved bits, then 10,000 random mutations of valid
// requests as uid 65534 in the ports' namespace and 10,000 as root in a namespace without ports).
// Every datagram must be answered as checkAnswers defines (the errors, the kernel's answer, or a
// clean close — which manad does only for a zero-length datagram), another client keeps being
// served meanwhile, and no port changes.
func TestBadInput(t *testing.T) {
	b := startBadInputRig(t)
	before := b.snapshot(t)
	obj, err := xdptest.BuildELF(elf.EM_BPF, "GPL", xdptest.Prog{Section: "xdp", Name: "p",
		Insns: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	require.NoError(t, err)

	t.Run("malformed", func(t *testing.T) {
		c := b.dial(t, b.nsA, 0)
		defer c.Close()
		eth, man := b.ethtool.ID, b.manad.ID
		hdrA := nest(unix.ETHTOOL_A_PRIVFLAGS_HEADER, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, b.portA))
		valid := genlmsg(eth, fRequest, 7, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, hdrA)
		withLen := func(d []byte, l uint32) []byte { d = bytes.Clone(d); ne.PutUint32(d, l); return d }
		withSeq := func(d []byte, seq uint32) []byte { d = bytes.Clone(d); ne.PutUint32(d[8:], seq); return d }
		type want struct {
			errno unix.Errno
			msg   string // prefix of the extack message; "" = not checked
			offs  uint32 // 0 = not checked
		}
		cases := []struct {
			name  string
			d     []byte
			wants []want // the errors, in order, among the answers; nil = no error expected
		}{
			{"3 bytes", []byte{1, 2, 3}, []want{{unix.EINVAL, "truncated netlink message: 3 bytes is shorter than a header", 0}}},
			{"15 bytes", valid[:15], []want{{unix.EINVAL, "truncated netlink message: 15 bytes is shorter than a header", 0}}},
			{"nlmsg_len past the datagram", withLen(valid, 200), []want{{unix.EINVAL, fmt.Sprintf("truncated netlink message: nlmsg_len 200, %d bytes left", len(valid)), 0}}},
			{"nlmsg_len 8", withLen(valid, 8), []want{{unix.EINVAL, "truncated netlink message: nlmsg_len 8", 0}}},
			{"nlmsg_len 4 GiB", withLen(valid, 0xffffffff), []want{{unix.EINVAL, "truncated netlink message: nlmsg_len 4294967295", 0}}},
			{"second message truncated", cat(valid, withSeq(valid[:20], 8)), []want{{unix.EINVAL, fmt.Sprintf("truncated netlink message: nlmsg_len %d, 20 bytes left", len(valid)), 0}}},
			{"attribute longer than the message", func() []byte {
				d := bytes.Clone(valid)
				ne.PutUint16(d[20:], 200) // the header nest's nla_len
				return d
			}(), []want{{unix.EINVAL, "", 0}}},
			{"header only, no genl header", nlmsg(eth, fRequest|fAck, 9, 0, nil), []want{{unix.EINVAL, "", 0}}},
			{"ethtool header nest without NLA_F_NESTED", genlmsg(eth, fRequest, 10, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1,
				nestNoFlag(unix.ETHTOOL_A_PRIVFLAGS_HEADER, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, b.portA))),
				[]want{{unix.EINVAL, "NLA_F_NESTED is missing", 20}}},
			{"manad header nest without NLA_F_NESTED", genlmsg(man, fRequest, 11, wire.CmdPortGet, 1,
				nestNoFlag(wire.AttrHeader, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, b.portA))),
				[]want{{unix.EINVAL, "NLA_F_NESTED is missing", 20}}},
			{"bitset nest without NLA_F_NESTED (root SET)", genlmsg(eth, fRequest|fAck, 12, unix.ETHTOOL_MSG_PRIVFLAGS_SET, 1, hdrA,
				nestNoFlag(unix.ETHTOOL_A_PRIVFLAGS_FLAGS, u32a(unix.ETHTOOL_A_BITSET_SIZE, 1), attr(unix.ETHTOOL_A_BITSET_VALUE, []byte{1, 0, 0, 0}))),
				[]want{{unix.EINVAL, "NLA_F_NESTED is missing", uint32(20 + len(hdrA))}}},
			{"port spec nest without NLA_F_NESTED (root PORT_NEW)", genlmsg(man, fRequest|fAck, 13, wire.CmdPortNew, 1,
				nestNoFlag(wire.AttrPort, strA(wire.PortAttrDevName, "rbizz"), strA(wire.PortAttrNetNS, b.nsE))),
				[]want{{unix.EINVAL, "NLA_F_NESTED is missing", 20}}},
			{"reserved genl field", func() []byte {
				d := genlmsg(man, fRequest, 20, wire.CmdPortGet, 1, nest(wire.AttrHeader, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, b.portA)))
				d[18] = 1
				return d
			}(),
				[]want{{unix.EINVAL, "genlmsghdr.reserved field is not 0", 0}}},
			{"reserved nlmsg flag", genlmsg(man, fRequest|0x40, 14, wire.CmdPortGet, 1, nest(wire.AttrHeader, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, b.portA))),
				[]want{{unix.EINVAL, "ambiguous or reserved bits set in nlmsg_flags", 0}}},
			{"unknown ethtool command", genlmsg(eth, fRequest, 15, 200, 1, hdrA), []want{{unix.EOPNOTSUPP, "", 0}}},
			{"unknown manad command", genlmsg(man, fRequest, 16, 99, 1), []want{{unix.EOPNOTSUPP, "", 0}}},
			{"dump of a do-only command", genlmsg(man, fRequest|fDump, 17, wire.CmdLayoutPlan, 1), []want{{unix.EOPNOTSUPP, "", 0}}},
			{"not a request, no ACK: ignored as the kernel does", nlmsg(eth, 0, 18, 0, []byte{1, 1, 0, 0}), nil},
			{"NLMSG_NOOP with ACK: acknowledged", nlmsg(nlmNoop, fRequest|fAck, 19, 0, nil), nil},
			{"random 64 bytes, not a request", func() []byte {
				d := bytes.Repeat([]byte{0xa5}, 64)
				ne.PutUint32(d, 64)
				ne.PutUint16(d[6:], 0)
				return d
			}(), nil},
		}
		for fam := uint16(0x11); fam < 0x40; fam++ {
			if _, known := b.fams[fam]; !known {
				cases = append(cases, struct {
					name  string
					d     []byte
					wants []want
				}{fmt.Sprintf("family id %#x", fam), genlmsg(fam, fRequest, 100+uint32(fam), 1, 1, hdrA), []want{{unix.ENOENT, "", 0}}})
			}
		}
		for _, fam := range []uint16{0x100, 0x1000, 0xfffe, 0xffff} {
			cases = append(cases, struct {
				name  string
				d     []byte
				wants []want
			}{fmt.Sprintf("family id %#x", fam), genlmsg(fam, fRequest|fAck, 200, 1, 1), []want{{unix.ENOENT, "", 0}}})
		}
		st := newAnswerStats()
		for i, tc := range cases {
			replies, closed, err := c.exchange(tc.d, 0xe0000000+uint32(i))
			if err == nil {
				err = checkAnswers(tc.d, replies, closed, b.fams, false, st)
			}
			require.NoError(t, err, "%s: %v (closed %v)", tc.name, err, closed)
			require.False(t, closed, "%s: %v (closed %v)", tc.name, err, closed)
			var got []want
			for _, r := range replies {
				if r.Type == nlmError || r.Type == nlmDone {
					if a, _ := parseAck(r); a.Errno != 0 {
						got = append(got, want{a.Errno, a.Msg, a.Offs})
					}
				}
			}
			if len(got) != len(tc.wants) {
				t.Errorf("%s: errors %+v, want %+v", tc.name, got, tc.wants)
				continue
			}
			for k, w := range tc.wants {
				g := got[k]
				if g.errno != w.errno || !strings.HasPrefix(g.msg, w.msg) || (w.offs != 0 && g.offs != w.offs) {
					t.Errorf("%s: error %d is %v %q offs %d, want %v %q… offs %d", tc.name, k, g.errno, g.msg, g.offs, w.errno, w.msg, w.offs)
				}
			}
		}
		t.Logf("explicit cases: %v", st)

		// A zero-length datagram reads as end-of-stream on SOCK_SEQPACKET: manad may close the
		// connection (a clean close) or answer; either way it serves a new connection.
		replies, closed, err := c.exchange(nil, 0xe1000000)
		if err == nil {
			err = checkAnswers(nil, replies, closed, b.fams, false, st)
		}
		assert.NoError(t, err, "zero-length datagram")
		t.Logf("zero-length datagram: closed=%v, %d answers", closed, len(replies))
	})

	t.Run("oversized", func(t *testing.T) {
		c := b.dial(t, b.nsA, 0)
		defer c.Close()
		require.NoError(t, c.forceSendBuffer(4<<20))
		const limit = 256 << 10 // daemon.maxRequest
		man := b.manad.ID
		hdr := nest(wire.AttrHeader, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, b.portA))
		var chunks [][]byte
		for i := 0; i < 5; i++ {
			chunks = append(chunks, attr(wire.AttrXDPObject, bytes.Repeat([]byte{0xee}, 60<<10)))
		}
		big := genlmsg(man, fRequest|fAck, 300, wire.CmdXDPAttach, 1, hdr, nest(wire.AttrXDP, strA(wire.XDPAttrSection, "xdp")), cat(chunks...))
		require.Greater(t, len(big), limit, "test datagram of %d bytes is not over the limit", len(big))
		msgs, err := c.roundTrip(big)
		require.NoError(t, err)
		require.Len(t, msgs, 1, "answer to a %d-byte datagram: %+v", len(big), msgs)
		require.Equal(t, uint16(nlmError), msgs[0].Type, "answer to a %d-byte datagram: %+v", len(big), msgs)
		require.Equal(t, uint32(300), msgs[0].Seq, "answer to a %d-byte datagram: %+v", len(big), msgs)
		a, err := parseAck(msgs[0])
		if err != nil || a.Errno != unix.EMSGSIZE || a.Msg != fmt.Sprintf("request datagram exceeds the %d-byte limit", limit) {
			t.Errorf("answer to a %d-byte datagram: %v %q (%v)", len(big), a.Errno, a.Msg, err)
		}
		// Under the limit, but not an ELF object: refused by the loader.
		garbage := genlmsg(man, fRequest|fAck, 301, wire.CmdXDPAttach, 1, hdr, nest(wire.AttrXDP, strA(wire.XDPAttrSection, "xdp")), cat(chunks[:3]...))
		msgs, err = c.roundTrip(garbage)
		require.NoError(t, err)
		if a, err := parseAck(msgs[0]); err != nil || msgs[0].Type != nlmError || a.Errno != unix.EINVAL || !strings.Contains(a.Msg, "not a valid BPF ELF object") {
			t.Errorf("answer to %d bytes of garbage as an object: %v %q (%v)", len(garbage), a.Errno, a.Msg, err)
		}
		// The connection still works.
		if _, _, err := c.exchange(genlmsg(man, fRequest, 302, wire.CmdPortGet, 1, hdr), 0xe2000000); err != nil {
			t.Fatal(err)
		}

		// Answers come in the order of the requests, as on a kernel netlink socket: the
		// EMSGSIZE for an oversized datagram must not overtake the answers to the datagram
		// sent before it. That one changes the rings and puts them back (two queue rebuilds,
		// so it takes a while; the port ends as it was).
		ringsHdr := nest(unix.ETHTOOL_A_RINGS_HEADER, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, b.portA))
		overtaken := 0
		for i := uint32(0); i < 5; i++ {
			slow := cat(
				genlmsg(b.ethtool.ID, fRequest|fAck, 400+2*i, unix.ETHTOOL_MSG_RINGS_SET, 1, ringsHdr, u32a(unix.ETHTOOL_A_RINGS_RX, 256)),
				genlmsg(b.ethtool.ID, fRequest|fAck, 401+2*i, unix.ETHTOOL_MSG_RINGS_SET, 1, ringsHdr, u32a(unix.ETHTOOL_A_RINGS_RX, 128)))
			require.NoError(t, c.send(slow))
			require.NoError(t, c.send(big))
			var seqs []uint32
			for k := 0; k < 3; k++ {
				m, err := c.next()
				require.NoError(t, err)
				if a, err := parseAck(m); err != nil || m.Type != nlmError || (m.Seq != 300 && a.Errno != 0) {
					t.Fatalf("answer %d: type %d seq %d %v %q (%v)", k, m.Type, m.Seq, a.Errno, a.Msg, err)
				}
				seqs = append(seqs, m.Seq)
			}
			if seqs[0] != 400+2*i || seqs[1] != 401+2*i || seqs[2] != 300 {
				overtaken++
				t.Logf("round %d: answers in the order of seqs %v, requests in the order %d, %d, 300", i, seqs, 400+2*i, 401+2*i)
			}
		}
		assert.LessOrEqual(t, overtaken, 0, "the EMSGSIZE answer to an oversized datagram overtook the answers to the datagram before it in %d of 5 rounds "+
			"(genl/transport/conn.go: the request loop answers it itself, via Session.Oversize, while the request goroutine still serves the earlier datagram)", overtaken)
	})

	corpusA := b.corpus(b.portA, b.indexA, obj)

	t.Run("flood unprivileged", func(t *testing.T) {
		// uid 65534 in the ports' own namespace: GETs reach real devices; every SET-type
		// command must fail (EPERM, or an earlier validation error), so no mutation can change
		// a port even if it happens to form a valid request.
		progress := make(chan struct{}, 1)
		stop := getLoop(t, b.clients[b.nsA], b.portA, progress)
		start := time.Now()
		st := b.flood(t, b.nsA, nobody, 10000, 61, corpusA, nil, progress)
		rounds := stop()
		t.Logf("unprivileged flood: %v in %v; the other client completed %d GET rounds meanwhile", st, time.Since(start).Round(time.Millisecond), rounds)
		assert.NotEqual(t, 0, st.errnos[unix.EPERM], "no EPERM among the answers: the admin commands were not exercised")
		assert.NotEqual(t, 0, st.succeeded, "no request succeeded: the mutations never produced a valid GET")
	})

	t.Run("flood root in a foreign namespace", func(t *testing.T) {
		// root in nsE, where no port lives: SET-type commands get past the permission check
		// into the policies and the device lookup, which must fail (ENODEV). PORT_NEW and the
		// segment changes, the commands that need no device, are left out (a mutation could
		// legitimately create a port or a segment).
		noDevice := map[int]bool{int(wire.CmdPortNew): true, int(wire.CmdSegmentNew): true, int(wire.CmdSegmentDel): true,
			int(wire.CmdUplinkAdd): true, int(wire.CmdUplinkDel): true}
		keep := func(d []byte) bool {
			msgs, _ := framing(d, b.fams)
			for _, m := range msgs {
				if m.Type == b.manad.ID && noDevice[m.cmd] {
					return false
				}
			}
			return true
		}
		progress := make(chan struct{}, 1)
		stop := getLoop(t, b.clients[b.nsA], b.portA, progress)
		start := time.Now()
		st := b.flood(t, b.nsE, 0, 10000, 62, corpusA, keep, progress)
		rounds := stop()
		t.Logf("root flood from %s: %v in %v; the other client completed %d GET rounds meanwhile", b.nsE, st, time.Since(start).Round(time.Millisecond), rounds)
		assert.NotEqual(t, 0, st.errnos[unix.ENODEV], "no ENODEV among the answers: SET requests never reached the device lookup")
	})

	after := b.snapshot(t)
	assert.Empty(t, cmp.Diff(before, after), "ports changed under bad input (-before +after)")
	for _, ns := range []string{b.nsA, b.nsB} {
		ports, err := b.clients[ns].Ports(bg(t))
		if err != nil || len(ports) != 1 {
			t.Errorf("ports in %s after the floods: %d, %v", ns, len(ports), err)
		}
	}
	out, _ := harness.RunErr(b.nsE, "ip", "-o", "link", "show")
	assert.Equal(t, 1, strings.Count(out, "\n"), "namespace %s gained links:\n%s", b.nsE, out)
	waitPing(t, b.nsA, "10.211.0.2") // and the ports still pass traffic
}

// TestBadConfig: an invalid configuration stops manad before it does anything, with exit status 2
// and a message naming the file and line of every problem.
func TestBadConfig(t *testing.T) {
	bin, _ := harness.Binaries(t)
	dir := t.TempDir()
	ns := harness.Name("rbc", "")
	sock := filepath.Join(dir, "manad.sock")
	head := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n", sock, filepath.Join(dir, "state"))
	port := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\n", harness.Name("rbc", "0"), ns)
	type problem struct {
		line int
		says string
	}
	cases := []struct {
		name, text string
		want       []problem
	}{
		{"syntax error", head + port + "mtu = = 1500\n", []problem{{7, "invalid TOML"}}},
		{"unknown key", head + port + "queues = 4\nmtus = 1500\n", []problem{{8, `unknown key "mtus" (did you mean "mtu"?)`}}},
		{"bad page size", head + port + "page_size = 8192\n", []problem{{7, "page_size 8192 not supported"}}},
		{"wrong type", head + port + "queues = \"four\"\n", []problem{{7, `queues must be an integer, not the string "four"`}}},
		{"bad daemon key", head + "log_level = \"loud\"\n" + port, []problem{{4, `log_level "loud" unknown`}}},
		{"duplicate port", head + port + port, []problem{{8, "duplicate name (first defined at line 5)"}}},
		{"two problems", head + port + "mtu = 10\n" + strings.Replace(port, "0\"", "1\"", 1) + "rx_ring = 100000\n",
			[]problem{{7, "mtu 10 less than the minimum 68"}, {11, "rx_ring 100000 out of range 128..8192"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".toml")
			require.NoError(t, os.WriteFile(cfg, []byte(tc.text), 0o644))
			cmd := exec.Command(bin, "--config", cfg)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err == nil {
				code = 0
			}
			assert.Equal(t, 2, code, "exit status %d (%v), want 2; stderr:\n%s", code, err, stderr.String())
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			assert.Len(t, lines, len(tc.want), "%d lines on stderr, want %d (one per problem):\n%s", len(lines), len(tc.want), stderr.String())
			for _, w := range tc.want {
				prefix := fmt.Sprintf("%s:%d: ", cfg, w.line)
				found := false
				for _, l := range lines {
					l = strings.TrimPrefix(l, "manad: ")
					if strings.HasPrefix(l, prefix) && strings.Contains(l, w.says) {
						found = true
					}
				}
				assert.True(t, found, "stderr has no line %q…%q:\n%s", prefix, w.says, stderr.String())
			}
			if _, err := os.Stat(sock); err == nil {
				t.Errorf("manad created its socket despite the invalid configuration")
			}
			if _, err := os.Stat("/run/netns/" + ns); err == nil {
				exec.Command("ip", "netns", "del", ns).Run()
				t.Errorf("manad created namespace %s despite the invalid configuration", ns)
			}
		})
	}
}

// TestXDPObjectRefused: an eBPF object over the request limit, one that is not an ELF object,
// and a real object whose program is not XDP (a SchedCLS program built with xdptest) are refused
// with the right errno and message, and the port is left exactly as it was.
func TestXDPObjectRefused(t *testing.T) {
	nsA := harness.Name("rxo", "")
	port := harness.Name("rxo", "0")
	r := startRig(t, "", "", []portDef{{name: port, ns: nsA, segment: "rxo", ip: "10.212.0.1"}})
	c, ifi := r.port(port)
	before := r.snapshot(t)

	cls, err := xdptest.BuildELF(elf.EM_BPF, "GPL", xdptest.Prog{Section: "tc", Name: "cls",
		Insns: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		prog  genl.XDPProgram
		errno unix.Errno
		msg   string
	}{
		{"SchedCLS program", genl.XDPProgram{Object: cls}, unix.EINVAL, "program in section tc is not an XDP program (type SchedCLS)"},
		{"SchedCLS program by section", genl.XDPProgram{Object: cls, Section: "tc"}, unix.EINVAL, "program in section tc is not an XDP program (type SchedCLS)"},
		{"not ELF", genl.XDPProgram{Object: bytes.Repeat([]byte("not an object "), 1000), Section: "xdp"}, unix.EINVAL, "not a valid BPF ELF object"},
		{"both builtin and object", genl.XDPProgram{Builtin: "pass", Object: cls}, unix.EINVAL, "XDP builtin and object are mutually exclusive"},
		{"unknown builtin", genl.XDPProgram{Builtin: "redirect"}, unix.EINVAL, `unknown built-in XDP program "redirect"`},
	} {
		err := c.AttachXDP(bg(t), ifi, tc.prog)
		assert.Equal(t, tc.errno, errnoOf(err), "%s: %v, want %v %q", tc.name, err, tc.errno, tc.msg)
		assert.True(t, strings.HasPrefix(extackOf(err), tc.msg), "%s: %v, want %v %q", tc.name, err, tc.errno, tc.msg)
	}
	// An unknown layout rule is refused by the one place that knows the rules (genl/layout).
	_, err = c.PlanLayout(bg(t), genl.LayoutRequest{PageSize: 4096, MTU: 1500, Rules: []string{"newest"}})
	assert.Equal(t, unix.EINVAL, errnoOf(err), "unknown layout rule: %v (extack %q)", err, extackOf(err))
	assert.Contains(t, extackOf(err), `"newest"`, "unknown layout rule: %v (extack %q)", err, extackOf(err))

	// Over the limit: the client cannot even send it through a default socket buffer, so send
	// it raw with a large one; manad answers EMSGSIZE (its 256 KiB request limit is below
	// xdp.MaxObjectSize, so that is the limit a client meets).
	var rc *rawConn
	require.NoError(t, harness.InNetNS(nsA, func() (err error) { rc, err = dialRaw(r.d.Socket); return err }))
	defer rc.Close()
	require.NoError(t, rc.forceSendBuffer(4<<20))
	man, err := rc.resolveFamily("manad", 1)
	require.NoError(t, err)
	obj := bytes.Repeat(cls, (300<<10)/len(cls)+1)
	var chunks []byte
	for o := obj; len(o) > 0; {
		n := min(len(o), 60<<10)
		chunks = append(chunks, attr(wire.AttrXDPObject, o[:n])...)
		o = o[n:]
	}
	msgs, err := rc.roundTrip(genlmsg(man.ID, fRequest|fAck, 2, wire.CmdXDPAttach, 1,
		nest(wire.AttrHeader, strA(unix.ETHTOOL_A_HEADER_DEV_NAME, port)), chunks))
	require.NoError(t, err)
	if a, err := parseAck(msgs[0]); err != nil || a.Errno != unix.EMSGSIZE || !strings.Contains(a.Msg, "exceeds the 262144-byte limit") {
		t.Errorf("%d-byte object: %v %q (%v)", len(obj), a.Errno, a.Msg, err)
	}
	// The Go client, with its default socket buffer, fails locally and clearly.
	if err := c.AttachXDP(bg(t), ifi, genl.XDPProgram{Object: obj, Section: "xdp"}); err == nil {
		t.Errorf("a %d-byte object was accepted", len(obj))
	} else {
		t.Logf("Go client, %d-byte object: %v", len(obj), err)
	}

	assert.Empty(t, cmp.Diff(before, r.snapshot(t)), "the port changed after refused XDP objects (-before +after)")
	n := strings.Count(r.d.Log(), `msg=reconfigured`)
	assert.Equal(t, 0, n, "%d reconfigurations logged after refused XDP objects", n)
}
