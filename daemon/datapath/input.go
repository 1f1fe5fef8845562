package datapath

import (
	"sync"
	"sync/atomic"
)

// minInputSlots is the slots an input starts with; it grows, by doubling, up to the bound push
// is given.
const minInputSlots = 64

// inputRing is an RX queue's bounded input: frames the wire delivered while the queue was busy,
// waiting for the queue's goroutine (the backlog a NIC's RX ring holds while the host is slow).
// Slots keep their backing arrays, so after warm-up a push copies without allocating; the slot
// array grows only as far as a backlog actually reached, so an idle queue costs little. Any
// goroutine may push; only the holder of the queue's busy lock peeks and pops, so the slot at
// the head stays untouched while it is processed.
type inputRing struct {
	mu    sync.Mutex
	slots [][]byte // len is a power of two
	head  int
	n     int
	count atomic.Int32 // n, readable without the lock
}

// newInputRing returns an empty ring.
func newInputRing() *inputRing {
	return &inputRing{slots: make([][]byte, minInputSlots)}
}

// empty reports whether no frame is waiting (or being processed).
func (r *inputRing) empty() bool { return r.count.Load() == 0 }

// push copies frame in unless limit frames are already waiting; false means the frame was not
// taken.
func (r *inputRing) push(frame []byte, limit int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n >= limit {
		return false
	}
	if r.n == len(r.slots) {
		r.grow()
	}
	i := (r.head + r.n) & (len(r.slots) - 1)
	r.slots[i] = append(r.slots[i][:0], frame...)
	r.n++
	r.count.Store(int32(r.n))
	return true
}

// grow doubles the slot array, keeping the frames in order and every backing array. The head
// slot moves with the rest: its holder only reads it between peek and pop, and a push that
// grows happens under mu, which peek's caller does not hold while processing; the old slice
// header it holds stays valid (the backing array is not freed or reused).
func (r *inputRing) grow() {
	ns := make([][]byte, 2*len(r.slots))
	mask := len(r.slots) - 1
	for i := range r.slots {
		ns[i] = r.slots[(r.head+i)&mask]
	}
	r.slots, r.head = ns, 0
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
	r.head = (r.head + 1) & (len(r.slots) - 1)
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
