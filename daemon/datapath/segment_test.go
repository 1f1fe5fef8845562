package datapath

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a segment member that records what the segment gives it.
type recorder struct {
	name   string
	mu     sync.Mutex
	frames [][]byte
	inline []bool
}

func (r *recorder) input(f []byte, inline bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, append([]byte(nil), f...))
	r.inline = append(r.inline, inline)
}

func (r *recorder) label() string { return r.name }

// take returns and forgets the recorded frames.
func (r *recorder) take() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.frames
	r.frames, r.inline = nil, nil
	return f
}

// fakeClock drives a segment's clock by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// testSegment returns a segment on a fake clock with members named after names.
func testSegment(names ...string) (*Segment, *fakeClock, map[string]*recorder, map[string]*port) {
	s := NewSegment("test")
	clk := &fakeClock{}
	clk.ns.Store(int64(time.Hour)) // not at 0, so "never seen" and "seen at start" differ
	s.now = clk.ns.Load
	recs := map[string]*recorder{}
	ports := map[string]*port{}
	for _, n := range names {
		recs[n] = &recorder{name: n}
		ports[n] = s.join(recs[n])
	}
	return s, clk, recs, ports
}

func mac(last byte) net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0, 0, last} }

var (
	broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ipv4mcast = net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}
)

// frame builds a 60-byte frame from src to dst whose payload byte 14 is tag.
func frame(dst, src net.HardwareAddr, tag byte) []byte {
	f := make([]byte, 60)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	f[12], f[13] = 0x88, 0xb5
	f[14] = tag
	return f
}

// receivers lists, sorted, the members that received exactly the frame tagged tag (and
// fails if a member received anything else).
func receivers(t *testing.T, recs map[string]*recorder, tag byte) []string {
	t.Helper()
	var got []string
	for n, r := range recs {
		fs := r.take()
		for _, f := range fs {
			assert.Equal(t, tag, f[14], "%s received frame %d, want only %d", n, f[14], tag)
		}
		switch len(fs) {
		case 0:
		case 1:
			got = append(got, n)
		default:
			t.Errorf("%s received frame %d %d times", n, tag, len(fs))
		}
	}
	slices.Sort(got)
	return got
}

func TestSegmentSwitching(t *testing.T) {
	s, _, recs, ports := testSegment("a", "b", "c")
	A, B, C, X := mac(0xa), mac(0xb), mac(0xc), mac(0x99)
	steps := []struct {
		what     string
		from     string
		dst, src net.HardwareAddr
		want     []string
	}{
		{"unknown unicast floods, not back to the sender", "a", X, A, []string{"b", "c"}},
		{"learned destination: unicast to its port only", "b", A, B, []string{"a"}},
		{"both directions learned", "a", B, A, []string{"b"}},
		{"broadcast floods although every source is known", "c", broadcast, C, []string{"a", "b"}},
		{"multicast floods", "a", ipv4mcast, A, []string{"b", "c"}},
		{"destination behind the sending port: dropped, never reflected", "a", A, A, nil},
		{"another station behind a: dropped at a", "a", A, mac(0x0d), nil},
		{"station A moves to c: learned there", "c", B, A, []string{"b"}},
		{"frames to A now go to c", "b", A, B, []string{"c"}},
		{"a multicast source is not learned", "b", mac(0x42), ipv4mcast, []string{"a", "c"}},
		{"multicast destinations flood", "a", ipv4mcast, A, []string{"b", "c"}},
	}
	for i, st := range steps {
		tag := byte(i + 1)
		s.forward(ports[st.from], frame(st.dst, st.src, tag), true)
		got := receivers(t, recs, tag)
		assert.True(t, slices.Equal(got, st.want), "step %d (%s): delivered to %v, want %v", i, st.what, got, st.want)
	}
	// Frames shorter than an Ethernet header go nowhere and teach nothing.
	s.forward(ports["b"], frame(broadcast, mac(0x77), 0)[:13], true)
	assert.Nil(t, receivers(t, recs, 0), "runt delivered to")
	fdb := s.FDB()
	// A moved back to a with the last step.
	want := []string{"02:00:00:00:00:0a@a", "02:00:00:00:00:0b@b", "02:00:00:00:00:0c@c", "02:00:00:00:00:0d@a"}
	var got []string
	for _, e := range fdb {
		got = append(got, e.MAC.String()+"@"+e.Port)
	}
	assert.True(t, slices.Equal(got, want), "FDB %v, want %v", got, want)
}

