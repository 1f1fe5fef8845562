package genl_test

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/stretchr/testify/assert"
)

// withoutHeader returns the attributes of a reply after the genl header,
// less the header nest of type hdr (device names and indexes differ).
func withoutHeader(data []byte, hdr uint16) []byte {
	var out []byte
	for it := nlattr.NewIter(data, 4, len(data)-4); it.Next(); {
		if a := it.Attr(); a.Type() != hdr {
			out = append(out, data[a.Off:a.Off+nlattr.Align(nlattr.AttrHdrLen+len(a.Data))]...)
		}
	}
	return out
}

// TestStatsMatchKernel asks the kernel about a veth (which, like mana,
// implements no standard statistics group) and manad about a port, and
// requires the same reply bytes after the header, or the same error.
func TestStatsMatchKernel(t *testing.T) {
	veth := makeVeth(t)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kc := dialKernel(t)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")
	const (
		aHeader, aGroups, aSrc = 2, 3, 5
	)
	names := func(n ...string) func(m *msgBuilder) {
		return func(m *msgBuilder) {
			bs := m.Nest(aGroups)
			m.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
			bits := m.Nest(unix.ETHTOOL_A_BITSET_BITS)
			for _, s := range n {
				b := m.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
				m.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, s)
				m.EndNest(b)
			}
			m.EndNest(bits)
			m.EndNest(bs)
		}
	}
	compact := func(size uint32, val uint32) func(m *msgBuilder) {
		return func(m *msgBuilder) {
			bs := m.Nest(aGroups)
			m.PutFlag(unix.ETHTOOL_A_BITSET_NOMASK)
			m.PutU32(unix.ETHTOOL_A_BITSET_SIZE, size)
			m.PutU32(unix.ETHTOOL_A_BITSET_VALUE, val)
			m.EndNest(bs)
		}
	}
	src := func(v uint32, f func(m *msgBuilder)) func(m *msgBuilder) {
		return func(m *msgBuilder) { f(m); m.PutU32(aSrc, v) }
	}
	for _, tc := range []struct {
		name  string
		dump  bool
		build func(m *msgBuilder)
	}{
		{"all groups by name", false, names("eth-phy", "eth-mac", "eth-ctrl", "rmon")},
		{"one group", false, names("rmon")},
		{"compact mask", false, compact(4, 0xf)},
		{"compact all bits", false, compact(32, 0xffffffff)},
		{"no groups", false, nil},
		{"empty bitset", false, compact(4, 0)},
		{"unknown group", false, names("no-such-group")},
		{"src aggregate", false, src(0, names("eth-mac"))},
		{"src emac", false, src(1, names("eth-mac"))},
		{"src pmac", false, src(2, names("eth-mac"))},
		{"src out of range", false, src(3, names("eth-mac"))},
		{"no header", false, nil},
		{"dump", true, names("eth-mac")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func(id uint16, dev string) []byte {
				fl := uint16(nlattr.FlagRequest | nlattr.FlagAck)
				if tc.dump {
					fl |= nlattr.FlagDump
				}
				m := newMsg(id, fl, 9, unix.ETHTOOL_MSG_STATS_GET, 1)
				if tc.name != "no header" {
					header(m, aHeader, func(m *msgBuilder) {
						if !tc.dump {
							m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, dev)
						}
					})
				}
				if tc.build != nil {
					tc.build(m)
				}
				return m.done()
			}
			km, kend := dumpAll(t, kc.send, kc.recv, build(kid, veth))
			mm, mend := dumpAll(t, rc.send, rc.recv, build(mid, "mana0"))
			if len(km) > 0 && len(mm) > 0 {
				// A dump lists the kernel's own devices; compare the first reply of each.
				k, m := withoutHeader(km[0].data, aHeader), withoutHeader(mm[0].data, aHeader)
				assert.Equal(t, mm[0].data[0], km[0].data[0], "reply after header:\nkernel cmd %d % x\nmanad  cmd %d % x", km[0].data[0], k, mm[0].data[0], m)
				assert.Equal(t, m, k, "reply after header:\nkernel cmd %d % x\nmanad  cmd %d % x", km[0].data[0], k, mm[0].data[0], m)
			} else if len(km) != len(mm) || (len(mm) == 0 && decodeAck(t, mend).errno == 0 && !tc.dump) {
				t.Errorf("replies: kernel %d, manad %d", len(km), len(mm))
			}
			var k, m ackInfo
			if tc.dump {
				k, m = decodeDone(t, kend), decodeDone(t, mend)
			} else {
				k, m = decodeAck(t, kend), decodeAck(t, mend)
			}
			// The device names differ in length: offsets are compared from the end.
			koff, moff := int(k.echoLen)-k.off, int(m.echoLen)-m.off
			if k.off == 0 || m.off == 0 {
				koff, moff = k.off, m.off
			}
			assert.Equal(t, m.errno, k.errno, "end:\nkernel %s\nmanad  %s", fmt.Sprintf("%+v", k), fmt.Sprintf("%+v", m))
			assert.Equal(t, m.msg, k.msg, "end:\nkernel %s\nmanad  %s", fmt.Sprintf("%+v", k), fmt.Sprintf("%+v", m))
			assert.Equal(t, moff, koff, "end:\nkernel %s\nmanad  %s", fmt.Sprintf("%+v", k), fmt.Sprintf("%+v", m))
			assert.Equal(t, m.missType, k.missType, "end:\nkernel %s\nmanad  %s", fmt.Sprintf("%+v", k), fmt.Sprintf("%+v", m))
		})
	}
}
