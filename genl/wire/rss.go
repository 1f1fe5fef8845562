package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/manad/manad/genl/nlattr"
)

// RSS message attributes (enum ETHTOOL_A_RSS_*, uapi ethtool_netlink_generated.h of 6.17; x/sys/unix
// does not have them).
const (
	RSSHeader       = 1
	RSSContext      = 2               // u32
	RSSHFunc        = 3               // u32, ETH_RSS_HASH_* bits
	RSSIndir        = 4               // binary: u32 queue numbers, host order
	RSSHKey         = 5               // binary
	RSSInputXfrm    = 6               // u32
	RSSStartContext = 7               // u32, dump filter only
	RSSFlowHash     = 8               // nested ETHTOOL_A_FLOW_*: RXH_* fields hashed per flow type (6.17+)
	RSSMax          = RSSStartContext // the RSS_GET policy's maximum
	RSSSetMax       = RSSFlowHash     // the RSS_SET policy's maximum
)

// RSS_SET and its notification (ethtool_netlink_generated.h of 6.17: the user messages after
// ETHTOOL_MSG_TSCONFIG_SET, the kernel messages after ETHTOOL_MSG_TSCONFIG_SET_REPLY and
// ETHTOOL_MSG_PSE_NTF). x/sys/unix has neither; the running 6.18 kernel's ethtool family lists
// op 0x30.
const (
	MsgRSSSet = 0x30 // ETHTOOL_MSG_RSS_SET
	MsgRSSNtf = 0x32 // ETHTOOL_MSG_RSS_NTF
)

// Flow types of the RSSFlowHash nest (enum ETHTOOL_A_FLOW_*, 6.17): ETHER is 1, then pairs of an
// IPv4 and an IPv6 flow type (IP4, IP6, TCP4, TCP6, UDP4, UDP6, ...) up to GTPU_DL6.
const (
	FlowEther   = 1  // ETHTOOL_A_FLOW_ETHER
	FlowGTPUDL6 = 27 // ETHTOOL_A_FLOW_GTPU_DL6, the last
	FlowMax     = FlowGTPUDL6
)

// FlowIsIPv6 reports whether flow type t (1..FlowMax) is an IPv6 one, whose hash may also take
// RXH_IP6_FL (ethnl_rss_flows_policy's RFH_MASKv6 entries): the second of each pair.
func FlowIsIPv6(t uint16) bool { return t > FlowEther && t%2 == 1 }

// RXH_* bits: the packet fields an RSS hash covers (uapi ethtool.h).
const (
	RXHL2DA    = 1 << 1
	RXHVLAN    = 1 << 2
	RXHL3Proto = 1 << 3
	RXHIPSrc   = 1 << 4
	RXHIPDst   = 1 << 5
	RXHL4B01   = 1 << 6
	RXHL4B23   = 1 << 7
	RXHGTPTEID = 1 << 8
	RXHIP6FL   = 1 << 9
	RXHDiscard = 1 << 31

	// RXHMask and RXHMaskV6 are RFH_MASK and RFH_MASKv6 of net/ethtool/rss.c.
	RXHMask   = RXHL2DA | RXHVLAN | RXHIPSrc | RXHIPDst | RXHL3Proto | RXHL4B01 | RXHL4B23 | RXHGTPTEID | RXHDiscard
	RXHMaskV6 = RXHMask | RXHIP6FL
)

// RXHXfrmSymOrXor is the largest ETHTOOL_A_RSS_INPUT_XFRM value RSS_SET's policy accepts
// (RXH_XFRM_SYM_OR_XOR).
const RXHXfrmSymOrXor = 1 << 1

// RSS is the RSS_GET_REPLY of one context: rss_fill_reply writes each field only when non-zero
// or non-empty.
type RSS struct {
	Context   uint32
	HFunc     uint32
	InputXfrm uint32
	Indir     []uint32
	HKey      []byte
}

// PutRSS writes v as rss_fill_reply of 6.16+ does (the context, the table, then the hash
// function, input transformation and key); the RSS_GET reply and the RSS_NTF share it.
func PutRSS(b *nlattr.Builder, v *RSS) {
	if v.Context != 0 {
		b.PutU32(RSSContext, v.Context)
	}
	if len(v.Indir) > 0 {
		b.Put(RSSIndir, IndirBytes(v.Indir))
	}
	if v.HFunc != 0 {
		b.PutU32(RSSHFunc, v.HFunc)
	}
	if v.InputXfrm != 0 {
		b.PutU32(RSSInputXfrm, v.InputXfrm)
	}
	if len(v.HKey) > 0 {
		b.Put(RSSHKey, v.HKey)
	}
}

// IndirBytes is an indirection table as ETHTOOL_A_RSS_INDIR carries it: a u32 per entry, host
// order.
func IndirBytes(t []uint32) []byte {
	buf := make([]byte, 4*len(t))
	for i, q := range t {
		binary.NativeEndian.PutUint32(buf[4*i:], q)
	}
	return buf
}

// RSSSet is an RSS_SET request: a nil field is not sent (left unchanged). An empty, non-nil
// Indir asks for the default table (user_size 0 in rss_set_prep_indir); a table shorter than
// the device's is repeated to fill it when its size divides the device's.
type RSSSet struct {
	Context   *uint32  // nil = not sent (context 0)
	HKey      []byte   // nil = not sent
	HFunc     uint32   // ETH_RSS_HASH_* bit; 0 = not sent
	InputXfrm *uint32  // RXH_XFRM_*; nil = not sent
	Indir     []uint32 // nil = not sent
}

// PutRSSSet writes the attributes of v after the request header, in the order ethtool's nl_srss
// puts them.
func PutRSSSet(b *nlattr.Builder, v *RSSSet) {
	if v.Context != nil {
		b.PutU32(RSSContext, *v.Context)
	}
	if v.HKey != nil {
		b.Put(RSSHKey, v.HKey)
	}
	if v.HFunc != 0 {
		b.PutU32(RSSHFunc, v.HFunc)
	}
	if v.InputXfrm != nil {
		b.PutU32(RSSInputXfrm, *v.InputXfrm)
	}
	if v.Indir != nil {
		b.Put(RSSIndir, IndirBytes(v.Indir))
	}
}

// DecodeRSS reads one RSS reply attribute into v, ignoring unknown ones. Errors: a malformed
// attribute (a u32 of the wrong size, a table not a multiple of 4 bytes), named in the message.
func DecodeRSS(a nlattr.Attr, v *RSS) error {
	switch a.Type() {
	case RSSContext, RSSHFunc, RSSInputXfrm:
		if len(a.Data) != 4 {
			return fmt.Errorf("rss attribute %d: %d bytes, want 4", a.Type(), len(a.Data))
		}
		u := binary.NativeEndian.Uint32(a.Data)
		switch a.Type() {
		case RSSContext:
			v.Context = u
		case RSSHFunc:
			v.HFunc = u
		default:
			v.InputXfrm = u
		}
	case RSSIndir:
		if len(a.Data)%4 != 0 {
			return fmt.Errorf("rss indirection table: %d bytes, not a multiple of 4", len(a.Data))
		}
		v.Indir = make([]uint32, len(a.Data)/4)
		for i := range v.Indir {
			v.Indir[i] = binary.NativeEndian.Uint32(a.Data[4*i:])
		}
	case RSSHKey:
		v.HKey = append([]byte(nil), a.Data...)
	}
	return nil
}
