package tap

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a watcher (or anything else) outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
