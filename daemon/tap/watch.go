package tap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	mdnl "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// LinkEvent is the TAP's link state after a change that rtnetlink reported.
type LinkEvent struct {
	LinkState
	// Features are the TAP's kernel features (Device.Features), read with the first event, after
	// an overrun, and whenever rtnetlink reports that they changed (an RTM_NEWLINK with
	// IFLA_EVENT_FEATURES, which netdev_features_change sends: ethtool -K does).
	Features Features
	// Deleted is set on the last event, when the TAP was deleted (RTM_DELLINK); the channel is
	// closed after it.
	Deleted bool
	// keepFeatures says Features were not read for this event: they are the last event's.
	keepFeatures bool
}

// same reports whether two events carry the same state, so duplicates can be suppressed.
func (e LinkEvent) same(o LinkEvent) bool {
	return e.Name == o.Name && e.Index == o.Index && e.Up == o.Up && e.MTU == o.MTU &&
		bytes.Equal(e.MAC, o.MAC) && e.Alias == o.Alias && e.Features == o.Features && e.Deleted == o.Deleted
}

// watchReadBuffer is the receive buffer the link watcher asks for: room for the notifications of
// about a thousand links changing at once (`ip -batch` bringing every port up), so that a burst
// rarely overruns. An overrun is still handled (see Watcher), this only makes it rare.
const watchReadBuffer = 4 << 20

// maxDumpTries bounds the dumps resync makes while changes keep interrupting them.
const maxDumpTries = 20

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	// Logger receives the watcher's log lines; nil means slog.Default().
	Logger *slog.Logger
	// ReadBuffer, when non-zero, is the notification socket's receive buffer in bytes (SO_RCVBUF,
	// which the kernel rounds up to its minimum). 0 asks for 4 MiB. Tests set a tiny one to force
	// overruns.
	ReadBuffer int
}

// Watcher follows every link of one network namespace through a single rtnetlink notification
// socket (RTNLGRP_LINK) and hands each watched TAP's changes to its watch, so that N ports in a
// namespace cost one socket and one parse per notification rather than N. When the socket
// overruns (ENOBUFS: the kernel dropped notifications), the Watcher re-reads every link of the
// namespace with one RTM_GETLINK dump and sends each watch the state it finds, or the deletion of
// a link that is gone: a lost notification never leaves a watch with a wrong state.
//
// A Watcher is shared by the Devices opened with it (Config.Watcher); its methods are safe for
// concurrent use.
type Watcher struct {
	nsh  *nsHandle // shared with the Devices opened with the Watcher
	ns   *netNS
	nl   *netlink.Handle // for the resync dump
	conn *mdnl.Conn
	log  *slog.Logger
	done chan struct{}

	mu     sync.Mutex
	subs   map[int][]*watch // by ifindex
	closed bool

	overruns atomic.Uint64
}

// NewWatcher starts a watcher of the links of the named network namespace ("" for the daemon's
// own). Close stops it.
//
// Errors: EINVAL or ENOENT for the namespace, as in Open; the kernel's errno when the
// notification socket cannot be opened.
func NewWatcher(netnsName string, opts WatcherOptions) (*Watcher, error) {
	nsh, err := openNSHandle(netnsName)
	if err != nil {
		return nil, err
	}
	w, err := newWatcher(nsh, opts)
	if err != nil {
		nsh.release()
		return nil, err
	}
	return w, nil
}

// newWatcher starts a watcher on nsh, taking over the caller's reference on success.
func newWatcher(nsh *nsHandle, opts WatcherOptions) (*Watcher, error) {
	ns := nsh.ns
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	conn, err := mdnl.Dial(unix.NETLINK_ROUTE, &mdnl.Config{
		Groups: 1 << (unix.RTNLGRP_LINK - 1),
		NetNS:  ns.fd(),
	})
	if err != nil {
		return nil, nlerr.Wrap(err, unix.EIO, "rtnetlink notifications in network namespace %q", ns.name)
	}
	if err := setReadBuffer(conn, opts.ReadBuffer); err != nil {
		conn.Close()
		return nil, nlerr.Wrap(err, unix.EIO, "receive buffer of the link watcher in network namespace %q", ns.name)
	}
	w := &Watcher{nsh: nsh, ns: ns, nl: nsh.nl, conn: conn, log: opts.Logger.With("netns", ns.name), done: make(chan struct{}),
		subs: map[int][]*watch{}}
	go w.run()
	return w, nil
}

// setReadBuffer sizes the socket's receive buffer: n bytes, or watchReadBuffer for 0. The larger
// default is forced past net.core.rmem_max when the daemon may (SO_RCVBUFFORCE, CAP_NET_ADMIN).
func setReadBuffer(conn *mdnl.Conn, n int) error {
	if n != 0 {
		return conn.SetReadBuffer(n)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, watchReadBuffer)
		if serr != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, watchReadBuffer)
		}
	}); err != nil {
		return err
	}
	return serr
}

