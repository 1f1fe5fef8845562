package tap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// MTU limits of a TAP (tun_net_init: min_mtu ETH_MIN_MTU, max_mtu MAX_MTU - hard_header_len).
const (
	MinMTU = 68
	MaxMTU = 65521 // MAX_MTU - ETH_HLEN
)

// AliasPrefix starts the ifalias manad gives its TAPs ("manad:<port>"), so that `ip link`, scripts
// and udev rules (ATTR{ifalias}) can tell them from other TAPs.
const AliasPrefix = "manad:"

// ifAliasSize is IFALIASZ (include/uapi/linux/if.h): an alias has at most 255 bytes.
const ifAliasSize = 256

// Config describes a port's TAP.
type Config struct {
	// Name is the interface name: 1..15 bytes, no '/', ':', '%' or white space (dev_valid_name;
	// templates such as "tap%d" are refused because a daemon must re-attach by a fixed name).
	Name string
	// MAC, when set, is the interface's address (a unicast, non-zero Ethernet address). Nil keeps
	// the kernel's random address of a new TAP, or the address of a re-attached one.
	MAC net.HardwareAddr
	// MTU, when non-zero, is set on the TAP (MinMTU..MaxMTU). 0 keeps the current MTU.
	MTU int
	// Queues is the number of queues to attach: 1..MaxQueues.
	Queues int
	// NetNS is the named network namespace (/run/netns/NAME, as `ip netns add` creates) the TAP
	// lives in; "" is the daemon's own. The TAP is created directly inside it (not moved there
	// afterwards), so names only need to be unique per namespace.
	NetNS string
	// Persistent TAPs (IFF_PERSIST) outlive the daemon with their addresses and routes, and a
	// restarted daemon re-attaches to them. Non-persistent ones disappear with the daemon.
	Persistent bool
	// Alias is the interface alias (IFLA_IFALIAS); "" means AliasPrefix+Name.
	Alias string
	// TxQueueLen, when non-zero, is the tx_queue_len a new TAP gets: the length of each queue's
	// ring of frames the kernel transmitted and manad has not read yet. 0 keeps tun's default
	// (500); a re-attached TAP keeps the length it has, so that an `ip link set txqueuelen`
	// survives a restart.
	TxQueueLen int
	// Logger receives the device's log lines; nil means slog.Default().
	Logger *slog.Logger
	// Offload makes every frame read or written carry a 12-byte virtio_net_hdr_v1
	// (IFF_VNET_HDR) and turns on every offload the kernel accepts (TUNSETOFFLOAD; see
	// Device.Offloads).
	Offload bool
	// Group, when non-zero, is the netdev group (IFLA_GROUP, `ip link show group N`) a
	// non-persistent TAP is put in, so that DeleteGroup can unregister all of them at once. A
	// persistent TAP is never in it: one re-attached while carrying it goes back to group 0
	// (the default), so a group deletion can never take a TAP that must outlive the daemon.
	Group uint32

	// Watcher, when set, is the link watcher of the TAP's namespace that Watch subscribes to,
	// shared with the other TAPs there: one notification socket, one rtnetlink socket and one
	// namespace descriptor for all of them (the device keeps them open after the Watcher
	// closes). Nil gives the device its own, and every Watch a watcher of its own. A Watcher of
	// another namespace is refused (EINVAL), a closed one too (ENODEV).
	Watcher *Watcher
}

