package supervisor

import (
	"encoding/binary"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestReadMsghdr reads msghdrs of this process laid out as programs lay them out: the iovec array
// next to the msghdr (after or before it, read with it), far from it, with the msghdr against an
// unmapped page, or unreadable.
func TestReadMsghdr(t *testing.T) {
	page := os.Getpagesize()
	// Three pages: none, read-write, none.
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(mem) })
	require.NoError(t, unix.Mprotect(mem[:page], unix.PROT_NONE))
	require.NoError(t, unix.Mprotect(mem[2*page:], unix.PROT_NONE))
	rw := mem[page : 2*page]
	base := uint64(uintptr(unsafe.Pointer(&rw[0])))
	// Another mapping, far from the first (not a Go allocation, which the runtime may move
	// when it is on the stack).
	farMem, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(farMem) })
	far := farMem[:3*sizeofIovec]
	farAddr := uint64(uintptr(unsafe.Pointer(&far[0])))
	le := binary.NativeEndian
	put := func(b []byte, iovAddr, iovLen uint64) {
		le.PutUint64(b[offMsgIov:], iovAddr)
		le.PutUint64(b[offMsgIovlen:], iovLen)
	}
	m := procMemory{pid: os.Getpid()}
	for _, c := range []struct {
		name    string
		msgOff  int    // the msghdr's offset in rw
		iovAt   uint64 // where its iovec array is
		iovLen  uint64
		wantErr error
	}{
		{"iovecs after", 0, base + sizeofMsghdr + 8, 2, nil},
		{"iovecs before", 512, base + 512 - 64, 3, nil},
		{"iovecs far", 128, farAddr, 3, nil},
		{"msghdr at the end of the mapping", page - sizeofMsghdr, base + uint64(page) - sizeofMsghdr - 2*sizeofIovec, 2, nil},
		{"no iovecs", 64, 0, 0, nil},
		{"too many iovecs", 64, farAddr, maxIov + 1, unix.EMSGSIZE},
	} {
		clear(rw)
		clear(far)
		hdr := rw[c.msgOff : c.msgOff+sizeofMsghdr]
		var want []byte
		for i := range c.iovLen {
			if i == 3 {
				break
			}
			e := le.AppendUint64(nil, 0x1000*(i+1))
			e = le.AppendUint64(e, 100+i)
			want = append(want, e...)
		}
		if c.iovLen > 0 && c.iovLen <= 3 {
			dst := far
			if c.iovAt != farAddr {
				dst = rw[c.iovAt-base:]
			}
			copy(dst, want)
		}
		put(hdr, c.iovAt, c.iovLen)
		got, raw, err := readMsghdr(m, base+uint64(c.msgOff))
		if c.wantErr != nil {
			assert.ErrorIs(t, err, c.wantErr, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		assert.Equal(t, hdr, got[:], c.name)
		assert.Equal(t, len(want), len(raw), c.name)
		if len(want) > 0 {
			assert.Equal(t, want, raw, c.name)
		}
	}
	_, _, err = readMsghdr(m, base-64) // in the page before: unreadable
	assert.ErrorIs(t, err, unix.EFAULT)
}

// recMemory records the writes made through it.
type recMemory struct{ writes int }

func (m *recMemory) ReadAt(p []byte, _ uint64) error  { clear(p); return nil }
func (m *recMemory) WriteAt(_ []byte, _ uint64) error { m.writes++; return nil }

// TestWaitingMemory: an ioctl handler's writes reach the program only while its call waits.
func TestWaitingMemory(t *testing.T) {
	for _, c := range []struct {
		name    string
		waiting bool
	}{{"call waiting", true}, {"call ended", false}} {
		rec := &recMemory{}
		m := waitingMemory{Memory: rec, waiting: func() bool { return c.waiting }}
		err := m.WriteAt([]byte{1, 2, 3}, 0x1000)
		if c.waiting {
			assert.NoError(t, err, c.name)
			assert.Equal(t, 1, rec.writes, c.name)
		} else {
			assert.ErrorIs(t, err, unix.EINTR, c.name)
			assert.Zero(t, rec.writes, c.name)
		}
		var b [4]byte
		assert.NoError(t, m.ReadAt(b[:], 0x1000), "%s: reads are not guarded", c.name)
	}
}

// TestLockThread: a thread's ioctls are served one at a time, other threads' alongside, and
// the lock is forgotten when its last user leaves.
func TestLockThread(t *testing.T) {
	s := &supervisor{threads: make(map[int]*threadLock)}
	unlock := s.lockThread(7)
	other := s.lockThread(8) // another thread: not held up
	got := make(chan struct{})
	go func() {
		u := s.lockThread(7)
		close(got)
		u()
	}()
	select {
	case <-got:
		t.Fatal("a second ioctl of the thread ran while the first was served")
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	<-got
	other()
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Empty(t, s.threads)
}
