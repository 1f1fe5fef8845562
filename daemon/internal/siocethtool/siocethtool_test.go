package siocethtool

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestDo asks the loopback device for its link state (ETHTOOL_GLINK: lo's is always up) and
// checks the errors for a device that does not exist and a name that does not fit.
func TestDo(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	v := struct{ cmd, data uint32 }{cmd: unix.ETHTOOL_GLINK}
	tests := []struct {
		name string
		dev  string
		want error
	}{
		{"loopback", "lo", nil},
		{"no such device", "nosuchdev0", unix.ENODEV},
		{"name too long", "a-name-of-16-chars", unix.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v.data = 0
			_, err := Do(fd, tt.dev, unsafe.Pointer(&v))
			if tt.want == nil {
				if err != nil || v.data != 1 {
					t.Errorf("GLINK on %s: link %d, %v; want 1, nil", tt.dev, v.data, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("GLINK on %s: %v, want %v", tt.dev, err, tt.want)
			}
		})
	}
}
