package genl

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/wire"
)

// MemBackend is an in-memory Backend for genl's tests. It models devices in
// several network namespaces; "ports" support every operation, plain devices
// (Port == false) answer EOPNOTSUPP to everything but lookups, as a netdev
// without those ethtool ops does.
type MemBackend struct {
	// Hook, when set, runs at the start of Rings and SetRings (outside the
	// lock, op naming the method), so a test can block a request or watch
	// its context.
	Hook func(ctx context.Context, op string) error

	mu    sync.Mutex
	devs  []*MemDev
	calls []string
	hist  []string
	next  uint32
}

// MemDev is one device of a MemBackend.
type MemDev struct {
	Dev      Device
	Port     bool
	Names    []string
	Flags    uint32
	Rings    Rings
	Channels Channels
	Stats    []Stat
	Info     PortInfo
	Faults   []Fault
	XDP      XDPProgram
	Link     LinkSettings
	Carrier  bool
	Features Features // FEATURES_GET/SET (features_membackend_test.go)
	Coalesce Coalesce
	RSS      RSSSetting // RSS_GET/SET (rss_membackend_test.go); zero until first asked
	// SetErr, when set, is returned by every Set*/port action.
	SetErr error
	// StringSets are the per-device string sets; ETH_SS_PRIV_FLAGS defaults
	// to Names.
	StringSets map[uint32][]string
}

// NewMemBackend returns an empty backend.
func NewMemBackend() *MemBackend { return &MemBackend{next: 100} }

// AddPort adds a MANA-like port named name in ns and returns it.
func (b *MemBackend) AddPort(ns NetNS, name string) *MemDev {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	d := &MemDev{
		Dev:      Device{Index: b.next, Name: name, NetNS: ns},
		Port:     true,
		Names:    []string{"full-page-rx"},
		Rings:    Rings{RxMax: 8192, TxMax: 16384, Rx: 1024, Tx: 1024},
		Channels: Channels{CombinedMax: 16, Combined: 4},
		Stats:    []Stat{{Name: "stop_queue", Value: 1}, {Name: "wake_queue", Value: 2}, {Name: "rx_0_packets", Value: 300}},
		Link:     LinkSettings{Speed: 200000, Duplex: wire.DuplexFull, Port: wire.PortOther},
		Carrier:  true,
		Coalesce: Coalesce{RxCQEFrames: 1, RxCQENsecs: 2048},
	}
	d.Info = PortInfo{MTU: 1500, MinMTU: 68, MaxMTU: 9000, PageSize: 4096, Queues: 4, MaxQueues: 16,
		RxRing: 1024, TxRing: 1024, AdminUp: true, Running: true,
		MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, byte(b.next)}, Segment: "default",
		Layout: RxBufLayout{Rule: "upstream", PageSize: 4096, MTU: 1500, BufSize: 2112, Single: true, Reason: "page_size / buf_size < 2"}}
	b.devs = append(b.devs, d)
	return d
}

// AddPlain adds a device without manad ops (like lo or a veth).
func (b *MemBackend) AddPlain(ns NetNS, name string) *MemDev {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	d := &MemDev{Dev: Device{Index: b.next, Name: name, NetNS: ns}}
	b.devs = append(b.devs, d)
	return d
}

// Calls returns and clears the recorded mutating calls.
func (b *MemBackend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls
	b.calls = nil
	return c
}

// Dev returns the device with index i (nil if none).
func (b *MemBackend) Dev(i uint32) *MemDev {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.devs {
		if d.Dev.Index == i {
			return d
		}
	}
	return nil
}

// Update runs fn on a device under the backend's lock.
func (b *MemBackend) Update(i uint32, fn func(*MemDev)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.devs {
		if d.Dev.Index == i {
			fn(d)
		}
	}
}

func (b *MemBackend) find(c Caller, d Device) (*MemDev, error) {
	for _, m := range b.devs {
		if m.Dev.Index == d.Index && m.Dev.NetNS == c.NetNS {
			return m, nil
		}
	}
	return nil, unix.ENODEV
}

