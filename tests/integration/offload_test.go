package integration

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOffloadKey runs a port with offloads (the default) and one with offload = false through the
// real daemon: the kernel's side of each TAP shows what the key asked for (tun_flags with or
// without IFF_VNET_HDR, ethtool -k's TSO), manad logs the offloads in force, TCP both ways arrives
// intact with the offloading side sending superframes (tso_packets) and the other none; after a
// kill -9 and a restart the persistent TAPs are re-attached with the same offloads and carry TCP
// again.
func TestOffloadKey(t *testing.T) {
	p := &pair{
		nsA: harness.Name("moa", ""), nsB: harness.Name("mob", ""),
		portA: harness.Name("oa", "0"), portB: harness.Name("ob", "0"),
		ipA: "10.209.0.1", ipB: "10.209.0.2",
	}
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"o\"\nqueues = 2\n"+
		"[[port]]\nname = %q\nnetns = %q\nsegment = \"o\"\nqueues = 2\noffload = false\n", p.portA, p.nsA, p.portB, p.nsB)
	p.d = harness.Start(t, "", "", ports, p.nsA, p.nsB)
	p.up(t)
	p.clientA, p.clientB = p.d.Client(p.nsA), p.d.Client(p.nsB)

	check := func(when string, seed uint64) {
		t.Helper()
		for _, x := range []struct {
			ns, port, flags, tso string
		}{{p.nsA, p.portA, "0x5902", "on"}, {p.nsB, p.portB, "0x1902", "off"}} {
			assert.Equal(t, x.flags, strings.TrimSpace(harness.Run(t, x.ns, "cat", "/sys/class/net/"+x.port+"/tun_flags")), "%s: %s tun_flags", when, x.port)
			k := harness.Run(t, x.ns, "ethtool", "-k", x.port)
			assert.True(t, regexp.MustCompile(`(?m)^tcp-segmentation-offload: `+x.tso+`\b`).MatchString(k), "%s: ethtool -k %s does not show TSO %s:\n%s", when, x.port, x.tso, k)
		}
		tsoA := sum(p.stats(t, p.clientA, p.portA), "tx_", "_tso_packets")
		tsoB := sum(p.stats(t, p.clientB, p.portB), "tx_", "_tso_packets")
		for i, dir := range [][2]string{{p.nsA, p.nsB}, {p.nsB, p.nsA}} {
			ip := p.ipB
			if i == 1 {
				ip = p.ipA
			}
			tr, err := harness.StartTransfer(dir[0], dir[1], fmt.Sprintf("%s:%d", ip, 5230+i), 8<<20, seed+uint64(i))
			require.NoError(t, err)
			require.NoError(t, tr.Wait(2*time.Minute))
			require.NoError(t, tr.Check(), "%s: transfer %d", when, i)
		}
		assert.NotEqual(t, uint64(0), sum(p.stats(t, p.clientA, p.portA), "tx_", "_tso_packets")-tsoA, "%s: %s (offload = true) sent no TSO superframe", when, p.portA)
		n := sum(p.stats(t, p.clientB, p.portB), "tx_", "_tso_packets") - tsoB
		assert.Equal(t, uint64(0), n, "%s: %s (offload = false) sent %d TSO superframes", when, p.portB, n)
	}
	check("first start", 1)
	log, err := os.ReadFile(p.d.LogPath)
	require.NoError(t, err)
	for port, want := range map[string]string{p.portA: `offloads=csum,tso4,tso6,tso-ecn`, p.portB: `offloads=none`} {
		if !regexp.MustCompile(`msg="port created".*port=` + port + `\b.*` + regexp.QuoteMeta(want)).Match(log) {
			assert.True(t, regexp.MustCompile(`port=`+port+`\b.*msg="port created".*`+regexp.QuoteMeta(want)).Match(log), "no \"port created\" line for %s with %s in the log", port, want)
		}
	}

	p.d.Kill9()
	p.d.Restart()
	p.clientA, p.clientB = p.d.Client(p.nsA), p.d.Client(p.nsB)
	p.up(t)
	check("after kill -9 and restart", 11)
}
