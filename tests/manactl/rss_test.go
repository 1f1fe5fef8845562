package manactl

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/vnic"
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
	if got, want := ok(t, "-x as nobody", e.mctlAs(t, "-x", port)), rssText(port, 4); got != want {
		t.Errorf("-x as nobody:\n%s\nwant\n%s", got, want)
	}
	ok(t, "-L", e.mctl(t, "-L", port, "combined", "2"))
	if got, want := ok(t, "-x after -L", e.mctl(t, "-x", port)), rssText(port, 2); got != want {
		t.Errorf("-x after -L combined 2:\n%s\nwant\n%s", got, want)
	}
	var js []map[string]any
	if err := json.Unmarshal([]byte(ok(t, "--json -x", e.mctl(t, "--json", "-x", port))), &js); err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 || js[0]["rss-hash-function"] != "toeplitz" || len(js[0]["rss-indirection-table"].([]any)) != vnic.RSSIndirSize {
		t.Errorf("--json -x: %v", js)
	}
}
