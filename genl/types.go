package genl

import (
	"context"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/genl/transport"
	"github.com/manad/manad/genl/wire"
)

// Caller is the peer of a request, from its socket credentials at connect
// time (transport.Caller): its pid, uid and gid, whether it is an admin
// (uid 0 or the admin group) and its network namespace, which scopes device
// lookups and notifications as the kernel scopes them by socket netns.
type Caller = transport.Caller

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

// Backend is what the server calls: one value of driver ops, as a netdev's
// struct ethtool_ops (netdevsim's nsim_ethtool_ops) with the manad, segment
// and netdev ops beside them. The daemon fills every op. A nil op is one the
// backend does not have, and a message that calls it answers what the kernel
// answers for a driver without that callback: EOPNOTSUPP after the header and
// device are resolved for most (a dump then skips the device), or the
// message's own behaviour where the field says so. Devices, DeviceByIndex and
// DeviceByName are required: NewServer refuses a Backend without them.
//
// Every op gets the request context, cancelled when the client disconnects
// or the server stops. Errors should wrap a unix.Errno (errors.As) and may
// carry a user-facing message by implementing ExtackMessage() string (see
// Errorf); the server puts the errno in NLMSG_ERROR and the message in
// NLMSGERR_ATTR_MSG. An error wrapping no errno is reported as EIO with its
// text as the message.
//
// The Set* ops get an Update: the backend calls its Apply with the current
// value under its configuration lock, and Apply returns the value the
// request asks for — only the attributes the request carries changed, the
// ethtool-core checks (ring size > max, channel counts > max or no RX/TX
// channel, unknown bits vs the number of flags) done exactly as net/ethtool
// does them. No change means no driver call and no notification. After a
// successful driver call the backend calls Changed with the resulting value
// (which the driver may have rounded), still under the lock, and the server
// queues the *_NTF from it, as ethnl_default_set_doit calls ethnl_notify
// under rtnl_lock: one notification per change, in the order of the changes,
// none for a no-op or a refused request. A Set* op is used only with its get
// op (the ethtool core checks both: set_ringparam with get_ringparam).
//
// Device lookups must return an error wrapping unix.ENODEV when there is no
// such device in c.NetNS; the server then answers with the kernel's extack.
// A get op returning EOPNOTSUPP makes a dump skip that device silently.
type Backend struct {
	// Devices lists the devices visible in c.NetNS, for dumps.
	Devices func(ctx context.Context, c Caller) ([]Device, error)
	// DeviceByIndex and DeviceByName find a device (ENODEV if none; by name may wait briefly).
	DeviceByIndex func(ctx context.Context, c Caller, ifindex uint32) (Device, error)
	DeviceByName  func(ctx context.Context, c Caller, name string) (Device, error)

	// The ethtool ops.

	// StringSet returns a per-device string set (get_sset_count, get_strings); nil, empty or
	// an error: count 0, as strset_prepare_set.
	StringSet func(ctx context.Context, c Caller, d Device, set uint32) ([]string, error)
	// PrivFlags and SetPrivFlags are get_priv_flags and set_priv_flags.
	PrivFlags    func(ctx context.Context, c Caller, d Device) (PrivFlags, error)
	SetPrivFlags func(ctx context.Context, c Caller, d Device, u Update[PrivFlags]) error
	// Rings and SetRings are get_ringparam and set_ringparam.
	Rings    func(ctx context.Context, c Caller, d Device) (Rings, error)
	SetRings func(ctx context.Context, c Caller, d Device, u Update[Rings]) error
	// Channels and SetChannels are get_channels and set_channels.
	Channels    func(ctx context.Context, c Caller, d Device) (Channels, error)
	SetChannels func(ctx context.Context, c Caller, d Device, u Update[Channels]) error
	// Coalesce and SetCoalesce are get_coalesce and set_coalesce: the driver's own checks
	// (mana_set_coalesce's) are the backend's, with its extack texts.
	Coalesce    func(ctx context.Context, c Caller, d Device) (Coalesce, error)
	SetCoalesce func(ctx context.Context, c Caller, d Device, u Update[Coalesce]) error
	// RSS returns the device's hash function, key and indirection table (get_rxfh). Errors:
	// ENODEV when the device is gone, EOPNOTSUPP for a device without RSS.
	RSS func(ctx context.Context, c Caller, d Device) (RSS, error)
	// SetRSS is set_rxfh for context 0: Apply gets the current setting and does the ethtool
	// core's checks; the driver's own (mana_set_rxfh: port up, Toeplitz only, entries below
	// the queue count) are the backend's. The backend stores the Configured of a successful
	// Apply also when it reports no change (then without a driver call or a notification),
	// and after a successful driver call for a change; a refused change leaves it. For a
	// device without RSS the backend calls Apply with the zero RSSSetting and answers
	// EOPNOTSUPP when it reports a change, as ethnl_rss_set does without get_rxfh and
	// set_rxfh; so does the server when SetRSS is nil.
	SetRSS func(ctx context.Context, c Caller, d Device, u Update[RSSSetting]) error
	// Features and SetFeatures are the netdev's features as ethtool shows them; SetFeatures
	// gets the request's Wanted applied to the current value and stores Wanted∩HW, as
	// __netdev_update_features; Changed gets the value after the driver call. Nil: both
	// messages are EOPNOTSUPP.
	Features    func(ctx context.Context, c Caller, d Device) (Features, error)
	SetFeatures func(ctx context.Context, c Caller, d Device, u Update[Features]) error
	// LinkSettings is get_link_ksettings (nil: LINKINFO_GET and LINKMODES_GET are EOPNOTSUPP
	// "failed to retrieve link settings").
	LinkSettings func(ctx context.Context, c Caller, d Device) (LinkSettings, error)
	// LinkState is get_link, the carrier (nil: LINKSTATE_GET answers without a link state).
	LinkState func(ctx context.Context, c Caller, d Device) (LinkState, error)
	// TSInfo is get_ts_info; the server adds the core's software bits (nil: those bits only,
	// no PHC, as __ethtool_get_ts_info for a driver without it).
	TSInfo func(ctx context.Context, c Caller, d Device) (TSInfo, error)

	// The manad family's ops: a nil op makes its command EOPNOTSUPP with an extack saying so.

	Ports      func(ctx context.Context, c Caller) ([]PortInfo, error)
	Port       func(ctx context.Context, c Caller, d Device) (PortInfo, error)
	CreatePort func(ctx context.Context, c Caller, s PortSpec) (PortInfo, error)
	DeletePort func(ctx context.Context, c Caller, d Device) error
	// DeletePortNetNS deletes port d and the network namespace manad created for it, and
	// reports whether it did (PORT_DEL with PortAttrNetNSToo; nil: such a request is
	// EOPNOTSUPP).
	DeletePortNetNS func(ctx context.Context, c Caller, d Device) (wire.PortDel, error)
	SetMTU          func(ctx context.Context, c Caller, d Device, mtu uint32) error
	AttachXDP       func(ctx context.Context, c Caller, d Device, p XDPProgram) error
	DetachXDP       func(ctx context.Context, c Caller, d Device) error
	// Stats are the device's counters.
	Stats      func(ctx context.Context, c Caller, d Device) ([]Stat, error)
	PlanLayout func(ctx context.Context, c Caller, r LayoutRequest) ([]RxBufLayout, error)
	SetFault   func(ctx context.Context, c Caller, d Device, f Fault) error
	// StartCapture starts recording what r.Target, a port or a wire segment, carries. Errors:
	// ENOENT when there is no such port or segment visible to c; EINVAL for a direction the
	// target does not take.
	StartCapture func(ctx context.Context, c Caller, r CaptureRequest) (CaptureSource, error)

	// The wire segments and their uplinks. Errors: ENOENT for an unknown segment or uplink,
	// EEXIST for a segment already defined or an uplink already used (by any segment), EBUSY
	// for deleting a segment ports are on, EINVAL for a bad name or value, ENOSPC for more
	// uplinks than a segment may have. A change that succeeds is announced by the backend
	// (NotifySegment) and persisted; a refused one changes nothing.

	Segments      func(ctx context.Context, c Caller) ([]SegmentInfo, error)
	Segment       func(ctx context.Context, c Caller, name string) (SegmentInfo, error)
	CreateSegment func(ctx context.Context, c Caller, s SegmentSpec) (SegmentInfo, error)
	DeleteSegment func(ctx context.Context, c Caller, name string) error
	AddUplink     func(ctx context.Context, c Caller, segment string, u UplinkSpec) (SegmentInfo, error)
	DeleteUplink  func(ctx context.Context, c Caller, segment string, u UplinkSpec) error

	// The netdev family's ops.

	// NetdevPort returns the views of port d: ENODEV when d is gone, EOPNOTSUPP when d has
	// no netdev views (the request then fails with it; dumps skip d). Nil: the netdev family's
	// requests are EOPNOTSUPP.
	NetdevPort func(ctx context.Context, c Caller, d Device) (NetdevPort, error)
	// NetdevViews, when set, builds only the views in want (see NetdevView) and is used
	// instead of NetdevPort; it fails as NetdevPort does.
	NetdevViews func(ctx context.Context, c Caller, d Device, want NetdevView) (NetdevPort, error)
	// SetNAPI changes the settings of the NAPI with id on device d (the server found it in
	// d's napi-get view) and fails with an error wrapping ENOENT when d has no such NAPI any
	// more (the server then answers as for an unknown id), ENODEV when d is gone, or the
	// backend's error (an out-of-range value, a state file that cannot be written) with its
	// extack; nothing changes then. Nil: napi-set finds no NAPI (ENOENT).
	SetNAPI func(ctx context.Context, c Caller, d Device, id uint32, set NAPISet) error
}

// ServerConfig configures a Server: the Backend it calls, and its transport (the control
// socket's limits, busy polling and writer, described in transport.Config, where 0 means the
// default). NewServer sets the transport's Handler to the Server, and its Logger and Observer
// to ServerConfig's when they are nil.
type ServerConfig struct {
	Backend   Backend
	Transport transport.Config
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
