package genl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
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

// segBackend adds wire segments to a MemBackend: the segment ops' contract (ENOENT, EEXIST,
// EBUSY while a port names the segment) kept in memory, each change recorded and announced with
// NotifySegment, as the daemon does. The daemon's own tests run the real thing (daemon package).
type segBackend struct {
	*genl.MemBackend
	srv *genl.Server
	ns  genl.NetNS

	mu    sync.Mutex
	segs  map[string]*genl.SegmentInfo
	calls []string
}

func (b *segBackend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls
	b.calls = nil
	return append(c, b.MemBackend.Calls()...)
}

func (b *segBackend) ports(ctx context.Context, c genl.Caller, seg string) []string {
	ps, _ := b.MemBackend.Ports(ctx, c)
	var out []string
	for _, p := range ps {
		if p.Segment == seg {
			out = append(out, p.Device.Name)
		}
	}
	return out
}

func (b *segBackend) Segments(ctx context.Context, c genl.Caller) ([]genl.SegmentInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []genl.SegmentInfo
	for _, s := range b.segs {
		out = append(out, *s)
	}
	// Unsorted on purpose: the server sorts the dump by name.
	return out, nil
}

func (b *segBackend) Segment(ctx context.Context, c genl.Caller, name string) (genl.SegmentInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.segs[name]
	if !ok {
		return genl.SegmentInfo{}, genl.Errorf(unix.ENOENT, "no segment %s", name)
	}
	return *s, nil
}

func (b *segBackend) CreateSegment(ctx context.Context, c genl.Caller, s genl.SegmentSpec) (genl.SegmentInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.segs[s.Name]; ok {
		return genl.SegmentInfo{}, genl.Errorf(unix.EEXIST, "segment %s already exists", s.Name)
	}
	ageing := uint64(300000)
	if s.AgeingSet {
		ageing = s.AgeingMs
	}
	info := &genl.SegmentInfo{Name: s.Name, MTU: s.MTU, StormPPS: s.StormPPS, AgeingMs: ageing, Origin: "runtime",
		Ports: []string{}, Uplinks: []genl.UplinkInfo{}}
	b.segs[s.Name] = info
	b.calls = append(b.calls, fmt.Sprintf("CreateSegment %s mtu=%d storm=%d ageing=%d", s.Name, s.MTU, s.StormPPS, ageing))
	b.srv.NotifySegment(genl.EventNew, *info, b.ns)
	return *info, nil
}

func (b *segBackend) DeleteSegment(ctx context.Context, c genl.Caller, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ps := b.ports(ctx, c, name); len(ps) > 0 {
		return genl.Errorf(unix.EBUSY, "segment %s has ports: %s", name, strings.Join(ps, ", "))
	}
	s, ok := b.segs[name]
	if !ok {
		return genl.Errorf(unix.ENOENT, "no segment %s", name)
	}
	delete(b.segs, name)
	b.calls = append(b.calls, "DeleteSegment "+name)
	b.srv.NotifySegment(genl.EventDel, *s, b.ns)
	return nil
}

func (b *segBackend) AddUplink(ctx context.Context, c genl.Caller, seg string, u genl.UplinkSpec) (genl.SegmentInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.segs[seg]
	if !ok {
		return genl.SegmentInfo{}, genl.Errorf(unix.ENOENT, "no segment %s", seg)
	}
	for _, o := range b.segs {
		if slices.ContainsFunc(o.Uplinks, func(x genl.UplinkInfo) bool { return x.Dev == u.Dev && x.NetNS == u.NetNS }) {
			return genl.SegmentInfo{}, genl.Errorf(unix.EEXIST, "uplink %s already used by segment %s", u.Dev, o.Name)
		}
	}
	s.Uplinks = append(s.Uplinks, genl.UplinkInfo{Dev: u.Dev, NetNS: u.NetNS, State: wire.UplinkGone, MTU: 1450, MaxPortMTU: 1450, TxMTUDrops: 3})
	b.calls = append(b.calls, fmt.Sprintf("AddUplink %s %s/%s", seg, u.NetNS, u.Dev))
	b.srv.NotifySegment(genl.EventChange, *s, b.ns)
	return *s, nil
}

