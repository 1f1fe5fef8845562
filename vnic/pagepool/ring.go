package pagepool

import (
	"sync/atomic"
)

// cacheLine pads hot shared words apart so producers' CAS on tail and the
// owner's store of head do not share a line.
const cacheLine = 64

// retEntry is one returned buffer and the generation it was handed out with,
// so that the owner can tell a stale (double) return from a real one.
type retEntry struct {
	b   *Buffer
	gen uint32
}

// retSlot is one slot of the return ring. seq is pos+1 once the producer that
// claimed position pos has written the entry (Vyukov's per-slot sequence).
type retSlot struct {
	seq atomic.Uint64
	e   retEntry
}

// returnRing is a bounded multi-producer single-consumer ring of returned
// buffers, the analogue of the page_pool ptr_ring without its producer
// spinlock. Producers claim a position with one CAS on tail, write the slot and
// publish it with a store of the slot's sequence. The single consumer (the pool
// owner) reads slots in order and publishes how far it got (head) once per
// batch, which is what producers compare against to detect a full ring; so the
// consumer pays no atomic write per entry.
type returnRing struct {
	slots []retSlot
	mask  uint64
	_     [cacheLine]byte
	tail  atomic.Uint64 // next position a producer claims; also the count of ring puts
	_     [cacheLine - 8]byte
	head  atomic.Uint64 // consumer progress as last published
	_     [cacheLine - 8]byte
	next  uint64 // consumer-only: next position to read
}

// init sizes the ring; size is a power of two.
func (r *returnRing) init(size int) {
	r.slots = make([]retSlot, size)
	r.mask = uint64(size - 1)
}

// push appends e, or reports false when the ring is full. Any goroutine.
func (r *returnRing) push(e retEntry) bool {
	size := uint64(len(r.slots))
	for {
		pos := r.tail.Load()
		// Signed: head may already be past a stale pos, then the CAS fails.
		if int64(pos-r.head.Load()) >= int64(size) {
			return false
		}
		if r.tail.CompareAndSwap(pos, pos+1) {
			// pos-size has been consumed (head > pos-size was seen after it was
			// read), so the slot is ours until we publish it.
			s := &r.slots[pos&r.mask]
			s.e = e
			s.seq.Store(pos + 1)
			return true
		}
	}
}

// pop takes the next published entry. Consumer only. It stops at a position a
// producer has claimed but not yet published; that entry is taken next time.
func (r *returnRing) pop() (retEntry, bool) {
	s := &r.slots[r.next&r.mask]
	if s.seq.Load() != r.next+1 {
		return retEntry{}, false
	}
	e := s.e
	r.next++
	return e, true
}

// release publishes the consumer's progress so that producers may reuse the
// slots read so far. Consumer only; called once per batch.
func (r *returnRing) release() {
	r.head.Store(r.next)
}

// puts is the number of entries ever pushed.
func (r *returnRing) puts() uint64 {
	return r.tail.Load()
}
