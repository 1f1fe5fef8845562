package scenarios

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scenario 3's numbers, after seed 000: more than 16 TCP streams, here 32, over 8 queues.
const (
	manyStreams   = 32
	manyQueues    = 8
	perStreamSize = 3 << 20 // 96 MiB in all: long enough to flip twice mid-transfer under -race
)

// stream is one checksummed TCP stream of streamSet; its fields are written by its own sender and
// receiver goroutines and read after streamSet.wait.
type stream struct {
	sent, received       int64
	sentSum, receivedSum [32]byte
	sendErr, recvErr     error
	progress             atomic.Int64 // received, readable while the stream runs
}

// streamSet is n TCP streams from one namespace to another that are all connected before any of
// them sends (harness.StartTransfer starts sending at once, and connecting 32 of them one after
// the other takes seconds under -race, so the first ones would be done before the last began).
// Each stream sends an 8-byte stream number, then size pseudo-random bytes, then half-closes; the
// receiver hashes what follows the number until EOF.
type streamSet struct {
	streams  []stream
	size     int64
	arrived  atomic.Int64 // payload bytes received so far, all streams
	l        net.Listener
	conns    []net.Conn
	gate     chan struct{} // closed by start
	hold     int64         // a sender that has sent this many bytes waits for release
	release  chan struct{} // closed by resume
	quit     chan struct{} // closed by abort
	wg       sync.WaitGroup
	done     chan struct{}
	closeAll sync.Once
}

// newStreamSet listens on addr in dst, connects n streams from src and waits for start. Each
// sender stops after hold bytes until resume (hold ≥ size: never).
func newStreamSet(src, dst, addr string, n int, size, hold int64) (*streamSet, error) {
	s := &streamSet{streams: make([]stream, n), size: size, hold: hold, gate: make(chan struct{}),
		release: make(chan struct{}),
		quit:    make(chan struct{}), done: make(chan struct{})}
	var err error
	if s.l, err = harness.Listen(dst, "tcp", addr); err != nil {
		return nil, err
	}
	s.wg.Add(2 * n)
	go s.accept(n)
	err = harness.InNetNS(src, func() error {
		for i := 0; i < n; i++ {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return fmt.Errorf("stream %d: %w", i, err)
			}
			s.conns = append(s.conns, c)
		}
		return nil
	})
	for i := range s.conns {
		go s.send(i)
	}
	for range n - len(s.conns) { // streams that never connected
		s.wg.Done()
	}
	go func() { s.wg.Wait(); close(s.done) }()
	if err != nil {
		s.abort()
		return nil, err
	}
	return s, nil
}

func (s *streamSet) accept(n int) {
	for i := 0; i < n; i++ {
		c, err := s.l.Accept()
		if err != nil {
			for ; i < n; i++ {
				s.wg.Done()
			}
			return
		}
		go s.receive(c)
	}
}

func (s *streamSet) receive(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return // a stream that never says which it is shows up as nothing received
	}
	id := binary.BigEndian.Uint64(hdr[:])
	if id >= uint64(len(s.streams)) {
		return
	}
	st := &s.streams[id]
	h := sha256.New()
	buf := make([]byte, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := c.Read(buf)
		h.Write(buf[:n])
		st.received += int64(n)
		st.progress.Add(int64(n))
		s.arrived.Add(int64(n))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			st.recvErr = err
			break
		}
	}
	copy(st.receivedSum[:], h.Sum(nil))
}

