// Package manactl tests the manactl binary end to end: every command against a real manad whose
// ports live in a network namespace (the error cases included), manactl against the kernel's
// ethtool netlink compared with ethtool itself, and the systemd units, udev rule and make install
// (issue 5). Everything needs root; the binaries are built by tests/harness.
package manactl

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// result is how a command ended.
type result struct {
	code           int
	stdout, stderr string
}

// run runs argv (inside network namespace ns unless ns is "") with extra environment and
// returns its exit status and output.
func run(t testing.TB, ns string, env []string, argv ...string) result {
	t.Helper()
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), raceEnv()), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return r
}

// raceEnv keeps the race-detector builds of tests/harness from sleeping a second at every exit
// (the race runtime's atexit_sleep_ms, 1000 by default), while keeping any GORACE options given.
func raceEnv() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// worldDir makes a directory every user can enter and read (the non-admin tests run manactl as
// uid 65534, which must reach both the binary and manad's socket), removed at the end of the test.
func worldDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "manactl-e2e-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// manactlIn copies the harness's manactl into dir (world-executable) and returns its path.
func manactlIn(t testing.TB, dir string) string {
	t.Helper()
	_, src := harness.Binaries(t)
	dst := filepath.Join(dir, "manactl")
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}
