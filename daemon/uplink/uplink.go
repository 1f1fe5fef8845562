// Package uplink attaches an existing kernel netdev — a VXLAN or Geneve device, a veth into a
// bridge, a physical NIC — to a wire segment, so that a segment can span hosts: the kernel does
// the overlay, the bridging and the wire, manad only plugs its segment into it (issue 12).
//
// An Uplink opens an AF_PACKET socket on the device in its network namespace, with a TPACKET_V2
// RX ring mapped into memory, PACKET_QDISC_BYPASS for transmission and PACKET_IGNORE_OUTGOING so
// that what it sends never comes back to it. It follows the device through rtnetlink: when the
// device goes down or disappears the uplink is reported down (logs, Status) and frames to it are
// dropped and counted; when it is back (the same name, possibly a new device) the uplink
// re-attaches. Traffic between the segment's local ports is never affected. An uplink in a named
// namespace also follows the namespace: when it is deleted (`ip netns del`) the uplink releases
// every socket it holds there, so that the namespace and the device can go, and attaches again
// once a namespace of that name is added back with the device (netns.go).
//
// With Config.Attach = AttachXDP (or AttachAuto, on a device with AF_XDP zero-copy) the uplink
// uses an AF_XDP socket per RX queue instead (xsk.go): an XDP program redirects each queue into
// its socket. The default is AF_PACKET, which works on every device; AF_XDP takes devices whose MTU
// fits a UMEM chunk, with at most xskMaxQueues RX queues.
package uplink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mdnl "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/offload"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/genl/wire"
)

// State is an uplink's attachment state.
type State int

const (
	// Absent: no device of that name in the namespace.
	Absent State = iota
	// Down: the device exists but is not up and running (no carrier, or set down).
	Down
	// Up: attached; frames flow.
	Up
	// Failed: the device is up but attaching to it failed (Status.Err says why); the next
	// change of the device retries.
	Failed
)