func (b *segBackend) DeleteUplink(ctx context.Context, c genl.Caller, seg string, u genl.UplinkSpec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.segs[seg]
	if !ok {
		return genl.Errorf(unix.ENOENT, "no segment %s", seg)
	}
	i := slices.IndexFunc(s.Uplinks, func(x genl.UplinkInfo) bool { return x.Dev == u.Dev && x.NetNS == u.NetNS })
	if i < 0 {
		return genl.Errorf(unix.ENOENT, "segment %s has no uplink %s", seg, u.Dev)
	}
	s.Uplinks = slices.Delete(s.Uplinks, i, i+1)
	b.calls = append(b.calls, fmt.Sprintf("DeleteUplink %s %s/%s", seg, u.NetNS, u.Dev))
	b.srv.NotifySegment(genl.EventChange, *s, b.ns)
	return nil
}

// startSegmentServer is startServer with segBackend as the backend.
func startSegmentServer(t *testing.T) (*testServer, *segBackend) {
	t.Helper()
	var sb *segBackend
	ts := startServerWith(t, func(pre *testServer, c *genl.ServerConfig) {
		sb = &segBackend{MemBackend: pre.be, segs: map[string]*genl.SegmentInfo{}}
		c.Backend.Segments, c.Backend.Segment, c.Backend.CreateSegment = sb.Segments, sb.Segment, sb.CreateSegment
		c.Backend.DeleteSegment, c.Backend.AddUplink, c.Backend.DeleteUplink = sb.DeleteSegment, sb.AddUplink, sb.DeleteUplink
	})
	sb.srv, sb.ns = ts.srv, ts.ns
	return ts, sb
}

// errnoOf is the errno of a client error (0 for nil).
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	if err != nil {
		return unix.EIO
	}
	return 0
}

