package vnic

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// RSS constants of the port (mana.h).
const (
	// RSSKeySize is MANA_HASH_KEY_SIZE, the Toeplitz key length.
	RSSKeySize = 40
	// RSSIndirSize is MANA_INDIRECT_TABLE_DEF_SIZE, the indirection table length.
	RSSIndirSize = 64
)

// DefaultRSSKey is the Toeplitz key of Microsoft's RSS specification. The driver fills a random key
// at probe (netdev_rss_key_fill); the model uses the published verification key so a flow always
// lands on the same queue, run after run.
var DefaultRSSKey = [RSSKeySize]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// RSSHashTop is ETH_RSS_HASH_TOP, the Toeplitz hash function bit: the only one mana supports.
const RSSHashTop = 1

// RSS is the port's receive-side scaling configuration as mana_get_rxfh reports it, and the
// netdev's IFF_RXFH_CONFIGURED.
type RSS struct {
	Key   [RSSKeySize]byte
	Indir [RSSIndirSize]uint32
	// Configured is IFF_RXFH_CONFIGURED, which the ethtool core keeps on the netdev: set when
	// the user gives a table, cleared when they ask for the default. The driver's reset of the
	// table on attach does not clear it, so it can outlive the table it was set for.
	Configured bool
}

// RSSUpdate is a set_rxfh request; a zero or nil field leaves that part unchanged.
type RSSUpdate struct {
	HFunc uint32   // ETH_RSS_HASH_NO_CHANGE (0) or RSSHashTop
	Key   []byte   // RSSKeySize bytes
	Indir []uint32 // RSSIndirSize entries, each below the number of queues
}

// defaultIndir is ethtool_rxfh_indir_default over queues: the round-robin spread that
// mana_rss_table_init writes on every attach, discarding the user's table.
func defaultIndir(queues int) (t [RSSIndirSize]uint32) {
	for i := range t {
		t[i] = uint32(i % queues)
	}
	return t
}

// checkRSS validates u against a port with queues running queues, as mana_set_rxfh. Errors:
// EOPNOTSUPP for another hash function, EINVAL for a key or table of the wrong size or an entry
// naming a queue that does not exist.
func checkRSS(u RSSUpdate, queues int) error {
	if u.HFunc != 0 && u.HFunc != RSSHashTop {
		return nlerr.New(unix.EOPNOTSUPP, "hash function 0x%x not supported, only toeplitz", u.HFunc)
	}
	if u.Key != nil && len(u.Key) != RSSKeySize {
		return nlerr.New(unix.EINVAL, "hash key must be %d bytes, got %d", RSSKeySize, len(u.Key))
	}
	if u.Indir != nil {
		if len(u.Indir) != RSSIndirSize {
			return nlerr.New(unix.EINVAL, "indirection table must have %d entries, got %d", RSSIndirSize, len(u.Indir))
		}
		for i, q := range u.Indir {
			if q >= uint32(queues) {
				return nlerr.New(unix.EINVAL, "indirection table entry %d is queue %d, port has %d queues", i, q, queues)
			}
		}
	}
	return nil
}

// RSS returns the port's hash key and indirection table (mana_get_rxfh). While the port is down
// the table is the one the last attach left. Caller holds the configuration lock.
func (p *Port) RSS() RSS {
	p.assertLocked()
	return p.rssCfg
}

// SetRSS changes the hash key and/or indirection table of the running port (mana_set_rxfh); the
// steering of the next frame uses them. The table lasts until the next detach/attach (channel,
// ring, MTU, XDP or flag change, reset, down/up), which restores the default spread as mana does;
// the key persists. Errors: EOPNOTSUPP when the port is not running or for a hash function
// other than Toeplitz; EINVAL as checkRSS. Nothing changes on error. Caller holds the
// configuration lock.
func (p *Port) SetRSS(u RSSUpdate) error {
	p.assertLocked()
	if !p.running {
		return nlerr.New(unix.EOPNOTSUPP, "port is not up")
	}
	if err := checkRSS(u, p.set.Queues); err != nil {
		return err
	}
	nw := p.rssCfg
	if u.Key != nil {
		copy(nw.Key[:], u.Key)
	}
	if u.Indir != nil {
		copy(nw.Indir[:], u.Indir)
	}
	p.rssCfg = nw
	p.rss.Store(newRSSTable(&nw))
	return nil
}

// SetRSSConfigured sets IFF_RXFH_CONFIGURED (RSS.Configured), as the ethtool core does after
// an RSS_SET with a table, also one that changed nothing and reached no driver; it is not a
// driver call, so it works while the port is down. Caller holds the configuration lock.
func (p *Port) SetRSSConfigured(on bool) {
	p.assertLocked()
	p.rssCfg.Configured = on
}

