package genl

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/manad/manad/genl/nlattr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStrsetCache: a set is encoded once and its encoding reused while its strings stay the
// same; changed strings (a new queue count), another device or another set are encoded anew;
// what comes out is always putStrings' encoding of the strings asked about; a nest too big for
// an attribute is not cached (nil: the caller encodes, and fails with EMSGSIZE).
func TestStrsetCache(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("rx_queue_%d_packets", i)
		}
		return out
	}
	enc := func(strs []string) []byte {
		var b nlattr.Builder
		putStrings(&b, strs)
		return b.B
	}
	var c strsetCache
	dev0 := strsetKey{ns: NetNS{Dev: 1, Ino: 2}, ifindex: 7, id: 1}
	dev1 := strsetKey{ns: NetNS{Dev: 1, Ino: 2}, ifindex: 8, id: 1}
	for i, tc := range []struct {
		key    strsetKey
		strs   []string
		reused bool // the previous step's encoding comes back
	}{
		{dev0, names(16), false},
		{dev0, names(16), true}, // equal strings, another slice
		{dev0, names(8), false}, // the queue count changed
		{dev0, names(8), true},
		{dev1, names(8), false}, // another device
		{strsetKey{ns: dev0.ns, ifindex: 7, id: 2}, names(8), false}, // another set
		{strsetKey{id: 3}, []string{"a", "b"}, false},                // a global set
	} {
		var prev []byte
		if i > 0 {
			// What the previous step cached for this key, if anything.
			prev = c.m[tc.key].nest
		}
		got := c.encoded(tc.key, tc.strs)
		require.Equal(t, enc(tc.strs), got, "step %d: encoding differs from putStrings'", i)
		reused := prev != nil && &got[0] == &prev[0]
		assert.Equal(t, tc.reused, reused, "step %d: reused", i)
	}
	// The cache keeps its own copy of the string slice: the caller's may be reused.
	strs := names(4)
	c.encoded(dev0, strs)
	strs[0] = "changed"
	if got := c.encoded(dev0, strs); !bytes.Equal(got, enc(strs)) || slices.Contains(c.m[dev0].strs, "rx_queue_0_packets") {
		t.Errorf("a caller's change to its slice was not seen")
	}
	// Too big for one attribute: not cached.
	big := []string{strings.Repeat("x", 31)}
	for len(enc(big)) < 1<<16 {
		big = append(big, big...)
	}
	got := c.encoded(dev1, big)
	assert.Nil(t, got, "oversized set encoded (%d bytes)", len(got))
}
