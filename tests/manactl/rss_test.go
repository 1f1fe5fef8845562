package manactl

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rssText is `ethtool -x DEV` of a running port with the default key and the default table over
// queues.
func rssText(dev string, queues int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "RX flow hash indirection table for %s with %d RX ring(s):\n", dev, queues)
	for i := 0; i < vnic.RSSIndirSize; i++ {
		if i%8 == 0 {
			fmt.Fprintf(&b, "%5d: ", i)
		}
		fmt.Fprintf(&b, " %5d", i%queues)
		if i%8 == 7 {
			b.WriteString("\n")
		}
	}
	key := make([]string, len(vnic.DefaultRSSKey))
	for i, k := range vnic.DefaultRSSKey {
		key[i] = fmt.Sprintf("%02x", k)
	}
	b.WriteString("RSS hash key:\n" + strings.Join(key, ":") + "\n")
	b.WriteString("RSS hash function:\n    toeplitz: on\n    xor: off\n    crc32: off\n")
	return b.String()
}

// TestRSSCommands: against the real daemon, `manactl -x PORT` shows the default table over the
// port's queues, the key and Toeplitz, for an unprivileged user too; after `-L combined 2` the
// table is the default over two queues; --json carries the same table.
func TestRSSCommands(t *testing.T) {
	dir := worldDir(t)
	ns := harness.Name("mrn", "")
	port := harness.Name("mrs", "0")
	d := harness.Start(t, dir, "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nqueues = 4\npersistent = false\n", port, ns), ns)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: ns, socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}

	harness.Run(t, ns, "ip", "link", "set", port, "up")
	harness.Eventually(t, "the port runs", func() bool { return ok(t, "-x", e.mctl(t, "-x", port)) == rssText(port, 4) })
	assert.Equal(t, rssText(port, 4), ok(t, "-x as nobody", e.mctlAs(t, "-x", port)), "-x as nobody")
	ok(t, "-L", e.mctl(t, "-L", port, "combined", "2"))
	assert.Equal(t, rssText(port, 2), ok(t, "-x after -L", e.mctl(t, "-x", port)), "-x after -L combined 2")
	var js []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(t, "--json -x", e.mctl(t, "--json", "-x", port))), &js))
	if len(js) != 1 || js[0]["rss-hash-function"] != "toeplitz" || len(js[0]["rss-indirection-table"].([]any)) != vnic.RSSIndirSize {
		t.Errorf("--json -x: %v", js)
	}
}

// rxQueuePackets reads rx_Q_packets of every queue from `manactl -S port`.
func (e *e2e) rxQueuePackets(t *testing.T, port string) map[int]uint64 {
	t.Helper()
	out := ok(t, "-S", e.mctl(t, "-S", port))
	m := map[int]uint64{}
	for _, s := range regexp.MustCompile(`(?m)^\s+rx_(\d+)_packets: (\d+)$`).FindAllStringSubmatch(out, -1) {
		q, _ := strconv.Atoi(s[1])
		v, _ := strconv.ParseUint(s[2], 10, 64)
		m[q] = v
	}
	require.NotEmpty(t, m, "no rx_N_packets in -S:\n%s", out)
	return m
}