// check validates c and fills in the defaults.
func (c *Config) check() error {
	if err := CheckName(c.Name); err != nil {
		return err
	}
	if c.Queues < 1 || c.Queues > MaxQueues {
		return nlerr.New(unix.EINVAL, "TAP %s: queue count %d out of range 1..%d", c.Name, c.Queues, MaxQueues)
	}
	if c.MTU != 0 {
		if err := checkMTU(c.MTU); err != nil {
			return err
		}
	}
	if c.MAC != nil {
		if err := CheckMAC(c.MAC); err != nil {
			return err
		}
	}
	if c.TxQueueLen < 0 {
		return nlerr.New(unix.EINVAL, "TAP %s: negative tx queue length %d", c.Name, c.TxQueueLen)
	}
	if c.Alias == "" {
		c.Alias = AliasPrefix + c.Name
	}
	if len(c.Alias) >= ifAliasSize {
		return nlerr.New(unix.EINVAL, "TAP %s: alias longer than %d bytes", c.Name, ifAliasSize-1)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// CheckName is the rule a port's TAP name follows: dev_valid_name, minus the '%' templates
// (a daemon re-attaches by a fixed name). The configuration checks port names with it, so a
// name it accepts is one Open accepts. Errors: an *nlerr.Error with EINVAL saying what is
// wrong.
func CheckName(name string) error {
	switch {
	case name == "":
		return nlerr.New(unix.EINVAL, "name %q is empty", name)
	case len(name) >= unix.IFNAMSIZ:
		return nlerr.New(unix.EINVAL, "name %q is longer than %d bytes", name, unix.IFNAMSIZ-1)
	case name == "." || name == "..":
		return nlerr.New(unix.EINVAL, "name %q is not a valid interface name", name)
	case strings.ContainsAny(name, "/:% \t\n\v\f\r\x00"):
		return nlerr.New(unix.EINVAL, "name %q is not a valid interface name (no '/', ':', '%%' or whitespace)", name)
	}
	return nil
}

func checkMTU(mtu int) error {
	if mtu < MinMTU || mtu > MaxMTU {
		return nlerr.New(unix.EINVAL, "MTU %d out of range %d..%d", mtu, MinMTU, MaxMTU)
	}
	return nil
}

// CheckMAC is is_valid_ether_addr: a unicast, non-zero EUI-48, what a TAP (and so a port) can
// have as its address. The configuration checks a port's MAC with it, so that what it accepts
// Open and SetMAC accept too. Errors: EINVAL for an address that is not 6 bytes, EADDRNOTAVAIL
// for a multicast or the zero address, the message naming the address.
func CheckMAC(mac net.HardwareAddr) error {
	switch {
	case len(mac) != 6:
		return nlerr.New(unix.EINVAL, "MAC address %v is not a 6-byte Ethernet address", mac)
	case mac[0]&1 != 0:
		return nlerr.New(unix.EADDRNOTAVAIL, "MAC address %v is a multicast address", mac)
	case bytes.Equal(mac, make([]byte, 6)):
		return nlerr.New(unix.EADDRNOTAVAIL, "MAC address %v is the zero address", mac)
	}
	return nil
}

// Device is a multi-queue TAP opened by manad: one non-blocking file per queue, plus the
// rtnetlink handle that configures it inside its namespace. Its methods are safe for concurrent
// use.
type Device struct {
	cfg        Config
	log        *slog.Logger
	nsh        *nsHandle // holds ns and nl open; the Watcher's, shared, when Config.Watcher is set
	ns         *netNS
	nl         *netlink.Handle
	index      int
	reattached bool
	offloads   uint // TUN_F_* flags in force (Config.Offload)

	// mu guards queues and closed, and (for MoveTo) nsh, ns, nl, index and cfg.NetNS. Queue
	// changes, MoveTo and Close take it exclusively; rtnetlink operations share it, so the
	// handle is never used after Close released it (a closed vishvananda Handle would silently
	// fall back to the calling thread's namespace).
	mu     sync.RWMutex
	queues []*Queue
	closed bool

	watcher *Watcher // Config.Watcher; nil, or of another namespace after MoveTo: Watch makes its own

	unregistered bool // DeleteGroup removed the netdev: Close only closes the queues (guarded by mu)

	wmu     sync.Mutex
	watches map[chan LinkEvent]context.CancelFunc // running watches

	// nmu guards name and log, which follow renames (`ip link set NAME name NEW`) as Watch
	// reports them. A separate lock, because the link watcher updates them and must never wait
	// for a queue change holding mu.
	nmu  sync.Mutex
	name string
}

// Open creates the TAP described by cfg inside its namespace, or re-attaches to an existing
// persistent multi-queue TAP of that name there (what a daemon restarted after a crash does:
// the TAP keeps its addresses and routes). It then attaches cfg.Queues queues, sets the MAC, MTU,
// alias and tx queue length when given, and makes IFF_PERSIST match cfg.Persistent.
//
// Errors (extack, errors.Is-comparable to the errno): EINVAL for an invalid cfg, or when the name
// belongs to a single-queue TAP; EEXIST when it belongs to a device that is not a TAP; EBUSY when
// another process has queues of that TAP attached; ENOENT when the namespace does not exist; the
// kernel's errno when creating, attaching or configuring fails. On error no queue stays attached
// and a TAP created here is deleted; a re-attached one stays (keeping any setting applied before
// the failure, and its IFF_PERSIST).
func Open(cfg Config) (*Device, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	nsh, err := cfg.Watcher.share(cfg.NetNS)
	if err != nil {
		return nil, nlerr.Wrap(err, unix.EINVAL, "TAP %s", cfg.Name)
	}
	if nsh == nil {
		if nsh, err = openNSHandle(cfg.NetNS); err != nil {
			return nil, err
		}
	}
	d := &Device{cfg: cfg, nsh: nsh, ns: nsh.ns, nl: nsh.nl, name: cfg.Name, watcher: cfg.Watcher,
		log: cfg.Logger.With("tap", cfg.Name, "netns", cfg.NetNS)}
	if err := d.open(); err != nil {
		d.nsh.release()
		return nil, err
	}
	return d, nil
}

func (d *Device) open() error {
	existing, err := d.lookupExisting()
	if err != nil {
		return err
	}
	d.reattached = existing
	files, err := d.attachQueues(d.cfg.Queues)
	if err != nil {
		return d.wrapAttach(err)
	}
	d.queues = files
	link, err := d.nl.LinkByName(d.cfg.Name)
	if err == nil {
		d.index = link.Attrs().Index
		err = d.configure(link)
		if err == nil && (d.cfg.Offload || d.reattached) {
			err = d.setOffload()
		}
	} else {
		err = nlerr.Wrap(err, unix.EIO, "TAP %s vanished while being opened", d.cfg.Name)
	}
	if err != nil {
		// A TAP created here is not yet persistent, so closing its queues deletes it; a
		// re-attached one keeps its IFF_PERSIST and stays.
		closeFiles(d.queues)
		d.queues = nil
		return err
	}
	how := "created"
	if existing {
		how = "re-attached"
	}
	d.log.Info("TAP "+how, "ifindex", d.index, "queues", len(d.queues), "persistent", d.cfg.Persistent)
	return nil
}

// lookupExisting reports whether a TAP manad can re-attach to already has the name, and refuses
// names that belong to something else.
func (d *Device) lookupExisting() (bool, error) {
	link, err := d.nl.LinkByName(d.cfg.Name)
	if err != nil {
		if errors.As(err, &netlink.LinkNotFoundError{}) {
			return false, nil
		}
		return false, nlerr.Wrap(err, unix.EIO, "look up %s", d.cfg.Name)
	}
	tt, ok := link.(*netlink.Tuntap)
	switch {
	case !ok:
		return false, nlerr.New(unix.EEXIST, "%s already exists and is a %s device, not a TAP", d.cfg.Name, link.Type())
	case tt.Mode != netlink.TUNTAP_MODE_TAP:
		return false, nlerr.New(unix.EEXIST, "%s already exists and is a TUN device, not a TAP", d.cfg.Name)
	case tt.Flags&netlink.TUNTAP_MULTI_QUEUE == 0:
		return false, nlerr.New(unix.EINVAL, "%s already exists as a single-queue TAP; manad needs a multi-queue TAP (delete it or choose another name)", d.cfg.Name)
	case tt.Queues+tt.DisabledQueues > 0:
		return false, nlerr.New(unix.EBUSY, "%s is in use: %d queues already attached by another process", d.cfg.Name, tt.Queues+tt.DisabledQueues)
	}
	return true, nil
}

// wrapAttach explains a failed TUNSETIFF.
func (d *Device) wrapAttach(err error) error {
	switch {
	case errors.Is(err, unix.EINVAL):
		return nlerr.Wrap(err, unix.EINVAL, "attach to %s: the name belongs to a device that is not a multi-queue TAP", d.cfg.Name)
	case errors.Is(err, unix.EBUSY):
		return nlerr.Wrap(err, unix.EBUSY, "attach to %s: TAP in use", d.cfg.Name)
	case errors.Is(err, unix.E2BIG):
		return nlerr.Wrap(err, unix.E2BIG, "attach to %s: more than %d queues", d.cfg.Name, MaxQueues)
	}
	return nlerr.Wrap(err, unix.EIO, "attach to %s", d.cfg.Name)
}

// attachQueues opens n queues of the TAP inside its namespace. On error the ones opened are
// closed again.
func (d *Device) attachQueues(n int) ([]*Queue, error) {
	files := make([]*Queue, 0, n)
	name := d.Name()
	err := d.ns.run(func() error {
		for range n {
			f, err := attachQueue(name, d.tunFlags())
			if err != nil {
				return err
			}
			files = append(files, f)
		}
		return nil
	})
	if err != nil {
		closeFiles(files)
		return nil, err
	}
	return files, nil
}

// configure applies the configured MAC, MTU, alias and (to a new TAP) tx queue length where they differ, and
// IFF_PERSIST last, so that a failure before it leaves a new TAP deletable by closing it.
func (d *Device) configure(link netlink.Link) error {
	a := link.Attrs()
	if d.cfg.MAC != nil && !bytes.Equal(a.HardwareAddr, d.cfg.MAC) {
		if err := d.nl.LinkSetHardwareAddr(link, d.cfg.MAC); err != nil {
			return nlerr.Wrap(err, unix.EIO, "set MAC address of %s to %v", d.cfg.Name, d.cfg.MAC)
		}
	}
	if d.cfg.MTU != 0 && a.MTU != d.cfg.MTU {
		if err := d.nl.LinkSetMTU(link, d.cfg.MTU); err != nil {
			return nlerr.Wrap(err, unix.EIO, "set MTU of %s to %d", d.cfg.Name, d.cfg.MTU)
		}
	}
	if a.Alias != d.cfg.Alias {
		if err := d.nl.LinkSetAlias(link, d.cfg.Alias); err != nil {
			return nlerr.Wrap(err, unix.EIO, "set alias of %s", d.cfg.Name)
		}
	}
	if d.cfg.TxQueueLen != 0 && !d.reattached && a.TxQLen != d.cfg.TxQueueLen {
		if err := d.nl.LinkSetTxQLen(link, d.cfg.TxQueueLen); err != nil {
			return nlerr.Wrap(err, unix.EIO, "set tx queue length of %s", d.cfg.Name)
		}
	}
	if err := d.configureGroup(a.Group); err != nil {
		return err
	}
	if err := setPersist(d.queues[0], d.cfg.Persistent); err != nil {
		return nlerr.Wrap(err, unix.EIO, "set IFF_PERSIST of %s", d.cfg.Name)
	}
	return nil
}

// configureGroup puts a non-persistent TAP into Config.Group, and takes a persistent one carrying
// it out (cur is the TAP's current group).
func (d *Device) configureGroup(cur uint32) error {
	want := cur
	switch {
	case d.cfg.Group == 0:
		return nil
	case !d.cfg.Persistent:
		want = d.cfg.Group
	case cur == d.cfg.Group:
		want = 0
	}
	if want == cur {
		return nil
	}
	if err := d.nl.LinkSetGroup(d.link(), int(want)); err != nil {
		return nlerr.Wrap(err, unix.EIO, "set netdev group of %s to %d", d.cfg.Name, want)
	}
	return nil
}

// rlock takes the shared lock for an rtnetlink operation. Errors: ENODEV after Close.
func (d *Device) rlock() error {
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return nlerr.New(unix.ENODEV, "TAP %s is closed", d.Name())
	}
	return nil
}

// link returns a netlink.Link naming the device by index, for the Handle's setters.
func (d *Device) link() netlink.Link {
	return &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Index: d.index, Name: d.Name()}}
}

