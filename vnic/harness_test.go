package vnic

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/manad/manad/vnic/pagepool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testHost records delivered frames. With keep set it holds on to the buffers (as a socket
// queue would) until release is called.
type testHost struct {
	mu     sync.Mutex
	n      int
	frames [][]byte // the first 64 frames
	keep   bool
	kept   []*pagepool.Buffer
}

func (h *testHost) Deliver(q int, frame []byte, buf *pagepool.Buffer) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	if len(h.frames) < 64 {
		h.frames = append(h.frames, append([]byte(nil), frame...))
	}
	if h.keep {
		h.kept = append(h.kept, buf)
	}
	return h.keep
}

// release returns every kept buffer from another goroutine, through the pools' return rings.
func (h *testHost) release() {
	h.mu.Lock()
	kept := h.kept
	h.kept = nil
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for _, b := range kept {
			b.Pool().Put(b)
		}
		close(done)
	}()
	<-done
}

func (h *testHost) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

type testWire struct {
	mu     sync.Mutex
	frames [][]byte
}

func (w *testWire) Send(q int, frame []byte) {
	w.mu.Lock()
	w.frames = append(w.frames, append([]byte(nil), frame...))
	w.mu.Unlock()
}

func (w *testWire) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.frames)
}

// testPort is a port with its lock, host and wire.
type testPort struct {
	*Port
	mu   *sync.Mutex
	host *testHost
	wire *testWire
	t    testing.TB
}

// newTestPort makes a small port (16K pages, 4 queues, 128-buffer rings) unless mod changes it.
// It is shut down, and checked for leaks, at the end of the test.
func newTestPort(t testing.TB, mod func(*Config, *Settings)) *testPort {
	t.Helper()
	tp := &testPort{mu: new(sync.Mutex), host: new(testHost), wire: new(testWire), t: t}
	cfg := Config{
		Name: "eth0", Lock: tp.mu, Hardware: Hardware{PageSize: 16384}, Host: tp.host, Wire: tp.wire,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		ResetBackoffMin: time.Millisecond, ResetBackoffMax: 20 * time.Millisecond,
		PoolReleaseInterval: 5 * time.Millisecond,
	}
	s := Settings{MTU: 1500, Queues: 4, RxRing: 128, TxRing: 128}
	if mod != nil {
		mod(&cfg, &s)
	}
	p, err := New(cfg, s)
	require.NoError(t, err, "New")
	tp.Port = p
	t.Cleanup(func() {
		tp.host.release()
		tp.mu.Lock()
		td := p.Shutdown()
		tp.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, td.Wait(ctx), "teardown")
		n := p.Memory().InUse()
		assert.Equal(t, int64(0), n, "teardown: %d bytes still charged to the port", n)
	})
	return tp
}

// locked runs f with the configuration lock held.
func (tp *testPort) locked(f func()) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	f()
}

func (tp *testPort) state() State {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.State()
}

func (tp *testPort) open() {
	tp.t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if err := tp.Open(); err != nil {
		tp.t.Fatalf("Open: %v", err)
	}
}

// waitFor polls cond (under the lock) until it holds or a generous deadline passes.
func (tp *testPort) waitFor(what string, cond func(State) bool) State {
	tp.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := tp.state()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			tp.t.Fatalf("timed out waiting for %s; state %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// udpFrame builds an Ethernet/IPv4/UDP frame of the given total length for flow (sport, dport).
func udpFrame(length int, sport, dport uint16) []byte {
	f := make([]byte, max(length, 42))
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	for i := 42; i < len(f); i++ {
		f[i] = byte(i)
	}
	return f
}
