package genl_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlattr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitBusyPolls polls the server's busy-poll counts until cond holds, failing after 10 s.
func waitBusyPolls(t *testing.T, ts *testServer, what string, cond func(genl.BusyPollStats) bool) genl.BusyPollStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := ts.srv.BusyPolls()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: busy polls %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// withProcs runs the rest of the test with GOMAXPROCS n, which the server reads when it is made
// (its polling limit is half of it): the busy-poll tests hold on a machine of any size.
func withProcs(t *testing.T, n int) {
	t.Helper()
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// getRings sends a RINGS_GET of mana0 and checks the reply.
func getRings(t *testing.T, rc *rawConn, eth uint16, seq uint32) {
	t.Helper()
	rc.send(ringsGetByName(eth, seq, 0, "mana0"))
	msgs := rc.recv()
	require.Len(t, msgs, 1, "request %d: reply %+v", seq, msgs)
	require.Equal(t, eth, msgs[0].h.Type, "request %d: reply %+v", seq, msgs)
	require.Equal(t, seq, msgs[0].h.Seq, "request %d: reply %+v", seq, msgs)
}

// TestBusyPollRequestLoop: a client in a request loop finds the request loop polling. The
// window is long (1 s) so that a loaded machine still sends each request within it: every
// request after the first is then found by a poll, and all are answered in order.
func TestBusyPollRequestLoop(t *testing.T) {
	withProcs(t, 2)
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.BusyPoll = time.Second })
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool") // the connection's first request
	const n = 50
	for i := range n {
		getRings(t, rc, eth, uint32(100+i))
	}
	st := ts.srv.BusyPolls()
	assert.GreaterOrEqual(t, st.Hits, uint64(n), "busy polls %+v: want a hit for each of the %d requests after the first", st, n)
	assert.Equal(t, 1, st.Peak, "busy polls %+v: want a peak of 1 connection and a limit of at least 1", st)
	assert.GreaterOrEqual(t, st.Limit, 1, "busy polls %+v: want a peak of 1 connection and a limit of at least 1", st)
}

// TestBusyPollSparseRequests: a connection used now and then parks at once after its second
// answer: its first answer is followed by one poll (which finds nothing within 1 ms), and no
// request after that came within the window of the answer before it.
func TestBusyPollSparseRequests(t *testing.T) {
	withProcs(t, 2)
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.BusyPoll = time.Millisecond })
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	waitBusyPolls(t, ts, "the poll after the first answer", func(s genl.BusyPollStats) bool { return s.Misses == 1 })
	for i := range 3 {
		time.Sleep(20 * time.Millisecond)
		getRings(t, rc, eth, uint32(10+i))
	}
	time.Sleep(20 * time.Millisecond)
	st := ts.srv.BusyPolls()
	assert.Equal(t, uint64(0), st.Hits, "busy polls %+v: want the one miss after the first answer, nothing since", st)
	assert.Equal(t, uint64(1), st.Misses, "busy polls %+v: want the one miss after the first answer, nothing since", st)
	assert.Equal(t, uint64(0), st.Skipped, "busy polls %+v: want the one miss after the first answer, nothing since", st)
}

// TestBusyPollOff: BusyPoll 0 never polls.
func TestBusyPollOff(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	for i := range 20 {
		getRings(t, rc, eth, uint32(i))
	}
	st := ts.srv.BusyPolls()
	assert.Equal(t, genl.BusyPollStats{Limit: st.Limit}, st, "busy polls with BusyPoll 0")
}

// TestBusyPollOneProcessor: with one processor the server never polls, whatever its window: a
// poll would hold off the client it waits for, which needs that CPU to read the answer and send
// the next request. Every request of a loop is answered, and no poll is started, missed or
// skipped.
func TestBusyPollOneProcessor(t *testing.T) {
	withProcs(t, 1)
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.BusyPoll = time.Second })
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	for i := range 50 {
		getRings(t, rc, eth, uint32(100+i))
	}
	st := ts.srv.BusyPolls()
	assert.Equal(t, genl.BusyPollStats{}, st, "busy polls on one processor: %+v, want none and a limit of 0", st)
}

// TestBusyPollBound: however many clients are in request loops, no more connections poll at
// once than the limit; the others park and are answered all the same.
func TestBusyPollBound(t *testing.T) {
	withProcs(t, 2)
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.BusyPoll = time.Second })
	limit := ts.srv.BusyPolls().Limit
	clients := limit + 3
	var wg sync.WaitGroup
	for c := range clients {
		rc := dialRaw(t, ts.path)
		eth := manadFamilyID(t, rc, "ethtool")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				seq := uint32(c*1000 + i)
				rc.send(ringsGetByName(eth, seq, 0, "mana0"))
				if msgs := rc.recv(); len(msgs) != 1 || msgs[0].h.Type != eth || msgs[0].h.Seq != seq {
					t.Errorf("client %d request %d: reply %+v", c, i, msgs)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := ts.srv.BusyPolls()
	assert.Equal(t, limit, st.Peak, "busy polls %+v with %d clients in loops: want a peak of the limit %d and polls skipped", st, clients, limit)
	assert.NotEqual(t, uint64(0), st.Skipped, "busy polls %+v with %d clients in loops: want a peak of the limit %d and polls skipped", st, clients, limit)
}

// TestBusyPollHangUp: a client that hangs up while the loop polls for its next request ends
// the poll at once (the end of file is what it finds), not after the window; the connection
// is closed and released.
func TestBusyPollHangUp(t *testing.T) {
	withProcs(t, 2)
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.BusyPoll = time.Minute; c.Transport.MaxConns = 1 })
	rc := dialRaw(t, ts.path)
	manadFamilyID(t, rc, "ethtool")
	waitBusyPolls(t, ts, "the poll after the first answer", func(s genl.BusyPollStats) bool { return s.Peak == 1 })
	rc.c.Close()
	waitBusyPolls(t, ts, "the hang-up found by the poll", func(s genl.BusyPollStats) bool { return s.Hits == 1 })
	// The one connection slot is free again: a second client is served, not refused.
	// (Root is never refused: the check is with another uid.)
	requireRoot(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		other := dialUnprivileged(t, ts.path)
		other.send(ringsGetByName(0x10, 5, 0, "mana0")) // to nlctrl (0x10): any answer but EUSERS
		msgs := other.recv()
		if a := decodeAck(t, msgs[0]); a.errno != unix.EUSERS {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hung-up connection's slot is still taken")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBusyPollOversize: a datagram larger than MaxMessage found by a poll is refused with
// EMSGSIZE as one read after parking is, and the connection goes on.
func TestBusyPollOversize(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.BusyPoll = time.Second; c.Transport.MaxMessage = 512 })
	rc := dialRaw(t, ts.path)
	eth := manadFamilyID(t, rc, "ethtool")
	m := newMsg(eth, nlattr.FlagRequest, 12, unix.ETHTOOL_MSG_RINGS_GET, 1)
	m.Put(99, make([]byte, 1000))
	rc.send(m.done())
	msgs := rc.recv()
	a := decodeAck(t, msgs[0])
	assert.Equal(t, unix.EMSGSIZE, a.errno, "oversize request found by a poll: %+v", a)
	assert.Equal(t, uint32(12), msgs[0].h.Seq, "oversize request found by a poll: seq")
	getRings(t, rc, eth, 13)
	st := ts.srv.BusyPolls()
	assert.GreaterOrEqual(t, st.Hits, uint64(2), "busy polls %+v: want both requests found by polls", st)
}
