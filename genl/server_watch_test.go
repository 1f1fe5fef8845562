package genl_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestWaitsThenConnectionGoesOn: a request that waits on its context (which starts the
// watcher of the client's connection) and then completes is answered, and the connection serves
// the next requests and is still closed for idleness afterwards: the watcher gave the read side
// back to the request loop.
func TestRequestWaitsThenConnectionGoesOn(t *testing.T) {
	var waited atomic.Int32
	logs := &syncBuffer{}
	ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		c.Transport.IdleTimeout = 300 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		pre.be.Hook = func(ctx context.Context, op string) error {
			if op != "Rings" {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			waited.Add(1)
			return nil
		}
	})
	c := dialClient(t, ts.path)
	for i := range 3 {
		if _, err := c.Rings(ctxT(t), client.Interface{Name: "mana0"}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, err := c.PrivateFlags(ctxT(t), client.Interface{Name: "mana0"})
		require.NoError(t, err, "request %d after the wait", i)
	}
	n := waited.Load()
	assert.Equal(t, int32(3), n, "%d requests waited to the end, want 3", n)
	eventually(t, "manad closed the idle connection", func() bool {
		return strings.Contains(logs.String(), "closed idle connection")
	})
}
