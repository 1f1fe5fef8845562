package manactl

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/daemon/xdp/xdptest"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
)

// The texts ethtool prints, written out from its format strings (ethtool 6.15: netlink/rings.c,
// channels.c, privflags.c; ethtool.c do_gstats), independently of manactl's formatter.

func ethtoolRings(dev string, rxMax, txMax, rx, tx uint32) string {
	return fmt.Sprintf("Ring parameters for %s:\n", dev) +
		"Pre-set maximums:\n" +
		fmt.Sprintf("RX:\t\t\t%d\n", rxMax) + "RX Mini:\t\tn/a\n" + "RX Jumbo:\t\tn/a\n" +
		fmt.Sprintf("TX:\t\t\t%d\n", txMax) + "TX push buff len:\tn/a\n" + "HDS thresh:\t\tn/a\n" +
		"Current hardware settings:\n" +
		fmt.Sprintf("RX:\t\t\t%d\n", rx) + "RX Mini:\t\tn/a\n" + "RX Jumbo:\t\tn/a\n" +
		fmt.Sprintf("TX:\t\t\t%d\n", tx) + "RX Buf Len:\t\tn/a\n" + "CQE Size:\t\tn/a\n" +
		"TX Push:\t\toff\n" + "RX Push:\t\toff\n" + "TX push buff len:\tn/a\n" +
		"TCP data split:\t\tn/a\n" + "HDS thresh:\t\tn/a\n"
}

func ethtoolCombinedChannels(dev string, max, cur uint32) string {
	return fmt.Sprintf("Channel parameters for %s:\n", dev) +
		"Pre-set maximums:\n" + "RX:\t\tn/a\n" + "TX:\t\tn/a\n" + "Other:\t\tn/a\n" + fmt.Sprintf("Combined:\t%d\n", max) +
		"Current hardware settings:\n" + "RX:\t\tn/a\n" + "TX:\t\tn/a\n" + "Other:\t\tn/a\n" + fmt.Sprintf("Combined:\t%d\n", cur)
}

func ethtoolPrivFlags(dev string, on bool) string {
	v := "off"
	if on {
		v = "on"
	}
	return fmt.Sprintf("Private flags for %s:\n", dev) + fmt.Sprintf("%-*s: %s\n", len("full-page-rx"), "full-page-rx", v)
}

// e2e is one manad with one port in its own namespace, and the manactl binary.
type e2e struct {
	d          *harness.Daemon
	dir        string
	bin        string
	ns, port   string
	socketEnv  []string
	rxRing     uint32
	queues     uint32
	maxQueues  uint32
	pageSize   uint32
	unknownDev string
}

func startE2E(t *testing.T) *e2e {
	t.Helper()
	dir := worldDir(t)
	e := &e2e{
		dir: dir, ns: harness.Name("mcn", ""), port: harness.Name("mcp", "0"),
		rxRing: 256, queues: 4, maxQueues: 64, pageSize: 16384, unknownDev: harness.Name("mcx", "9"),
	}
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = %d\nrx_ring = %d\npage_size = \"16K\"\npersistent = false\n",
		e.port, e.ns, e.queues, e.rxRing)
	e.d = harness.Start(t, dir, "", ports, e.ns)
	e.bin = manactlIn(t, dir)
	e.socketEnv = []string{"MANAD_SOCKET=" + e.d.Socket}
	return e
}

// mctl runs manactl as root inside the port's namespace.
func (e *e2e) mctl(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, e.ns, e.socketEnv, append([]string{e.bin}, args...)...)
}

// mctlAs runs manactl as uid/gid 65534 (nobody, not an admin) inside the port's namespace.
func (e *e2e) mctlAs(t *testing.T, args ...string) result {
	t.Helper()
	argv := append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", e.bin}, args...)
	return run(t, e.ns, e.socketEnv, argv...)
}

// ok fails the test unless r is a success with no stderr.
func ok(t *testing.T, what string, r result) string {
	t.Helper()
	require.Equal(t, 0, r.code, "manactl %s: exit %d, stderr %q, stdout %q", what, r.code, r.stderr, r.stdout)
	require.Equal(t, "", r.stderr, "manactl %s: exit %d, stderr %q, stdout %q", what, r.code, r.stderr, r.stdout)
	return r.stdout
}

