package manactl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonKeys returns the keys of the first object of a JSON array, in order.
func jsonKeys(t *testing.T, out string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			continue
		case json.Delim(']'), json.Delim('}'):
			depth--
			continue
		}
		if s, ok := tok.(string); ok && depth == 2 && dec.More() {
			keys = append(keys, s)
			// Skip the value.
			var v json.RawMessage
			err := dec.Decode(&v)
			require.NoError(t, err, "%v in %s", err, out)
		}
	}
	return keys
}

// TestStdStats (issue 10: ethtool -S --all-groups): `manactl -S DEV --all-groups` and
// `--groups G…` print the standard statistics groups as ethtool does: for a kernel veth through
// the kernel's STATS_GET (--kernel, manad not running, manad not owning the device), byte for
// byte with ethtool; for a manad port, which like the veth implements no group, the same text
// with its name, and in --json the same groups in the same order, each empty.
func TestStdStats(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.NeedTool(t, "ethtool")
	dir := worldDir(t)
	bin := manactlIn(t, dir)
	ns, other := harness.Name("mss", ""), harness.Name("mso", "")
	harness.Run(t, "", "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	harness.Run(t, ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "manad"), 0o755))
	port := harness.Name("msp", "0")
	d := harness.Start(t, filepath.Join(dir, "manad"), "", fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\npersistent = false\n", port, other), other)

	modes := []struct {
		name string
		env  []string
		pre  []string
	}{
		{"--kernel", []string{"MANAD_SOCKET=" + d.Socket}, []string{"--kernel"}},
		{"manad-not-running", []string{"MANAD_SOCKET=" + filepath.Join(dir, "none.sock")}, nil},
		{"manad-enodev", []string{"MANAD_SOCKET=" + d.Socket}, nil},
	}
	for _, args := range [][]string{{"-S", "vb", "--all-groups"}, {"-S", "vb", "--groups", "eth-mac", "rmon"}} {
		want := run(t, ns, nil, append([]string{"ethtool"}, args...)...)
		require.Equal(t, 0, want.code, "ethtool %v: %+v", args, want)
		require.True(t, strings.HasPrefix(want.stdout, "Standard stats for vb:\n"), "ethtool %v: %+v", args, want)
		for _, m := range modes {
			t.Run(strings.Join(args[2:], " ")+"/"+m.name, func(t *testing.T) {
				got := run(t, ns, m.env, append(append([]string{bin}, m.pre...), args...)...)
				assert.Equal(t, want, got, "manactl %v: %+v\nethtool: %+v", args, got, want)
			})
		}
	}

	env := []string{"MANAD_SOCKET=" + d.Socket}
	veth := run(t, ns, nil, "ethtool", "-S", "vb", "--all-groups")
	if got := ok(t, "-S --all-groups", run(t, other, env, bin, "-S", port, "--all-groups")); got != strings.Replace(veth.stdout, "vb", port, 1) {
		t.Errorf("manactl -S %s --all-groups:\n%q\nwant what ethtool prints for a device without groups:\n%q", port, got, veth.stdout)
	}
	vethJSON := run(t, ns, nil, "ethtool", "--json", "-S", "vb", "--all-groups")
	gotJSON := ok(t, "--json -S --all-groups", run(t, other, env, bin, "--json", "-S", port, "--all-groups"))
	want, got := jsonKeys(t, vethJSON.stdout), jsonKeys(t, gotJSON)
	assert.GreaterOrEqual(t, len(want), 2, "--json keys %v, want ethtool's %v\n%s", got, want, gotJSON)
	assert.Equal(t, strings.Join(want, ","), strings.Join(got, ","), "--json keys %v, want ethtool's %v\n%s", got, want, gotJSON)
	var objs []map[string]any
	err := json.Unmarshal([]byte(gotJSON), &objs)
	require.NoError(t, err, "--json: %v\n%s", err, gotJSON)
	require.Len(t, objs, 1, "--json: %v\n%s", err, gotJSON)
	for k, v := range objs[0] {
		if k == "ifname" {
			if v != port {
				t.Errorf("ifname %v", v)
			}
		} else if g, ok := v.(map[string]any); !ok || len(g) != 0 {
			t.Errorf("group %s = %v, want an empty object", k, v)
		}
	}
	if got := ok(t, "-S --groups", run(t, other, env, bin, "-S", port, "--groups", "rmon")); !bytes.Equal([]byte(got), []byte("Standard stats for "+port+":\n")) {
		t.Errorf("-S --groups rmon: %q", got)
	}
	r := run(t, other, env, bin, "-S", port, "--all-groups", "--groups", "rmon")
	assert.Equal(t, 1, r.code, "-S --all-groups --groups: %+v, want a usage error", r)
	assert.Contains(t, r.stderr, "--all-groups and --groups are mutually exclusive", "-S --all-groups --groups: %+v, want a usage error", r)
}