// Name returns the TAP's interface name: the one it was opened with, or the one it was renamed
// to (`ip link set NAME name NEW`) as a Watch reported. The TAP is its ifindex; the name follows.
func (d *Device) Name() string {
	d.nmu.Lock()
	defer d.nmu.Unlock()
	return d.name
}

// setName records a rename reported by the link watcher.
func (d *Device) setName(name string) {
	d.nmu.Lock()
	defer d.nmu.Unlock()
	if name == d.name {
		return
	}
	d.log.Info("TAP renamed", "to", name)
	d.name = name
	d.log = d.cfg.Logger.With("tap", name, "netns", d.cfg.NetNS)
}

// logger returns the device's logger, which names the TAP by its current name.
func (d *Device) logger() *slog.Logger {
	d.nmu.Lock()
	defer d.nmu.Unlock()
	return d.log
}

// Index returns the interface index inside the TAP's namespace.
func (d *Device) Index() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.index
}

// NetNS returns the name of the TAP's network namespace ("" for the daemon's own).
func (d *Device) NetNS() string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.cfg.NetNS
}

// NetNSID returns the st_dev and st_ino of the TAP's network namespace, which identify it even
// across names (compare with a stat of /proc/PID/ns/net).
func (d *Device) NetNSID() (dev, ino uint64) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.ns.dev, d.ns.ino
}

