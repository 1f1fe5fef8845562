package uplink

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a follower or an RX goroutine outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
