package config

import (
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/pagepool"
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func TestDefault(t *testing.T) {
	c := Default()
	assert.Equal(t, DefaultName, c.File, "File")
	assert.Empty(t, cmp.Diff(DefaultDaemonConfig(), c.Daemon), "daemon table differs from the defaults (-want +got)")
	require.Len(t, c.Ports, 2, "%d ports, want 2", len(c.Ports))
	want := []struct{ name, netns string }{{"mana0", "manaA"}, {"mana1", "manaB"}}
	for i, p := range c.Ports {
		assert.Equal(t, want[i].name, p.Name, "port %d", i)
		assert.Equal(t, want[i].netns, p.NetNS, "port %d: netns", i)
		assert.Equal(t, "wire0", p.Segment, "port %d: segment", i)
		assert.True(t, p.Persistent, "port %s: not the driver defaults: %+v", p.Name, p)
		assert.Equal(t, vnic.DefaultMTU, p.MTU, "port %s: not the driver defaults: %+v", p.Name, p)
		assert.Equal(t, vnic.DefaultRxRing, p.RxRing, "port %s: not the driver defaults: %+v", p.Name, p)
		assert.Equal(t, vnic.DefaultTxRing, p.TxRing, "port %s: not the driver defaults: %+v", p.Name, p)
		assert.Equal(t, byte(0x02), p.MAC[0]&0x03, "port %s: MAC %s is not locally administered unicast", p.Name, p.MAC)
	}
	assert.NotEqual(t, string(c.Ports[1].MAC), string(c.Ports[0].MAC), "the two default ports share a MAC")
	// The embedded text is what DefaultTOML returns, and changing the copy changes nothing.
	b := DefaultTOML()
	b[0] = 'X'
	assert.NotEqual(t, byte('X'), DefaultTOML()[0], "DefaultTOML returned the embedded slice itself")
}

// discard is a vnic.Host and vnic.Wire that accepts frames and keeps nothing.
type discard struct{}

func (discard) Deliver(int, []byte, *pagepool.Buffer) bool { return false }
func (discard) Send(int, []byte)                           {}

// TestSpecsMakeValidPorts checks that the port model accepts every spec Parse accepts, with the
// settings unchanged, and that the ports come up: the validation here is no weaker than vnic's.
func TestSpecsMakeValidPorts(t *testing.T) {
	c, err := Parse("ports.toml", []byte(`
[[port]]
name = "big"
page_size = "64K"
max_mtu = 65535
mtu = 64946
xdp = "pass"
rx_ring = 128
tx_ring = 16384
queues = 2
max_queues = 256
memory_budget = "unlimited"

[[port]]
name = "edge"
mtu = 68
max_mtu = 68
rule = "pre-frag"
priv_flags = ["full-page-rx"]
rx_ring = 8192
queues = 1
max_queues = 1
memory_budget = "64MiB"
`))
	require.NoError(t, err)
	specs := append(c.Ports, Default().Ports...)
	var lock sync.Mutex
	for _, spec := range specs {
		cfg := spec.Config()
		cfg.Lock, cfg.Host, cfg.Wire = &lock, discard{}, discard{}
		cfg.Logger = slog.New(slog.DiscardHandler)
		port, err := vnic.New(cfg, spec.Settings)
		if err != nil {
			t.Errorf("port %s: vnic.New refused a valid spec: %v", spec.Name, err)
			continue
		}
		lock.Lock()
		assert.Equal(t, spec.Settings, port.Settings(), "port %s: vnic settings", spec.Name)
		assert.NoError(t, port.Open(), "port %s: Open", spec.Name)
		td := port.Shutdown()
		lock.Unlock()
		assert.NoError(t, td.Wait(t.Context()), "port %s: teardown", spec.Name)
	}
}

func TestParseValues(t *testing.T) {
	root, err := user.LookupGroupId("0")
	require.NoError(t, err, "no group with gid 0 to test admin_group with")
	doc := `
[daemon]
socket = "/tmp/m/manad.sock"
socket_mode = 0o660
admin_group = "` + root.Name + `"
state_dir = "/tmp/state/"
log_level = "DEBUG"
log_format = "json"
max_connections = 100
max_connections_per_uid = 10
idle_timeout = "1m30s"
busy_poll = "0"

[[port]]
name = "eth0"
mac = "02:00:00:00:00:01"
mtu = 3000
max_mtu = 4000
page_size = "16K"
queues = 8
max_queues = 32
rx_ring = 1000
tx_ring = 200
priv_flags = ["full-page-rx", "full-page-rx"]
xdp = "drop"
rule = "pre-headroom"
memory_budget = "512MiB"
segment = "lab.1"
netns = "blue"
persistent = false
rx_alloc = "no-pool"
rx_recycle = false
offload = false
cqe_coalesce_8 = true
rx_cqe_frames = 8

[[port]]
name = "eth1"
rx_alloc = "page-pool-page"
rx_recycle = true
max_mtu = 1000
max_queues = 4
page_size = 65536
memory_budget = 1048576
`
	got, err := Parse("full.toml", []byte(doc))
	require.NoError(t, err)
	want := &Config{
		File: "full.toml",
		Daemon: DaemonConfig{
			Socket: "/tmp/m/manad.sock", SocketMode: 0o660, AdminGroup: root.Name, AdminGID: 0,
			StateDir: "/tmp/state", LogLevel: slog.LevelDebug, LogFormat: "json",
			MaxConnections: 100, MaxConnectionsPerUID: 10, IdleTimeout: 90 * time.Second, BusyPoll: 0,
			MaxPollers: DefaultMaxPollers,
		},
		Ports: []PortSpec{{
			Name: "eth0", MAC: mustMAC("02:00:00:00:00:01"), NetNS: "blue", Segment: "lab.1",
			Hardware: vnic.Hardware{PageSize: 16384, Rule: rxbuf.RulePreHeadroom, MaxMTU: 4000, MaxQueues: 32,
				MemoryBudget: 512 << 20, RxAlloc: rxbuf.AllocNoPool, RxRecycle: vnic.RecycleOff, CQECoalesce8: true},
			Settings: vnic.Settings{MTU: 3000, Queues: 8, RxRing: 1024, TxRing: 256,
				PrivFlags: privflag.FullPageRx, XDP: vnic.XDPProgDrop,
				Coalesce: vnic.Coalesce{RxCQEFrames: 8, RxCQENsecs: vnic.DefaultRxCQENsecs}},
			Line: 14,
		}, {
			// Defaults capped by the port's own limits, as mana_probe_port caps num_queues.
			Name: "eth1", MAC: DeriveMAC("eth1"), Segment: DefaultSegment, Persistent: true,
			Hardware: vnic.Hardware{PageSize: 65536, MaxMTU: 1000, MaxQueues: 4, MemoryBudget: 1 << 20,
				RxAlloc: rxbuf.AllocPagePoolPage, RxRecycle: vnic.RecycleOn},
			Settings: vnic.Settings{MTU: 1000, Queues: 4, RxRing: vnic.DefaultRxRing, TxRing: vnic.DefaultTxRing,
				Coalesce: vnic.DefaultCoalesce()},
			Offload: true, Line: 37,
		}},
	}
	assert.Empty(t, cmp.Diff(want, got), "Parse (-want +got)")
	s, ok := got.Port("eth1")
	assert.True(t, ok, "Port(eth1) not found")
	assert.Equal(t, "eth1", s.Name, "Port(eth1)")
	_, ok = got.Port("nope")
	assert.False(t, ok, "Port(nope) found a port")
}

func TestParseDaemonValueForms(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want func(*DaemonConfig)
	}{
		{`socket_mode = "0600"`, func(d *DaemonConfig) { d.SocketMode = 0o600 }},
		{`socket_mode = "0o640"`, func(d *DaemonConfig) { d.SocketMode = 0o640 }},
		{`socket_mode = 0`, func(d *DaemonConfig) { d.SocketMode = 0 }},
		{`admin_group = 1234`, func(d *DaemonConfig) { d.AdminGroup, d.AdminGID = "1234", 1234 }},
		{`admin_group = "4321"`, func(d *DaemonConfig) { d.AdminGroup, d.AdminGID = "4321", 4321 }},
		{`admin_group = ""`, func(d *DaemonConfig) {}},
		{`log_level = "warning"`, func(d *DaemonConfig) { d.LogLevel = slog.LevelWarn }},
		{`log_level = "Error"`, func(d *DaemonConfig) { d.LogLevel = slog.LevelError }},
		{`max_connections = 1024`, func(d *DaemonConfig) { d.MaxConnections = 1024 }},
		{`max_connections_per_uid = 1`, func(d *DaemonConfig) { d.MaxConnectionsPerUID = 1 }},
		{`idle_timeout = "90s"`, func(d *DaemonConfig) { d.IdleTimeout = 90 * time.Second }},
		{`idle_timeout = "24h"`, func(d *DaemonConfig) { d.IdleTimeout = 24 * time.Hour }},
		{`busy_poll = "50us"`, func(d *DaemonConfig) { d.BusyPoll = 50 * time.Microsecond }},
		{`busy_poll = "1ms"`, func(d *DaemonConfig) { d.BusyPoll = time.Millisecond }},
		{`busy_poll = "0s"`, func(d *DaemonConfig) { d.BusyPoll = 0 }},
	} {
		c, err := Parse("d.toml", []byte("[daemon]\n"+tc.doc+"\n"))
		if err != nil {
			t.Errorf("%s: %v", tc.doc, err)
			continue
		}
		want := DefaultDaemonConfig()
		tc.want(&want)
		assert.Empty(t, cmp.Diff(want, c.Daemon), "%s (-want +got)", tc.doc)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, doc := range []string{"", "# only a comment\n", "[daemon]\n"} {
		c, err := Parse("e.toml", []byte(doc))
		if err != nil {
			t.Errorf("%q: %v", doc, err)
			continue
		}
		assert.Empty(t, c.Ports, "%q: got %+v, want the defaults and no ports", doc, c)
		assert.Equal(t, DefaultDaemonConfig(), c.Daemon, "%q: got %+v, want the defaults and no ports", doc, c)
	}
}

// TestParseErrors checks every kind of problem, with its exact message and line.
func TestParseErrors(t *testing.T) {
	port := func(body string) string { return "[[port]]\nname = \"eth0\"\n" + body + "\n" }
	long := "/" + strings.Repeat("s", 107)
	for _, tc := range []struct {
		name string
		doc  string
		want string // the whole error text
	}{
		// Syntax: the TOML parser's message, at its line.
		{"syntax", "[daemon]\nsocket = \"/x\"\nlog_level = verbose\n", `t.toml:3: invalid TOML: expected value but found "verbose" instead`},
		{"missing equals", "[[port]]\nname \"a\"\n", `t.toml:2: invalid TOML: expected '.' or '=', but got '"' instead`},
		{"duplicate key", "[[port]]\nname = \"a\"\nname = \"b\"\n", `t.toml:3: invalid TOML: Key 'port.name' has already been defined.`},
		{"unterminated string", "[[port]]\nname = \"a\nmtu = 1\n", `t.toml:2: invalid TOML: strings cannot contain newlines`},

		// Top level.
		{"unknown key", "\n\nfoo = 1\n", `t.toml:3: unknown key "foo" (want [daemon], [[port]] or [[segment]])`},
		{"unknown table", "[daemon]\n[deamon]\n", `t.toml:2: unknown table [deamon] (want [daemon], [[port]] or [[segment]])`},
		{"daemon not a table", "daemon = 1\n", `t.toml:1: daemon must be a table ([daemon]), not the integer 1`},
		{"port not an array", "[port]\nname = \"a\"\n", `t.toml:1: port must be an array of tables ([[port]]), not a table`},
		{"port array of scalars", "port = [\n{name = \"a\"},\n 7]\n", `t.toml:3: port #2 must be a table, not the integer 7`},

		// [daemon].
		{"daemon unknown key", "[daemon]\nsoket = \"/x\"\n", `t.toml:2: daemon: unknown key "soket" (did you mean "socket"?)`},
		{"daemon unknown key far", "[daemon]\nzzz = 1\n", `t.toml:2: daemon: unknown key "zzz"`},
		{"socket relative", "[daemon]\nsocket = \"run/x.sock\"\n", `t.toml:2: daemon: socket "run/x.sock" must be an absolute path`},
		{"socket too long", "[daemon]\nsocket = \"" + long + "\"\n", `t.toml:2: daemon: socket path is 108 bytes; a Unix socket path holds at most 107`},
		{"socket type", "[daemon]\nsocket = 5\n", `t.toml:2: daemon: socket must be a string, not the integer 5`},
		{"socket_mode decimal", "[daemon]\nsocket_mode = 666\n", `t.toml:2: daemon: socket_mode 666 out of range (write it in octal: 0o660 or "0660")`},
		{"socket_mode bad string", "[daemon]\nsocket_mode = \"rw-rw-rw-\"\n", `t.toml:2: daemon: socket_mode "rw-rw-rw-" is not permission bits in octal (want e.g. "0660")`},
		{"socket_mode too big", "[daemon]\nsocket_mode = \"1777\"\n", `t.toml:2: daemon: socket_mode "1777" is not permission bits in octal (want e.g. "0660")`},
		{"socket_mode type", "[daemon]\nsocket_mode = true\n", `t.toml:2: daemon: socket_mode must be an octal string or integer, not the boolean true`},
		{"admin_group unknown", "[daemon]\nadmin_group = \"no-such-group-manad\"\n", `t.toml:2: daemon: admin_group "no-such-group-manad": no such group`},
		{"admin_group negative", "[daemon]\nadmin_group = -1\n", `t.toml:2: daemon: admin_group -1 is not a valid gid`},
		{"admin_group type", "[daemon]\nadmin_group = [1]\n", `t.toml:2: daemon: admin_group must be a group name or gid, not an array`},
		{"state_dir relative", "[daemon]\nstate_dir = \"var/lib\"\n", `t.toml:2: daemon: state_dir "var/lib" must be an absolute path`},
		{"log_level", "[daemon]\nlog_level = \"verbose\"\n", `t.toml:2: daemon: log_level "verbose" unknown (want debug, info, warn or error)`},
		{"log_format", "[daemon]\nlog_format = \"xml\"\n", `t.toml:2: daemon: log_format "xml" unknown (want text or json)`},
		{"max_connections zero", "[daemon]\nmax_connections = 0\n", `t.toml:2: daemon: max_connections 0 out of range (1..65536)`},
		{"max_connections type", "[daemon]\nmax_connections = \"many\"\n", `t.toml:2: daemon: max_connections must be an integer, not the string "many"`},
		{"max_connections huge", "[daemon]\nmax_connections = 99999999999\n", `t.toml:2: daemon: max_connections 99999999999 out of range`},
		{"max_connections_per_uid negative", "[daemon]\nmax_connections_per_uid = -1\n", `t.toml:2: daemon: max_connections_per_uid -1 out of range (1..65536)`},
		{"idle_timeout syntax", "[daemon]\nidle_timeout = \"5 minutes\"\n", `t.toml:2: daemon: idle_timeout "5 minutes" is not a duration (want e.g. "30s" or "5m")`},
		{"idle_timeout short", "[daemon]\nidle_timeout = \"10ms\"\n", `t.toml:2: daemon: idle_timeout 10ms out of range (1s..24h0m0s)`},
		{"idle_timeout type", "[daemon]\nidle_timeout = 300\n", `t.toml:2: daemon: idle_timeout must be a duration string such as "5m", not the integer 300`},
		{"busy_poll syntax", "[daemon]\nbusy_poll = \"fast\"\n", `t.toml:2: daemon: busy_poll "fast" is not a duration (want e.g. "200us", or "0" for none)`},
		{"busy_poll long", "[daemon]\nbusy_poll = \"2ms\"\n", `t.toml:2: daemon: busy_poll 2ms out of range (0..1ms)`},
		{"busy_poll negative", "[daemon]\nbusy_poll = \"-1us\"\n", `t.toml:2: daemon: busy_poll -1µs out of range (0..1ms)`},
		{"busy_poll type", "[daemon]\nbusy_poll = 200\n", `t.toml:2: daemon: busy_poll must be a duration string such as "200us", not the integer 200`},

		// [[port]]: names.
		{"name missing", "[[port]]\nmtu = 1500\n", `t.toml:1: port #1: name missing`},
		{"name type", "[[port]]\nname = 0\n", `t.toml:2: port #1: name must be a string, not the integer 0`},
		{"name empty", "[[port]]\nname = \"\"\n", `t.toml:2: port #1: name "" is empty`},
		{"name too long", "[[port]]\nname = \"abcdefghijklmnop\"\n", `t.toml:2: port "abcdefghijklmnop": name "abcdefghijklmnop" is longer than 15 bytes`},
		{"name slash", "[[port]]\nname = \"a/b\"\n", `t.toml:2: port "a/b": name "a/b" is not a valid interface name (no '/', ':', '%' or whitespace)`},
		{"name template", "[[port]]\nname = \"eth%d\"\n", `t.toml:2: port "eth%d": name "eth%d" is not a valid interface name (no '/', ':', '%' or whitespace)`},
		{"name dot", "[[port]]\nname = \"..\"\n", `t.toml:2: port "..": name ".." is not a valid interface name`},
		{"duplicate name", "[[port]]\nname = \"a\"\n\n[[port]]\nname = \"b\"\n[[port]]\n\nname = \"a\"\n", `t.toml:8: port "a": duplicate name (first defined at line 2)`},

		// [[port]]: MAC.
		{"mac syntax", port(`mac = "zz:00"`), `t.toml:3: port "eth0": mac "zz:00" invalid (want six hex bytes like "02:00:00:00:00:01")`},
		{"mac multicast", port(`mac = "01:00:5e:00:00:01"`), `t.toml:3: port "eth0": MAC address 01:00:5e:00:00:01 is a multicast address`},
		{"mac zero", port(`mac = "00:00:00:00:00:00"`), `t.toml:3: port "eth0": MAC address 00:00:00:00:00:00 is the zero address`},
		{"mac eui64", port(`mac = "02:00:00:00:00:00:00:01"`), `t.toml:3: port "eth0": MAC address 02:00:00:00:00:00:00:01 is not a 6-byte Ethernet address`},
		{"duplicate mac", "[[port]]\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\n[[port]]\nname = \"b\"\nmac = \"02:00:00:00:00:01\"\n", `t.toml:6: port "b": mac 02:00:00:00:00:01 already used by port "a"`},

		// [[port]]: numbers.
		{"mtu low", port("mtu = 67"), `t.toml:3: port "eth0": mtu 67 less than the minimum 68`},
		{"mtu high", port("mtu = 9001"), `t.toml:3: port "eth0": mtu 9001 greater than max_mtu 9000`},
		{"mtu type", port(`mtu = "1500"`), `t.toml:3: port "eth0": mtu must be an integer, not the string "1500"`},
		{"mtu float", port(`mtu = 1500.0`), `t.toml:3: port "eth0": mtu must be an integer, not the float 1500`},
		{"mtu huge", port(`mtu = 9999999999`), `t.toml:3: port "eth0": mtu 9999999999 out of range`},
		{"max_mtu high", port("max_mtu = 65536"), `t.toml:3: port "eth0": max_mtu 65536 out of range 68..65535`},
		{"page_size int", port("page_size = 8192"), `t.toml:3: port "eth0": page_size 8192 not supported (want 4096, 16384 or 65536, or "4K", "16K", "64K")`},
		{"page_size string", port(`page_size = "8K"`), `t.toml:3: port "eth0": page_size "8K" not supported (want 4096, 16384 or 65536, or "4K", "16K", "64K")`},
		{"page_size garbage", port(`page_size = "big"`), `t.toml:3: port "eth0": page_size "big" not supported (want 4096, 16384 or 65536, or "4K", "16K", "64K")`},
		{"page_size type", port(`page_size = true`), `t.toml:3: port "eth0": page_size must be an integer or a string like "4K", not the boolean true`},
		{"queues zero", port("queues = 0"), `t.toml:3: port "eth0": queues 0 less than the minimum 1`},
		{"queues over max", port("max_queues = 8\nqueues = 9"), `t.toml:4: port "eth0": queues 9 greater than max_queues 8`},
		{"queues over msix", port("msix_vectors = 9\nqueues = 9"),
			`t.toml:4: port "eth0": queues 9 greater than 8, the most msix_vectors 9 allows (one vector is the hardware channel's)`},
		{"msix one vector", port("msix_vectors = 1"), `t.toml:3: port "eth0": msix_vectors 1 out of range 2..257`},
		{"max_queues", port("max_queues = 257"), `t.toml:3: port "eth0": max_queues 257 out of range 1..256`},
		{"speed negative", port("speed = -1"), `t.toml:3: port "eth0": speed -1 out of range 0..2147483647 (Mb/s, 0 = unknown)`},
		{"speed too high", port("speed = 2147483648"), `t.toml:3: port "eth0": speed 2147483648 out of range`},
		{"speed type", port(`speed = "fast"`), `t.toml:3: port "eth0": speed must be an integer, not the string "fast"`},
		{"rx_ring low", port("rx_ring = 64"), `t.toml:3: port "eth0": rx_ring 64 out of range 128..8192`},
		{"rx_ring high", port("rx_ring = 8193"), `t.toml:3: port "eth0": rx_ring 8193 out of range 128..8192`},
		{"tx_ring high", port("tx_ring = 20000"), `t.toml:3: port "eth0": tx_ring 20000 out of range 128..16384`},
		{"memory zero", port("memory_budget = 0"), `t.toml:3: port "eth0": memory_budget 0 invalid (want a positive number of bytes, optionally with K, M, G or T (KiB…TiB), or "unlimited")`},
		{"memory decimal unit", port(`memory_budget = "2GB"`), `t.toml:3: port "eth0": memory_budget "2GB" invalid (want a positive number of bytes, optionally with K, M, G or T (KiB…TiB), or "unlimited")`},
		{"memory overflow", port(`memory_budget = "9999999TiB"`), `t.toml:3: port "eth0": memory_budget "9999999TiB" invalid (want a positive number of bytes, optionally with K, M, G or T (KiB…TiB), or "unlimited")`},
		{"memory type", port(`memory_budget = 1.5`), `t.toml:3: port "eth0": memory_budget must be an integer or a string like "2GiB", not the float 1.5`},

		// [[port]]: names of things.
		{"priv flag unknown", port("priv_flags = [\n  \"full-page-rx\",\n  \"turbo\",\n]"), `t.toml:5: port "eth0": unknown private flag "turbo" (want full-page-rx)`},
		{"priv flags type", port(`priv_flags = "full-page-rx"`), `t.toml:3: port "eth0": priv_flags must be an array of flag names, not the string "full-page-rx"`},
		{"priv flag type", port(`priv_flags = [1]`), `t.toml:3: port "eth0": priv_flags must be an array of flag names, not the integer 1`},
		{"xdp unknown", port(`xdp = "ebpf:foo"`), `t.toml:3: port "eth0": unknown XDP built-in "ebpf:foo" (want pass, drop, tx, aborted or "")`},
		{"xdp mtu", port("mtu = 9000\nxdp = \"pass\""), `t.toml:4: port "eth0": mtu 9000 too large for XDP with 4096-byte pages (max 3506)`},
		{"rule", port(`rule = "newest"`), `t.toml:3: port "eth0": unknown rule "newest" (want upstream, pre-headroom or pre-frag)`},
		{"rx_alloc", port("mtu = 1500\nrx_alloc = \"slab\""), `t.toml:4: port "eth0": unknown rx_alloc "slab" (want page-pool-frag, page-pool-page or no-pool)`},
		{"rx_alloc type", port(`rx_alloc = 1`), `t.toml:3: port "eth0": rx_alloc must be a string, not the integer 1`},
		{"rx_recycle type", port("\nrx_recycle = \"no\""), `t.toml:4: port "eth0": rx_recycle must be a boolean, not the string "no"`},
		{"segment", port(`segment = "a b"`), `t.toml:3: port "eth0": segment "a b" may only hold letters, digits, '.', '_' and '-'`},
		{"segment empty", port(`segment = ""`), `t.toml:3: port "eth0": segment "" is empty`},
		{"netns", port(`netns = "a/b"`), `t.toml:3: port "eth0": netns "a/b" is not a valid network namespace name (a file name in /run/netns)`},
		{"persistent type", port(`persistent = "yes"`), `t.toml:3: port "eth0": persistent must be a boolean, not the string "yes"`},
		{"offload type", port(`offload = 1`), `t.toml:3: port "eth0": offload must be a boolean, not the integer 1`},
		{"rx_cqe_frames 8", port("rx_cqe_frames = 8"), `t.toml:3: port "eth0": rx_cqe_frames 8 not supported (want 1 or 4, or 8 with cqe_coalesce_8)`},
		{"rx_cqe_frames 2 with 8", port("cqe_coalesce_8 = true\nrx_cqe_frames = 2"), `t.toml:4: port "eth0": rx_cqe_frames 2 not supported (want 1, 4 or 8)`},
		{"rx_cqe_frames negative", port("rx_cqe_frames = -4"), `t.toml:3: port "eth0": rx_cqe_frames -4 not supported (want 1 or 4, or 8 with cqe_coalesce_8)`},
		{"rx_cqe_frames type", port(`rx_cqe_frames = "4"`), `t.toml:3: port "eth0": rx_cqe_frames must be an integer, not the string "4"`},
		{"cqe_coalesce_8 type", port(`cqe_coalesce_8 = 1`), `t.toml:3: port "eth0": cqe_coalesce_8 must be a boolean, not the integer 1`},
		{"unknown port key", port("mtus = 1500"), `t.toml:3: port "eth0": unknown key "mtus" (did you mean "mtu"?)`},
		{"unknown port table", port("[port.extra]\nx = 1"), `t.toml:3: port "eth0": unknown key "extra"`},

		// Lines of later [[port]] tables, which BurntSushi/toml cannot tell apart.
		{"third port", port("") + strings.Replace(port(""), "eth0", "eth1", 1) + "[[port]]\nname = \"eth2\"\n\n  page_size = 1\nmtu = 1500\n",
			`t.toml:10: port "eth2": page_size 1 not supported (want 4096, 16384 or 65536, or "4K", "16K", "64K")`},
		{"inline ports", "port = [\n  { name = \"a\" },\n  { name = \"b\",\n    mtu = 1 },\n]\n", `t.toml:4: port "b": mtu 1 less than the minimum 68`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(tc.doc))
			require.Error(t, err, "no error, want %q", tc.want)
			assert.Equal(t, tc.want, err.Error(), "error\n got %s\nwant", err)
			assert.ErrorIs(t, err, unix.EINVAL, "errors.Is(%v, EINVAL) = false", err)
			var e *Error
			if assert.ErrorAs(t, err, &e) {
				assert.Equal(t, "t.toml", e.File, "errors.As(*Error) names the wrong file: %#v", e)
			}
		})
	}
}

