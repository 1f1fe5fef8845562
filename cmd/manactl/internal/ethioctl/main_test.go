package ethioctl

import (
	"os"
	"testing"

	"github.com/manad/manad/tests/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}
