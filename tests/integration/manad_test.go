// Package integration runs the real manad binary in network namespaces: traffic between two
// ports, reconfiguration under load, link reconciliation, XDP and crash recovery (issue 4).
package integration

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/daemon/xdp/xdptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// pair is manad with two ports on one segment, each in its own namespace, addressed and up.
type pair struct {
	d                *harness.Daemon
	nsA, nsB         string
	portA, portB     string
	ipA, ipB         string
	clientA, clientB *client.Client
}

// startPair starts manad with two ports; extra is added to both [[port]] tables.
func startPair(t *testing.T, dir, extra string) *pair {
	t.Helper()
	p := &pair{
		nsA: harness.Name("mia", ""), nsB: harness.Name("mib", ""),
		portA: harness.Name("ma", "0"), portB: harness.Name("mb", "0"),
		ipA: "10.201.0.1", ipB: "10.201.0.2",
	}
	ports := fmt.Sprintf(`
[[port]]
name = %q
netns = %q
segment = "s"
queues = 4
rx_ring = 256
%s
[[port]]
name = %q
netns = %q
segment = "s"
queues = 4
rx_ring = 256
%s
`, p.portA, p.nsA, extra, p.portB, p.nsB, extra)
	p.d = harness.Start(t, dir, "", ports, p.nsA, p.nsB)
	p.up(t)
	p.clientA, p.clientB = p.d.Client(p.nsA), p.d.Client(p.nsB)
	return p
}

// up addresses both ports and brings them up (idempotent across restarts).
func (p *pair) up(t *testing.T) {
	t.Helper()
	for _, x := range []struct{ ns, port, ip string }{{p.nsA, p.portA, p.ipA}, {p.nsB, p.portB, p.ipB}} {
		if out, _ := harness.RunErr(x.ns, "ip", "-4", "addr", "show", "dev", x.port); !strings.Contains(out, x.ip) {
			harness.Run(t, x.ns, "ip", "addr", "add", x.ip+"/24", "dev", x.port)
		}
		harness.Run(t, x.ns, "ip", "link", "set", x.port, "up")
	}
}

func (p *pair) info(t *testing.T, c *client.Client, port string) *genl.PortInfo {
	t.Helper()
	info, err := c.Port(context.Background(), client.Interface{Name: port})
	require.NoError(t, err, "port %s", port)
	return info
}

func (p *pair) stats(t *testing.T, c *client.Client, port string) map[string]uint64 {
	t.Helper()
	st, err := c.Stats(context.Background(), client.Interface{Name: port})
	require.NoError(t, err, "stats %s", port)
	m := make(map[string]uint64, len(st))
	for _, s := range st {
		m[s.Name] = s.Value
	}
	return m
}

func sum(m map[string]uint64, prefix, suffix string) uint64 {
	var n uint64
	for k, v := range m {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, suffix) {
			n += v
		}
	}
	return n
}

func (p *pair) ping(t *testing.T) {
	t.Helper()
	harness.Run(t, p.nsA, "ping", "-c", "3", "-i", "0.2", "-W", "2", p.ipB)
}

func setFlag(t *testing.T, c *client.Client, port string, on bool) error {
	t.Helper()
	return c.SetPrivateFlags(context.Background(), client.PrivateFlags{
		Interface: client.Interface{Name: port}, Flags: []client.Flag{{Name: "full-page-rx", On: on}},
	})
}

