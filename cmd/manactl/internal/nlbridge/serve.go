package nlbridge

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// maxDatagram bounds what the bridge reads from the program in one datagram (the kernel refuses
// a sendmsg longer than the socket's send buffer; the program's end of the pair has at most
// wmem_max unless it forces more).
const maxDatagram = 4 << 20

// mode is where a request of the program goes.
type mode int

const (
	modeKernel     mode = iota // to the kernel, bytes untouched, followed by a marker
	modeKernelDump             // a dump to the kernel: ends with its NLMSG_DONE or NLMSG_ERROR
	modeManad                  // to manad, translated
	modeMerged                 // a dump to both, merged into one stream
)

// verdict is what the kernel's first answer to a merged dump says.
type verdict int

const (
	verdictOK       verdict = iota // the dump runs: start manad's half
	verdictFailed                  // the kernel refused it: its error is the answer
	verdictFallback                // the kernel lacks the op (EOPNOTSUPP): manad's half alone
)

// request is the program's message in flight (one at a time, as the kernel answers a message
// before sendmsg returns).
type request struct {
	orig []byte // the program's message
	hdr  nlattr.Header
	mode mode
	fwd  []byte // the message as sent to manad

	marker uint32 // modeKernel: the seq of the NOOP whose ACK ends the request
	// replyEnds: modeManad, a GET sent without NLM_F_ACK; its reply (or error) ends it.
	replyEnds bool

	kernelDrop func(m []byte) bool // merged: a kernel entry the program must not see
	manadKeep  func(m []byte) bool // merged: a manad entry the program sees (nil: all)

	kstart chan verdict // merged: the kernel's first answer

	// Owned by the kernel reader.
	kFirst bool

	// Under Socket.mu.
	kFinished, mFinished bool
	kDone                []byte        // the kernel's NLMSG_DONE, held until manad's half ends
	mErr                 *nlattr.Error // manad's half failed (nil: it did not, or EOPNOTSUPP)
	fallback             bool          // merged dump that became manad's alone
	kErrHeld             []byte        // the kernel's EOPNOTSUPP, the answer if manad fails too

	doneCh chan struct{}
	once   sync.Once
}

// finish ends r: it is no longer the request in flight, and the next may go.
func (s *Socket) finish(r *request) {
	s.mu.Lock()
	if s.cur == r {
		s.cur = nil
	}
	s.mu.Unlock()
	r.once.Do(func() { close(r.doneCh) })
}

// Serve moves messages between peer (the supervisor's end of the program's socketpair) and the
// kernel and manad until peer reads end of file (the program closed its socket in every
// process) or ctx ends; it closes all it opened, peer included, before returning. It returns nil
// at end of file, ctx.Err() when ctx ended, or what broke reading peer.
func (s *Socket) Serve(ctx context.Context, peer *os.File) error {
	pc, err := fileConn(peer)
	if err != nil {
		s.Close()
		return err
	}
	rc, err := pc.SyscallConn()
	if err != nil {
		pc.Close()
		s.Close()
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		pc.Close()
		return net.ErrClosed
	}
	s.peer, s.peerRC = pc, rc
	s.mu.Unlock()
	s.readyOnce.Do(func() { close(s.peerReady) })
	stop := context.AfterFunc(ctx, func() { s.Close() })
	err = s.peerLoop()
	stop()
	s.Close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// peerLoop reads the program's datagrams and serves their messages in order.
func (s *Socket) peerLoop() error {
	for {
		d, err := s.readPeer()
		if err != nil || d == nil {
			s.reading.Store(false)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		if d == nil {
			continue
		}
		s.smu.Lock()
		ok := s.serveDatagram(d)
		s.smu.Unlock()
		if !ok {
			return nil
		}
	}
}

// serveDatagram serves one datagram of the program read from the pair, holding s.smu; false when
// the socket closed meanwhile.
func (s *Socket) serveDatagram(d []byte) bool {
	if s.elsewhere.Load() {
		// Connected to another socket or to groups: the datagram is theirs, untouched,
		// once the program's last request is answered.
		if !s.sendElsewhere(d) {
			s.reading.Store(false)
			return false
		}
		s.reading.Store(false)
		return true
	}
	msgs, rest := splitMsgs(d)
	for _, m := range msgs {
		if !s.handle(m) {
			s.reading.Store(false)
			return false
		}
	}
	s.reading.Store(false) // each message is in flight (s.cur) or answered by now
	if len(rest) > 0 {
		// The kernel ignores what does not parse as a message; it still gets the bytes, so
		// that whatever it does with them is the kernel's answer.
		if err := s.ensureBound(); err == nil {
			_ = s.k.send(rest)
		}
	}
	return true
}

// readPeer reads one datagram of the program; nil, nil for an empty one. End of file (the program
// closed its end everywhere) is io.EOF.
func (s *Socket) readPeer() ([]byte, error) {
	n, err := peekSize(s.peerRC)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		// An empty datagram or the end of file: poll tells them apart.
		hup := false
		_ = s.peerRC.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			if k, err := unix.Poll(fds, 0); err == nil && k > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0 {
				hup = true
			}
		})
		if hup {
			return nil, io.EOF
		}
	}
	buf := make([]byte, min(max(n, 1), maxDatagram))
	s.reading.Store(true) // before the datagram leaves the queue: see Busy
	got, err := s.peer.Read(buf)
	if err != nil {
		return nil, err
	}
	if n > maxDatagram {
		s.log.Warn("nlbridge: program datagram too long, ignored", "len", n, "limit", maxDatagram)
		return nil, nil
	}
	if got == 0 {
		return nil, nil
	}
	return buf[:got], nil
}

