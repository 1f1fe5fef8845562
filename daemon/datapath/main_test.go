package datapath

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	binharness "github.com/manad/manad/tests/harness"
)

// TestMain fails the package if any goroutine outlives the tests: every endpoint, port, watcher
// and relay the tests start must be stopped by their cleanups. It removes the daemon binaries
// BenchmarkRoundTripBinary built.
func TestMain(m *testing.M) {
	if spec := os.Getenv(blasterEnv); spec != "" {
		runBlaster(spec) // a benchmark's traffic generator; never returns
	}
	if spec := os.Getenv(rrEnv); spec != "" {
		runRR(spec) // BenchmarkRoundTrip's client or echo server; never returns
	}
	code := m.Run()
	binharness.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
