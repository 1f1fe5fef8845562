package datapath

import (
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manad/manad/daemon/offload"
)

// Defaults of a segment's forwarding database, as the Linux bridge has them.
const (
	// DefaultAgeingTime is how long a learned address stays without traffic from it
	// (BR_DEFAULT_AGEING_TIME, `ip link … type bridge ageing_time 30000`).
	DefaultAgeingTime = 300 * time.Second
	// DefaultMaxEntries bounds the table, so a flood of random source addresses cannot grow it
	// without limit (the bridge's fdb_max_learned); unknown destinations are then flooded.
	DefaultMaxEntries = 4096
)

// refreshEvery is how stale an entry's timestamp may get before a frame from its address
// rewrites it: ageing is measured in minutes, so the per-frame path needs no store most of the
// time, and the entry's cache line stays shared between the cores forwarding to it.
const refreshEvery = int64(time.Second)

// floodInlineMax is the most destinations a flood may have and still be delivered as unicast
// frames are (inline in the sender's goroutine where the queue is idle); larger floods go
// through the members' inputs and the segment's poll slots.
const floodInlineMax = 4

// member is what a segment forwards frames to: a port's attachment (an *Endpoint), or a
// recording member in the segment's unit tests.
type member interface {
	// input takes a frame the segment forwards to the member. frame is only valid during the
	// call. inline says the caller may process it to completion in its own goroutine.
	input(frame []byte, inline bool)
	// label names the member in FDB listings.
	label() string
}

// port is a member's place on a segment: the identity its learned addresses point to.
type port struct {
	m member
}

// fdbEntry is one learned address. Its port and timestamp change in place (a station that
// moves, a refresh), so only new addresses copy the table.
type fdbEntry struct {
	port atomic.Pointer[port]
	seen atomic.Int64 // segment clock, ns
}

type fdbTable map[uint64]*fdbEntry

// Segment is a wire segment: a learning L2 switch that the ports attached to it share, as if
// their cables met in one switch. It learns source addresses per port, forwards unicast frames to
// the port that has the destination address, floods broadcast, multicast and unknown unicast to
// every other port, and never sends a frame back to the port it came from. Learned addresses age
// out after the ageing time without traffic from them.
//
// The per-frame path takes no lock: the table and the member list are immutable snapshots
// published through atomic pointers, and only learning a new address, attaching or detaching a
// port (rare events) copy them under the segment's mutex. Ageing is lazy (an expired entry counts
// as unknown, and is dropped when the table is next copied), so an idle segment runs no timer.
type Segment struct {
	name       string
	epoch      time.Time
	now        func() int64 // ns on the segment clock; replaced by tests
	ageing     atomic.Int64 // ns; <= 0: never
	maxEntries int

	members atomic.Pointer[[]*port]
	fdb     atomic.Pointer[fdbTable]
	// fullUntil is the segment clock before which a full table cannot free an entry by ageing,
	// so learning does not retry (and copy the table) for every frame from a new address.
	fullUntil atomic.Int64

	// Storm control: at most stormPPS flooded frames (broadcast, multicast, unknown unicast)
	// per second of the segment clock; <= 0: no limit. storm is the window stormAllows counts
	// in: the second of the segment clock (high 32 bits) and the floods counted in it (low 32),
	// one word so that a new second and its count change together.
	stormPPS atomic.Int64
	storm    atomic.Uint64
	stats    segmentStats
	// floodNext picks the member each flood starts at.
	floodNext atomic.Uint64

	mu sync.Mutex // serialises the writers of members and fdb

	slots pollSlots // bound the goroutines replicating floods and draining inputs at once
	// pollers bounds the busy-polling readers of the segment's ports (Segments share theirs).
	pollers *Pollers

	gro groPending // RX queues with a coalesced run waiting for its sender's batch to end

	captures captureSet // capture.go
}

// segmentStats are a segment's counters, atomic so that every forwarding goroutine updates them.
type segmentStats struct {
	floods, stormDrops atomic.Uint64
}

// SegmentStats are a segment's counters since it was created.
type SegmentStats struct {
	Floods     uint64 // frames flooded (broadcast, multicast, unknown unicast) to every other member
	StormDrops uint64 // frames not flooded because the storm control limit was reached
}

// Stats returns the segment's counters.
func (s *Segment) Stats() SegmentStats {
	return SegmentStats{Floods: s.stats.floods.Load(), StormDrops: s.stats.stormDrops.Load()}
}