func (b *MemBackend) port(c Caller, d Device) (*MemDev, error) {
	m, err := b.find(c, d)
	if err != nil {
		return nil, err
	}
	if !m.Port {
		return nil, unix.EOPNOTSUPP
	}
	return m, nil
}

func (b *MemBackend) record(format string, args ...any) {
	b.calls = append(b.calls, fmt.Sprintf(format, args...))
}

func (b *MemBackend) Devices(ctx context.Context, c Caller) ([]Device, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Device
	for _, d := range b.devs {
		if d.Dev.NetNS == c.NetNS {
			out = append(out, d.Dev)
		}
	}
	return out, nil
}

func (b *MemBackend) DeviceByIndex(ctx context.Context, c Caller, ifindex uint32) (Device, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.devs {
		if d.Dev.Index == ifindex && d.Dev.NetNS == c.NetNS {
			return d.Dev, nil
		}
	}
	return Device{}, fmt.Errorf("ifindex %d: %w", ifindex, unix.ENODEV)
}

func (b *MemBackend) DeviceByName(ctx context.Context, c Caller, name string) (Device, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.devs {
		if d.Dev.Name == name && d.Dev.NetNS == c.NetNS {
			return d.Dev, nil
		}
	}
	return Device{}, unix.ENODEV
}

func (b *MemBackend) StringSet(ctx context.Context, c Caller, d Device, set uint32) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return nil, err
	}
	if s, ok := m.StringSets[set]; ok {
		return slices.Clone(s), nil
	}
	switch set {
	case 1: // ETH_SS_STATS
		names := make([]string, len(m.Stats))
		for i, s := range m.Stats {
			names[i] = s.Name
		}
		return names, nil
	case 2: // ETH_SS_PRIV_FLAGS
		return slices.Clone(m.Names), nil
	}
	return nil, unix.EOPNOTSUPP
}

func (b *MemBackend) PrivFlags(ctx context.Context, c Caller, d Device) (PrivFlags, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return PrivFlags{}, err
	}
	return PrivFlags{Names: slices.Clone(m.Names), Flags: m.Flags}, nil
}

// History returns and clears the states after each successful driver call
// (a request that changed rings, channels or private flags), in order, as "rings mana0 rx=1024 tx=1024",
// "channels mana0 combined=4" and "privflags mana0 0x1".
func (b *MemBackend) History() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.hist
	b.hist = nil
	return h
}

// memUpdate applies u to *v under b.mu as a driver would: Apply, then for a
// change the driver call drv (nil = store), the history and Changed.
func memUpdate[T any](b *MemBackend, m *MemDev, v *T, u Update[T], call func(T) string, drv func(T) T, hist func(T) string) error {
	next, mod, err := u.Apply(*v)
	if err != nil || !mod {
		return err
	}
	b.record("%s", call(next))
	if m.SetErr != nil {
		return m.SetErr
	}
	if drv != nil {
		next = drv(next)
	}
	*v = next
	b.hist = append(b.hist, hist(*v))
	if u.Changed != nil {
		u.Changed(*v)
	}
	return nil
}

func (b *MemBackend) SetPrivFlags(ctx context.Context, c Caller, d Device, u Update[PrivFlags]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	next, mod, err := u.Apply(PrivFlags{Names: slices.Clone(m.Names), Flags: m.Flags})
	if err != nil || !mod {
		return err
	}
	b.record("SetPrivFlags %s %#x", d.Name, next.Flags)
	if m.SetErr != nil {
		return m.SetErr
	}
	m.Flags = next.Flags
	b.hist = append(b.hist, fmt.Sprintf("privflags %s %#x", d.Name, m.Flags))
	if u.Changed != nil {
		u.Changed(PrivFlags{Names: slices.Clone(m.Names), Flags: m.Flags})
	}
	return nil
}