// handle serves one message of the program once the previous one is answered (the kernel
// answers a message before it reads the next); false when the socket closed meanwhile. It does
// not wait for this message's answer: the program reads it, and the next message waits for it
// here, so that a program that sends only after reading costs no extra wake-up.
func (s *Socket) handle(m []byte) bool {
	_, ok := s.handleReq(m)
	return ok
}

// handleReq is handle, which also returns the request (nil when none went out).
func (s *Socket) handleReq(m []byte) (*request, bool) {
	if prev := s.last; prev != nil {
		select {
		case <-prev.doneCh:
		case <-s.done:
			return nil, false
		}
	}
	if err := s.ensureBound(); err != nil {
		s.log.Warn("nlbridge: cannot bind the kernel socket", "err", err)
		return nil, true
	}
	if s.manadDead.Load() {
		s.redial()
	}
	r := s.route(m)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	s.cur = r
	s.mu.Unlock()
	s.last = r
	s.dispatch(r)
	return r, true
}

// sendElsewhere sends datagram d to the kernel socket's connected destination (another port
// id, or groups), after the last request is answered; false when the socket closed meanwhile.
// What the destination answers reaches the program as any unicast the kernel socket receives.
// A failed send (the destination is gone: ECONNREFUSED) cannot fail the program's sendmsg,
// which the pair took: it is logged.
func (s *Socket) sendElsewhere(d []byte) bool {
	if prev := s.last; prev != nil {
		select {
		case <-prev.doneCh:
		case <-s.done:
			return false
		}
	}
	if err := s.k.sendConnected(d); err != nil {
		s.log.Debug("nlbridge: datagram to the connected destination not sent", "err", err)
	}
	return true
}

// markerMsg is the NLMSG_NOOP with NLM_F_ACK sent after a request to the kernel: the kernel
// answers a message before it reads the next of a datagram, so its ACK follows every answer of
// the request.
func markerMsg(seq uint32) []byte {
	var b nlattr.Builder
	start := b.BeginMsg(nlattr.MsgNoop, nlattr.FlagRequest|nlattr.FlagAck, seq, bridgePID)
	b.EndMsg(start)
	return b.B
}

// markerAck returns the seq of a marker's ACK; ok is false for any other message.
func markerAck(m []byte) (seq uint32, ok bool) {
	h, _ := nlattr.ReadHeader(m)
	if h.Type != nlattr.MsgError || len(m) < errOff+nlattr.MsgHdrLen {
		return 0, false
	}
	eh, _ := nlattr.ReadHeader(m[errOff:])
	if eh.Type != nlattr.MsgNoop || eh.PID != bridgePID {
		return 0, false
	}
	return eh.Seq, true
}

