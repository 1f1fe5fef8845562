package siocethtool

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

// TestIfreqSize: the ifreq passed to the kernel is struct ifreq's size on this architecture.
func TestIfreqSize(t *testing.T) {
	assert.Equal(t, unsafe.Sizeof(unix.Ifreq{}), unsafe.Sizeof(ifreq{}))
	assert.Equal(t, uintptr(unix.IFNAMSIZ), unsafe.Offsetof(ifreq{}.data))
}