// TestParseErrorsAll checks that Parse reports every problem of a file, in line order, and that
// problems caused by an earlier one are not repeated.
func TestParseErrorsAll(t *testing.T) {
	doc := `[[port]]
name = "a"
mtu = 20000
page_size = 3
queues = "x"

[daemon]
log_level = "loud"

[[port]]
name = "a"
`
	_, err := Parse("m.toml", []byte(doc))
	var es Errors
	require.ErrorAs(t, err, &es, "got %T %v, want Errors", err, err)
	want := []string{
		`m.toml:3: port "a": mtu 20000 greater than max_mtu 9000`,
		`m.toml:4: port "a": page_size 3 not supported (want 4096, 16384 or 65536, or "4K", "16K", "64K")`,
		`m.toml:5: port "a": queues must be an integer, not the string "x"`,
		`m.toml:8: daemon: log_level "loud" unknown (want debug, info, warn or error)`,
		// The invalid first port still claims its name: the duplicate is reported too.
		`m.toml:11: port "a": duplicate name (first defined at line 2)`,
	}
	assert.Empty(t, cmp.Diff(strings.Join(want, "\n"), err.Error()), "errors (-want +got)")
	assert.ErrorIs(t, err, unix.EINVAL, "Errors does not match EINVAL")
	var first *Error
	if assert.ErrorAs(t, err, &first) {
		assert.Equal(t, 3, first.Line, "errors.As(*Error) = %v, want the line-3 problem", first)
	}
}

