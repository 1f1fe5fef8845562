package genl

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/transport"
)

// Family and multicast group ids. nlctrl's are fixed by the uAPI; the others
// are what the kernel would allocate first (GENL_START_ALLOC, and the first
// group ids outside the reserved 0, 1 and 16–18). Clients must resolve them
// with CTRL_CMD_GETFAMILY, never hard-code them.
const (
	nlctrlID      = unix.GENL_ID_CTRL
	ethtoolID     = 0x13
	manadID       = 0x14
	notifyGroupID = unix.GENL_ID_CTRL // nlctrl "notify"
	monitorGroup  = 2                 // ethtool "monitor"
	eventsGroup   = 3                 // manad "events"
)

// family is a generic netlink family served on the socket (struct
// genl_family).
type family struct {
	id          uint16
	name        string
	version     uint8
	resvStartOp uint8 // commands >= this get genl_header_check
	ops         []op
	groups      []mcGroup
}

type mcGroup struct {
	id   uint32
	name string
}

// op describes one request message of a family, as a row of the kernel's
// ethtool_genl_ops[] (struct genl_ops, do and dump together): command, name,
// permission, policy and handlers. Each message file declares its ops as
// methods of its family's message type (ethtoolMsgs, manadMsgs, netdevMsgs,
// nlctrlMsgs), which opsOf collects; the op list nlctrl advertises, the
// policies it dumps and the command label of the request metrics are all read
// from them.
type op struct {
	cmd uint8
	// name is the command's name in the family's YNL spec (ethtool.yaml's
	// "rings-get"), or manad's own for its family: the metrics label.
	name   string
	perm   uint32      // GENL_UNS_ADMIN_PERM for SET-type commands, GENL_ADMIN_PERM for netdev's napi-set
	policy *nlattr.Set // nil: attributes are not parsed (maxattr 0)
	mode   nlattr.Mode // validation of do requests
	// dumpMode is the validation of dump requests.
	dumpMode nlattr.Mode
	// driver names the Backend op the message calls (its field), "" for none;
	// dumpDriver the one its dump calls when that is another.
	driver, dumpDriver string
	doit               func(*Server, *request) error
	start              func(*Server, *request) error // dump start, after validation; errors are ACKed
	dumpit             func(*Server, *request, *dumper) error
	// dumpPolicy, when set, validates dump requests instead of policy (split do/dump ops).
	dumpPolicy *nlattr.Set
}

// opsOf returns the ops that msgs, a family's message type, declares: each of
// its exported methods returns the op of one message (func() op) or of
// several (func() []op). They are sorted into command order, the order in
// which ctrl_fill_info lists them for the kernel's families (ethtool_genl_ops,
// netdev_nl_ops and genl_ctrl_ops are in command order), so method names do
// not change the wire.
//
// The families are collected from methods with reflect, not listed by hand
// nor generated, because then the method set is the list: a message file adds
// its message by declaring one method, and nothing else names it. There is no
// registry filled by init (no global mutable state) and no generated file to
// keep fresh; the compiler refuses two methods of one name and opsOf two ops
// of one command or name. It runs once per family, when NewServer builds it.
//
// opsOf panics on a method of another signature or a duplicate command or
// name: programming errors, which every test that builds a Server finds.
func opsOf(msgs any) []op {
	v := reflect.ValueOf(msgs)
	var ops []op
	for i := range v.NumMethod() {
		switch m := v.Method(i).Interface().(type) {
		case func() op:
			ops = append(ops, m())
		case func() []op:
			ops = append(ops, m()...)
		default:
			panic(fmt.Sprintf("genl: %s.%s is a %T, not a message (func() op or func() []op)", v.Type(), v.Type().Method(i).Name, m))
		}
	}
	slices.SortFunc(ops, func(a, b op) int { return cmp.Compare(a.cmd, b.cmd) })
	names := make(map[string]bool, len(ops))
	for i, o := range ops {
		if i > 0 && o.cmd == ops[i-1].cmd {
			panic(fmt.Sprintf("genl: %s declares command %d twice (%s, %s)", v.Type(), o.cmd, ops[i-1].name, o.name))
		}
		if names[o.name] {
			panic(fmt.Sprintf("genl: %s declares two ops named %q", v.Type(), o.name))
		}
		names[o.name] = true
	}
	return ops
}

