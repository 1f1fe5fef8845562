package nlbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// Options configures one bridged socket.
type Options struct {
	// ManadPath is manad's socket (client.DefaultPath when empty).
	ManadPath string
	// InNetNS runs f on an OS thread in the program's network namespace; Open creates the kernel
	// socket and the manad connection inside f. nil: the current namespace.
	InNetNS func(f func() error) error
	// Logger receives the bridge's diagnostics (nothing when nil).
	Logger *slog.Logger
}

// openTimeout bounds the queries Open makes when ctx has no deadline.
const openTimeout = 5 * time.Second

// callTimeout bounds a request the bridge makes to manad on its own behalf (a group join, a
// socket option, a refresh of the port cache).
const callTimeout = 5 * time.Second

// Well-known generic netlink numbers (include/uapi/linux/genetlink.h, net/netlink/genetlink.c).
const (
	genlMaxID = 1023 // GENL_MAX_ID: the largest family id the kernel allocates
)

// reservedGroup reports the multicast group ids the kernel never hands out (mc_group_start:
// 0, 1, GENL_ID_CTRL, GENL_ID_VFS_DQUOT, GENL_ID_PMCRAID).
func reservedGroup(g uint32) bool {
	return g <= 1 || g == unix.GENL_ID_CTRL || g == unix.GENL_ID_VFS_DQUOT || g == unix.GENL_ID_PMCRAID
}

// famInfo is one generic netlink family as nlctrl describes it.
type famInfo struct {
	id     uint16
	name   string
	groups map[string]uint32 // multicast group name → id
}