func (b *MemBackend) Rings(ctx context.Context, c Caller, d Device) (Rings, error) {
	if b.Hook != nil {
		if err := b.Hook(ctx, "Rings"); err != nil {
			return Rings{}, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return Rings{}, err
	}
	return m.Rings, nil
}

func (b *MemBackend) SetRings(ctx context.Context, c Caller, d Device, u Update[Rings]) error {
	if b.Hook != nil {
		if err := b.Hook(ctx, "SetRings"); err != nil {
			return err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	return memUpdate(b, m, &m.Rings, u,
		func(r Rings) string { return fmt.Sprintf("SetRings %s rx=%d tx=%d", d.Name, r.Rx, r.Tx) },
		// Like mana_set_ringparam: sizes round up to a power of two.
		func(r Rings) Rings { r.Rx, r.Tx = roundPow2(r.Rx), roundPow2(r.Tx); return r },
		func(r Rings) string { return fmt.Sprintf("rings %s rx=%d tx=%d", d.Name, r.Rx, r.Tx) })
}

func roundPow2(v uint32) uint32 {
	p := uint32(1)
	for p < v {
		p <<= 1
	}
	return p
}

func (b *MemBackend) Channels(ctx context.Context, c Caller, d Device) (Channels, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return Channels{}, err
	}
	return m.Channels, nil
}

func (b *MemBackend) SetChannels(ctx context.Context, c Caller, d Device, u Update[Channels]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	apply := u.Apply
	u.Apply = func(ch Channels) (Channels, bool, error) { // ethtool_check_max_channel's RSS half
		next, mod, err := apply(ch)
		if err == nil && mod {
			err = CheckRSSChannels(m.rss(), next)
		}
		return next, mod, err
	}
	return memUpdate(b, m, &m.Channels, u,
		func(ch Channels) string { return fmt.Sprintf("SetChannels %s combined=%d", d.Name, ch.Combined) },
		nil,
		func(ch Channels) string { return fmt.Sprintf("channels %s combined=%d", d.Name, ch.Combined) })
}

func (b *MemBackend) info(m *MemDev) PortInfo {
	p := m.Info
	p.Device = m.Dev
	p.PrivFlags = m.Flags
	p.PrivFlagNames = slices.Clone(m.Names)
	p.Faults = slices.Clone(m.Faults)
	if m.XDP.Builtin != "" {
		p.XDP = m.XDP.Builtin
	} else if m.XDP.Object != nil {
		p.XDP = "ebpf:" + m.XDP.Name
	}
	return p
}

func (b *MemBackend) Ports(ctx context.Context, c Caller) ([]PortInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []PortInfo
	for _, m := range b.devs {
		if m.Port && m.Dev.NetNS == c.NetNS {
			out = append(out, b.info(m))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device.Index > out[j].Device.Index }) // server sorts
	return out, nil
}

func (b *MemBackend) Port(ctx context.Context, c Caller, d Device) (PortInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return PortInfo{}, err
	}
	return b.info(m), nil
}

func (b *MemBackend) CreatePort(ctx context.Context, c Caller, s PortSpec) (PortInfo, error) {
	if s.Name == "" {
		return PortInfo{}, Errorf(unix.EINVAL, "port name required")
	}
	if _, err := b.DeviceByName(ctx, c, s.Name); err == nil {
		return PortInfo{}, Errorf(unix.EEXIST, "port %q exists", s.Name)
	}
	m := b.AddPort(c.NetNS, s.Name)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("CreatePort %s mtu=%d", s.Name, s.MTU)
	if s.MTU != 0 {
		m.Info.MTU = s.MTU
	}
	if s.MAC != nil {
		m.Info.MAC = s.MAC
	}
	m.Info.Segment, m.Info.NetNSName, m.Info.Persistent = s.Segment, s.NetNS, s.Persistent
	m.Info.MemoryBudget, m.Flags = s.MemoryBudget, s.PrivFlags
	return b.info(m), nil
}

func (b *MemBackend) DeletePort(ctx context.Context, c Caller, d Device) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	b.record("DeletePort %s", d.Name)
	b.devs = slices.DeleteFunc(b.devs, func(x *MemDev) bool { return x == m })
	return nil
}

func (b *MemBackend) SetMTU(ctx context.Context, c Caller, d Device, mtu uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	b.record("SetMTU %s %d", d.Name, mtu)
	if mtu < m.Info.MinMTU || mtu > m.Info.MaxMTU {
		return Errorf(unix.EINVAL, "mtu %d out of range [%d, %d]", mtu, m.Info.MinMTU, m.Info.MaxMTU)
	}
	m.Info.MTU = mtu
	return nil
}

