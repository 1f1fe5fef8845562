package datapath

import (
	"sync"
	"sync/atomic"
)

// inputRing is an RX queue's bounded input: frames the wire delivered while the queue was busy,
// waiting for the queue's goroutine (the backlog a NIC's RX FIFO holds while the host is slow).
// Slots keep their backing arrays, so after warm-up a push copies without allocating. Any
// goroutine may push; only the holder of the queue's busy lock peeks and pops, so the slot at
// the head stays untouched while it is processed.
type inputRing struct {
	mu    sync.Mutex
	slots [][]byte
	mask  int
	head  int
	n     int
	count atomic.Int32 // n, readable without the lock
}

// newInputRing returns a ring of size slots (rounded up to a power of two).
func newInputRing(size int) *inputRing {
	c := 1
	for c < size {
		c <<= 1
	}
	return &inputRing{slots: make([][]byte, c), mask: c - 1}
}

// empty reports whether no frame is waiting (or being processed).
func (r *inputRing) empty() bool { return r.count.Load() == 0 }

// push copies frame in; false means the ring is full and the frame was not taken.
func (r *inputRing) push(frame []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == len(r.slots) {
		return false
	}
	i := (r.head + r.n) & r.mask
	r.slots[i] = append(r.slots[i][:0], frame...)
	r.n++
	r.count.Store(int32(r.n))
	return true
}

// peek returns the oldest frame, or nil. It stays in the ring (counted, so producers keep
// queueing behind it) until pop.
func (r *inputRing) peek() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return nil
	}
	return r.slots[r.head]
}

// pop removes the oldest frame.
func (r *inputRing) pop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.head = (r.head + 1) & r.mask
	r.n--
	r.count.Store(int32(r.n))
}

// reset discards every frame and returns how many there were.
func (r *inputRing) reset() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.head, r.n = 0, 0
	r.count.Store(0)
	return n
}