// Socket is one bridged generic netlink socket: a kernel NETLINK_GENERIC socket in the program's
// network namespace and a connection to manad made from that namespace, behind the program's end
// of a socketpair. Its methods are safe for concurrent use.
type Socket struct {
	log     *slog.Logger
	path    string
	k       *ksock
	mconn   atomic.Pointer[manadConn] // the current manad connection
	inNetNS func(f func() error) error
	ns      nsID // the program's network namespace

	// Family and group numbers, fixed at Open.
	kEthtool, kNetdev          uint16 // the kernel's ids (0: the kernel lacks the family)
	mEthtool, mNetdev, mManad  uint16 // manad's ids
	rManad                     uint16 // the id the program sees for manad's family
	mFamilies                  map[uint16]bool
	toManadGroup               map[uint32]uint32 // program-visible group → manad's group
	fromManadGroup             map[uint32]uint32 // manad's group → program-visible group
	mMonitor, mMgmt, mPagePool uint32            // manad's ethtool/netdev groups (0: none)
	mEvents                    uint32            // manad's "events" group (0: none)
	manadGroupIDs              map[uint32]uint32 // manad-family group → its remapped id

	mu          sync.Mutex
	bound       bool
	portid      uint32
	extAck      bool
	capAck      bool
	pktinfo     bool
	cmdGroups   map[uint32]bool // groups the program joined (program-visible ids)
	manadJoined map[uint32]bool // manad groups joined on the manad connection
	cur         *request        // the program's request in flight
	last        *request        // the last request dispatched (under smu)
	closed      bool
	lastDial    time.Time // of the last attempt to reach manad again

	kmu sync.Mutex // held while reading and passing on the kernel socket's datagrams
	// smu is held while a datagram of the program's is served: by Serve for one read from the
	// pair, by Request for one taken from a trapped send.
	smu sync.Mutex
	// syncing: Request is serving; what is written to the program meanwhile must not wait
	// (the program is inside its send, and cannot read).
	syncing atomic.Bool

	noENOBUFS atomic.Bool
	elsewhere atomic.Bool // connected to a destination other than the kernel (see Connect)
	pending   atomic.Bool
	manadDead atomic.Bool
	reading   atomic.Bool // a datagram of the program's is being read and dispatched (see Busy)

	cache *cache
	sent  sentLog // where the datagrams written to the program came from (see Origin)

	callMu sync.Mutex
	calls  map[uint32]*call
	seq    atomic.Uint32

	peer      *net.UnixConn
	peerRC    syscall.RawConn
	peerReady chan struct{} // closed once peer is set (or the socket closes)
	readyOnce sync.Once
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// manadConn is one connection to manad.
type manadConn struct {
	c  *net.UnixConn
	rc syscall.RawConn
	// rmu is held while a datagram of manad's is read and handled (by the reader, or by
	// Request reading its answer itself), so that they are handled in manad's order.
	rmu sync.Mutex
	// missed: the reader found rmu held and went back to waiting (see manadReader).
	missed atomic.Bool
}

func newManadConn(c *net.UnixConn) (*manadConn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &manadConn{c: c, rc: rc}, nil
}

// manad returns the current manad connection.
func (s *Socket) manad() *manadConn { return s.mconn.Load() }

// nsID identifies a network namespace as manad reports it (st_dev, st_ino of its nsfs file).
type nsID struct{ dev, ino uint64 }

// Open creates the kernel NETLINK_GENERIC socket and the manad connection (both inside
// opts.InNetNS), resolves the families on both sides, and starts reading them. The kernel socket
// stays unbound until the program binds or sends, as a fresh socket would.
//
// Errors: manad unreachable wraps the dial error ("cannot connect to manad at PATH: …", with
// ENOENT, ECONNREFUSED or EACCES); a kernel without NETLINK_GENERIC or a manad that does not
// answer nlctrl wraps what failed.
func Open(ctx context.Context, opts Options) (*Socket, error) {
	if opts.ManadPath == "" {
		opts.ManadPath = client.DefaultPath
	}
	if opts.InNetNS == nil {
		opts.InNetNS = func(f func() error) error { return f() }
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, openTimeout)
		defer cancel()
	}
	s := &Socket{
		log: log, path: opts.ManadPath, inNetNS: opts.InNetNS,
		cmdGroups: map[uint32]bool{}, manadJoined: map[uint32]bool{},
		calls: map[uint32]*call{}, peerReady: make(chan struct{}), done: make(chan struct{}),
		toManadGroup: map[uint32]uint32{}, fromManadGroup: map[uint32]uint32{}, manadGroupIDs: map[uint32]uint32{},
		mFamilies: map[uint16]bool{},
	}
	var probe *ksock
	err := opts.InNetNS(func() error {
		var err error
		if s.k, err = openKernel(); err != nil {
			return err
		}
		if probe, err = openKernel(); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/net", &st); err == nil {
			s.ns = nsID{dev: uint64(st.Dev), ino: st.Ino}
		}
		mc, err := s.dial()
		if err != nil {
			return err
		}
		s.mconn.Store(mc)
		return nil
	})
	if probe != nil {
		defer probe.Close()
	}
	if err == nil {
		err = s.resolve(ctx, probe)
	}
	if err != nil {
		s.closeConns()
		return nil, err
	}
	s.cache = newCache(s)
	dl, _ := ctx.Deadline()
	mc := s.manad()
	var groups []uint32
	if s.mEvents != 0 {
		// The port cache follows manad's port events.
		groups = append(groups, s.mEvents)
		s.manadJoined[s.mEvents] = true
	}
	if err := s.prepareManad(mc, dl, false, false, groups); err != nil {
		s.closeConns()
		return nil, err
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.kernelReader() }()
	go func() { defer s.wg.Done(); s.manadReader(mc) }()
	return s, nil
}

// dial connects to manad from the calling thread's network namespace.
func (s *Socket) dial() (*manadConn, error) {
	uc, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: s.path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to manad at %s: %w", s.path, err)
	}
	mc, err := newManadConn(uc)
	if err != nil {
		uc.Close()
		return nil, err
	}
	return mc, nil
}

// redialEvery is the least time between two attempts to reach manad again after it went away.
const redialEvery = time.Second

