package genl_test

import (
	"bytes"
	"errors"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

func TestManadPorts(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)

	ports, err := c.Ports(ctx)
	require.NoError(t, err)
	require.Len(t, ports, 2, "Ports: %+v", ports)
	require.Equal(t, "mana0", ports[0].Device.Name, "Ports: %+v", ports)
	require.Equal(t, "mana1", ports[1].Device.Name, "Ports: %+v", ports)
	if ports[0].Device.NetNS != ts.ns || ports[0].Layout.BufSize != 2112 || ports[0].MaxMTU != 9000 ||
		!cmp.Equal(ports[0].PrivFlagNames, []string{"full-page-rx"}) || !ports[0].AdminUp {
		t.Errorf("port 0: %+v", ports[0])
	}

	spec := genl.PortSpec{Name: "mana9", MAC: net.HardwareAddr{2, 1, 2, 3, 4, 5}, MTU: 4000, Segment: "seg1",
		MemoryBudget: 1 << 30, Persistent: true, PrivFlags: 1}
	p, err := c.CreatePort(ctx, spec)
	require.NoError(t, err)
	if p.Device.Name != "mana9" || p.MTU != 4000 || !bytes.Equal(p.MAC, spec.MAC) || p.Segment != "seg1" ||
		p.MemoryBudget != 1<<30 || !p.Persistent || p.PrivFlags != 1 {
		t.Errorf("created: %+v", p)
	}
	got, err := c.Port(ctx, client.Interface{Index: int(p.Device.Index)})
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff(p, got), "Port after create (-created +got)")
	var ce *client.Error
	_, err = c.CreatePort(ctx, spec)
	assert.ErrorIs(t, err, unix.EEXIST, "duplicate")
	if assert.ErrorAs(t, err, &ce, "duplicate") {
		assert.Equal(t, `port "mana9" exists`, ce.Message, "duplicate")
	}
	_, err = c.CreatePort(ctx, genl.PortSpec{Name: "x", MAC: net.HardwareAddr{1, 2, 3}})
	assert.ErrorIs(t, err, unix.ERANGE, "short MAC")
	if assert.ErrorAs(t, err, &ce, "short MAC") {
		assert.Equal(t, "binary attribute size out of range", ce.Message, "short MAC")
		assert.NotZero(t, ce.Offset, "short MAC: no offset")
	}

	require.NoError(t, c.SetMTU(ctx, client.Interface{Name: "mana9"}, 9000))
	err = c.SetMTU(ctx, client.Interface{Name: "mana9"}, 20)
	assert.ErrorIs(t, err, unix.EINVAL, "bad MTU")
	if assert.ErrorAs(t, err, &ce, "bad MTU") {
		assert.Equal(t, "mtu 20 out of range [68, 9000]", ce.Message, "bad MTU")
	}
	require.NoError(t, c.DeletePort(ctx, client.Interface{Name: "mana9"}))
	_, err = c.Port(ctx, client.Interface{Name: "mana9"})
	assert.ErrorIs(t, err, unix.ENODEV, "deleted port")
	_, err = c.Port(ctx, client.Interface{Name: "lo0"})
	assert.ErrorIs(t, err, unix.EOPNOTSUPP, "not a port")
	_, err = c.Port(ctx, client.Interface{})
	assert.ErrorIs(t, err, unix.EINVAL, "no interface")
}