// dispatch sends r where route decided.
func (s *Socket) dispatch(r *request) {
	switch r.mode {
	case modeKernel:
		b := appendMsg(make([]byte, 0, len(r.orig)+4+nlattr.MsgHdrLen), r.orig)
		b = append(b, markerMsg(r.marker)...)
		s.sendKernel(r, b)
	case modeKernelDump:
		s.sendKernel(r, r.orig)
	case modeManad:
		s.sendManad(r)
	case modeMerged:
		if !s.sendKernel(r, r.orig) {
			return
		}
		var v verdict
		select {
		case v = <-r.kstart:
		case <-s.done:
			return
		}
		switch v {
		case verdictOK:
			s.sendManad(r)
		case verdictFallback:
			s.mu.Lock()
			gone := r.mFinished // manad went away meanwhile: the kernel's error is the answer
			r.fallback = true
			r.mode = modeManad
			r.mFinished = false
			s.mu.Unlock()
			if gone {
				s.writeUnicast(r.kErrHeld)
				s.finish(r)
				return
			}
			s.sendManad(r)
		}
	}
}

// sendKernel sends b for r to the kernel and handles what the kernel queued meanwhile on this
// goroutine: the kernel answers a do request (and starts a dump) within sendmsg, so its answer,
// and the marker's ACK, are queued when send returns, and are passed on without waking the
// kernel reader. It reports whether the send succeeded (else r is answered with its errno).
func (s *Socket) sendKernel(r *request, b []byte) bool {
	s.kmu.Lock()
	err := s.k.send(b)
	if err == nil {
		s.drainKernel()
	}
	s.kmu.Unlock()
	if err != nil {
		s.sendFailed(r, err)
		return false
	}
	return true
}

// sendFailed answers a message the kernel socket would not take with the errno sendmsg gave.
func (s *Socket) sendFailed(r *request, err error) {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		errno = unix.EIO
	}
	s.writeUnicast(s.synthAck(r, &nlattr.Error{Errno: errno}))
	s.finish(r)
}

// sendManad sends r's translated message to manad, or answers as manad's absence requires.
func (s *Socket) sendManad(r *request) {
	if s.manadDead.Load() {
		s.manadFailed(r)
		return
	}
	mc := s.manad()
	if _, err := mc.c.Write(r.fwd); err != nil {
		s.manadGone(mc, err)
		s.manadFailed(r)
	}
}

// manadFailed ends r's manad half because manad is gone.
func (s *Socket) manadFailed(r *request) {
	s.mu.Lock()
	if r.mFinished {
		s.mu.Unlock()
		return
	}
	md, fallback, held := r.mode, r.fallback, r.kErrHeld
	if md == modeManad {
		r.mFinished = true
	}
	s.mu.Unlock()
	switch md {
	case modeManad:
		if fallback {
			s.writeUnicast(held)
		} else {
			s.writeUnicast(s.synthAck(r, s.deadError()))
		}
		s.finish(r)
	case modeMerged:
		s.manadFinished(r, s.deadError())
	}
}

// synthAck builds the NLMSG_ERROR the kernel's netlink_ack would send for r with e, shaped by the
// program's NETLINK_EXT_ACK and NETLINK_CAP_ACK.
func (s *Socket) synthAck(r *request, e *nlattr.Error) []byte {
	s.mu.Lock()
	opts := nlattr.AckOptions{ExtAck: s.extAck, CapAck: s.capAck}
	pid := s.portid
	s.mu.Unlock()
	return nlattr.AppendAck(nil, r.orig, pid, e.Errno, e, opts)
}

// kernelFinished records the kernel's NLMSG_DONE of a merged dump, and ends the dump when manad's
// half has ended too.
func (s *Socket) kernelFinished(r *request, done []byte) {
	s.mu.Lock()
	r.kFinished, r.kDone = true, done
	last := r.mFinished
	s.mu.Unlock()
	if last {
		s.writeUnicast(s.mergedDone(r))
		s.finish(r)
	}
}

// manadFinished records the end of manad's half of a merged dump (e nil: it succeeded or lacks
// the op), and ends the dump when the kernel's half has ended too.
func (s *Socket) manadFinished(r *request, e *nlattr.Error) {
	s.mu.Lock()
	if r.mFinished {
		s.mu.Unlock()
		return
	}
	r.mFinished, r.mErr = true, e
	last := r.kFinished
	s.mu.Unlock()
	if last {
		s.writeUnicast(s.mergedDone(r))
		s.finish(r)
	}
}