// redial connects to manad again after it went away (a restart), at most every redialEvery,
// when a request of the program needs it: the new connection gets the program's socket options
// and groups, and the port cache is reloaded. A manad whose family or group ids changed is not
// taken (the program resolved the old ones); the socket then stays without manad.
func (s *Socket) redial() {
	s.mu.Lock()
	if s.closed || !s.manadDead.Load() || time.Since(s.lastDial) < redialEvery {
		s.mu.Unlock()
		return
	}
	s.lastDial = time.Now()
	extAck, capAck := s.extAck, s.capAck
	var groups []uint32
	for g := range s.manadJoined {
		groups = append(groups, g)
	}
	s.mu.Unlock()
	var mc *manadConn
	if err := s.inNetNS(func() (err error) { mc, err = s.dial(); return err }); err != nil {
		s.log.Debug("nlbridge: manad still unreachable", "err", err)
		return
	}
	if err := s.resume(mc, extAck, capAck, groups); err != nil {
		s.log.Warn("nlbridge: manad is back but cannot be used", "path", s.path, "err", err)
		mc.c.Close()
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		mc.c.Close()
		return
	}
	old := s.mconn.Swap(mc)
	s.wg.Add(1)
	s.mu.Unlock()
	old.c.Close()
	s.manadDead.Store(false)
	s.log.Info("nlbridge: manad is back", "path", s.path)
	go func() { defer s.wg.Done(); s.manadReader(mc) }()
}

// resume prepares a new manad connection as Open did, before its reader runs.
func (s *Socket) resume(mc *manadConn, extAck, capAck bool, groups []uint32) error {
	dl := time.Now().Add(callTimeout)
	fams, err := dumpFamilies(&manadDgram{c: mc.c}, dl)
	if err != nil {
		return err
	}
	by := map[string]famInfo{}
	for _, f := range fams {
		by[f.name] = f
	}
	me := by[wire.FamilyName]
	if me.id != s.mManad || by[ethtool.FamilyName].id != s.mEthtool || by[wire.NetdevFamilyName].id != s.mNetdev ||
		me.groups[wire.EventsGroup] != s.mEvents || by[ethtool.FamilyName].groups[ethtool.MonitorGroup] != s.mMonitor {
		return fmt.Errorf("nlbridge: manad's family or group ids changed: %w", unix.ESTALE)
	}
	return s.prepareManad(mc, dl, extAck, capAck, groups)
}

// closeConns closes the sockets Open made.
func (s *Socket) closeConns() {
	if s.k != nil {
		s.k.Close()
	}
	if mc := s.manad(); mc != nil {
		mc.c.Close()
	}
}

// Close closes the kernel socket and the manad connection and waits for the bridge's goroutines.
// Serve calls it before it returns; call it only for a Socket never served. It returns nil.
func (s *Socket) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		r := s.cur
		s.mu.Unlock()
		close(s.done)
		s.readyOnce.Do(func() { close(s.peerReady) })
		s.closeConns()
		s.mu.Lock()
		peer := s.peer
		s.mu.Unlock()
		if peer != nil {
			peer.Close()
		}
		if r != nil {
			s.finish(r)
		}
		s.failCalls(net.ErrClosed)
	})
	s.wg.Wait()
	return nil
}