// TestSegmentInline checks which deliveries may be processed in the sender's goroutine: a frame
// to a learned address, and a flood to at most floodInlineMax members, as the sender allows; a
// larger flood never (its copies wait in the members' inputs, for their own goroutines).
func TestSegmentInline(t *testing.T) {
	names := []string{"a", "b"}
	for i := range floodInlineMax {
		names = append(names, fmt.Sprint("m", i))
	}
	s, _, recs, ports := testSegment(names...) // a and floodInlineMax+1 others
	A, B := mac(0xa), mac(0xb)
	s.forward(ports["b"], frame(broadcast, B, 0), true) // learn B on b
	all := func(v bool) map[string][]bool {
		m := map[string][]bool{}
		for _, n := range names[1:] {
			m[n] = []bool{v}
		}
		return m
	}
	for _, tc := range []struct {
		what   string
		leave  bool // one member leaves first: floodInlineMax destinations
		dst    net.HardwareAddr
		inline bool
		want   map[string][]bool
	}{
		{"unicast, sender allows inline", false, B, true, map[string][]bool{"b": {true}}},
		{"unicast, sender forbids inline", false, B, false, map[string][]bool{"b": {false}}},
		{"large broadcast, sender allows inline", false, broadcast, true, all(false)},
		{"large multicast, sender forbids inline", false, ipv4mcast, false, all(false)},
		{"large unknown unicast, sender allows inline", false, mac(0x99), true, all(false)},
		{"small broadcast, sender allows inline", true, broadcast, true, all(true)},
		{"small unknown unicast, sender forbids inline", true, mac(0x99), false, all(false)},
	} {
		if tc.leave && recs["m0"] != nil {
			s.leave(ports["m0"])
			delete(recs, "m0")
		}
		for _, r := range recs {
			r.take()
		}
		want := tc.want
		if tc.leave {
			delete(want, "m0")
		}
		s.forward(ports["a"], frame(tc.dst, A, 1), tc.inline)
		for n, r := range recs {
			r.mu.Lock()
			got := slices.Clone(r.inline)
			r.mu.Unlock()
			assert.True(t, slices.Equal(got, want[n]), "%s: %s saw inline %v, want %v", tc.what, n, got, want[n])
		}
	}
}

// slotCounter is a member that records how many of the segment's poll slots are taken while a
// flood delivers to it.
type slotCounter struct {
	s       *Segment
	maxHeld atomic.Int32
	n       atomic.Int32
}

func (c *slotCounter) input([]byte, bool) {
	c.n.Add(1)
	held := int32(len(c.s.slots))
	for {
		m := c.maxHeld.Load()
		if held <= m || c.maxHeld.CompareAndSwap(m, held) {
			return
		}
	}
}

func (c *slotCounter) label() string { return "counter" }

