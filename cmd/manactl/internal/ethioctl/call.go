package ethioctl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
)

type portInfo = wire.PortInfo

// call is one SIOCETHTOOL on a manad port.
type call struct {
	h    *Handler
	ctx  context.Context
	c    *client.Client
	mem  Memory
	name string
	data uint64 // ifr_data: the command structure in CMD's memory
	ifi  client.Interface
	port *portInfo
	cmd  uint32
}

// Bounds on what manad reports, so that a confused or hostile peer cannot make the supervisor
// allocate without limit either (the kernel's own are far below these).
const (
	maxStrings  = 1 << 16  // strings in one set
	maxIndir    = 1 << 16  // RSS indirection table entries
	maxKey      = 1 << 10  // RSS key bytes
	maxLinkMode = 32 * 127 // link mode bits: nwords is an s8
)

// fault is what a failed access to CMD's memory returns.
var fault = unix.EFAULT

// addr returns ifr_data+off, or EFAULT when it wraps around.
func (c *call) addr(off uint64) (uint64, error) {
	if c.data > math.MaxUint64-off {
		return 0, fault
	}
	return c.data + off, nil
}

// read copies len(p) bytes from ifr_data+off (copy_from_user).
func (c *call) read(off uint64, p []byte) error {
	a, err := c.addr(off)
	if err != nil {
		return err
	}
	if len(p) > 0 && uint64(len(p)-1) > math.MaxUint64-a {
		return fault
	}
	if err := c.mem.ReadAt(p, a); err != nil {
		return fault
	}
	return nil
}

// write copies p to ifr_data+off (copy_to_user).
func (c *call) write(off uint64, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	a, err := c.addr(off)
	if err != nil {
		return err
	}
	if uint64(len(p)-1) > math.MaxUint64-a {
		return fault
	}
	if err := c.mem.WriteAt(p, a); err != nil {
		return fault
	}
	return nil
}

// readStruct decodes one of layout.go's structures from ifr_data+off.
func (c *call) readStruct(off uint64, v any) error {
	b := make([]byte, binary.Size(v))
	if err := c.read(off, b); err != nil {
		return err
	}
	decode(b, v)
	return nil
}

// writeStruct encodes one of layout.go's structures at ifr_data+off.
func (c *call) writeStruct(off uint64, v any) error { return c.write(off, encode(v)) }