// TestTraffic: ping, a TCP transfer checked end to end, and UDP datagrams both ways between two
// namespaces; per-queue counters on both ports.
func TestTraffic(t *testing.T) {
	p := startPair(t, "", "")
	p.ping(t)

	tr, err := harness.StartTransfer(p.nsA, p.nsB, p.ipB+":5201", 32<<20, 1)
	require.NoError(t, err)
	require.NoError(t, tr.Wait(2*time.Minute))
	require.NoError(t, tr.Check())

	srv, err := harness.ListenPacket(p.nsB, p.ipB+":5300")
	require.NoError(t, err)
	defer srv.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			srv.WriteTo(buf[:n], from)
		}
	}()
	cl, err := harness.Dial(p.nsA, "udp", p.ipB+":5300")
	require.NoError(t, err)
	defer cl.Close()
	for i := 0; i < 200; i++ {
		msg := []byte(fmt.Sprintf("datagram %d %s", i, strings.Repeat("x", i*5)))
		cl.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := cl.Write(msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2048)
		n, err := cl.Read(buf)
		require.NoError(t, err, "UDP echo %d: %q, %v", i, buf[:n], err)
		require.Equal(t, string(msg), string(buf[:n]), "UDP echo %d: %q, %v", i, buf[:n], err)
	}

	sb := p.stats(t, p.clientB, p.portB)
	rx := sum(sb, "rx_", "_packets")
	assert.GreaterOrEqual(t, rx, uint64(20000), "port B counted %d RX packets for a 32 MiB transfer", rx)
	// With offloads (the default) the TAP hands over superframes, and mana counts a TSO skb as
	// one TX packet (mana_start_xmit), so TX is checked by bytes, and TSO must have been used.
	sa := p.stats(t, p.clientA, p.portA)
	tx := sum(sa, "tx_", "_bytes") - sum(sa, "tx_", "_tso_bytes") - sum(sa, "tx_", "_inner_bytes")
	assert.GreaterOrEqual(t, tx, uint64(32<<20), "port A counted %d TX bytes for a 32 MiB transfer", tx)
	assert.NotEqual(t, uint64(0), sum(sa, "tx_", "_tso_packets"), "port A counted no TSO packets: the TAP's offloads are not in use")
}

// TestFlipDuringTransfer flips full-page-rx 100 times while a TCP stream runs: the stream
// completes intact, the counters never go backwards, and no RX buffer is left in flight.
func TestFlipDuringTransfer(t *testing.T) {
	p := startPair(t, "", `page_size = "64K"`)
	tr, err := harness.StartTransfer(p.nsA, p.nsB, p.ipB+":5202", 0, 2)
	require.NoError(t, err)
	var last uint64
	layouts := map[bool]int{}
	for i := 0; i < 100; i++ {
		if err := setFlag(t, p.clientB, p.portB, i%2 == 0); err != nil {
			tr.Stop()
			t.Fatalf("flip %d: %v", i, err)
		}
		info := p.info(t, p.clientB, p.portB)
		layouts[info.Layout.Single]++
		rx := sum(p.stats(t, p.clientB, p.portB), "rx_", "_packets")
		require.GreaterOrEqual(t, rx, last, "flip %d: RX packets went from %d to %d", i, last, rx)
		last = rx
		time.Sleep(5 * time.Millisecond)
	}
	tr.Stop()
	require.NoError(t, tr.Check())
	if layouts[true] != 50 || layouts[false] != 50 {
		t.Errorf("layouts seen: %v (64K pages: 31 fragments vs one buffer per page)", layouts)
	}
	assert.NotEqual(t, uint64(0), last, "no packets counted")
	harness.Eventually(t, "buffers in flight to reach 0", func() bool {
		return p.info(t, p.clientB, p.portB).BuffersInFlight == 0
	})
}

// TestLinkReconcile: `ip link set mtu` goes through the port's reconfiguration (and is put back
// when the port refuses it); `ip link set down/up` closes and opens the port.
func TestLinkReconcile(t *testing.T) {
	p := startPair(t, "", "")
	harness.Run(t, p.nsB, "ip", "link", "set", p.portB, "mtu", "4000")
	harness.Eventually(t, "MTU 4000 applied", func() bool { return p.info(t, p.clientB, p.portB).MTU == 4000 })
	l := p.info(t, p.clientB, p.portB).Layout
	assert.Equal(t, uint32(4014), l.DataSize, "datasize %d after MTU 4000", l.DataSize)

	// 9500 is above the port's max MTU (9000): refused, and the TAP's MTU is put back.
	harness.Run(t, p.nsB, "ip", "link", "set", p.portB, "mtu", "9500")
	harness.Eventually(t, "the TAP's MTU to be restored", func() bool {
		out, _ := harness.RunErr(p.nsB, "cat", "/sys/class/net/"+p.portB+"/mtu")
		return strings.TrimSpace(out) == "4000"
	})
	mtu := p.info(t, p.clientB, p.portB).MTU
	assert.Equal(t, uint32(4000), mtu, "port MTU %d after a refused change", mtu)

	// MTU set through manad updates the TAP.
	require.NoError(t, p.clientB.SetMTU(context.Background(), client.Interface{Name: p.portB}, 1500))
	out := harness.Run(t, p.nsB, "cat", "/sys/class/net/"+p.portB+"/mtu")
	assert.Equal(t, "1500", strings.TrimSpace(out), "TAP MTU %q after SetMTU 1500", out)

	harness.Run(t, p.nsB, "ip", "link", "set", p.portB, "down")
	harness.Eventually(t, "the port to go down", func() bool {
		i := p.info(t, p.clientB, p.portB)
		return !i.AdminUp && !i.Running && i.MemoryInUse == 0
	})
	_, err := harness.RunErr(p.nsA, "ping", "-c", "1", "-W", "1", p.ipB)
	assert.Error(t, err, "ping answered by a port that is down")
	harness.Run(t, p.nsB, "ip", "link", "set", p.portB, "up")
	harness.Eventually(t, "the port to come up", func() bool { return p.info(t, p.clientB, p.portB).Running })
	p.ping(t)
}

