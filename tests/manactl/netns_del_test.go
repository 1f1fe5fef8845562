package manactl

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// portDelJSON is `manactl --json port del --netns-too`.
type portDelJSON struct {
	IfName       string `json:"ifname"`
	NetNS        string `json:"netns"`
	NetNSDeleted bool   `json:"netns-deleted"`
	Notice       string `json:"notice"`
}

// TestPortDelNetNSToo (issue 12 part 5): `manactl port del` never deletes a namespace; with
// --netns-too manad deletes the port's namespace as `ip netns del` does when it created it and
// it is empty, also after a restart, and otherwise deletes the port, keeps the namespace and
// says why: a namespace manad did not create, one with another link, one with another manad
// port.
func TestPortDelNetNSToo(t *testing.T) {
	dir := worldDir(t)
	nsCfg := harness.Name("mdc", "")
	nss := map[string]string{}
	for _, k := range []string{"plain", "empty", "restart", "foreign", "link", "shared"} {
		nss[k] = harness.Name("md"+k[:2], "")
	}
	all := []string{nsCfg}
	for _, ns := range nss {
		all = append(all, ns)
	}
	cfgPort := harness.Name("mdc", "0")
	d := harness.Start(t, dir, "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\npersistent = false\n", cfgPort, nsCfg), all...)
	e := &e2e{d: d, dir: dir, bin: manactlIn(t, dir), ns: "", socketEnv: []string{"MANAD_SOCKET=" + d.Socket}}
	exists := func(ns string) bool {
		_, err := os.Stat("/run/netns/" + ns)
		if err != nil {
			require.ErrorIs(t, err, os.ErrNotExist)
		}
		return err == nil
	}
	// manactl runs in the port's namespace, where its name resolves.
	in := func(ns string, args ...string) result {
		t.Helper()
		return run(t, ns, e.socketEnv, append([]string{e.bin}, args...)...)
	}
	add := func(name, ns string) {
		t.Helper()
		ok(t, "port add "+name, e.mctl(t, "port", "add", name, "--netns", ns))
	}
	delNetNS := func(name, ns string) (portDelJSON, string) {
		t.Helper()
		r := in(ns, "--json", "port", "del", name, "--netns-too")
		require.Equal(t, 0, r.code, "port del %s --netns-too: exit %d, stderr %q", name, r.code, r.stderr)
		var res []portDelJSON
		err := json.Unmarshal([]byte(r.stdout), &res)
		require.NoError(t, err, "port del %s --netns-too: %q: %v", name, r.stdout, err)
		require.Len(t, res, 1, "port del %s --netns-too: %q: %v", name, r.stdout, err)
		assert.Nil(t, e.portJSON(t, name), "%s still listed after port del --netns-too", name)
		return res[0], r.stderr
	}
	kept := func(name, ns, why string) {
		t.Helper()
		res, stderr := delNetNS(name, ns)
		if res.NetNSDeleted || res.Notice != why || res.NetNS != ns || stderr != "Warning: network namespace kept: "+why+"\n" {
			t.Errorf("port del %s --netns-too: %+v, stderr %q; want the namespace kept because %q", name, res, stderr, why)
		}
		assert.True(t, exists(ns), "namespace %s deleted", ns)
	}
	deleted := func(name, ns string) {
		t.Helper()
		res, stderr := delNetNS(name, ns)
		if !res.NetNSDeleted || res.Notice != "" || res.NetNS != ns || stderr != "" {
			t.Errorf("port del %s --netns-too: %+v, stderr %q; want namespace %s deleted", name, res, stderr, ns)
		}
		assert.False(t, exists(ns), "namespace %s still in /run/netns", ns)
		assert.NotContains(t, harness.Run(t, "", "ip", "netns", "list"), ns, "ip netns list still shows")
	}

	// Without --netns-too nothing but the port goes.
	add("mdpl0", nss["plain"])
	ok(t, "port del", in(nss["plain"], "port", "del", "mdpl0"))
	assert.True(t, exists(nss["plain"]), "plain port del deleted namespace %s", nss["plain"])

	add("mdem0", nss["empty"])
	deleted("mdem0", nss["empty"])

	// The namespace of a configuration port, which manad created at start.
	deleted(cfgPort, nsCfg)

	// What manad created is remembered across a restart.
	add("mdre0", nss["restart"])
	d.Kill9()
	d.Restart()
	deleted("mdre0", nss["restart"])

	harness.Run(t, "", "ip", "netns", "add", nss["foreign"])
	add("mdfo0", nss["foreign"])
	kept("mdfo0", nss["foreign"], fmt.Sprintf("network namespace %q was not created by manad", nss["foreign"]))

	add("mdli0", nss["link"])
	harness.Run(t, nss["link"], "ip", "link", "add", "mdv0", "type", "veth", "peer", "name", "mdv1")
	var links []string // by ifindex, as ip lists them
	for l := range strings.Lines(harness.Run(t, nss["link"], "ip", "-o", "link", "show")) {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "mdv") {
			links = append(links, strings.TrimSuffix(strings.Split(f[1], "@")[0], ":"))
		}
	}
	kept("mdli0", nss["link"], fmt.Sprintf("network namespace %q still has links other than lo: %s", nss["link"], strings.Join(links, ", ")))

	add("mdsh0", nss["shared"])
	add("mdsh1", nss["shared"])
	kept("mdsh0", nss["shared"], fmt.Sprintf("network namespace %q still has manad ports: mdsh1", nss["shared"]))
	// The last port out takes the namespace with it.
	deleted("mdsh1", nss["shared"])

	// A port that does not exist: an error, as without --netns-too.
	fails(t, "port del of no port", in(nss["plain"], "port", "del", "mdno0", "--netns-too"), "netlink error: no device matches name: No such device")
}