// Reattached reports whether Open found the TAP already there (a persistent TAP left by an
// earlier run) instead of creating it.
func (d *Device) Reattached() bool { return d.reattached }

// Persistent reports whether the TAP outlives Close.
func (d *Device) Persistent() bool { return d.cfg.Persistent }

// NumQueues returns the number of attached queues (0 after Close).
func (d *Device) NumQueues() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.queues)
}

// Queue returns queue i, or nil when there is no such queue. It stays open until SetQueues drops
// the queue or the device closes, after which reads and writes on it fail with os.ErrClosed.
func (d *Device) Queue(i int) *Queue {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if i < 0 || i >= len(d.queues) {
		return nil
	}
	return d.queues[i]
}

// Queues returns all attached queues, in queue order.
func (d *Device) Queues() []*Queue {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return append([]*Queue(nil), d.queues...)
}

// SetQueues attaches or detaches queues until the TAP has n (ethtool -L combined n). New queues
// are appended; removed ones are the highest, and their files are closed (which detaches them),
// so callers must stop using them first. Errors: EINVAL for n outside 1..MaxQueues; ENODEV after
// Close; the kernel's errno when attaching fails, in which case the queue count is unchanged.
func (d *Device) SetQueues(n int) error {
	if n < 1 || n > MaxQueues {
		return nlerr.New(unix.EINVAL, "TAP %s: queue count %d out of range 1..%d", d.Name(), n, MaxQueues)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nlerr.New(unix.ENODEV, "TAP %s is closed", d.Name())
	}
	cur := len(d.queues)
	switch {
	case n > cur:
		files, err := d.attachQueues(n - cur)
		if err != nil {
			return d.wrapAttach(err)
		}
		d.queues = append(d.queues, files...)
	case n < cur:
		closeFiles(d.queues[n:])
		clear(d.queues[n:])
		d.queues = d.queues[:n]
	default:
		return nil
	}
	d.logger().Info("TAP queues changed", "from", cur, "to", n)
	return nil
}