// fails checks that r is exit status 1 with exactly the one stderr line want, and no stdout.
func fails(t *testing.T, what string, r result, want string) {
	t.Helper()
	failsWith(t, what, r, 1, want)
}

// failsWith is fails for a command whose failure exits with code, as ethtool's does (81 for -G).
func failsWith(t *testing.T, what string, r result, code int, want string) {
	t.Helper()
	assert.Equal(t, code, r.code, "manactl %s: exit %d, stdout %q, stderr %q; want exit %d, stderr %q", what, r.code, r.stdout, r.stderr, code, want)
	assert.Equal(t, "", r.stdout, "manactl %s: exit %d, stdout %q, stderr %q; want exit %d, stderr %q", what, r.code, r.stdout, r.stderr, code, want)
	assert.Equal(t, want+"\n", r.stderr, "manactl %s: exit %d, stdout %q, stderr %q; want exit %d, stderr %q", what, r.code, r.stdout, r.stderr, code, want)
}

// failsLike is fails with a pattern for the stderr line.
func failsLike(t *testing.T, what string, r result, pattern string) {
	t.Helper()
	failsLikeWith(t, what, r, 1, pattern)
}

// failsLikeWith is failsLike with the exit status code.
func failsLikeWith(t *testing.T, what string, r result, code int, pattern string) {
	t.Helper()
	assert.Equal(t, code, r.code, "manactl %s: exit %d, stdout %q, stderr %q; want exit %d, stderr matching %q", what, r.code, r.stdout, r.stderr, code, pattern)
	assert.Equal(t, "", r.stdout, "manactl %s: exit %d, stdout %q, stderr %q; want exit %d, stderr matching %q", what, r.code, r.stdout, r.stderr, code, pattern)
	assert.True(t, regexp.MustCompile(`^`+pattern+`\n$`).MatchString(r.stderr), "manactl %s: exit %d, stdout %q, stderr %q; want exit %d, stderr matching %q", what, r.code, r.stdout, r.stderr, code, pattern)
}

func (e *e2e) listJSON(t *testing.T) []map[string]any {
	t.Helper()
	var ports []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(t, "--json list", e.mctl(t, "--json", "list"))), &ports))
	return ports
}

func (e *e2e) portJSON(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, p := range e.listJSON(t) {
		if p["ifname"] == name {
			return p
		}
	}
	return nil
}