// TestSegmentMessages: every segment message through the client over the socket, with its
// errors (ENOENT, EEXIST, EBUSY) and extack messages, and the notifications of each change in
// order.
func TestSegmentMessages(t *testing.T) {
	ts, sb := startSegmentServer(t)
	ctx := context.Background()
	c, err := client.Dial(ts.path)
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()

	info, err := c.CreateSegment(ctx, wire.SegmentSpec{Name: "wire1", MTU: 1400, StormPPS: 500, AgeingMs: 0, AgeingSet: true})
	require.NoError(t, err, "CreateSegment: %+v, %v", info, err)
	require.Equal(t, "wire1", info.Name, "CreateSegment: %+v, %v", info, err)
	require.Equal(t, uint32(1400), info.MTU, "CreateSegment: %+v, %v", info, err)
	require.Equal(t, uint64(500), info.StormPPS, "CreateSegment: %+v, %v", info, err)
	require.Equal(t, uint64(0), info.AgeingMs, "CreateSegment: %+v, %v", info, err)
	// AgeingSet false: the attribute is not sent and the default applies.
	info, err = c.CreateSegment(ctx, wire.SegmentSpec{Name: "busy"})
	require.NoError(t, err, "CreateSegment busy: %+v, %v", info, err)
	require.Equal(t, uint64(300000), info.AgeingMs, "CreateSegment busy: %+v, %v", info, err)
	_, err = c.CreatePort(ctx, genl.PortSpec{Name: "mana9", Segment: "busy"})
	require.NoError(t, err)
	info, err = c.AddUplink(ctx, "wire1", wire.UplinkSpec{Dev: "vx0", NetNS: "hostA"})
	require.NoError(t, err, "AddUplink: %+v, %v", info, err)
	require.Len(t, info.Uplinks, 1, "AddUplink: %+v, %v", info, err)
	require.Equal(t, wire.UplinkInfo{Dev: "vx0", NetNS: "hostA", State: "gone", MTU: 1450, MaxPortMTU: 1450, TxMTUDrops: 3}, info.Uplinks[0], "AddUplink: %+v, %v", info, err)
	if got, err := c.Segment(ctx, "wire1"); err != nil || got.Name != "wire1" || len(got.Uplinks) != 1 || got.Uplinks[0].Dev != "vx0" {
		t.Fatalf("Segment: %+v, %v", got, err)
	}
	segs, err := c.Segments(ctx)
	require.NoError(t, err, "Segments: %+v, %v", segs, err)
	require.Len(t, segs, 2, "Segments: %+v, %v", segs, err)
	require.Equal(t, "busy", segs[0].Name, "Segments: %+v, %v", segs, err)
	require.Equal(t, "wire1", segs[1].Name, "Segments: %+v, %v", segs, err)

	for _, tc := range []struct {
		name  string
		err   error
		errno unix.Errno
		msg   string
	}{
		{"get unknown", func() error { _, err := c.Segment(ctx, "nope"); return err }(), unix.ENOENT, "no segment nope"},
		{"create duplicate", func() error { _, err := c.CreateSegment(ctx, wire.SegmentSpec{Name: "wire1"}); return err }(), unix.EEXIST, "segment wire1 already exists"},
		{"uplink to unknown", func() error { _, err := c.AddUplink(ctx, "nope", wire.UplinkSpec{Dev: "x"}); return err }(), unix.ENOENT, "no segment nope"},
		{"uplink used", func() error {
			_, err := c.AddUplink(ctx, "busy", wire.UplinkSpec{Dev: "vx0", NetNS: "hostA"})
			return err
		}(), unix.EEXIST, "uplink vx0 already used by segment wire1"},
		{"del unknown uplink", c.DeleteUplink(ctx, "wire1", wire.UplinkSpec{Dev: "vx0"}), unix.ENOENT, "segment wire1 has no uplink vx0"},
		{"del with ports", c.DeleteSegment(ctx, "busy"), unix.EBUSY, "segment busy has ports: mana9"},
		{"del unknown", c.DeleteSegment(ctx, "nope"), unix.ENOENT, "no segment nope"},
	} {
		var ce *client.Error
		if errnoOf(tc.err) != tc.errno || !errors.As(tc.err, &ce) || ce.Message != tc.msg {
			t.Errorf("%s: %v, want %v %q", tc.name, tc.err, tc.errno, tc.msg)
		}
	}
	require.NoError(t, c.DeleteUplink(ctx, "wire1", wire.UplinkSpec{Dev: "vx0", NetNS: "hostA"}))
	require.NoError(t, c.DeleteSegment(ctx, "wire1"))
	_, err = c.Segment(ctx, "wire1")
	assert.Equal(t, unix.ENOENT, errnoOf(err), "Segment after delete: %v", err)
	want := []string{"CreateSegment wire1 mtu=1400 storm=500 ageing=0", "CreateSegment busy mtu=0 storm=0 ageing=300000",
		"AddUplink wire1 hostA/vx0", "DeleteUplink wire1 hostA/vx0", "DeleteSegment wire1"}
	if got := slices.DeleteFunc(sb.Calls(), func(s string) bool { return strings.HasPrefix(s, "CreatePort") }); !slices.Equal(got, want) {
		t.Errorf("backend calls %q, want %q", got, want)
	}

	// One notification per change, in order, carrying the segment; none for the refusals.
	type ev struct {
		kind    client.NotificationKind
		seg     string
		uplinks int
	}
	wantEv := []ev{{client.SegmentAdded, "wire1", 0}, {client.SegmentAdded, "busy", 0},
		{client.SegmentChanged, "wire1", 1}, {client.SegmentChanged, "wire1", 0}, {client.SegmentRemoved, "wire1", 0}}
	var got []ev
	var lastSeq uint32
	for len(got) < len(wantEv) {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ns, err := sub.Next(tctx)
		cancel()
		require.NoError(t, err, "after %v", got)
		for _, n := range ns {
			e := ev{kind: n.Kind}
			if n.Segment != nil {
				e.seg, e.uplinks = n.Segment.Name, len(n.Segment.Uplinks)
			}
			assert.Greater(t, n.Sequence, lastSeq, "notification %v: sequence %d after %d", e, n.Sequence, lastSeq)
			lastSeq = n.Sequence
			got = append(got, e)
		}
	}
	assert.True(t, slices.Equal(got, wantEv), "notifications %v, want %v", got, wantEv)
}