// TestFloodTakesASlot floods from many senders at once: each flood of a sender holds one of the
// segment's poll slots while it replicates, so no more floods run at once than there are slots,
// and every flood still reaches every other member. A frame from an RX queue's processing
// (inline false) floods without taking one. A stopped sender waiting for a slot gives up.
func TestFloodTakesASlot(t *testing.T) {
	s := newSegment("slots", make(pollSlots, 2), newPollers())
	c := &slotCounter{s: s}
	s.join(c)
	const senders, floods = 8, 200
	var wg sync.WaitGroup
	for i := range senders {
		src := s.join(&recorder{name: fmt.Sprint(i)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range floods {
				s.forward(src, frame(broadcast, mac(byte(i+1)), 0), true)
			}
		}()
	}
	wg.Wait()
	if n := c.n.Load(); n != senders*floods {
		t.Errorf("counter received %d floods, want %d", n, senders*floods)
	}
	m := c.maxHeld.Load()
	assert.GreaterOrEqual(t, m, int32(1), "at most %d slots held during a flood, want 1..2", m)
	assert.LessOrEqual(t, m, int32(2), "at most %d slots held during a flood, want 1..2", m)

	// Every slot taken (two RX polls, say): a flood from RX processing still goes out, a
	// sender's waits, and gives up when its port stops.
	s.slots <- struct{}{}
	s.slots <- struct{}{}
	src := s.join(&recorder{name: "x"})
	before := c.n.Load()
	s.forwardAt(src, frame(broadcast, mac(0x33), 0), false, s.now(), nil)
	assert.Equal(t, before+1, c.n.Load(), "a flood from an RX queue's processing waited for a slot")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		s.forwardAt(src, frame(broadcast, mac(0x33), 0), true, s.now(), stop)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("a sender flooded without a slot")
	case <-time.After(50 * time.Millisecond):
	}
	close(stop)
	<-done
	assert.Equal(t, before+1, c.n.Load(), "a stopped sender's flood was delivered")
}

func TestSegmentAgeing(t *testing.T) {
	s, clk, recs, ports := testSegment("a", "b", "c")
	s.SetAgeingTime(300 * time.Second)
	A, B := mac(0xa), mac(0xb)
	send := func(from string, dst, src net.HardwareAddr, tag byte) []string {
		s.forward(ports[from], frame(dst, src, tag), true)
		return receivers(t, recs, tag)
	}
	send("a", broadcast, A, 1) // learn A on a
	// Traffic from A refreshes it: 10 minutes in steps of 100 s.
	for i := range 6 {
		clk.advance(100 * time.Second)
		send("a", broadcast, A, 2)
		got := send("b", A, B, 3)
		require.True(t, slices.Equal(got, []string{"a"}), "after %d s with traffic: frame to A went to %v, want [a]", (i+1)*100, got)
	}
	// Silence longer than the ageing time: A is unknown again, frames to it flood.
	clk.advance(301 * time.Second)
	if got := send("b", A, B, 4); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("after ageing: frame to A went to %v, want flooded to [a c]", got)
	}
	for _, e := range s.FDB() {
		assert.NotEqual(t, A.String(), e.MAC.String(), "aged entry still listed: %+v", e)
	}
	// Seen again (on another port): learned afresh.
	send("c", broadcast, A, 5)
	if got := send("b", A, B, 6); !slices.Equal(got, []string{"c"}) {
		t.Errorf("relearned A: frame went to %v, want [c]", got)
	}
	// Ageing off: entries last forever.
	s.SetAgeingTime(0)
	clk.advance(24 * time.Hour)
	got := send("b", A, B, 7)
	assert.True(t, slices.Equal(got, []string{"c"}), "without ageing: frame to A went to %v, want [c]", got)
}

func TestSegmentTableLimit(t *testing.T) {
	s, clk, recs, ports := testSegment("a", "b", "c")
	s.maxEntries = 3
	s.SetAgeingTime(10 * time.Second)
	for i := byte(1); i <= 3; i++ {
		s.forward(ports["a"], frame(broadcast, mac(i), 0), true)
		clk.advance(time.Second)
	}
	// Full: a fourth address is not learned, so frames to it keep flooding.
	s.forward(ports["a"], frame(broadcast, mac(4), 0), true)
	recs["b"].take()
	recs["c"].take()
	s.forward(ports["b"], frame(mac(4), mac(0xb), 9), true)
	if got := receivers(t, recs, 9); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("frame to the unlearned address went to %v, want flooded to [a c]", got)
	}
	n := len(s.FDB())
	require.Equal(t, 3, n, "FDB has %d entries, want the limit 3", n)
	// Once the oldest entries expire, new addresses are learned again.
	clk.advance(9 * time.Second) // mac(1) was seen 12 s ago, mac(2) 11 s ago, mac(3) 10 s ago
	s.forward(ports["a"], frame(broadcast, mac(5), 0), true)
	var got []string
	for _, e := range s.FDB() {
		got = append(got, e.MAC.String())
	}
	if !slices.Contains(got, mac(5).String()) || slices.Contains(got, mac(1).String()) {
		t.Errorf("after expiry FDB is %v: want mac 5 learned and mac 1 gone", got)
	}
}