// LinkState is a snapshot of the TAP's netdev as rtnetlink reports it.
type LinkState struct {
	Name  string
	Index int
	Up    bool // IFF_UP: the administrator's `ip link set … up`
	MTU   int
	MAC   net.HardwareAddr
	Alias string
}

func linkState(l netlink.Link) LinkState {
	a := l.Attrs()
	return LinkState{
		Name: a.Name, Index: a.Index, Up: a.RawFlags&unix.IFF_UP != 0, MTU: a.MTU,
		MAC: append(net.HardwareAddr(nil), a.HardwareAddr...), Alias: a.Alias,
	}
}

// State returns the TAP's current link state. Errors: ENODEV when the TAP no longer exists.
func (d *Device) State() (LinkState, error) {
	if err := d.rlock(); err != nil {
		return LinkState{}, err
	}
	defer d.mu.RUnlock()
	l, err := d.nl.LinkByIndex(d.index)
	if err != nil {
		if errors.As(err, &netlink.LinkNotFoundError{}) {
			return LinkState{}, nlerr.New(unix.ENODEV, "TAP %s (ifindex %d) no longer exists", d.Name(), d.index)
		}
		return LinkState{}, nlerr.Wrap(err, unix.EIO, "get link %s", d.Name())
	}
	return linkState(l), nil
}