// indirText is the table part of `ethtool -x DEV` for the table t over rings queues.
func indirText(dev string, rings int, t []uint32) string {
	var b strings.Builder
	fmt.Fprintf(&b, "RX flow hash indirection table for %s with %d RX ring(s):\n", dev, rings)
	for i, q := range t {
		if i%8 == 0 {
			fmt.Fprintf(&b, "%5d: ", i)
		}
		fmt.Fprintf(&b, " %5d", q)
		if i%8 == 7 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestRxfhCommands: against the real daemon, `manactl -X` sets the table of a running port as
// ethtool -X does (equal, weight, start, default, hkey) and `-x` shows it; the traffic that
// reaches the port is steered by it, queue by queue; each refusal prints ethtool's message with
// its exit status; a non-admin is refused; the ethtool core refuses a queue count the user's
// table does not fit; a channel change brings back the default table, as mana's detach/attach
// does, while the key stays.
func TestRxfhCommands(t *testing.T) {
	dir := worldDir(t)
	nsA, nsB := harness.Name("mxa", ""), harness.Name("mxb", "")
	pa, pb := harness.Name("mxa", "0"), harness.Name("mxb", "0")
	d := harness.Start(t, dir, "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\npersistent = false\n"+
		"[[port]]\nname = %q\nnetns = %q\nqueues = 4\npersistent = false\n", pa, nsA, pb, nsB), nsA, nsB)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: nsB, socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}
	harness.Run(t, nsA, "ip", "addr", "add", "10.207.1.1/24", "dev", pa)
	harness.Run(t, nsB, "ip", "addr", "add", "10.207.1.2/24", "dev", pb)
	harness.Run(t, nsA, "ip", "link", "set", pa, "up")
	harness.Run(t, nsB, "ip", "link", "set", pb, "up")
	harness.Eventually(t, "the port runs", func() bool { return e.mctl(t, "-x", pb).stdout == rssText(pb, 4) })
	harness.Run(t, nsA, "ping", "-c", "1", "-W", "5", "10.207.1.2")

	sink, err := harness.ListenPacket(nsB, "10.207.1.2:9207")
	require.NoError(t, err)
	defer sink.Close()
	// send offers n datagrams from four flows (source ports) and waits until the sink read them
	// all, so every one has passed the port's RX queues.
	send := func(n int) {
		t.Helper()
		var conns []net.Conn
		for range 4 {
			c, err := harness.Dial(nsA, "udp", "10.207.1.2:9207")
			require.NoError(t, err)
			defer c.Close()
			conns = append(conns, c)
		}
		buf := make([]byte, 2048)
		for i := range n {
			if _, err := conns[i%4].Write([]byte("rxfh")); err != nil {
				t.Fatal(err)
			}
			sink.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _, err := sink.ReadFrom(buf)
			require.NoError(t, err, "datagram %d", i)
		}
	}
	// steersTo sends n datagrams and checks that each hashed frame went to queue want: the other
	// queues (but 0, which also takes the frames RSS does not hash, ARP) saw none.
	steersTo := func(what string, want int, n int) {
		t.Helper()
		before := e.rxQueuePackets(t, pb)
		send(n)
		after := e.rxQueuePackets(t, pb)
		for q := range after {
			delta := after[q] - before[q]
			switch {
			case q == want && delta < uint64(n):
				t.Errorf("%s: queue %d took %d of the %d datagrams", what, q, delta, n)
			case q != want && q != 0 && delta != 0:
				t.Errorf("%s: queue %d took %d frames, want all on queue %d", what, q, delta, want)
			}
		}
	}

	ok(t, "-X equal 2", e.mctl(t, "-X", pb, "equal", "2"))
	if got := ok(t, "-x", e.mctl(t, "-x", pb)); !strings.HasPrefix(got, indirText(pb, 4, rssTableOf(64, func(i int) uint32 { return uint32(i % 2) }))) {
		t.Errorf("-x after -X equal 2:\n%s", got)
	}
	ok(t, "-X equal 1 start 3", e.mctl(t, "-X", pb, "equal", "1", "start", "3"))
	steersTo("equal 1 start 3", 3, 100)
	ok(t, "--set-rxfh-indir weight 0 1", e.mctl(t, "--set-rxfh-indir", pb, "weight", "0", "1"))
	steersTo("weight 0 1", 1, 100)
	ok(t, "set-rxfh weight 1 1 start 2", e.mctl(t, "set-rxfh", pb, "weight", "1", "1", "start", "2"))
	weighted := ok(t, "-x", e.mctl(t, "-x", pb))
	assert.True(t, strings.HasPrefix(weighted, indirText(pb, 4, rssTableOf(64, func(i int) uint32 { return 2 + uint32(i/32) }))), "-x after weight 1 1 start 2:\n%s", weighted)

	failsWith(t, "-X equal 5", e.mctl(t, "-X", pb, "equal", "5"), 1, "netlink error: entry 4: queue out of range (4): Invalid argument")
	failsWith(t, "-X hkey short", e.mctl(t, "-X", pb, "hkey", "00:01"), 2, "Key is too short for device (2 < 40)")
	failsWith(t, "-X weight 0 0", e.mctl(t, "-X", pb, "weight", "0", "0"), 2, "At least one weight must be non-zero")
	failsWith(t, "-X hfunc xor", e.mctl(t, "-X", pb, "hfunc", "xor"), 1, "netlink error: hash function 0x2 not supported, only toeplitz: Operation not supported")
	failsWith(t, "-X hfunc md5", e.mctl(t, "-X", pb, "hfunc", "md5"), 1, "Unknown hash function: md5")
	failsWith(t, "-X context 1", e.mctl(t, "-X", pb, "context", "1", "equal", "2"), 1, "netlink error: Operation not supported")
	failsWith(t, "-X xfrm", e.mctl(t, "-X", pb, "xfrm", "symmetric-xor"), 1, "netlink error: Operation not supported")
	failsWith(t, "-X as nobody", e.mctlAs(t, "-X", pb, "equal", "2"), 1, e.eperm())
	r := e.mctl(t, "-X", pb)
	assert.Equal(t, 1, r.code, "-X without parameters: %+v", r)
	assert.True(t, strings.HasPrefix(r.stderr, "manactl: set-rxfh: parameters missing"), "-X without parameters: %+v", r)
	// Nothing of the refused requests reached the port.
	assert.Equal(t, weighted, ok(t, "-x", e.mctl(t, "-x", pb)), "-x after the refusals")

	// While the user's table names queue 3, the ethtool core refuses fewer than 4 queues; a
	// channel change it allows rebuilds the queues: the default table over the new count.
	failsWith(t, "-L under the table", e.mctl(t, "-L", pb, "combined", "3"), 1,
		"netlink error: requested channel counts are too low for existing indirection table (3): Invalid argument")
	ok(t, "-X equal 2", e.mctl(t, "-X", pb, "equal", "2"))
	ok(t, "-L", e.mctl(t, "-L", pb, "combined", "2"))
	assert.Equal(t, rssText(pb, 2), ok(t, "-x after -L", e.mctl(t, "-x", pb)), "-x after -L combined 2")
	// The table mana restored still counts as the user's (IFF_RXFH_CONFIGURED stays) until
	// the default is asked for.
	failsWith(t, "-L 1 under the restored table", e.mctl(t, "-L", pb, "combined", "1"), 1,
		"netlink error: requested channel counts are too low for existing indirection table (1): Invalid argument")
	key := make([]string, vnic.RSSKeySize)
	for i := range key {
		key[i] = fmt.Sprintf("%02x", 0x40+i)
	}
	ok(t, "-X hkey", e.mctl(t, "-X", pb, "hkey", strings.Join(key, ":"), "hfunc", "toeplitz"))
	ok(t, "-X default", e.mctl(t, "-X", pb, "default"))
	ok(t, "-L", e.mctl(t, "-L", pb, "combined", "1"))
	ok(t, "-L", e.mctl(t, "-L", pb, "combined", "3"))
	got := ok(t, "-x", e.mctl(t, "-x", pb))
	if !strings.HasPrefix(got, indirText(pb, 3, rssTableOf(64, func(i int) uint32 { return uint32(i % 3) }))) ||
		!strings.Contains(got, "RSS hash key:\n"+strings.Join(key, ":")+"\n") {
		t.Errorf("-x after hkey and -L combined 3 (the default table, the key kept):\n%s", got)
	}
}

