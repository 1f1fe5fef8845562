package genl_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is an Observer that counts what it is told.
type recorder struct {
	mu       sync.Mutex
	requests map[string]int // "family/cmd/errno"
	dropped  int
}

func (r *recorder) Request(family, cmd string, errno unix.Errno) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[fmt.Sprintf("%s/%s/%d", family, cmd, errno)]++
}

func (r *recorder) SubscriberDropped() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped++
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[key]
}

// TestObserverRequests: every request message is reported once with its family, command and
// errno, dumps included; names a client makes up come out as "unknown".
func TestObserverRequests(t *testing.T) {
	rec := &recorder{requests: map[string]int{}}
	ts := startServer(t, func(c *genl.ServerConfig) { c.Observer = rec })
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	if _, err := c.Rings(ctx, client.Interface{Name: "mana0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rings(ctx, client.Interface{Name: "nosuch0"}); err == nil {
		t.Fatal("rings of a missing device succeeded")
	}
	_, err := c.AllRings(ctx)
	require.NoError(t, err)
	rc := dialRaw(t, ts.path)
	rc.send(newMsg(0x7ff0, nlattr.FlagRequest|nlattr.FlagAck, 1, 1, 1).done()) // no such family
	rc.recv()
	rc.send(newMsg(0x13, nlattr.FlagRequest|nlattr.FlagAck, 2, 200, 1).done()) // no such ethtool command
	rc.recv()
	rc.send([]byte{1, 2, 3}) // shorter than a header
	rc.recv()
	rc.send(make([]byte, 70<<10)) // over MaxMessage (64 KiB)
	rc.recv()
	for key, want := range map[string]int{
		"ethtool/rings-get/0":                              2, // the do and the dump
		fmt.Sprintf("ethtool/rings-get/%d", unix.ENODEV):   1,
		fmt.Sprintf("unknown/unknown/%d", unix.ENOENT):     1,
		fmt.Sprintf("ethtool/unknown/%d", unix.EOPNOTSUPP): 1,
		fmt.Sprintf("unknown/unknown/%d", unix.EINVAL):     1,
		fmt.Sprintf("unknown/unknown/%d", unix.EMSGSIZE):   1,
	} {
		got := rec.count(key)
		assert.Equal(t, want, got, "%s: %d, want %d (all: %v)", key, got, want, rec.requests)
	}
	assert.NotEqual(t, 0, rec.count("nlctrl/getfamily/0"), "the client's family lookups were not reported: %v", rec.requests)
}

// TestObserverSubscriberDropped: a subscriber that does not read is reported when dropped.
func TestObserverSubscriberDropped(t *testing.T) {
	rec := &recorder{requests: map[string]int{}}
	ts := startServer(t, func(c *genl.ServerConfig) {
		c.Observer = rec
		c.Transport.SendQueue = 1
		c.Transport.WriteTimeout = 50 * time.Millisecond
	})
	mf := manadFamilyID(t, dialRaw(t, ts.path), wire.FamilyName)
	monitor := groupID(t, ts.path, "ethtool", "monitor")
	stalled := dialRaw(t, ts.path)
	a := joinRaw(t, stalled, mf, monitor, wire.CmdGroupJoin)
	require.Equal(t, unix.Errno(0), a.errno, "%v", a)
	// Never read: the socket buffer fills, the writer blocks, the one-slot queue overflows.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ts.srv.NotifyChannels(ts.mana0.Dev, genl.Channels{CombinedMax: 64, Combined: 1})
		rec.mu.Lock()
		n := rec.dropped
		rec.mu.Unlock()
		if n == 1 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("dropped subscribers reported: %d, want 1", n)
		}
	}
}

// TestClientResolvesNetdevOnce: the client resolves the netdev family with its first netdev
// request and keeps the id: later requests are one round trip each.
func TestClientResolvesNetdevOnce(t *testing.T) {
	rec := &recorder{requests: map[string]int{}}
	ts := startServer(t, func(c *genl.ServerConfig) { c.Observer = rec })
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	// The server records a request after answering it, before reading the next one from the
	// connection: a request of another family makes the counts so far final.
	sync := func() {
		t.Helper()
		_, err := c.Ports(ctx)
		require.NoError(t, err)
	}
	sync()
	dialed := rec.count("nlctrl/getfamily/0") // the ethtool and manad families
	for range 3 {
		if _, err := c.NetdevDevs(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := c.Queues(ctx, 0)
		require.NoError(t, err)
	}
	sync()
	if got := rec.count("nlctrl/getfamily/0") - dialed; got != 1 {
		t.Errorf("%d GETFAMILY requests for 6 netdev requests, want 1", got)
	}
	got := rec.count(wire.NetdevFamilyName+"/dev-get/0") + rec.count(wire.NetdevFamilyName+"/queue-get/0")
	assert.Equal(t, 6, got, "%d netdev requests answered, want 6", got)
}
