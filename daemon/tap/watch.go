package tap

import (
	"bytes"
	"context"
	"errors"
	"log/slog"

	mdnl "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic/extack"
)

// LinkEvent is the TAP's link state after a change that rtnetlink reported.
type LinkEvent struct {
	LinkState
	// Deleted is set on the last event, when the TAP was deleted (RTM_DELLINK); the channel is
	// closed after it.
	Deleted bool
}

// same reports whether two events carry the same state, so duplicates can be suppressed.
func (e LinkEvent) same(o LinkEvent) bool {
	return e.Name == o.Name && e.Index == o.Index && e.Up == o.Up && e.MTU == o.MTU &&
		bytes.Equal(e.MAC, o.MAC) && e.Alias == o.Alias && e.Deleted == o.Deleted
}

// Watch follows the TAP's link state through rtnetlink notifications (RTNLGRP_LINK) in the TAP's
// namespace: what `ip link set … up|down|mtu N|address …` does to it, whoever does it, manad
// included. The first event is the current state. After that an event is sent whenever the
// state differs from the last one sent.
//
// Events are level-triggered snapshots, coalesced when the reader falls behind: the channel holds
// at most one event, and a newer state replaces an unread older one, so the reader always sees the
// latest state and never blocks the watcher. The channel is closed when ctx ends, when the
// device is closed, after the Deleted event when the TAP is deleted (or moved away), or when the
// notification socket fails beyond recovery (logged). Overruns (ENOBUFS) are recovered by re-reading the state. The watcher blocks on the
// netpoller and uses no CPU while nothing changes.
//
// Errors: ENODEV after Close; the kernel's errno when the notification socket cannot be opened.
func (d *Device) Watch(ctx context.Context) (<-chan LinkEvent, error) {
	if err := d.rlock(); err != nil {
		return nil, err
	}
	defer d.mu.RUnlock()
	conn, err := mdnl.Dial(unix.NETLINK_ROUTE, &mdnl.Config{
		Groups: 1 << (unix.RTNLGRP_LINK - 1),
		NetNS:  d.ns.fd(),
	})
	if err != nil {
		return nil, extack.Wrap(err, unix.EIO, "rtnetlink notifications in network namespace %q", d.cfg.NetNS)
	}
	// Read the state only after subscribing, so no change can fall between the two.
	l, err := d.nl.LinkByIndex(d.index)
	if err != nil {
		conn.Close()
		if errors.As(err, &netlink.LinkNotFoundError{}) {
			return nil, extack.New(unix.ENODEV, "TAP %s (ifindex %d) no longer exists", d.cfg.Name, d.index)
		}
		return nil, extack.Wrap(err, unix.EIO, "get link %s", d.cfg.Name)
	}
	w := &watcher{d: d, conn: conn, ch: make(chan LinkEvent, 1), last: LinkEvent{LinkState: linkState(l)},
		index: d.index, ns: d.ns, log: d.log}
	w.ch <- w.last
	ctx, cancel := context.WithCancel(ctx)
	d.addWatch(w, cancel)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	go func() {
		defer close(w.ch)
		defer d.removeWatch(w)
		defer cancel()
		defer stop()
		defer conn.Close()
		w.run(ctx)
	}()
	return w.ch, nil
}

func (d *Device) addWatch(w *watcher, cancel context.CancelFunc) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if d.watches == nil {
		d.watches = map[*watcher]context.CancelFunc{}
	}
	d.watches[w] = cancel
}

func (d *Device) removeWatch(w *watcher) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	delete(d.watches, w)
}

// stopWatches ends every watch (Close does, so no watcher outlives its device).
func (d *Device) stopWatches() {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for _, cancel := range d.watches {
		cancel()
	}
}

type watcher struct {
	d    *Device
	conn *mdnl.Conn
	ch   chan LinkEvent
	last LinkEvent
	// Where the TAP was when the watch started: a move to another namespace ends the watch.
	index int
	ns    *netNS
	log   *slog.Logger
}

func (w *watcher) run(ctx context.Context) {
	log := w.log
	for {
		msgs, err := w.conn.Receive()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				// The socket overran: notifications were lost, so read the state again.
				log.Warn("link notifications overran; re-reading the link state")
				if !w.resync() {
					return
				}
				continue
			}
			log.Error("link watcher stopped", "err", err)
			return
		}
		for _, m := range msgs {
			if done := w.handle(m); done {
				return
			}
		}
	}
}

// handle processes one notification and reports whether the watch is over (the TAP was deleted).
func (w *watcher) handle(m mdnl.Message) bool {
	t := uint16(m.Header.Type)
	if t != unix.RTM_NEWLINK && t != unix.RTM_DELLINK {
		return false
	}
	if len(m.Data) < unix.SizeofIfInfomsg {
		return false
	}
	hdr := unix.NlMsghdr{Len: m.Header.Length, Type: t, Flags: uint16(m.Header.Flags), Seq: m.Header.Sequence, Pid: m.Header.PID}
	l, err := netlink.LinkDeserialize(&hdr, m.Data)
	if err != nil || l.Attrs().Index != w.index {
		return false
	}
	ev := LinkEvent{LinkState: linkState(l)}
	// RTM_DELLINK is also sent when the TAP leaves the namespace (MoveTo, or ip link set … netns
	// X): either way it is gone from where this watch looks.
	if t == unix.RTM_DELLINK {
		ev.Deleted = true
	}
	w.send(ev)
	return ev.Deleted
}

// resync re-reads the link after an overrun; false means the TAP is gone (the Deleted event was
// sent) or cannot be read.
func (w *watcher) resync() bool {
	if err := w.d.rlock(); err != nil {
		return false
	}
	moved := w.d.ns != w.ns
	var l netlink.Link
	var err error
	if !moved {
		l, err = w.d.nl.LinkByIndex(w.index)
	}
	w.d.mu.RUnlock()
	if moved || err != nil {
		if moved || errors.As(err, &netlink.LinkNotFoundError{}) {
			ev := w.last
			ev.Deleted = true
			w.send(ev)
		} else {
			w.log.Error("link watcher: re-reading the link failed", "err", err)
		}
		return false
	}
	w.send(LinkEvent{LinkState: linkState(l)})
	return true
}

// send publishes ev unless it repeats the last state, replacing an event the reader has not
// taken yet.
func (w *watcher) send(ev LinkEvent) {
	if ev.same(w.last) {
		return
	}
	w.last = ev
	for {
		select {
		case w.ch <- ev:
			return
		default:
		}
		select {
		case <-w.ch: // drop the stale snapshot
		default:
		}
	}
}