func (s State) String() string {
	switch s {
	case Absent:
		return "absent"
	case Down:
		return "down"
	case Up:
		return "up"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Config describes an uplink.
type Config struct {
	Dev   string // the device's name
	NetNS string // named network namespace (/run/netns/NAME) of the device; "" = manad's own
	// MTU caps the payload of frames sent out (0: the device's MTU; the device's applies when
	// smaller).
	MTU     int
	Segment *datapath.Segment
	Logger  *slog.Logger // nil: slog.Default()
	// Attach chooses the socket: AttachPacket ("" too), AttachXDP, or AttachAuto (AF_XDP
	// when the device offers AF_XDP zero-copy and takes the sockets, else AF_PACKET, logged
	// once with the reason).
	Attach string
	// BusyPoll is how long the RX loop keeps polling its ring after it found frames before
	// it parks (busypoll.go; an AF_XDP socket also gets the kernel's SO_BUSY_POLL for it); 0:
	// off. At most MaxBusyPoll, whole microseconds.
	BusyPoll time.Duration
	// Pollers bounds the busy-polling readers of the daemon (the segments' own,
	// datapath.Segments.Pollers): the RX loop polls only while it holds one of its slots. nil:
	// the uplink never polls.
	Pollers *datapath.Pollers
}

// Attachment modes (Config.Attach, Status.Attach): the wire's names.
const (
	AttachAuto   = wire.UplinkAttachAuto
	AttachPacket = wire.UplinkAttachPacket
	AttachXDP    = wire.UplinkAttachXDP
)

// Name names the uplink in logs and FDB listings: "hostA/vx0", or "vx0" in manad's namespace.
func (c *Config) Name() string {
	if c.NetNS == "" {
		return c.Dev
	}
	return c.NetNS + "/" + c.Dev
}

// Status is an uplink's state, for display.
type Status struct {
	Name    string
	State   State
	Index   int    // the device's ifindex while Up
	MTU     int    // what frames sent out may carry (the device's MTU, capped by Config.MTU)
	Err     string // why the last attach failed (Failed)
	Changes uint64 // state changes since Start
	// MaxPortMTU is the largest port MTU the uplink carries whole, and what it lets out: MTU,
	// or less for a VXLAN device bound to a lower device whose MTU leaves less room after the
	// encapsulation (see tunnelMTU).
	MaxPortMTU int
	Kind       string // the device's rtnetlink kind ("vxlan", "geneve", "veth", "bridge", …)
	// Attach is the socket in use while Up (the last one used otherwise): AttachPacket or
	// AttachXDP; "" before the first attach.
	Attach string
	// XDPMode says how an AF_XDP attachment runs: "native copy", "native zero-copy" or
	// "generic copy"; "" for AF_PACKET.
	XDPMode string
	// Fallback is why AttachAuto fell back to AF_PACKET (the probe's error), "" otherwise.
	Fallback string
}

// Stats are an uplink's counters: the segment's view (datapath.UplinkStats) and the device
// side's.
type Stats struct {
	datapath.UplinkStats
	// RxOversize counts received frames beyond the device's MTU that are not TCP aggregates,
	// dropped.
	RxOversize uint64
	// RxSegmented counts received TCP aggregates (GSO/GRO) cut into MTU-sized frames.
	RxSegmented uint64
	// RxTruncated counts frames the kernel could not hand over whole (beyond maxFrame, or with
	// the socket queue full), dropped.
	RxTruncated uint64
	// RxChecksumFilled counts frames whose TCP/UDP checksum was left to offload by a local
	// stack and filled in by manad.
	RxChecksumFilled uint64
	// Attaches counts how often the socket was opened on the device.
	Attaches uint64
	// Polling is what the RX loops did while busy-polling (Config.BusyPoll): the polls (each
	// window the loop polled instead of parking), the hits (polls that found frames before
	// the window ended) and the time spent polling, on a CPU.
	Polling datapath.PollStats
	// XSK* are the AF_XDP socket's own drop counters (XDP_STATISTICS) of the current
	// attachment: frames dropped for want of a chunk or beyond one, RX ring full, fill ring
	// empty.
	XSKRxDropped, XSKRxRingFull, XSKFillEmpty uint64
}

// Uplink is one running uplink. Its methods are safe for concurrent use.
type Uplink struct {
	cfg Config
	log *slog.Logger
	dp  *datapath.Uplink

	// The namespace and the rtnetlink sockets in it, owned by the supervising goroutine (and
	// Start, before it runs; Close, after): none while the namespace is missing. nsID is the
	// namespace's identity, to tell when /run/netns/NAME no longer names it.
	ns   netns.NsHandle
	nl   *netlink.Handle
	conn *mdnl.Conn
	nsID nsIdentity

	sock   atomic.Pointer[attachment]
	devMTU atomic.Int64

	// Owned by the supervising goroutine (and Start, before it runs).
	index   int
	rxDone  chan struct{}
	gro     bool               // GRO was on before the attachment switched it off
	scratch []byte             // the frame with its VLAN tag put back
	seg     *offload.Segmenter // cuts GSO aggregates, one segment at a time

	mu     sync.Mutex
	status Status

	rxOversize, rxSegmented, rxTruncated, rxCsum, attaches atomic.Uint64
	poll                                                   pollCounters
	fallbackLogged                                         bool // owned like index
	nsCheckFailed                                          bool // owned like index: netnsGone said it cannot look

	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// netnsRetry is how often an uplink whose network namespace does not exist yet looks again, and
// netnsCheck how often one in a named namespace checks that the namespace is still there
// (netnsGone): a namespace gives no notice of its creation that could be waited for (`ip netns
// add` creates the file, then mounts the namespace over it), nor of its deletion while manad's
// sockets hold it.
const (
	netnsRetry = 2 * time.Second
	netnsCheck = time.Second
)

// Start attaches the uplink to cfg.Segment and follows its device until ctx ends or Close. The
// device need not exist or be up yet, nor its network namespace: the uplink attaches when they
// are there (Status says what it waits for).
//
// Errors: EINVAL for a config without a device name or segment, or with a BusyPoll
// CheckBusyPoll refuses; the errno of opening the
// namespace (other than its not existing) or the rtnetlink socket.
func Start(ctx context.Context, cfg Config) (*Uplink, error) {
	if cfg.Dev == "" || cfg.Segment == nil {
		return nil, nlerr.New(unix.EINVAL, "uplink needs a device and a segment")
	}
	if err := CheckBusyPoll(cfg.BusyPoll); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	u := &Uplink{cfg: cfg, log: cfg.Logger.With("uplink", cfg.Name(), "segment", cfg.Segment.Name()), ns: -1, done: make(chan struct{})}
	u.status = Status{Name: cfg.Name(), State: Absent}
	err := u.open()
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return nil, err
	}
	u.dp = cfg.Segment.AttachUplink(cfg.Name(), u.write)
	u.ctx, u.cancel = context.WithCancel(ctx)
	opened := err == nil
	if opened {
		u.evaluate()
		if st := u.Status(); st.State == Absent || st.State == Down {
			// setState only logs changes: say why the uplink does not carry frames yet.
			u.log.Warn("uplink waiting for its device", "state", st.State.String())
		}
	} else {
		u.mu.Lock()
		u.status.Err = err.Error()
		u.mu.Unlock()
		u.log.Warn("uplink waiting for its network namespace", "netns", cfg.NetNS, "retry", netnsRetry)
	}
	go func() {
		defer close(u.done)
		if opened || u.waitNetNS() {
			u.run()
		}
	}()
	return u, nil
}

// open opens the namespace, the rtnetlink notification socket and the rtnetlink handle in it.
// Errors: ENOENT (wrapped) when the namespace does not exist (yet).
func (u *Uplink) open() error {
	cfg := &u.cfg
	var ns netns.NsHandle
	var err error
	if cfg.NetNS == "" {
		ns, err = netns.Get()
	} else {
		ns, err = openNetNS(filepath.Join("/run/netns", cfg.NetNS))
	}
	if err != nil {
		return nlerr.Wrap(err, unix.ENOENT, "uplink %s: network namespace %q", cfg.Name(), cfg.NetNS)
	}
	// Subscribe before the first look, so no change falls between the two.
	conn, err := mdnl.Dial(unix.NETLINK_ROUTE, &mdnl.Config{Groups: 1 << (unix.RTNLGRP_LINK - 1), NetNS: int(ns)})
	if err != nil {
		ns.Close()
		return nlerr.Wrap(err, unix.EIO, "uplink %s: rtnetlink notifications", cfg.Name())
	}
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		conn.Close()
		ns.Close()
		return nlerr.Wrap(err, unix.EIO, "uplink %s: rtnetlink", cfg.Name())
	}
	id, err := nsIdentityOf(ns)
	if err != nil {
		nl.Close()
		conn.Close()
		ns.Close()
		return nlerr.Wrap(err, unix.EIO, "uplink %s: network namespace %q", cfg.Name(), cfg.NetNS)
	}
	u.ns, u.conn, u.nl, u.nsID = ns, conn, nl, id
	return nil
}

// closeNS closes what open opened: nothing of the namespace is held afterwards.
func (u *Uplink) closeNS() {
	if u.nl != nil {
		u.nl.Close()
		u.nl = nil
	}
	if u.conn != nil {
		u.conn.Close()
		u.conn = nil
	}
	if u.ns.IsOpen() {
		u.ns.Close()
		u.ns = -1
	}
}

// openNetNS opens the namespace file at path, refusing a file that is not (yet) a namespace:
// `ip netns add` creates it as an empty file before it mounts the namespace over it.
func openNetNS(path string) (netns.NsHandle, error) {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return h, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(h), &st); err != nil || st.Type != unix.NSFS_MAGIC {
		h.Close()
		return -1, unix.ENOENT
	}
	return h, nil
}