func TestParseErrorsCapped(t *testing.T) {
	var b strings.Builder
	for i := range maxErrors + 5 {
		b.WriteString("[[port]]\nname = \"p" + strconv.Itoa(i) + "\"\nmtu = 1\n")
	}
	_, err := Parse("c.toml", []byte(b.String()))
	var es Errors
	require.ErrorAs(t, err, &es, "got %v, want Errors", err)
	if assert.Len(t, es, maxErrors+1, "want %d errors and a count of the rest", maxErrors+1) {
		assert.Equal(t, "5 more problems not shown", es[maxErrors].Msg, "last error")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "manad.toml")
	_, err := Load(path)
	assert.ErrorIs(t, err, fs.ErrNotExist, "Load(missing)")
	assert.ErrorIs(t, err, unix.ENOENT, "Load(missing)")
	require.NoError(t, os.WriteFile(path, []byte("[[port]]\nname = \"x\"\nmtu = 5\n"), 0o644))
	_, err = Load(path)
	assert.EqualError(t, err, path+`:3: port "x": mtu 5 less than the minimum 68`, "Load")
	require.NoError(t, os.WriteFile(path, DefaultTOML(), 0o644))
	c, err := Load(path)
	require.NoError(t, err)
	d := Default()
	d.File = path
	assert.Empty(t, cmp.Diff(d, c), "Load(default text) differs from Default (-want +got)")
}

