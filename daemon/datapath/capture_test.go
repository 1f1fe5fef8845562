package datapath

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// capturePlant is a segment with two uplinks (members on which both hooks run: Receive puts a
// frame on the wire, input takes one off it) and a recording port.
func capturePlant(t *testing.T) (*Segment, *Uplink, *Uplink, *port) {
	t.Helper()
	s, _, _, ports := testSegment("a")
	var ups []*Uplink
	for _, n := range []string{"u1", "u2"} {
		dev := &uplinkRecorder{recorder: recorder{name: n}}
		u := s.AttachUplink(n, dev.tx)
		u.SetMTU(1500)
		u.SetUp(true)
		ups = append(ups, u)
	}
	return s, ups[0], ups[1], ports["a"]
}

// drain returns what a capture queued: "<member> <in|out> <tag>" per frame.
func drain(c *Capture) []string {
	var out []string
	for {
		f, ok := c.Poll()
		if !ok {
			return out
		}
		dir := map[CaptureDirection]string{CaptureIn: "in", CaptureOut: "out"}[f.Dir]
		out = append(out, fmt.Sprintf("%s %s %d", f.Member, dir, f.Data[14]))
	}
}

// TestCaptureDirections: a segment capture sees every frame once, as it enters the segment, from
// the member that sent it; a member capture sees what that member sends (out) or is given (in),
// as its direction asks.
func TestCaptureDirections(t *testing.T) {
	for _, tc := range []struct {
		name   string
		member bool // capture uplink u1, else the segment
		dirs   CaptureDirection
		want   []string
	}{
		{"segment", false, 0, []string{"uplink:u1 out 1", "a out 2", "uplink:u2 out 3"}},
		{"member-both", true, CaptureIn | CaptureOut, []string{"uplink:u1 out 1", "uplink:u1 in 2", "uplink:u1 in 3"}},
		{"member-in", true, CaptureIn, []string{"uplink:u1 in 2", "uplink:u1 in 3"}},
		{"member-out", true, CaptureOut, []string{"uplink:u1 out 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u1, u2, a := capturePlant(t)
			var c *Capture
			var err error
			if tc.member {
				c, err = s.startCapture(u1, CaptureConfig{Dirs: tc.dirs})
			} else {
				c, err = s.Capture(CaptureConfig{})
			}
			require.NoError(t, err)
			defer c.Stop()
			u1.Receive(frame(broadcast, mac(1), 1)) // floods to a and u2
			s.forward(a, frame(broadcast, mac(2), 2), false)
			u2.Receive(frame(mac(1), mac(3), 3)) // to the station learnt behind u1
			got := drain(c)
			assert.Equal(t, fmt.Sprint(tc.want), fmt.Sprint(got), "captured %q, want %q", got, tc.want)
			st := c.Stats()
			assert.Equal(t, uint64(len(tc.want)), st.Matched, "stats %+v, want %d matched, none dropped", st, len(tc.want))
			assert.Equal(t, uint64(0), st.Dropped, "stats %+v, want %d matched, none dropped", st, len(tc.want))
		})
	}
}

// TestCaptureSnaplenAndQueue: frames are cut to the snapshot length with their length kept, and
// a queue that is full drops and counts instead of waiting.
func TestCaptureSnaplenAndQueue(t *testing.T) {
	s, u1, _, _ := capturePlant(t)
	c, err := s.Capture(CaptureConfig{Snaplen: 20, Queue: 2})
	require.NoError(t, err)
	defer c.Stop()
	for i := range 5 {
		u1.Receive(frame(broadcast, mac(1), byte(i)))
	}
	st := c.Stats()
	require.Equal(t, uint64(5), st.Matched, "stats %+v, want 5 matched, 3 dropped", st)
	require.Equal(t, uint64(3), st.Dropped, "stats %+v, want 5 matched, 3 dropped", st)
	for i := range 2 {
		f, ok := c.Poll()
		require.True(t, ok, "frame %d not queued", i)
		if assert.Len(t, f.Data, 20, "frame %d: bytes kept", i) {
			assert.Equal(t, byte(i), f.Data[14], "frame %d: tag", i)
		}
		assert.Equal(t, 60, f.OrigLen, "frame %d: length", i)
		assert.False(t, f.Time.IsZero(), "frame %d: no time", i)
	}
	_, ok := c.Poll()
	assert.False(t, ok, "more frames queued than the queue holds")
}

// TestCaptureQueueBytes: the queue holds at most CaptureQueueBytes of frame data, however many
// frames it may hold; a frame the reader takes makes room again.
func TestCaptureQueueBytes(t *testing.T) {
	s, u1, _, _ := capturePlant(t)
	c, err := s.Capture(CaptureConfig{Queue: MaxCaptureQueue})
	require.NoError(t, err)
	defer c.Stop()
	big := make([]byte, 60000)
	copy(big, frame(broadcast, mac(1), 1))
	fits := CaptureQueueBytes / len(big)
	for range fits + 10 {
		u1.Receive(big)
	}
	st := c.Stats()
	require.Equal(t, uint64(fits+10), st.Matched, "stats %+v", st)
	require.Equal(t, uint64(10), st.Dropped, "stats %+v", st)
	_, ok := c.Poll()
	require.True(t, ok, "nothing queued")
	u1.Receive(big)
	st = c.Stats()
	assert.Equal(t, uint64(10), st.Dropped, "after the reader took a frame, the next was dropped too: %+v", st)
}

