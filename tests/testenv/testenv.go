// Package testenv holds the small helpers every manad test package shares: how a test that needs
// root (or another capability of the machine) gets out of the way on a developer's laptop but can
// never be skipped silently in CI.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (environment CI=true). In CI every test must run: a
// test that would skip for lack of root or of a tool fails instead.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips t with the formatted reason, or fails it when InCI, because CI runs as root on
// a machine that has everything the suite needs and a skip there would hide a broken test.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("CI=true, refusing to skip: %s", msg)
	}
	t.Skip(msg)
}

// RequireRoot skips (or, in CI, fails) t unless the test process runs as uid 0.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root (uid 0): run the suite with sudo, as CI does")
	}
}

// NeedTool returns the path of the program name, and skips (or, in CI, fails) the test when it
// is not installed.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipOrFail(t, "%s is not installed: %v", name, err)
	}
	return p
}