func TestManadXDPStatsLayoutFaults(t *testing.T) {
	ts := startServer(t, func(c *genl.ServerConfig) { c.Transport.MaxMessage = 1 << 20 })
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	var ce *client.Error

	require.NoError(t, c.AttachXDP(ctx, mana0, genl.XDPProgram{Builtin: "drop"}))
	// An object bigger than one attribute travels in chunks.
	obj := bytes.Repeat([]byte("\x7fELF-object-"), 8000) // 96 KB
	require.NoError(t, c.AttachXDP(ctx, mana0, genl.XDPProgram{Object: obj, Section: "xdp", Name: "prog"}))
	d := ts.be.Dev(ts.mana0.Dev.Index)
	assert.Equal(t, obj, d.XDP.Object, "object not reassembled: %d bytes, %q", len(d.XDP.Object), d.XDP.Name)
	assert.Equal(t, "prog", d.XDP.Name, "object not reassembled: %d bytes, %q", len(d.XDP.Object), d.XDP.Name)
	assert.Equal(t, "xdp", d.XDP.Section, "object not reassembled: %d bytes, %q", len(d.XDP.Object), d.XDP.Name)
	if p, _ := c.Port(ctx, mana0); p.XDP != "ebpf:prog" {
		t.Errorf("port XDP %q", p.XDP)
	}
	if err := c.AttachXDP(ctx, mana0, genl.XDPProgram{Builtin: "pass", Object: []byte{1}}); !errors.Is(err, unix.EINVAL) ||
		!errors.As(err, &ce) || ce.Message != "XDP builtin and object are mutually exclusive" {
		t.Errorf("both: %v", err)
	}
	assert.ErrorIs(t, c.AttachXDP(ctx, mana0, genl.XDPProgram{}), unix.EINVAL, "neither")
	require.NoError(t, c.DetachXDP(ctx, mana0))

	stats, err := c.Stats(ctx, mana0)
	require.NoError(t, err)
	assert.Empty(t, cmp.Diff([]genl.Stat{{Name: "stop_queue", Value: 1}, {Name: "wake_queue", Value: 2}, {Name: "rx_0_packets", Value: 300}}, stats), "stats (-want +got)")
	all, err := c.AllStats(ctx)
	if err != nil || len(all) != 2 || all[0].Interface.Name != "mana0" {
		t.Errorf("AllStats: %+v, %v", all, err)
	}

	layouts, err := c.PlanLayout(ctx, genl.LayoutRequest{PageSize: 65536, MTU: 1500, RingSize: 1024, Queues: 4, Rules: []string{"upstream", "pre-frag"}})
	require.NoError(t, err)
	if len(layouts) != 2 || layouts[0].Rule != "upstream" || layouts[0].BufSize != 2112 || layouts[0].FragCount != 31 || layouts[1].Rule != "pre-frag" {
		t.Errorf("layouts: %+v", layouts)
	}

	require.NoError(t, c.SetFault(ctx, mana0, genl.Fault{Point: "prealloc", Mode: "count", Count: 3, Errno: uint32(unix.ENOMEM)}))
	p, _ := c.Port(ctx, mana0)
	assert.Empty(t, cmp.Diff([]genl.Fault{{Point: "prealloc", Mode: "count", Count: 3, Errno: uint32(unix.ENOMEM)}}, p.Faults), "faults (-want +got)")
	require.NoError(t, c.SetFault(ctx, mana0, genl.Fault{Point: "prealloc", Mode: "off"}))
	if p, _ = c.Port(ctx, mana0); len(p.Faults) != 0 {
		t.Errorf("faults after clear: %+v", p.Faults)
	}
	for _, tc := range []struct {
		f   genl.Fault
		msg string
	}{
		{genl.Fault{Point: "attach", Mode: "once", Errno: 5000}, "integer out of range"},
	} {
		err := c.SetFault(ctx, mana0, tc.f)
		if !errors.As(err, &ce) || ce.Message != tc.msg || ce.Offset == 0 {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.msg)
		}
	}
}

// TestManadRequestValidation: strict validation and missing-attribute
// reports of the manad family.
func TestManadRequestValidation(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	mf := manadFamilyID(t, rc, wire.FamilyName)
	devHdr := func(m *msgBuilder) {
		header(m, wire.AttrHeader, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0") })
	}
	tests := []struct {
		name     string
		cmd      uint8
		build    func(m *msgBuilder)
		errno    unix.Errno
		msg      string
		missType uint32
		missNest bool
	}{
		{"set MTU without MTU", wire.CmdPortSetMTU, devHdr, unix.EINVAL, "missing MTU", uint32(wire.AttrMTU), false},
		{"set MTU without header", wire.CmdPortSetMTU, func(m *msgBuilder) { m.PutU32(wire.AttrMTU, 1500) },
			unix.EINVAL, "missing device header", uint32(wire.AttrHeader), false},
		{"attribute of another command", wire.CmdPortDel, func(m *msgBuilder) { devHdr(m); m.PutU32(wire.AttrMTU, 1) },
			unix.EINVAL, "Unsupported attribute", 0, false},
		{"attribute above max", wire.CmdPortGet, func(m *msgBuilder) { m.PutU32(60, 1) },
			unix.EINVAL, "Unknown attribute type", 0, false},
		{"fault without point", wire.CmdFaultSet, func(m *msgBuilder) {
			devHdr(m)
			n := m.Nest(wire.AttrFault)
			m.PutString(wire.FaultAttrMode, "once")
			m.EndNest(n)
		}, unix.EINVAL, "missing fault point", uint32(wire.FaultAttrPoint), true},
		{"port spec attribute not accepted at creation", wire.CmdPortNew, func(m *msgBuilder) {
			n := m.Nest(wire.AttrPort)
			m.PutU8(wire.PortAttrRunning, 1)
			m.EndNest(n)
		}, unix.EINVAL, "Unsupported attribute", 0, false},
		{"netns-too on a backend without namespaces", wire.CmdPortDel, func(m *msgBuilder) {
			devHdr(m)
			n := m.Nest(wire.AttrPort)
			m.PutU8(wire.PortAttrNetNSToo, 1)
			m.EndNest(n)
		}, unix.EOPNOTSUPP, "this backend cannot delete namespaces", 0, false},
		{"reply attribute in PORT_DEL", wire.CmdPortDel, func(m *msgBuilder) {
			devHdr(m)
			n := m.Nest(wire.AttrPort)
			m.PutString(wire.PortAttrNotice, "x")
			m.EndNest(n)
		}, unix.EINVAL, "Unsupported attribute", 0, false},
		{"join without group", wire.CmdGroupJoin, func(m *msgBuilder) {}, unix.EINVAL, "missing multicast group", uint32(wire.AttrGroup), false},
		{"dump of a do-only command", wire.CmdLayoutPlan, nil, unix.EOPNOTSUPP, "", 0, false},
		{"unknown command", 99, func(m *msgBuilder) {}, unix.EOPNOTSUPP, "", 0, false},
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
			assert.Empty(t, ts.be.Calls(), "backend called")
		})
	}
}
