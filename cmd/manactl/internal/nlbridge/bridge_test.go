package nlbridge

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// world is one manad with one port in its own namespace, and a veth pair in that namespace.
type world struct {
	d          *harness.Daemon
	ns         string
	port, veth string
	rxRing     uint32
}

func startWorld(t *testing.T) *world {
	t.Helper()
	w := &world{ns: harness.Name("nlb", ""), port: harness.Name("nbp", "0"), veth: harness.Name("nbv", "0"), rxRing: 256}
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\nrx_ring = %d\npersistent = false\n",
		w.port, w.ns, w.rxRing)
	w.d = harness.Start(t, "", "", ports, w.ns)
	harness.Run(t, "", "ip", "-n", w.ns, "link", "add", w.veth, "type", "veth", "peer", "name", harness.Name("nbw", "0"))
	return w
}

func (w *world) inNS(f func() error) error { return harness.InNetNS(w.ns, f) }

// ifindex resolves a device of the world's namespace.
func (w *world) ifindex(t *testing.T, name string) uint32 {
	t.Helper()
	var idx uint32
	require.NoError(t, w.inNS(func() error {
		k, err := openKernel()
		if err != nil {
			return err
		}
		defer k.Close()
		idx = k.ifindex(name)
		return nil
	}))
	require.NotZero(t, idx, name)
	return idx
}

// prog is the program's end of a bridged socket.
type prog struct {
	t    *testing.T
	fd   int
	s    *Socket
	errc chan error
	seq  uint32
}

// openProg opens a bridged socket for the world's namespace and serves it over a socketpair.
func openProg(t *testing.T, w *world) *prog { return openProgWith(t, w, nil) }

// openProgWith is openProg with setup applied to the bridge's end of the pair first.
func openProgWith(t *testing.T, w *world, setup func(fd int)) *prog {
	t.Helper()
	s, err := Open(context.Background(), Options{ManadPath: w.d.Socket, InNetNS: w.inNS})
	require.NoError(t, err)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	if setup != nil {
		setup(fds[0])
	}
	p := &prog{t: t, fd: fds[1], s: s, errc: make(chan error, 1), seq: 100}
	go func() { p.errc <- s.Serve(context.Background(), os.NewFile(uintptr(fds[0]), "peer")) }()
	t.Cleanup(func() { p.close() })
	return p
}

// close closes the program's end and waits for Serve to end.
func (p *prog) close() {
	if p.fd < 0 {
		return
	}
	unix.Close(p.fd)
	p.fd = -1
	select {
	case err := <-p.errc:
		assert.NoError(p.t, err)
	case <-time.After(10 * time.Second):
		p.t.Error("Serve did not return after the program closed its socket")
	}
}

func (p *prog) send(m []byte) {
	p.t.Helper()
	_, err := unix.Write(p.fd, m)
	require.NoError(p.t, err)
}

// recv reads one datagram within timeout; nil when none came.
func (p *prog) recv(timeout time.Duration) []byte {
	p.t.Helper()
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(timeout/time.Millisecond))
	if err != nil || n == 0 {
		return nil
	}
	buf := make([]byte, 1<<16)
	got, err := unix.Read(p.fd, buf)
	require.NoError(p.t, err)
	return buf[:got]
}

// answer collects the messages answering a request: until its NLMSG_ERROR, NLMSG_DONE, or (for a
// do without ACK) the first reply.
func (p *prog) answer(stopAtReply bool) [][]byte {
	p.t.Helper()
	var out [][]byte
	for {
		d := p.recv(5 * time.Second)
		require.NotNil(p.t, d, "no answer within 5s")
		msgs, rest := splitMsgs(d)
		require.Empty(p.t, rest)
		for _, m := range msgs {
			out = append(out, m)
			switch msgType(m) {
			case nlattr.MsgError, nlattr.MsgDone:
				return out
			}
			if stopAtReply {
				return out
			}
		}
	}
}

// req builds a request of family typ.
func (p *prog) req(typ uint16, flags uint16, cmd, version uint8, attrs func(b *nlattr.Builder)) []byte {
	p.seq++
	return buildReq(typ, flags, p.seq, 0, cmd, version, attrs)
}

func devHeader(idx uint32, name string) func(b *nlattr.Builder) {
	return func(b *nlattr.Builder) {
		n := b.Nest(unix.ETHTOOL_A_HEADER_DEV_INDEX)
		if idx != 0 {
			b.PutU32(unix.ETHTOOL_A_HEADER_DEV_INDEX, idx)
		}
		if name != "" {
			b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, name)
		}
		b.EndNest(n)
	}
}

// kernelAnswer sends m on a plain kernel socket of the world's namespace and returns its answer,
// as the reference for what the program must see.
func kernelAnswer(t *testing.T, w *world, m []byte, stopAtReply bool) (msgs [][]byte, portid uint32) {
	t.Helper()
	var k *ksock
	require.NoError(t, w.inNS(func() (err error) { k, err = openKernel(); return err }))
	defer k.Close()
	require.NoError(t, k.send(m))
	nl, err := k.sockname()
	require.NoError(t, err)
	_ = k.f.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		d, _, err := k.recv()
		require.NoError(t, err)
		ms, _ := splitMsgs(d)
		for _, x := range ms {
			msgs = append(msgs, x)
			if t := msgType(x); t == nlattr.MsgError || t == nlattr.MsgDone || stopAtReply {
				return msgs, nl.Pid
			}
		}
	}
}

func genlPayload(m []byte) []byte { return m[nlattr.MsgHdrLen:] }

func TestBridgeComponent(t *testing.T) {
	w := startWorld(t)
	before := goleak.IgnoreCurrent()
	p := openProg(t, w)
	s := p.s
	portIdx, vethIdx := w.ifindex(t, w.port), w.ifindex(t, w.veth)

	t.Run("GetFamilyEthtoolIsTheKernels", func(t *testing.T) {
		m := p.req(unix.GENL_ID_CTRL, nlattr.FlagAck, unix.CTRL_CMD_GETFAMILY, 1, func(b *nlattr.Builder) {
			b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "ethtool")
		})
		p.send(m)
		got := p.answer(false)
		require.Len(t, got, 2) // NEWFAMILY + ACK
		want, kpid := kernelAnswer(t, w, m, false)
		require.Len(t, want, 2)
		f, ok := parseFamily(got[0])
		require.True(t, ok)
		assert.Equal(t, s.kEthtool, f.id)
		assert.Equal(t, genlPayload(want[0]), genlPayload(got[0]), "the kernel's NEWFAMILY, ops and groups")
		assert.Equal(t, s.PortID(), binary.NativeEndian.Uint32(got[0][12:]))
		assert.NotZero(t, kpid)
	})

	t.Run("GetFamilyManadIsTranslated", func(t *testing.T) {
		p.send(p.req(unix.GENL_ID_CTRL, 0, unix.CTRL_CMD_GETFAMILY, 1, func(b *nlattr.Builder) {
			b.PutString(unix.CTRL_ATTR_FAMILY_NAME, "manad")
		}))
		got := p.answer(true)
		require.Len(t, got, 1)
		f, ok := parseFamily(got[0])
		require.True(t, ok)
		assert.Equal(t, s.rManad, f.id)
		assert.NotEqual(t, s.mManad, f.id)
		require.Contains(t, f.groups, "events")
		assert.Equal(t, s.manadGroupIDs[s.mEvents], f.groups["events"])
		// The id the program got resolves back to manad.
		p.send(p.req(unix.GENL_ID_CTRL, 0, unix.CTRL_CMD_GETFAMILY, 1, func(b *nlattr.Builder) {
			b.PutU16(unix.CTRL_ATTR_FAMILY_ID, f.id)
		}))
		got = p.answer(true)
		f2, ok := parseFamily(got[0])
		require.True(t, ok)
		assert.Equal(t, "manad", f2.name)
	})

	t.Run("FamilyDumpIsKernelsPlusManad", func(t *testing.T) {
		p.send(p.req(unix.GENL_ID_CTRL, nlattr.FlagDump, unix.CTRL_CMD_GETFAMILY, 1, nil))
		got := p.answer(false)
		names := map[string]uint16{}
		dones := 0
		for _, m := range got {
			if msgType(m) == nlattr.MsgDone {
				dones++
				continue
			}
			f, ok := parseFamily(m)
			require.True(t, ok)
			_, dup := names[f.name]
			assert.False(t, dup, "family %s twice", f.name)
			names[f.name] = f.id
		}
		assert.Equal(t, 1, dones)
		assert.Equal(t, s.kEthtool, names["ethtool"])
		assert.Equal(t, s.rManad, names["manad"])
		assert.Contains(t, names, "nlctrl")
	})

	t.Run("PrivFlagsOfThePortAreManads", func(t *testing.T) {
		p.send(p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, devHeader(0, w.port)))
		got := p.answer(true)
		require.Len(t, got, 1)
		assert.Equal(t, s.kEthtool, msgType(got[0]))
		assert.Equal(t, uint8(unix.ETHTOOL_MSG_PRIVFLAGS_GET_REPLY), got[0][nlattr.MsgHdrLen])
		assert.Contains(t, string(got[0]), "full-page-rx")
		assert.Equal(t, p.seq, binary.NativeEndian.Uint32(got[0][8:]))
		assert.Equal(t, s.PortID(), binary.NativeEndian.Uint32(got[0][12:]))
	})

	t.Run("RingsOfThePortAreManads", func(t *testing.T) {
		p.send(p.req(s.kEthtool, nlattr.FlagAck, unix.ETHTOOL_MSG_RINGS_GET, 1, devHeader(portIdx, "")))
		got := p.answer(false)
		require.Len(t, got, 2)
		rx, ok := u32Of(genlAttr(got[0], unix.ETHTOOL_A_RINGS_RX))
		require.True(t, ok)
		assert.Equal(t, w.rxRing, rx)
		errno, _ := errnoOf(got[1])
		assert.Zero(t, errno)
	})

	t.Run("RequestAnswersInsideTheSend", func(t *testing.T) {
		// What a trapped sendmsg offers the bridge: the answer is on the program's end when
		// Request returns, and is the one the pair's path gives.
		readable := func() bool {
			fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 0)
			return err == nil && n == 1
		}
		for _, c := range []struct {
			name  string
			flags uint16
			cmd   uint8
			hdr   func(*nlattr.Builder)
			msgs  int
		}{
			{"manad's port", 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, devHeader(0, w.port), 1},
			{"manad's port, with an ACK", nlattr.FlagAck, unix.ETHTOOL_MSG_RINGS_GET, devHeader(portIdx, ""), 2},
			{"the kernel's veth", 0, unix.ETHTOOL_MSG_CHANNELS_GET, devHeader(vethIdx, ""), 1},
			{"another GET of the port", 0, unix.ETHTOOL_MSG_PAUSE_GET, devHeader(portIdx, ""), 1},
		} {
			m := p.req(s.kEthtool, c.flags, c.cmd, 1, c.hdr)
			p.send(m)
			want := p.answer(c.msgs == 1)
			// The pair's path ends the request just after its answer is written; until
			// then Request leaves the next one to the pair (it keeps the order).
			require.Eventually(t, func() bool { return !s.Busy() }, 5*time.Second, time.Millisecond)
			require.True(t, s.Request(m), c.name)
			require.True(t, readable(), "%s: no answer when Request returned", c.name)
			got := p.answer(c.msgs == 1)
			assert.Equal(t, want, got, c.name)
			assert.Len(t, got, c.msgs, c.name)
		}
		// A dump's rest waits for the program's reads: it takes the pair's path.
		assert.False(t, s.Request(p.req(s.kEthtool, nlattr.FlagDump, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(0, ""))))
		// Two messages in one datagram: likewise.
		two := append(p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, devHeader(portIdx, "")),
			p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, devHeader(portIdx, ""))...)
		assert.False(t, s.Request(two))
		assert.False(t, readable(), "a refused datagram was answered")
	})

	t.Run("ChannelsOfTheVethAreTheKernelsBytes", func(t *testing.T) {
		m := p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(0, w.veth))
		p.send(m)
		got := p.answer(true)
		want, kpid := kernelAnswer(t, w, m, true)
		require.Len(t, got, 1)
		require.Len(t, want, 1)
		require.Equal(t, s.kEthtool, msgType(want[0]), "veth has channels")
		g := append([]byte(nil), got[0]...)
		putPID(g, kpid)
		assert.Equal(t, want[0], g)
	})

	t.Run("DumpMergesWithOneDone", func(t *testing.T) {
		p.send(p.req(s.kEthtool, nlattr.FlagDump, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(0, "")))
		got := p.answer(false)
		seen := map[uint32]int{}
		dones := 0
		for _, m := range got {
			switch msgType(m) {
			case nlattr.MsgDone:
				dones++
				errno, _ := errnoOf(m)
				assert.Zero(t, errno)
			case s.kEthtool:
				idx, _ := ethtoolDev(m)
				seen[idx]++
			default:
				t.Errorf("unexpected message type %d", msgType(m))
			}
		}
		assert.Equal(t, 1, dones)
		assert.Equal(t, 1, seen[portIdx], "the port once, from manad")
		assert.Equal(t, 1, seen[vethIdx], "the veth, from the kernel")
	})

	t.Run("RingsSetBadValueExtack", func(t *testing.T) {
		_, err := s.SetOption(unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, []byte{1, 0, 0, 0})
		require.NoError(t, err)
		defer s.SetOption(unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, []byte{0, 0, 0, 0})
		rxOff := 0
		m := p.req(s.kEthtool, nlattr.FlagAck, unix.ETHTOOL_MSG_RINGS_SET, 1, func(b *nlattr.Builder) {
			devHeader(0, w.port)(b)
			rxOff = b.Len()
			b.PutU32(unix.ETHTOOL_A_RINGS_RX, 1<<30)
		})
		p.send(m)
		got := p.answer(false)
		require.Len(t, got, 1)
		e := got[0]
		h, _ := nlattr.ReadHeader(e)
		errno, _ := errnoOf(e)
		assert.Equal(t, unix.EINVAL, errno)
		assert.NotZero(t, h.Flags&nlattr.FlagAckTLVs, "extack TLVs")
		assert.Equal(t, m, e[errOff:errOff+len(m)], "the program's request echoed as sent")
		assert.Equal(t, "requested ring size exceeds maximum", extackMsg(e), "rings_set's message")
		assert.Equal(t, uint32(rxOff), extackOffs(e), "NLMSGERR_ATTR_OFFS blames ETHTOOL_A_RINGS_RX")
		// The kernel's own answer to the same kind of error, for a veth: the same shape.
		k := p.req(s.kEthtool, nlattr.FlagAck, unix.ETHTOOL_MSG_CHANNELS_SET, 1, func(b *nlattr.Builder) {
			devHeader(0, w.veth)(b)
			b.PutU32(unix.ETHTOOL_A_CHANNELS_RX_COUNT, 1000)
		})
		p.send(k)
		kg := p.answer(false)
		require.Len(t, kg, 1)
		kh, _ := nlattr.ReadHeader(kg[0])
		kerr, _ := errnoOf(kg[0])
		require.Equal(t, unix.EINVAL, kerr)
		assert.NotEmpty(t, extackMsg(kg[0]))
		assert.Equal(t, kh.Flags, h.Flags, "same NLM_F_CAPPED/ACK_TLVS shape as the kernel")
		assert.Equal(t, k, kg[0][errOff:errOff+len(k)])
		// Without NETLINK_EXT_ACK, no TLVs; with NETLINK_CAP_ACK, no echoed payload: as the kernel.
		_, err = s.SetOption(unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, []byte{0, 0, 0, 0})
		require.NoError(t, err)
		_, err = s.SetOption(unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, []byte{1, 0, 0, 0})
		require.NoError(t, err)
		defer s.SetOption(unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, []byte{0, 0, 0, 0})
		p.seq++
		binary.NativeEndian.PutUint32(m[8:], p.seq)
		p.send(m)
		got = p.answer(false)
		require.Len(t, got, 1)
		h, _ = nlattr.ReadHeader(got[0])
		assert.Equal(t, nlattr.FlagCapped, h.Flags)
		assert.Len(t, got[0], errOff+nlattr.MsgHdrLen)
		assert.Equal(t, m[:nlattr.MsgHdrLen], got[0][errOff:])
	})

	t.Run("MonitorSeesManadNotification", func(t *testing.T) {
		mon := s.fromManadGroup[s.mMonitor]
		require.NotZero(t, mon)
		v := make([]byte, 4)
		binary.NativeEndian.PutUint32(v, mon)
		_, err := s.SetOption(unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, v)
		require.NoError(t, err)
		c := w.d.Client(w.ns)
		require.NoError(t, c.SetPrivateFlags(context.Background(), client.PrivateFlags{
			Interface: client.Interface{Name: w.port}, Flags: []client.Flag{{Name: "full-page-rx", On: true}}}))
		ntf, d := waitNtfDatagram(p, s.kEthtool, unix.ETHTOOL_MSG_PRIVFLAGS_NTF)
		require.NotNil(t, ntf, "PRIVFLAGS_NTF with the kernel's ethtool id")
		idx, _ := ethtoolDev(ntf)
		assert.Equal(t, portIdx, idx)
		assert.Equal(t, ntf, d, "a notification is a datagram of its own, as the kernel multicasts it")
		// Where it came from, for the program's msg_name and NETLINK_PKTINFO.
		_, err = s.SetOption(unix.SOL_NETLINK, unix.NETLINK_PKTINFO, []byte{1, 0, 0, 0})
		require.NoError(t, err)
		from, g, pktinfo := s.Origin(d, false)
		assert.Zero(t, from, "manad sends as the kernel")
		assert.Equal(t, mon, g, "manad's notification: the kernel's monitor group")
		assert.True(t, pktinfo)
		_, g, _ = s.Origin(d, true)
		assert.Equal(t, mon, g, "a peek leaves the record")
		_, g, _ = s.Origin(d, true)
		assert.Zero(t, g, "consumed")
		// The kernel's own notification, about the veth (to a bound socket: the kernel
		// multicasts to no socket whose port id is 0, its own).
		require.NoError(t, s.ensureBound())
		gro := "on"
		if strings.Contains(harness.Run(t, w.ns, "ethtool", "-k", w.veth), "generic-receive-offload: on") {
			gro = "off"
		}
		harness.Run(t, w.ns, "ethtool", "-K", w.veth, "gro", gro)
		ntf, d = waitNtfDatagram(p, s.kEthtool, unix.ETHTOOL_MSG_FEATURES_NTF)
		require.NotNil(t, ntf, "the kernel's FEATURES_NTF for the veth")
		_, g, _ = s.Origin(d, true)
		assert.Equal(t, mon, g, "the kernel's notification: its group")
		// An answer.
		p.send(p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(portIdx, "")))
		d = p.recv(5 * time.Second)
		require.NotEmpty(t, d)
		_, g, _ = s.Origin(d, true)
		assert.Zero(t, g, "an answer")
		_, err = s.SetOption(unix.SOL_NETLINK, unix.NETLINK_PKTINFO, []byte{0, 0, 0, 0})
		require.NoError(t, err)
		_, _, pktinfo = s.Origin(d, false)
		assert.False(t, pktinfo)
		_, err = s.SetOption(unix.SOL_NETLINK, unix.NETLINK_DROP_MEMBERSHIP, v)
		require.NoError(t, err)
	})

	t.Run("NetdevDumpHasThePortOnce", func(t *testing.T) {
		require.NotZero(t, s.kNetdev, "the kernel's netdev family")
		p.send(p.req(s.kNetdev, nlattr.FlagDump, 1, 1, nil)) // dev-get
		got := p.answer(false)
		seen := map[uint32]int{}
		dones := 0
		for _, m := range got {
			switch msgType(m) {
			case nlattr.MsgDone:
				dones++
			case s.kNetdev:
				idx, _ := u32Of(genlAttr(m, 1))
				seen[idx]++
			default:
				t.Errorf("unexpected message type %d", msgType(m))
			}
		}
		assert.Equal(t, 1, dones)
		assert.Equal(t, 1, seen[portIdx], "the port once, from manad (the kernel's tun entry dropped)")
		assert.Equal(t, 1, seen[vethIdx])
	})

	t.Run("PagePoolByIDIsManads", func(t *testing.T) {
		harness.Run(t, w.ns, "ip", "link", "set", w.port, "up")
		t.Cleanup(func() { harness.RunErr(w.ns, "ip", "link", "set", w.port, "down") })
		// A fresh socket has learned no ids: its first by-id request asks manad's dumps.
		q := openProg(t, w)
		var pool uint64
		harness.Eventually(t, "the port's page pools", func() bool {
			q.send(q.req(q.s.kNetdev, nlattr.FlagDump, wire.NetdevCmdPagePoolGet, 1, nil))
			for _, m := range q.answer(false) {
				if idx, _ := u32Of(genlAttr(m, wire.NetdevAPagePoolIfindex)); msgType(m) == q.s.kNetdev && idx == portIdx {
					pool, _ = uintOf(genlAttr(m, wire.NetdevAPagePoolID))
				}
			}
			return pool != 0
		})
		fresh := openProg(t, w)
		fresh.send(fresh.req(fresh.s.kNetdev, 0, wire.NetdevCmdPagePoolGet, 1, func(b *nlattr.Builder) {
			b.PutU32(wire.NetdevAPagePoolID, uint32(pool))
		}))
		got := fresh.answer(true)
		require.Len(t, got, 1)
		require.Equal(t, fresh.s.kNetdev, msgType(got[0]), "manad's page pool, not the kernel's ENOENT")
		idx, _ := u32Of(genlAttr(got[0], wire.NetdevAPagePoolIfindex))
		assert.Equal(t, portIdx, idx)
		assert.GreaterOrEqual(t, pool, uint64(idBase), "manad's ids in a range of their own")

		// NAPI ids likewise: from the port's queues, to napi-get by id, and manad's own
		// number (which the kernel may use too) is the kernel's to answer.
		fresh.send(fresh.req(fresh.s.kNetdev, nlattr.FlagDump, wire.NetdevCmdQueueGet, 1, func(b *nlattr.Builder) {
			b.PutU32(wire.NetdevAQueueIfindex, portIdx)
		}))
		var napi uint32
		for _, m := range fresh.answer(false) {
			if v, ok := u32Of(genlAttr(m, wire.NetdevAQueueNAPIID)); ok && msgType(m) == fresh.s.kNetdev {
				napi = v
			}
		}
		require.GreaterOrEqual(t, napi, uint32(idBase), "the port's queues name their NAPIs in manad's range")
		fresh.send(fresh.req(fresh.s.kNetdev, 0, wire.NetdevCmdNAPIGet, 1, func(b *nlattr.Builder) {
			b.PutU32(wire.NetdevANAPIID, napi)
		}))
		got = fresh.answer(true)
		require.Len(t, got, 1)
		require.Equal(t, fresh.s.kNetdev, msgType(got[0]), "manad's NAPI")
		id, _ := u32Of(genlAttr(got[0], wire.NetdevANAPIID))
		assert.Equal(t, napi, id)
		idx, _ = u32Of(genlAttr(got[0], wire.NetdevANAPIIfindex))
		assert.Equal(t, portIdx, idx)
		fresh.send(fresh.req(fresh.s.kNetdev, 0, wire.NetdevCmdNAPIGet, 1, func(b *nlattr.Builder) {
			b.PutU32(wire.NetdevANAPIID, napi-idBase)
		}))
		for _, m := range fresh.answer(true) {
			idx, _ := u32Of(genlAttr(m, wire.NetdevANAPIIfindex))
			assert.NotEqual(t, portIdx, idx, "manad's own number is the kernel's to answer")
		}
		fresh.close()
		q.close()
	})

	t.Run("ConnectedToAnotherSocket", func(t *testing.T) {
		// A plain generic-netlink socket of the namespace, as another program's.
		var other int
		require.NoError(t, w.inNS(func() (err error) {
			other, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
			if err == nil {
				err = unix.Bind(other, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
			}
			return err
		}))
		t.Cleanup(func() { unix.Close(other) })
		require.NoError(t, unix.SetsockoptTimeval(other, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}))
		sa, err := unix.Getsockname(other)
		require.NoError(t, err)
		otherPID := sa.(*unix.SockaddrNetlink).Pid
		q := openProg(t, w)
		require.NoError(t, q.s.Connect(&unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: otherPID}))
		m := q.req(q.s.kEthtool, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, devHeader(portIdx, ""))
		q.send(m)
		buf := make([]byte, 4096)
		n, from, err := unix.Recvfrom(other, buf, 0)
		require.NoError(t, err, "the datagram reaches the socket the program connected to")
		assert.Equal(t, m, buf[:n], "untouched")
		assert.Equal(t, q.s.PortID(), from.(*unix.SockaddrNetlink).Pid, "from the program's port id")
		// Its answer comes back.
		answer := msg(0x30, 0, 7, otherPID, 1, nil)
		require.NoError(t, unix.Sendto(other, answer, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: q.s.PortID()}))
		got := q.recv(5 * time.Second)
		assert.Equal(t, answer, got)
		sender, g, _ := q.s.Origin(got, true)
		assert.Equal(t, otherPID, sender, "from the other socket's port id, as netlink_recvmsg's msg_name says")
		assert.Zero(t, g)
		// Connected to the kernel again: bridged again, the port's request is manad's.
		require.NoError(t, q.s.Connect(&unix.SockaddrNetlink{Family: unix.AF_NETLINK}))
		q.send(m)
		got2 := q.answer(true)
		require.Len(t, got2, 1)
		assert.Equal(t, q.s.kEthtool, msgType(got2[0]), "manad's PRIVFLAGS_GET answer")
		q.close()
	})

	t.Run("ManadFamilyUnderItsTranslatedID", func(t *testing.T) {
		p.send(p.req(s.rManad, nlattr.FlagDump, 1, 1, nil)) // PORT_GET dump
		got := p.answer(false)
		require.Len(t, got, 2, "one port and DONE")
		assert.Equal(t, s.rManad, msgType(got[0]))
		assert.Equal(t, nlattr.MsgDone, msgType(got[1]))
	})

	t.Run("TwoMessagesInOneDatagram", func(t *testing.T) {
		a := p.req(s.kEthtool, nlattr.FlagAck, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(vethIdx, ""))
		b := p.req(s.kEthtool, nlattr.FlagAck, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(portIdx, ""))
		p.send(appendMsg(appendMsg(nil, a), b))
		first := p.answer(false)
		second := p.answer(false)
		require.Len(t, first, 2)
		require.Len(t, second, 2)
		i1, _ := ethtoolDev(first[0])
		i2, _ := ethtoolDev(second[0])
		assert.Equal(t, vethIdx, i1, "answers in the order of the requests")
		assert.Equal(t, portIdx, i2)
	})

	t.Run("MalformedDatagramsAreTheKernels", func(t *testing.T) {
		p.send([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
		bad := p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(portIdx, ""))
		binary.NativeEndian.PutUint32(bad, 4096) // nlmsg_len past the datagram
		p.send(bad)
		assert.Nil(t, p.recv(200*time.Millisecond), "the kernel ignores a truncated datagram")
		// A genl request too short for its genlmsghdr, on the kernel's ethtool id: the kernel's EINVAL.
		short := p.req(s.kEthtool, nlattr.FlagAck, 0, 1, nil)[:nlattr.MsgHdrLen]
		binary.NativeEndian.PutUint32(short, nlattr.MsgHdrLen)
		p.send(short)
		got := p.answer(false)
		require.Len(t, got, 1)
		errno, _ := errnoOf(got[0])
		assert.Equal(t, unix.EINVAL, errno)
		// The socket still works.
		p.send(p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(portIdx, "")))
		assert.Equal(t, s.kEthtool, msgType(p.answer(true)[0]))
	})

	t.Run("BindGroupsAndPortID", func(t *testing.T) {
		mon := s.fromManadGroup[s.mMonitor]
		if mon > 32 {
			t.Skipf("the kernel's ethtool monitor group is %d, beyond bind's mask", mon)
		}
		pid := s.PortID()
		require.NotZero(t, pid)
		assert.ErrorIs(t, s.Bind(&unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: pid + 1}), unix.EINVAL, "bound: another pid is the kernel's EINVAL")
		require.NoError(t, s.Bind(&unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: pid, Groups: 1 << (mon - 1)}))
		la := s.LocalAddr()
		assert.Equal(t, pid, la.Pid)
		assert.Equal(t, uint32(1<<(mon-1)), la.Groups)
		c := w.d.Client(w.ns)
		require.NoError(t, c.SetPrivateFlags(context.Background(), client.PrivateFlags{
			Interface: client.Interface{Name: w.port}, Flags: []client.Flag{{Name: "full-page-rx", On: false}}}))
		assert.NotNil(t, waitNtf(p, s.kEthtool, unix.ETHTOOL_MSG_PRIVFLAGS_NTF), "PRIVFLAGS_NTF after bind's nl_groups")
		require.NoError(t, s.Bind(&unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: pid}))
		assert.Zero(t, s.LocalAddr().Groups)
	})

	t.Run("RenamedPortIsStillManads", func(t *testing.T) {
		renamed := harness.Name("nbr", "0")
		harness.Run(t, w.ns, "ip", "link", "set", w.port, "down")
		harness.Run(t, w.ns, "ip", "link", "set", w.port, "name", renamed)
		t.Cleanup(func() { harness.RunErr(w.ns, "ip", "link", "set", renamed, "name", w.port) })
		p.send(p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, devHeader(0, renamed)))
		got := p.answer(true)
		require.Len(t, got, 1)
		require.Equal(t, s.kEthtool, msgType(got[0]), "manad's answer, not the kernel's EOPNOTSUPP for a tun")
		idx, name := ethtoolDev(got[0])
		assert.Equal(t, portIdx, idx)
		assert.Equal(t, renamed, name)
		harness.Run(t, w.ns, "ip", "link", "set", renamed, "name", w.port)
	})

	t.Run("FullProgramSocketIsENOBUFS", func(t *testing.T) {
		q := openProgWith(t, w, func(fd int) {
			// The bridge's end can hold only a few datagrams.
			require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1))
		})
		mon := q.s.fromManadGroup[q.s.mMonitor]
		v := make([]byte, 4)
		binary.NativeEndian.PutUint32(v, mon)
		_, err := q.s.SetOption(unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, v)
		require.NoError(t, err)
		c := w.d.Client(w.ns)
		for i := range 40 {
			require.NoError(t, c.SetPrivateFlags(context.Background(), client.PrivateFlags{
				Interface: client.Interface{Name: w.port}, Flags: []client.Flag{{Name: "full-page-rx", On: i%2 == 0}}}))
		}
		harness.Eventually(t, "ENOBUFS pending", func() bool { return q.s.pending.Load() })
		assert.ErrorIs(t, q.s.PendingError(), unix.ENOBUFS)
		assert.NoError(t, q.s.PendingError(), "reported once")
		for q.recv(50*time.Millisecond) != nil {
		}
		q.close()
	})

	t.Run("ServeEndsWithItsContext", func(t *testing.T) {
		q, err := Open(context.Background(), Options{ManadPath: w.d.Socket, InNetNS: w.inNS})
		require.NoError(t, err)
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		defer unix.Close(fds[1])
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- q.Serve(ctx, os.NewFile(uintptr(fds[0]), "peer")) }()
		_, err = unix.Write(fds[1], buildReq(q.kEthtool, 0, 1, 0, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(portIdx, "")))
		require.NoError(t, err)
		cancel()
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not end with its context")
		}
		// The bridge's end is closed: the program reads end of file after any answer (or
		// ECONNRESET, when the bridge closed before it read the request, as unix_release_sock
		// reports unread data).
		for {
			b := make([]byte, 4096)
			n, err := unix.Read(fds[1], b)
			if errors.Is(err, unix.ECONNRESET) {
				break
			}
			require.NoError(t, err)
			if n == 0 {
				break
			}
		}
	})

	t.Run("ManadGoneIsAnErrorNotAHang", func(t *testing.T) {
		// Kernel requests keep working after this; the port is manad's, requests for it fail.
		w.d.Kill9()
		_, err := s.SetOption(unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, []byte{1, 0, 0, 0})
		require.NoError(t, err)
		harness.Eventually(t, "the bridge to see manad gone", s.manadDead.Load)
		p.send(p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_RINGS_GET, 1, devHeader(portIdx, "")))
		got := p.answer(true)
		require.Len(t, got, 1)
		errno, _ := errnoOf(got[0])
		assert.Equal(t, unix.ECONNREFUSED, errno)
		assert.True(t, strings.Contains(extackMsg(got[0]), "manad is not running at "+w.d.Socket), extackMsg(got[0]))
		// Kernel requests still work.
		p.send(p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(vethIdx, "")))
		got = p.answer(true)
		require.Len(t, got, 1)
		assert.Equal(t, s.kEthtool, msgType(got[0]))
		// A dump: the kernel's devices, no tun entry for the port, and manad's absence in DONE.
		p.send(p.req(s.kEthtool, nlattr.FlagDump, unix.ETHTOOL_MSG_CHANNELS_GET, 1, devHeader(0, "")))
		got = p.answer(false)
		seen := map[uint32]bool{}
		for _, m := range got[:len(got)-1] {
			idx, _ := ethtoolDev(m)
			seen[idx] = true
		}
		assert.True(t, seen[vethIdx])
		assert.False(t, seen[portIdx], "the kernel's tun entry for the port is dropped")
		done := got[len(got)-1]
		require.Equal(t, nlattr.MsgDone, msgType(done))
		errno, _ = errnoOf(done)
		assert.Equal(t, unix.ECONNREFUSED, errno)
		assert.Contains(t, extackMsg(done), "manad is not running")

		// manad restarted: the next request that needs it, a second or more after the last try,
		// connects again, with the program's options and groups.
		w.d.Restart()
		deadline := time.Now().Add(10 * time.Second)
		var last []byte
		for time.Now().Before(deadline) {
			p.send(p.req(s.kEthtool, 0, unix.ETHTOOL_MSG_PRIVFLAGS_GET, 1, devHeader(0, w.port)))
			last = p.answer(true)[0]
			if msgType(last) == s.kEthtool {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		require.Equal(t, s.kEthtool, msgType(last), "manad's answer once it is back")
		assert.Contains(t, string(last), "full-page-rx")
		assert.False(t, s.manadDead.Load())
	})

	p.close()
	// The restarted manad's waiter is the harness's, not the bridge's.
	goleak.VerifyNone(t, before, goleak.IgnoreAnyFunction("github.com/manad/manad/tests/harness.(*Daemon).start.func1"))
}

func TestOpenManadUnreachable(t *testing.T) {
	_, err := Open(context.Background(), Options{ManadPath: "/nonexistent/manad.sock"})
	require.Error(t, err)
	assert.True(t, errors.Is(err, unix.ENOENT), "%v", err)
	assert.Contains(t, err.Error(), "cannot connect to manad at /nonexistent/manad.sock")
}

// extackOffs returns NLMSGERR_ATTR_OFFS of an NLMSG_ERROR (0 when absent).
func extackOffs(m []byte) uint32 {
	h, _ := nlattr.ReadHeader(m)
	off := errOff + nlattr.MsgHdrLen
	if h.Flags&nlattr.FlagCapped == 0 {
		eh, _ := nlattr.ReadHeader(m[errOff:])
		off = errOff + nlattr.Align(int(eh.Len))
	}
	for it := nlattr.NewIter(m, off, len(m)-off); it.Next(); {
		if it.Attr().Type() == nlattr.ErrAttrOffs {
			return it.Attr().U32()
		}
	}
	return 0
}

// waitNtf waits up to 5 s for a notification of family typ and command cmd.
func waitNtf(p *prog, typ uint16, cmd uint8) []byte {
	m, _ := waitNtfDatagram(p, typ, cmd)
	return m
}

// waitNtfDatagram is waitNtf that also returns the datagram the notification came in.
func waitNtfDatagram(p *prog, typ uint16, cmd uint8) (m, d []byte) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		d := p.recv(time.Until(deadline))
		msgs, _ := splitMsgs(d)
		for _, m := range msgs {
			if msgType(m) == typ && len(m) > nlattr.MsgHdrLen && m[nlattr.MsgHdrLen] == cmd {
				return m, d
			}
		}
	}
	return nil, nil
}