// waitNetNS retries open until it succeeds (true) or the uplink is closed (false).
func (u *Uplink) waitNetNS() bool {
	tick := time.NewTicker(netnsRetry)
	defer tick.Stop()
	for {
		select {
		case <-u.ctx.Done():
			return false
		case <-tick.C:
		}
		err := u.open()
		if err == nil {
			u.log.Info("uplink's network namespace appeared", "netns", u.cfg.NetNS)
			u.mu.Lock()
			u.status.Err = ""
			u.mu.Unlock()
			u.evaluate()
			return true
		}
		if !errors.Is(err, unix.ENOENT) {
			u.log.Error("uplink gives up on its network namespace", "err", err)
			u.mu.Lock()
			u.status.State, u.status.Err = Failed, err.Error()
			u.mu.Unlock()
			return false
		}
	}
}

// run follows the device until the uplink is closed; when its namespace goes, it releases it and
// waits for the namespace to come back, then follows the device there.
func (u *Uplink) run() {
	for {
		reason := u.follow()
		if reason == "" {
			return
		}
		u.releaseNS(reason)
		if !u.waitNetNS() {
			return
		}
	}
}

// releaseNS lets go of a namespace that was deleted: the socket on the device, the rtnetlink
// sockets and the namespace's file descriptor are closed, each of which would keep the namespace
// (and with it the device) alive. The uplink is Absent, with reason as its error.
func (u *Uplink) releaseNS(reason string) {
	u.detach()
	u.closeNS()
	u.log.Warn("uplink released its network namespace", "netns", u.cfg.NetNS, "reason", reason)
	u.setState(Absent, 0, reason)
}