// SetStormLimit sets how many frames per second the segment floods at most; the others are
// dropped and counted (SegmentStats.StormDrops). pps <= 0 removes the limit. Frames to learned
// unicast addresses are never limited.
func (s *Segment) SetStormLimit(pps int64) { s.stormPPS.Store(pps) }

// StormLimit returns the flood limit in frames per second (<= 0: none).
func (s *Segment) StormLimit() int64 { return s.stormPPS.Load() }

// stormAllows counts one flooded frame against the limit and reports whether it may go. The
// window is a whole second of the segment clock: a burst may reach the limit at once, as a
// switch's storm control measures per interval.
//
// The window only moves forward. Senders stamp frames with a clock read at different times (a
// TX batch's, read when the batch began), so a frame stamped with an earlier second than the
// window's comes after it: it counts against the current window, where moving the window back
// to its second (and the next frame forward again) would start a fresh count each time, and let
// through a limit's worth of floods per turn. The window's second and its count are one word,
// changed by compare-and-swap: a count reset apart from the second's change would lose the
// frames other senders counted in between.
func (s *Segment) stormAllows(now int64) bool {
	limit := s.stormPPS.Load()
	if limit <= 0 {
		return true
	}
	sec := uint64(now / int64(time.Second))
	for {
		w := s.storm.Load()
		switch cur, n := w>>32, w&math.MaxUint32; {
		case sec > cur:
			if s.storm.CompareAndSwap(w, sec<<32|1) {
				return true // the first flood of a new second; limit >= 1
			}
		case n >= min(uint64(limit), math.MaxUint32): // the count's 32 bits, for a limit beyond them
			return false
		default:
			if s.storm.CompareAndSwap(w, w+1) {
				return true
			}
		}
	}
}

// NewSegment returns an empty segment with the default ageing time and table size.
// A segment made so has poll slots and Pollers (DefaultMaxPollers) of its own, as if it were the
// only one of a Segments.
func NewSegment(name string) *Segment { return newSegment(name, newPollSlots(), newPollers()) }

// newSegment is NewSegment sharing slots and pollers with other segments.
func newSegment(name string, slots pollSlots, pollers *Pollers) *Segment {
	s := &Segment{name: name, epoch: time.Now(), maxEntries: DefaultMaxEntries, slots: slots, pollers: pollers}
	s.now = func() int64 { return int64(time.Since(s.epoch)) }
	s.ageing.Store(int64(DefaultAgeingTime))
	s.members.Store(&[]*port{})
	s.fdb.Store(&fdbTable{})
	return s
}

// Name returns the segment's name.
func (s *Segment) Name() string { return s.name }

// SetAgeingTime sets how long learned addresses last without traffic; d <= 0 disables ageing.
func (s *Segment) SetAgeingTime(d time.Duration) {
	s.ageing.Store(int64(d))
	s.fullUntil.Store(0)
}

// AgeingTime returns the ageing time (<= 0: addresses never age).
func (s *Segment) AgeingTime() time.Duration { return time.Duration(s.ageing.Load()) }

// Ports returns the number of members attached: ports and uplinks.
func (s *Segment) Ports() int { return len(*s.members.Load()) }

// join attaches a member and returns its port.
func (s *Segment) join(m member) *port {
	p := &port{m: m}
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := append(slices.Clone(*s.members.Load()), p)
	s.members.Store(&ms)
	return p
}

// leave detaches ports and forgets the addresses learned on them (br_fdb_delete_by_port), so
// frames to them are flooded to the remaining ports instead of vanishing. The tables are copied
// once however many ports leave.
func (s *Segment) leave(ps ...*port) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := slices.DeleteFunc(slices.Clone(*s.members.Load()), func(q *port) bool { return slices.Contains(ps, q) })
	s.members.Store(&ms)
	s.flushLocked(ps...)
}

// flush forgets the addresses learned on p, which stays attached: an uplink whose link went
// down, as the bridge flushes a port that is disabled.
func (s *Segment) flush(p *port) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(p)
}

func (s *Segment) flushLocked(ps ...*port) {
	gone := make(map[*port]bool, len(ps))
	for _, p := range ps {
		gone[p] = true
	}
	old := *s.fdb.Load()
	t := make(fdbTable, len(old))
	for mac, e := range old {
		if !gone[e.port.Load()] {
			t[mac] = e
		}
	}
	s.fdb.Store(&t)
	s.fullUntil.Store(0)
}

