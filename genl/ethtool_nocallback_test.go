package genl_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// answer is what a request got: the replies' payloads after the header nest
// (whose ifindex differs between the kernel's veth and manad's port) and the
// final ACK or DONE.
type answer struct {
	replies []string
	end     ackInfo
	done    bool
	endLen  int
}

// recvAnswer reads datagrams until the ACK or NLMSG_DONE.
func recvAnswer(t *testing.T, recv func() []rawMsg) answer {
	t.Helper()
	var a answer
	for {
		for _, m := range recv() {
			switch m.h.Type {
			case nlattr.MsgError:
				a.end, a.endLen = decodeAck(t, m), len(m.data)
				return a
			case nlattr.MsgDone:
				a.end, a.done, a.endLen = decodeDone(t, m), true, len(m.data)
				return a
			}
			var rest bytes.Buffer
			fmt.Fprintf(&rest, "cmd %d:", m.data[0])
			for it := nlattr.NewIter(m.data, 4, len(m.data)-4); it.Next(); {
				if it.Attr().Type() != 1 { // the header nest
					fmt.Fprintf(&rest, " %d=% x", it.Attr().Type(), it.Attr().Data)
				}
			}
			a.replies = append(a.replies, rest.String())
		}
	}
}

func devHdr(name string) func(m *msgBuilder) {
	return func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, name) })
	}
}

func then(fs ...func(m *msgBuilder)) func(m *msgBuilder) {
	return func(m *msgBuilder) {
		for _, f := range fs {
			f(m)
		}
	}
}