// Features returns the TAP's kernel features now, as `ethtool -k` shows them (Watch follows
// them). Errors: ENODEV after Close, or when the TAP no longer exists; the kernel's errno when
// the ioctl fails.
func (d *Device) Features() (Features, error) {
	if err := d.rlock(); err != nil {
		return 0, err
	}
	defer d.mu.RUnlock()
	return d.nsh.feat.read(d.Name())
}

// SetFeatures turns the TAP's kernel features in mask on (those also in value) or off, as
// `ethtool -K` on the TAP does, and returns the features active afterwards; the Watcher reports
// the change like any other. Errors: as Features; EOPNOTSUPP when the kernel lacks a feature or
// refuses the change.
func (d *Device) SetFeatures(mask, value Features) (Features, error) {
	if err := d.rlock(); err != nil {
		return 0, err
	}
	defer d.mu.RUnlock()
	return d.nsh.feat.set(d.Name(), mask, value)
}

// MTU returns the TAP's current MTU. Errors as State.
func (d *Device) MTU() (int, error) {
	st, err := d.State()
	return st.MTU, err
}

// SetMTU sets the TAP's MTU (what manad does when its port's MTU changes, or to put the old MTU
// back after refusing an `ip link set … mtu`). Errors: EINVAL outside MinMTU..MaxMTU; the
// kernel's errno otherwise.
func (d *Device) SetMTU(mtu int) error {
	if err := checkMTU(mtu); err != nil {
		return err
	}
	if err := d.rlock(); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if err := d.nl.LinkSetMTU(d.link(), mtu); err != nil {
		return nlerr.Wrap(err, unix.EIO, "set MTU of %s to %d", d.Name(), mtu)
	}
	return nil
}

// SetUp sets or clears IFF_UP (ip link set … up/down). Errors: the kernel's errno.
func (d *Device) SetUp(up bool) error {
	if err := d.rlock(); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	var err error
	if up {
		err = d.nl.LinkSetUp(d.link())
	} else {
		err = d.nl.LinkSetDown(d.link())
	}
	if err != nil {
		return nlerr.Wrap(err, unix.EIO, "set %s %s", d.Name(), map[bool]string{true: "up", false: "down"}[up])
	}
	return nil
}

// SetName renames the TAP (ip link set NAME name NEW); Name reports the new name once Watch has
// seen the rename. Errors: EINVAL for an invalid name; the kernel's errno otherwise (EBUSY while
// the TAP is up, EEXIST when the name is taken).
func (d *Device) SetName(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := d.rlock(); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if err := d.nl.LinkSetName(d.link(), name); err != nil {
		return nlerr.Wrap(err, unix.EIO, "rename %s to %s", d.Name(), name)
	}
	return nil
}

// SetMAC sets the TAP's MAC address. Errors: EINVAL or EADDRNOTAVAIL for an address that is not
// a unicast Ethernet address; the kernel's errno otherwise.
func (d *Device) SetMAC(mac net.HardwareAddr) error {
	if err := CheckMAC(mac); err != nil {
		return err
	}
	if err := d.rlock(); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if err := d.nl.LinkSetHardwareAddr(d.link(), mac); err != nil {
		return nlerr.Wrap(err, unix.EIO, "set MAC address of %s to %v", d.Name(), mac)
	}
	return nil
}

// SetTxQueueLen sets the TAP's tx_queue_len (the per-queue ring of transmitted frames not yet
// read by manad). Errors: EINVAL for a negative length; the kernel's errno otherwise.
func (d *Device) SetTxQueueLen(n int) error {
	if n < 0 {
		return nlerr.New(unix.EINVAL, "negative tx queue length %d", n)
	}
	if err := d.rlock(); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if err := d.nl.LinkSetTxQLen(d.link(), n); err != nil {
		return nlerr.Wrap(err, unix.EIO, "set tx queue length of %s to %d", d.Name(), n)
	}
	return nil
}

