package datapath

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every endpoint, port, watcher
// and relay the tests start must be stopped by their cleanups.
func TestMain(m *testing.M) {
	if spec := os.Getenv(blasterEnv); spec != "" {
		runBlaster(spec) // a benchmark's traffic generator; never returns
	}
	if spec := os.Getenv(rrEnv); spec != "" {
		runRR(spec) // BenchmarkRoundTrip's client or echo server; never returns
	}
	goleak.VerifyTestMain(m)
}
