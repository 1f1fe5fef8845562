package main

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/manad/manad/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRingReadWrite drives the ring as the forwarder does, over two pipes, with and without
// SQPOLL: a READ armed on an empty pipe completes when a message is written to it, with the
// message; a WRITE of it to the second pipe puts it there; the completions carry their tags and
// the ring takes more SQEs than it has entries, in turns. It skips only where io_uring is not
// available at all (ENOSYS, EPERM).
func TestRingReadWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sqpoll bool
	}{{"enter", false}, {"sqpoll", true}} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.LockOSThread() // without SQPOLL, completions run as task work on the submitter
			defer runtime.UnlockOSThread()
			r, err := newRing(4, tc.sqpoll, 10*time.Millisecond, -1)
			if errors.Is(err, errRingUnavailable) {
				testenv.SkipOrFail(t, "io_uring: %v", err)
			}
			require.NoError(t, err)
			defer r.close()
			var in, out [2]int
			require.NoError(t, unix.Pipe2(in[:], unix.O_CLOEXEC))
			require.NoError(t, unix.Pipe2(out[:], unix.O_CLOEXEC))
			defer func() {
				for _, fd := range append(in[:], out[:]...) {
					unix.Close(fd)
				}
			}()
			buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			require.NoError(t, err)
			defer unix.Munmap(buf)

			// wait polls the CQ ring for one completion, as the forwarder does (entering the
			// kernel now and then, so that task work runs without SQPOLL).
			wait := func() cqe {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) {
					head, tail := r.completions()
					if head != tail {
						c := r.cqe(head)
						r.done(head + 1)
						return c
					}
					if !tc.sqpoll {
						_, err := r.enter(0, 0, enterGetEvents)
						require.NoError(t, err)
					}
				}
				t.Fatal("no completion within 5 s")
				return cqe{}
			}
			// Six rounds through a ring of four entries: every index of it is reused.
			for i := range 6 {
				msg := []byte{'m', byte('0' + i)}
				require.True(t, r.queue(opRead, in[0], buf[:100], uint64(i)))
				require.NoError(t, r.submit())
				time.Sleep(time.Millisecond) // the read is armed on the empty pipe, not done
				head, tail := r.completions()
				require.Equal(t, head, tail, "a read of an empty pipe completed")
				_, err := unix.Write(in[1], msg)
				require.NoError(t, err)
				c := wait()
				require.Equal(t, uint64(i), c.userData)
				require.Equal(t, int32(len(msg)), c.res, "read's result")
				assert.Equal(t, msg, buf[:len(msg)])

				require.True(t, r.queue(opWrite, out[1], buf[:c.res], tagWrite|uint64(i)))
				require.NoError(t, r.submit())
				c = wait()
				require.Equal(t, tagWrite|uint64(i), c.userData)
				require.Equal(t, int32(len(msg)), c.res, "write's result")
				got := make([]byte, 100)
				k, err := unix.Read(out[0], got)
				require.NoError(t, err)
				assert.Equal(t, msg, got[:k])
			}
			// A full SQ ring refuses an SQE until it is submitted.
			if !tc.sqpoll {
				for i := range 4 {
					require.True(t, r.queue(opWrite, out[1], buf[:1], uint64(i)), "SQE %d of 4", i)
				}
				assert.False(t, r.queue(opWrite, out[1], buf[:1], 4), "a fifth SQE in a ring of 4")
				require.NoError(t, r.submit())
				assert.True(t, r.queue(opWrite, out[1], buf[:1], 4), "an SQE after the submit")
				require.NoError(t, r.submit())
			}
		})
	}
}

// TestRingMultishot: a multishot read armed once on a pipe completes once per message written,
// each time into the next buffer of the provided-buffer ring (named by the completion's buffer
// id), with IORING_CQE_F_MORE (still armed); with every buffer taken it ends with ENOBUFS and
// no F_MORE, and once a buffer is given back and the read armed again, it reads into it.
func TestRingMultishot(t *testing.T) {
	r, err := newRing(4, true, 10*time.Millisecond, -1)
	if errors.Is(err, errRingUnavailable) {
		testenv.SkipOrFail(t, "io_uring: %v", err)
	}
	require.NoError(t, err)
	defer r.close()
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	const nbuf, size = 2, 64
	mem, err := unix.Mmap(-1, 0, nbuf*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(mem)
	br, err := r.registerBufRing(nbuf, 7)
	require.NoError(t, err)
	defer br.close()
	buf := func(i uint16) []byte { return mem[int(i)*size : int(i+1)*size] }
	for i := range uint16(nbuf) {
		br.add(buf(i), i)
	}
	br.publish()

	wait := func() cqe {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			if head, tail := r.completions(); head != tail {
				c := r.cqe(head)
				r.done(head + 1)
				return c
			}
		}
		t.Fatal("no completion within 5 s")
		return cqe{}
	}
	require.True(t, r.queueMultishot(p[0], 7, 42))
	require.NoError(t, r.submit())
	seen := map[uint16]bool{}
	for i := range nbuf {
		msg := []byte{'m', byte('0' + i)}
		_, err := unix.Write(p[1], msg)
		require.NoError(t, err)
		c := wait()
		require.Equal(t, uint64(42), c.userData)
		require.Equal(t, int32(len(msg)), c.res, "message %d", i)
		require.NotZero(t, c.flags&cqeFBuffer, "message %d: no buffer id", i)
		require.NotZero(t, c.flags&cqeFMore, "message %d: the read ended", i)
		b := uint16(c.flags >> cqeBufferShift)
		require.Less(t, b, uint16(nbuf))
		assert.False(t, seen[b], "buffer %d used twice", b)
		seen[b] = true
		assert.Equal(t, msg, buf(b)[:len(msg)])
	}
	_, err = unix.Write(p[1], []byte("x"))
	require.NoError(t, err)
	c := wait()
	assert.Equal(t, -int32(unix.ENOBUFS), c.res, "a read with no buffer left")
	assert.Zero(t, c.flags&cqeFMore, "the read stays armed with no buffer left")

	br.add(buf(1), 1)
	br.publish()
	require.True(t, r.queueMultishot(p[0], 7, 43))
	require.NoError(t, r.submit())
	c = wait()
	require.Equal(t, int32(1), c.res)
	require.Equal(t, uint16(1), uint16(c.flags>>cqeBufferShift))
	assert.Equal(t, byte('x'), buf(1)[0])
}
