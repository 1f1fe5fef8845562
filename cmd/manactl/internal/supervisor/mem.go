package supervisor

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// Memory is the address space of the supervised task that made a call. It is what the
// handlers read arguments from and write results to.
type Memory interface {
	// ReadAt reads len(p) bytes at addr; any shortfall is an error wrapping unix.EFAULT.
	ReadAt(p []byte, addr uint64) error
	// WriteAt writes p at addr; any shortfall is an error wrapping unix.EFAULT.
	WriteAt(p []byte, addr uint64) error
}

// procMemory is a task's memory through process_vm_readv/process_vm_writev, which need
// PTRACE_MODE_ATTACH over the task: the supervisor is the same user as its program and its
// ancestor (Yama's ptrace_scope 1 allows that), and no_new_privs keeps a setuid program from
// changing the first.
type procMemory struct{ pid int }

func (m procMemory) ReadAt(p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := unix.ProcessVMReadv(m.pid, []unix.Iovec{{Base: &p[0], Len: uint64(len(p))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}, 0)
	if err != nil {
		return fmt.Errorf("read %d bytes at %#x of task %d: %w", len(p), addr, m.pid, efault(err))
	}
	if n != len(p) {
		return fmt.Errorf("read %d of %d bytes at %#x of task %d: %w", n, len(p), addr, m.pid, unix.EFAULT)
	}
	return nil
}

func (m procMemory) WriteAt(p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := unix.ProcessVMWritev(m.pid, []unix.Iovec{{Base: &p[0], Len: uint64(len(p))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}, 0)
	if err != nil {
		return fmt.Errorf("write %d bytes at %#x of task %d: %w", len(p), addr, m.pid, efault(err))
	}
	if n != len(p) {
		return fmt.Errorf("wrote %d of %d bytes at %#x of task %d: %w", n, len(p), addr, m.pid, unix.EFAULT)
	}
	return nil
}

// efault maps process_vm_*'s errors to what the program's syscall would give for a bad
// pointer: EFAULT (ESRCH, the task died, is answered by nobody anyway).
func efault(err error) error {
	if err == unix.ESRCH {
		return err
	}
	return fmt.Errorf("%w (%v)", unix.EFAULT, err)
}

func readU32(m Memory, addr uint64) (uint32, error) {
	var b [4]byte
	if err := m.ReadAt(b[:], addr); err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint32(b[:]), nil
}

func writeU32(m Memory, addr uint64, v uint32) error {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return m.WriteAt(b[:], addr)
}

// writes is a batch of writes into a task's memory.
type writes struct {
	local  []unix.Iovec
	remote []unix.RemoteIovec
	total  int
}

func (w *writes) add(p []byte, addr uint64) {
	if len(p) == 0 {
		return
	}
	w.local = append(w.local, unix.Iovec{Base: &p[0], Len: uint64(len(p))})
	w.remote = append(w.remote, unix.RemoteIovec{Base: uintptr(addr), Len: len(p)})
	w.total += len(p)
}

// writeAll makes the writes of w with one process_vm_writev (the kernel takes up to
// UIO_MAXIOV of each; a larger batch is split).
func (m procMemory) writeAll(w *writes) error {
	for i := 0; i < len(w.local); i += maxIov {
		j := min(i+maxIov, len(w.local))
		want := 0
		for _, r := range w.remote[i:j] {
			want += r.Len
		}
		n, err := unix.ProcessVMWritev(m.pid, w.local[i:j], w.remote[i:j], 0)
		if err != nil {
			return fmt.Errorf("write %d bytes of task %d: %w", want, m.pid, efault(err))
		}
		if n != want {
			return fmt.Errorf("wrote %d of %d bytes of task %d: %w", n, want, m.pid, unix.EFAULT)
		}
	}
	return nil
}