// manadErr turns the error of a request to manad into the errno CMD gets: manad's errno as it
// is; a lost connection is the NIC gone (ENODEV); an ended context EINTR. The error keeps
// manad's message for the debug log.
func (c *call) manadErr(op string, err error) error {
	switch {
	case c.ctx.Err() != nil:
		return fmt.Errorf("%s: %v: %w", op, err, unix.EINTR)
	case isTransport(err):
		return fmt.Errorf("%s: manad went away: %v: %w", op, err, unix.ENODEV)
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// isTransport reports whether err is the connection to manad failing rather than manad's
// answer: a socket error or timeout (the client reports a send on a connection manad closed as
// a *client.Error with EPIPE and no message, for instance). A reply that does not decode is
// neither.
func isTransport(err error) bool {
	var ce *client.Error
	var errno unix.Errno
	if errors.As(err, &ce) {
		if errno = ce.Errno; errno == 0 {
			return true
		}
		switch errno {
		case unix.EPIPE, unix.ECONNRESET, unix.ECONNREFUSED, unix.ECONNABORTED, unix.ENOTCONN,
			unix.ESHUTDOWN, unix.EBADF:
			return ce.Message == ""
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &errno) || errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed)
}

// run reads the command number and runs it, as dev_ethtool and __dev_ethtool do.
func (c *call) run() (int, error) {
	var b [4]byte
	if err := c.read(0, b[:]); err != nil {
		return 0, err
	}
	c.cmd = binary.NativeEndian.Uint32(b[:])
	sub := c.cmd
	if c.cmd == ethtoolPerQueue {
		// __dev_ethtool reads the sub-command before anything else: it decides the
		// permission.
		if err := c.read(perQueueSubCmdOff, b[:]); err != nil {
			return 0, err
		}
		sub = binary.NativeEndian.Uint32(b[:])
	}
	if !anyone[sub] {
		if err := c.requireAdmin(); err != nil {
			return 0, err
		}
	}
	if f, ok := commands[c.cmd]; ok {
		return 0, f(c)
	}
	if n, ok := lacking[c.cmd]; ok {
		return 0, c.lacks(n)
	}
	if c.cmd == unix.ETHTOOL_SFEATURES {
		return c.setFeatures()
	}
	return 0, unix.EOPNOTSUPP // __dev_ethtool's default
}

// anyone are the commands __dev_ethtool lets any user run; every other needs CAP_NET_ADMIN,
// which it checks before anything else, even before it knows the command.
var anyone = map[uint32]bool{
	unix.ETHTOOL_GSET: true, unix.ETHTOOL_GDRVINFO: true, unix.ETHTOOL_GMSGLVL: true,
	unix.ETHTOOL_GLINK: true, unix.ETHTOOL_GCOALESCE: true, unix.ETHTOOL_GRINGPARAM: true,
	unix.ETHTOOL_GPAUSEPARAM: true, unix.ETHTOOL_GRXCSUM: true, unix.ETHTOOL_GTXCSUM: true,
	unix.ETHTOOL_GSG: true, unix.ETHTOOL_GSSET_INFO: true, unix.ETHTOOL_GSTRINGS: true,
	unix.ETHTOOL_GSTATS: true, unix.ETHTOOL_GPHYSTATS: true, unix.ETHTOOL_GTSO: true,
	unix.ETHTOOL_GPERMADDR: true, unix.ETHTOOL_GUFO: true, unix.ETHTOOL_GGSO: true,
	unix.ETHTOOL_GGRO: true, unix.ETHTOOL_GFLAGS: true, unix.ETHTOOL_GPFLAGS: true,
	unix.ETHTOOL_GRXFH: true, unix.ETHTOOL_GRXRINGS: true, unix.ETHTOOL_GRXCLSRLCNT: true,
	unix.ETHTOOL_GRXCLSRULE: true, unix.ETHTOOL_GRXCLSRLALL: true, unix.ETHTOOL_GRXFHINDIR: true,
	unix.ETHTOOL_GRSSH: true, unix.ETHTOOL_GFEATURES: true, unix.ETHTOOL_GCHANNELS: true,
	unix.ETHTOOL_GET_TS_INFO: true, unix.ETHTOOL_GEEE: true, unix.ETHTOOL_GTUNABLE: true,
	0x4e /* ETHTOOL_PHY_GTUNABLE */ : true, unix.ETHTOOL_GLINKSETTINGS: true, unix.ETHTOOL_GFECPARAM: true,
}

// probeName can name no device (it is longer than IFNAMSIZ).
const probeName = "manad-ethioctl-admin-probe"

// requireAdmin is __dev_ethtool's ns_capable(CAP_NET_ADMIN) with manad's notion of an admin,
// the one its SETs are authorised by: a CHANNELS_SET naming no device, which manad's genl core
// refuses with EPERM before it parses anything when the caller is no admin, and which can change
// nothing when it is (the lookup fails). So a command that needs admin rights answers EPERM
// before any copy, check or EOPNOTSUPP, as the kernel's does.
func (c *call) requireAdmin() error {
	err := c.c.SetChannels(c.ctx, client.Interface{Name: probeName}, client.ChannelsUpdate{})
	switch {
	case err == nil:
		return nil
	case c.ctx.Err() != nil || isTransport(err):
		return c.manadErr("admin probe", err)
	case errors.Is(err, unix.EPERM):
		return unix.EPERM
	}
	return nil
}

// Command numbers x/sys/unix does not name.
const (
	ethtoolPerQueue = 0x4b // ETHTOOL_PERQUEUE
)

// commands are the ones mana's ethtool_ops (with the core's fallbacks) serve, ETHTOOL_SFEATURES
// aside (it returns flags).
var commands = map[uint32]func(*call) error{
	unix.ETHTOOL_GDRVINFO:      (*call).getDrvinfo,
	unix.ETHTOOL_GSSET_INFO:    (*call).getSSetInfo,
	unix.ETHTOOL_GSTRINGS:      (*call).getStrings,
	unix.ETHTOOL_GSTATS:        (*call).getStats,
	unix.ETHTOOL_GPFLAGS:       (*call).getPrivFlags,
	unix.ETHTOOL_SPFLAGS:       (*call).setPrivFlags,
	unix.ETHTOOL_GRINGPARAM:    (*call).getRingparam,
	unix.ETHTOOL_SRINGPARAM:    (*call).setRingparam,
	unix.ETHTOOL_GCHANNELS:     (*call).getChannels,
	unix.ETHTOOL_SCHANNELS:     (*call).setChannels,
	unix.ETHTOOL_GCOALESCE:     (*call).getCoalesce,
	unix.ETHTOOL_SCOALESCE:     (*call).setCoalesce,
	unix.ETHTOOL_GLINKSETTINGS: (*call).getLinkSettings,
	unix.ETHTOOL_GSET:          (*call).getSettings,
	unix.ETHTOOL_GLINK:         (*call).getLink,
	unix.ETHTOOL_GRXRINGS:      (*call).getRxRings,
	unix.ETHTOOL_GRXCLSRLCNT:   (*call).getRxClassRules,
	unix.ETHTOOL_GRXCLSRULE:    (*call).getRxClassRules,
	unix.ETHTOOL_GRXCLSRLALL:   (*call).getRxClassRules,
	unix.ETHTOOL_GRXFH:         (*call).getRxFH,
	unix.ETHTOOL_GRSSH:         (*call).getRSSH,
	unix.ETHTOOL_SRSSH:         (*call).setRSSH,
	unix.ETHTOOL_GRXFHINDIR:    (*call).getRxFHIndir,
	unix.ETHTOOL_SRXFHINDIR:    (*call).setRxFHIndir,
	unix.ETHTOOL_GFEATURES:     (*call).getFeatures,
	unix.ETHTOOL_GTXCSUM:       (*call).getOneFeature,
	unix.ETHTOOL_GRXCSUM:       (*call).getOneFeature,
	unix.ETHTOOL_GSG:           (*call).getOneFeature,
	unix.ETHTOOL_GTSO:          (*call).getOneFeature,
	unix.ETHTOOL_GGSO:          (*call).getOneFeature,
	unix.ETHTOOL_GGRO:          (*call).getOneFeature,
	unix.ETHTOOL_STXCSUM:       (*call).setOneFeature,
	unix.ETHTOOL_SRXCSUM:       (*call).setOneFeature,
	unix.ETHTOOL_SSG:           (*call).setOneFeature,
	unix.ETHTOOL_STSO:          (*call).setOneFeature,
	unix.ETHTOOL_SGSO:          (*call).setOneFeature,
	unix.ETHTOOL_SGRO:          (*call).setOneFeature,
	unix.ETHTOOL_GFLAGS:        (*call).getFlags,
	unix.ETHTOOL_SFLAGS:        (*call).setFlags,
	unix.ETHTOOL_GPERMADDR:     (*call).getPermAddr,
	unix.ETHTOOL_GET_TS_INFO:   (*call).getTSInfo,
}

// lacking are the commands __dev_ethtool knows and mana has no callback for: they answer
// EOPNOTSUPP, after reading the number of bytes given here first where the kernel's handler
// copies from the user before it looks for the callback (so a bad pointer reads EFAULT, as
// there). SRXFH and the class-rule sets fail on the missing set_rxnfc before any copy.
var lacking = map[uint32]int{
	unix.ETHTOOL_SSET:          legacyCmdSize, // ethtool_set_settings copies first
	unix.ETHTOOL_SLINKSETTINGS: 0,
	unix.ETHTOOL_GREGS:         0,
	unix.ETHTOOL_GWOL:          0,
	unix.ETHTOOL_SWOL:          0,
	unix.ETHTOOL_GMSGLVL:       0,
	unix.ETHTOOL_SMSGLVL:       0,
	unix.ETHTOOL_GEEE:          0,
	unix.ETHTOOL_SEEE:          0,
	0x9:                        0, // ETHTOOL_NWAY_RST
	unix.ETHTOOL_GEEPROM:       0,
	unix.ETHTOOL_SEEPROM:       0,
	unix.ETHTOOL_GPAUSEPARAM:   0,
	unix.ETHTOOL_SPAUSEPARAM:   0,
	0x1a:                       0, // ETHTOOL_TEST
	0x1c:                       0, // ETHTOOL_PHYS_ID
	unix.ETHTOOL_SRXFH:         0,
	unix.ETHTOOL_SRXCLSRLDEL:   0,
	unix.ETHTOOL_SRXCLSRLINS:   0,
	0x33:                       136,         // ETHTOOL_FLASHDEV: dev_ethtool copies struct ethtool_flash; no devlink
	0x34:                       0,           // ETHTOOL_RESET
	0x3e:                       0,           // ETHTOOL_SET_DUMP
	0x3f:                       0,           // ETHTOOL_GET_DUMP_FLAG
	0x40:                       0,           // ETHTOOL_GET_DUMP_DATA
	unix.ETHTOOL_GMODULEINFO:   modinfoSize, // ethtool_get_module_info copies first
	unix.ETHTOOL_GMODULEEEPROM: 0,
	unix.ETHTOOL_GTUNABLE:      0,
	unix.ETHTOOL_STUNABLE:      0,
	unix.ETHTOOL_GPHYSTATS:     8, // ethtool_get_phy_stats copies its struct ethtool_stats first
	ethtoolPerQueue:            perQueueOpSize,
	0x4e:                       0, // ETHTOOL_PHY_GTUNABLE
	0x4f:                       0, // ETHTOOL_PHY_STUNABLE
	unix.ETHTOOL_GFECPARAM:     0,
	unix.ETHTOOL_SFECPARAM:     0,
}

// lacks answers a command mana has no callback for, after copying n bytes in.
func (c *call) lacks(n int) error {
	if n > 0 {
		if err := c.read(0, make([]byte, n)); err != nil {
			return err
		}
	}
	return unix.EOPNOTSUPP
}

// stringSets returns the strings of the sets ids for the port (STRSET_GET), by id.
func (c *call) stringSets(ids ...uint32) (map[uint32][]string, error) {
	ss, err := c.c.StringSets(c.ctx, &c.ifi, ids, false)
	if err != nil {
		return nil, c.manadErr("STRSET_GET", err)
	}
	out := map[uint32][]string{}
	for _, s := range ss.Sets {
		if len(s.Strings) > maxStrings {
			return nil, fmt.Errorf("string set %d: %d strings: %w", s.ID, len(s.Strings), unix.ENOMEM)
		}
		out[s.ID] = s.Strings
	}
	return out, nil
}

// ioctlSets are the string sets __ethtool_get_sset_count answers for mana: the core's own
// tables, and the driver's per-device sets through get_sset_count (which answers -EINVAL for
// any other). A per-device set manad counts 0 is one mana does not have.
var ioctlSets = map[uint32]bool{ // id → per device
	ethtool.SSFeatures:     false,
	ethtool.SSRSSHashFuncs: false,
	ethtool.SSTunables:     false,
	ethtool.SSPhyTunables:  false,
	ethtool.SSLinkModes:    false,
	ethtool.SSStats:        true,
	ethtool.SSPrivFlags:    true,
}

// setCounts returns __ethtool_get_sset_count for each of ids that has one (STRSET_GET, counts
// only).
func (c *call) setCounts(ids []uint32) (map[uint32]int, error) {
	var ask []uint32
	for _, id := range ids {
		if _, ok := ioctlSets[id]; ok {
			ask = append(ask, id)
		}
	}
	out := map[uint32]int{}
	if len(ask) == 0 {
		return out, nil
	}
	ss, err := c.c.StringSets(c.ctx, &c.ifi, ask, true)
	if err != nil {
		return nil, c.manadErr("STRSET_GET", err)
	}
	for _, s := range ss.Sets {
		perDev, ok := ioctlSets[s.ID]
		if !ok || (perDev && s.Count == 0) {
			continue
		}
		if s.Count < 0 || s.Count > maxStrings {
			return nil, fmt.Errorf("string set %d: count %d: %w", s.ID, s.Count, unix.ENOMEM)
		}
		out[s.ID] = s.Count
	}
	return out, nil
}

func decodeUint64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }
