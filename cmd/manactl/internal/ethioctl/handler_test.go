package ethioctl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/manad/manad/vnic"
)

// selfMem is this test process's own address space through process_vm_readv/writev, the calls
// the supervisor makes on the supervised process: an unmapped or inaccessible page fails as it
// would there.
type selfMem struct{}

func (selfMem) ReadAt(p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := unix.ProcessVMReadv(os.Getpid(), []unix.Iovec{{Base: &p[0], Len: uint64(len(p))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}, 0)
	if err != nil {
		return err
	}
	if n != len(p) {
		return unix.EFAULT
	}
	return nil
}

func (selfMem) WriteAt(p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := unix.ProcessVMWritev(os.Getpid(), []unix.Iovec{{Base: &p[0], Len: uint64(len(p))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}, 0)
	if err != nil {
		return err
	}
	if n != len(p) {
		return unix.EFAULT
	}
	return nil
}

// addrOf is b's address, for memory the test hands to Handle or the kernel as a raw address:
// b must come from pinnedBytes or mmap.
func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// pinnedBytes returns n zero bytes on the heap, whose address stays valid while they are
// reachable (Go's collector does not move heap objects). A buffer the compiler may place on a
// goroutine's stack would not do: the stack moves when it grows, during the very call that is
// given the address, and the write through the stale address lands in freed stack.
//
//go:noinline
func pinnedBytes(n int) []byte { return make([]byte, n) }

// env is a real manad with one port (4 queues) in a fresh namespace that also holds a veth, a
// client dialled in that namespace, and a Handler over it.
type env struct {
	d              *harness.Daemon
	ns, port, veth string
	c              *client.Client
	h              *Handler
	ctx            context.Context
}

func newEnv(t testing.TB) *env {
	testenv.RequireRoot(t)
	bin, _ := harness.Binaries(t)
	return newEnvWith(t, bin)
}

// newEnvWith is newEnv running the manad binary bin.
func newEnvWith(t testing.TB, bin string) *env {
	testenv.RequireRoot(t)
	dir, err := os.MkdirTemp("", "ethioctl-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755)) // a non-root client reaches the socket
	e := &env{ns: harness.Name("eio", ""), port: harness.Name("eip", "0"), veth: harness.Name("eiv", "0")}
	e.d = harness.StartBinary(t, bin, dir, "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nqueues = 4\npersistent = false\n", e.port, e.ns), e.ns)
	e.c = e.d.Client(e.ns)
	harness.Run(t, e.ns, "ip", "link", "add", e.veth, "type", "veth", "peer", "name", e.veth+"p")
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "up")
	e.h = New(Options{Client: func(context.Context) (*client.Client, error) { return e.c, nil }, Logger: testLogger(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	return e
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// result is one emulated ioctl.
type result struct {
	handled bool
	ret     int
	err     error
	out     []byte // the command structure as the call left it
}

// ioctlWith runs h.Handle for dev with req as the command structure, placed in this process's
// memory right after the struct ifreq that points to it.
func (e *env) ioctlWith(h *Handler, dev string, req []byte) result {
	arena := pinnedBytes(ifreqSize + len(req) + 1) // +1: a command structure of 0 bytes still has an address
	copy(arena[:ifNameSize-1], dev)
	binary.NativeEndian.PutUint64(arena[ifrDataOff:], addrOf(arena[ifreqSize:]))
	copy(arena[ifreqSize:], req)
	handled, ret, err := h.Handle(e.ctx, selfMem{}, addrOf(arena))
	runtime.KeepAlive(arena)
	return result{handled, ret, err, arena[ifreqSize : ifreqSize+len(req)]}
}

func (e *env) ioctl(dev string, req []byte) result { return e.ioctlWith(e.h, dev, req) }

// port runs an ioctl on the port that must be handled and succeed.
func (e *env) ok(t *testing.T, req []byte) []byte {
	t.Helper()
	r := e.ioctl(e.port, req)
	require.True(t, r.handled)
	require.NoError(t, r.err)
	return r.out
}

// fails runs an ioctl on the port that must be handled and fail with errno.
func (e *env) fails(t *testing.T, req []byte, errno unix.Errno) result {
	t.Helper()
	r := e.ioctl(e.port, req)
	require.True(t, r.handled)
	require.ErrorIs(t, r.err, errno)
	return r
}

func cmdOnly(cmd uint32, size int) []byte {
	b := make([]byte, size)
	binary.NativeEndian.PutUint32(b, cmd)
	return b
}

func dec[T any](b []byte) T {
	var v T
	decode(b, &v)
	return v
}

func (e *env) strings(t *testing.T, id uint32) []string {
	t.Helper()
	s, err := e.c.StringSet(e.ctx, client.Interface{Name: e.port}, id)
	require.NoError(t, err)
	return s
}

// manaStats is mana_get_sset_count(ETH_SS_STATS) for q queues: 6 eth, 27 hc and 50 phy
// counters, then 9 per RX and 11 per TX queue (163 for 4 queues, the count issue 26 quotes).
func manaStats(q int) int { return 6 + 27 + 50 + q*(9+11) }

// manadStats is how many counters manad adds after mana's in its ETH_SS_STATS set, under the
// "manad_" prefix: the model's (vnic.ManadCounters) and the data path's (datapath.Counters).
var manadStats = len(vnic.ExtraStatNames()) + vnic.CounterCount(datapath.Counters, 0)

// TestHandlerAgainstManad runs every command the handler serves against the real manad's port,
// comparing with what manad's ethtool netlink reports to the same client, and every SET with a
// GET after it.
func TestHandlerAgainstManad(t *testing.T) {
	e := newEnv(t)
	ifi := client.Interface{Name: e.port}

	t.Run("which devices", func(t *testing.T) {
		for _, dev := range []string{e.veth, "lo", harness.Name("eix", "9"), ""} {
			r := e.ioctl(dev, cmdOnly(unix.ETHTOOL_GDRVINFO, 196))
			assert.False(t, r.handled, dev)
			assert.Equal(t, make([]byte, 196)[4:], r.out[4:], "%s: nothing written", dev)
		}
		assert.True(t, e.ioctl(e.port+":1", cmdOnly(unix.ETHTOOL_GLINK, 8)).handled, "an alias label names its device")
	})

	t.Run("GDRVINFO", func(t *testing.T) {
		st, err := e.c.Stats(e.ctx, ifi)
		require.NoError(t, err)
		pf, err := e.c.PrivateFlags(e.ctx, ifi)
		require.NoError(t, err)
		var u unix.Utsname
		require.NoError(t, unix.Uname(&u))
		d := dec[drvinfo](e.ok(t, cmdOnly(unix.ETHTOOL_GDRVINFO, 196)))
		assert.Equal(t, uint32(unix.ETHTOOL_GDRVINFO), d.Cmd)
		assert.Equal(t, "mana", goString(d.Driver[:]))
		assert.Equal(t, goString(u.Release[:]), goString(d.Version[:]))
		// mana has neither get_drvinfo nor devlink: no firmware version; a manad port's TAP
		// has no parent device, so no bus address either (see getDrvinfo).
		assert.Empty(t, goString(d.FwVersion[:]))
		assert.Empty(t, goString(d.BusInfo[:]))
		assert.Empty(t, goString(d.EromVersion[:]))
		assert.Equal(t, uint32(len(st)), d.NStats)
		assert.Equal(t, uint32(manaStats(4)+manadStats), d.NStats, "mana's 163 for 4 queues, then manad's own")
		assert.Equal(t, uint32(len(pf.Flags)), d.NPrivFlags)
		assert.Equal(t, uint32(1), d.NPrivFlags)
		assert.Zero(t, d.TestinfoLen+d.EedumpLen+d.RegdumpLen)
	})

	t.Run("GSSET_INFO", func(t *testing.T) {
		mask := uint64(1<<ethtool.SSTest | 1<<ethtool.SSStats | 1<<ethtool.SSPrivFlags | 1<<ethtool.SSFeatures |
			1<<ethtool.SSLinkModes | 1<<ethtool.SSWolModes | 1<<63)
		req := append(encode(&ssetInfo{Cmd: unix.ETHTOOL_GSSET_INFO, SsetMask: mask}), make([]byte, 7*4)...)
		out := e.ok(t, req)
		h := dec[ssetInfo](out)
		assert.Equal(t, uint64(1<<ethtool.SSStats|1<<ethtool.SSPrivFlags|1<<ethtool.SSFeatures|1<<ethtool.SSLinkModes), h.SsetMask)
		var got []uint32
		for i := range 4 {
			got = append(got, binary.NativeEndian.Uint32(out[16+4*i:]))
		}
		want := []uint32{uint32(len(e.strings(t, ethtool.SSStats))), 1,
			uint32(len(e.strings(t, ethtool.SSFeatures))), uint32(len(e.strings(t, ethtool.SSLinkModes)))}
		assert.Equal(t, want, got)
		assert.Equal(t, make([]byte, 12), out[32:], "no more counts than sets")

		// An empty mask is answered with nothing written, as the kernel does.
		req = append(encode(&ssetInfo{Cmd: unix.ETHTOOL_GSSET_INFO}), 0xaa, 0xaa, 0xaa, 0xaa)
		out = e.ok(t, req)
		assert.Equal(t, req, out)
	})

	t.Run("GSTRINGS", func(t *testing.T) {
		for _, id := range []uint32{ethtool.SSStats, ethtool.SSPrivFlags, ethtool.SSFeatures, ethtool.SSRSSHashFuncs,
			ethtool.SSTunables, ethtool.SSPhyTunables, ethtool.SSLinkModes} {
			want := e.strings(t, id)
			require.NotEmpty(t, want, "set %d", id)
			// The caller's len is not read: a hostile one changes nothing.
			req := append(encode(&gstrings{Cmd: unix.ETHTOOL_GSTRINGS, StringSet: id, Len: 0xffffffff}), make([]byte, 32*len(want))...)
			out := e.ok(t, req)
			h := dec[gstrings](out)
			assert.Equal(t, uint32(len(want)), h.Len, "set %d", id)
			var got []string
			for i := range len(want) {
				got = append(got, goString(out[12+32*i:12+32*(i+1)]))
			}
			assert.Equal(t, want, got, "set %d", id)
		}
		assert.Equal(t, "full-page-rx", e.strings(t, ethtool.SSPrivFlags)[0])
		for _, id := range []uint32{ethtool.SSTest, ethtool.SSWolModes, ethtool.SSSofTimestamping, 200} {
			e.fails(t, encode(&gstrings{Cmd: unix.ETHTOOL_GSTRINGS, StringSet: id}), unix.EINVAL)
		}
	})

	t.Run("GSTATS", func(t *testing.T) {
		before, err := e.c.Stats(e.ctx, ifi)
		require.NoError(t, err)
		out := e.ok(t, append(cmdOnly(unix.ETHTOOL_GSTATS, 8), make([]byte, 8*len(before))...))
		after, err := e.c.Stats(e.ctx, ifi)
		require.NoError(t, err)
		require.Equal(t, uint32(len(before)), dec[statsHead](out).NStats)
		names := e.strings(t, ethtool.SSStats)
		require.Len(t, names, len(before))
		for i := range before {
			assert.Equal(t, names[i], before[i].Name, "GSTRINGS order is STATS_GET order")
			v := binary.NativeEndian.Uint64(out[8+8*i:])
			assert.True(t, before[i].Value <= v && v <= after[i].Value, "%s: %d not within [%d, %d]", before[i].Name, v, before[i].Value, after[i].Value)
		}
	})

	t.Run("GPFLAGS/SPFLAGS", func(t *testing.T) {
		assert.Equal(t, uint32(0), dec[value](e.ok(t, cmdOnly(unix.ETHTOOL_GPFLAGS, 8))).Data)
		e.ok(t, encode(&value{Cmd: unix.ETHTOOL_SPFLAGS, Data: 1}))
		pf, err := e.c.PrivateFlags(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, uint32(1), pf.Bits())
		assert.Equal(t, uint32(1), dec[value](e.ok(t, cmdOnly(unix.ETHTOOL_GPFLAGS, 8))).Data)
		e.fails(t, encode(&value{Cmd: unix.ETHTOOL_SPFLAGS, Data: 3}), unix.EINVAL)
		e.ok(t, encode(&value{Cmd: unix.ETHTOOL_SPFLAGS, Data: 0}))
		pf, err = e.c.PrivateFlags(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, uint32(0), pf.Bits())
	})

	t.Run("GRINGPARAM/SRINGPARAM", func(t *testing.T) {
		r, err := e.c.Rings(e.ctx, ifi)
		require.NoError(t, err)
		got := dec[ringparam](e.ok(t, cmdOnly(unix.ETHTOOL_GRINGPARAM, 36)))
		assert.Equal(t, ringparam{Cmd: unix.ETHTOOL_GRINGPARAM, RxMaxPending: r.RxMax, TxMaxPending: r.TxMax, RxPending: r.Rx, TxPending: r.Tx}, got)
		set := got
		set.Cmd, set.RxPending = unix.ETHTOOL_SRINGPARAM, 512
		e.ok(t, encode(&set))
		r2, err := e.c.Rings(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, uint32(512), r2.Rx)
		assert.Equal(t, r.Tx, r2.Tx)
		set.RxPending = r.RxMax + 1
		e.fails(t, encode(&set), unix.EINVAL)
		set.RxPending, set.RxMiniPending = 512, 1
		e.fails(t, encode(&set), unix.EINVAL)
		set.RxPending, set.RxMiniPending = 64, 0 // below mana's minimum: manad's EINVAL
		e.fails(t, encode(&set), unix.EINVAL)
		set.RxPending = r.Rx
		e.ok(t, encode(&set))
	})

	t.Run("GCHANNELS/SCHANNELS/GRXRINGS", func(t *testing.T) {
		ch, err := e.c.Channels(e.ctx, ifi)
		require.NoError(t, err)
		got := dec[channelsC](e.ok(t, cmdOnly(unix.ETHTOOL_GCHANNELS, 36)))
		assert.Equal(t, channelsC{Cmd: unix.ETHTOOL_GCHANNELS, MaxRx: ch.RxMax, MaxTx: ch.TxMax, MaxOther: ch.OtherMax,
			MaxCombined: ch.CombinedMax, Rx: ch.Rx, Tx: ch.Tx, Other: ch.Other, Combined: ch.Combined}, got)
		assert.Equal(t, uint32(4), got.Combined)
		set := got
		set.Cmd, set.Combined = unix.ETHTOOL_SCHANNELS, 2
		e.ok(t, encode(&set))
		ch2, err := e.c.Channels(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, uint32(2), ch2.Combined)
		out := e.ok(t, cmdOnly(unix.ETHTOOL_GRXRINGS, rxnfcSize))
		assert.Equal(t, uint64(2), binary.NativeEndian.Uint64(out[8:]))
		set.Combined = got.MaxCombined + 1
		e.fails(t, encode(&set), unix.EINVAL)
		set.Combined = 0
		e.fails(t, encode(&set), unix.EINVAL)
		set.Combined = 4
		e.ok(t, encode(&set))
		// Classification rules: mana has none, after the kernel's checks of the request.
		e.fails(t, cmdOnly(unix.ETHTOOL_GRXCLSRLCNT, rxnfcSize), unix.EOPNOTSUPP)
		all := cmdOnly(unix.ETHTOOL_GRXCLSRLALL, rxnfcSize)
		binary.NativeEndian.PutUint32(all[rxnfcRSSContextOff:], 0xffffffff) // rule_cnt
		e.fails(t, all, unix.ENOMEM)
		e.fails(t, cmdOnly(unix.ETHTOOL_GRXFH, rxnfcLegacySize), unix.EOPNOTSUPP)
	})

	t.Run("n_stats per queue count", func(t *testing.T) {
		ch := dec[channelsC](e.ok(t, cmdOnly(unix.ETHTOOL_GCHANNELS, 36)))
		for _, q := range []uint32{1, 2, ch.MaxCombined, 4} {
			set := ch
			set.Cmd, set.Combined = unix.ETHTOOL_SCHANNELS, q
			e.ok(t, encode(&set))
			want := manaStats(int(q)) + manadStats
			d := dec[drvinfo](e.ok(t, cmdOnly(unix.ETHTOOL_GDRVINFO, 196)))
			assert.Equal(t, uint32(want), d.NStats, "GDRVINFO, %d queues", q)
			out := e.ok(t, append(encode(&ssetInfo{Cmd: unix.ETHTOOL_GSSET_INFO, SsetMask: 1 << ethtool.SSStats}), 0, 0, 0, 0))
			assert.Equal(t, uint32(want), binary.NativeEndian.Uint32(out[ssetInfoDataOff:]), "GSSET_INFO, %d queues", q)
			names := e.strings(t, ethtool.SSStats) // netlink's ETHTOOL_MSG_STRSET_GET
			require.Len(t, names, want, "STRSET_GET, %d queues", q)
			out = e.ok(t, append(encode(&gstrings{Cmd: unix.ETHTOOL_GSTRINGS, StringSet: ethtool.SSStats}), make([]byte, 32*want)...))
			require.Equal(t, uint32(want), dec[gstrings](out).Len, "GSTRINGS, %d queues", q)
			for i, n := range names {
				require.Equal(t, n, goString(out[12+32*i:12+32*(i+1)]), "GSTRINGS %d, %d queues", i, q)
			}
			out = e.ok(t, append(cmdOnly(unix.ETHTOOL_GSTATS, 8), make([]byte, 8*want)...))
			assert.Equal(t, uint32(want), dec[statsHead](out).NStats, "GSTATS, %d queues", q)
			// mana_get_strings' order: eth, hc, phy, every RX queue's, every TX queue's; then
			// manad's own, told apart by their prefix.
			m := manaStats(int(q))
			last := fmt.Sprint(q - 1)
			assert.Equal(t, []string{"stop_queue", "rx_cqe_unknown_type", "hc_rx_discards_no_wqe", "hc_tx_mcast_bytes",
				"hc_rx_pkt_drop_phy", "hc_tc7_tx_pause_phy", "rx_0_packets", "rx_" + last + "_coalesced_cqe_4",
				"tx_0_packets", "tx_" + last + "_mana_map_err"},
				[]string{names[0], names[5], names[6], names[32], names[33], names[82], names[83], names[83+9*int(q)-1],
					names[83+9*int(q)], names[m-1]}, "%d queues", q)
			for _, n := range names[:m] {
				assert.NotContains(t, n, "manad_")
			}
			for _, n := range names[m:] {
				assert.True(t, strings.HasPrefix(n, "manad_"), "%s after mana's counters", n)
			}
		}
	})

	t.Run("GCOALESCE/SCOALESCE", func(t *testing.T) {
		co, err := e.c.Coalesce(e.ctx, ifi)
		require.NoError(t, err)
		got := dec[coalesceC](e.ok(t, cmdOnly(unix.ETHTOOL_GCOALESCE, 92)))
		for i, v := range got.F {
			assert.Equal(t, co.Attrs[uint16(i+coalesceFirstAttr)], v, "attribute %d", i+coalesceFirstAttr)
		}
		set := got
		set.Cmd, set.F[0] = unix.ETHTOOL_SCOALESCE, 100 // rx-usecs
		e.ok(t, encode(&set))
		co2, err := e.c.Coalesce(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, uint32(100), co2.RxUsecs)
		bad := set
		bad.F[21] = 7 // rate_sample_interval: mana does not support it
		e.fails(t, encode(&bad), unix.EOPNOTSUPP)
		set.F[0] = 2000 // above mana's 1023
		e.fails(t, encode(&set), unix.EINVAL)
		set.F[0] = co.RxUsecs
		e.ok(t, encode(&set))
	})

	t.Run("GLINKSETTINGS/GSET/GLINK", func(t *testing.T) {
		ls, err := e.c.LinkSettings(e.ctx, ifi)
		require.NoError(t, err)
		nwords := (len(e.strings(t, ethtool.SSLinkModes)) + 31) / 32
		// The handshake: a wrong nwords, hostile or not, gets -nwords and success.
		for _, n := range []int8{0, 127, -128, int8(nwords + 1)} {
			req := encode(&linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS, LinkModeMasksNwords: n, Speed: 5})
			got := dec[linkSettings](e.ok(t, req))
			assert.Equal(t, linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS, LinkModeMasksNwords: int8(-nwords)}, got, "nwords %d", n)
		}
		req := append(encode(&linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS, LinkModeMasksNwords: int8(nwords)}), make([]byte, 12*nwords)...)
		out := e.ok(t, req)
		got := dec[linkSettings](out)
		assert.Equal(t, linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS, Speed: ls.Speed, Duplex: ls.Duplex, Port: ls.Port,
			Autoneg: ls.Autoneg, PhyAddress: ls.PhyAddr, EthTpMdix: ls.MDIX, EthTpMdixCtrl: ls.MDIXCtrl,
			LinkModeMasksNwords: int8(nwords), Transceiver: ls.Transceiver}, got)
		assert.Equal(t, uint8(1), got.Duplex, "full, as mana")
		assert.Equal(t, uint8(0xff), got.Port, "PORT_OTHER, as mana")
		legacy := dec[legacyCmd](e.ok(t, cmdOnly(unix.ETHTOOL_GSET, legacyCmdSize)))
		assert.Equal(t, ls.Speed, uint32(legacy.Speed)|uint32(legacy.SpeedHi)<<16)
		assert.Equal(t, got.Port, legacy.Port)
		st, err := e.c.LinkState(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, st.Link, dec[value](e.ok(t, cmdOnly(unix.ETHTOOL_GLINK, 8))).Data == 1)
	})

	t.Run("GRSSH/SRSSH/GRXFHINDIR/SRXFHINDIR", func(t *testing.T) {
		rss, err := e.c.RSS(e.ctx, ifi)
		require.NoError(t, err)
		n, k := len(rss.Indir), len(rss.HKey)
		require.Equal(t, 40, k)
		// Sizes query.
		got := dec[rxfh](e.ok(t, cmdOnly(unix.ETHTOOL_GRSSH, 24)))
		assert.Equal(t, rxfh{Cmd: unix.ETHTOOL_GRSSH, IndirSize: uint32(n), KeySize: uint32(k), HFunc: 1}, got)
		// Everything.
		out := e.ok(t, append(encode(&rxfh{Cmd: unix.ETHTOOL_GRSSH, IndirSize: uint32(n), KeySize: uint32(k)}), make([]byte, 4*n+k)...))
		for i := range n {
			assert.Equal(t, rss.Indir[i], binary.NativeEndian.Uint32(out[24+4*i:]))
		}
		assert.Equal(t, rss.HKey, out[24+4*n:])
		// A hostile size: the sizes go back, then EINVAL; nothing past the header is written.
		r := e.fails(t, append(encode(&rxfh{Cmd: unix.ETHTOOL_GRSSH, IndirSize: 0x7fffffff}), 0xaa), unix.EINVAL)
		assert.Equal(t, uint32(n), dec[rxfh](r.out).IndirSize)
		assert.Equal(t, byte(0xaa), r.out[24])
		e.fails(t, encode(&rxfh{Cmd: unix.ETHTOOL_GRSSH, Rsvd32: 1}), unix.EINVAL)
		e.fails(t, encode(&rxfh{Cmd: unix.ETHTOOL_GRSSH, RSSContext: 1}), unix.EOPNOTSUPP)

		// Set a table on queue 1 only and a new key.
		table := make([]byte, 4*n)
		for i := range n {
			binary.NativeEndian.PutUint32(table[4*i:], 1)
		}
		key := make([]byte, k)
		for i := range key {
			key[i] = byte(i + 1)
		}
		set := append(append(encode(&rxfh{Cmd: unix.ETHTOOL_SRSSH, IndirSize: uint32(n), KeySize: uint32(k), InputXfrm: rxhXfrmNoChange}), table...), key...)
		e.ok(t, set)
		rss2, err := e.c.RSS(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, slices.Repeat([]uint32{1}, n), rss2.Indir)
		assert.Equal(t, key, rss2.HKey)
		// GRXFHINDIR: size query, short size, the table.
		out = e.ok(t, cmdOnly(unix.ETHTOOL_GRXFHINDIR, 8))
		assert.Equal(t, uint32(n), binary.NativeEndian.Uint32(out[4:]))
		short := cmdOnly(unix.ETHTOOL_GRXFHINDIR, 8)
		binary.NativeEndian.PutUint32(short[4:], 3)
		e.fails(t, short, unix.EINVAL)
		full := append(cmdOnly(unix.ETHTOOL_GRXFHINDIR, 8), make([]byte, 4*n)...)
		binary.NativeEndian.PutUint32(full[4:], uint32(n))
		assert.Equal(t, table, e.ok(t, full)[8:])
		// A queue that does not exist, a wrong size, no change at all: EINVAL.
		binary.NativeEndian.PutUint32(table[0:], 4)
		e.fails(t, append(encode(&rxfh{Cmd: unix.ETHTOOL_SRSSH, IndirSize: uint32(n), InputXfrm: rxhXfrmNoChange}), table...), unix.EINVAL)
		e.fails(t, encode(&rxfh{Cmd: unix.ETHTOOL_SRSSH, IndirSize: 7, InputXfrm: rxhXfrmNoChange}), unix.EINVAL)
		e.fails(t, encode(&rxfh{Cmd: unix.ETHTOOL_SRSSH, IndirSize: indirNoChange, InputXfrm: rxhXfrmNoChange}), unix.EINVAL)
		e.fails(t, encode(&rxfh{Cmd: unix.ETHTOOL_SRSSH, IndirSize: indirNoChange, InputXfrm: rxhXfrmSymXor}), unix.EOPNOTSUPP)
		// SRXFHINDIR with size 0, then SRSSH with indir_size 0: the default table again.
		e.ok(t, cmdOnly(unix.ETHTOOL_SRXFHINDIR, 8))
		rss3, err := e.c.RSS(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, rss.Indir, rss3.Indir)
		e.ok(t, append(encode(&rxfh{Cmd: unix.ETHTOOL_SRSSH, KeySize: uint32(k), InputXfrm: rxhXfrmNoChange}), rss.HKey...))
		rss4, err := e.c.RSS(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, rss.Indir, rss4.Indir)
		assert.Equal(t, rss.HKey, rss4.HKey)
	})

	t.Run("GFEATURES/SFEATURES/legacy", func(t *testing.T) {
		names := e.strings(t, ethtool.SSFeatures)
		words := (len(names) + 31) / 32
		bit := func(name string) int { i := slices.Index(names, name); require.GreaterOrEqual(t, i, 0, name); return i }
		f, err := e.c.Features(e.ctx, ifi)
		require.NoError(t, err)
		out := e.ok(t, append(encode(&featuresHead{Cmd: unix.ETHTOOL_GFEATURES, Size: 0xffff}), make([]byte, 16*words)...))
		assert.Equal(t, uint32(words), dec[featuresHead](out).Size)
		blocks := make([]getFeaturesBlock, words)
		decode(out[8:], blocks)
		isSet := func(field func(getFeaturesBlock) uint32, i int) bool { return field(blocks[i/32])&(1<<(i%32)) != 0 }
		for _, tc := range []struct {
			list  []string
			field func(getFeaturesBlock) uint32
		}{
			{f.HW, func(b getFeaturesBlock) uint32 { return b.Available }},
			{f.Wanted, func(b getFeaturesBlock) uint32 { return b.Requested }},
			{f.Active, func(b getFeaturesBlock) uint32 { return b.Active }},
			{f.NoChange, func(b getFeaturesBlock) uint32 { return b.NeverChanged }},
		} {
			for i, n := range names {
				assert.Equal(t, slices.Contains(tc.list, n), isSet(tc.field, i), n)
			}
		}
		// A caller's size of 0 gets the header only.
		out = e.ok(t, append(encode(&featuresHead{Cmd: unix.ETHTOOL_GFEATURES}), 0xaa))
		assert.Equal(t, byte(0xaa), out[8])

		require.True(t, slices.Contains(f.HW, "rx-gro") && slices.Contains(f.Active, "rx-gro"))
		assert.Equal(t, uint32(1), dec[value](e.ok(t, cmdOnly(unix.ETHTOOL_GGRO, 8))).Data)
		// SFEATURES rx-gro off.
		sb := make([]setFeaturesBlock, words)
		sb[bit("rx-gro")/32].Valid = 1 << (bit("rx-gro") % 32)
		req := append(encode(&featuresHead{Cmd: unix.ETHTOOL_SFEATURES, Size: uint32(words)}), encode(sb)...)
		r := e.ioctl(e.port, req)
		require.True(t, r.handled)
		require.NoError(t, r.err)
		assert.Equal(t, 0, r.ret)
		f2, err := e.c.Features(e.ctx, ifi)
		require.NoError(t, err)
		assert.NotContains(t, f2.Active, "rx-gro")
		assert.Equal(t, uint32(0), dec[value](e.ok(t, cmdOnly(unix.ETHTOOL_GGRO, 8))).Data)
		// Legacy SGRO on again.
		e.ok(t, encode(&value{Cmd: unix.ETHTOOL_SGRO, Data: 1}))
		f3, err := e.c.Features(e.ctx, ifi)
		require.NoError(t, err)
		assert.Contains(t, f3.Active, "rx-gro")
		// A feature the port cannot change: ETHTOOL_F_UNSUPPORTED, nothing changes.
		var fixed string
		for _, n := range names {
			if n != "" && !slices.Contains(f.HW, n) { // ethtool_set_features: valid & ~hw_features (unnamed bits skipped)
				fixed = n
				break
			}
		}
		require.NotEmpty(t, fixed, "hw %v", f.HW)
		sb = make([]setFeaturesBlock, words)
		sb[bit(fixed)/32].Valid = 1 << (bit(fixed) % 32)
		sb[bit(fixed)/32].Requested = 1 << (bit(fixed) % 32)
		r = e.ioctl(e.port, append(encode(&featuresHead{Cmd: unix.ETHTOOL_SFEATURES, Size: uint32(words)}), encode(sb)...))
		require.NoError(t, r.err)
		assert.Equal(t, unix.ETHTOOL_F_UNSUPPORTED, r.ret)
		f4, err := e.c.Features(e.ctx, ifi)
		require.NoError(t, err)
		assert.Equal(t, f3.Active, f4.Active)
		// Wrong size; a bit past the features.
		e.fails(t, append(encode(&featuresHead{Cmd: unix.ETHTOOL_SFEATURES, Size: uint32(words + 1)}), make([]byte, 8*(words+1))...), unix.EINVAL)
		if len(names)%32 != 0 {
			sb = make([]setFeaturesBlock, words)
			sb[words-1].Valid = 1 << 31
			e.fails(t, append(encode(&featuresHead{Cmd: unix.ETHTOOL_SFEATURES, Size: uint32(words)}), encode(sb)...), unix.EINVAL)
		}
		// GFLAGS agrees with the active features; SFLAGS with an unknown flag is EINVAL.
		var flags uint32
		for _, lf := range legacyFlags {
			if slices.Contains(f4.Active, lf.name) {
				flags |= lf.flag
			}
		}
		assert.Equal(t, flags, dec[value](e.ok(t, cmdOnly(unix.ETHTOOL_GFLAGS, 8))).Data)
		e.fails(t, encode(&value{Cmd: unix.ETHTOOL_SFLAGS, Data: 1}), unix.EINVAL)
		e.ok(t, encode(&value{Cmd: unix.ETHTOOL_SFLAGS, Data: flags}))
		for _, g := range []uint32{unix.ETHTOOL_GTXCSUM, unix.ETHTOOL_GRXCSUM, unix.ETHTOOL_GSG, unix.ETHTOOL_GTSO, unix.ETHTOOL_GGSO} {
			want := uint32(0)
			for _, n := range featureMasks[g] {
				if slices.Contains(f4.Active, n) {
					want = 1
				}
			}
			assert.Equal(t, want, dec[value](e.ok(t, cmdOnly(g, 8))).Data, "cmd %#x", g)
		}
	})

	t.Run("GPERMADDR/GET_TS_INFO", func(t *testing.T) {
		p, err := e.c.Port(e.ctx, ifi)
		require.NoError(t, err)
		out := e.ok(t, append(encode(&permAddr{Cmd: unix.ETHTOOL_GPERMADDR, Size: 32}), make([]byte, 32)...))
		assert.Equal(t, permAddr{Cmd: unix.ETHTOOL_GPERMADDR, Size: 6}, dec[permAddr](out))
		assert.Equal(t, []byte(p.MAC), out[8:14])
		e.fails(t, encode(&permAddr{Cmd: unix.ETHTOOL_GPERMADDR, Size: 5}), eTooSmall)

		ts, err := e.c.TSInfo(e.ctx, ifi)
		require.NoError(t, err)
		got := dec[tsInfo](e.ok(t, cmdOnly(unix.ETHTOOL_GET_TS_INFO, 44)))
		assert.Equal(t, int32(-1), got.PhcIndex)
		assert.Equal(t, modeMask(e.strings(t, ethtool.SSSofTimestamping), ts.Timestamping, 1)[0], got.SoTimestamping)
		assert.NotZero(t, got.SoTimestamping)
	})

	t.Run("what mana lacks", func(t *testing.T) {
		for _, c := range []uint32{unix.ETHTOOL_GWOL, unix.ETHTOOL_SWOL, unix.ETHTOOL_GREGS, unix.ETHTOOL_GEEPROM,
			unix.ETHTOOL_GMODULEINFO, unix.ETHTOOL_GPAUSEPARAM, unix.ETHTOOL_GMSGLVL, unix.ETHTOOL_GEEE,
			unix.ETHTOOL_GFECPARAM, unix.ETHTOOL_SSET, unix.ETHTOOL_SLINKSETTINGS, 0x1a, 0x1c, 0x9999} {
			e.fails(t, cmdOnly(c, perQueueOpSize), unix.EOPNOTSUPP)
		}
	})

	t.Run("EFAULT", func(t *testing.T) {
		// ifr_data unmapped: every command reads EFAULT; ifr itself unmapped: the kernel's.
		arena := pinnedBytes(ifreqSize)
		copy(arena, e.port)
		binary.NativeEndian.PutUint64(arena[ifrDataOff:], 8)
		handled, _, err := e.h.Handle(e.ctx, selfMem{}, addrOf(arena))
		runtime.KeepAlive(arena)
		assert.True(t, handled)
		assert.ErrorIs(t, err, unix.EFAULT)
		handled, _, err = e.h.Handle(e.ctx, selfMem{}, 8)
		assert.False(t, handled)
		assert.NoError(t, err)

		// A buffer that ends where an inaccessible page begins: the header fits, the data does
		// not.
		rss, err := e.c.RSS(e.ctx, client.Interface{Name: e.port})
		require.NoError(t, err)
		nwords := (len(e.strings(t, ethtool.SSLinkModes)) + 31) / 32
		page := os.Getpagesize()
		m, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Munmap(m) })
		require.NoError(t, unix.Mprotect(m[page:], unix.PROT_NONE))
		for _, req := range [][]byte{
			cmdOnly(unix.ETHTOOL_GSTATS, 8),
			encode(&gstrings{Cmd: unix.ETHTOOL_GSTRINGS, StringSet: ethtool.SSStats}),
			encode(&rxfh{Cmd: unix.ETHTOOL_GRSSH, IndirSize: uint32(len(rss.Indir)), KeySize: uint32(len(rss.HKey))}),
			encode(&featuresHead{Cmd: unix.ETHTOOL_GFEATURES, Size: 2}),
			cmdOnly(unix.ETHTOOL_GRXRINGS, rxnfcSize-1),                                               // a struct ethtool_rxnfc cut short
			encode(&linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS, LinkModeMasksNwords: int8(nwords)}), // no room for the masks
		} {
			data := m[page-len(req) : page]
			copy(data, req)
			ifr := pinnedBytes(ifreqSize)
			copy(ifr, e.port)
			binary.NativeEndian.PutUint64(ifr[ifrDataOff:], addrOf(data))
			handled, _, err := e.h.Handle(e.ctx, selfMem{}, addrOf(ifr))
			runtime.KeepAlive(ifr)
			assert.True(t, handled)
			assert.ErrorIs(t, err, unix.EFAULT, "cmd %#x", binary.NativeEndian.Uint32(req))
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		// The supervisor serves the program's threads at once.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				for range 20 {
					cmd := []uint32{unix.ETHTOOL_GDRVINFO, unix.ETHTOOL_GRINGPARAM, unix.ETHTOOL_GLINK, unix.ETHTOOL_GET_TS_INFO}[i%4]
					if r := e.ioctl(e.port, cmdOnly(cmd, 196)); !r.handled || r.err != nil {
						errs <- fmt.Errorf("cmd %#x: handled %v, %v", cmd, r.handled, r.err)
						return
					}
					if r := e.ioctl(e.veth, cmdOnly(cmd, 196)); r.handled {
						errs <- fmt.Errorf("cmd %#x on the veth handled", cmd)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		arena := pinnedBytes(ifreqSize + 8)
		copy(arena, e.port)
		binary.NativeEndian.PutUint64(arena[ifrDataOff:], addrOf(arena[ifreqSize:]))
		copy(arena[ifreqSize:], cmdOnly(unix.ETHTOOL_GLINK, 8))
		handled, _, err := e.h.Handle(ctx, selfMem{}, addrOf(arena))
		runtime.KeepAlive(arena)
		assert.True(t, handled, "a cancelled call is not the kernel's to answer")
		assert.ErrorIs(t, err, unix.EINTR)
	})

	t.Run("any command, any content", func(t *testing.T) {
		// Every command number with patterned contents: an answer, never a panic or a hang.
		// (SETs among them may change the port: this is the last subtest.)
		//
		// A patterned count makes the handler write as much as the kernel would (GSTRINGS
		// writes every string whatever the caller's len says), far past a 1 KiB request: the
		// request starts a 1 MiB mapping of its own, ended by an inaccessible page, so such
		// writes land in scratch memory or fault (EFAULT), never in the test's heap.
		page := os.Getpagesize()
		const scratch = 1 << 20
		m, err := unix.Mmap(-1, 0, scratch+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Munmap(m) })
		require.NoError(t, unix.Mprotect(m[scratch:], unix.PROT_NONE))
		ifr := pinnedBytes(ifreqSize)
		copy(ifr, e.port)
		binary.NativeEndian.PutUint64(ifr[ifrDataOff:], addrOf(m))
		for cmd := range uint32(0x60) {
			for _, fill := range []byte{0x00, 0x01, 0x7f, 0xff} {
				clear(m[:scratch])
				req := m[:1024]
				for i := range req {
					req[i] = fill
				}
				binary.NativeEndian.PutUint32(req, cmd)
				if cmd == ethtoolPerQueue {
					binary.NativeEndian.PutUint32(req[4:], unix.ETHTOOL_GCOALESCE)
				}
				handled, ret, err := e.h.Handle(e.ctx, selfMem{}, addrOf(ifr))
				require.True(t, handled)
				require.GreaterOrEqual(t, ret, 0)
				if err != nil {
					var errno unix.Errno
					require.ErrorAs(t, err, &errno, "cmd %#x fill %#x", cmd, fill)
				}
			}
		}
		runtime.KeepAlive(ifr)
	})
}