// dropUDPPort is an XDP program that drops UDP datagrams to port dport and passes the rest.
func dropUDPPort(dport uint16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // data
		asm.LoadMem(asm.R3, asm.R1, 4, asm.Word), // data_end
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 38),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 12, asm.Half),
		asm.JNE.Imm(asm.R5, 0x0008, "pass"), // ETH_P_IP, big-endian in a little-endian load
		asm.LoadMem(asm.R5, asm.R2, 23, asm.Byte),
		asm.JNE.Imm(asm.R5, 17, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 36, asm.Half),
		asm.JNE.Imm(asm.R5, int32(dport>>8|dport<<8&0xff00), "pass"),
		asm.Mov.Imm(asm.R0, 1), // XDP_DROP
		asm.Return(),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("pass"), // XDP_PASS
		asm.Return(),
	}
}

// TestXDP attaches a built-in program and a real eBPF object and checks the traffic and the
// rx_<q>_xdp_* counters.
func TestXDP(t *testing.T) {
	p := startPair(t, "", "")
	ctx := context.Background()
	ifB := client.Interface{Name: p.portB}

	require.NoError(t, p.clientB.AttachXDP(ctx, ifB, genl.XDPProgram{Builtin: "drop"}))
	info := p.info(t, p.clientB, p.portB)
	if info.XDP != "drop" || !info.Layout.Single || info.Layout.Headroom != 256 {
		t.Errorf("after attaching drop: xdp %q, layout %+v", info.XDP, info.Layout)
	}
	if _, err := harness.RunErr(p.nsA, "ping", "-c", "2", "-i", "0.2", "-W", "1", p.ipB); err == nil {
		t.Error("ping passed an XDP_DROP program")
	}
	assert.NotEqual(t, uint64(0), sum(p.stats(t, p.clientB, p.portB), "rx_", "_xdp_drop"), "no rx_*_xdp_drop counted")
	require.NoError(t, p.clientB.DetachXDP(ctx, ifB))
	p.ping(t)

	obj, err := xdptest.BuildELF(elf.EM_BPF, "GPL", xdptest.Prog{Section: "xdp", Name: "drop_udp_7777", Insns: dropUDPPort(7777)})
	require.NoError(t, err)
	require.NoError(t, p.clientB.AttachXDP(ctx, ifB, genl.XDPProgram{Object: obj, Section: "xdp", Name: "drop7777"}))
	assert.Equal(t, "ebpf:drop7777", p.info(t, p.clientB, p.portB).XDP, "xdp")
	before := sum(p.stats(t, p.clientB, p.portB), "rx_", "_xdp_drop")
	for _, port := range []int{7777, 7778} {
		srv, err := harness.ListenPacket(p.nsB, p.ipB+":"+strconv.Itoa(port))
		require.NoError(t, err)
		cl, err := harness.Dial(p.nsA, "udp", p.ipB+":"+strconv.Itoa(port))
		require.NoError(t, err)
		for i := 0; i < 20; i++ {
			cl.Write([]byte("hello"))
		}
		srv.SetReadDeadline(time.Now().Add(time.Second))
		_, _, rerr := srv.ReadFrom(make([]byte, 64))
		assert.Equal(t, rerr != nil, port == 7777, "UDP to %d: read error %v", port, rerr)
		srv.Close()
		cl.Close()
	}
	after := sum(p.stats(t, p.clientB, p.portB), "rx_", "_xdp_drop")
	assert.Equal(t, uint64(20), after-before, "eBPF program dropped %d datagrams, want 20", after-before)
	p.ping(t)

	// XDP cannot be attached above MANA_XDP_MTU_MAX (3506 on 4K pages).
	require.NoError(t, p.clientB.DetachXDP(ctx, ifB))
	require.NoError(t, p.clientB.SetMTU(ctx, ifB, 4000))
	err = p.clientB.AttachXDP(ctx, ifB, genl.XDPProgram{Builtin: "pass"})
	var ce *client.Error
	if !errors.Is(err, unix.EOPNOTSUPP) || !errors.As(err, &ce) || ce.Message != "XDP: mtu too large" {
		t.Errorf("attach at MTU 4000: %v", err)
	}
}