// flags is CTRL_ATTR_OP_FLAGS as genl_op_iter computes it.
func (o *op) flags() uint32 {
	f := o.perm
	if o.doit != nil {
		f |= unix.GENL_CMD_CAP_DO
	}
	if o.dumpit != nil {
		f |= unix.GENL_CMD_CAP_DUMP
	}
	if o.policy != nil {
		f |= unix.GENL_CMD_CAP_HASPOL
	}
	return f
}

func (f *family) op(cmd uint8) *op {
	for i := range f.ops {
		if f.ops[i].cmd == cmd {
			return &f.ops[i]
		}
	}
	return nil
}

// request is one generic netlink request being served.
type request struct {
	ctx   context.Context
	s     *Server
	c     *conn
	fam   *family
	msg   []byte // the whole message, from its nlmsghdr, nlmsg_len bytes
	hdr   nlattr.Header
	cmd   uint8
	attrs []nlattr.Attr
	state any // from op.start, for op.dumpit
	// multi is set when a do request was answered multi-part (replyParts): its NLMSG_DONE
	// takes the place of the ACK, as for a dump.
	multi bool
}

// attr returns top-level attribute t (absent when out of range).
func (r *request) attr(t uint16) nlattr.Attr {
	if int(t) < len(r.attrs) {
		return r.attrs[t]
	}
	return nlattr.Attr{}
}

// errConnGone stops processing: the reply could not be written, the
// connection is being dropped.
var errConnGone = transport.ErrClosed

// errMsgSize is what a reply that does not fit gets (the kernel's -EMSGSIZE
// from nla_put*).
var errMsgSize = &nlattr.Error{Errno: unix.EMSGSIZE, Message: "reply does not fit in a netlink message"}

// tooBig is the EMSGSIZE of a reply datagram longer than the connection can send.
func tooBig(what string, n, limit int) *nlattr.Error {
	return nlattr.Errorf(unix.EMSGSIZE, "%s of %d bytes does not fit in one reply datagram (limit %d bytes)", what, n, limit)
}

// reply sends one unicast reply message of the request's family in its own
// datagram, like genlmsg_reply. A reply longer than the connection's reply
// limit is not sent: it fails with EMSGSIZE and an extack message saying so.
func (r *request) reply(cmd uint8, fill func(b *nlattr.Builder) error) error {
	b := &r.c.scratch
	b.Reset()
	start := b.BeginMsg(r.fam.id, 0, r.hdr.Seq, r.hdr.PID)
	b.Genl(cmd, r.fam.version)
	if err := fill(b); err != nil {
		return err
	}
	b.EndMsg(start)
	if b.Overflow {
		return errMsgSize
	}
	if n := b.Len(); n > r.c.maxReply {
		b.B = nil // keep no buffer larger than any datagram for the connection's life
		return tooBig("reply", n, r.c.maxReply)
	}
	return r.c.send(b.B)
}

// replyParts answers with n items (put appends item i's attributes): as one message
// when it fits in a reply datagram, like reply; otherwise multi-part, one NLM_F_MULTI
// message per item packed into datagrams as a dump is, ended by NLMSG_DONE, which then
// takes the place of the ACK. An item too big for a datagram of its own is EMSGSIZE.
func (r *request) replyParts(cmd uint8, n int, put func(b *nlattr.Builder, i int)) error {
	err := r.reply(cmd, func(b *nlattr.Builder) error {
		for i := range n {
			put(b, i)
		}
		return nil
	})
	if ne := (*nlattr.Error)(nil); !errors.As(err, &ne) || ne.Errno != unix.EMSGSIZE {
		return err
	}
	r.multi = true
	d := r.s.newDumper(r)
	for i := range n {
		if err = d.add(cmd, func(b *nlattr.Builder) error { put(b, i); return nil }); err != nil {
			break
		}
	}
	return d.finish(err)
}

// dumper packs the messages of a dump into datagrams of about budget bytes,
// each with NLM_F_MULTI, and ends the dump with NLMSG_DONE. No datagram is
// longer than the connection's reply limit.
type dumper struct {
	r      *request
	b      nlattr.Builder
	budget int
}

func (s *Server) newDumper(r *request) *dumper {
	return &dumper{r: r, budget: min(s.dumpBudget, r.c.maxReply)}
}