// Close stops following the device, detaches from it and from the segment (the device's GRO
// setting is put back). Closing twice is harmless.
func (u *Uplink) Close() {
	u.closeOnce.Do(func() {
		u.cancel()
		<-u.done
		u.detach()
		u.dp.Detach()
		u.closeNS()
		u.log.Info("uplink closed", "stats", fmt.Sprintf("%+v", u.Stats()))
	})
}

// Status returns the uplink's current state.
func (u *Uplink) Status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.status
}

// Stats returns the uplink's counters.
func (u *Uplink) Stats() Stats {
	st := Stats{
		UplinkStats: u.dp.Stats(), RxOversize: u.rxOversize.Load(), RxSegmented: u.rxSegmented.Load(), RxTruncated: u.rxTruncated.Load(),
		RxChecksumFilled: u.rxCsum.Load(), Attaches: u.attaches.Load(), Polling: u.poll.stats(),
	}
	if a := u.sock.Load(); a != nil && a.xsk != nil {
		if x, err := a.xsk.stats(); err == nil {
			st.XSKRxDropped, st.XSKRxRingFull, st.XSKFillEmpty = x.Rx_dropped, x.Rx_ring_full, x.Rx_fill_ring_empty_descs
		}
	}
	return st
}

// follow re-evaluates the device on every link notification of its namespace, and checks every
// netnsCheck that a named namespace is still there, until the uplink is closed (""), or the
// namespace is gone or the notification socket failed (why: run then lets go of the namespace
// and opens it afresh). The rtnetlink socket is closed when it returns.
func (u *Uplink) follow() (gone string) {
	changed := make(chan struct{}, 1)
	stopped := make(chan error, 1)
	conn := u.conn
	go func() { stopped <- u.receive(conn, changed) }()
	defer func() {
		conn.Close()
		u.conn = nil
		if stopped != nil {
			<-stopped
		}
	}()
	var tick <-chan time.Time
	if u.cfg.NetNS != "" {
		t := time.NewTicker(netnsCheck)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-u.ctx.Done():
			return ""
		case <-changed:
			u.evaluate()
		case err := <-stopped:
			stopped = nil
			if u.ctx.Err() != nil {
				return ""
			}
			// Start over, as for a namespace that went: the uplink must not stay attached
			// to a device it no longer follows.
			u.log.Error("uplink lost its link notifications", "err", err)
			return fmt.Sprintf("link notifications failed (%v); opening the namespace again", err)
		case <-tick:
			if why := u.netnsGone(); why != "" {
				return why
			}
		}
	}
}

// receive reads link notifications from conn and reports each batch that concerns links (or
// was lost) on changed, coalesced: the device is looked at afresh anyway. It returns the
// socket's error once it fails or is closed.
func (u *Uplink) receive(conn *mdnl.Conn, changed chan<- struct{}) error {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for {
		msgs, err := conn.Receive()
		if err != nil {
			var oe *mdnl.OpError
			if errors.As(err, &oe) && errors.Is(oe.Err, unix.ENOBUFS) {
				signal() // notifications were lost: look again
				continue
			}
			return err
		}
		for _, m := range msgs {
			if t := m.Header.Type; t == unix.RTM_NEWLINK || t == unix.RTM_DELLINK {
				signal()
				break
			}
		}
	}
}