// mac48 packs a 6-byte address into an integer key.
func mac48(b []byte) uint64 {
	_ = b[5]
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}

// forward switches one frame that src sent: learn its source, then deliver it to the port that
// has its destination, or flood it. Frames shorter than an Ethernet header are dropped.
func (s *Segment) forward(src *port, frame []byte, inline bool) {
	s.forwardAt(src, frame, inline, s.now(), nil)
}

// forwardAt is forward at time now on the segment clock: a caller forwarding a batch of frames
// reads the clock once for all of them (ageing works in seconds; a clock read per frame would
// cost more than the table lookups).
//
// inline also says the caller is a sender (a TX or uplink goroutine), not an RX queue's
// processing (XDP_TX): a flood to more than floodInlineMax members then waits for one of the
// segment's poll slots, and is dropped if stop closes meanwhile (its port is stopping). Frames
// from an RX queue's processing flood without a slot: that goroutine may already hold one, and
// waiting for a second could deadlock.
func (s *Segment) forwardAt(src *port, frame []byte, inline bool, now int64, stop <-chan struct{}) {
	s.forwardChecked(src, frame, inline, now, stop, offload.Checked{})
}

// learnSource learns the source of frame (at least 14 bytes) behind src, as
// br_handle_frame_finish does: unicast, non-zero sources only.
func (s *Segment) learnSource(src *port, frame []byte, now int64) {
	if frame[6]&1 == 0 {
		if sa := mac48(frame[6:12]); sa != 0 {
			s.learn(src, sa, now)
		}
	}
}

// unicastDst returns the member that frame's destination (a unicast address; frame has at least
// 14 bytes) was learnt behind, and false when it is unknown or aged out: a frame to flood.
func (s *Segment) unicastDst(frame []byte, now int64) (*port, bool) {
	e, ok := (*s.fdb.Load())[mac48(frame[0:6])]
	if !ok || s.expired(e, now) {
		return nil, false
	}
	return e.port.Load(), true
}

// forwardChecked is forwardAt for a frame v may vouch for (offload.Segmenter.Checked): a unicast
// frame to an endpoint carries v along (Endpoint.inputChecked).
func (s *Segment) forwardChecked(src *port, frame []byte, inline bool, now int64, stop <-chan struct{}, v offload.Checked) {
	if len(frame) < 14 {
		return
	}
	s.captures.record(src.m, CaptureOut, frame)
	s.learnSource(src, frame, now)
	if frame[0]&1 == 0 {
		if dst, ok := s.unicastDst(frame, now); ok {
			if dst != src {
				if ep, ok := dst.m.(*Endpoint); ok {
					ep.inputChecked(frame, inline, v)
				} else {
					dst.m.input(frame, inline)
				}
			}
			// Else the destination is behind the sending port: the bridge drops such a
			// frame rather than reflect it.
			return
		}
	}
	if !s.stormAllows(now) {
		s.stats.stormDrops.Add(1)
		return
	}
	s.stats.floods.Add(1)
	ms := *s.members.Load()
	if len(ms) == 0 {
		return
	}
	if len(ms) <= floodInlineMax+1 {
		// A flood to a handful of members costs the sender no more than as many unicast
		// frames: it is delivered as they are (two ports on a segment, one of which never
		// transmits, see only such floods).
		for _, p := range ms {
			if p != src {
				p.m.input(frame, inline)
			}
		}
		return
	}
	// A larger flood is the receivers' work, as a switch's replication is: every other
	// member gets a copy in its RX queue's bounded input (dropped and counted there when
	// full, as a NIC drops what its ring cannot take), and the queue's own goroutine
	// delivers it. The sender never writes n TAPs itself: on a shared segment each of those
	// writes costs the receiving kernel work that grows with its number of interfaces, and n
	// senders doing n of them inline kept every P busy for minutes, the signal handler's and
	// the control plane's goroutines waiting behind them. Each flood starts at the next
	// member, so that floods many senders make at once do not all reach the first member
	// first.
	if inline {
		if !s.slots.acquire(stop) {
			return
		}
		defer s.slots.release()
	}
	start := int(s.floodNext.Add(1) % uint64(len(ms)))
	for i := range ms {
		if p := ms[(start+i)%len(ms)]; p != src {
			p.m.input(frame, false)
		}
	}
}

