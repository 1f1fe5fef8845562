package genl

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/genl/wire"
)

// Caller is the peer of a request, from its socket credentials at connect
// time.
type Caller struct {
	PID      int32
	UID, GID uint32
	// Admin is true for uid 0, or when the primary or a supplementary group
	// of the peer is the configured admin group. Supplementary groups come
	// from SO_PEERGROUPS (the connecting task's own credentials), falling
	// back to /proc/<pid>/status.
	Admin bool
	// NetNS is the caller's network namespace, which scopes device lookups
	// and notifications as the kernel scopes them by socket netns.
	NetNS NetNS
}

// PrivFlags are a device's private flags: their names (at most 32 are
// used, as ethnl_get_priv_flags_info caps them) and the bits set.
type PrivFlags struct {
	Names []string
	Flags uint32
}

// Update is a SET request as a Backend applies it (see Backend).
//
// Apply returns the value the request asks for given the current value cur,
// whether it differs from cur, and the request's error (an *Error or
// nlattr error with the offending attribute) — then nothing is applied.
// Apply is pure: it only reads the request. Changed, when not nil, is called
// with the value after a successful driver call, under the same lock hold as
// Apply.
type Update[T any] struct {
	Apply   func(cur T) (next T, changed bool, err error)
	Changed func(result T)
}

// The structs of the wire, under the names the Backend uses.
type (
	NetNS         = wire.NetNS
	Device        = wire.Device
	Rings         = wire.Rings
	Channels      = wire.Channels
	Stat          = wire.Stat
	RxBufLayout   = wire.RxBufLayout
	LayoutRequest = wire.LayoutRequest
	Fault         = wire.Fault
	XDPProgram    = wire.XDPProgram
	PortSpec      = wire.PortSpec
	PortInfo      = wire.PortInfo
	LinkSettings  = wire.LinkSettings
	LinkState     = wire.LinkState
	TSInfo        = wire.TSInfo
)

