package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/cmd/internal/buildinfo"
	"github.com/manad/manad/daemon/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// render runs man(1) on a page and returns the text, failing on any warning; it skips when man
// is not installed.
func render(t *testing.T, page []byte) string {
	t.Helper()
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed")
	}
	path := filepath.Join(t.TempDir(), "page")
	require.NoError(t, os.WriteFile(path, page, 0o644))
	cmd := exec.Command("man", "--warnings", "-l", path)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "LC_ALL=C.UTF-8")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	require.NoError(t, err, "man -l: %v, stderr %q", err, errb.String())
	require.Equal(t, 0, errb.Len(), "man -l: %v, stderr %q", err, errb.String())
	return out.String()
}

// TestManPage: manad(8) is the usage text as a manual page: a .SH per section, a .TP per option
// and signal, and man(1) renders it without a warning.
func TestManPage(t *testing.T) {
	page := manPage(usage, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	assert.True(t, strings.HasPrefix(page, `.TH "MANAD" "8" "December 2026" `), "page starts %q", page[:80])
	var sections, options []string
	for _, l := range strings.Split(usage, "\n") {
		switch {
		case l != "" && l[0] != ' ':
			sections = append(sections, l)
		case strings.HasPrefix(l, "    -"):
			options = append(options, strings.Fields(strings.TrimSuffix(strings.Fields(l)[0], ","))[0])
		}
	}
	for _, s := range sections {
		assert.Contains(t, page, "\n.SH "+s+"\n", "no .SH %s", s)
	}
	require.GreaterOrEqual(t, len(options), 9, "only %d options in the usage text", len(options))
	for _, o := range options {
		assert.True(t, regexp.MustCompile(`(?m)^\.TP\n\\fB`+regexp.QuoteMeta(roffEscape(o))+`\\fR`).MatchString(page), "no .TP for %s", o)
	}
	text := render(t, []byte(page))
	for _, want := range append(options, "manad - software Microsoft MANA NIC daemon", "SIGTERM, SIGINT", "manad.toml(5)") {
		assert.Contains(t, text, want, "rendered page lacks")
	}
}

// TestPrintMan: --print-man prints the page, --version the version; both exit 0.
func TestPrintMan(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"--print-man", manPage(usage, buildinfo.Date())},
		{"--version", buildinfo.Version("manad")},
	} {
		var out, errb bytes.Buffer
		code := run([]string{tc.flag}, &out, &errb)
		assert.Equal(t, 0, code, "manad %s: exit %d, stderr %q, stdout %.80q", tc.flag, code, errb.String(), out.String())
		assert.Equal(t, 0, errb.Len(), "manad %s: exit %d, stderr %q, stdout %.80q", tc.flag, code, errb.String(), out.String())
		assert.Equal(t, tc.want, out.String(), "manad %s: exit %d, stderr %q, stdout %.80q", tc.flag, code, errb.String(), out.String())
	}
}

// TestTOMLManPage: manad.toml(5) documents every key daemon/config's reference documents (and no
// other), its example is a valid configuration, and man(1) renders it without a warning.
func TestTOMLManPage(t *testing.T) {
	page, err := os.ReadFile("manad.toml.5")
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join("..", "..", "daemon", "config", "doc.go"))
	require.NoError(t, err)
	keysOf := func(re string, text []byte) []string {
		var keys []string
		for _, m := range regexp.MustCompile(re).FindAllSubmatch(text, -1) {
			keys = append(keys, string(m[1]))
		}
		slices.Sort(keys)
		return keys
	}
	documented := keysOf(`(?m)^//\t([a-z_]+) +=`, doc)
	inPage := keysOf(`(?m)^\\fB([a-z_]+)\\fR = `, page)
	assert.GreaterOrEqual(t, len(documented), 20, "manad.toml(5) documents keys\n%v\ndaemon/config documents\n%v", inPage, documented)
	assert.True(t, slices.Equal(documented, inPage), "manad.toml(5) documents keys\n%v\ndaemon/config documents\n%v", inPage, documented)
	example := regexp.MustCompile(`(?s)\.SH EXAMPLES\n\.nf\n(.*?)\.fi\n`).FindSubmatch(page)
	require.NotNil(t, example, "no EXAMPLES block")
	path := filepath.Join(t.TempDir(), "manad.toml")
	require.NoError(t, os.WriteFile(path, example[1], 0o644))
	if cfg, err := config.Load(path); err != nil || len(cfg.Ports) != 2 {
		t.Errorf("the example does not load: %v", err)
	}
	assert.Contains(t, render(t, page), "memory_budget", "rendered")
}
