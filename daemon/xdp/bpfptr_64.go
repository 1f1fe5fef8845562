//go:build amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x

package xdp

import "unsafe"

// bpfPtr is a __aligned_u64 holding a user pointer, as cilium/ebpf's sys.Pointer. Storing it as
// an unsafe.Pointer rather than an integer keeps what it points to alive, and, the attribute
// block being on the heap, makes the compiler keep such memory on the heap too, where no stack
// copy can move it while the kernel uses the address.
type bpfPtr struct {
	p unsafe.Pointer
}
