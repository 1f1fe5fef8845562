package datapath

import (
	"bytes"
	"testing"
)

// TestInputRing fills a ring to its bound across growth and wrap-around and checks order, the
// bound and the reset count.
func TestInputRing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      int
		popEvery   int // pop one frame after every popEvery pushes (0 = never)
		pushes     int
		wantPushed int
	}{
		{"below first size", 10, 0, 10, 10},
		{"bound", 100, 0, 150, 100},
		{"grows past the first size", 1024, 0, 1024, 1024},
		{"wraps while growing", 400, 3, 500, 500},
		// Fills to 64 after 127 pushes; then each pop frees one slot for one of the next two.
		{"bound with pops", 64, 2, 201, 64 + 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newInputRing()
			next, pushed, refused := 0, 0, 0
			for i := range tc.pushes {
				f := []byte{byte(i), byte(i >> 8), 0xee}
				if r.push(f, tc.limit) {
					pushed++
				} else {
					refused++
				}
				if tc.popEvery > 0 && i%tc.popEvery == tc.popEvery-1 {
					got := r.peek()
					if want := []byte{byte(next), byte(next >> 8), 0xee}; !bytes.Equal(got, want) {
						t.Fatalf("peek %x, want %x", got, want)
					}
					r.pop()
					next++
				}
			}
			if pushed != tc.wantPushed || refused != tc.pushes-tc.wantPushed {
				t.Errorf("pushed %d refused %d, want %d pushed", pushed, refused, tc.wantPushed)
			}
			if n := int(r.count.Load()); n > tc.limit || n != pushed-next {
				t.Errorf("%d frames waiting, want %d (bound %d)", n, pushed-next, tc.limit)
			}
			left := int(r.count.Load())
			for range min(left, 5) {
				if got, want := r.peek(), []byte{byte(next), byte(next >> 8), 0xee}; !bytes.Equal(got, want) {
					t.Fatalf("peek %x, want %x", got, want)
				}
				r.pop()
				next++
				left--
			}
			if n := r.reset(); n != left || !r.empty() || r.peek() != nil {
				t.Errorf("reset returned %d, want %d; empty %v", n, left, r.empty())
			}
		})
	}
}
