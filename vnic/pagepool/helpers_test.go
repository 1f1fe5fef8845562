package pagepool

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a releaser
// that never completed, a putter that never returned).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fataler is what both *testing.T and *rapid.T provide.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// eventually polls cond until it holds. The deadline only guards against a
// hang; it is not a speed assertion.
func eventually(t fataler, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// stamp writes v at both ends of b's memory, so that a buffer handed to two
// holders at once, or overlapping another, shows up as a clobbered stamp.
func stamp(b *Buffer, v uint64) {
	d := b.Bytes()
	binary.LittleEndian.PutUint64(d, v)
	binary.LittleEndian.PutUint64(d[len(d)-8:], ^v)
}

func stampOK(b *Buffer, v uint64) bool {
	d := b.Bytes()
	return binary.LittleEndian.Uint64(d) == v && binary.LittleEndian.Uint64(d[len(d)-8:]) == ^v
}

// mustPanic runs f and returns the panic message; it fails the test if f
// does not panic.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		require.NotNil(t, r, "no panic")
		s, ok := r.(string)
		require.True(t, ok, "panic with %T %v, want a string message", r, r)
		msg = s
	}()
	f()
	return ""
}

// newTestPool builds a pool over its own Memory.
func newTestPool(t testing.TB, budget int64, pageBytes, bufSize, frag int) (*Pool, *Memory) {
	t.Helper()
	mem := NewMemory(budget)
	p, err := New(Config{Mem: mem, PageBytes: pageBytes, BufSize: bufSize, FragCount: frag, Name: "test/rx0"})
	require.NoError(t, err)
	return p, mem
}
