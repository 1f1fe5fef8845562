package manactl

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersion runs manad --version and manactl --version and checks each against what
// `go version -m` reads from the same binary: the module version, the VCS revision (marked
// modified when the tree was), the VCS time, and the Go version. (A build without VCS stamping,
// -buildvcs=false or a git worktree, records no revision; then none is printed.)
func TestVersion(t *testing.T) {
	manad, manactl := harness.Binaries(t)
	for _, bin := range []struct{ name, path string }{{"manad", manad}, {"manactl", manactl}} {
		out, err := exec.Command("go", "version", "-m", bin.path).Output()
		require.NoError(t, err, "go version -m %s", bin.path)
		set := map[string]string{}
		version := ""
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Split(strings.TrimSpace(l), "\t")
			switch {
			case len(f) >= 3 && f[0] == "mod":
				version = f[2]
			case len(f) == 2 && f[0] == "build":
				if k, v, ok := strings.Cut(f[1], "="); ok {
					set[k] = v
				}
			}
		}
		want := bin.name + " " + version + "\n"
		if rev := set["vcs.revision"]; rev != "" {
			if set["vcs.modified"] == "true" {
				rev += " (modified)"
			}
			want += "revision: " + rev + "\n"
		}
		if tm := set["vcs.time"]; tm != "" {
			want += "time:     " + tm + "\n"
		}
		want += "go:       " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
		r := run(t, "", nil, bin.path, "--version")
		assert.Equal(t, 0, r.code, "%s --version: exit %d, stderr %q, stdout\n%s\nwant\n%s", bin.name, r.code, r.stderr, r.stdout, want)
		assert.Equal(t, "", r.stderr, "%s --version: exit %d, stderr %q, stdout\n%s\nwant\n%s", bin.name, r.code, r.stderr, r.stdout, want)
		assert.Equal(t, want, r.stdout, "%s --version: exit %d, stderr %q, stdout\n%s\nwant\n%s", bin.name, r.code, r.stderr, r.stdout, want)
	}
}