// TestSegmentRequestValidation: malformed segment requests get the kernel's errno, extack and
// missing-attribute report, and never reach the backend.
func TestSegmentRequestValidation(t *testing.T) {
	ts, sb := startSegmentServer(t)
	rc := dialRaw(t, ts.path)
	mf := manadFamilyID(t, rc, wire.FamilyName)
	seg := func(fill func(m *msgBuilder)) func(m *msgBuilder) {
		return func(m *msgBuilder) { header(m, wire.AttrSegment, fill) }
	}
	named := seg(func(m *msgBuilder) { m.PutString(wire.SegmentAttrName, "wire0") })
	tests := []struct {
		name     string
		cmd      uint8
		build    func(m *msgBuilder)
		errno    unix.Errno
		msg      string
		missType uint32
		missNest bool
	}{
		{"get without segment", wire.CmdSegmentGet, func(m *msgBuilder) {}, unix.EINVAL, "missing segment", uint32(wire.AttrSegment), false},
		{"get without name", wire.CmdSegmentGet, seg(func(m *msgBuilder) {}), unix.EINVAL, "missing segment name", uint32(wire.SegmentAttrName), true},
		{"empty name", wire.CmdSegmentDel, seg(func(m *msgBuilder) { m.PutString(wire.SegmentAttrName, "") }), unix.EINVAL, "empty segment name", 0, false},
		{"name too long", wire.CmdSegmentNew, seg(func(m *msgBuilder) { m.PutString(wire.SegmentAttrName, strings.Repeat("s", 65)) }),
			unix.EINVAL, "Attribute failed policy validation", 0, false},
		{"mtu out of range", wire.CmdSegmentNew, seg(func(m *msgBuilder) {
			m.PutString(wire.SegmentAttrName, "wire0")
			m.PutU32(wire.SegmentAttrMTU, 67)
		}), unix.ERANGE, "integer out of range", 0, false},
		{"setting on a get", wire.CmdSegmentGet, seg(func(m *msgBuilder) {
			m.PutString(wire.SegmentAttrName, "wire0")
			m.PutU32(wire.SegmentAttrMTU, 1500)
		}), unix.EINVAL, "Unsupported attribute", 0, false},
		{"reply-only attribute on new", wire.CmdSegmentNew, seg(func(m *msgBuilder) {
			m.PutString(wire.SegmentAttrName, "wire0")
			m.PutU32(wire.SegmentAttrLearnt, 1)
		}), unix.EINVAL, "Unsupported attribute", 0, false},
		{"port header on a segment command", wire.CmdSegmentDel, func(m *msgBuilder) {
			named(m)
			header(m, wire.AttrHeader, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0") })
		}, unix.EINVAL, "Unsupported attribute", 0, false},
		{"attribute above max", wire.CmdSegmentGet, func(m *msgBuilder) { named(m); m.PutU32(wire.AttrSegmentMax+1, 1) },
			unix.EINVAL, "Unknown attribute type", 0, false},
		{"uplink add without uplink", wire.CmdUplinkAdd, named, unix.EINVAL, "missing uplink", uint32(wire.AttrUplink), false},
		{"uplink add without dev", wire.CmdUplinkAdd, func(m *msgBuilder) {
			named(m)
			header(m, wire.AttrUplink, func(m *msgBuilder) { m.PutString(wire.UplinkAttrNetNS, "hostA") })
		}, unix.EINVAL, "missing uplink device", uint32(wire.UplinkAttrDev), true},
		{"uplink dev too long", wire.CmdUplinkDel, func(m *msgBuilder) {
			named(m)
			header(m, wire.AttrUplink, func(m *msgBuilder) { m.PutString(wire.UplinkAttrDev, "sixteen-chars-xx") })
		}, unix.EINVAL, "Attribute failed policy validation", 0, false},
		{"uplink without segment", wire.CmdUplinkDel, func(m *msgBuilder) {
			header(m, wire.AttrUplink, func(m *msgBuilder) { m.PutString(wire.UplinkAttrDev, "vx0") })
		}, unix.EINVAL, "missing segment", uint32(wire.AttrSegment), false},
		{"dump of a change", wire.CmdSegmentNew, nil, unix.EOPNOTSUPP, "", 0, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := nlattr.FlagRequest | nlattr.FlagAck
			if tt.build == nil {
				flags |= nlattr.FlagDump
			}
			m := newMsg(mf, flags, uint32(i+1), tt.cmd, 1)
			if tt.build != nil {
				tt.build(m)
			}
			rc.send(m.done())
			a := decodeAck(t, rc.recv()[0])
			assert.Equal(t, tt.errno, a.errno, "got %+v", a)
			assert.Equal(t, tt.msg, a.msg, "got %+v", a)
			assert.Equal(t, tt.missType, a.missType, "got %+v", a)
			assert.Equal(t, tt.missNest, a.missNest != 0, "got %+v", a)
			assert.Empty(t, sb.Calls(), "backend called")
		})
	}
}

