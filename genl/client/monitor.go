package client

import (
	"context"
	"fmt"
	"time"

	"github.com/mdlayher/genetlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
)

// NotificationKind says what a notification reports.
type NotificationKind int

// Notification kinds.
const (
	PrivateFlagsChanged NotificationKind = iota + 1 // ETHTOOL_MSG_PRIVFLAGS_NTF
	RingsChanged                                    // ETHTOOL_MSG_RINGS_NTF
	ChannelsChanged                                 // ETHTOOL_MSG_CHANNELS_NTF
	PortAdded                                       // manad PORT_NEW_NTF
	PortRemoved                                     // manad PORT_DEL_NTF
	PortChanged                                     // manad PORT_CHANGE_NTF
)

func (k NotificationKind) String() string {
	switch k {
	case PrivateFlagsChanged:
		return "privflags"
	case RingsChanged:
		return "rings"
	case ChannelsChanged:
		return "channels"
	case PortAdded:
		return "port-new"
	case PortRemoved:
		return "port-del"
	case PortChanged:
		return "port-change"
	case CoalesceChanged:
		return "coalesce"
	case NetdevDevAdded:
		return "dev-add"
	case NetdevDevRemoved:
		return "dev-del"
	case NetdevDevChanged:
		return "dev-change"
	case PagePoolAdded:
		return "page-pool-add"
	case PagePoolChanged:
		return "page-pool-change"
	case PagePoolRemoved:
		return "page-pool-del"
	case RSSChanged:
		return "rss"
	case SegmentAdded:
		return "segment-new"
	case SegmentRemoved:
		return "segment-del"
	case SegmentChanged:
		return "segment-change"
	}
	return fmt.Sprintf("NotificationKind(%d)", int(k))
}

// Notification is one multicast notification. Exactly one of PrivateFlags,
// Rings, Channels and Port is set, according to Kind.
type Notification struct {
	Kind      NotificationKind
	Sequence  uint32
	Interface Interface
	// PrivateFlags come in compact form; their names are looked up with
	// STRSET_GET (ETH_SS_PRIV_FLAGS), as the ethtool CLI does, and stay empty
	// if that fails.
	PrivateFlags *PrivateFlags
	Rings        *Rings
	Channels     *Channels
	Port         *wire.PortInfo
	Coalesce     *Coalesce
	// NetdevDev and PagePool are the netdev family's (subscriptions WithNetdev): the device
	// as dev-get shows it, the pool as page-pool-get shows it. Interface then has only the
	// index (none for a pool whose netdev is gone).
	NetdevDev *wire.NetdevDev
	PagePool  *wire.NetdevPagePool
	RSS       *RSS
	Segment   *wire.SegmentInfo // SegmentAdded, SegmentRemoved, SegmentChanged
}

// Subscription receives notifications of the ethtool "monitor" group and,
// from manad, the manad "events" group, on a connection of its own; with
// WithNetdev, the netdev family's "mgmt" and "page-pool" groups too.
type Subscription struct {
	c      *Client
	conn   *genetlink.Conn
	fams   families
	netdev *genetlink.Family // nil unless WithNetdev
}

// SubscribeOption adds to what a subscription receives.
type SubscribeOption func(*subscribeConfig)

type subscribeConfig struct{ netdev bool }

// WithNetdev also joins the netdev family's "mgmt" (dev add/del/change) and
// "page-pool" (page-pool add/change/del) groups, of manad or of the kernel.
func WithNetdev() SubscribeOption { return func(c *subscribeConfig) { c.netdev = true } }

// Subscribe opens a new connection and joins the notification groups. When
// it returns, notifications of changes made afterwards will be delivered.
// With WithNetdev, a side without the netdev family fails it with an error
// wrapping ENOENT.
func (c *Client) Subscribe(ctx context.Context, opts ...SubscribeOption) (*Subscription, error) {
	var cfg subscribeConfig
	for _, o := range opts {
		o(&cfg)
	}
	conn, fams, _, err := c.connect()
	if err != nil {
		return nil, err
	}
	s := &Subscription{c: c, conn: conn, fams: fams}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	join := func(f genetlink.Family, name string) error {
		for _, g := range f.Groups {
			if g.Name == name {
				return wrapErr(conn.JoinGroup(g.ID))
			}
		}
		return fmt.Errorf("client: family %q has no %q group: %w", f.Name, name, unix.ENOENT)
	}
	if err := join(fams.ethtool, ethtool.MonitorGroup); err != nil {
		conn.Close()
		return nil, err
	}
	if fams.manad != nil {
		if err := join(*fams.manad, wire.EventsGroup); err != nil {
			conn.Close()
			return nil, err
		}
	}
	if cfg.netdev {
		f, err := conn.GetFamily(wire.NetdevFamilyName)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("client: resolve the %q family: %w", wire.NetdevFamilyName, wrapErr(err))
		}
		for _, g := range []string{wire.NetdevGroupMgmt, wire.NetdevGroupPagePool} {
			if err := join(f, g); err != nil {
				conn.Close()
				return nil, err
			}
		}
		s.netdev = &f
	}
	_ = conn.SetDeadline(time.Time{})
	return s, nil
}

