package xdp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// progRunAttr is the BPF_PROG_TEST_RUN member of union bpf_attr (include/uapi/linux/bpf.h,
// "anonymous struct used by BPF_PROG_TEST_RUN command"). cilium/ebpf's Program.Run fills the
// same structure, but serialising a context through it costs four allocations per call; this
// one is reused per queue.
type progRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32 // input: room at dataOut; output: the full output length
	dataIn      bpfPtr
	dataOut     bpfPtr
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       bpfPtr
	ctxOut      bpfPtr
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

// xdpMD is struct xdp_md, the XDP program context as BPF_PROG_TEST_RUN takes and returns it:
// offsets relative to data_meta, not pointers.
type xdpMD struct {
	data           uint32
	dataEnd        uint32
	dataMeta       uint32
	ingressIfindex uint32
	rxQueueIndex   uint32
	egressIfindex  uint32
}

// The kernel checks that bytes past the fields it knows are zero, and reads exactly what it is
// told: keep the sizes those of the uapi structures.
var (
	_ [80 - unsafe.Sizeof(progRunAttr{})]struct{}
	_ [unsafe.Sizeof(progRunAttr{}) - 80]struct{}
	_ [24 - unsafe.Sizeof(xdpMD{})]struct{}
	_ [unsafe.Sizeof(xdpMD{}) - 24]struct{}
)

// testRun runs the program once on in with s.md as context in and out, the output going to the
// start of out (bpf_prog_test_run_xdp). It returns the program's return value, the full output
// length and the syscall's errno. Caller holds s.mu.
func (s *queueRunner) testRun(in, out []byte) (retval, outLen uint32, errno unix.Errno) {
	a := &s.attr
	*a = progRunAttr{
		progFD:      uint32(s.fd),
		dataSizeIn:  uint32(len(in)),
		dataSizeOut: uint32(len(out)),
		dataIn:      bpfPtr{p: unsafe.Pointer(unsafe.SliceData(in))},
		dataOut:     bpfPtr{p: unsafe.Pointer(unsafe.SliceData(out))},
		repeat:      1,
		ctxSizeIn:   uint32(unsafe.Sizeof(s.md)),
		ctxSizeOut:  uint32(unsafe.Sizeof(s.md)),
		ctxIn:       bpfPtr{p: unsafe.Pointer(&s.md)},
		ctxOut:      bpfPtr{p: unsafe.Pointer(&s.md)},
	}
	_, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(a)), unsafe.Sizeof(*a))
	// Drop the references so that the queue does not keep the last RX buffer alive.
	a.dataIn, a.dataOut = bpfPtr{}, bpfPtr{}
	return a.retval, a.dataSizeOut, e
}
