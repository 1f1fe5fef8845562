package genl_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// manadFamilyIDs resolves manad's ethtool and manad family ids on rc.
func manadFamilyID(t *testing.T, rc *rawConn, name string) uint16 {
	t.Helper()
	m := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest, 1, unix.CTRL_CMD_GETFAMILY, 1)
	m.PutString(unix.CTRL_ATTR_FAMILY_NAME, name)
	rc.send(m.done())
	msgs := rc.recv()
	it := nlattr.NewIter(msgs[0].data, 4, len(msgs[0].data)-4)
	for it.Next() {
		if it.Attr().Type() == unix.CTRL_ATTR_FAMILY_ID {
			return it.Attr().U16()
		}
	}
	t.Fatalf("no %s family", name)
	return 0
}

// header appends an ethtool request header nest.
func header(m *msgBuilder, t uint16, fill func(m *msgBuilder)) {
	n := m.Nest(t)
	fill(m)
	m.EndNest(n)
}

const noSuchIfindex = 0x7ffffff0

// diffCases are ethtool requests whose answer does not depend on which
// devices exist: manad must answer exactly as the kernel does (errno,
// extack message, offset, missing-attribute report, policy report).
var diffCases = []struct {
	name  string
	cmd   uint8
	flags uint16
	build func(m *msgBuilder)
	errno unix.Errno
	msg   string
}{
	{name: "header missing", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET, errno: unix.EINVAL},
	{name: "no device matches ifindex", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
	}, errno: unix.ENODEV, msg: "no device matches ifindex"},
	{name: "no device matches name", cmd: unix.ETHTOOL_MSG_RINGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0") })
	}, errno: unix.ENODEV, msg: "no device matches name"},
	{name: "neither ifindex nor name", cmd: unix.ETHTOOL_MSG_CHANNELS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
	}, errno: unix.EINVAL, msg: "neither ifindex nor name specified"},
	{name: "NLA_F_NESTED missing on header", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET, build: func(m *msgBuilder) {
		n := m.NestNoFlag(1)
		m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "x")
		m.EndNest(n)
	}, errno: unix.EINVAL, msg: "NLA_F_NESTED is missing"},
	{name: "NLA_F_NESTED not expected", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.Put(unix.ETHTOOL_A_HEADER_DEV_INDEX|nlattr.FlagNested, []byte{1, 0, 0, 0}) })
	}, errno: unix.EINVAL, msg: "NLA_F_NESTED not expected"},
	{name: "reserved header flag", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) {
			m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0")
			m.PutU32(unix.ETHTOOL_A_HEADER_FLAGS, unix.ETHTOOL_FLAG_STATS)
		})
	}, errno: unix.EINVAL, msg: "reserved bit set"},
	{name: "PHY_INDEX is unknown to the basic header", cmd: unix.ETHTOOL_MSG_RINGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(4, 1) })
	}, errno: unix.EINVAL, msg: "Unknown attribute type"},
	{name: "attribute above GET maxattr", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
		n := m.Nest(unix.ETHTOOL_A_PRIVFLAGS_FLAGS)
		m.EndNest(n)
	}, errno: unix.EINVAL, msg: "Unknown attribute type"},
	{name: "attribute type 0", cmd: unix.ETHTOOL_MSG_RINGS_GET, build: func(m *msgBuilder) { m.PutU32(0, 1) },
		errno: unix.EINVAL, msg: "Unknown attribute type"},
	{name: "max attribute in a SET", cmd: unix.ETHTOOL_MSG_RINGS_SET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_RINGS_HEADER, noSuchIfindex) })
		m.PutU32(unix.ETHTOOL_A_RINGS_RX_MAX, 5)
	}, errno: unix.EINVAL, msg: "Unsupported attribute"},
	{name: "channels max attribute in a SET", cmd: unix.ETHTOOL_MSG_CHANNELS_SET, build: func(m *msgBuilder) {
		m.PutU32(unix.ETHTOOL_A_CHANNELS_COMBINED_MAX, 5)
	}, errno: unix.EINVAL, msg: "Unsupported attribute"},
	{name: "u32 of wrong length", cmd: unix.ETHTOOL_MSG_RINGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU16(unix.ETHTOOL_A_HEADER_DEV_INDEX, 1) })
	}, errno: unix.EINVAL, msg: "invalid attribute length"},
	{name: "u8 out of range", cmd: unix.ETHTOOL_MSG_RINGS_SET, build: func(m *msgBuilder) {
		m.PutU8(unix.ETHTOOL_A_RINGS_TX_PUSH, 2)
	}, errno: unix.ERANGE, msg: "integer out of range"},
	{name: "u32 below min", cmd: unix.ETHTOOL_MSG_RINGS_SET, build: func(m *msgBuilder) {
		m.PutU32(unix.ETHTOOL_A_RINGS_CQE_SIZE, 0)
	}, errno: unix.ERANGE, msg: "integer out of range"},
	{name: "dev name without NUL", cmd: unix.ETHTOOL_MSG_RINGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.Put(unix.ETHTOOL_A_HEADER_DEV_NAME, []byte("eth0")) })
	}, errno: unix.EINVAL, msg: "Attribute failed policy validation"},
	{name: "flag with payload", cmd: unix.ETHTOOL_MSG_STRSET_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
		m.PutU32(unix.ETHTOOL_A_STRSET_COUNTS_ONLY, 1)
	}, errno: unix.ERANGE, msg: "Attribute failed policy validation"},
	{name: "bytes leftover", cmd: unix.ETHTOOL_MSG_RINGS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
		m.B = append(m.B, 1, 0, 0, 0) // an attribute header with nla_len 1
	}, errno: unix.EINVAL, msg: "bytes leftover after parsing attributes"},
	{name: "unknown command", cmd: 200, errno: unix.EOPNOTSUPP},
	{name: "dump of a SET", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_SET, flags: nlattr.FlagDump, errno: unix.EOPNOTSUPP},
	{name: "strset header missing", cmd: unix.ETHTOOL_MSG_STRSET_GET, errno: unix.EINVAL},
	{name: "strset unknown set id", cmd: unix.ETHTOOL_MSG_STRSET_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
		sets := m.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
		set := m.Nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
		m.PutU32(unix.ETHTOOL_A_STRINGSET_ID, 99)
		m.EndNest(set)
		m.EndNest(sets)
	}, errno: unix.EOPNOTSUPP, msg: "unknown string set id"},
	{name: "strset per-device set without device", cmd: unix.ETHTOOL_MSG_STRSET_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
		sets := m.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
		set := m.Nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
		m.PutU32(unix.ETHTOOL_A_STRINGSET_ID, 1)
		m.EndNest(set)
		m.EndNest(sets)
	}, errno: unix.EINVAL, msg: "requested per device strings without dev"},
	{name: "strset set without id", cmd: unix.ETHTOOL_MSG_STRSET_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
		sets := m.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
		set := m.Nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
		m.EndNest(set)
		m.EndNest(sets)
	}, errno: unix.EINVAL},
	{name: "strset set nest without NLA_F_NESTED", cmd: unix.ETHTOOL_MSG_STRSET_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
		sets := m.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
		set := m.NestNoFlag(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
		m.PutU32(unix.ETHTOOL_A_STRINGSET_ID, 9)
		m.EndNest(set)
		m.EndNest(sets)
	}, errno: unix.EINVAL, msg: "NLA_F_NESTED is missing"},
	{name: "strset wrong child type", cmd: unix.ETHTOOL_MSG_STRSET_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
		sets := m.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
		m.PutU32(2, 9)
		m.EndNest(sets)
	}, errno: unix.EINVAL, msg: "Unknown attribute type"},
	{name: "strset set without strings table (ntuple)", cmd: unix.ETHTOOL_MSG_STRSET_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
		sets := m.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
		set := m.Nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
		m.PutU32(unix.ETHTOOL_A_STRINGSET_ID, 3)
		m.EndNest(set)
		m.EndNest(sets)
	}, errno: unix.EOPNOTSUPP},
	{name: "SET with unknown ifindex", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_SET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
	}, errno: unix.ENODEV, msg: "no device matches ifindex"},
	{name: "SET header missing", cmd: unix.ETHTOOL_MSG_CHANNELS_SET, errno: unix.EINVAL},
	{name: "SET with unknown name", cmd: unix.ETHTOOL_MSG_RINGS_SET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0") })
	}, errno: unix.ENODEV, msg: "no device matches name"},
	{name: "dump with a missing named device", cmd: unix.ETHTOOL_MSG_RINGS_GET, flags: nlattr.FlagDump, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0") })
	}, errno: unix.ENODEV, msg: "no device matches name"},
	{name: "dump with a bad attribute", cmd: unix.ETHTOOL_MSG_PRIVFLAGS_GET, flags: nlattr.FlagDump, build: func(m *msgBuilder) {
		m.PutU32(7, 1)
	}, errno: unix.EINVAL, msg: "Unknown attribute type"},
	{name: "linkinfo unknown ifindex", cmd: unix.ETHTOOL_MSG_LINKINFO_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
	}, errno: unix.ENODEV, msg: "no device matches ifindex"},
	{name: "linkmodes unknown name", cmd: unix.ETHTOOL_MSG_LINKMODES_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0") })
	}, errno: unix.ENODEV, msg: "no device matches name"},
	{name: "linkstate neither ifindex nor name", cmd: unix.ETHTOOL_MSG_LINKSTATE_GET, build: func(m *msgBuilder) {
		header(m, 1, func(*msgBuilder) {})
	}, errno: unix.EINVAL, msg: "neither ifindex nor name specified"},
	{name: "tsinfo header missing", cmd: unix.ETHTOOL_MSG_TSINFO_GET, errno: unix.EINVAL},
	{name: "tsinfo unknown name", cmd: unix.ETHTOOL_MSG_TSINFO_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0") })
	}, errno: unix.ENODEV, msg: "no device matches name"},
	{name: "linkinfo GET with a SET attribute", cmd: unix.ETHTOOL_MSG_LINKINFO_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
		m.PutU8(unix.ETHTOOL_A_LINKINFO_PORT, 0)
	}, errno: unix.EINVAL, msg: "Unknown attribute type"},
	{name: "linkinfo SET of read-only TP_MDIX", cmd: unix.ETHTOOL_MSG_LINKINFO_SET, build: func(m *msgBuilder) {
		m.PutU8(unix.ETHTOOL_A_LINKINFO_TP_MDIX, 1)
	}, errno: unix.EINVAL, msg: "Unsupported attribute"},
	{name: "linkinfo SET unknown name", cmd: unix.ETHTOOL_MSG_LINKINFO_SET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0") })
		m.PutU8(unix.ETHTOOL_A_LINKINFO_PORT, 0)
	}, errno: unix.ENODEV, msg: "no device matches name"},
	{name: "linkmodes SET lanes out of range", cmd: unix.ETHTOOL_MSG_LINKMODES_SET, build: func(m *msgBuilder) {
		m.PutU32(unix.ETHTOOL_A_LINKMODES_LANES, 9)
	}, errno: unix.ERANGE, msg: "integer out of range"},
	{name: "linkmodes SET of read-only PEER", cmd: unix.ETHTOOL_MSG_LINKMODES_SET, build: func(m *msgBuilder) {
		n := m.Nest(unix.ETHTOOL_A_LINKMODES_PEER)
		m.EndNest(n)
	}, errno: unix.EINVAL, msg: "Unsupported attribute"},
	{name: "linkmodes SET above maxattr", cmd: unix.ETHTOOL_MSG_LINKMODES_SET, build: func(m *msgBuilder) {
		m.PutU8(unix.ETHTOOL_A_LINKMODES_RATE_MATCHING, 0)
	}, errno: unix.EINVAL, msg: "Unknown attribute type"},
	{name: "linkmodes SET header missing", cmd: unix.ETHTOOL_MSG_LINKMODES_SET, errno: unix.EINVAL},
	{name: "linkmodes dump unknown name", cmd: unix.ETHTOOL_MSG_LINKMODES_GET, flags: nlattr.FlagDump, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0") })
	}, errno: unix.ENODEV, msg: "no device matches name"},
	{name: "dump of LINKINFO_SET", cmd: unix.ETHTOOL_MSG_LINKINFO_SET, flags: nlattr.FlagDump, errno: unix.EOPNOTSUPP},
	{name: "rss header missing", cmd: unix.ETHTOOL_MSG_RSS_GET, errno: unix.EINVAL},
	{name: "rss no device", cmd: unix.ETHTOOL_MSG_RSS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
		m.PutU32(wire.RSSContext, 1)
	}, errno: unix.ENODEV, msg: "no device matches ifindex"},
	{name: "rss short context", cmd: unix.ETHTOOL_MSG_RSS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
		m.PutU16(wire.RSSContext, 1)
	}, errno: unix.EINVAL, msg: "invalid attribute length"},
	{name: "rss above maxattr", cmd: unix.ETHTOOL_MSG_RSS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
		m.PutU32(wire.RSSMax+1, 0)
	}, errno: unix.EINVAL, msg: "Unknown attribute type"},
	{name: "rss hkey in a GET", cmd: unix.ETHTOOL_MSG_RSS_GET, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, noSuchIfindex) })
		m.Put(wire.RSSHKey, make([]byte, 40))
	}, errno: unix.EINVAL, msg: "Unsupported attribute"},
	{name: "rss dump unknown name", cmd: unix.ETHTOOL_MSG_RSS_GET, flags: nlattr.FlagDump, build: func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nosuchdev0") })
	}, errno: unix.ENODEV, msg: "no device matches name"},
}