// sameNS reports whether the watcher watches namespace ns.
func (w *Watcher) sameNS(ns *netNS) bool { return w.ns.dev == ns.dev && w.ns.ino == ns.ino }

// share returns the watcher's namespace handle, with a reference for the caller, when name
// names the namespace the watcher watches; nil for a nil Watcher. Errors: EINVAL when name names
// another namespace; ENODEV when the watcher is closed; the namespace's errors (openNetNS).
func (w *Watcher) share(name string) (*nsHandle, error) {
	if w == nil {
		return nil, nil
	}
	same, err := w.ns.isNamed(name)
	if err != nil {
		return nil, err
	}
	if !same {
		return nil, nlerr.New(unix.EINVAL, "the link watcher given watches another network namespace than %q", name)
	}
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed || !w.nsh.acquire() {
		return nil, nlerr.New(unix.ENODEV, "the link watcher of network namespace %q is closed", name)
	}
	return w.nsh, nil
}

// Overruns returns how many times the notification socket overran (each followed by a resync).
func (w *Watcher) Overruns() uint64 { return w.overruns.Load() }

// Close stops the watcher; every watch still subscribed ends (its channel is closed without a
// Deleted event). Closing twice is a no-op.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.conn.Close() // wakes run
	<-w.done
	return err
}

// watch is one subscription: the link with one ifindex, followed until it is deleted or the
// subscription ends.
type watch struct {
	index int
	// onEvent is called, in order, with every state that differs from the last one; from the
	// watcher's goroutine (or from subscribe, for the first), so it must not block.
	onEvent func(LinkEvent)
	// onEnd is called once when the subscription ends, after the last onEvent.
	onEnd func()

	mu    sync.Mutex
	last  LinkEvent
	ended bool
}

// deliver passes ev on unless it repeats the last state; it reports whether the watch ended
// (ev was the deletion).
func (s *watch) deliver(ev LinkEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return true
	}
	if ev.keepFeatures {
		ev.Features, ev.keepFeatures = s.last.Features, false
	}
	if !ev.same(s.last) {
		s.last = ev
		s.onEvent(ev)
	}
	if ev.Deleted {
		s.ended = true
		s.onEnd()
	}
	return ev.Deleted
}

// end finishes the subscription without a deletion event.
func (s *watch) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		s.onEnd()
	}
}

// subscribe registers a watch of ifindex index and sends it first state; it returns a function
// that ends the watch. Errors: ENODEV when the link does not exist (or the watcher is closed).
func (w *Watcher) subscribe(index int, first func() (LinkEvent, error), onEvent func(LinkEvent), onEnd func()) (func(), error) {
	s := &watch{index: index, onEvent: onEvent, onEnd: onEnd}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, nlerr.New(unix.ENODEV, "link watcher of network namespace %q is closed", w.ns.name)
	}
	w.subs[index] = append(w.subs[index], s)
	w.mu.Unlock()
	// The state is read only after subscribing, so no change can fall between the two: a
	// notification older than this read that is dispatched after it is followed, in order, by
	// the notification of the latest change, which carries the state read here or a newer one.
	ev, err := first()
	if err != nil {
		w.unsubscribe(s)
		return nil, err
	}
	s.deliver(ev)
	return func() { w.unsubscribe(s) }, nil
}

func (w *Watcher) unsubscribe(s *watch) {
	w.mu.Lock()
	rest := slices.DeleteFunc(slices.Clone(w.subs[s.index]), func(o *watch) bool { return o == s })
	if len(rest) == 0 {
		delete(w.subs, s.index)
	} else {
		w.subs[s.index] = rest
	}
	w.mu.Unlock()
	s.end()
}

// lookup returns the watches of ifindex index.
// The slice is never modified in place (unsubscribe replaces it), so it may be read unlocked.
func (w *Watcher) lookup(index int) []*watch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.subs[index]
}

func (w *Watcher) run() {
	defer close(w.done)
	defer w.endAll()
	for {
		msgs, err := w.conn.Receive()
		if err != nil {
			w.mu.Lock()
			closed := w.closed
			w.mu.Unlock()
			if closed {
				return
			}
			if errors.Is(err, unix.ENOBUFS) {
				// The socket overran: notifications were lost, so read every link again.
				n := w.overruns.Add(1)
				w.log.Warn("link notifications overran; re-reading every link", "overruns", n)
				w.resync()
				continue
			}
			w.log.Error("link watcher stopped", "err", err)
			return
		}
		for _, m := range msgs {
			w.handle(m)
		}
	}
}