func (b *MemBackend) AttachXDP(ctx context.Context, c Caller, d Device, p XDPProgram) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	b.record("AttachXDP %s builtin=%s object=%d", d.Name, p.Builtin, len(p.Object))
	m.XDP = p
	return nil
}

func (b *MemBackend) DetachXDP(ctx context.Context, c Caller, d Device) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	b.record("DetachXDP %s", d.Name)
	m.XDP = XDPProgram{}
	return nil
}

func (b *MemBackend) Stats(ctx context.Context, c Caller, d Device) ([]Stat, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return nil, err
	}
	return slices.Clone(m.Stats), nil
}

func (b *MemBackend) PlanLayout(ctx context.Context, c Caller, r LayoutRequest) ([]RxBufLayout, error) {
	rules := r.Rules
	if len(rules) == 0 {
		rules = []string{"upstream"}
	}
	var out []RxBufLayout
	for _, rule := range rules {
		// Mirrors the headroom rule of mana_get_rxbuf_cfg, enough to test the
		// wire format.
		buf := (r.MTU + 334 + 256 + 63) &^ 63
		l := RxBufLayout{Rule: rule, PageSize: r.PageSize, MTU: r.MTU, XDP: r.XDP, FullPageRx: r.FullPageRx,
			DataSize: r.MTU + 14, Headroom: 256, BufSize: buf, RingSize: r.RingSize, Queues: r.Queues}
		if r.PageSize/buf < 2 || r.XDP || r.FullPageRx {
			l.Single, l.FragCount, l.Reason = true, 1, "single buffer per page"
		} else {
			l.FragCount, l.Reason = r.PageSize/buf, "fragments"
		}
		out = append(out, l)
	}
	return out, nil
}

func (b *MemBackend) SetFault(ctx context.Context, c Caller, d Device, f Fault) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return err
	}
	b.record("SetFault %s %s %s %d", d.Name, f.Point, f.Mode, f.Count)
	m.Faults = slices.DeleteFunc(m.Faults, func(x Fault) bool { return x.Point == f.Point })
	if f.Mode != "off" {
		m.Faults = append(m.Faults, f)
	}
	return nil
}

// Ops returns b as a Backend with every op.
func (b *MemBackend) Ops() Backend {
	return Backend{
		Devices: b.Devices, DeviceByIndex: b.DeviceByIndex, DeviceByName: b.DeviceByName,
		StringSet: b.StringSet, PrivFlags: b.PrivFlags, SetPrivFlags: b.SetPrivFlags,
		Rings: b.Rings, SetRings: b.SetRings, Channels: b.Channels, SetChannels: b.SetChannels,
		Coalesce: b.Coalesce, SetCoalesce: b.SetCoalesce, RSS: b.RSS, SetRSS: b.SetRSS,
		Features: b.Features, SetFeatures: b.SetFeatures,
		LinkSettings: b.LinkSettings, LinkState: b.LinkState, TSInfo: b.TSInfo,
		Ports: b.Ports, Port: b.Port, CreatePort: b.CreatePort, DeletePort: b.DeletePort,
		SetMTU: b.SetMTU, AttachXDP: b.AttachXDP, DetachXDP: b.DetachXDP, Stats: b.Stats,
		PlanLayout: b.PlanLayout, SetFault: b.SetFault,
		NetdevPort: b.NetdevPort,
	}
}

func (b *MemBackend) LinkSettings(ctx context.Context, c Caller, d Device) (LinkSettings, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return LinkSettings{}, err
	}
	return m.Link, nil
}

func (b *MemBackend) LinkState(ctx context.Context, c Caller, d Device) (LinkState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.port(c, d)
	if err != nil {
		return LinkState{}, err
	}
	return LinkState{Link: m.Carrier}, nil
}

func (b *MemBackend) TSInfo(ctx context.Context, c Caller, d Device) (TSInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.port(c, d); err != nil {
		return TSInfo{}, err
	}
	return TSInfo{PHCIndex: -1}, nil
}