func (s *streamSet) send(i int) {
	defer s.wg.Done()
	c := s.conns[i]
	defer c.Close()
	st := &s.streams[i]
	select {
	case <-s.gate:
	case <-s.quit:
		return
	}
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(i))
	c.SetWriteDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(hdr[:]); err != nil {
		st.sendErr = err
		return
	}
	rng := rand.New(rand.NewPCG(uint64(i), 0x9e3779b97f4a7c15))
	h := sha256.New()
	buf := make([]byte, 64<<10)
	for st.sent < s.size {
		if st.sent >= s.hold {
			select {
			case <-s.release:
			case <-s.quit:
				st.sendErr = errors.New("aborted")
				return
			}
		}
		limit := s.size
		if st.sent < s.hold {
			limit = s.hold
		}
		chunk := buf[:min(int64(len(buf)), limit-st.sent)]
		for j := 0; j < len(buf); j += 8 { // len(buf) is a multiple of 8
			binary.LittleEndian.PutUint64(buf[j:], rng.Uint64())
		}
		c.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, err := c.Write(chunk); err != nil {
			st.sendErr = err
			break
		}
		h.Write(chunk)
		st.sent += int64(len(chunk))
	}
	copy(st.sentSum[:], h.Sum(nil))
	if st.sendErr == nil {
		st.sendErr = c.(*net.TCPConn).CloseWrite()
	}
}

// start lets every stream send.
func (s *streamSet) start() { close(s.gate) }

// resume lets the senders held at hold bytes go on.
func (s *streamSet) resume() { close(s.release) }

// wait waits for every stream to end on both sides.
func (s *streamSet) wait(timeout time.Duration) error {
	select {
	case <-s.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("streams not done after %v (%d of %d bytes arrived)", timeout, s.arrived.Load(), s.size*int64(len(s.streams)))
	}
}

// midway counts the streams that have received some but not all of their bytes.
func (s *streamSet) midway() int {
	n := 0
	for i := range s.streams {
		if p := s.streams[i].progress.Load(); p > 0 && p < s.size {
			n++
		}
	}
	return n
}

// abort closes every socket, which ends every goroutine, and waits for them.
func (s *streamSet) abort() {
	s.closeAll.Do(func() {
		close(s.quit)
		s.l.Close()
		for _, c := range s.conns {
			c.Close()
		}
	})
	<-s.done
}

// check reports a stream that failed or arrived different from what was sent; call after wait.
func (st *stream) check(size int64) error {
	switch {
	case st.sendErr != nil:
		return fmt.Errorf("send: %w", st.sendErr)
	case st.recvErr != nil:
		return fmt.Errorf("receive: %w", st.recvErr)
	case st.sent != size || st.received != size || st.sentSum != st.receivedSum:
		return fmt.Errorf("sent %d of %d bytes (sha256 %x), received %d (sha256 %x)", st.sent, size, st.sentSum[:6], st.received, st.receivedSum[:6])
	}
	return nil
}