// MoveTo moves the TAP into the named network namespace ("" for the daemon's own), as
// `ip link set NAME netns NS` does, keeping its queues (and so its traffic) attached; the index
// may change. Addresses and routes do not follow a netdev into another namespace. Watchers started
// before the move see the TAP leave (a Deleted event): call Watch again afterwards. Moving to the
// namespace the TAP is in is a no-op.
//
// Errors: ENOENT or EINVAL for the namespace, as in Open; EEXIST when a device of the same name
// exists there; ENODEV after Close; the kernel's errno otherwise. On error the TAP stays where it
// was.
func (d *Device) MoveTo(netnsName string) error {
	nsh, err := openNSHandle(netnsName)
	if err != nil {
		return err
	}
	ns, h := nsh.ns, nsh.nl
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		nsh.release()
		return nlerr.New(unix.ENODEV, "TAP %s is closed", d.Name())
	}
	if ns.dev == d.ns.dev && ns.ino == d.ns.ino {
		nsh.release()
		return nil
	}
	fail := func(err error) error {
		nsh.release()
		return err
	}
	if _, err := h.LinkByName(d.Name()); err == nil {
		return fail(nlerr.New(unix.EEXIST, "network namespace %q already has a device named %s", netnsName, d.Name()))
	}
	if err := d.nl.LinkSetNsFd(d.link(), ns.fd()); err != nil {
		return fail(nlerr.Wrap(err, unix.EIO, "move %s to network namespace %q", d.Name(), netnsName))
	}
	l, err := h.LinkByName(d.Name())
	if err != nil {
		return fail(nlerr.Wrap(err, unix.EIO, "%s vanished while moving to network namespace %q", d.Name(), netnsName))
	}
	d.nsh.release()
	from := d.cfg.NetNS
	// cfg.NetNS changes under nmu too, as setName reads it under nmu alone.
	d.nmu.Lock()
	d.nsh, d.nl, d.ns, d.index, d.cfg.NetNS = nsh, h, ns, l.Attrs().Index, netnsName
	d.log = d.cfg.Logger.With("tap", d.name, "netns", netnsName)
	d.nmu.Unlock()
	d.logger().Info("TAP moved", "from", from, "ifindex", d.index)
	return nil
}

// Close detaches every queue, ends every Watch and releases the device. A non-persistent TAP is
// deleted (the kernel does so when its last queue closes; Close makes sure in case another process
// also held a queue); a persistent one stays, with its addresses and routes, for the next Open to
// re-attach. Closing twice is a no-op.
func (d *Device) Close() error { return d.close(false) }

// Delete closes the device and deletes the TAP even when it is persistent (the port is removed
// from the configuration). Errors: the kernel's errno when deletion fails.
func (d *Device) Delete() error { return d.close(true) }

func (d *Device) close(del bool) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	queues := d.queues
	d.queues = nil
	defer d.mu.Unlock()
	d.stopWatches()

	var errs []error
	if del && len(queues) > 0 {
		// Drop IFF_PERSIST first, so the kernel unregisters the TAP as the last queue closes.
		if err := setPersist(queues[0], false); err != nil {
			errs = append(errs, fmt.Errorf("clear IFF_PERSIST: %w", err))
		}
	}
	closeFiles(queues)
	if d.unregistered {
		d.logger().Info("TAP deleted", "with", "its group")
	} else if del || !d.cfg.Persistent {
		if err := d.deleteIfPresent(); err != nil {
			errs = append(errs, err)
		}
		d.logger().Info("TAP deleted")
	} else {
		d.logger().Info("TAP released (persistent)")
	}
	if err := d.nsh.release(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteIfPresent deletes the TAP by index unless it is already gone.
func (d *Device) deleteIfPresent() error {
	l, err := d.nl.LinkByIndex(d.index)
	if err != nil {
		if errors.As(err, &netlink.LinkNotFoundError{}) {
			return nil
		}
		return nlerr.Wrap(err, unix.EIO, "look up %s for deletion", d.Name())
	}
	if l.Attrs().Name != d.Name() {
		return nil // the index was reused by another device: ours is gone
	}
	if err := d.nl.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return nlerr.Wrap(err, unix.EIO, "delete %s", d.Name())
	}
	return nil
}

func closeFiles(qs []*Queue) {
	for _, q := range qs {
		q.Close()
	}
}