// mergedDone is the one NLMSG_DONE of a merged dump: the kernel's when it carries an error or
// manad's half succeeded, else one carrying manad's error (with its extack message when the
// program enabled NETLINK_EXT_ACK).
func (s *Socket) mergedDone(r *request) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if errno, _ := errnoOf(r.kDone); errno != 0 || r.mErr == nil {
		return r.kDone
	}
	return nlattr.AppendDoneError(nil, len(r.orig), r.hdr.Seq, s.portid, r.mErr.Errno, r.mErr, s.extAck)
}

// kernelReader reads the kernel socket until it is closed.
func (s *Socket) kernelReader() {
	_ = s.k.control(func(fd int) error {
		// Room for what arrives while the program is slow to read: unicast answers the kernel
		// cannot queue are lost (netlink_overrun).
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
		}
		return nil
	})
	for {
		err := s.k.wait()
		switch {
		case errors.Is(err, unix.ENOBUFS):
			s.kmu.Lock()
			s.kernelOverrun()
			s.kmu.Unlock()
			continue
		case err != nil:
			select {
			case <-s.done:
			default:
				s.log.Warn("nlbridge: kernel socket read failed", "err", err)
			}
			return
		}
		s.kmu.Lock()
		s.drainKernel()
		s.kmu.Unlock()
	}
}

// drainKernel handles every datagram queued on the kernel socket; s.kmu is held, so that
// datagrams are passed on in the order the kernel queued them.
func (s *Socket) drainKernel() {
	for {
		b, group, from, err := s.k.recvNow()
		switch {
		case errors.Is(err, unix.ENOBUFS):
			s.kernelOverrun()
			continue
		case err != nil:
			return // EAGAIN: all done; anything else, kernelReader's wait reports
		}
		if group != 0 {
			s.kernelNotification(b, group)
			continue
		}
		s.kernelUnicast(b, from)
	}
}

// kernelOverrun passes the kernel socket's ENOBUFS on, and re-sends the marker of a request in
// flight, whose ACK may have been the answer the kernel could not queue.
func (s *Socket) kernelOverrun() {
	if !s.noENOBUFS.Load() {
		s.pending.Store(true)
	}
	s.mu.Lock()
	r := s.cur
	var marker uint32
	if r != nil && r.mode == modeKernel {
		marker = s.seq.Add(1)
		r.marker = marker
	}
	s.mu.Unlock()
	if marker != 0 {
		if err := s.k.send(markerMsg(marker)); err != nil {
			s.finish(r)
		}
	}
}

// kernelNotification passes on a kernel notification, without those about manad's ports (the
// kernel's view of their TAPs, which manad's own notifications replace).
func (s *Socket) kernelNotification(b []byte, group uint32) {
	msgs, _ := splitMsgs(b)
	var out []byte
	changed := false
	for _, m := range msgs {
		if idx, ok := s.devOf(m, msgType(m) == s.kEthtool && s.kEthtool != 0, msgType(m) == s.kNetdev && s.kNetdev != 0); ok && s.cache.hasPort(idx) {
			changed = true
			continue
		}
		out = appendMsg(out, m)
	}
	if !changed {
		out = b
	}
	s.writeMulticast(out, group)
}

