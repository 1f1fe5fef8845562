// Package testenv is internal/testenv under the name the tests have long imported: how a test
// that needs root (or another capability of the machine) gets out of the way on a developer's
// laptop but can never be skipped silently in CI. The helpers live in internal/testenv so that
// non-test packages (test fakes such as daemon/tap/taptest) can use them without importing
// tests/.
package testenv

import (
	"testing"

	"github.com/manad/manad/internal/testenv"
)

// InCI is testenv.InCI: whether the tests run in CI (CI=true).
func InCI() bool { return testenv.InCI() }

// SkipOrFail is testenv.SkipOrFail: skip t, or fail it in CI.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	testenv.SkipOrFail(t, format, args...)
}

// RequireRoot is testenv.RequireRoot: skip (in CI, fail) t unless it runs as uid 0.
func RequireRoot(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
}

// NeedTool is testenv.NeedTool: the path of program name; skip (in CI, fail) when it is absent.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	return testenv.NeedTool(t, name)
}