// TestCommands runs every command against a real manad, each with its error cases.
func TestCommands(t *testing.T) {
	e := startE2E(t)
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "up")

	t.Run("list", func(t *testing.T) {
		out := ok(t, "list", e.mctl(t, "list"))
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, lines, 2, "list:\n%s", out)
		require.Equal(t, "NAME", strings.Fields(lines[0])[0], "list:\n%s", out)
		want := []string{e.port, e.ns, "up", "1500", "16K", "4/64", "256/256", "-", "-"}
		if got := strings.Fields(lines[1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("list line %q, want fields %q", lines[1], want)
		}
		p := e.portJSON(t, e.port)
		if p == nil || p["netns"] != e.ns || p["queues"] != 4.0 || p["rx-ring"] != 256.0 || p["page-size"] != 16384.0 ||
			p["admin-up"] != true || p["segment"] != "s" {
			t.Errorf("--json list: %v", p)
		}
		// Root in manad's own namespace (the test's) sees every port, with its namespace.
		host := ok(t, "list on the host", run(t, "", e.socketEnv, e.bin, "list"))
		assert.True(t, regexp.MustCompile(`(?m)^`+e.port+` +`+e.ns+` +up +1500 `).MatchString(host), "list on the host does not show %s in %s:\n%s", e.port, e.ns, host)
		got := ok(t, "list --netns", run(t, "", e.socketEnv, e.bin, "list", "--netns", e.ns))
		assert.Equal(t, out, got, "list --netns %s on the host:\n%s\nwant what the namespace itself lists:\n%s", e.ns, got, out)
		// (A namespace that does not exist is an error: hints_test.go.)
		assert.NotContains(t, ok(t, "list --netns -", run(t, "", e.socketEnv, e.bin, "list", "--netns", "-")), e.port, "list --netns - shows")
		// Inside the namespace, --netns filters what that namespace sees.
		assert.NotContains(t, ok(t, "list --netns - in the namespace", e.mctl(t, "list", "--netns", "-")), e.port, "list --netns - inside %s shows", e.ns)
		// A non-admin on the host sees only the host's ports: none here.
		r := run(t, "", e.socketEnv, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", e.bin, "list")
		assert.Equal(t, 0, r.code, "list on the host as nobody: %+v", r)
		assert.NotContains(t, r.stdout, e.port, "list on the host as nobody: %+v", r)
	})

	t.Run("priv-flags", func(t *testing.T) {
		assert.Equal(t, ethtoolPrivFlags(e.port, false), ok(t, "--show-priv-flags", e.mctl(t, "--show-priv-flags", e.port)), "show-priv-flags")
		ok(t, "--set-priv-flags on", e.mctl(t, "--set-priv-flags", e.port, "full-page-rx", "on"))
		assert.Equal(t, ethtoolPrivFlags(e.port, true), ok(t, "show-priv-flags", e.mctl(t, "show-priv-flags", e.port)), "after on")
		var pf []struct {
			IfName string `json:"ifname"`
			Flags  []struct {
				Name  string `json:"name"`
				Index int    `json:"index"`
				On    bool   `json:"on"`
			} `json:"flags"`
		}
		if err := json.Unmarshal([]byte(ok(t, "--json", e.mctl(t, "--json", "show-priv-flags", e.port))), &pf); err != nil ||
			len(pf) != 1 || pf[0].IfName != e.port || len(pf[0].Flags) != 1 || pf[0].Flags[0].Name != "full-page-rx" || !pf[0].Flags[0].On {
			t.Errorf("--json show-priv-flags: %+v %v", pf, err)
		}
		// The flag changed the live layout: one buffer per 16K page instead of 7 fragments.
		assert.Contains(t, ok(t, "show-rxbuf", e.mctl(t, "show-rxbuf", e.port)), "Mode:              single buffer per page\nWhy:               full-page-rx private flag is on\n", "show-rxbuf after full-page-rx on")
		fails(t, "set-priv-flags bogus", e.mctl(t, "set-priv-flags", e.port, "bogus", "on"),
			"netlink error: unknown private flag 'bogus' ("+e.port+" has: full-page-rx): Operation not supported")
		fails(t, "set-priv-flags as nobody", e.mctlAs(t, "set-priv-flags", e.port, "full-page-rx", "off"),
			e.eperm())
		assert.Equal(t, ethtoolPrivFlags(e.port, true), ok(t, "show-priv-flags as nobody", e.mctlAs(t, "show-priv-flags", e.port)), "a non-admin reads")
		ok(t, "set-priv-flags off", e.mctl(t, "set-priv-flags", e.port, "full-page-rx", "off"))
		assert.Contains(t, ok(t, "show-rxbuf", e.mctl(t, "show-rxbuf", e.port)), "Mode:              page-pool fragments, 7 per page\nWhy:               7 buffers of 2112 bytes fit in a 16384-byte page\n", "show-rxbuf after full-page-rx off")
	})

	t.Run("rings", func(t *testing.T) {
		assert.Equal(t, ethtoolRings(e.port, 8192, 16384, 256, 256), ok(t, "-g", e.mctl(t, "-g", e.port)), "-g")
		ok(t, "-G", e.mctl(t, "-G", e.port, "rx", "512", "tx", "1000"))
		// tx 1000 is rounded up to a power of two, as the driver does.
		assert.Equal(t, ethtoolRings(e.port, 8192, 16384, 512, 1024), ok(t, "show-ring", e.mctl(t, "show-ring", e.port)), "after -G")
		var rj []map[string]any
		if err := json.Unmarshal([]byte(ok(t, "--json -g", e.mctl(t, "--json", "-g", e.port))), &rj); err != nil || len(rj) != 1 ||
			rj[0]["rx"] != 512.0 || rj[0]["tx-max"] != 16384.0 || rj[0]["tx-push"] != false || rj[0]["rx-mini"] != nil {
			t.Errorf("--json -g: %v %v", rj, err)
		}
		failsWith(t, "-G rx 99999", e.mctl(t, "-G", e.port, "rx", "99999"), 81, "netlink error: requested ring size exceeds maximum: Invalid argument")
		failsWith(t, "-G rx-buf-len", e.mctl(t, "-G", e.port, "rx-buf-len", "4096"), 81, "netlink error: setting rx buf len not supported: Operation not supported")
		failsWith(t, "-G as nobody", e.mctlAs(t, "-G", e.port, "rx", "256"), 81, e.eperm())
	})

	t.Run("channels", func(t *testing.T) {
		assert.Equal(t, ethtoolCombinedChannels(e.port, 64, 4), ok(t, "-l", e.mctl(t, "-l", e.port)), "-l")
		ok(t, "-L", e.mctl(t, "-L", e.port, "combined", "2"))
		assert.Equal(t, ethtoolCombinedChannels(e.port, 64, 2), ok(t, "show-channels", e.mctl(t, "show-channels", e.port)), "after -L")
		out := harness.Run(t, e.ns, "ip", "-d", "link", "show", e.port)
		assert.Contains(t, out, "numqueues 2 ", "the TAP did not follow the channel count")
		fails(t, "-L combined 65", e.mctl(t, "-L", e.port, "combined", "65"), "netlink error: requested channel count exceeds maximum: Invalid argument")
		fails(t, "-L combined 0", e.mctl(t, "-L", e.port, "combined", "0"),
			"netlink error: requested channel counts would result in no RX or TX channel being configured: Invalid argument")
		fails(t, "-L as nobody", e.mctlAs(t, "-L", e.port, "combined", "4"), e.eperm())
		ok(t, "-L back", e.mctl(t, "set-channels", e.port, "combined", "4"))
	})

	t.Run("stats-and-strings", func(t *testing.T) {
		out := ok(t, "-S", e.mctl(t, "-S", e.port))
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Equal(t, "NIC statistics:", lines[0], "-S:\n%s", out)
		// The statistics are the ETH_SS_STATS strings, in order, each as "     name: value".
		strs := ok(t, "show-strings stats", e.mctl(t, "show-strings", e.port, "stats"))
		sl := strings.Split(strings.TrimSuffix(strs, "\n"), "\n")
		require.Equal(t, fmt.Sprintf("String set stats (1) for %s: %d strings", e.port, len(lines)-1), sl[0], "show-strings stats header")
		stat := regexp.MustCompile(`^     ([a-z0-9_]+): ([0-9]+)$`)
		for i, l := range lines[1:] {
			m := stat.FindStringSubmatch(l)
			require.NotNil(t, m, "-S line %q vs show-strings line %q", l, sl[1+i])
			require.Equal(t, fmt.Sprintf("     %d: %s", i, m[1]), sl[1+i], "-S line %q vs show-strings line %q", l, sl[1+i])
		}
		var sj []struct {
			IfName     string                     `json:"ifname"`
			Statistics map[string]json.RawMessage `json:"statistics"`
		}
		if err := json.Unmarshal([]byte(ok(t, "--json -S", e.mctl(t, "--json", "-S", e.port))), &sj); err != nil || len(sj) != 1 || len(sj[0].Statistics) != len(lines)-1 {
			t.Errorf("--json -S: %v, %d statistics", err, len(sj[0].Statistics))
		}
		want := fmt.Sprintf("String set priv-flags (2) for %s: 1 string\n     0: full-page-rx\n", e.port)
		assert.Equal(t, want, ok(t, "show-strings priv-flags", e.mctl(t, "show-strings", e.port, "priv-flags")), "show-strings priv-flags")
		all := ok(t, "show-strings", e.mctl(t, "show-strings", e.port))
		if !strings.HasPrefix(all, sl[0]+"\n") || !strings.HasSuffix(all, "\n\n"+want) {
			t.Errorf("show-strings (all sets):\n%s", all)
		}
	})

	t.Run("rxbuf-plan", func(t *testing.T) {
		out := ok(t, "rxbuf-plan", e.mctl(t, "rxbuf-plan", "--page-size", "64K", "--mtu", "1500"))
		if !strings.HasPrefix(out, "RX buffer layouts for page size 65536, MTU 1500, XDP off, full-page-rx off, 1024 buffers x 1 queue:\n") ||
			!regexp.MustCompile(`(?m)^ +upstream +pre-headroom +pre-frag$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^Buffers per page +31 +35 +1$`).MatchString(out) {
			t.Errorf("rxbuf-plan 64K/1500:\n%s", out)
		}
		var ls []map[string]any
		if err := json.Unmarshal([]byte(ok(t, "--json rxbuf-plan", e.mctl(t, "--json", "rxbuf-plan", "--page-size", "4096", "--mtu", "3000",
			"--xdp", "--rule", "upstream", "--queues", "8", "--ring-size", "512"))), &ls); err != nil || len(ls) != 1 {
			t.Fatalf("--json rxbuf-plan: %v %v", ls, err)
		}
		if l := ls[0]; l["rule"] != "upstream" || l["mode"] != "single" || l["xdp"] != true || l["queues"] != 8.0 || l["ring-size"] != 512.0 {
			t.Errorf("--json rxbuf-plan: %v", l)
		}
		fails(t, "rxbuf-plan 8K", e.mctl(t, "rxbuf-plan", "--page-size", "8K", "--mtu", "1500"),
			"page size 8192 not supported (want 4096, 16384 or 65536): Invalid argument")
		// XDP limits the MTU (MANA_XDP_MTU_MAX: 3506 on 4K pages), as mana_xdp_set does.
		fails(t, "rxbuf-plan --xdp 9000", e.mctl(t, "rxbuf-plan", "--page-size", "4K", "--mtu", "9000", "--xdp"),
			"XDP: mtu too large: Operation not supported")
		// manactl computes the plan itself, with no daemon, and says what manad's LAYOUT_PLAN says.
		c, err := client.Dial(e.d.Socket)
		require.NoError(t, err)
		defer c.Close()
		none := []string{"MANAD_SOCKET=" + filepath.Join(e.dir, "none.sock")}
		for _, ps := range []uint32{4096, 16384, 65536} {
			for _, mtu := range []uint32{1500, 3506, 9000} {
				for _, flags := range [][]string{nil, {"--xdp"}, {"--full-page-rx"}} {
					args := append([]string{e.bin, "--json", "rxbuf-plan", "--page-size", fmt.Sprint(ps), "--mtu", fmt.Sprint(mtu),
						"--ring-size", "512", "--queues", "3"}, flags...)
					req := genl.LayoutRequest{PageSize: ps, MTU: mtu, RingSize: 512, Queues: 3, XDP: len(flags) > 0 && flags[0] == "--xdp",
						FullPageRx: len(flags) > 0 && flags[0] == "--full-page-rx"}
					r := run(t, "", none, args...)
					want, werr := c.PlanLayout(context.Background(), req)
					if werr != nil {
						assert.Equal(t, 1, r.code, "%v: manad refuses (%v), manactl: %+v", args[2:], werr, r)
						assert.Equal(t, "", r.stdout, "%v: manad refuses (%v), manactl: %+v", args[2:], werr, r)
						continue
					}
					var got []map[string]any
					require.Equal(t, 0, r.code, "%v: %+v", args[2:], r)
					require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), "%v: %+v", args[2:], r)
					require.Len(t, got, len(want), "%v: %+v", args[2:], r)
					for i, l := range want {
						w := map[string]any{"rule": l.Rule, "datasize": float64(l.DataSize), "alloc-size": float64(l.AllocSize),
							"headroom": float64(l.Headroom), "buf-size": float64(l.BufSize), "frag-count": float64(l.FragCount),
							"order": float64(l.Order), "pool-size": float64(l.PoolSize), "reason": l.Reason,
							"pages-per-queue": float64(l.PagesPerQueue), "bytes-total": float64(l.BytesTotal)}
						for k, v := range w {
							if got[i][k] != v {
								t.Errorf("%v rule %s: %s %v, manad says %v", args[2:], l.Rule, k, got[i][k], v)
							}
						}
					}
				}
			}
		}
	})

	t.Run("set-mtu", func(t *testing.T) {
		ok(t, "set-mtu", e.mctl(t, "set-mtu", e.port, "9000"))
		p := e.portJSON(t, e.port)
		assert.Equal(t, 9000.0, p["mtu"], "mtu %v after set-mtu 9000", p["mtu"])
		out := harness.Run(t, e.ns, "cat", "/sys/class/net/"+e.port+"/mtu")
		assert.Equal(t, "9000", strings.TrimSpace(out), "the TAP's MTU is %s", out)
		fails(t, "set-mtu 9001", e.mctl(t, "set-mtu", e.port, "9001"), "netlink error: mtu greater than device maximum: Invalid argument")
		fails(t, "set-mtu as nobody", e.mctlAs(t, "set-mtu", e.port, "1500"), e.eperm())
		ok(t, "set-mtu back", e.mctl(t, "set-mtu", e.port, "1500"))
	})

	t.Run("xdp", func(t *testing.T) {
		ok(t, "xdp attach drop", e.mctl(t, "xdp", e.port, "attach", "drop"))
		if p := e.portJSON(t, e.port); p["xdp"] != "drop" {
			t.Errorf("xdp %v after attach drop", p["xdp"])
		}
		assert.Contains(t, ok(t, "show-rxbuf", e.mctl(t, "show-rxbuf", e.port)), "Why:               an XDP program is attached\n", "show-rxbuf with XDP")
		ok(t, "xdp detach", e.mctl(t, "xdp", e.port, "detach"))
		if p := e.portJSON(t, e.port); p["xdp"] != "" {
			t.Errorf("xdp %v after detach", p["xdp"])
		}
		obj, err := xdptest.BuildELF(elf.EM_BPF, "GPL", xdptest.Prog{Section: "xdp", Name: "pass_all",
			Insns: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
		require.NoError(t, err)
		objPath := filepath.Join(e.dir, "pass.o")
		require.NoError(t, os.WriteFile(objPath, obj, 0o644))
		ok(t, "xdp attach FILE.o", e.mctl(t, "xdp", e.port, "attach", objPath, "--section", "xdp", "--name", "mypass"))
		p := e.portJSON(t, e.port)
		assert.Equal(t, "ebpf:mypass", p["xdp"], "xdp %v after attaching the object", p["xdp"])
		bad := filepath.Join(e.dir, "bad.o")
		require.NoError(t, os.WriteFile(bad, []byte("not an ELF object\n"), 0o644))
		failsLike(t, "xdp attach bad.o", e.mctl(t, "xdp", e.port, "attach", bad), `netlink error: .+: Invalid argument`)
		big := filepath.Join(e.dir, "big.o")
		require.NoError(t, os.WriteFile(big, make([]byte, 300000), 0o644))
		fails(t, "xdp attach big.o", e.mctl(t, "xdp", e.port, "attach", big), big+" (300000 bytes) does not fit in one request to manad: Message too long")
		fails(t, "xdp detach as nobody", e.mctlAs(t, "xdp", e.port, "detach"), e.eperm())
		ok(t, "xdp detach", e.mctl(t, "xdp", e.port, "detach"))
	})

	t.Run("fault", func(t *testing.T) {
		ok(t, "fault attach once", e.mctl(t, "fault", e.port, "attach", "once"))
		// The next reconfiguration fails at attach: the value is reverted and the reset work
		// re-attaches the port.
		failsLikeWith(t, "-G after an attach fault", e.mctl(t, "-G", e.port, "rx", "1024"), 81, `netlink error: .*attach.*: Protocol error`)
		harness.Eventually(t, "the reset work to re-attach the port", func() bool {
			p := e.portJSON(t, e.port)
			return p["reset-pending"] == false && p["detached"] == false && p["running"] == true
		})
		p := e.portJSON(t, e.port)
		assert.Equal(t, 512.0, p["rx-ring"], "rx-ring %v after a failed change from 512, want 512 (reverted)", p["rx-ring"])
		ok(t, "fault prealloc 1 ENOSPC", e.mctl(t, "fault", e.port, "prealloc", "1", "--errno", "ENOSPC"))
		failsLikeWith(t, "-G after a prealloc fault", e.mctl(t, "-G", e.port, "rx", "1024"), 81, `netlink error: .*: No space left on device`)
		ok(t, "-G after the fault", e.mctl(t, "-G", e.port, "rx", "1024"))
		ok(t, "fault always then off", e.mctl(t, "fault", e.port, "detach", "always"))
		ok(t, "fault off", e.mctl(t, "fault", e.port, "detach", "off"))
		fails(t, "fault as nobody", e.mctlAs(t, "fault", e.port, "attach", "once"), e.eperm())
		// The point is checked once, by the port model, and its message passed through.
		fails(t, "fault at an unknown point", e.mctl(t, "fault", e.port, "nowhere", "once"),
			`netlink error: unknown fault point "nowhere" (want prealloc, detach or attach): Invalid argument`)
	})

	t.Run("port", func(t *testing.T) {
		q := harness.Name("mcq", "0")
		var added []map[string]any
		err := json.Unmarshal([]byte(ok(t, "port add", e.mctl(t, "--json", "port", "add", q, "--netns", e.ns, "--queues", "2",
			"--max-queues", "8", "--rx-ring", "128", "--priv-flags", "full-page-rx", "--segment", "s"))), &added)
		require.NoError(t, err, "--json port add: %v %v", added, err)
		require.Len(t, added, 1, "--json port add: %v %v", added, err)
		if p := added[0]; p["ifname"] != q || p["queues"] != 2.0 || p["max-queues"] != 8.0 || p["rx-ring"] != 128.0 ||
			fmt.Sprint(p["priv-flags"]) != "[full-page-rx]" || p["netns"] != e.ns {
			t.Errorf("port add answered %v", p)
		}
		assert.NotNil(t, e.portJSON(t, q), "%s not listed after port add", q)
		harness.Run(t, e.ns, "ip", "link", "show", q)
		failsLike(t, "port add twice", e.mctl(t, "port", "add", q, "--netns", e.ns), `netlink error: .+: File exists`)
		fails(t, "port add as nobody", e.mctlAs(t, "port", "add", harness.Name("mcr", "0"), "--netns", e.ns), e.eperm())
		fails(t, "port del as nobody", e.mctlAs(t, "port", "del", q), e.eperm())
		ok(t, "port del", e.mctl(t, "port", "del", q))
		assert.Nil(t, e.portJSON(t, q), "%s still listed after port del", q)
		fails(t, "port del again", e.mctl(t, "port", "del", q), "netlink error: no device matches name: No such device")
	})

	t.Run("monitor", func(t *testing.T) {
		m := startMonitor(t, e.ns, e.socketEnv, e.bin, "monitor", e.port)
		ok(t, "set-priv-flags on", e.mctl(t, "set-priv-flags", e.port, "full-page-rx", "on"))
		ok(t, "-L", e.mctl(t, "-L", e.port, "combined", "3"))
		want := "\n" + ethtoolPrivFlags(e.port, true)
		want2 := "\n" + ethtoolCombinedChannels(e.port, 64, 3)
		m.waitFor(t, want, want2, fmt.Sprintf("\nPort %s changed:\n", e.port))
		out := m.stop(t)
		assert.True(t, strings.HasPrefix(out, "listening...\n"), "monitor output does not start with listening...:\n%s", out)

		mj := startMonitor(t, e.ns, e.socketEnv, e.bin, "--json", "monitor")
		ok(t, "set-priv-flags off", e.mctl(t, "set-priv-flags", e.port, "full-page-rx", "off"))
		mj.waitFor(t, `"kind":"privflags"`)
		for _, l := range strings.Split(strings.TrimSpace(mj.stop(t)), "\n") {
			if l == "listening..." { // stderr
				continue
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(l), &ev); err != nil || ev["ifname"] != e.port {
				t.Errorf("monitor --json line %q: %v", l, err)
			}
		}
		ok(t, "-L back", e.mctl(t, "-L", e.port, "combined", "4"))
	})

	t.Run("unknown-device", func(t *testing.T) {
		// manad answers ENODEV, manactl asks the kernel, which has no such device either.
		for _, args := range [][]string{{"-g", e.unknownDev}, {"-l", e.unknownDev}, {"--show-priv-flags", e.unknownDev},
			{"show-strings", e.unknownDev}} {
			fails(t, strings.Join(args, " "), e.mctl(t, args...), "netlink error: no device matches name: No such device")
		}
		failsWith(t, "-G", e.mctl(t, "-G", e.unknownDev, "rx", "512"), 81, "netlink error: no device matches name: No such device")
		failsWith(t, "-S", e.mctl(t, "-S", e.unknownDev), 96, "Cannot get stats strings information: No such device")
		for _, args := range [][]string{{"show-rxbuf", e.unknownDev}, {"set-mtu", e.unknownDev, "1500"}, {"xdp", e.unknownDev, "detach"},
			{"fault", e.unknownDev, "attach", "once"}} {
			fails(t, strings.Join(args, " "), e.mctl(t, args...), "netlink error: no device matches name: No such device")
		}
		// The port exists, but not in the caller's namespace: manactl says where (hints_test.go).
		fails(t, "-g from another namespace", run(t, "", e.socketEnv, e.bin, "-g", e.port), e.netnsHint("-g "+e.port))
	})

	t.Run("not-running", func(t *testing.T) {
		none := filepath.Join(e.dir, "none.sock")
		for _, args := range [][]string{{"list"}, {"show-rxbuf", e.port}, {"set-mtu", e.port, "1500"}, {"monitor"}} {
			failsLike(t, strings.Join(args, " "), e.mctl(t, append([]string{"--socket", none}, args...)...),
				regexp.QuoteMeta("cannot connect to manad at "+none+": ")+`.*no such file or directory`)
		}
		// The ethtool-family commands go to the kernel then: a manad TAP has no rings there.
		fails(t, "-g with manad unreachable", e.mctl(t, "--socket", none, "-g", e.port), "netlink error: Operation not supported\nmanad is not running at "+none)
	})
}

// monitor is a running `manactl monitor`.
type monitor struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
}