func TestValidate(t *testing.T) {
	s := DefaultPortSpec("eth9")
	require.NoError(t, s.Validate(), "default spec invalid")
	s.Queues = 100
	err := s.Validate()
	assert.ErrorIs(t, err, unix.EINVAL, "Validate = %v, want EINVAL", err)
	var m interface{ ExtackMessage() string }
	if assert.ErrorAs(t, err, &m) {
		assert.Equal(t, `port "eth9": queues 100 greater than max_queues 64`, m.ExtackMessage(), "extack message")
	}
}

const pinnedMana0MAC = "3a:c3:b8:ff:99:28"

func TestDeriveMAC(t *testing.T) {
	seen := map[string]string{}
	for i := range 1000 {
		name := "port" + strconv.Itoa(i)
		mac := DeriveMAC(name)
		require.NoError(t, tap.CheckMAC(mac), "DeriveMAC(%s) = %s: not a unicast address", name, mac)
		require.NotEqual(t, byte(0), mac[0]&0x02, "DeriveMAC(%s) = %s: not a locally administered unicast address", name, mac)
		other, dup := seen[string(mac)]
		require.False(t, dup, "DeriveMAC(%s) = DeriveMAC(%s) = %s", name, other, mac)
		seen[string(mac)] = name
		again := DeriveMAC(name)
		require.Equal(t, mac.String(), again.String(), "DeriveMAC(%s) not stable: %s then %s", name, mac, again)
	}
	// Pinned, so a change that would renumber every user's MACs does not go unnoticed.
	assert.Equal(t, pinnedMana0MAC, DeriveMAC("mana0").String(), "DeriveMAC(mana0)")
}