// TestSegmentUnprivileged: a peer that is neither root nor in the admin group may list and show
// segments but gets EPERM for every change, which reaches no backend.
func TestSegmentUnprivileged(t *testing.T) {
	requireRoot(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another uid")
	}
	ts, sb := startSegmentServer(t)
	ctx := context.Background()
	root, err := client.Dial(ts.path)
	require.NoError(t, err)
	defer root.Close()
	_, err = root.CreateSegment(ctx, wire.SegmentSpec{Name: "wire0"})
	require.NoError(t, err)
	sb.Calls()
	c, err := clientDialUnprivileged(ts.path)
	require.NoError(t, err)
	defer c.Close()
	if segs, err := c.Segments(ctx); err != nil || len(segs) != 1 {
		t.Errorf("Segments as nobody: %+v, %v", segs, err)
	}
	_, err = c.Segment(ctx, "wire0")
	assert.NoError(t, err, "Segment as nobody")
	for name, err := range map[string]error{
		"CreateSegment": func() error { _, err := c.CreateSegment(ctx, wire.SegmentSpec{Name: "wire1"}); return err }(),
		"DeleteSegment": c.DeleteSegment(ctx, "wire0"),
		"AddUplink":     func() error { _, err := c.AddUplink(ctx, "wire0", wire.UplinkSpec{Dev: "vx0"}); return err }(),
		"DeleteUplink":  c.DeleteUplink(ctx, "wire0", wire.UplinkSpec{Dev: "vx0"}),
	} {
		assert.Equal(t, unix.EPERM, errnoOf(err), "%s as nobody: %v, want EPERM", name, err)
	}
	assert.Empty(t, sb.Calls(), "backend changed by an unprivileged peer")
}

// TestSegmentWithoutBackend: a Backend without the segment ops answers EOPNOTSUPP with a message.
func TestSegmentWithoutBackend(t *testing.T) {
	ts := startServer(t, nil)
	c, err := client.Dial(ts.path)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Segment(context.Background(), "wire0")
	var ce *client.Error
	if errnoOf(err) != unix.EOPNOTSUPP || !errors.As(err, &ce) || ce.Message == "" {
		t.Errorf("Segment: %v, want EOPNOTSUPP with a message", err)
	}
	_, err = c.Segments(context.Background())
	assert.Equal(t, unix.EOPNOTSUPP, errnoOf(err), "Segments: %v, want EOPNOTSUPP", err)
}