// add appends one dump message; fill errors abort it (the dump then ends with
// that error in NLMSG_DONE).
func (d *dumper) add(cmd uint8, fill func(b *nlattr.Builder) error) error {
	mark := d.b.Len()
	start := d.b.BeginMsg(d.r.fam.id, nlattr.FlagMulti, d.r.hdr.Seq, d.r.hdr.PID)
	d.b.Genl(cmd, d.r.fam.version)
	if err := fill(&d.b); err != nil {
		d.b.Truncate(mark)
		return err
	}
	d.b.EndMsg(start)
	if d.b.Overflow {
		d.b.Truncate(mark)
		d.b.Overflow = false
		return errMsgSize
	}
	if n := d.b.Len() - mark; n > d.r.c.maxReply {
		// As a dump message that does not fit in an empty skb: the dump ends with EMSGSIZE.
		d.b.Truncate(mark)
		return tooBig("dump message", n, d.r.c.maxReply)
	}
	if d.b.Len() > d.r.c.maxReply {
		// The new message goes into the next datagram.
		msg := append([]byte(nil), d.b.B[mark:]...)
		d.b.Truncate(mark)
		if err := d.flush(); err != nil {
			return err
		}
		d.b.B = append(d.b.B, msg...)
	}
	if d.b.Len() >= d.budget {
		return d.flush()
	}
	return nil
}

func (d *dumper) flush() error {
	if d.b.Len() == 0 {
		return nil
	}
	err := d.r.c.send(d.b.B)
	d.b.Reset()
	return err
}

// finish appends NLMSG_DONE carrying the dump's error (netlink_dump_done) to
// the last datagram and sends it. Nothing may follow DONE in a datagram.
func (d *dumper) finish(err error) error {
	if errors.Is(err, errConnGone) {
		return err
	}
	var errno unix.Errno
	var ne *nlattr.Error
	if err != nil {
		errno, ne = d.r.s.toNLError(err)
	}
	d.r.s.observeRequest(d.r.hdr, d.r.msg, err, false)
	done := nlattr.AppendDoneError(nil, len(d.r.msg), d.r.hdr.Seq, d.r.hdr.PID, errno, ne, d.r.c.extAck)
	if d.b.Len()+len(done) > d.r.c.maxReply {
		if err := d.flush(); err != nil {
			return err
		}
	}
	d.b.B = append(d.b.B, done...)
	return d.flush()
}

// toNLError turns any error into the errno and extack the client gets.
func (s *Server) toNLError(err error) (unix.Errno, *nlattr.Error) {
	if ne := (*nlattr.Error)(nil); errors.As(err, &ne) && ne.Errno != 0 {
		return ne.Errno, ne
	}
	msg := ""
	var em interface{ ExtackMessage() string }
	if errors.As(err, &em) {
		msg = em.ExtackMessage()
	}
	var errno unix.Errno
	switch {
	case errors.As(err, &errno) && errno != 0:
	case errors.Is(err, context.DeadlineExceeded):
		errno = unix.ETIMEDOUT
	case errors.Is(err, context.Canceled):
		errno = unix.ECANCELED
	default:
		s.log.Warn("genl: backend error without errno, reporting EIO", "err", err)
		errno = unix.EIO
		if msg == "" {
			msg = err.Error()
		}
	}
	return errno, &nlattr.Error{Errno: errno, Message: msg}
}

// handleDatagram serves every netlink message of one request datagram, in
// order, as netlink_rcv_skb does.
//
// Where the kernel silently drops a malformed datagram (shorter than a
// header, or an nlmsg_len past its end), manad answers EINVAL with an extack
// message so that the client does not wait forever; the echoed header then
// has nlmsg_len 16 and NLM_F_CAPPED, so clients find the TLVs.
func (s *Server) handleDatagram(ctx context.Context, c *conn, d []byte) {
	if len(d) < nlattr.MsgHdrLen {
		c.sendMalformed(d, fmt.Sprintf("truncated netlink message: %d bytes is shorter than a header", len(d)))
		return
	}
	for len(d) >= nlattr.MsgHdrLen {
		h, _ := nlattr.ReadHeader(d)
		if h.Len < nlattr.MsgHdrLen || int(h.Len) > len(d) {
			c.sendMalformed(d, fmt.Sprintf("truncated netlink message: nlmsg_len %d, %d bytes left in the datagram", h.Len, len(d)))
			return
		}
		if !s.handleMsg(ctx, c, d[:h.Len], h) {
			return
		}
		adv := min(nlattr.Align(int(h.Len)), len(d))
		d = d[adv:]
	}
}