// endAll ends every watch when the watcher stops, and releases the watcher's sockets.
func (w *Watcher) endAll() {
	w.mu.Lock()
	w.closed = true
	subs := w.subs
	w.subs = map[int][]*watch{}
	w.mu.Unlock()
	for _, ss := range subs {
		for _, s := range ss {
			s.end()
		}
	}
	w.conn.Close()
	w.nsh.release()
}

// handle dispatches one notification to the watch of its link. Links nobody watches cost only a
// look at the ifinfomsg header.
func (w *Watcher) handle(m mdnl.Message) {
	t := uint16(m.Header.Type)
	if t != unix.RTM_NEWLINK && t != unix.RTM_DELLINK {
		return
	}
	if len(m.Data) < unix.SizeofIfInfomsg {
		return
	}
	// struct ifinfomsg: family, pad, type (u16), index (s32), flags, change.
	index := int(int32(binary.NativeEndian.Uint32(m.Data[4:8])))
	subs := w.lookup(index)
	if len(subs) == 0 {
		return
	}
	hdr := unix.NlMsghdr{Len: m.Header.Length, Type: t, Flags: uint16(m.Header.Flags), Seq: m.Header.Sequence, Pid: m.Header.PID}
	l, err := netlink.LinkDeserialize(&hdr, m.Data)
	if err != nil || l.Attrs().Index != index {
		return
	}
	ev := LinkEvent{LinkState: linkState(l), keepFeatures: true}
	// RTM_DELLINK is also sent when the TAP leaves the namespace (MoveTo, or ip link set … netns
	// X): either way it is gone from where this watcher looks.
	ev.Deleted = t == unix.RTM_DELLINK
	if !ev.Deleted && linkEvent(m.Data[unix.SizeofIfInfomsg:]) == unix.IFLA_EVENT_FEATURES {
		w.readFeatures(&ev)
	}
	for _, s := range subs {
		if s.deliver(ev) {
			w.unsubscribe(s)
		}
	}
}

// linkEvent returns the IFLA_EVENT attribute of an RTM_NEWLINK's attributes b: what made the
// kernel send it (rtnl_get_event), IFLA_EVENT_NONE when absent.
func linkEvent(b []byte) uint32 {
	for len(b) >= unix.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if n < unix.SizeofRtAttr || n > len(b) {
			break
		}
		if typ == unix.IFLA_EVENT && n >= unix.SizeofRtAttr+4 {
			return binary.NativeEndian.Uint32(b[unix.SizeofRtAttr:])
		}
		b = b[min((n+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1), len(b)):]
	}
	return unix.IFLA_EVENT_NONE
}

// readFeatures fills in the features of the link ev describes, by its name in the notification.
// When they cannot be read (the link was deleted or renamed since) ev keeps the last ones: a
// deletion's notification follows, and a rename does not change them.
func (w *Watcher) readFeatures(ev *LinkEvent) {
	f, err := w.nsh.feat.read(ev.Name)
	if err != nil {
		w.log.Debug("link watcher: reading features failed", "link", ev.Name, "err", err)
		return
	}
	ev.Features, ev.keepFeatures = f, false
}

// resync re-reads every link of the namespace (one RTM_GETLINK dump) after an overrun and sends
// each watch what it finds; a watched link missing from the dump was deleted meanwhile.
//
// The kernel reports the overrun before the notifications still queued, and those are older than
// the dump: dispatched after it they would put stale states last (a port left down that the
// administrator brought up). So the queue is emptied first. A notification queued after the
// drain is older than the dump only if the change it reports was followed by another before the
// dump, whose notification then comes after it: the last state dispatched is the newest.
func (w *Watcher) resync() {
	if err := w.drain(); err != nil {
		w.log.Error("link watcher: emptying the notification queue failed", "err", err)
	}
	// The watches are taken before the dump: one subscribed during it reads its own first
	// state, and its link may be missing from a dump that began before the link existed.
	w.mu.Lock()
	subs := make([]*watch, 0, len(w.subs))
	for _, ss := range w.subs {
		subs = append(subs, ss...)
	}
	w.mu.Unlock()
	// A dump that a change interrupted (NLM_F_DUMP_INTR) may miss links or show old states:
	// it is no base to declare a link deleted. Dump again.
	links, err := w.nl.LinkList()
	for try := 1; errors.Is(err, netlink.ErrDumpInterrupted) && try < maxDumpTries; try++ {
		links, err = w.nl.LinkList()
	}
	if err != nil {
		// Without the dump nothing can be trusted; the next overrun or change tries again,
		// and the error is loud.
		w.log.Error("link watcher: re-reading the links failed", "err", err)
		return
	}
	byIndex := make(map[int]netlink.Link, len(links))
	for _, l := range links {
		byIndex[l.Attrs().Index] = l
	}
	for _, s := range subs {
		var ev LinkEvent
		if l, ok := byIndex[s.index]; ok {
			ev = LinkEvent{LinkState: linkState(l), keepFeatures: true}
			w.readFeatures(&ev)
		} else {
			s.mu.Lock()
			ev = s.last
			s.mu.Unlock()
			ev.Deleted = true
		}
		if s.deliver(ev) {
			w.unsubscribe(s)
		}
	}
}