// resolve learns the families of the kernel (through probe, a socket of its own so that the
// bridged one stays unbound) and of manad, and picks the ids under which the program sees
// manad's own family and groups.
func (s *Socket) resolve(ctx context.Context, probe *ksock) error {
	dl, _ := ctx.Deadline()
	// Both lists at once: a socket(2) of the program waits for them.
	var kfams []famInfo
	kerr := make(chan error, 1)
	go func() {
		var err error
		kfams, err = dumpFamilies(&kernelDgram{k: probe}, dl)
		kerr <- err
	}()
	mc := s.manad()
	mfams, err := dumpFamilies(&manadDgram{c: mc.c}, dl)
	if kerr := <-kerr; kerr != nil {
		return fmt.Errorf("nlbridge: list the kernel's generic netlink families: %w", kerr)
	}
	if err != nil {
		return fmt.Errorf("nlbridge: list manad's generic netlink families at %s: %w", s.path, err)
	}
	_ = mc.c.SetDeadline(time.Time{})
	kUsed, kGroups := map[uint16]bool{}, map[uint32]bool{}
	var kByName = map[string]famInfo{}
	for _, f := range kfams {
		kUsed[f.id] = true
		kByName[f.name] = f
		for _, g := range f.groups {
			kGroups[g] = true
		}
	}
	mByName := map[string]famInfo{}
	for _, f := range mfams {
		mByName[f.name] = f
		s.mFamilies[f.id] = true
	}
	me, ok := mByName[wire.FamilyName]
	if !ok {
		return fmt.Errorf("nlbridge: manad at %s has no %q family: %w", s.path, wire.FamilyName, unix.ENOENT)
	}
	s.mManad = me.id
	s.mEthtool = mByName[ethtool.FamilyName].id
	s.mNetdev = mByName[wire.NetdevFamilyName].id
	s.kEthtool = kByName[ethtool.FamilyName].id
	s.kNetdev = kByName[wire.NetdevFamilyName].id
	// manad's family: the largest id the kernel does not use. The kernel allocates ids cyclically
	// upwards from GENL_START_ALLOC, so the top of the range is the last it would reach.
	for id := uint16(genlMaxID); id >= nlattr.MsgMinType; id-- {
		if !kUsed[id] {
			s.rManad = id
			break
		}
	}
	if s.rManad == 0 {
		return fmt.Errorf("nlbridge: no free generic netlink family id: %w", unix.ENOSPC)
	}
	// Groups: ethtool's and netdev's are the kernel's, joined on both sides.
	pair := func(fam, grp string, dst *uint32) {
		mg, mok := mByName[fam].groups[grp]
		kg, kok := kByName[fam].groups[grp]
		if mok {
			*dst = mg
		}
		if mok && kok {
			s.toManadGroup[kg] = mg
			s.fromManadGroup[mg] = kg
		}
	}
	pair(ethtool.FamilyName, ethtool.MonitorGroup, &s.mMonitor)
	pair(wire.NetdevFamilyName, wire.NetdevGroupMgmt, &s.mMgmt)
	pair(wire.NetdevFamilyName, wire.NetdevGroupPagePool, &s.mPagePool)
	s.mEvents = me.groups[wire.EventsGroup]
	// manad's own groups: the largest ids below the kernel's group count that no kernel family
	// uses. The kernel hands out the lowest free id first, so these are the last it would take;
	// joining them on the kernel socket is harmless (no family sends there) and keeps bind's and
	// NETLINK_LIST_MEMBERSHIPS' view of the memberships the kernel's own.
	ngroups := probeGroups(probe)
	next := ngroups - 1
	for _, g := range sortedGroups(me.groups) {
		for next > 1 && (kGroups[next] || reservedGroup(next)) {
			next--
		}
		if next <= 1 {
			return fmt.Errorf("nlbridge: no free multicast group id for manad's %q: %w", wire.FamilyName, unix.ENOSPC)
		}
		s.manadGroupIDs[g] = next
		s.toManadGroup[next] = g
		s.fromManadGroup[g] = next
		next--
	}
	return nil
}

// sortedGroups returns the group ids of a family in ascending order.
func sortedGroups(m map[string]uint32) []uint32 {
	var out []uint32
	for _, g := range m {
		out = append(out, g)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// probeGroups returns the number of multicast groups a generic netlink socket has (nlk->ngroups,
// which NETLINK_LIST_MEMBERSHIPS reports as the length it needs); 64 when it cannot tell.
func probeGroups(k *ksock) uint32 {
	// A DROP_MEMBERSHIP sizes the socket's group table (netlink_realloc_groups) and joins nothing.
	if err := k.setsockopt(unix.SOL_NETLINK, unix.NETLINK_DROP_MEMBERSHIP, []byte{1, 0, 0, 0}); err != nil {
		return 64
	}
	_, need, err := k.getsockopt(unix.SOL_NETLINK, unix.NETLINK_LIST_MEMBERSHIPS, 0)
	if err != nil || need < 8 {
		return 64
	}
	return uint32(need) * 8
}

// ensureBound binds the kernel socket before the bridge sends anything on the program's behalf,
// as sendmsg's netlink_autobind would, and learns its port id. It connects to the kernel (the
// default destination) rather than binding: netlink_connect autobinds and leaves the groups
// alone, while bind(2) would set groups 1..32 to its nl_groups and so drop what the program
// joined with NETLINK_ADD_MEMBERSHIP before its first request.
func (s *Socket) ensureBound() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound {
		return nil
	}
	if err := s.k.control(func(fd int) error { return unix.Connect(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}) }); err != nil {
		return err
	}
	nl, err := s.k.sockname()
	if err != nil {
		return err
	}
	s.bound, s.portid = nl.Pid != 0, nl.Pid
	return nil
}