// Close ends the subscription.
func (s *Subscription) Close() error { return s.conn.Close() }

// Next waits for the next datagram of notifications and returns them
// decoded. It returns an error wrapping ctx.Err() when ctx ends, and an
// error wrapping io.EOF when manad closed the connection (for example
// because this subscriber did not keep up).
func (s *Subscription) Next(ctx context.Context) ([]Notification, error) {
	dl, _ := ctx.Deadline()
	if err := s.conn.SetDeadline(dl); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = s.conn.SetDeadline(time.Unix(1, 0)) })
	msgs, nmsgs, err := s.conn.Receive()
	stop()
	if err != nil {
		if cerr := ctxErr(ctx, err); cerr != nil {
			return nil, fmt.Errorf("client: monitor: %w", cerr)
		}
		return nil, wrapErr(err)
	}
	var out []Notification
	for i, m := range msgs {
		n, ok, err := s.decode(ctx, uint16(nmsgs[i].Header.Type), m)
		if err != nil {
			return nil, err
		}
		if ok {
			n.Sequence = nmsgs[i].Header.Sequence
			out = append(out, n)
		}
	}
	return out, nil
}

func (s *Subscription) decode(ctx context.Context, famID uint16, m genetlink.Message) (Notification, bool, error) {
	var n Notification
	var err error
	switch {
	case famID == s.fams.ethtool.ID:
		switch m.Header.Command {
		case unix.ETHTOOL_MSG_PRIVFLAGS_NTF:
			n.Kind = PrivateFlagsChanged
			if n.PrivateFlags, err = DecodePrivateFlags(m.Data, nil); err == nil {
				n.Interface = n.PrivateFlags.Interface
				s.nameFlags(ctx, n.PrivateFlags)
			}
		case unix.ETHTOOL_MSG_RINGS_NTF:
			n.Kind = RingsChanged
			if n.Rings, err = DecodeRings(m.Data); err == nil {
				n.Interface = n.Rings.Interface
			}
		case unix.ETHTOOL_MSG_CHANNELS_NTF:
			n.Kind = ChannelsChanged
			if n.Channels, err = DecodeChannels(m.Data); err == nil {
				n.Interface = n.Channels.Interface
			}
		case unix.ETHTOOL_MSG_COALESCE_NTF:
			n.Kind = CoalesceChanged
			if n.Coalesce, err = DecodeCoalesce(m.Data); err == nil {
				n.Interface = n.Coalesce.Interface
			}
		case wire.MsgRSSNtf:
			n.Kind = RSSChanged
			if n.RSS, err = DecodeRSS(m.Data); err == nil {
				n.Interface = n.RSS.Interface
			}
		default:
			return n, false, nil
		}
	case s.fams.manad != nil && famID == s.fams.manad.ID:
		switch m.Header.Command {
		case wire.CmdPortNewNtf:
			n.Kind = PortAdded
		case wire.CmdPortDelNtf:
			n.Kind = PortRemoved
		case wire.CmdPortChangeNtf:
			n.Kind = PortChanged
		case wire.CmdSegmentNewNtf, wire.CmdSegmentDelNtf, wire.CmdSegmentChangeNtf:
			n.Kind = map[uint8]NotificationKind{wire.CmdSegmentNewNtf: SegmentAdded, wire.CmdSegmentDelNtf: SegmentRemoved,
				wire.CmdSegmentChangeNtf: SegmentChanged}[m.Header.Command]
			n.Segment, err = DecodeSegment(m.Data)
			return n, err == nil, err
		default:
			return n, false, nil
		}
		if n.Port, err = DecodePort(m.Data); err == nil {
			n.Interface = Interface{Index: int(n.Port.Device.Index), Name: n.Port.Device.Name}
		}
	case s.netdev != nil && famID == s.netdev.ID:
		return decodeNetdevNotification(m)
	default:
		return n, false, nil
	}
	return n, err == nil, err
}

// nameFlags fills the names of compact private flags from ETH_SS_PRIV_FLAGS.
func (s *Subscription) nameFlags(ctx context.Context, p *PrivateFlags) {
	names, err := s.c.StringSet(ctx, Interface{Index: p.Interface.Index}, ethtool.SSPrivFlags)
	if err != nil {
		return
	}
	for i := range p.Flags {
		if p.Flags[i].Name == "" && p.Flags[i].Index < len(names) {
			p.Flags[i].Name = names[p.Flags[i].Index]
		}
	}
}

// Monitor calls fn for every notification until ctx ends (it then returns
// an error wrapping ctx.Err()) or the connection fails.
func (c *Client) Monitor(ctx context.Context, fn func(Notification), opts ...SubscribeOption) error {
	sub, err := c.Subscribe(ctx, opts...)
	if err != nil {
		return err
	}
	defer sub.Close()
	for {
		ns, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		for _, n := range ns {
			fn(n)
		}
	}
}