func TestValueForms(t *testing.T) {
	for in, want := range map[string]int{"4K": 4096, "16k": 16384, "64KiB": 65536, "4096": 4096, " 16 K ": 16384} {
		got, ok := rxbuf.ParsePageSize(in)
		assert.True(t, ok, "ParsePageSize(%q) refused", in)
		assert.Equal(t, want, got, "ParsePageSize(%q)", in)
	}
	for in, want := range map[string]int64{
		"2GiB": 2 << 30, "2G": 2 << 30, "512MiB": 512 << 20, "1k": 1024, "7": 7, "7B": 7,
		"1TiB": 1 << 40, "unlimited": UnlimitedMemory, "Unlimited": UnlimitedMemory,
	} {
		got, ok := parseMemory(in)
		assert.True(t, ok, "parseMemory(%q) refused", in)
		assert.Equal(t, want, got, "parseMemory(%q)", in)
	}
	for _, in := range []string{"", "-1", "0", "1.5G", "2GB", "G", "8EiB", "9223372036854775807K"} {
		got, ok := parseMemory(in)
		assert.False(t, ok, "parseMemory(%q) = %d, want an error", in, got)
	}
	// FormatMemory writes what parseMemory reads back.
	for _, b := range []int64{1, 1000, 1024, 1536 << 20, 2 << 30, 3 << 40, UnlimitedMemory} {
		got, ok := parseMemory(FormatMemory(b))
		assert.True(t, ok, "parseMemory(FormatMemory(%d) = %q) refused", b, FormatMemory(b))
		assert.Equal(t, b, got, "parseMemory(FormatMemory(%d) = %q)", b, FormatMemory(b))
	}
	assert.Equal(t, "2GiB", FormatMemory(2<<30), "FormatMemory(2GiB)")
	l, err := ParseLogLevel("bogus")
	assert.ErrorIs(t, err, unix.EINVAL, "ParseLogLevel(bogus) = %v, %v; want EINVAL", l, err)
}

