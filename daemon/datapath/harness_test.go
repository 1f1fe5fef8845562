package datapath

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/manad/manad/internal/rrclient"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// harness plays the daemon: one configuration lock, one segment, ports on real TAPs in their own
// network namespaces.
type harness struct {
	t   testing.TB
	mu  sync.Mutex // the configuration lock
	seg *Segment
	log *slog.Logger
	n   int
}

func newHarness(t testing.TB) *harness {
	taptest.Require(t)
	lvl := slog.LevelWarn
	if os.Getenv("MANAD_TEST_LOG") != "" {
		lvl = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	return &harness{t: t, seg: NewSegment("test"), log: log}
}

// locked runs f with the configuration lock held.
func (h *harness) locked(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

type portOpts struct {
	queues   int
	pageSize int
	rxRing   int
	noInline bool
	ns       string // "" = a new namespace
	noIPv6   bool
	offload  bool // the TAP carries virtio headers and offloads (tap.Config.Offload)
	mtu      int  // 0 = 1500
}

// testPort is one port: TAP "eth0" in its namespace with address 10.77.0.<n>/24, its endpoint
// and its vnic port, opened.
type testPort struct {
	h    *harness
	name string
	ns   string
	ip   net.IP
	mac  net.HardwareAddr
	dev  *tap.Device
	ep   *Endpoint
	port *vnic.Port
}

// addPort creates, starts and opens a port; everything is torn down, and checked for leaked
// buffers, when the test ends.
func (h *harness) addPort(o portOpts) *testPort {
	t := h.t
	t.Helper()
	h.n++
	if o.queues == 0 {
		o.queues = 4
	}
	if o.pageSize == 0 {
		o.pageSize = 16384
	}
	if o.rxRing == 0 {
		o.rxRing = 256
	}
	if o.mtu == 0 {
		o.mtu = 1500
	}
	tp := &testPort{h: h, name: fmt.Sprintf("p%d", h.n), ip: net.IPv4(10, 77, 0, byte(h.n)).To4(),
		mac: net.HardwareAddr{0x02, 0x4d, 0x41, 0x4e, 0x41, byte(h.n)}}
	tp.ns = o.ns
	if tp.ns == "" {
		tp.ns = taptest.NetNS(t)
	}
	if o.noIPv6 {
		disableIPv6(t, tp.ns)
	}
	ifname := "eth0"
	if o.ns != "" {
		ifname = "eth" + strconv.Itoa(h.n)
	}
	dev, err := tap.Open(tap.Config{Name: ifname, MAC: tp.mac, MTU: o.mtu, Queues: o.queues, NetNS: tp.ns, Logger: h.log, Offload: o.offload})
	require.NoError(t, err, "tap.Open")
	tp.dev = dev
	tp.ep = NewEndpoint(h.seg, tp.mac, h.log.With("port", tp.name))
	tp.ep.inline = !o.noInline
	tp.port, err = vnic.New(vnic.Config{
		Name: tp.name, Lock: &h.mu, Hardware: vnic.Hardware{PageSize: o.pageSize}, Host: tp.ep, Wire: tp.ep, Logger: h.log,
		PoolReleaseInterval: 5 * time.Millisecond,
	}, vnic.Settings{MTU: o.mtu, Queues: o.queues, RxRing: o.rxRing, TxRing: 256})
	if err != nil {
		dev.Delete()
		t.Fatalf("vnic.New: %v", err)
	}
	require.NoError(t, tp.ep.Start(tp.port, dev), "Start")
	t.Cleanup(func() { tp.teardown(t) })
	h.locked(func() {
		require.NoError(t, tp.port.Open(), "Open")
	})
	taptest.IP(t, tp.ns, "addr", "add", tp.ip.String()+"/24", "dev", ifname)
	taptest.IP(t, tp.ns, "link", "set", ifname, "up")
	return tp
}

// teardown stops the endpoint, removes the port and checks that every RX buffer came back.
func (tp *testPort) teardown(t testing.TB) {
	tp.ep.Stop()
	var td *vnic.Teardown
	tp.h.locked(func() { td = tp.port.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.NoError(t, td.Wait(ctx), "port %s teardown", tp.name)
	n := tp.port.Memory().InUse()
	assert.Equal(t, int64(0), n, "port %s: %d bytes still charged after teardown", tp.name, n)
	assert.NoError(t, tp.dev.Close(), "port %s: closing the TAP", tp.name)
}

// disableIPv6 keeps a namespace quiet (no router solicitations, DAD or MLD).
func disableIPv6(t testing.TB, ns string) {
	t.Helper()
	taptest.InNetNS(t, ns, func() {
		// /proc/sys/net reflects the namespace of the thread that opens it.
		for _, k := range []string{"all", "default"} {
			p := "/proc/sys/net/ipv6/conf/" + k + "/disable_ipv6"
			assert.NoError(t, os.WriteFile(p, []byte("1"), 0), "%s", p)
		}
	})
}

// state returns the port's vnic state.
func (tp *testPort) state() vnic.State {
	var st vnic.State
	tp.h.locked(func() { st = tp.port.State() })
	return st
}

// queueStats returns the named per-queue ethtool statistic (e.g. "packets") of every RX and TX
// queue.
func (tp *testPort) queueStats(stat string) (rx, tx []uint64) {
	var names []string
	var vals []uint64
	var queues int
	tp.h.locked(func() {
		queues = tp.port.Settings().Queues
		names = vnic.StatNames(queues)
		vals = tp.port.Stats()
	})
	byName := map[string]uint64{}
	for i, n := range names {
		byName[n] = vals[i]
	}
	for q := range queues {
		rx = append(rx, byName[fmt.Sprintf("rx_%d_%s", q, stat)])
		tx = append(tx, byName[fmt.Sprintf("tx_%d_%s", q, stat)])
	}
	return rx, tx
}

// ping sends one ICMP echo request from tp to dst and waits for the reply.
func (tp *testPort) ping(dst net.IP, seq int, timeout time.Duration) error {
	var fd int
	var err error
	taptest.InNetNS(tp.h.t, tp.ns, func() {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	})
	if err != nil {
		return fmt.Errorf("raw ICMP socket: %w", err)
	}
	defer unix.Close(fd)
	id := uint16(os.Getpid())
	req := make([]byte, 8+32)
	req[0] = 8 // echo request
	binary.BigEndian.PutUint16(req[4:], id)
	binary.BigEndian.PutUint16(req[6:], uint16(seq))
	copy(req[8:], "manad datapath ping payload.....")
	binary.BigEndian.PutUint16(req[2:], rrclient.Checksum(req))
	var to unix.SockaddrInet4
	copy(to.Addr[:], dst.To4())
	if err := unix.Sendto(fd, req, 0, &to); err != nil {
		return fmt.Errorf("send echo request: %w", err)
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("no echo reply from %v (seq %d) within %v", dst, seq, timeout)
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		if n < 20 {
			continue
		}
		ihl := int(buf[0]&0x0f) * 4
		icmp := buf[ihl:n]
		if len(icmp) >= 8 && icmp[0] == 0 && net.IP(buf[12:16]).Equal(dst) &&
			binary.BigEndian.Uint16(icmp[4:]) == id && binary.BigEndian.Uint16(icmp[6:]) == uint16(seq) {
			if string(icmp[8:]) != string(req[8:]) {
				return fmt.Errorf("echo reply payload differs")
			}
			return nil
		}
	}
}

// pingOK pings until a reply comes (the first may wait for ARP) and fails the test otherwise.
func (tp *testPort) pingOK(t testing.TB, dst *testPort) {
	t.Helper()
	var err error
	for seq := 1; seq <= 5; seq++ {
		if err = tp.ping(dst.ip, seq, 2*time.Second); err == nil {
			return
		}
	}
	t.Fatalf("%s → %s: %v", tp.name, dst.name, err)
}

// tcpTransfer sends size random bytes over each of flows TCP connections from src to dst, all at
// once, and checks that each arrived intact (SHA-256).
func tcpTransfer(t testing.TB, src, dst *testPort, flows, size int) {
	t.Helper()
	var ln net.Listener
	var err error
	taptest.InNetNS(t, dst.ns, func() { ln, err = net.Listen("tcp4", net.JoinHostPort(dst.ip.String(), "0")) })
	require.NoError(t, err, "listen")
	defer ln.Close()
	deadline := time.Now().Add(2 * time.Minute)
	type result struct {
		sum [32]byte
		n   int64
		err error
	}
	got := make(chan result, flows)
	go func() {
		for range flows {
			c, err := ln.Accept()
			if err != nil {
				got <- result{err: err}
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(deadline)
				h := sha256.New()
				n, err := io.Copy(h, c)
				var r result
				copy(r.sum[:], h.Sum(nil))
				r.n, r.err = n, err
				got <- r
			}()
		}
	}()
	sent := make(map[[32]byte]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, flows)
	for range flows {
		var c net.Conn
		taptest.InNetNS(t, src.ns, func() {
			d := net.Dialer{Deadline: deadline}
			c, err = d.Dial("tcp4", ln.Addr().String())
		})
		require.NoError(t, err, "dial")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			c.SetDeadline(deadline)
			data := make([]byte, size)
			rand.Read(data)
			sum := sha256.Sum256(data)
			mu.Lock()
			sent[sum] = true
			mu.Unlock()
			if _, err := c.Write(data); err != nil {
				errs <- fmt.Errorf("write: %w", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range flows {
		r := <-got
		require.NoError(t, r.err, "receive")
		require.Equal(t, int64(size), r.n, "a connection delivered %d bytes that match no sent stream (want %d bytes)", r.n, size)
		require.True(t, sent[r.sum], "a connection delivered %d bytes that match no sent stream (want %d bytes)", r.n, size)
		delete(sent, r.sum)
	}
}

// udpBurst sends n numbered datagrams of size bytes from src to dst over several sockets (so RSS
// spreads them), in chunks the receiver's socket buffer can hold, and checks each arrives exactly
// once and intact.
func udpBurst(t testing.TB, src, dst *testPort, n, size, sockets int) {
	t.Helper()
	var rc *net.UDPConn
	var err error
	taptest.InNetNS(t, dst.ns, func() {
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: dst.ip})
	})
	require.NoError(t, err, "listen")
	defer rc.Close()
	senders := make([]*net.UDPConn, sockets)
	for i := range senders {
		taptest.InNetNS(t, src.ns, func() {
			senders[i], err = net.DialUDP("udp4", nil, rc.LocalAddr().(*net.UDPAddr))
		})
		require.NoError(t, err, "dial")
		defer senders[i].Close()
	}
	seen := make([]bool, n)
	buf := make([]byte, 65536)
	payload := func(seq int) []byte {
		b := make([]byte, size)
		binary.BigEndian.PutUint32(b, uint32(seq))
		for i := 4; i < size; i++ {
			b[i] = byte(seq + i)
		}
		return b
	}
	const chunk = 32
	for base := 0; base < n; base += chunk {
		end := min(base+chunk, n)
		for seq := base; seq < end; seq++ {
			_, err := senders[seq%sockets].Write(payload(seq))
			require.NoError(t, err, "send %d", seq)
		}
		for seq := base; seq < end; seq++ {
			rc.SetReadDeadline(time.Now().Add(5 * time.Second))
			m, err := rc.Read(buf)
			require.NoError(t, err, "datagrams %d..%d", base, end-1)
			s := int(binary.BigEndian.Uint32(buf))
			if m != size || s < base || s >= end || seen[s] || string(buf[:m]) != string(payload(s)) {
				t.Fatalf("bad datagram: %d bytes, seq %d (chunk %d..%d, seen %v)", m, s, base, end-1, s >= 0 && s < n && seen[s])
			}
			seen[s] = true
		}
	}
}

// nonZero counts the non-zero values.
func nonZero(v []uint64) int {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	return n
}