// TestCaptureStop: a stopped capture records nothing more, and the segment is back to its
// capture-free path; Recv returns when its context ends.
func TestCaptureStop(t *testing.T) {
	s, u1, _, _ := capturePlant(t)
	c1, _ := s.Capture(CaptureConfig{})
	c2, _ := s.Capture(CaptureConfig{})
	u1.Receive(frame(broadcast, mac(1), 1))
	c1.Stop()
	c1.Stop() // a no-op
	u1.Receive(frame(broadcast, mac(1), 2))
	assert.Len(t, drain(c1), 1, "stopped capture, want only the frame before Stop")
	got := drain(c2)
	assert.Len(t, got, 2, "the other capture holds %q, want both frames", got)
	c2.Stop()
	assert.Nil(t, s.captures.list.Load(), "the segment still has a capture list after every capture stopped")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, ok := c2.Recv(ctx)
	assert.False(t, ok, "Recv on an empty capture returned a frame after its context ended")
}

// TestCaptureBadConfig: what a capture refuses, with EINVAL.
func TestCaptureBadConfig(t *testing.T) {
	s, _, _, _ := capturePlant(t)
	ep := NewEndpoint(s, mac(7), nil)
	for name, f := range map[string]func() (*Capture, error){
		"segment with a direction": func() (*Capture, error) { return s.Capture(CaptureConfig{Dirs: CaptureIn}) },
		"unknown direction":        func() (*Capture, error) { return ep.Capture(CaptureConfig{Dirs: 4}) },
		"negative queue":           func() (*Capture, error) { return s.Capture(CaptureConfig{Queue: -1}) },
		"huge queue":               func() (*Capture, error) { return ep.Capture(CaptureConfig{Queue: MaxCaptureQueue + 1}) },
	} {
		if c, err := f(); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", name, err)
			if c != nil {
				c.Stop()
			}
		}
	}
}

// TestCaptureEndpoint: a capture of a real port (TAPs in namespaces) sees the ICMP echo request
// it sends and the reply the wire delivers to it, with its name, and ends when the port's
// endpoint stops.
func TestCaptureEndpoint(t *testing.T) {
	h := newHarness(t)
	a, b := h.addPort(portOpts{queues: 1}), h.addPort(portOpts{queues: 1})
	c, err := a.ep.Capture(CaptureConfig{})
	require.NoError(t, err)
	defer c.Stop()
	a.pingOK(t, b)
	var in, out bool
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !in || !out {
		f, ok := c.Recv(ctx)
		require.True(t, ok, "no echo request and reply captured (in %v, out %v)", in, out)
		require.Equal(t, a.port.Name(), f.Member, "frame captured on")
		// IPv4 (0x0800), ICMP (protocol 1 at byte 23), type at byte 34: 8 request, 0 reply.
		if len(f.Data) < 35 || f.Data[12] != 0x08 || f.Data[13] != 0 || f.Data[23] != 1 {
			continue
		}
		switch {
		case f.Data[34] == 8 && f.Dir == CaptureOut:
			out = true
		case f.Data[34] == 0 && f.Dir == CaptureIn:
			in = true
		}
	}
	// The port goes away: its capture ends, and Recv returns at once.
	a.ep.Stop()
	assert.True(t, c.Ended(), "the capture did not end with its endpoint")
	for {
		if _, ok := c.Recv(ctx); !ok {
			break
		}
	}
	assert.NoError(t, ctx.Err(), "Recv waited for its context after the capture ended")
}

// BenchmarkForwardCapture: broadcast frames through three segments, in alternating chunks of
// the same run: one with no capture, one with a capture whose reader never reads (its queue
// fills, then every frame is dropped and counted), one with a reader that keeps up. A capture
// that is behind never makes the wire wait: it costs the counting, not a copy.
func BenchmarkForwardCapture(b *testing.B) {
	const chunk = 1024
	type plant struct {
		s   *Segment
		src *port
		c   *Capture
		ns  time.Duration
	}
	mk := func(capture bool) *plant {
		s := NewSegment("bench")
		p := &plant{s: s, src: s.join(discard("a"))}
		s.join(discard("b"))
		if capture {
			p.c, _ = s.Capture(CaptureConfig{Queue: 64})
		}
		return p
	}
	none, behind, reading := mk(false), mk(true), mk(true)
	defer behind.c.Stop()
	defer reading.c.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			if _, ok := reading.c.Recv(ctx); !ok {
				return
			}
		}
	}()
	f := frame(broadcast, mac(1), 1)
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		for _, p := range []*plant{none, behind, reading} {
			start := time.Now()
			for range n {
				p.s.forward(p.src, f, false)
			}
			p.ns += time.Since(start)
		}
	}
	b.StopTimer()
	st := behind.c.Stats()
	require.Equal(b, uint64(b.N), st.Matched, "capture behind: %+v of %d frames, want all matched and all but the queue dropped", st, b.N)
	require.GreaterOrEqual(b, st.Dropped+64, st.Matched, "capture behind: %+v of %d frames, want all matched and all but the queue dropped", st, b.N)
	per := func(p *plant) float64 { return float64(p.ns.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(none), "none-ns/frame")
	b.ReportMetric(per(behind), "behind-ns/frame")
	b.ReportMetric(per(reading), "reading-ns/frame")
	b.ReportMetric(per(behind)/per(none), "behind/none")
	b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/frame")
}

// discard is a member that drops what it is given.
type discard string

func (discard) input([]byte, bool) {}
func (d discard) label() string    { return string(d) }