// evaluate looks at the device and attaches or detaches accordingly.
func (u *Uplink) evaluate() {
	l, err := u.nl.LinkByName(u.cfg.Dev)
	if err != nil {
		if errors.As(err, &netlink.LinkNotFoundError{}) {
			u.detach()
			u.setState(Absent, 0, "")
			return
		}
		u.log.Error("uplink: looking up the device failed", "err", err)
		return
	}
	a := l.Attrs()
	mtu := a.MTU
	u.devMTU.Store(int64(mtu))
	if u.cfg.MTU > 0 {
		mtu = min(mtu, u.cfg.MTU)
	}
	// A frame beyond what the lower device carries after the encapsulation would be fragmented
	// outside, or dropped there uncounted: it is dropped and counted here, as a frame beyond the
	// device's MTU is.
	maxPort := min(mtu, u.tunnelMTU(l))
	u.dp.SetMTU(maxPort)
	u.mu.Lock()
	u.status.MTU, u.status.MaxPortMTU, u.status.Kind = mtu, maxPort, l.Type()
	u.mu.Unlock()
	const running = unix.IFF_UP | unix.IFF_RUNNING
	if a.RawFlags&running != running {
		u.detach()
		u.setState(Down, 0, "")
		return
	}
	if u.sock.Load() != nil && u.index == a.Index {
		return
	}
	u.detach() // a new device under the old name
	if err := u.attach(a); err != nil {
		u.setState(Failed, 0, err.Error())
		return
	}
	u.setState(Up, a.Index, "")
}

// Encapsulation overheads: outer Ethernet, IP, UDP and VXLAN headers (VXLAN_HEADROOM,
// VXLAN6_HEADROOM in include/net/vxlan.h).
const (
	vxlanOverhead4 = 14 + 20 + 8 + 8
	vxlanOverhead6 = 14 + 40 + 8 + 8
)

// tunnelMTU is the largest inner MTU a VXLAN device l can send without fragmenting on its lower
// device, as vxlan_config_apply computes the default MTU (lowerdev->mtu - VXLAN_HEADROOM): the
// device's own MTU may have been set higher. Devices without a known lower device: their MTU.
func (u *Uplink) tunnelMTU(l netlink.Link) int {
	mtu := l.Attrs().MTU
	vx, ok := l.(*netlink.Vxlan)
	if !ok || vx.VtepDevIndex <= 0 {
		return mtu
	}
	lower, err := u.nl.LinkByIndex(vx.VtepDevIndex)
	if err != nil {
		return mtu
	}
	over := vxlanOverhead4
	if ip := vx.Group; ip != nil && ip.To4() == nil {
		over = vxlanOverhead6
	} else if ip := vx.SrcAddr; ip != nil && ip.To4() == nil {
		over = vxlanOverhead6
	}
	return min(mtu, lower.Attrs().MTU-over)
}

func (u *Uplink) setState(s State, index int, errText string) {
	u.mu.Lock()
	old, oldErr := u.status.State, u.status.Err
	u.status.State, u.status.Index, u.status.Err = s, index, errText
	if old != s {
		u.status.Changes++
	}
	u.mu.Unlock()
	// Every link event of the namespace re-evaluates the device: log transitions and new
	// errors, not each repeat of the same failure.
	if old == s && (errText == "" || errText == oldErr) {
		return
	}
	switch s {
	case Up:
		st := u.Status()
		u.log.Info("uplink up", "ifindex", index, "mtu", u.dp.MTU(), "attach", st.Attach, "xdp_mode", st.XDPMode, "busy_poll", u.cfg.BusyPoll)
	case Failed:
		u.log.Error("uplink failed to attach", "err", errText)
	default:
		u.log.Warn("uplink "+s.String(), "was", old.String())
	}
}

// attachment is the socket an uplink is attached with: exactly one of pkt and xsk is set.
type attachment struct {
	pkt *packetSocket
	xsk *xskSocket
}

func (a *attachment) write(frame []byte) error {
	if a.xsk != nil {
		return a.xsk.write(frame)
	}
	return a.pkt.write(frame)
}

// ctlFD is a socket in the device's namespace for ethtool ioctls.
func (a *attachment) ctlFD() int {
	if a.xsk != nil {
		return a.xsk.ctl
	}
	return a.pkt.fd
}

func (a *attachment) close() {
	if a.xsk != nil {
		a.xsk.close()
		return
	}
	a.pkt.close()
}

func (a *attachment) release() {
	if a.xsk != nil {
		a.xsk.release()
		return
	}
	a.pkt.release()
}