func TestDaemonValidate(t *testing.T) {
	def := DefaultDaemonConfig()
	require.NoError(t, def.Validate(), "defaults invalid")
	for _, tc := range []struct {
		change func(*DaemonConfig)
		want   string
	}{
		{func(d *DaemonConfig) { d.Socket = "rel.sock" }, `daemon: socket "rel.sock" must be an absolute path: invalid argument`},
		{func(d *DaemonConfig) { d.Socket = "/" + strings.Repeat("x", 200) }, `daemon: socket path is 201 bytes; a Unix socket path holds at most 107: invalid argument`},
		{func(d *DaemonConfig) { d.StateDir = "" }, `daemon: state_dir "" must be an absolute path: invalid argument`},
		{func(d *DaemonConfig) { d.SocketMode = fs.ModeSetuid | 0o600 }, `daemon: socket_mode 040000600 is not permission bits: invalid argument`},
		{func(d *DaemonConfig) { d.AdminGID = -2 }, `daemon: admin_group gid -2 invalid: invalid argument`},
		{func(d *DaemonConfig) { d.LogLevel = slog.LevelInfo + 2 }, `daemon: log_level INFO+2 unknown (want debug, info, warn or error): invalid argument`},
		{func(d *DaemonConfig) { d.LogFormat = "" }, `daemon: log_format "" unknown (want text or json): invalid argument`},
		{func(d *DaemonConfig) { d.MaxConnections = 0 }, `daemon: max_connections 0 out of range (1..65536): invalid argument`},
		{func(d *DaemonConfig) { d.MaxConnectionsPerUID = 65537 }, `daemon: max_connections_per_uid 65537 out of range (1..65536): invalid argument`},
		{func(d *DaemonConfig) { d.IdleTimeout = time.Millisecond }, `daemon: idle_timeout 1ms out of range (1s..24h0m0s): invalid argument`},
		{func(d *DaemonConfig) { d.BusyPoll = time.Second }, `daemon: busy_poll 1s out of range (0..1ms): invalid argument`},
	} {
		d := DefaultDaemonConfig()
		tc.change(&d)
		err := d.Validate()
		assert.EqualError(t, err, tc.want, "Validate")
		assert.ErrorIs(t, err, unix.EINVAL, "Validate = %v", err)
	}
}

// TestPortSpeed: the speed key sets the link speed a port reports; without it the speed is
// unknown (0).
func TestPortSpeed(t *testing.T) {
	for _, tc := range []struct {
		toml string
		want int
	}{
		{"[[port]]\nname = \"eth0\"\n", 0},
		{"[[port]]\nname = \"eth0\"\nspeed = 200000\n", 200000},
	} {
		c, err := Parse("t.toml", []byte(tc.toml))
		require.NoError(t, err)
		assert.Equal(t, tc.want, c.Ports[0].Speed, "%q: speed", tc.toml)
	}
}