// bindLocked binds the kernel socket and records its port id; s.mu is held.
func (s *Socket) bindLocked(sa *unix.SockaddrNetlink) error {
	if err := s.k.control(func(fd int) error { return unix.Bind(fd, sa) }); err != nil {
		return err
	}
	nl, err := s.k.sockname()
	if err != nil {
		return err
	}
	s.bound, s.portid = nl.Pid != 0, nl.Pid
	return nil
}

// Bind is bind(2): the kernel socket is bound with the program's address, so the kernel
// validates nl_pid (EINVAL once bound to another, EADDRINUSE) and nl_groups (groups 1..32) as
// it would; the groups of nl_groups that manad also has are then joined or left on the manad
// connection to match.
func (s *Socket) Bind(sa *unix.SockaddrNetlink) error {
	if sa == nil {
		return unix.EINVAL
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return unix.EBADF
	}
	if err := s.bindLocked(sa); err != nil {
		s.mu.Unlock()
		return err
	}
	for g := uint32(1); g <= 32; g++ {
		if sa.Groups&(1<<(g-1)) != 0 {
			s.cmdGroups[g] = true
		} else {
			delete(s.cmdGroups, g)
		}
	}
	s.mu.Unlock()
	s.syncManadGroups()
	return nil
}

// Connect is connect(2), applied to the kernel socket (which validates it and autobinds). While
// the socket is connected to another port id or to groups, the program's datagrams go there
// untouched, through the kernel socket, as a kernel socket's sendmsg sends them to its
// destination; connected to the kernel (nl_pid 0, no groups) or disconnected (AF_UNSPEC), they
// are bridged again.
func (s *Socket) Connect(sa *unix.SockaddrNetlink) error {
	if sa == nil {
		return unix.EINVAL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return unix.EBADF
	}
	if err := s.k.control(func(fd int) error { return unix.Connect(fd, sa) }); err != nil {
		return err
	}
	s.elsewhere.Store(sa.Family == unix.AF_NETLINK && (sa.Pid != 0 || sa.Groups != 0))
	nl, err := s.k.sockname()
	if err != nil {
		return err
	}
	s.bound, s.portid = nl.Pid != 0, nl.Pid
	return nil
}

// LocalAddr is getsockname(2): the kernel socket's address (its port id, 0 before it is bound,
// and its groups 1..32).
func (s *Socket) LocalAddr() *unix.SockaddrNetlink {
	nl, err := s.k.sockname()
	if err != nil {
		return &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	}
	return nl
}

// PeerAddr is getpeername(2): the kernel socket's peer.
func (s *Socket) PeerAddr() *unix.SockaddrNetlink {
	nl, err := s.k.peername()
	if err != nil {
		return &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	}
	return nl
}

// optVal reads a setsockopt value as netlink_setsockopt does: an int when optlen allows, else 0.
func optVal(val []byte) uint32 {
	if len(val) < 4 {
		return 0
	}
	return uint32(val[0]) | uint32(val[1])<<8 | uint32(val[2])<<16 | uint32(val[3])<<24
}