// TestNoCallbackOpsMatchKernel sends every ethtool op mana has no callback
// for to the kernel, about a veth (which lacks the same callbacks: no
// msglevel, WoL, pause, EEE, FEC, module, PHY, MAC merge, RSS contexts or
// hardware timestamping), and to manad, about a port of the same name, and
// requires the same answer: errno, extack message and offset, missing
// attribute, the replies' attributes, and whether a dump is empty.
func TestNoCallbackOpsMatchKernel(t *testing.T) {
	if major, minor := kernelRelease(t); major < 6 || major == 6 && minor < 18 {
		t.Skipf("kernel %d.%d: the answers compared are 6.18's (older kernels lack ops)", major, minor)
	}
	kc, _ := kernelInNetNS(t) // the veth nd0
	ts := startServer(t, nil)
	ts.be.AddPort(ts.ns, "nd0")
	rc := dialRaw(t, ts.path)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")

	dev, nodev := devHdr("nd0"), devHdr("nosuchdev0")
	phyIdx := func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) {
			m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nd0")
			m.PutU32(4, 1) // ETHTOOL_A_HEADER_PHY_INDEX
		})
	}
	onlyPhyIdx := func(m *msgBuilder) { header(m, 1, func(m *msgBuilder) { m.PutU32(4, 1) }) }
	statsFlag := func(m *msgBuilder) {
		header(m, 1, func(m *msgBuilder) {
			m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "nd0")
			m.PutU32(unix.ETHTOOL_A_HEADER_FLAGS, unix.ETHTOOL_FLAG_STATS)
		})
	}
	eeprom := func(off, length uint32, page uint8) func(m *msgBuilder) {
		return func(m *msgBuilder) {
			m.PutU32(2, off)
			m.PutU32(3, length)
			m.PutU8(4, page)
			m.PutU8(6, 0x50)
		}
	}
	tdr := func(fill func(m *msgBuilder)) func(m *msgBuilder) {
		return func(m *msgBuilder) {
			n := m.Nest(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG)
			fill(m)
			m.EndNest(n)
		}
	}
	type variant struct {
		name  string
		flags uint16
		build func(m *msgBuilder)
	}
	common := []variant{
		{"no header", 0, nil},
		{"device", 0, dev},
		{"no such device", 0, nodev},
		{"phy index", 0, phyIdx},
		{"dump", nlattr.FlagDump, nil},
		{"dump naming the device", nlattr.FlagDump, dev},
		{"dump naming no device", nlattr.FlagDump, nodev},
		{"dump naming the device and a PHY index", nlattr.FlagDump, phyIdx},
	}
	ops := []uint8{7, 8, 9, 10, 21, 22, 23, 24, 26, 27, 28, 29, 30, 31, 33, 34, 35, 36, 37, 39, 40, 41, 42, 43, 44, 45, 46, 47, 49, 50}
	special := map[uint8][]variant{
		unix.ETHTOOL_MSG_PAUSE_GET: {
			{"stats source without the stats flag", 0, then(dev, func(m *msgBuilder) { m.PutU32(6, 1) })},
			{"stats source", 0, then(statsFlag, func(m *msgBuilder) { m.PutU32(6, 1) })},
			{"dump with a stats source without the stats flag", nlattr.FlagDump, func(m *msgBuilder) { m.PutU32(6, 1) }},
		},
		unix.ETHTOOL_MSG_MODULE_EEPROM_GET: {
			{"whole low page", 0, then(dev, eeprom(0, 128, 0))},
			{"no page", 0, then(dev, func(m *msgBuilder) { m.PutU32(2, 0); m.PutU32(3, 128); m.PutU8(6, 0x50) })},
			{"lower half of page 1", 0, then(dev, eeprom(0, 128, 1))},
			{"across the half page", 0, then(dev, eeprom(100, 100, 0))},
			{"across the page", 0, then(dev, eeprom(200, 100, 0))},
			{"length 0", 0, then(dev, eeprom(0, 0, 0))},
			{"dump", nlattr.FlagDump, eeprom(0, 128, 0)},
		},
		unix.ETHTOOL_MSG_CABLE_TEST_TDR_ACT: {
			{"bad pair", 0, then(dev, tdr(func(m *msgBuilder) { m.PutU8(4, 9) }))},
			{"first beyond last", 0, then(dev, tdr(func(m *msgBuilder) { m.PutU32(1, 500); m.PutU32(2, 400) }))},
			{"first too far", 0, then(dev, tdr(func(m *msgBuilder) { m.PutU32(1, 20000) }))},
			{"step 0", 0, then(dev, tdr(func(m *msgBuilder) { m.PutU32(3, 0) }))},
			{"step too big", 0, then(dev, tdr(func(m *msgBuilder) { m.PutU32(1, 100); m.PutU32(2, 200); m.PutU32(3, 500) }))},
			{"unknown attribute", 0, then(dev, tdr(func(m *msgBuilder) { m.PutU32(9, 1) }))},
			{"good configuration", 0, then(dev, tdr(func(m *msgBuilder) { m.PutU32(1, 100); m.PutU32(2, 1000); m.PutU8(4, 1) }))},
			{"bad pair, no device", 0, then(nodev, tdr(func(m *msgBuilder) { m.PutU8(4, 9) }))},
		},
		unix.ETHTOOL_MSG_MODULE_SET: {{"power mode policy", 0, then(dev, func(m *msgBuilder) { m.PutU8(2, 1) })}},
		unix.ETHTOOL_MSG_PSE_SET: {
			{"PoDL admin control", 0, then(dev, func(m *msgBuilder) { m.PutU32(3, 2) })},
			{"admin control out of range", 0, then(dev, func(m *msgBuilder) { m.PutU32(6, 1) })},
		},
		unix.ETHTOOL_MSG_PSE_GET:        {{"dump with only a PHY index", nlattr.FlagDump, onlyPhyIdx}},
		unix.ETHTOOL_MSG_CABLE_TEST_ACT: {{"only a PHY index", 0, onlyPhyIdx}},
		unix.ETHTOOL_MSG_WOL_SET: {
			{"SecureOn password", 0, then(dev, func(m *msgBuilder) { m.Put(3, []byte{1, 2, 3, 4, 5, 6}) })},
			{"SecureOn password too long", 0, then(dev, func(m *msgBuilder) { m.Put(3, make([]byte, 7)) })},
		},
		unix.ETHTOOL_MSG_MM_SET:              {{"fragment size out of range", 0, then(dev, func(m *msgBuilder) { m.PutU32(5, 59) })}},
		unix.ETHTOOL_MSG_MODULE_FW_FLASH_ACT: {{"file name", 0, then(dev, func(m *msgBuilder) { m.PutString(2, "fw.bin") })}},
		unix.ETHTOOL_MSG_TSCONFIG_GET:        {{"stats flag", 0, statsFlag}},
		49: {
			{"context", 0, then(dev, func(m *msgBuilder) { m.PutU32(2, 5) })},
			{"context 0", 0, then(dev, func(m *msgBuilder) { m.PutU32(2, 0) })},
		},
		50: {
			{"context", 0, then(dev, func(m *msgBuilder) { m.PutU32(2, 5) })},
			{"context, no such device", 0, then(nodev, func(m *msgBuilder) { m.PutU32(2, 5) })},
		},
	}
	// Messages manad implements whose header or request names what mana lacks: a PHY, a
	// hardware timestamp provider.
	provider := func(fill func(m *msgBuilder)) func(m *msgBuilder) {
		return func(m *msgBuilder) {
			n := m.Nest(unix.ETHTOOL_A_TSINFO_HWTSTAMP_PROVIDER)
			fill(m)
			m.EndNest(n)
		}
	}
	special[unix.ETHTOOL_MSG_STRSET_GET] = []variant{
		{"phy index", 0, phyIdx},
		{"only a PHY index", 0, onlyPhyIdx},
		{"dump naming the device and a PHY index", nlattr.FlagDump, phyIdx},
	}
	special[unix.ETHTOOL_MSG_TSINFO_GET] = []variant{
		{"provider", 0, then(dev, provider(func(m *msgBuilder) { m.PutU32(1, 0); m.PutU32(2, 0) }))},
		{"provider without qualifier", 0, then(dev, provider(func(m *msgBuilder) { m.PutU32(1, 0) }))},
		{"empty provider", 0, then(dev, provider(func(*msgBuilder) {}))},
		{"provider qualifier out of range", 0, then(dev, provider(func(m *msgBuilder) { m.PutU32(1, 0); m.PutU32(2, 2) }))},
		{"dump with a provider", nlattr.FlagDump, provider(func(m *msgBuilder) { m.PutU32(1, 0); m.PutU32(2, 0) })},
	}
	seq := uint32(1000)
	for _, cmd := range append(ops, unix.ETHTOOL_MSG_STRSET_GET, unix.ETHTOOL_MSG_TSINFO_GET) {
		variants := special[cmd]
		if slices.Contains(ops, cmd) {
			variants = append(append([]variant(nil), common...), variants...)
		}
		for _, v := range variants {
			t.Run(fmt.Sprintf("%s/%s", ethtoolMsgNames[cmd], v.name), func(t *testing.T) {
				seq++
				build := func(id uint16) []byte {
					m := newMsg(id, nlattr.FlagRequest|nlattr.FlagAck|v.flags, seq, cmd, 1)
					if v.build != nil {
						v.build(m)
					}
					return m.done()
				}
				kc.send(build(kid))
				k := recvAnswer(t, kc.recv)
				rc.send(build(mid))
				m := recvAnswer(t, rc.recv)
				// The echoed requests differ in their family ids only.
				k.end.payload, m.end.payload = nil, nil
				require.Equal(t, k.done, m.done, "kernel ended with DONE %v, manad %v", k.done, m.done)
				assert.Equal(t, k.end, m.end, "final ACK/DONE (kernel, manad)")
				assert.Equal(t, k.endLen, m.endLen, "final ACK/DONE length")
				if v.flags&nlattr.FlagDump == 0 {
					assert.Equal(t, k.replies, m.replies, "replies without the header (kernel, manad)")
					return
				}
				// A dump lists different devices (the kernel's lo, nd1 and nd0; manad's ports):
				// compare what the replies carry and whether there are any.
				assert.Equal(t, len(k.replies) == 0, len(m.replies) == 0, "empty dump: kernel %d replies, manad %d", len(k.replies), len(m.replies))
				if !slices.Contains(ops, cmd) {
					return // a veth's strings and timestamping are not mana's
				}
				for _, r := range m.replies {
					assert.Contains(t, k.replies, r)
				}
			})
		}
	}
}