// openSocket opens the socket Config.Attach asks for on device l. Errors: openPacket's and openXSK's.
func (u *Uplink) openSocket(l *netlink.LinkAttrs) (*attachment, error) {
	mode := u.cfg.Attach
	if mode == AttachXDP {
		x, err := openXSK(u.ns, l.Index, u.cfg.Dev, l.MTU, l.NumRxQueues)
		if err != nil {
			return nil, fmt.Errorf("AF_XDP: %w", err)
		}
		return u.attachedXSK(x), nil
	}
	if mode == AttachAuto {
		x, err := u.openAutoXSK(l)
		if err == nil {
			return u.attachedXSK(x), nil
		}
		if !u.fallbackLogged {
			u.fallbackLogged = true
			u.log.Info("uplink falls back to AF_PACKET", "reason", err.Error())
		}
		u.mu.Lock()
		u.status.Fallback = err.Error()
		u.mu.Unlock()
	}
	s, err := openPacket(u.ns, l.Index)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	u.status.Attach, u.status.XDPMode = AttachPacket, ""
	u.mu.Unlock()
	return &attachment{pkt: s}, nil
}

// attachedXSK records AF_XDP socket x as the uplink's attachment.
func (u *Uplink) attachedXSK(x *xskSocket) *attachment {
	m := x.mode + " copy"
	if x.zeroCopy {
		m = x.mode + " zero-copy"
	}
	u.mu.Lock()
	u.status.Attach, u.status.XDPMode, u.status.Fallback = AttachXDP, m, ""
	u.mu.Unlock()
	return &attachment{xsk: x}
}

// openAutoXSK is AttachAuto's AF_XDP socket on device l: only where the driver offers
// zero-copy. A copying AF_XDP socket (generic XDP, or a driver without XSK support: VXLAN,
// Geneve, veth) carries no GSO, so a TCP stream crosses it frame by frame at about a tenth of
// AF_PACKET's throughput, and it is no faster for small frames (bench/fabric measures both).
// The kernel says beforehand (xdp-features), so nothing is attached to a device that lacks it.
// Errors: why AF_PACKET serves instead, for the log and Status.Fallback.
func (u *Uplink) openAutoXSK(l *netlink.LinkAttrs) (*xskSocket, error) {
	zc, feats, err := xskZeroCopy(u.ctx, u.ns, l.Index)
	if err != nil {
		return nil, fmt.Errorf("AF_XDP zero-copy unknown (%w): AF_PACKET is at least as fast as a copying AF_XDP socket", err)
	}
	if !zc {
		f := strings.Join(feats, ",")
		if f == "" {
			f = "none"
		}
		return nil, fmt.Errorf("%s offers no AF_XDP zero-copy (xdp-features %s): a copying AF_XDP socket carries no GSO and is slower than AF_PACKET", u.cfg.Dev, f)
	}
	x, err := openXSK(u.ns, l.Index, u.cfg.Dev, l.MTU, l.NumRxQueues)
	if err != nil {
		return nil, err
	}
	if !x.zeroCopy {
		x.close()
		x.release()
		return nil, fmt.Errorf("%s offers AF_XDP zero-copy, but its sockets were bound copying (%s XDP): AF_PACKET is faster", u.cfg.Dev, x.mode)
	}
	return x, nil
}

// attach opens the socket on device l and starts receiving.
func (u *Uplink) attach(l *netlink.LinkAttrs) error {
	ifindex := l.Index
	s, err := u.openSocket(l)
	if err != nil {
		return err
	}
	if u.gro, err = setGRO(s.ctlFD(), u.cfg.Dev, false); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		// Frames the device merges are dropped and counted (RxOversize); say why.
		u.log.Warn("uplink: cannot switch GRO off; merged frames will be dropped", "err", err)
	}
	u.index = ifindex
	u.attaches.Add(1)
	if cap(u.scratch) == 0 {
		u.scratch = make([]byte, 0, maxFrame+8)
		u.seg = offload.NewSegmenter()
	}
	u.busyPoll(s)
	u.rxDone = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		var err error
		if s.xsk != nil {
			err = s.xsk.receive(u.onXSKFrame, u.dp.EndBatch)
		} else {
			err = s.pkt.receive(u.onFrame, u.dp.EndBatch)
		}
		if err != nil {
			u.log.Error("uplink receive failed", "err", err)
		}
	}(u.rxDone)
	u.sock.Store(s)
	if s.pkt != nil {
		u.dp.SetTxGSO(u.writeGSO)
	}
	u.dp.SetUp(true)
	return nil
}