// SetOption is setsockopt(2). SOL_NETLINK options are applied to the kernel socket first, so
// that the program gets the kernel's validation and errno, then mirrored where manad needs them:
// a group join or leave of a group manad also has, NETLINK_EXT_ACK and NETLINK_CAP_ACK (which
// shape manad's answers as the kernel's), NETLINK_GET_STRICT_CHK. NETLINK_PKTINFO is recorded
// for the supervisor (the bridge's kernel socket always has it on). handled is false for other
// levels: the supervisor lets the kernel apply them to the program's socket.
//
// A mirror to manad that fails (manad gone) is logged, not returned: the kernel's half holds.
func (s *Socket) SetOption(level, name int, val []byte) (handled bool, err error) {
	if level != unix.SOL_NETLINK {
		return false, nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return true, unix.EBADF
	}
	v := optVal(val)
	if name == unix.NETLINK_PKTINFO {
		// The bridge's socket keeps it on; the program's wish is recorded.
		if len(val) < 4 {
			v = 0
		}
		s.pktinfo = v != 0
		s.mu.Unlock()
		return true, nil
	}
	if err := s.k.setsockopt(level, name, val); err != nil {
		s.mu.Unlock()
		return true, err
	}
	var mirror func() error
	switch name {
	case unix.NETLINK_ADD_MEMBERSHIP:
		s.cmdGroups[v] = true
	case unix.NETLINK_DROP_MEMBERSHIP:
		delete(s.cmdGroups, v)
	case unix.NETLINK_NO_ENOBUFS:
		s.noENOBUFS.Store(v != 0)
		if v != 0 {
			s.pending.Store(false)
		}
	case unix.NETLINK_EXT_ACK, unix.NETLINK_CAP_ACK, unix.NETLINK_GET_STRICT_CHK:
		switch name {
		case unix.NETLINK_EXT_ACK:
			s.extAck = v != 0
		case unix.NETLINK_CAP_ACK:
			s.capAck = v != 0
		}
		on := uint8(0)
		if v != 0 {
			on = 1
		}
		mirror = func() error {
			_, err := s.manadCall(s.mManad, wire.CmdSetOption, nlattr.FlagAck, func(b *nlattr.Builder) {
				b.PutU32(wire.AttrOption, uint32(name))
				b.PutU8(wire.AttrOptionValue, on)
			})
			return err
		}
	}
	s.mu.Unlock()
	if mirror != nil && !s.manadDead.Load() {
		if err := mirror(); err != nil {
			s.log.Warn("nlbridge: socket option not applied on manad's side", "option", name, "err", err)
		}
	}
	if name == unix.NETLINK_ADD_MEMBERSHIP || name == unix.NETLINK_DROP_MEMBERSHIP {
		s.syncManadGroups()
	}
	return true, nil
}

// syncManadGroups joins and leaves manad's groups so that the manad connection is a member of
// exactly the groups the program joined (translated) plus the bridge's own ("events").
func (s *Socket) syncManadGroups() {
	s.mu.Lock()
	want := map[uint32]bool{}
	if s.mEvents != 0 {
		want[s.mEvents] = true
	}
	for g := range s.cmdGroups {
		if mg, ok := s.toManadGroup[g]; ok {
			want[mg] = true
		}
	}
	var join, leave []uint32
	for g := range want {
		if !s.manadJoined[g] {
			join = append(join, g)
			s.manadJoined[g] = true
		}
	}
	for g := range s.manadJoined {
		if !want[g] {
			leave = append(leave, g)
			delete(s.manadJoined, g)
		}
	}
	s.mu.Unlock()
	if s.manadDead.Load() {
		return
	}
	for _, g := range join {
		if _, err := s.manadCall(s.mManad, wire.CmdGroupJoin, nlattr.FlagAck, func(b *nlattr.Builder) { b.PutU32(wire.AttrGroup, g) }); err != nil {
			s.log.Warn("nlbridge: manad group join failed", "group", g, "err", err)
		}
	}
	for _, g := range leave {
		if _, err := s.manadCall(s.mManad, wire.CmdGroupLeave, nlattr.FlagAck, func(b *nlattr.Builder) { b.PutU32(wire.AttrGroup, g) }); err != nil {
			s.log.Warn("nlbridge: manad group leave failed", "group", g, "err", err)
		}
	}
}

// Option is getsockopt(2): SOL_NETLINK options are read from the kernel socket, which holds
// every option the program set (NETLINK_LIST_MEMBERSHIPS included, manad's groups being joined
// there too), except NETLINK_PKTINFO, the program's own. val holds what the kernel wrote into a
// buffer of size bytes, and is as long as the optlen the kernel reports: longer than size (zero
// bytes past it) when NETLINK_LIST_MEMBERSHIPS needs more room, so that the supervisor can tell
// the program how much, as the kernel does. handled is false for other levels.
func (s *Socket) Option(level, name int, size int) (val []byte, handled bool, err error) {
	if level != unix.SOL_NETLINK {
		return nil, false, nil
	}
	if name == unix.NETLINK_PKTINFO {
		if size < 4 {
			return nil, true, unix.EINVAL
		}
		s.mu.Lock()
		on := s.pktinfo
		s.mu.Unlock()
		v := []byte{0, 0, 0, 0}
		if on {
			v[0] = 1
		}
		return v, true, nil
	}
	val, need, err := s.k.getsockopt(level, name, size)
	if err == nil && need > len(val) {
		val = append(val, make([]byte, need-len(val))...)
	}
	return val, true, err
}

