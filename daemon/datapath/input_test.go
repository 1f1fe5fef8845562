package datapath

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
					require.Equal(t, []byte{byte(next), byte(next >> 8), 0xee}, got, "peek")
					r.pop()
					next++
				}
			}
			assert.Equal(t, tc.wantPushed, pushed, "pushed %d refused %d, want %d pushed", pushed, refused, tc.wantPushed)
			assert.Equal(t, tc.pushes-tc.wantPushed, refused, "pushed %d refused %d, want %d pushed", pushed, refused, tc.wantPushed)
			if n := int(r.count.Load()); n > tc.limit || n != pushed-next {
				t.Errorf("%d frames waiting, want %d (bound %d)", n, pushed-next, tc.limit)
			}
			left := int(r.count.Load())
			for range min(left, 5) {
				require.Equal(t, []byte{byte(next), byte(next >> 8), 0xee}, r.peek(), "peek")
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