// startMonitor starts manactl monitor in ns and waits for "listening...".
func startMonitor(t *testing.T, ns string, env []string, argv ...string) *monitor {
	t.Helper()
	m := &monitor{cmd: exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...), done: make(chan struct{})}
	m.cmd.Env = append(append(os.Environ(), raceEnv()), env...)
	stdout, err := m.cmd.StdoutPipe()
	require.NoError(t, err)
	// Both streams are collected: --json prints "listening..." on stderr.
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	m.cmd.Stderr = pw
	require.NoError(t, m.cmd.Start())
	pw.Close()
	t.Cleanup(func() {
		if m.cmd.ProcessState == nil {
			m.cmd.Process.Kill()
			m.cmd.Wait()
		}
	})
	var wg sync.WaitGroup
	copyLines := func(r *bufio.Reader) {
		defer wg.Done()
		for {
			s, err := r.ReadString('\n')
			m.mu.Lock()
			m.out.WriteString(s)
			m.mu.Unlock()
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	go copyLines(bufio.NewReader(stdout))
	go copyLines(bufio.NewReader(pr))
	go func() { wg.Wait(); close(m.done) }()
	m.waitFor(t, "listening...\n")
	return m
}

func (m *monitor) output() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

// waitFor waits until the output contains every one of want.
func (m *monitor) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := m.output()
		missing := ""
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("monitor never printed %q; it printed:\n%s", missing, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop interrupts the monitor (SIGINT, as a user would), which must exit 0, and returns what it
// printed.
func (m *monitor) stop(t *testing.T) string {
	t.Helper()
	out, err := m.interrupt(t)
	assert.NoError(t, err, "monitor exited with %v:\n%s", err, out)
	return out
}

// interrupt sends SIGINT and returns what the monitor printed and how it ended.
func (m *monitor) interrupt(t *testing.T) (string, error) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Fatal("monitor did not stop on SIGINT")
	}
	err := m.cmd.Wait()
	return m.output(), err
}