// handleMsg serves one message and sends its ACK or error; it reports false
// when the connection is gone.
func (s *Server) handleMsg(ctx context.Context, c *conn, msg []byte, h nlattr.Header) bool {
	var err error
	dumped := false
	if h.Flags&nlattr.FlagRequest != 0 && h.Type >= nlattr.MsgMinType {
		dumped, err = s.genlRcv(ctx, c, msg, h)
	}
	s.observeRequest(h, msg, err, dumped)
	if errors.Is(err, errConnGone) {
		return false
	}
	if dumped {
		return true // NLMSG_DONE took the place of the ACK
	}
	if h.Flags&nlattr.FlagAck == 0 && err == nil {
		return true
	}
	var errno unix.Errno
	var ne *nlattr.Error
	if err != nil {
		errno, ne = s.toNLError(err)
	}
	c.scratch.Reset()
	opts := c.ackOptions()
	c.scratch.B = nlattr.AppendAck(c.scratch.B, msg, h.PID, errno, ne, opts)
	if c.scratch.Len() > c.maxReply && !opts.CapAck {
		// The echo does not fit in a datagram: echo only the header, as NETLINK_CAP_ACK.
		opts.CapAck = true
		c.scratch.Reset()
		c.scratch.B = nlattr.AppendAck(c.scratch.B, msg, h.PID, errno, ne, opts)
	}
	return c.send(c.scratch.B) == nil
}

// genlRcv mirrors genl_rcv_msg and genl_family_rcv_msg.
func (s *Server) genlRcv(ctx context.Context, c *conn, msg []byte, h nlattr.Header) (dumped bool, err error) {
	fam := s.families[h.Type]
	if fam == nil {
		return false, unix.ENOENT
	}
	if len(msg) < nlattr.MsgHdrLen+nlattr.GenlHdrLen {
		return false, unix.EINVAL
	}
	cmd := msg[nlattr.MsgHdrLen]
	if cmd >= fam.resvStartOp {
		// genl_header_check
		if binary.NativeEndian.Uint16(msg[nlattr.MsgHdrLen+2:]) != 0 {
			return false, nlattr.Errorf(unix.EINVAL, "genlmsghdr.reserved field is not 0")
		}
		fl := h.Flags
		if fl&nlattr.FlagDump == nlattr.FlagDump {
			fl &^= nlattr.FlagDump
		}
		if fl&^(nlattr.FlagRequest|nlattr.FlagAck|nlattr.FlagEcho) != 0 {
			return false, nlattr.Errorf(unix.EINVAL, "ambiguous or reserved bits set in nlmsg_flags")
		}
	}
	dump := h.Flags&nlattr.FlagDump == nlattr.FlagDump
	o := fam.op(cmd)
	if o == nil || (dump && o.dumpit == nil) || (!dump && o.doit == nil) {
		return false, unix.EOPNOTSUPP
	}
	// The permission check comes before any parsing, and carries no extack. GENL_ADMIN_PERM
	// (CAP_NET_ADMIN in the initial namespace) and GENL_UNS_ADMIN_PERM (in the netns's owner)
	// are the same check for manad: an admin peer (root or the admin group).
	if o.perm&(unix.GENL_ADMIN_PERM|unix.GENL_UNS_ADMIN_PERM) != 0 && !c.caller.Admin {
		return false, unix.EPERM
	}
	r := &request{ctx: ctx, s: s, c: c, fam: fam, msg: msg, hdr: h, cmd: cmd}
	if o.policy != nil {
		mode, pol := o.mode, o.policy
		if dump {
			mode = o.dumpMode
			if o.dumpPolicy != nil {
				pol = o.dumpPolicy
			}
		}
		off := nlattr.MsgHdrLen + nlattr.GenlHdrLen
		if r.attrs, err = nlattr.Parse(msg, off, len(msg)-off, pol, mode); err != nil {
			return false, err
		}
	}
	if !dump {
		err := o.doit(s, r)
		return r.multi, err
	}
	if o.start != nil {
		if err := o.start(s, r); err != nil {
			return false, err
		}
	}
	d := s.newDumper(r)
	return true, d.finish(o.dumpit(s, r, d))
}

// nlctrl family (net/netlink/genetlink.c genl_ctrl).

var ctrlPolicyFamily = nlattr.NewSet(unix.CTRL_ATTR_FAMILY_NAME, map[uint16]nlattr.Policy{
	unix.CTRL_ATTR_FAMILY_ID:   {Kind: nlattr.U16},
	unix.CTRL_ATTR_FAMILY_NAME: {Kind: nlattr.NulString, Len: unix.GENL_NAMSIZ - 1},
})

// nlctrlMsgs are nlctrl's messages (genl_ctrl_ops).
type nlctrlMsgs struct{}