// TestEthtoolErrorsMatchKernel sends each diffCase to the kernel's ethtool
// family and to manad's, and requires identical error reports.
func TestEthtoolErrorsMatchKernel(t *testing.T) {
	requireRoot(t) // the SET cases need CAP_NET_ADMIN on the kernel side
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kc := dialKernel(t)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")
	for i, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			build := func(id uint16) []byte {
				m := newMsg(id, nlattr.FlagRequest|nlattr.FlagAck|tc.flags, uint32(100+i), tc.cmd, 1)
				if tc.build != nil {
					tc.build(m)
				}
				return m.done()
			}
			rc.send(build(mid))
			kc.send(build(kid))
			km, mm := kc.recv(), rc.recv()
			k, m := decodeAck(t, km[0]), decodeAck(t, mm[0])
			assert.Equal(t, tc.errno, m.errno, "manad: %v %q, want %v %q", m.errno, m.msg, tc.errno, tc.msg)
			assert.Equal(t, tc.msg, m.msg, "manad: %v %q, want %v %q", m.errno, m.msg, tc.errno, tc.msg)
			assertSameAck(t, k, m)
		})
	}
}

// TestGlobalStringSetsMatchKernel: a device-less STRSET_GET is answered
// with the kernel's own tables, byte for byte.
func TestGlobalStringSetsMatchKernel(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	kc := dialKernel(t)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")
	for _, tc := range []struct {
		name string
		ids  []uint32
	}{
		{"all global sets", nil},
		{"link modes and features", []uint32{9, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, countsOnly := range []bool{false, true} {
				build := func(id uint16) []byte {
					m := newMsg(id, nlattr.FlagRequest, 5, unix.ETHTOOL_MSG_STRSET_GET, 1)
					header(m, 1, func(*msgBuilder) {})
					if tc.ids != nil {
						sets := m.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
						for _, id := range tc.ids {
							set := m.Nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
							m.PutU32(unix.ETHTOOL_A_STRINGSET_ID, id)
							m.EndNest(set)
						}
						m.EndNest(sets)
						if countsOnly {
							m.PutFlag(unix.ETHTOOL_A_STRSET_COUNTS_ONLY)
						}
					}
					return m.done()
				}
				rc.send(build(mid))
				kc.send(build(kid))
				k, m := kc.recv()[0], rc.recv()[0]
				require.Equal(t, kid, k.h.Type, "not replies: kernel type %d, manad type %d", k.h.Type, m.h.Type)
				require.Equal(t, mid, m.h.Type, "not replies: kernel type %d, manad type %d", k.h.Type, m.h.Type)
				assert.Equal(t, m.data, k.data, "countsOnly=%v: manad's reply (%d bytes) differs from the kernel's (%d bytes)", countsOnly, len(m.data), len(k.data))
			}
		})
	}
}
