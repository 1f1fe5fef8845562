package reliability

import (
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// What "every request gets an answer" means, precisely. manad answers a datagram as the kernel's
// netlink_rcv_skb answers an skb, plus one documented difference (genl/doc.go: a malformed
// datagram gets EINVAL where the kernel drops it silently). For a datagram d, split as manad
// splits it (framing), the answers, in order, before the reply to the sentinel request sent
// right after d on the same connection, must be exactly:
//
//   - for each message that is not a request (no NLM_F_REQUEST, or a type below NLMSG_MIN_TYPE):
//     an ACK (NLMSG_ERROR with error 0, echoing its seq) if it has NLM_F_ACK, else nothing;
//   - for each request: any number of reply messages of its family carrying its seq and pid,
//     then either one NLMSG_ERROR (error < 0: failed; error 0: only when NLM_F_ACK was set),
//     or one NLMSG_DONE (only for a dump), or — success without NLM_F_ACK — nothing more; a
//     request with NLM_F_ACK always ends with NLMSG_ERROR or NLMSG_DONE;
//   - if the datagram ends in a malformed message (shorter than a header, nlmsg_len below 16 or
//     past the end of the datagram), after the messages before it: one NLMSG_ERROR EINVAL
//     "truncated netlink message…" echoing that header's seq, with nlmsg_len 16 and NLM_F_CAPPED;
//   - every answer is well formed (whole aligned messages, an NLMSG_ERROR echoing the request's
//     header, extack TLVs that parse).
//
// A "clean close" is manad closing the connection (EOF, or EPIPE on our next write) after
// answers that are a correct prefix of the above; a new connection must then be served
// normally. An unprivileged peer's request for an admin command must never succeed.

// sentMsg is one message of a request datagram as manad's framing sees it.
type sentMsg struct {
	nlHeader
	cmd    int // genlmsghdr.cmd, -1 when the message is too short to have one
	family string
	admin  bool // a request for an admin command of a known family
}

func (m sentMsg) request() bool { return m.Flags&fRequest != 0 && m.Type >= nlmMin }
func (m sentMsg) dump() bool    { return m.Flags&fDump == fDump }

// families maps family id → (name, description) for the checker.
type families map[uint16]struct {
	name string
	info familyInfo
}

// framing splits d as genl.(*Server).handleDatagram does. malformed is the header echoed in the
// EINVAL answer when d ends in a malformed message.
func framing(d []byte, fams families) (msgs []sentMsg, malformed *nlHeader) {
	echo := func(b []byte) *nlHeader {
		hdr := make([]byte, nlHdrLen)
		copy(hdr, b)
		h := readHeader(hdr)
		return &h
	}
	if len(d) < nlHdrLen {
		return nil, echo(d)
	}
	for len(d) >= nlHdrLen {
		h := readHeader(d)
		if h.Len < nlHdrLen || int(h.Len) > len(d) {
			return msgs, echo(d)
		}
		m := sentMsg{nlHeader: h, cmd: -1}
		if h.Len >= nlHdrLen+genlHdrLen {
			m.cmd = int(d[nlHdrLen])
		}
		if f, ok := fams[h.Type]; ok {
			m.family = f.name
			m.admin = m.cmd >= 0 && f.info.Admin[uint8(m.cmd)]
		}
		msgs = append(msgs, m)
		d = d[min(align4(int(h.Len)), len(d)):]
	}
	return msgs, nil
}

// answerStats counts what the checker saw.
type answerStats struct {
	datagrams, messages, malformed, closes int
	succeeded, silent, acked, dumps        int
	errnos                                 map[unix.Errno]int
}

func newAnswerStats() *answerStats { return &answerStats{errnos: map[unix.Errno]int{}} }

func (s *answerStats) String() string {
	type kv struct {
		e unix.Errno
		n int
	}
	var l []kv
	for e, n := range s.errnos {
		l = append(l, kv{e, n})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n })
	var b strings.Builder
	for _, x := range l {
		fmt.Fprintf(&b, " %s:%d", unix.ErrnoName(x.e), x.n)
	}
	return fmt.Sprintf("%d datagrams, %d messages: %d succeeded (%d with ACK, %d dumps), %d ignored non-requests, "+
		"%d malformed-datagram EINVALs, %d clean closes; errors by errno:%s",
		s.datagrams, s.messages, s.succeeded, s.acked, s.dumps, s.silent, s.malformed, s.closes, b.String())
}

