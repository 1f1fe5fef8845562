package genl

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/transport"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seedRequests are valid and invalid request datagrams covering every
// command of the three families; they seed FuzzDispatch.
func seedRequests() map[string][]byte {
	msg := func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte {
		var b nlattr.Builder
		s := b.BeginMsg(typ, nlattr.FlagRequest|flags, 1, 7)
		b.Genl(cmd, 1)
		if fill != nil {
			fill(&b)
		}
		b.EndMsg(s)
		return b.B
	}
	hdr := func(t uint16, name string) func(b *nlattr.Builder) {
		return func(b *nlattr.Builder) {
			n := b.Nest(t)
			b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, name)
			b.EndNest(n)
		}
	}
	and := func(fs ...func(b *nlattr.Builder)) func(b *nlattr.Builder) {
		return func(b *nlattr.Builder) {
			for _, f := range fs {
				f(b)
			}
		}
	}
	verbose := func(b *nlattr.Builder) {
		f := b.Nest(unix.ETHTOOL_A_PRIVFLAGS_FLAGS)
		bits := b.Nest(unix.ETHTOOL_A_BITSET_BITS)
		bit := b.Nest(unix.ETHTOOL_A_BITSET_BITS_BIT)
		b.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, "full-page-rx")
		b.PutFlag(unix.ETHTOOL_A_BITSET_BIT_VALUE)
		b.EndNest(bit)
		b.EndNest(bits)
		b.EndNest(f)
	}
	compact := func(b *nlattr.Builder) {
		f := b.Nest(unix.ETHTOOL_A_PRIVFLAGS_FLAGS)
		b.PutU32(unix.ETHTOOL_A_BITSET_SIZE, 1)
		b.Put(unix.ETHTOOL_A_BITSET_VALUE, []byte{1, 0, 0, 0})
		b.Put(unix.ETHTOOL_A_BITSET_MASK, []byte{1, 0, 0, 0})
		b.EndNest(f)
	}
	strsets := func(b *nlattr.Builder) {
		n := b.Nest(unix.ETHTOOL_A_STRSET_STRINGSETS)
		for _, id := range []uint32{1, 2, 9} {
			s := b.Nest(unix.ETHTOOL_A_STRINGSETS_STRINGSET)
			b.PutU32(unix.ETHTOOL_A_STRINGSET_ID, id)
			b.EndNest(s)
		}
		b.EndNest(n)
		b.PutFlag(unix.ETHTOOL_A_STRSET_COUNTS_ONLY)
	}
	mhdr := hdr(wire.AttrHeader, "mana0")
	seeds := map[string][]byte{
		"getfamily":       msg(nlctrlID, 0, unix.CTRL_CMD_GETFAMILY, func(b *nlattr.Builder) { b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "ethtool") }),
		"dumpfamily":      msg(nlctrlID, nlattr.FlagDump, unix.CTRL_CMD_GETFAMILY, nil),
		"privflags_get":   msg(ethtoolID, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, hdr(1, "mana0")),
		"privflags_dump":  msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_PRIVFLAGS_GET, nil),
		"privflags_set_v": msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_PRIVFLAGS_SET, and(hdr(1, "mana0"), verbose)),
		"privflags_set_c": msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_PRIVFLAGS_SET, and(hdr(1, "mana0"), compact)),
		"strset_dev":      msg(ethtoolID, 0, unix.ETHTOOL_MSG_STRSET_GET, and(hdr(1, "mana0"), strsets)),
		"strset_dump":     msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_STRSET_GET, nil),
		"rings_set":       msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_RINGS_SET, and(hdr(1, "mana0"), func(b *nlattr.Builder) { b.PutU32(unix.ETHTOOL_A_RINGS_RX, 9000) })),
		"channels_set":    msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_CHANNELS_SET, and(hdr(1, "mana0"), func(b *nlattr.Builder) { b.PutU32(unix.ETHTOOL_A_CHANNELS_COMBINED_COUNT, 0) })),
		"channels_dump":   msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_CHANNELS_GET, nil),
		"port_dump":       msg(manadID, nlattr.FlagDump, wire.CmdPortGet, nil),
		"port_new": msg(manadID, 0, wire.CmdPortNew, func(b *nlattr.Builder) {
			n := b.Nest(wire.AttrPort)
			b.PutString(wire.PortAttrDevName, "x0")
			b.Put(wire.PortAttrMAC, []byte{2, 0, 0, 0, 0, 1})
			b.EndNest(n)
		}),
		"port_new_attrs": msg(manadID, 0, wire.CmdPortNew, func(b *nlattr.Builder) {
			n := b.Nest(wire.AttrPort)
			b.PutString(wire.PortAttrDevName, "x1")
			b.PutU8(wire.PortAttrOffload, 0)
			b.PutString(wire.PortAttrRxAlloc, "no-pool")
			b.PutU8(wire.PortAttrRxRecycle, 0)
			b.PutU32(wire.PortAttrSpeed, 25000)
			b.EndNest(n)
		}),
		"port_del_netns": msg(manadID, 0, wire.CmdPortDel, and(mhdr, func(b *nlattr.Builder) {
			n := b.Nest(wire.AttrPort)
			b.PutU8(wire.PortAttrNetNSToo, 1)
			b.EndNest(n)
		})),
		"port_del": msg(manadID, nlattr.FlagAck, wire.CmdPortDel, mhdr),
		"set_mtu":  msg(manadID, nlattr.FlagAck, wire.CmdPortSetMTU, and(mhdr, func(b *nlattr.Builder) { b.PutU32(wire.AttrMTU, 4000) })),
		"xdp_builtin": msg(manadID, nlattr.FlagAck, wire.CmdXDPAttach, and(mhdr, func(b *nlattr.Builder) {
			n := b.Nest(wire.AttrXDP)
			b.PutString(wire.XDPAttrBuiltin, "drop")
			b.EndNest(n)
		})),
		"xdp_object": msg(manadID, nlattr.FlagAck, wire.CmdXDPAttach, and(mhdr, func(b *nlattr.Builder) { b.Put(wire.AttrXDPObject, []byte("\x7fELF")) })),
		"stats_dump": msg(manadID, nlattr.FlagDump, wire.CmdStatsGet, nil),
		"layout": msg(manadID, 0, wire.CmdLayoutPlan, func(b *nlattr.Builder) {
			n := b.Nest(wire.AttrLayoutRequest)
			b.PutU32(wire.LayoutAttrPageSize, 4096)
			b.PutU32(wire.LayoutAttrMTU, 1500)
			b.PutString(wire.LayoutAttrRule, "upstream")
			b.EndNest(n)
		}),
		"fault": msg(manadID, nlattr.FlagAck, wire.CmdFaultSet, and(mhdr, func(b *nlattr.Builder) {
			n := b.Nest(wire.AttrFault)
			b.PutString(wire.FaultAttrPoint, "attach")
			b.PutString(wire.FaultAttrMode, "count")
			b.PutU32(wire.FaultAttrCount, 2)
			b.EndNest(n)
		})),
		"join": msg(manadID, nlattr.FlagAck, wire.CmdGroupJoin, func(b *nlattr.Builder) { b.PutU32(wire.AttrGroup, monitorGroup) }),
		"set_option": msg(manadID, nlattr.FlagAck, wire.CmdSetOption, func(b *nlattr.Builder) {
			b.PutU32(wire.AttrOption, unix.NETLINK_CAP_ACK)
			b.PutU8(wire.AttrOptionValue, 1)
		}),
		"linkinfo_get":   msg(ethtoolID, 0, unix.ETHTOOL_MSG_LINKINFO_GET, hdr(1, "mana0")),
		"linkinfo_set":   msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_LINKINFO_SET, and(hdr(1, "mana0"), func(b *nlattr.Builder) { b.PutU8(unix.ETHTOOL_A_LINKINFO_PORT, 0) })),
		"linkmodes_dump": msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_LINKMODES_GET, nil),
		"linkmodes_set":  msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_LINKMODES_SET, and(hdr(1, "mana0"), func(b *nlattr.Builder) { b.PutU32(unix.ETHTOOL_A_LINKMODES_LANES, 4) })),
		"linkstate_get":  msg(ethtoolID, 0, unix.ETHTOOL_MSG_LINKSTATE_GET, hdr(1, "mana0")),
		"tsinfo_dump":    msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_TSINFO_GET, nil),
		"tsinfo_stats": msg(ethtoolID, 0, unix.ETHTOOL_MSG_TSINFO_GET, func(b *nlattr.Builder) {
			n := b.Nest(unix.ETHTOOL_A_TSINFO_HEADER)
			b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
			b.PutU32(unix.ETHTOOL_A_HEADER_FLAGS, unix.ETHTOOL_FLAG_STATS|unix.ETHTOOL_FLAG_COMPACT_BITSETS)
			b.EndNest(n)
		}),
		"truncated_header": {0x20, 0, 0, 0, 0x13},
	}
	two := append(append([]byte(nil), seeds["privflags_get"]...), seeds["rings_set"]...)
	seeds["two_messages"] = two
	seeds["truncated_message"] = seeds["layout"][:len(seeds["layout"])-3]
	addNetdevSeeds(seeds, msg)
	addPolicySeeds(seeds, msg)
	addRSSSeeds(seeds, msg)
	addFeaturesSeeds(seeds, msg)
	addCoalesceSeeds(seeds, msg)
	addCaptureSeeds(seeds, msg)
	addSegmentSeeds(seeds, msg)
	addNoCallbackSeeds(seeds, msg)
	return seeds
}

