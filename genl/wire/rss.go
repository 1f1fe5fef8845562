package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/manad/manad/genl/nlattr"
)

// RSS message attributes (enum ETHTOOL_A_RSS_*, uapi ethtool_netlink.h of 6.12; x/sys/unix does
// not have them).
const (
	RSSHeader       = 1
	RSSContext      = 2 // u32
	RSSHFunc        = 3 // u32, ETH_RSS_HASH_* bits
	RSSIndir        = 4 // binary: u32 queue numbers, host order
	RSSHKey         = 5 // binary
	RSSInputXfrm    = 6 // u32
	RSSStartContext = 7 // u32, dump filter only
	RSSMax          = RSSStartContext
)

// RSS is the RSS_GET_REPLY of one context: rss_fill_reply writes each field only when non-zero
// or non-empty.
type RSS struct {
	Context   uint32
	HFunc     uint32
	InputXfrm uint32
	Indir     []uint32
	HKey      []byte
}

// PutRSS writes v as rss_fill_reply does.
func PutRSS(b *nlattr.Builder, v *RSS) {
	if v.Context != 0 {
		b.PutU32(RSSContext, v.Context)
	}
	if v.HFunc != 0 {
		b.PutU32(RSSHFunc, v.HFunc)
	}
	if v.InputXfrm != 0 {
		b.PutU32(RSSInputXfrm, v.InputXfrm)
	}
	if len(v.Indir) > 0 {
		buf := make([]byte, 4*len(v.Indir))
		for i, q := range v.Indir {
			binary.NativeEndian.PutUint32(buf[4*i:], q)
		}
		b.Put(RSSIndir, buf)
	}
	if len(v.HKey) > 0 {
		b.Put(RSSHKey, v.HKey)
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