// checkAnswers checks replies (what manad sent for datagram d before the sentinel's reply, or
// before it closed the connection when closed) against the rule above. With unprivileged set,
// an admin request that succeeds is an error.
func checkAnswers(d []byte, replies []rawMsg, closed bool, fams families, unprivileged bool, st *answerStats) error {
	msgs, malformed := framing(d, fams)
	st.datagrams++
	st.messages += len(msgs)
	if closed {
		st.closes++
	}
	i := 0
	// out reports that the replies ran out: fine after a clean close, an error otherwise.
	out := func(what string) error {
		if closed {
			return nil
		}
		return fmt.Errorf("no answer to %s", what)
	}
	for k, m := range msgs {
		what := fmt.Sprintf("message %d (type %#x flags %#x seq %d cmd %d)", k, m.Type, m.Flags, m.Seq, m.cmd)
		if !m.request() {
			if m.Flags&fAck == 0 {
				st.silent++
				continue
			}
			if i == len(replies) {
				return out(what + ": ACK expected")
			}
			r := replies[i]
			a, err := parseAck(r)
			if r.Type != nlmError || err != nil || a.Errno != 0 || r.Seq != m.Seq {
				return fmt.Errorf("%s: want an ACK, got type %d seq %d errno %v (%v)", what, r.Type, r.Seq, a.Errno, err)
			}
			st.acked++
			i++
			continue
		}
		nData := 0
		for i < len(replies) && replies[i].Type != nlmError && replies[i].Type != nlmDone &&
			replies[i].Seq == m.Seq && replies[i].PID == m.PID {
			if replies[i].Type != m.Type {
				return fmt.Errorf("%s: reply of type %#x", what, replies[i].Type)
			}
			nData++
			i++
		}
		if i < len(replies) && replies[i].Seq == m.Seq && replies[i].PID == m.PID {
			r := replies[i]
			a, err := parseAck(r)
			if err != nil {
				return fmt.Errorf("%s: malformed answer: %w", what, err)
			}
			i++
			switch {
			case r.Type == nlmError && a.Errno != 0:
				if a.Echo.Seq != m.Seq || a.Echo.Type != m.Type || a.Echo.Flags != m.Flags {
					return fmt.Errorf("%s: NLMSG_ERROR echoes header %+v", what, a.Echo)
				}
				if nData > 0 {
					return fmt.Errorf("%s: %d replies, then error %v", what, nData, a.Errno)
				}
				st.errnos[a.Errno]++
				continue
			case r.Type == nlmError:
				if m.Flags&fAck == 0 {
					return fmt.Errorf("%s: ACK without NLM_F_ACK", what)
				}
				st.acked++
			case r.Type == nlmDone:
				if !m.dump() {
					return fmt.Errorf("%s: NLMSG_DONE for a request that is not a dump", what)
				}
				if a.Errno != 0 {
					st.errnos[a.Errno]++
					continue
				}
				st.dumps++
			}
		} else if m.Flags&fAck != 0 {
			if i == len(replies) {
				return out(what + " with NLM_F_ACK")
			}
			return fmt.Errorf("%s: NLM_F_ACK set but no ACK/error (next answer type %d seq %d)", what, replies[i].Type, replies[i].Seq)
		}
		st.succeeded++
		if unprivileged && m.admin {
			return fmt.Errorf("%s: admin command %s/%d succeeded for an unprivileged peer", what, m.family, m.cmd)
		}
	}
	if malformed != nil {
		if i == len(replies) {
			return out("the malformed tail of the datagram")
		}
		r := replies[i]
		a, err := parseAck(r)
		// The message is there unless a SET_OPTION earlier in the datagram turned extack off.
		msgOK := strings.HasPrefix(a.Msg, "truncated netlink message") || (a.Msg == "" && setsOption(msgs))
		if err != nil || r.Type != nlmError || a.Errno != unix.EINVAL || r.Seq != malformed.Seq ||
			a.Echo.Len != nlHdrLen || !a.Capped || !msgOK {
			return fmt.Errorf("malformed datagram: want EINVAL \"truncated netlink message…\" for seq %d, got type %d seq %d %v %q echo %+v (%v)",
				malformed.Seq, r.Type, r.Seq, a.Errno, a.Msg, a.Echo, err)
		}
		st.malformed++
		st.errnos[a.Errno]++
		i++
	}
	if i != len(replies) {
		return fmt.Errorf("%d unexpected answers, first: type %#x flags %#x seq %d", len(replies)-i, replies[i].Type, replies[i].Flags, replies[i].Seq)
	}
	return nil
}

// setsOption reports whether msgs include a manad SET_OPTION request.
func setsOption(msgs []sentMsg) bool {
	for _, m := range msgs {
		if m.family == "manad" && m.cmd == genlCmdSetOption && m.request() {
			return true
		}
	}
	return false
}
