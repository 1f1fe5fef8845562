package manactl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckConfigTAPName: manad --check-config refuses a port name the TAP would refuse (a
// '%' template, which the kernel's own devices may use), with the file and line, rather than
// passing the check and failing at start in tap.Open (issue 27).
func TestCheckConfigTAPName(t *testing.T) {
	manad, _ := harness.Binaries(t)
	conf := filepath.Join(t.TempDir(), "manad.toml")
	require.NoError(t, os.WriteFile(conf, []byte("[[port]]\nname = \"eth%d\"\n"), 0o644))
	r := run(t, "", nil, manad, "--config", conf, "--check-config")
	assert.NotEqual(t, 0, r.code, "manad --check-config accepted eth%%d: %+v", r)
	assert.Contains(t, r.stderr, conf+`:2: port "eth%d": name "eth%d" is not a valid interface name (no '/', ':', '%' or whitespace)`)
	assert.NotContains(t, r.stdout, "OK")
}

// TestRxBufPlanPageSizeUnits: manactl reads a page size as the configuration file does, so
// rxbuf-plan takes "4KiB" as page_size = "4KiB" is taken (issue 27).
func TestRxBufPlanPageSizeUnits(t *testing.T) {
	_, manactl := harness.Binaries(t)
	env := []string{"MANAD_SOCKET=" + filepath.Join(t.TempDir(), "no-manad.sock")}
	for _, size := range []string{"4KiB", "4K", "4096"} {
		r := run(t, "", env, manactl, "rxbuf-plan", "--page-size", size, "--mtu", "1500")
		assert.Equal(t, 0, r.code, "rxbuf-plan --page-size %s: %+v", size, r)
		assert.Contains(t, r.stdout, "page size 4096, MTU 1500", "rxbuf-plan --page-size %s", size)
	}
	r := run(t, "", env, manactl, "rxbuf-plan", "--page-size", "4MiB", "--mtu", "1500")
	assert.NotEqual(t, 0, r.code, "rxbuf-plan --page-size 4MiB accepted: %+v", r)
}