func TestSegmentLeaveForgetsPort(t *testing.T) {
	s, _, recs, ports := testSegment("a", "b", "c")
	A := mac(0xa)
	s.forward(ports["a"], frame(broadcast, A, 1), true)
	receivers(t, recs, 1)
	s.leave(ports["a"])
	delete(recs, "a")
	s.forward(ports["b"], frame(A, mac(0xb), 2), true)
	got := receivers(t, recs, 2)
	assert.True(t, slices.Equal(got, []string{"c"}), "frame to an address of a departed port went to %v, want flooded to [c]", got)
	assert.Equal(t, 2, s.Ports(), "Ports() = %d, want 2", s.Ports())
}

// countingMember counts frames without keeping them, for the allocation check.
type countingMember struct{ n atomic.Int64 }

func (c *countingMember) input([]byte, bool) { c.n.Add(1) }
func (c *countingMember) label() string      { return "count" }

// TestSegmentForwardDoesNotAllocate checks the per-frame promise: forwarding known unicast,
// refreshing a source, and flooding allocate nothing.
func TestSegmentForwardDoesNotAllocate(t *testing.T) {
	s := NewSegment("alloc")
	a, b := &countingMember{}, &countingMember{}
	pa, pb := s.join(a), s.join(b)
	s.forward(pa, frame(broadcast, mac(1), 0), true)
	s.forward(pb, frame(broadcast, mac(2), 0), true)
	uni, flood := frame(mac(2), mac(1), 0), frame(broadcast, mac(1), 0)
	if n := testing.AllocsPerRun(1000, func() {
		s.forward(pa, uni, true)
		s.forward(pa, flood, true)
	}); n != 0 {
		t.Errorf("forward allocates %v times per frame pair", n)
	}
	n := b.n.Load()
	assert.GreaterOrEqual(t, n, int64(2000), "member b received %d frames, want at least 2000", n)
}

// TestSegmentConcurrent forwards, learns, joins and leaves from many goroutines at once (run with
// -race): the table stays consistent and every frame to a fixed, known address arrives.
func TestSegmentConcurrent(t *testing.T) {
	s := NewSegment("race")
	sink := &recorder{name: "sink"}
	ps := s.join(sink)
	dst := mac(0xee)
	s.forward(ps, frame(broadcast, dst, 0), true) // learn the sink's address
	sink.take()
	var wg sync.WaitGroup
	const senders, frames = 4, 500
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &countingMember{}
			p := s.join(m)
			defer s.leave(p)
			for i := range frames {
				src := net.HardwareAddr{0x06, byte(g), 0, 0, byte(i >> 8), byte(i)} // never the sink's address
				s.forward(p, frame(dst, src, 1), true)
				if i%50 == 0 {
					s.FDB()
				}
			}
		}()
	}
	wg.Wait()
	got := len(sink.take())
	assert.Equal(t, senders*frames, got, "sink received %d frames, want %d", got, senders*frames)
	assert.Equal(t, 1, s.Ports(), "Ports() = %d after the senders left, want 1", s.Ports())
	if fdb := s.FDB(); len(fdb) != 1 || fdb[0].Port != "sink" {
		t.Errorf("FDB after the senders left: %d entries (%v), want only the sink's", len(fdb), fmt.Sprint(fdb[:min(len(fdb), 3)]))
	}
}

func TestSegments(t *testing.T) {
	ss := NewSegments()
	a := ss.Get("lan0")
	assert.Same(t, a, ss.Get("lan0"), "Get returned a new segment for the same name")
	b := ss.Get("lan1")
	p := b.join(&countingMember{})
	if l := ss.List(); len(l) != 2 || l[0] != a || l[1] != b {
		t.Errorf("List = %v", l)
	}
	ss.Prune()
	if l := ss.List(); len(l) != 1 || l[0] != b {
		t.Errorf("after Prune: %v, want only the segment with a port", l)
	}
	b.leave(p)
}