// detach closes the socket, if any, once the RX goroutine is done with its ring.
func (u *Uplink) detach() {
	s := u.sock.Swap(nil)
	if s == nil {
		return
	}
	u.dp.SetUp(false)
	u.dp.SetTxGSO(nil)
	if u.gro {
		// Best effort: the device may be gone.
		_, _ = setGRO(s.ctlFD(), u.cfg.Dev, true)
	}
	s.close()
	<-u.rxDone
	s.release()
}

// write is the segment's transmit function.
func (u *Uplink) write(frame []byte) error {
	s := u.sock.Load()
	if s == nil {
		return unix.ENETDOWN
	}
	return s.write(frame)
}

// writeGSO is the segment's transmit function for coalesced runs (datapath.Uplink.SetTxGSO),
// on a packet socket.
func (u *Uplink) writeGSO(iov [][]byte) error {
	s := u.sock.Load()
	if s == nil || s.pkt == nil {
		return unix.ENETDOWN
	}
	return s.pkt.writeGSO(iov)
}

// onFrame handles a frame from the ring: the VLAN tag the kernel took off is put back, frames
// beyond the device's MTU are dropped, checksums left to offload are filled in.
func (u *Uplink) onFrame(frame []byte, wireLen int, status uint32, tci uint32, tpid uint16, vh vnetHdr) {
	if wireLen > len(frame) {
		u.rxTruncated.Add(1)
		return
	}
	if status&unix.TP_STATUS_VLAN_VALID != 0 && len(frame) >= 12 {
		if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 || tpid == 0 {
			tpid = 0x8100
		}
		b := append(u.scratch[:0], frame[:12]...)
		b = append(b, byte(tpid>>8), byte(tpid), byte(tci>>8), byte(tci))
		frame = append(b, frame[12:]...)
	}
	if mtu := int(u.devMTU.Load()); datapath.PayloadLen(frame) > mtu {
		// A GSO aggregate (TSO from a local stack through a veth and a bridge, or GRO): to
		// a port that takes it whole, else cut into the frames it stands for, as the kernel
		// would for a device without TSO. Anything else beyond the MTU is dropped.
		if frame[0]&1 == 0 && vh.gsoSize > 0 && vh.gsoSize <= 0xffff && u.dp.ReceiveWhole(frame, vh.gsoType, uint16(vh.gsoSize), mtu) {
			return
		}
		if frame[0]&1 == 0 && segmentAggregate(u.seg, frame, vh, mtu, u.dp.Receive) {
			u.rxSegmented.Add(1)
			return
		}
		u.rxOversize.Add(1)
		return
	}
	if status&unix.TP_STATUS_CSUMNOTREADY != 0 && offload.CompleteChecksum(frame) {
		u.rxCsum.Add(1)
	}
	u.dp.Receive(frame)
}

// onXSKFrame handles a frame from the AF_XDP RX ring: frames beyond the device's MTU are
// dropped. XDP does not say which frames a local stack left with a partial checksum (a packet
// socket's TP_STATUS_CSUMNOTREADY): offload.CompletePartialChecksum recognises them by the
// pseudo-header sum in the field.
func (u *Uplink) onXSKFrame(frame []byte) {
	if datapath.PayloadLen(frame) > int(u.devMTU.Load()) {
		u.rxOversize.Add(1)
		return
	}
	if offload.CompletePartialChecksum(frame) {
		u.rxCsum.Add(1)
	}
	u.dp.Receive(frame)
}

// busyPoll gives the RX loops of attachment a their busy poller (Config.BusyPoll), before they
// run. An AF_XDP socket also asks the kernel to busy-poll its device queue (setKernelBusyPoll);
// where the kernel refuses, the loop polls its ring alone (logged once per attachment).
func (u *Uplink) busyPoll(a *attachment) {
	if a.pkt != nil {
		a.pkt.bp = newBusyPoller(u.cfg.BusyPoll, u.cfg.Pollers, &a.pkt.closed, &u.poll)
		return
	}
	var refused error
	for _, q := range a.xsk.queues {
		q.bp = newBusyPoller(u.cfg.BusyPoll, u.cfg.Pollers, &q.closed, &u.poll)
		if q.bp == nil {
			continue
		}
		if err := setKernelBusyPoll(q.rxFD, u.cfg.BusyPoll, xskBudget); err != nil {
			refused = err
			continue
		}
		q.kernelPoll = true
	}
	if refused != nil {
		u.log.Warn("uplink: the kernel does not busy-poll the AF_XDP socket; manad polls its ring alone", "err", refused)
	}
}