// PendingError returns ENOBUFS once after notifications were dropped because the program's
// socket was full (the kernel's sk_err after an overrun), unless NETLINK_NO_ENOBUFS is set;
// else nil.
func (s *Socket) PendingError() error {
	if s.pending.Swap(false) {
		return unix.ENOBUFS
	}
	return nil
}

// PortID is the kernel socket's port id (0 before it is bound): what the program's messages
// come from and its replies go to.
func (s *Socket) PortID() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.portid
}

// manadGone records that manad's connection mc ended and fails everything waiting on it.
func (s *Socket) manadGone(mc *manadConn, err error) {
	if s.manad() != mc || s.manadDead.Swap(true) {
		return
	}
	select {
	case <-s.done:
	default:
		s.log.Warn("nlbridge: manad connection lost; requests for its ports fail from now on", "path", s.path, "err", err)
	}
	s.failCalls(err)
	s.mu.Lock()
	r := s.cur
	s.mu.Unlock()
	if r != nil {
		s.manadFailed(r)
	}
}

// deadError is the extack error a request routed to manad gets once manad is gone.
func (s *Socket) deadError() *nlattr.Error {
	return nlattr.Errorf(unix.ECONNREFUSED, "manad is not running at %s", s.path)
}

var errClosed = errors.New("nlbridge: socket closed")

// awaitPeer waits until Serve has the program's end, or the socket closes (false).
func (s *Socket) awaitPeer() bool {
	<-s.peerReady
	select {
	case <-s.done:
		return false
	default:
		return s.peer != nil
	}
}

// writeUnicast writes a reply datagram to the program, waiting while its socket is full, as the
// kernel's dump waits for its reader.
func (s *Socket) writeUnicast(b []byte) { s.writeUnicastFrom(b, 0) }

// writeUnicastFrom is writeUnicast for a datagram from port id from (0: the kernel, or manad
// answering for it).
func (s *Socket) writeUnicastFrom(b []byte, from uint32) {
	if len(b) == 0 || !s.awaitPeer() {
		return
	}
	if s.syncing.Load() {
		// Inside the program's send: a full socket loses the answer and the program's next
		// receive says ENOBUFS, as netlink_unicast's MSG_DONTWAIT reply does.
		s.writeNow(b, 0, from)
		return
	}
	e := s.sent.add(b, 0, from)
	if _, err := s.peer.Write(b); err != nil {
		s.sent.remove(e)
		s.log.Debug("nlbridge: reply to the program not written", "err", err)
	}
}

// writeMulticast writes a notification datagram without waiting: when the program's socket is
// full it is dropped and the program's next receive fails with ENOBUFS (unless
// NETLINK_NO_ENOBUFS), as netlink_overrun does.
func (s *Socket) writeMulticast(b []byte, group uint32) {
	if len(b) == 0 || !s.awaitPeer() {
		return
	}
	s.writeNow(b, group, 0)
}

// writeNow writes datagram b, sent to group from port id from, without waiting (see
// writeMulticast).
func (s *Socket) writeNow(b []byte, group, from uint32) {
	e := s.sent.add(b, group, from)
	var werr error
	if err := s.peerRC.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), b)
		return werr != unix.EINTR
	}); err != nil {
		s.sent.remove(e)
		return
	}
	if werr != nil {
		s.sent.remove(e)
	}
	if werr == unix.EAGAIN || werr == unix.ENOBUFS {
		if !s.noENOBUFS.Load() {
			s.pending.Store(true)
		}
		s.log.Debug("nlbridge: notification dropped, the program's socket is full")
	}
}

// fileConn turns the supervisor's end of the socketpair into a *net.UnixConn (a duplicate,
// non-blocking descriptor on the runtime's poller) and closes f.
func fileConn(f *os.File) (*net.UnixConn, error) {
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("nlbridge: program socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("nlbridge: program socket is not a Unix socket: %w", unix.ENOTSOCK)
	}
	return uc, nil
}