func (s *Segment) expired(e *fdbEntry, now int64) bool {
	a := s.ageing.Load()
	return a > 0 && now-e.seen.Load() > a
}

// learn records that address mac is behind port p.
func (s *Segment) learn(p *port, mac uint64, now int64) {
	if e, ok := (*s.fdb.Load())[mac]; ok {
		if e.port.Load() != p {
			// The station moved (or its entry expired and it reappeared elsewhere).
			e.port.Store(p)
			e.seen.Store(now)
		} else if now-e.seen.Load() > refreshEvery {
			e.seen.Store(now)
		}
		return
	}
	if now < s.fullUntil.Load() {
		return // the table is full and nothing in it can have expired yet
	}
	s.learnNew(p, mac, now)
}

// learnNew adds an address: the table is copied with the new entry, dropping expired entries
// when it is full. When nothing can be dropped the address is not learned (frames to it are
// flooded) until the oldest entry can expire.
func (s *Segment) learnNew(p *port, mac uint64, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.fdb.Load()
	if _, ok := old[mac]; ok {
		return // learned meanwhile by another goroutine
	}
	t := make(fdbTable, len(old)+1)
	if len(old) >= s.maxEntries {
		oldest := now
		for k, e := range old {
			if !s.expired(e, now) {
				t[k] = e
				oldest = min(oldest, e.seen.Load())
			}
		}
		if len(t) >= s.maxEntries {
			if a := s.ageing.Load(); a > 0 {
				s.fullUntil.Store(oldest + a + 1)
			} else {
				s.fullUntil.Store(1<<63 - 1) // no ageing: full until a port leaves
			}
			return
		}
	} else {
		for k, e := range old {
			t[k] = e
		}
	}
	e := &fdbEntry{}
	e.port.Store(p)
	e.seen.Store(now)
	t[mac] = e
	s.fdb.Store(&t)
}

// FDBEntry is one learned address, for display.
type FDBEntry struct {
	MAC  net.HardwareAddr
	Port string        // the port's name
	Age  time.Duration // since the address was last seen (to within a second)
}

// FDB returns the addresses currently learned (expired ones excluded), sorted by address.
func (s *Segment) FDB() []FDBEntry {
	now := s.now()
	var out []FDBEntry
	for mac, e := range *s.fdb.Load() {
		if s.expired(e, now) {
			continue
		}
		m := net.HardwareAddr{byte(mac >> 40), byte(mac >> 32), byte(mac >> 24), byte(mac >> 16), byte(mac >> 8), byte(mac)}
		out = append(out, FDBEntry{MAC: m, Port: e.port.Load().m.label(), Age: time.Duration(now - e.seen.Load())})
	}
	slices.SortFunc(out, func(a, b FDBEntry) int { return slices.Compare(a.MAC, b.MAC) })
	return out
}

// Segments is the daemon's set of named wire segments. Safe for concurrent use. Its segments
// share one set of poll slots: the processors are the daemon's, whichever segment floods.
type Segments struct {
	mu      sync.Mutex
	m       map[string]*Segment
	slots   pollSlots
	pollers *Pollers
}

// NewSegments returns an empty set.
func NewSegments() *Segments {
	return &Segments{m: map[string]*Segment{}, slots: newPollSlots(), pollers: newPollers()}
}

// Pollers returns the bound on busy-polling readers that the segments' endpoints share.
func (ss *Segments) Pollers() *Pollers { return ss.pollers }

// Get returns the segment with the given name, creating it on first use.
func (ss *Segments) Get(name string) *Segment {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[name]
	if !ok {
		s = newSegment(name, ss.slots, ss.pollers)
		ss.m[name] = s
	}
	return s
}

// List returns the segments, sorted by name.
func (ss *Segments) List() []*Segment {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]*Segment, 0, len(ss.m))
	for _, s := range ss.m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Segment) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return out
}

// Prune forgets the segments no port is attached to. An endpoint attaches at Start, so Prune must
// not run between Get and Start of a new port (the daemon calls both under its configuration
// lock), or that port would end up on a segment no other port can find.
func (ss *Segments) Prune() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for name, s := range ss.m {
		if s.Ports() == 0 {
			delete(ss.m, name)
		}
	}
}
