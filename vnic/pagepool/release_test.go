package pagepool

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// recordHandler captures slog records for inspection.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// find returns the attributes of the records with the given message.
func (h *recordHandler) find(msg string) []map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]slog.Value{"level": slog.StringValue(r.Level.String())}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
		out = append(out, attrs)
	}
	return out
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestDestroyIdlePoolCompletesAtOnce(t *testing.T) {
	p, mem := newTestPool(t, 0, 65536, 2112, 31)
	bufs := make([]*Buffer, 40)
	require.NoError(t, p.AllocBulk(bufs))
	for i, b := range bufs {
		if i%2 == 0 {
			p.Recycle(b)
		} else {
			p.Put(b) // still on the ring when Destroy runs
		}
	}
	r := p.Destroy()
	require.True(t, isClosed(r.Done()), "Done not closed with nothing in flight")
	require.NoError(t, r.Wait(context.Background()))
	require.Same(t, r, p.Destroy(), "Destroy is not idempotent")
	s := p.Stats()
	require.Equal(t, int64(0), mem.InUse(), "InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, int64(0), p.PinnedBytes(), "InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, 0, r.InFlight(), "InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, 0, s.Pages, "InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, s.PageAllocs, s.PageReleases, "InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, uint64(20), s.RingDrained, "InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, 0, s.InFlight, "InUse %d stats %+v", mem.InUse(), s)
}

func TestDestroyWaitsForLastPut(t *testing.T) {
	mem := NewMemory(0)
	// ReleaseInterval is huge so that completion can only come from the Puts
	// themselves waking the releaser.
	p, err := New(Config{Mem: mem, PageBytes: 16384, BufSize: 2112, FragCount: 7, Name: "eth0/rx1",
		ReleaseInterval: time.Hour, StallWarn: time.Hour})
	require.NoError(t, err)
	bufs := make([]*Buffer, 21) // three full pages
	require.NoError(t, p.AllocBulk(bufs))
	for _, b := range bufs[:7] { // page 1 comes back before Destroy
		p.Recycle(b)
	}
	out := bufs[7:]
	r := p.Destroy()
	require.False(t, isClosed(r.Done()), "Done closed with %d buffers in flight", len(out))
	require.Equal(t, 14, r.InFlight(), "InFlight %d, want 14", r.InFlight())
	require.Equal(t, int64(2*16384), mem.InUse(), "InUse %d, want the two pages with buffers in flight", mem.InUse())
	// In-flight memory stays valid and untouched.
	for i, b := range out {
		stamp(b, uint64(i))
	}
	putFrom := func(bs []*Buffer) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range bs {
				p.Put(b)
			}
		}()
		wg.Wait()
	}
	putFrom(out[:7]) // page 2 is complete: it is released, page 3 is not
	eventually(t, "page 2 released", func() bool { return r.InFlight() == 7 && mem.InUse() == 16384 })
	for i, b := range out[7:] {
		require.True(t, stampOK(b, uint64(i+7)), "in-flight buffer clobbered during release")
	}
	putFrom(out[7:13])
	eventually(t, "six more buffers taken back", func() bool { return r.InFlight() == 1 })
	require.False(t, isClosed(r.Done()), "Done closed before the last Put")
	require.Equal(t, int64(16384), mem.InUse(), "InUse %d, the page of the last buffer must stay charged", mem.InUse())
	putFrom(out[13:])
	require.NoError(t, r.Wait(context.Background()))
	s := p.Stats()
	require.Equal(t, int64(0), mem.InUse(), "after the last Put: InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, 0, r.InFlight(), "after the last Put: InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, 0, s.Pages, "after the last Put: InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, uint64(3), s.PageReleases, "after the last Put: InUse %d stats %+v", mem.InUse(), s)
	require.Equal(t, 0, s.InFlight, "after the last Put: InUse %d stats %+v", mem.InUse(), s)
}

func TestReleaseWaitReportsLeak(t *testing.T) {
	p, mem := newTestPool(t, 0, 4096, 1856, 2)
	bufs := make([]*Buffer, 5)
	require.NoError(t, p.AllocBulk(bufs))
	p.Recycle(bufs[0])
	p.Recycle(bufs[1])
	r := p.Destroy()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	err := r.Wait(ctx)
	require.ErrorIs(t, err, unix.EBUSY, "Wait = %v, want EBUSY", err)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Wait = %v, want it to wrap the context's cause", err)
	for _, want := range []string{"test/rx0", "3 buffer(s)"} {
		require.Contains(t, err.Error(), want, "leak report %q does not contain", err)
	}
	// The release keeps going after Wait gave up.
	for _, b := range bufs[2:] {
		p.Put(b)
	}
	require.NoError(t, r.Wait(context.Background()))
	require.Equal(t, int64(0), mem.InUse(), "InUse")
	// A cancelled context on a completed release is not a leak.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	require.NoError(t, r.Wait(cctx), "Wait on a completed release with a dead context")
}