// asUser runs f on a fresh OS thread that entered network namespace ns and dropped to uid/gid
// (the thread dies with it), as tests/reliability does.
func asUser(ns string, uid, gid uint32, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		errc <- func() error {
			h, err := netns.GetFromName(ns)
			if err != nil {
				return err
			}
			defer h.Close()
			if err := netns.Set(h); err != nil {
				return err
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
				return e
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
				return e
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
				return e
			}
			return f()
		}()
	}()
	return <-errc
}

// TestHandlerNonAdmin: a caller without admin rights reads everything and changes nothing:
// every SET is manad's EPERM, and the port keeps its settings.
func TestHandlerNonAdmin(t *testing.T) {
	e := newEnv(t)
	const nobody = 65534
	var nc *client.Client
	require.NoError(t, asUser(e.ns, nobody, nobody, func() (err error) {
		nc, err = client.Dial(e.d.Socket)
		return err
	}))
	t.Cleanup(func() { nc.Close() })
	h := New(Options{Client: func(context.Context) (*client.Client, error) { return nc, nil }, Logger: testLogger(t)})
	ifi := client.Interface{Name: e.port}

	r := e.ioctlWith(h, e.port, cmdOnly(unix.ETHTOOL_GRINGPARAM, 36))
	require.True(t, r.handled)
	require.NoError(t, r.err)
	rp := dec[ringparam](r.out)
	before, err := e.c.Rings(e.ctx, ifi)
	require.NoError(t, err)
	pfBefore, err := e.c.PrivateFlags(e.ctx, ifi)
	require.NoError(t, err)
	chBefore, err := e.c.Channels(e.ctx, ifi)
	require.NoError(t, err)

	rp.Cmd, rp.RxPending = unix.ETHTOOL_SRINGPARAM, 256
	for _, req := range [][]byte{
		encode(&rp),
		encode(&value{Cmd: unix.ETHTOOL_SPFLAGS, Data: 1}),
		encode(&channelsC{Cmd: unix.ETHTOOL_SCHANNELS, Combined: 1}),
		encode(&value{Cmd: unix.ETHTOOL_SGRO, Data: 0}),
		// EPERM comes first, as __dev_ethtool checks CAP_NET_ADMIN before anything: for a
		// size the kernel would refuse, a command mana lacks, an unknown command.
		encode(&ringparam{Cmd: unix.ETHTOOL_SRINGPARAM, RxPending: 1 << 30}),
		cmdOnly(unix.ETHTOOL_SWOL, 20),
		cmdOnly(0x9999, 8),
	} {
		r := e.ioctlWith(h, e.port, req)
		require.True(t, r.handled)
		assert.ErrorIs(t, r.err, unix.EPERM, "cmd %#x", binary.NativeEndian.Uint32(req))
	}
	after, err := e.c.Rings(e.ctx, ifi)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	pfAfter, err := e.c.PrivateFlags(e.ctx, ifi)
	require.NoError(t, err)
	assert.Equal(t, pfBefore.Bits(), pfAfter.Bits())
	chAfter, err := e.c.Channels(e.ctx, ifi)
	require.NoError(t, err)
	assert.Equal(t, chBefore.Combined, chAfter.Combined)
	f, err := e.c.Features(e.ctx, ifi)
	require.NoError(t, err)
	assert.Contains(t, f.Active, "rx-gro")
}

// TestHandlerManadGoneAndRename: with manad unreachable, a name seen as a port answers ENODEV and
// any other is left to the kernel; a renamed port answers under its new name only.
func TestHandlerManadGoneAndRename(t *testing.T) {
	e := newEnv(t)
	var gone atomic.Bool
	h := New(Options{Client: func(context.Context) (*client.Client, error) {
		if gone.Load() {
			return nil, errors.New("cannot connect to manad: connection refused")
		}
		return e.c, nil
	}, Logger: testLogger(t)})

	r := e.ioctlWith(h, e.port, cmdOnly(unix.ETHTOOL_GDRVINFO, 196))
	require.True(t, r.handled)
	require.NoError(t, r.err)

	// Rename: the port is its TAP's ifindex.
	renamed := harness.Name("eir", "0")
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "down")
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "name", renamed)
	harness.Eventually(t, "manad follows the rename", func() bool {
		_, err := e.c.Port(e.ctx, client.Interface{Name: renamed})
		return err == nil
	})
	r = e.ioctlWith(h, e.port, cmdOnly(unix.ETHTOOL_GDRVINFO, 196))
	assert.False(t, r.handled, "the old name is no port's: %+v", r)
	r = e.ioctlWith(h, renamed, cmdOnly(unix.ETHTOOL_GDRVINFO, 196))
	require.True(t, r.handled)
	require.NoError(t, r.err)
	d := dec[drvinfo](r.out)
	assert.Equal(t, "mana", goString(d.Driver[:]))

	gone.Store(true)
	r = e.ioctlWith(h, renamed, cmdOnly(unix.ETHTOOL_GDRVINFO, 196))
	assert.True(t, r.handled)
	assert.ErrorIs(t, r.err, unix.ENODEV)
	r = e.ioctlWith(h, e.veth, cmdOnly(unix.ETHTOOL_GDRVINFO, 196))
	assert.False(t, r.handled)
	r = e.ioctlWith(h, e.port, cmdOnly(unix.ETHTOOL_GDRVINFO, 196))
	assert.False(t, r.handled, "a name that stopped being a port is forgotten")

	// manad stops mid-run: a known port's next command fails with ENODEV, not a hang.
	gone.Store(false)
	e.d.Stop()
	r = e.ioctlWith(h, renamed, cmdOnly(unix.ETHTOOL_GRINGPARAM, 36))
	assert.True(t, r.handled)
	assert.ErrorIs(t, r.err, unix.ENODEV)
}

// kernelIoctl runs the kernel's own SIOCETHTOOL on dev with req as the command structure and
// returns the structure as the kernel left it.
func kernelIoctl(fd int, dev string, req []byte) ([]byte, error) {
	arena := pinnedBytes(ifreqSize + len(req))
	copy(arena[:ifNameSize-1], dev)
	binary.NativeEndian.PutUint64(arena[ifrDataOff:], addrOf(arena[ifreqSize:]))
	copy(arena[ifreqSize:], req)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&arena[0])))
	runtime.KeepAlive(arena)
	if errno != 0 {
		return nil, errno
	}
	return arena[ifreqSize:], nil
}

// TestLayoutsAgainstKernel: the structures, and the name-to-bit mappings the handler builds
// from string sets, read the running kernel's own SIOCETHTOOL answers for a veth as its ethtool
// netlink reports the same device (so the layouts are checked against a real dev_ethtool, not
// only against constants).
func TestLayoutsAgainstKernel(t *testing.T) {
	testenv.RequireRoot(t)
	ns, veth := harness.Name("eik", ""), harness.Name("eik", "0")
	harness.Run(t, "", "ip", "netns", "add", ns)
	t.Cleanup(func() { harness.RunErr("", "ip", "netns", "del", ns) })
	harness.Run(t, ns, "ip", "link", "add", veth, "numrxqueues", "4", "numtxqueues", "4", "type", "veth", "peer", "name", veth+"p")
	harness.Run(t, ns, "ip", "link", "set", veth, "up")
	var fd int
	var kc *client.Client
	require.NoError(t, harness.InNetNS(ns, func() (err error) {
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		kc, err = client.DialKernel()
		return err
	}))
	t.Cleanup(func() { unix.Close(fd); kc.Close() })
	ctx := context.Background()
	ifi := client.Interface{Name: veth}
	kstrings := func(id uint32) []string {
		s, err := kc.StringSet(ctx, client.Interface{}, id)
		require.NoError(t, err)
		return s
	}

	out, err := kernelIoctl(fd, veth, cmdOnly(unix.ETHTOOL_GDRVINFO, 196))
	require.NoError(t, err)
	d := dec[drvinfo](out)
	assert.Equal(t, "veth", goString(d.Driver[:]))
	out, err = kernelIoctl(fd, veth, append(encode(&ssetInfo{Cmd: unix.ETHTOOL_GSSET_INFO, SsetMask: 1 << ethtool.SSStats}), 0, 0, 0, 0))
	require.NoError(t, err)
	assert.Equal(t, d.NStats, binary.NativeEndian.Uint32(out[ssetInfoDataOff:]))

	ch, err := kc.Channels(ctx, ifi)
	require.NoError(t, err)
	out, err = kernelIoctl(fd, veth, cmdOnly(unix.ETHTOOL_GCHANNELS, 36))
	require.NoError(t, err)
	assert.Equal(t, channelsC{Cmd: unix.ETHTOOL_GCHANNELS, MaxRx: ch.RxMax, MaxTx: ch.TxMax, MaxOther: ch.OtherMax,
		MaxCombined: ch.CombinedMax, Rx: ch.Rx, Tx: ch.Tx, Other: ch.Other, Combined: ch.Combined}, dec[channelsC](out))
	assert.Equal(t, uint32(4), ch.RxMax)

	// The link-settings handshake, then the settings.
	nwords := (len(kstrings(ethtool.SSLinkModes)) + 31) / 32
	out, err = kernelIoctl(fd, veth, encode(&linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS}))
	require.NoError(t, err)
	assert.Equal(t, linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS, LinkModeMasksNwords: int8(-nwords)}, dec[linkSettings](out))
	ls, err := kc.LinkSettings(ctx, ifi)
	require.NoError(t, err)
	out, err = kernelIoctl(fd, veth, append(encode(&linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS, LinkModeMasksNwords: int8(nwords)}), make([]byte, 12*nwords)...))
	require.NoError(t, err)
	got := dec[linkSettings](out)
	assert.Equal(t, ls.Speed, got.Speed)
	assert.Equal(t, ls.Duplex, got.Duplex)
	assert.Equal(t, ls.Port, got.Port)
	assert.Equal(t, ls.Autoneg, got.Autoneg)
	masks := make([]uint32, 3*nwords)
	decode(out[linkModeMasksOff:], masks)
	assert.Equal(t, modeMask(kstrings(ethtool.SSLinkModes), ls.Supported, nwords), masks[:nwords])
	out, err = kernelIoctl(fd, veth, cmdOnly(unix.ETHTOOL_GSET, legacyCmdSize))
	require.NoError(t, err)
	legacy := dec[legacyCmd](out)
	assert.Equal(t, ls.Speed, uint32(legacy.Speed)|uint32(legacy.SpeedHi)<<16)
	assert.Equal(t, ls.Duplex, legacy.Duplex)

	// Features: the ioctl's bits are netdev_features_strings' indices.
	names := kstrings(ethtool.SSFeatures)
	words := (len(names) + 31) / 32
	f, err := kc.Features(ctx, ifi)
	require.NoError(t, err)
	out, err = kernelIoctl(fd, veth, append(encode(&featuresHead{Cmd: unix.ETHTOOL_GFEATURES, Size: uint32(words)}), make([]byte, 16*words)...))
	require.NoError(t, err)
	assert.Equal(t, uint32(words), dec[featuresHead](out).Size)
	blocks := make([]getFeaturesBlock, words)
	decode(out[8:], blocks)
	hw, active := featureWords(names, setOf(f.HW)), featureWords(names, setOf(f.Active))
	for i := range blocks {
		assert.Equal(t, hw[i], blocks[i].Available, "word %d", i)
		assert.Equal(t, active[i], blocks[i].Active, "word %d", i)
	}
	for g, mask := range featureMasks {
		out, err = kernelIoctl(fd, veth, cmdOnly(g, 8))
		require.NoError(t, err)
		want := uint32(0)
		for _, n := range mask {
			if slices.Contains(f.Active, n) {
				want = 1
			}
		}
		assert.Equal(t, want, dec[value](out).Data, "legacy get %#x", g)
	}

	// Time stamping: the ioctl's bits are the string sets' indices.
	ts, err := kc.TSInfo(ctx, ifi)
	require.NoError(t, err)
	out, err = kernelIoctl(fd, veth, cmdOnly(unix.ETHTOOL_GET_TS_INFO, 44))
	require.NoError(t, err)
	ti := dec[tsInfo](out)
	assert.Equal(t, ts.PHCIndex, ti.PhcIndex)
	assert.Equal(t, modeMask(kstrings(ethtool.SSSofTimestamping), ts.Timestamping, 1)[0], ti.SoTimestamping)

	// GSTRINGS: the layout of the names.
	out, err = kernelIoctl(fd, veth, append(encode(&gstrings{Cmd: unix.ETHTOOL_GSTRINGS, StringSet: ethtool.SSFeatures}), make([]byte, ethtool.GStringLen*len(names))...))
	require.NoError(t, err)
	require.Equal(t, uint32(len(names)), dec[gstrings](out).Len)
	for i, n := range names {
		assert.Equal(t, n, goString(out[12+ethtool.GStringLen*i:12+ethtool.GStringLen*(i+1)]))
	}
}

// BenchmarkHandle: one emulated SIOCETHTOOL on the port (PORT_GET and the command's requests to
// manad, through this process's memory) against the kernel's own ioctl on the veth in the same
// namespace, same run. (The race detector slows this test binary's side; run it without -race
// for figures.)
func BenchmarkHandle(b *testing.B) {
	testenv.RequireRoot(b)
	bin, _ := harness.PlainBinaries(b) // rates of a race-instrumented manad say little
	e := newEnvWith(b, bin)
	e.h = New(Options{Client: func(context.Context) (*client.Client, error) { return e.c, nil }})
	var fd int
	require.NoError(b, harness.InNetNS(e.ns, func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}))
	b.Cleanup(func() { unix.Close(fd) })
	for _, cmd := range []struct {
		name string
		cmd  uint32
		size int
	}{{"GCHANNELS", unix.ETHTOOL_GCHANNELS, 36}, {"GDRVINFO", unix.ETHTOOL_GDRVINFO, 196}} {
		b.Run(cmd.name+"/manad-port", func(b *testing.B) {
			for b.Loop() {
				if r := e.ioctl(e.port, cmdOnly(cmd.cmd, cmd.size)); !r.handled || r.err != nil {
					b.Fatal(r.err)
				}
			}
		})
		b.Run(cmd.name+"/kernel-veth", func(b *testing.B) {
			for b.Loop() {
				if _, err := kernelIoctl(fd, e.veth, cmdOnly(cmd.cmd, cmd.size)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