// Busy reports whether an answer of the program's is on its way: a request of the program's is
// in flight, or one is still unread on the bridge's end of the pair. The kernel answers a
// netlink request inside the sender's sendmsg, so a program may read its answer right after
// sending, even without waiting (MSG_DONTWAIT); the supervisor waits for a busy socket's answer
// before it says EAGAIN, as the kernel's socket would already hold it.
//
// A request moves from the pair's queue to reading (readPeer) to in flight (handle), each
// stage set before the previous is cleared; Busy looks at them in that order, so it never
// misses one between two stages.
func (s *Socket) Busy() bool {
	s.mu.Lock()
	peerRC := s.peerRC
	s.mu.Unlock()
	if peerRC != nil {
		queued := false
		_ = peerRC.Control(func(fd uintptr) {
			n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
			queued = err == nil && n > 0
		})
		if queued {
			return true
		}
	}
	if s.reading.Load() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// Origin says where datagram d, the next one the program receives (the supervisor has peeked
// at it), came from: the port id of its sender (0: the kernel, or manad answering as the
// kernel would; another socket's for what that socket sent the program's) and the multicast
// group (as the program knows it) it was sent to, 0 for a unicast, as netlink_recvmsg puts
// NETLINK_CB(skb).portid in msg_name's nl_pid and NETLINK_CB(skb).dst_group in its nl_groups
// and in NETLINK_PKTINFO's control message; and whether the program asked for that control
// message (NETLINK_PKTINFO). consume forgets d's record (the program received it, rather than
// peeked). A datagram without a record (one the program read with read(2), which the
// supervisor does not see, can leave the log out of step) counts as the kernel's answer.
func (s *Socket) Origin(d []byte, consume bool) (from, group uint32, pktinfo bool) {
	s.mu.Lock()
	pktinfo = s.pktinfo
	s.mu.Unlock()
	from, group = s.sent.find(d, consume)
	return from, group, pktinfo
}

// maxSent bounds the datagrams sentLog remembers: more than the program's socket holds of the
// smallest datagrams a notification storm writes.
const maxSent = 4096

// sentLog records, for each datagram written to the program and not yet received, a short
// identity (length, netlink header, last bytes) and the group it was sent to. Writes come from
// several goroutines, so the log's order is not quite the socket's: a lookup searches for the
// datagram's identity from the oldest record on.
type sentLog struct {
	mu   sync.Mutex
	next uint64
	ents []sentEnt
}

type sentEnt struct {
	id    uint64 // for remove
	key   datagramKey
	group uint32
	from  uint32
}

// datagramKey identifies a datagram well enough to tell the ones in the socket's queue apart:
// its length, its first netlink header (length, type, flags, seq, port id) and its last 8 bytes.
type datagramKey struct {
	n          int
	head, tail [16]byte
}

func keyOf(d []byte) datagramKey {
	k := datagramKey{n: len(d)}
	copy(k.head[:], d)
	if len(d) > 16 {
		copy(k.tail[:], d[len(d)-min(len(d)-16, 16):])
	}
	return k
}

// add records datagram d, about to be written, sent to group from port id from; the result is
// for remove.
func (l *sentLog) add(d []byte, group, from uint32) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ents) >= maxSent {
		l.ents = slices.Delete(l.ents, 0, len(l.ents)-maxSent+1)
	}
	l.next++
	l.ents = append(l.ents, sentEnt{id: l.next, key: keyOf(d), group: group, from: from})
	return l.next
}

// remove forgets record id (its datagram was not written).
func (l *sentLog) remove(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.ents {
		if e.id == id {
			l.ents = slices.Delete(l.ents, i, i+1)
			return
		}
	}
}

// find returns the sender and group of the oldest record of d (0, 0 without one) and forgets it
// if consume.
func (l *sentLog) find(d []byte, consume bool) (from, group uint32) {
	k := keyOf(d)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.ents {
		if e.key == k {
			if consume {
				l.ents = slices.Delete(l.ents, i, i+1)
			}
			return e.from, e.group
		}
	}
	return 0, 0
}