func TestStalledDestroyWarns(t *testing.T) {
	h := &recordHandler{}
	mem := NewMemory(0)
	p, err := New(Config{Mem: mem, PageBytes: 65536, BufSize: 2112, FragCount: 31, Name: "eth9/rx7",
		Logger: slog.New(h), ReleaseInterval: time.Millisecond, StallWarn: 2 * time.Millisecond})
	require.NoError(t, err)
	a, _ := p.Alloc()
	b, _ := p.Alloc()
	r := p.Destroy()
	eventually(t, "two stall warnings", func() bool { return len(h.find("stalled pool shutdown")) >= 2 })
	w := h.find("stalled pool shutdown")[0]
	require.Equal(t, "WARN", w["level"].String(), "warning attributes %v", w)
	require.Equal(t, "eth9/rx7", w["pool"].String(), "warning attributes %v", w)
	require.Equal(t, int64(2), w["inflight"].Int64(), "warning attributes %v", w)
	_, ok := w["seconds"]
	require.True(t, ok, "warning has no seconds: %v", w)
	p.Put(a)
	eventually(t, "a warning with one buffer in flight", func() bool {
		for _, w := range h.find("stalled pool shutdown") {
			if w["inflight"].Int64() == 1 {
				return true
			}
		}
		return false
	})
	require.False(t, isClosed(r.Done()), "Done closed with a buffer in flight")
	p.Put(b)
	require.NoError(t, r.Wait(context.Background()))
	got := h.find("stalled pool shutdown completed")
	require.Len(t, got, 1, "completion records %v", got)
	require.Equal(t, "eth9/rx7", got[0]["pool"].String(), "completion records %v", got)
	require.Equal(t, int64(0), mem.InUse(), "InUse")
}

// TestPutRacingDestroy checks the hand-off between Put and Destroy: a Put
// that lands while Destroy drains must still complete the release, without
// the retry ticker (ReleaseInterval is an hour).
func TestPutRacingDestroy(t *testing.T) {
	for i := range 300 {
		mem := NewMemory(0)
		p, err := New(Config{Mem: mem, PageBytes: 4096, BufSize: 2048, FragCount: 2, ReturnRingSize: 2,
			Name: fmt.Sprintf("race%d", i), ReleaseInterval: time.Hour, StallWarn: time.Hour})
		require.NoError(t, err)
		bufs := make([]*Buffer, 6)
		require.NoError(t, p.AllocBulk(bufs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for _, b := range bufs[g*3 : g*3+3] {
					p.Put(b)
				}
			}()
		}
		close(start)
		r := p.Destroy()
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = r.Wait(ctx)
		cancel()
		require.NoError(t, err, "iteration %d", i)
		require.Equal(t, int64(0), mem.InUse(), "iteration %d: InUse", i)
	}
}

// TestReleaseOnDone: the callback runs exactly once, after Done is closed and with nothing in
// flight, when the last buffer comes back; a release already complete refuses a callback.
func TestReleaseOnDone(t *testing.T) {
	idle, _ := newTestPool(t, 0, 16384, 2112, 7)
	r := idle.Destroy()
	require.False(t, r.OnDone(func() { t.Error("callback of a completed release ran") }), "OnDone accepted a callback after the release completed")

	p, err := New(Config{Mem: NewMemory(0), PageBytes: 16384, BufSize: 2112, FragCount: 7, Name: "eth0/rx2",
		ReleaseInterval: time.Hour, StallWarn: time.Hour})
	require.NoError(t, err)
	bufs := make([]*Buffer, 9)
	require.NoError(t, p.AllocBulk(bufs))
	r = p.Destroy()
	type call struct {
		closed   bool
		inflight int
	}
	calls := make(chan call, 2)
	require.True(t, r.OnDone(func() { calls <- call{isClosed(r.Done()), r.InFlight()} }), "OnDone refused a callback with 9 buffers in flight")
	for _, b := range bufs[:8] {
		p.Put(b)
	}
	select {
	case c := <-calls:
		t.Fatalf("callback ran with a buffer still out: %+v", c)
	default:
	}
	p.Put(bufs[8])
	require.NoError(t, r.Wait(context.Background()))
	c := <-calls
	require.True(t, c.closed, "callback saw Done closed %v, %d in flight; want closed, 0", c.closed, c.inflight)
	require.Equal(t, 0, c.inflight, "callback saw Done closed %v, %d in flight; want closed, 0", c.closed, c.inflight)
	require.False(t, r.OnDone(func() {}), "OnDone accepted a callback after the release completed")
	select {
	case c := <-calls:
		t.Fatalf("callback ran twice: %+v", c)
	default:
	}
}