// TestCrashRestart kills manad with SIGKILL after runtime changes and restarts it: the ports come
// back with their settings, the TAPs with their addresses, and traffic flows.
func TestCrashRestart(t *testing.T) {
	dir := t.TempDir()
	p := startPair(t, dir, "")
	ctx := context.Background()
	ifB := client.Interface{Name: p.portB}
	require.NoError(t, setFlag(t, p.clientB, p.portB, true))
	require.NoError(t, p.clientB.SetMTU(ctx, ifB, 3000))
	require.NoError(t, p.clientB.SetRings(ctx, ifB, client.RingsUpdate{Rx: ptr(uint32(512)), Tx: ptr(uint32(512))}))
	require.NoError(t, p.clientB.SetChannels(ctx, ifB, client.ChannelsUpdate{Combined: ptr(uint32(2))}))
	require.NoError(t, p.clientB.AttachXDP(ctx, ifB, genl.XDPProgram{Builtin: "pass"}))
	want := p.info(t, p.clientB, p.portB)
	p.ping(t)

	p.d.Kill9()
	addrs := harness.Run(t, p.nsB, "ip", "-4", "addr", "show", "dev", p.portB)
	require.Contains(t, addrs, p.ipB, "address gone after the crash")
	p.d.Restart()
	p.clientA, p.clientB = p.d.Client(p.nsA), p.d.Client(p.nsB)
	got := p.info(t, p.clientB, p.portB)
	assert.Equal(t, uint32(3000), got.MTU, "after restart: %+v\nwant settings of %+v", got, want)
	assert.Equal(t, uint32(512), got.RxRing, "after restart: %+v\nwant settings of %+v", got, want)
	assert.Equal(t, uint32(512), got.TxRing, "after restart: %+v\nwant settings of %+v", got, want)
	assert.Equal(t, uint32(2), got.Queues, "after restart: %+v\nwant settings of %+v", got, want)
	assert.Equal(t, want.PrivFlags, got.PrivFlags, "after restart: %+v\nwant settings of %+v", got, want)
	assert.Equal(t, "pass", got.XDP, "after restart: %+v\nwant settings of %+v", got, want)
	assert.True(t, got.Running, "after restart: %+v\nwant settings of %+v", got, want)
	assert.Contains(t, harness.Run(t, p.nsB, "ip", "-4", "addr", "show", "dev", p.portB), p.ipB, "address lost across the restart")
	p.ping(t)
}

func ptr[T any](v T) *T { return &v }

// TestEventsOnlyOnChange: a request that changes nothing (the current value, or one the port
// refuses) announces nothing; the first event a subscriber sees is the real change.
func TestEventsOnlyOnChange(t *testing.T) {
	p := startPair(t, "", "")
	ctx := context.Background()
	// The port coming up (ip link set up) is itself announced; the reply to Port, under the same
	// configuration lock, comes after that announcement was sent.
	harness.Eventually(t, "port B up", func() bool { return p.info(t, p.clientB, p.portB).Running })
	// Subscribe opens a connection of its own: from inside B's namespace, whose ports it hears.
	var sub *client.Subscription
	require.NoError(t, harness.InNetNS(p.nsB, func() (err error) { sub, err = p.clientB.Subscribe(ctx); return err }))
	defer sub.Close()
	ifB := client.Interface{Name: p.portB}
	require.NoError(t, p.clientB.SetMTU(ctx, ifB, 1500), "setting the current MTU")
	require.ErrorIs(t, p.clientB.SetMTU(ctx, ifB, 99999), unix.EINVAL, "MTU 99999")
	require.NoError(t, setFlag(t, p.clientB, p.portB, false))
	require.NoError(t, p.clientB.SetMTU(ctx, ifB, 1400))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		ns, err := sub.Next(wctx)
		require.NoError(t, err, "no change event")
		for _, n := range ns {
			if n.Kind != client.PortChanged {
				continue
			}
			require.NotNil(t, n.Port, "first change event is not the MTU change: %+v", n.Port)
			require.Equal(t, uint32(1400), n.Port.MTU, "first change event is not the MTU change: %+v", n.Port)
			return
		}
	}
}
