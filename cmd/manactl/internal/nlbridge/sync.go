package nlbridge

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// syncWait bounds how long Request waits for manad's answer before it leaves the rest to the
// manad reader: a request manad answers slowly (a reconfiguration) must not hold the
// supervisor, which serves the program's other trapped calls on the same thread.
const syncWait = 20 * time.Millisecond

// Request serves datagram d, which the program is sending on its socket, before the send
// returns, as the kernel answers a netlink request inside sendmsg (netlink_unicast_kernel): the
// answer is on the program's end of the pair when Request returns true, and the program's
// receive finds it at once. The supervisor calls it from the program's trapped sendmsg or
// sendto, and lets the send go into the pair (Serve's path) when it returns false.
//
// It takes only what it can answer without waiting for the program: one message, not a dump
// (whose rest the program's reads pull), on an idle socket (nothing of the program's queued,
// read or in flight, so that order holds), with manad reachable. A request to manad is sent and
// its answer read here, not by the manad reader, which saves the round trip a wake-up and a
// hand-over each way; if manad takes longer than syncWait the reader passes the answer on, as
// for any request. Whatever is written to the program meanwhile does not wait for room: a full
// socket loses it and the next receive fails with ENOBUFS, as the kernel's replies do.
func (s *Socket) Request(d []byte) bool {
	if s.elsewhere.Load() || s.manadDead.Load() || !s.smu.TryLock() {
		return false
	}
	defer s.smu.Unlock()
	msgs, rest := splitMsgs(d)
	if len(msgs) != 1 || len(rest) != 0 {
		return false
	}
	if h, _ := nlattr.ReadHeader(msgs[0]); isDump(h) {
		return false
	}
	if s.peerQueued() || s.reading.Load() {
		return false
	}
	s.mu.Lock()
	idle := s.cur == nil && !s.closed && s.peer != nil
	s.mu.Unlock()
	if !idle || !s.kmu.TryLock() {
		return false // the kernel reader may be waiting for the program to read
	}
	s.kmu.Unlock()
	s.syncing.Store(true)
	defer s.syncing.Store(false)
	m := append([]byte(nil), msgs[0]...)
	r, ok := s.handleReq(m)
	if !ok || r == nil {
		return ok
	}
	if r.mode == modeManad {
		s.awaitManad(r)
	}
	return true
}

// peerQueued reports whether a datagram of the program's waits on the bridge's end of the pair.
func (s *Socket) peerQueued() bool {
	s.mu.Lock()
	rc := s.peerRC
	s.mu.Unlock()
	if rc == nil {
		return true
	}
	queued := true
	_ = rc.Control(func(fd uintptr) {
		n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		queued = err != nil || n > 0
	})
	return queued
}

// awaitManad reads manad's datagrams itself, holding the connection's read lock, until r is
// answered, manad is gone, or syncWait has passed.
func (s *Socket) awaitManad(r *request) {
	mc := s.manad()
	if mc == nil {
		return
	}
	mc.rmu.Lock()
	defer s.releaseManad(mc)
	deadline := time.Now().Add(syncWait)
	look := false // manad has not answered yet: wait before the first look
	for {
		select {
		case <-r.doneCh:
			return
		case <-s.done:
			return
		default:
		}
		var b []byte
		var err error
		cerr := mc.rc.Control(func(fd uintptr) {
			if look {
				if b, err = recvDatagram(int(fd)); err != unix.EAGAIN {
					return
				}
			}
			err, look = unix.EAGAIN, true
			left := time.Until(deadline)
			if left <= 0 {
				return
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(pfd, int(left/time.Millisecond)+1)
		})
		switch {
		case cerr != nil:
			return // closed: the reader reports it
		case err == unix.EAGAIN || err == unix.EINTR:
			if time.Now().After(deadline) {
				return
			}
		case err != nil:
			// The reader sees the same end and reports it: manadGone answers r.
			return
		default:
			s.manadDatagram(b)
		}
	}
}

// releaseManad lets go of mc's read lock, held by awaitManad, and reads what the reader left
// meanwhile: the reader that found the lock held waits for the next datagram, so the ones that
// came while it was held are Request's to read. The reader says so (mc.missed) before it tries
// the lock, so either its try comes after the unlock and succeeds, or the flag is seen here.
func (s *Socket) releaseManad(mc *manadConn) {
	mc.rmu.Unlock()
	for mc.missed.Swap(false) {
		mc.rmu.Lock()
		for {
			var b []byte
			var err error
			if cerr := mc.rc.Control(func(fd uintptr) { b, err = recvDatagram(int(fd)) }); cerr != nil {
				break
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				if err != unix.EAGAIN {
					s.manadGone(mc, err) // the reader waits for a datagram that will not come
				}
				break
			}
			s.manadDatagram(b)
		}
		mc.rmu.Unlock()
	}
}