func rssTableOf(n int, f func(i int) uint32) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = f(i)
	}
	return t
}

// TestRxfhKernelFallback: for a device that is not a manad port, -X goes to the kernel's ethtool
// netlink (with --kernel, and when manad answers ENODEV), whose RSS_SET answers for a veth
// without RSS as the kernel does: a table needs RSS_GET's sizes, which a veth does not have; a
// hash function is refused by the core without set_rxfh; a request changing nothing succeeds.
func TestRxfhKernelFallback(t *testing.T) {
	dir := worldDir(t)
	bin := manactlIn(t, dir)
	ns, other := harness.Name("mxk", ""), harness.Name("mxo", "")
	harness.Run(t, "", "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	harness.Run(t, ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "manad"), 0o755))
	d := harness.Start(t, filepath.Join(dir, "manad"), "",
		fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\npersistent = false\n", harness.Name("mxv", "0"), other), other)
	for _, pre := range [][]string{{"--kernel"}, nil} {
		mctl := func(args ...string) result {
			return run(t, ns, []string{"MANAD_SOCKET=" + d.Socket}, append(append([]string{bin}, pre...), args...)...)
		}
		failsWith(t, fmt.Sprintf("%v -X vb equal 2", pre), mctl("-X", "vb", "equal", "2"), 1, "netlink error: Operation not supported")
		failsWith(t, fmt.Sprintf("%v -X vb hfunc toeplitz", pre), mctl("-X", "vb", "hfunc", "toeplitz"), 1, "netlink error: Operation not supported")
		ok(t, fmt.Sprintf("%v -X vb context 0", pre), mctl("-X", "vb", "context", "0"))
	}
}