// Backend is what the server calls; the daemon implements it.
//
// Every method gets the request context, cancelled when the client
// disconnects or the server stops. Errors should wrap a unix.Errno
// (errors.As) and may carry a user-facing message by implementing
// ExtackMessage() string (see Errorf); the server puts the errno in
// NLMSG_ERROR and the message in NLMSGERR_ATTR_MSG. An error wrapping no
// errno is reported as EIO with its text as the message.
//
// The Set* methods get an Update: the backend calls its Apply with the
// current value under its configuration lock, and Apply returns the value the
// request asks for — only the attributes the request carries changed, the
// ethtool-core checks (ring size > max, channel counts > max or no RX/TX
// channel, unknown bits vs the number of flags) done exactly as net/ethtool
// does them. No change means no driver call and no notification. After a
// successful driver call the backend calls Changed with the resulting value
// (which the driver may have rounded), still under the lock, and the server
// queues the *_NTF from it, as ethnl_default_set_doit calls ethnl_notify
// under rtnl_lock: one notification per change, in the order of the changes,
// none for a no-op or a refused request.
//
// Device lookups must return an error wrapping unix.ENODEV when there is no
// such device in c.NetNS; the server then answers with the kernel's extack.
// A GET method returning EOPNOTSUPP makes a dump skip that device silently.
type Backend interface {
	Devices(ctx context.Context, c Caller) ([]Device, error)                     // devices visible in c.NetNS, for dumps
	DeviceByIndex(ctx context.Context, c Caller, ifindex uint32) (Device, error) // ENODEV if none
	DeviceByName(ctx context.Context, c Caller, name string) (Device, error)     // ENODEV if none (may wait briefly)

	StringSet(ctx context.Context, c Caller, d Device, set uint32) ([]string, error) // per-device sets; nil/empty = count 0
	PrivFlags(ctx context.Context, c Caller, d Device) (PrivFlags, error)
	SetPrivFlags(ctx context.Context, c Caller, d Device, u Update[PrivFlags]) error
	Rings(ctx context.Context, c Caller, d Device) (Rings, error)
	SetRings(ctx context.Context, c Caller, d Device, u Update[Rings]) error
	Channels(ctx context.Context, c Caller, d Device) (Channels, error)
	SetChannels(ctx context.Context, c Caller, d Device, u Update[Channels]) error

	Ports(ctx context.Context, c Caller) ([]PortInfo, error)
	Port(ctx context.Context, c Caller, d Device) (PortInfo, error)
	CreatePort(ctx context.Context, c Caller, s PortSpec) (PortInfo, error)
	DeletePort(ctx context.Context, c Caller, d Device) error
	SetMTU(ctx context.Context, c Caller, d Device, mtu uint32) error
	AttachXDP(ctx context.Context, c Caller, d Device, p XDPProgram) error
	DetachXDP(ctx context.Context, c Caller, d Device) error
	Stats(ctx context.Context, c Caller, d Device) ([]Stat, error)
	PlanLayout(ctx context.Context, c Caller, r LayoutRequest) ([]RxBufLayout, error)
	SetFault(ctx context.Context, c Caller, d Device, f Fault) error

	LinkSettings(ctx context.Context, c Caller, d Device) (LinkSettings, error) // get_link_ksettings
	LinkState(ctx context.Context, c Caller, d Device) (LinkState, error)       // link = carrier
	TSInfo(ctx context.Context, c Caller, d Device) (TSInfo, error)             // get_ts_info; the server adds the core's software bits
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Backend    Backend
	AdminGroup int // -1 = none (only uid 0 is admin)
	// MaxConns bounds the connections served at once (0 → admission.DefaultMaxConns). Connections of
	// uid 0 are never refused (they count towards it); the last MaxConns/8 slots are reserved
	// for uid 0 and the admin group, so other users together hold at most MaxConns−MaxConns/8.
	// A refused connection gets EUSERS with an extack message on its first request.
	MaxConns int
	// MaxConnsPerUID bounds the connections of one uid other than 0 (0 → admission.DefaultMaxConnsPerUID).
	MaxConnsPerUID int
	// IdleTimeout closes a connection that has sent no request for that long and belongs to
	// no multicast group (0 → admission.DefaultIdleTimeout). A request in progress is not idle.
	IdleTimeout time.Duration
	// BusyPoll is how long a connection's request loop polls its socket for the next request
	// after answering one, before it parks on the runtime's poller (0: it parks at once), as
	// the kernel's busy_read polls a device queue (genl/busypoll). A loop polls after its
	// first answer and after a request that came within BusyPoll of the answer before it;
	// half the processors' worth of connections (GOMAXPROCS/2, none on one processor) poll
	// at once, the others park. manad's configuration gives busypoll.DefaultServerWindow.
	BusyPoll   time.Duration
	MaxMessage int // max request datagram; 0 → 64 KiB
	// MaxReply bounds one reply datagram (0, or more than the socket can carry: the
	// connection's SO_SNDBUF less the kernel's 32-byte reserve). A dump is split into
	// NLM_F_MULTI datagrams within it; a do reply that does not fit is EMSGSIZE (LAYOUT_PLAN
	// then answers multi-part instead); an error ACK whose echo would not fit echoes only
	// the request header (NLM_F_CAPPED), as with NETLINK_CAP_ACK.
	MaxReply int
	// WriteTimeout is the per-datagram write deadline (0 → 2s); a client
	// exceeding it is dropped and logged.
	WriteTimeout time.Duration
	// SendQueue is the per-connection bounded queue of notification
	// datagrams (0 → 64); a subscriber whose queue is full is dropped and
	// logged.
	SendQueue int
	Logger    *slog.Logger // nil → slog.Default()
	// Observer, when set, is told about every request and dropped subscriber (metrics).
	Observer Observer
}

// Error is manad's one errno-plus-message error (genl/nlerr), for Backend
// implementations. The server sends Errno in NLMSG_ERROR, Message as
// NLMSGERR_ATTR_MSG and a non-zero Offset as NLMSGERR_ATTR_OFFS.
type Error = nlerr.Error

// Errorf returns an *Error with errno and a formatted message. The result
// satisfies errors.Is(err, errno).
func Errorf(errno unix.Errno, format string, args ...any) error {
	return nlerr.New(errno, format, args...)
}