// kernelUnicast passes on the kernel's answer to the request in flight, or what another socket
// (port id from) sent the program's.
func (s *Socket) kernelUnicast(b []byte, from uint32) {
	s.mu.Lock()
	r := s.cur
	var md mode
	var marker uint32
	var fallback bool
	if r != nil {
		md, marker, fallback = r.mode, r.marker, r.fallback
	}
	s.mu.Unlock()
	msgs, _ := splitMsgs(b)
	var out []byte
	changed, finish := false, false
	for _, m := range msgs {
		h, _ := nlattr.ReadHeader(m)
		if seq, ok := markerAck(m); ok {
			changed = true
			if r != nil && md == modeKernel && seq == marker {
				finish = true
			}
			continue
		}
		switch {
		case r == nil || md == modeKernel || md == modeManad && !fallback:
			out = appendMsg(out, m)
		case md == modeKernelDump:
			out = appendMsg(out, m)
			if h.Type == nlattr.MsgDone || h.Type == nlattr.MsgError {
				finish = true
			}
		case md == modeManad: // a fallback: the kernel said all it had to say
			changed = true
		default: // merged
			if !r.kFirst {
				r.kFirst = true
				if h.Type == nlattr.MsgError {
					if errno, _ := errnoOf(m); errno == unix.EOPNOTSUPP && !s.manadDead.Load() {
						s.mu.Lock()
						r.kErrHeld = append([]byte(nil), m...)
						s.mu.Unlock()
						r.kstart <- verdictFallback
						changed = true
						continue
					}
					out = appendMsg(out, m)
					finish = true
					r.kstart <- verdictFailed
					continue
				}
				r.kstart <- verdictOK
			}
			switch h.Type {
			case nlattr.MsgDone, nlattr.MsgError:
				s.writeUnicast(out)
				out, changed = nil, true
				s.kernelFinished(r, append([]byte(nil), m...))
			default:
				if r.kernelDrop != nil && r.kernelDrop(m) {
					changed = true
					continue
				}
				out = appendMsg(out, m)
			}
		}
	}
	if !changed {
		out = b
	}
	s.writeUnicastFrom(out, from)
	if finish {
		s.finish(r)
	}
}

// manadReader reads manad connection mc until it ends. It reads and handles each datagram
// holding mc.rmu, which Request holds while it reads an answer itself: the datagrams of manad are
// handled in the order manad sent them, whoever reads them. While Request holds it, the reader
// does not wait for it (which would cost a hand-over when Request lets go): it says it missed
// its turn (mc.missed) and waits for the next datagram, and Request reads what is left when it
// is done (releaseManad).
func (s *Socket) manadReader(mc *manadConn) {
	for {
		var b []byte
		var rerr error
		locked := false
		err := mc.rc.Read(func(fd uintptr) bool {
			mc.missed.Store(true) // before the try: see releaseManad
			if !mc.rmu.TryLock() {
				return false
			}
			mc.missed.Store(false)
			b, rerr = recvDatagram(int(fd))
			if rerr == unix.EAGAIN || rerr == unix.EINTR {
				mc.rmu.Unlock() // Request took it: wait for the next one
				return false
			}
			locked = true
			return true
		})
		if err == nil {
			err = rerr
		}
		if err == nil {
			s.manadDatagram(b)
		}
		if locked {
			mc.rmu.Unlock()
		}
		if err != nil {
			s.manadGone(mc, err)
			return
		}
	}
}

// recvDatagram reads the next datagram of fd without waiting, sized with MSG_PEEK|MSG_TRUNC:
// EAGAIN when there is none; end of file (manad never sends an empty datagram) is io.EOF.
func recvDatagram(fd int) ([]byte, error) {
	n, _, err := unix.Recvfrom(fd, nil, unix.MSG_PEEK|unix.MSG_TRUNC|unix.MSG_DONTWAIT)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, io.EOF
	}
	buf := make([]byte, n)
	got, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
	if err != nil {
		return nil, err
	}
	return buf[:got], nil
}