// TestManyStreams is scenario 3, from seed 000 (000_aa76980ead4caea0: "[PATCH net-next,v4] net:
// mana: Force full-page RX buffers via ethtool private flag", whose regression shows with more
// than 16 TCP streams on 4K pages, and whose flag is meant to be flipped on a live port). The
// ports model that thread's kernel: 4K pages with the rule before the headroom fix
// (rule = "pre-headroom"), where MTU 1500 buffers are page-pool fragments, two per page; the
// flag makes them one per page.
//
// 32 TCP streams of 3 MiB, all connected before any sends, run from A to B across 8 queues. When
// a third of the bytes have arrived, full-page-rx is turned on on B (the receiving port) with
// `manactl set-priv-flags`, at half it is turned off again; no stream sends its last third
// before both flips are done. The test checks that
//   - both flips change the live layout (2 buffers per page → 1 → 2);
//   - every stream completes with exactly the bytes that were sent (sha256 of each stream);
//   - B's per-queue rx_<q>_packets show the streams spread over several queues (at least 4 of
//     the 8 counted packets; the exact distribution depends on the ephemeral ports and is only
//     logged).
func TestManyStreams(t *testing.T) {
	nsA, nsB := harness.Name("s3a", ""), harness.Name("s3b", "")
	portA, portB := harness.Name("ma", "3"), harness.Name("mb", "3")
	ipA, ipB := "10.208.0.1", "10.208.0.2"
	cfg := []string{`page_size = "4K"`, `rule = "pre-headroom"`, fmt.Sprintf("queues = %d", manyQueues), "rx_ring = 256"}
	d := harness.Start(t, "", "", portTOML(portA, nsA, "s", cfg...)+portTOML(portB, nsB, "s", cfg...), nsA, nsB)
	for _, x := range []struct{ ns, port, ip string }{{nsA, portA, ipA}, {nsB, portB, ipB}} {
		harness.Run(t, x.ns, "ip", "addr", "add", x.ip+"/24", "dev", x.port)
		harness.Run(t, x.ns, "ip", "link", "set", x.port, "up")
	}
	harness.Run(t, nsA, "ping", "-c", "2", "-i", "0.2", "-W", "2", ipB)
	cA, cB := d.Client(nsA), d.Client(nsB)
	if l := portInfo(t, cB, portB).Layout; l.Single || l.FragCount != 2 {
		t.Fatalf("%s starts with layout %+v, want 2 fragments per 4K page (pre-headroom rule)", portB, l)
	}

	// The senders stop at two thirds of their bytes until both flips are done, so that every
	// flip comes mid-transfer for every stream however slow the machine is; the flips are made
	// when a third and a half of all the bytes have arrived, while the streams still flow.
	ss, err := newStreamSet(nsA, nsB, ipB+":5400", manyStreams, perStreamSize, perStreamSize*2/3)
	require.NoError(t, err)
	t.Cleanup(ss.abort) // runs before manad stops; a no-op wait once the streams are done
	rxB0, txA0 := stats(t, cB, portB), stats(t, cA, portA)
	start := time.Now()
	ss.start()

	const all = manyStreams * perStreamSize
	for i, on := range []bool{true, false} {
		at := int64(all) * int64(i+2) / 6 // 1/3, 1/2
		deadline := time.Now().Add(2 * time.Minute)
		for ss.arrived.Load() < at {
			if time.Now().After(deadline) {
				t.Fatalf("B received only %d of %d bytes in 2 minutes", ss.arrived.Load(), all)
			}
			time.Sleep(5 * time.Millisecond)
		}
		got, midway := ss.arrived.Load(), ss.midway()
		flipStart := time.Now()
		manactlRun(t, d, nsB, "set-priv-flags", portB, "full-page-rx", map[bool]string{true: "on", false: "off"}[on])
		flipTook, flipArrived := time.Since(flipStart), ss.arrived.Load()
		l := portInfo(t, cB, portB).Layout
		if l.Single != on || (on && l.FragCount != 1) || (!on && l.FragCount != 2) {
			t.Errorf("after full-page-rx %v: layout %+v", on, l)
		}
		t.Logf("full-page-rx %v on %s at %d of %d bytes (%v in), %d of %d streams midway; manactl took %v, %d bytes arrived meanwhile",
			on, portB, got, all, time.Since(start).Round(time.Millisecond), midway, manyStreams,
			flipTook.Round(time.Millisecond), flipArrived-got)
	}
	ss.resume()

	require.NoError(t, ss.wait(3*time.Minute))
	elapsed := time.Since(start)
	failed := 0
	for i := range ss.streams {
		if err := ss.streams[i].check(perStreamSize); err != nil {
			t.Errorf("stream %d: %v", i, err)
			failed++
		}
	}

	rxQ := deltas(perQueue(rxB0, "rx", "packets"), perQueue(stats(t, cB, portB), "rx", "packets"))
	txQ := deltas(perQueue(txA0, "tx", "packets"), perQueue(stats(t, cA, portA), "tx", "packets"))
	t.Logf("%d/%d streams intact, %d MiB in %v (%.0f Mbit/s); B rx packets per queue %v; A tx packets per queue %v",
		manyStreams-failed, manyStreams, all>>20, elapsed.Round(time.Millisecond),
		float64(all)*8/elapsed.Seconds()/1e6, rxQ, txQ)
	assert.Len(t, rxQ, manyQueues, "B reports rx counters for %d queues, want %d", len(rxQ), manyQueues)
	n := nonZero(rxQ)
	assert.GreaterOrEqual(t, n, 4, "32 streams reached only %d of B's %d RX queues: %v", n, manyQueues, rxQ)
}