// fuzzServer builds a server whose global string sets are fixed, so fuzzing
// never talks to the kernel.
func fuzzServer(t testing.TB) (*Server, *MemBackend) {
	be := NewMemBackend()
	s, err := NewServer(ServerConfig{Backend: be.Ops(), Transport: transport.Config{AdminGroup: -1}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	s.global.once.Do(func() { s.global.sets = map[uint32][]string{4: {"sg", "ip-generic"}, 9: {"10baseT/Half"}} })
	return s, be
}

// FuzzDispatch feeds arbitrary request datagrams to the dispatcher, as an
// admin or unprivileged peer. It must never panic, and everything it sends
// back must be well-formed netlink: whole messages with sane lengths.
func FuzzDispatch(f *testing.F) {
	for _, b := range seedRequests() {
		f.Add(b, true)
	}
	s, _ := fuzzServer(f)
	f.Fuzz(func(t *testing.T, data []byte, admin bool) {
		be := NewMemBackend()
		s.cfg.Backend = be.Ops()
		ns := NetNS{Dev: 1, Ino: 1}
		be.AddPlain(ns, "lo")
		d := be.AddPort(ns, "mana0")
		d.Names = []string{"full-page-rx", "b", "c"}
		be.AddPort(ns, "mana1")
		var out [][]byte
		c := newConn(s, transport.Detached(context.Background(), Caller{UID: 1, Admin: admin, NetNS: ns}, func(b []byte) error {
			out = append(out, append([]byte(nil), b...))
			return nil
		}))
		s.handleDatagram(context.Background(), c, data)
		for _, d := range out {
			checkDatagram(t, d)
		}
	})
}

func checkDatagram(t *testing.T, d []byte) {
	t.Helper()
	require.NotEmpty(t, d, "empty reply datagram")
	for len(d) > 0 {
		h, ok := nlattr.ReadHeader(d)
		require.True(t, ok, "malformed reply: % x", d)
		require.GreaterOrEqual(t, int(h.Len), nlattr.MsgHdrLen, "malformed reply: % x", d)
		require.LessOrEqual(t, int(h.Len), len(d), "malformed reply: % x", d)
		if h.Type == nlattr.MsgError {
			require.GreaterOrEqual(t, h.Len, uint32(36), "short NLMSG_ERROR: % x", d)
		}
		d = d[min(nlattr.Align(int(h.Len)), len(d)):]
	}
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzDispatch when
// GENL_WRITE_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("GENL_WRITE_CORPUS") != "1" {
		t.Skip("set GENL_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDispatch")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, b := range seedRequests() {
		for _, admin := range []bool{true, false} {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", b, admin)
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s_%v", name, admin)), []byte(content), 0o644))
		}
	}
}

// TestDispatchSeedsAnswered runs every seed through the dispatcher and
// checks each gets an answer (reply, ACK or error) with its sequence number.
func TestDispatchSeedsAnswered(t *testing.T) {
	s, be := fuzzServer(t)
	ns := NetNS{Dev: 1, Ino: 1}
	be.AddPort(ns, "mana0")
	for name, b := range seedRequests() {
		var out [][]byte
		c := newConn(s, transport.Detached(context.Background(), Caller{Admin: true, NetNS: ns}, func(b []byte) error { out = append(out, append([]byte(nil), b...)); return nil }))
		s.handleDatagram(context.Background(), c, b)
		if len(out) == 0 {
			t.Errorf("%s: no answer", name)
			continue
		}
		for _, d := range out {
			checkDatagram(t, d)
		}
		if name != "truncated_header" {
			assert.Equal(t, uint32(1), binary.NativeEndian.Uint32(out[0][8:]), "%s: seq not echoed", name)
		}
	}
}

// FuzzAtConnLimit drives the server at its connection limit over a real socket: a peer that
// is refused sends one arbitrary datagram and must get one well-formed EUSERS answer (when
// its datagram holds a header) and a closed connection, never a panic; an admitted root
// peer at the same moment sends the same datagram and gets well-formed answers.
func FuzzAtConnLimit(f *testing.F) {
	for _, b := range seedRequests() {
		f.Add(b)
	}
	for _, n := range []uint32{0, 15, 16, 17, 1 << 20, 0xffffffff} {
		b := append([]byte(nil), seedRequests()["privflags_get"]...)
		binary.NativeEndian.PutUint32(b, n)
		f.Add(b)
	}
	ns := NetNS{Dev: 1, Ino: 1}
	be := NewMemBackend()
	be.AddPort(ns, "mana0")
	s, err := NewServer(ServerConfig{Backend: be.Ops(), Transport: transport.Config{AdminGroup: -1, MaxConns: 1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(f, err)
	s.global.once.Do(func() { s.global.sets = map[uint32][]string{4: {"sg", "ip-generic"}, 9: {"10baseT/Half"}} })
	// The one slot is taken, by a connection that stays until the end.
	holder, huc := socketPair(f)
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan struct{})
	go func() {
		defer close(held)
		s.t.ServeConn(ctx, huc, Caller{UID: 1000, NetNS: ns})
	}()
	f.Cleanup(func() { cancel(); holder.Close(); <-held })
	var noop [nlattr.MsgHdrLen]byte
	binary.NativeEndian.PutUint32(noop[0:], nlattr.MsgHdrLen)
	binary.NativeEndian.PutUint16(noop[4:], unix.NLMSG_NOOP)
	binary.NativeEndian.PutUint16(noop[6:], nlattr.FlagRequest|nlattr.FlagAck)
	_, err = holder.Write(noop[:])
	require.NoError(f, err)
	ack := make([]byte, 4096)
	require.NoError(f, holder.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := holder.Read(ack)
	require.NoError(f, err)
	require.Zero(f, binary.NativeEndian.Uint32(ack[nlattr.MsgHdrLen:n]), "the holder's NOOP was refused")
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), 64<<10)] // what one write on a default socket carries
		for _, caller := range []Caller{{UID: 65534, NetNS: ns}, {UID: 0, Admin: true, NetNS: ns}} {
			peer, uc := socketPair(t)
			if _, err := peer.Write(data); err != nil {
				t.Fatal(err)
			}
			// The peer has said all it will: the server sees EOF after the datagram.
			require.NoError(t, unix.Shutdown(connFD(t, peer), unix.SHUT_WR))
			s.t.ServeConn(context.Background(), uc, caller)
			var answers int
			buf := make([]byte, 1<<20)
			for {
				_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
				n, err := peer.Read(buf)
				if err != nil {
					break
				}
				checkDatagram(t, buf[:n])
				answers++
			}
			peer.Close()
			if caller.UID != 0 && len(data) >= nlattr.MsgHdrLen {
				require.Equal(t, 1, answers, "refused peer got %d answers, want 1 (EUSERS)", answers)
			}
		}
	})
}

// socketPair returns the two ends of a connected SOCK_SEQPACKET pair: the peer's and the
// server's.
func socketPair(t testing.TB) (peer, server *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	ends := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "seqpacket")
		c, err := net.FileConn(f)
		f.Close()
		require.NoError(t, err)
		ends[i] = c.(*net.UnixConn)
	}
	return ends[0], ends[1]
}

func connFD(t testing.TB, c *net.UnixConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	var fd int
	_ = rc.Control(func(p uintptr) { fd = int(p) })
	return fd
}