// GetFamily is CTRL_CMD_GETFAMILY, do and dump.
func (nlctrlMsgs) GetFamily() op {
	return op{
		cmd: unix.CTRL_CMD_GETFAMILY, name: "getfamily", policy: ctrlPolicyFamily,
		// GENL_DONT_VALIDATE_STRICT | GENL_DONT_VALIDATE_DUMP
		mode: nlattr.Liberal, dumpMode: nlattr.Strict,
		doit:   (*Server).ctrlGetFamily,
		dumpit: (*Server).ctrlDumpFamily,
	}
}

// GetPolicy is CTRL_CMD_GETPOLICY, dump only.
func (nlctrlMsgs) GetPolicy() op {
	return op{
		cmd: unix.CTRL_CMD_GETPOLICY, name: "getpolicy", policy: ctrlPolicyPolicy, mode: nlattr.Strict, dumpMode: nlattr.Strict,
		start: (*Server).ctrlPolicyStart, dumpit: (*Server).ctrlPolicyDump,
	}
}

func nlctrlFamily() *family {
	return &family{
		id: nlctrlID, name: "nlctrl", version: 2,
		resvStartOp: unix.CTRL_CMD_GETPOLICY + 1,
		ops:         opsOf(nlctrlMsgs{}),
		groups:      []mcGroup{{id: notifyGroupID, name: "notify"}},
	}
}

// ctrlGetFamily mirrors ctrl_getfamily: lookup by id, then by name (the
// name wins), EINVAL when neither is given, ENOENT when not found.
func (s *Server) ctrlGetFamily(r *request) error {
	var res *family
	err := error(unix.EINVAL)
	if a := r.attr(unix.CTRL_ATTR_FAMILY_ID); a.Present() {
		res, err = s.families[a.U16()], unix.ENOENT
	}
	if a := r.attr(unix.CTRL_ATTR_FAMILY_NAME); a.Present() {
		res, err = s.familyByName(a.Str()), unix.ENOENT
	}
	if res == nil {
		return err
	}
	return r.reply(unix.CTRL_CMD_NEWFAMILY, func(b *nlattr.Builder) error {
		putFamily(b, res)
		return nil
	})
}

func (s *Server) ctrlDumpFamily(r *request, d *dumper) error {
	for _, f := range s.familyList() {
		if err := d.add(unix.CTRL_CMD_NEWFAMILY, func(b *nlattr.Builder) error {
			putFamily(b, f)
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// putFamily mirrors ctrl_fill_info, attribute for attribute.
func putFamily(b *nlattr.Builder, f *family) {
	b.PutString(unix.CTRL_ATTR_FAMILY_NAME, f.name)
	b.PutU16(unix.CTRL_ATTR_FAMILY_ID, f.id)
	b.PutU32(unix.CTRL_ATTR_VERSION, uint32(f.version))
	b.PutU32(unix.CTRL_ATTR_HDRSIZE, 0)
	b.PutU32(unix.CTRL_ATTR_MAXATTR, 0) // per-op policies, as ethtool
	if len(f.ops) > 0 {
		ops := b.NestNoFlag(unix.CTRL_ATTR_OPS)
		for i := range f.ops {
			n := b.NestNoFlag(uint16(i + 1))
			b.PutU32(unix.CTRL_ATTR_OP_ID, uint32(f.ops[i].cmd))
			b.PutU32(unix.CTRL_ATTR_OP_FLAGS, f.ops[i].flags())
			b.EndNest(n)
		}
		b.EndNest(ops)
	}
	if len(f.groups) > 0 {
		grps := b.NestNoFlag(unix.CTRL_ATTR_MCAST_GROUPS)
		for i, g := range f.groups {
			n := b.NestNoFlag(uint16(i + 1))
			b.PutU32(unix.CTRL_ATTR_MCAST_GRP_ID, g.id)
			b.PutString(unix.CTRL_ATTR_MCAST_GRP_NAME, g.name)
			b.EndNest(n)
		}
		b.EndNest(grps)
	}
}

func (s *Server) familyByName(name string) *family {
	for _, f := range s.families {
		if f.name == name {
			return f
		}
	}
	return nil
}

// familyList returns the families in id order, as the kernel's idr walk.
func (s *Server) familyList() []*family {
	l := make([]*family, 0, len(s.families))
	for _, f := range s.families {
		l = append(l, f)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].id < l[j].id })
	return l
}

// groupKnown reports whether id is a multicast group of a served family.
func (s *Server) groupKnown(id uint32) bool {
	for _, f := range s.families {
		for _, g := range f.groups {
			if g.id == id {
				return true
			}
		}
	}
	return false
}