// manadDatagram sorts one datagram of manad: answers to the bridge's own requests, notifications,
// and answers to the program's request, which it translates and passes on.
func (s *Socket) manadDatagram(b []byte) {
	s.mu.Lock()
	r := s.cur
	var md mode
	var fallback bool
	if r != nil {
		md, fallback = r.mode, r.fallback
	}
	s.mu.Unlock()
	msgs, _ := splitMsgs(b)
	var out []byte
	finish := false
	for _, m := range msgs {
		h, _ := nlattr.ReadHeader(m)
		switch {
		case h.PID == bridgePID:
			s.callAnswer(m, h)
			continue
		case h.PID == 0:
			// Each notification is a datagram of its own, as the kernel multicasts it,
			// so that the program's receive can say which group it came to.
			if g, ok := s.manadNotification(m); ok {
				s.writeMulticast(appendMsg(nil, m), g)
			}
			continue
		case r == nil || (md != modeManad && md != modeMerged):
			continue // an answer nobody waits for
		}
		switch h.Type {
		case nlattr.MsgError:
			errno, _ := errnoOf(m)
			if errno == unix.ENODEV {
				s.cache.markDirty()
			}
			if md == modeMerged {
				s.writeUnicast(out)
				out = nil
				var e *nlattr.Error
				if errno != 0 && errno != unix.EOPNOTSUPP {
					e = &nlattr.Error{Errno: errno, Message: extackMsg(m)}
				}
				s.manadFinished(r, e)
				continue
			}
			finish = true
			s.mu.Lock()
			r.mFinished = true
			held := r.kErrHeld
			s.mu.Unlock()
			switch {
			case errno != 0 && fallback:
				out = appendMsg(out, held)
			case errno == 0 && r.hdr.Flags&nlattr.FlagAck == 0:
				// The ACK the bridge asked for to know the request was done.
			default:
				s.fixError(r, m)
				out = appendMsg(out, m)
			}
		case nlattr.MsgDone:
			if md == modeMerged {
				s.writeUnicast(out)
				out = nil
				errno, _ := errnoOf(m)
				var e *nlattr.Error
				if errno != 0 && errno != unix.EOPNOTSUPP {
					e = &nlattr.Error{Errno: errno, Message: extackMsg(m)}
				}
				s.manadFinished(r, e)
				continue
			}
			s.mu.Lock()
			r.mFinished = true
			s.mu.Unlock()
			putPID(m, s.PortID())
			out = appendMsg(out, m)
			finish = true
		default:
			if md == modeMerged && r.manadKeep != nil && !r.manadKeep(m) {
				continue
			}
			s.translate(m, s.PortID())
			out = appendMsg(out, m)
			if md == modeManad && r.replyEnds && h.Flags&nlattr.FlagMulti == 0 {
				s.mu.Lock()
				r.mFinished = true
				s.mu.Unlock()
				finish = true
			}
		}
	}
	s.writeUnicast(out)
	if finish {
		s.finish(r)
	}
}

// fixError makes manad's NLMSG_ERROR for r what the kernel would have sent: the embedded request
// is the program's own (its type, flags without the NLM_F_ACK the bridge added, its nlmsg_pid,
// and any attribute the bridge translated), from the program's port id.
func (s *Socket) fixError(r *request, m []byte) {
	putPID(m, s.PortID())
	if len(m) < errOff+nlattr.MsgHdrLen {
		return
	}
	copy(m[errOff:], r.orig[:nlattr.MsgHdrLen])
	h, _ := nlattr.ReadHeader(m)
	if h.Flags&nlattr.FlagCapped == 0 && len(m) >= errOff+len(r.orig) {
		copy(m[errOff:], r.orig)
	}
}

// manadNotification decides whether the program sees one of manad's notifications (it joined
// the group, as the kernel shows it) and translates it, and returns the group as the program
// knows it; it also keeps the cache current.
func (s *Socket) manadNotification(m []byte) (uint32, bool) {
	cmd, ok := genlCmd(m)
	if !ok {
		return 0, false
	}
	var mg uint32
	switch msgType(m) {
	case s.mEthtool:
		mg = s.mMonitor
	case s.mNetdev:
		switch cmd {
		case 2, 3, 4: // NETDEV_CMD_DEV_{ADD,DEL,CHANGE}_NTF
			mg = s.mMgmt
		case 6, 7, 8: // NETDEV_CMD_PAGE_POOL_{ADD,DEL,CHANGE}_NTF
			mg = s.mPagePool
		}
	case s.mManad:
		mg = s.mEvents
		s.cache.portEvent(m, cmd)
	default:
		return 0, false
	}
	cg, ok := s.fromManadGroup[mg]
	if !ok || mg == 0 {
		return 0, false
	}
	s.mu.Lock()
	member := s.cmdGroups[cg]
	s.mu.Unlock()
	if !member {
		return 0, false
	}
	s.translate(m, 0)
	return cg, true
}

// peekSize waits in the netpoller for the next datagram of rc and returns its length
// (MSG_PEEK|MSG_TRUNC), leaving it queued; 0 is an empty datagram or the end of file.
func peekSize(rc syscall.RawConn) (int, error) {
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), nil, unix.MSG_PEEK|unix.MSG_TRUNC|unix.MSG_DONTWAIT)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err == nil {
		err = rerr
	}
	return n, err
}
