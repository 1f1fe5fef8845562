//go:build 386 || arm || mipsle || mips64p32le

package xdp

import "unsafe"

// bpfPtr is a __aligned_u64 holding a user pointer, as cilium/ebpf's sys.Pointer: on a 32-bit
// little-endian target the pointer is the low half. See bpfptr_64.go.
type bpfPtr struct {
	p unsafe.Pointer
	_ uint32
}
