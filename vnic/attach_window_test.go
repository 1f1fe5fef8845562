package vnic

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manad/manad/vnic/faultpoint"
)

// faultProbe is a log handler that, when a fault is injected, runs probe at that very moment:
// in attach, after half of the queues were started and before they are stopped again.
type faultProbe struct {
	slog.Handler
	*probeState // shared with the handlers WithAttrs derives (the port's logger has attributes)
}

type probeState struct {
	mu    sync.Mutex
	probe func()
}

func (h faultProbe) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "fault injected" {
		h.mu.Lock()
		f := h.probe
		h.mu.Unlock()
		if f != nil {
			f()
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h faultProbe) WithAttrs(as []slog.Attr) slog.Handler {
	return faultProbe{Handler: h.Handler.WithAttrs(as), probeState: h.probeState}
}

// TestAttachInProgressPassesNothing checks that the queues an attach already started pass no
// frame before the attach completes: mana configures the vport's RX steering and wakes the TX
// queues only once every queue exists, so an attach that fails half-way (here at the attach
// fault point, with queue 0 started) neither delivered nor transmitted anything. The old model
// let queue 0 take frames in that window, and a detached port answered a ping.
func TestAttachInProgressPassesNothing(t *testing.T) {
	h := faultProbe{Handler: slog.NewTextHandler(io.Discard, nil), probeState: new(probeState)}
	tp := newTestPort(t, func(c *Config, _ *Settings) { c.Logger = slog.New(h) })
	tp.open()
	frame := make([]byte, 60)
	copy(frame, []byte{0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00})
	if r := tp.Receive(0, frame); r != RxDelivered {
		t.Fatalf("running port: Receive = %v, want delivered", r)
	}
	var (
		rx      []RxResult
		tx      []bool
		started []int
	)
	h.mu.Lock()
	h.probe = func() {
		// The attach holds the configuration lock; the queues' own locks are free.
		n := 0
		for q := range tp.rx {
			tp.rx[q].mu.Lock()
			if tp.rx[q].q != nil {
				n++
			}
			tp.rx[q].mu.Unlock()
		}
		started = append(started, n)
		rx = append(rx, tp.Receive(0, frame))
		tx = append(tx, tp.Transmit(0, frame))
	}
	h.mu.Unlock()
	delivered, sent := tp.host.count(), tp.wire.count()
	tp.locked(func() {
		require.NoError(t, tp.SetFault(Fault{Point: faultpoint.Attach, Mode: FaultOnce}))
		require.Error(t, tp.SetMTU(4000), "SetMTU with an attach fault succeeded")
	})
	h.mu.Lock()
	h.probe = nil
	h.mu.Unlock()
	require.NotEmpty(t, rx, "the attach fault was never injected")
	for i := range rx {
		require.NotEqual(t, 0, started[i], "probe %d: no queue was started when the fault fired; the test proves nothing", i)
		if rx[i] != RxDropNotRunning || tx[i] {
			t.Errorf("probe %d (%d queues started): Receive = %v, Transmit = %v; want drop-not-running, false", i, started[i], rx[i], tx[i])
		}
	}
	if d, s := tp.host.count()-delivered, tp.wire.count()-sent; d != 0 || s != 0 {
		t.Errorf("during the failed attach: %d frames delivered, %d sent; want none", d, s)
	}
	tp.waitFor("the reset to restore the port", func(s State) bool { return s.Running })
	r := tp.Receive(0, frame)
	require.Equal(t, RxDelivered, r, "restored port: Receive = %v, want delivered", r)
}