// rssTable is the steering state of a running port, built from the port's RSS configuration and
// replaced whole on every change so the datapath reads it without a lock.
type rssTable struct {
	hash  *toeplitzTable
	indir [RSSIndirSize]uint8
}

func newRSSTable(c *RSS) *rssTable {
	t := &rssTable{hash: defaultToeplitz}
	if c.Key != DefaultRSSKey {
		t.hash = newToeplitzTable(&c.Key)
	}
	for i, q := range c.Indir {
		t.indir[i] = uint8(q) // < queues ≤ MaxQueues, checked by checkRSS
	}
	return t
}

// maxHashInput is the longest RSS hash input: IPv6 source and destination plus two ports.
const maxHashInput = 36

// toeplitzTable holds, for every input byte position and value, that byte's contribution to the
// Toeplitz hash under one key, so hashing costs one lookup per byte instead of eight shifts.
type toeplitzTable [maxHashInput][256]uint32

// defaultToeplitz is the table of DefaultRSSKey, computed once and never written again.
var defaultToeplitz = newToeplitzTable(&DefaultRSSKey)

func newToeplitzTable(key *[RSSKeySize]byte) *toeplitzTable {
	t := new(toeplitzTable)
	for i := range t {
		for bit := 0; bit < 8; bit++ {
			// The 32-bit key window that input bit (i, bit) selects.
			var in [maxHashInput]byte
			in[i] = 0x80 >> bit
			w := Toeplitz(key, in[:i+1])
			for v := 0; v < 256; v++ {
				if v&(0x80>>bit) != 0 {
					t[i][v] ^= w
				}
			}
		}
	}
	return t
}

// sum is Toeplitz(key, data) by table lookups; len(data) ≤ maxHashInput.
func (t *toeplitzTable) sum(data []byte) uint32 {
	var h uint32
	for i, b := range data {
		h ^= t[i][b]
	}
	return h
}

// Toeplitz computes the Toeplitz hash of data with key, as the NIC does for RSS. len(data) must be
// at most RSSKeySize-4.
func Toeplitz(key *[RSSKeySize]byte, data []byte) uint32 {
	var hash uint32
	v := binary.BigEndian.Uint32(key[:4])
	for i, b := range data {
		next := key[i+4]
		for bit := 7; bit >= 0; bit-- {
			if b&(1<<bit) != 0 {
				hash ^= v
			}
			v <<= 1
			if next&(1<<bit) != 0 {
				v |= 1
			}
		}
	}
	return hash
}

// flowHashInput extracts the RSS hash input of an Ethernet frame into buf: the IP source and
// destination addresses, followed by the TCP or UDP ports when the packet is an unfragmented TCP
// or UDP packet (MANA_HASH_L4). It returns nil for frames that are not IPv4 or IPv6.
func flowHashInput(frame []byte, buf *[36]byte) []byte {
	if len(frame) < 14 {
		return nil
	}
	etype := binary.BigEndian.Uint16(frame[12:14])
	l3 := frame[14:]
	if etype == 0x8100 || etype == 0x88a8 { // one VLAN tag
		if len(frame) < 18 {
			return nil
		}
		etype = binary.BigEndian.Uint16(frame[16:18])
		l3 = frame[18:]
	}
	var n int
	var proto byte
	var l4 []byte
	switch etype {
	case 0x0800:
		if len(l3) < 20 || l3[0]>>4 != 4 {
			return nil
		}
		ihl := int(l3[0]&0x0f) * 4
		n = copy(buf[:], l3[12:20])
		frag := binary.BigEndian.Uint16(l3[6:8])&0x3fff != 0 // MF or fragment offset
		if !frag && ihl >= 20 && len(l3) >= ihl+4 {
			proto, l4 = l3[9], l3[ihl:]
		}
	case 0x86dd:
		if len(l3) < 40 || l3[0]>>4 != 6 {
			return nil
		}
		n = copy(buf[:], l3[8:40])
		if len(l3) >= 44 {
			proto, l4 = l3[6], l3[40:]
		}
	default:
		return nil
	}
	if proto == 6 || proto == 17 {
		n += copy(buf[n:], l4[:4])
	}
	return buf[:n]
}

// steer returns the RX queue for frame: the indirection table entry of the frame's Toeplitz hash,
// or queue 0 for frames RSS does not hash.
func (t *rssTable) steer(frame []byte) int {
	var buf [36]byte
	in := flowHashInput(frame, &buf)
	if in == nil {
		return 0
	}
	return int(t.indir[t.hash.sum(in)%RSSIndirSize])
}