// drain discards every notification queued on the socket, without waiting for more.
func (w *Watcher) drain() error {
	rc, err := w.conn.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			_, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
			switch {
			case err == nil, errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.EINTR):
				// ENOBUFS: more were dropped meanwhile; the dump covers them too.
			case errors.Is(err, unix.EAGAIN):
				return
			default:
				rerr = err
				return
			}
		}
	}); err != nil {
		return err
	}
	return rerr
}

// Watch follows the TAP's link state through rtnetlink notifications (RTNLGRP_LINK) in the TAP's
// namespace: what `ip link set … up|down|mtu N|address …|name NEW` does to it, and its kernel
// features (`ethtool -K`, LinkEvent.Features), whoever does it, manad included. The first event is the current state. After that an event is sent whenever the
// state differs from the last one sent. The TAP is followed by its ifindex, so a rename is an
// event with the new Name (and Name reports it from then on).
//
// The notifications come from the Config.Watcher the device was opened with, shared with the
// other TAPs of the namespace, or else from a watcher of this call's own. Events are
// level-triggered snapshots, coalesced when the reader falls behind: the channel holds at most
// one event, and a newer state replaces an unread older one, so the reader always sees the
// latest state and never blocks the watcher. The channel is closed when ctx ends, when the device
// is closed, after the Deleted event when the TAP is deleted (or moved away), when the Watcher is
// closed, or when the notification socket fails beyond recovery (logged). Overruns (ENOBUFS) are
// recovered by re-reading every link. The watcher blocks on the netpoller and uses no CPU while
// nothing changes.
//
// Errors: ENODEV after Close, or when the TAP no longer exists; the kernel's errno when the
// notification socket cannot be opened.
func (d *Device) Watch(ctx context.Context) (<-chan LinkEvent, error) {
	if err := d.rlock(); err != nil {
		return nil, err
	}
	defer d.mu.RUnlock()
	w, own := d.watcher, false
	if w == nil || !w.sameNS(d.ns) {
		// A watcher of this watch's own, sharing the device's namespace handle.
		if !d.nsh.acquire() {
			return nil, nlerr.New(unix.ENODEV, "TAP %s is closed", d.Name())
		}
		var err error
		if w, err = newWatcher(d.nsh, WatcherOptions{Logger: d.cfg.Logger}); err != nil {
			d.nsh.release()
			return nil, err
		}
		own = true
	}
	ch := make(chan LinkEvent, 1)
	ended := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	first := func() (LinkEvent, error) {
		l, err := d.nl.LinkByIndex(d.index)
		if err != nil {
			if errors.As(err, &netlink.LinkNotFoundError{}) {
				return LinkEvent{}, nlerr.New(unix.ENODEV, "TAP %s (ifindex %d) no longer exists", d.Name(), d.index)
			}
			return LinkEvent{}, nlerr.Wrap(err, unix.EIO, "get link %s", d.Name())
		}
		ev := LinkEvent{LinkState: linkState(l), keepFeatures: true}
		w.readFeatures(&ev)
		return ev, nil
	}
	onEvent := func(ev LinkEvent) {
		if !ev.Deleted && ev.Name != "" {
			d.setName(ev.Name)
		}
		sendLatest(ch, ev)
	}
	unsub, err := w.subscribe(d.index, first, onEvent, func() { close(ended) })
	if err != nil {
		cancel()
		if own {
			w.Close()
		}
		return nil, err
	}
	d.addWatch(ch, cancel)
	go func() {
		select {
		case <-ctx.Done():
		case <-ended:
		}
		unsub()
		cancel()
		if own {
			w.Close()
		}
		d.removeWatch(ch)
		close(ch)
	}()
	return ch, nil
}

// sendLatest puts ev in the one-slot channel, replacing an event the reader has not taken yet.
// Only one goroutine sends on ch (calls are serialized by the watch's lock).
func sendLatest(ch chan LinkEvent, ev LinkEvent) {
	for {
		select {
		case ch <- ev:
			return
		default:
		}
		select {
		case <-ch: // drop the stale snapshot
		default:
		}
	}
}

func (d *Device) addWatch(ch chan LinkEvent, cancel context.CancelFunc) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if d.watches == nil {
		d.watches = map[chan LinkEvent]context.CancelFunc{}
	}
	d.watches[ch] = cancel
}

func (d *Device) removeWatch(ch chan LinkEvent) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	delete(d.watches, ch)
}

// stopWatches ends every watch (Close does, so no watch outlives its device).
func (d *Device) stopWatches() {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for _, cancel := range d.watches {
		cancel()
	}
}
