package nlbridge

import (
	"sync"
	"time"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// refreshEvery is the least time between two refreshes of the cache caused by misses: a program
// asking about kernel devices in a loop costs manad at most one dump per refreshEvery.
const refreshEvery = 100 * time.Millisecond

// cache knows which devices of the program's namespace are manad's ports (by ifindex, which a
// rename does not change: a port is its TAP's ifindex). (Page-pool and NAPI ids need no cache:
// the program sees manad's in a range of their own, see idBase.) It is refreshed from manad when a lookup misses (at most every refreshEvery), at once
// after manad announces a port added or deleted, and after manad answers ENODEV.
type cache struct {
	s *Socket

	mu    sync.Mutex
	ports map[uint32]bool
	last  time.Time // of the last port refresh
	dirty bool
}

func newCache(s *Socket) *cache {
	return &cache{s: s, ports: map[uint32]bool{}}
}

// load fills the port set from the PORT_GET dump that list returns.
func (c *cache) load(list func() ([][]byte, error)) error {
	msgs, err := list()
	if err != nil {
		return err
	}
	ports := map[uint32]bool{}
	for _, m := range msgs {
		if idx, ok := c.portOf(m); ok {
			ports[idx] = true
		}
	}
	c.mu.Lock()
	c.ports, c.last, c.dirty = ports, time.Now(), false
	c.mu.Unlock()
	return nil
}

// portOf returns the ifindex of a PORT_GET message's port when it lives in the program's
// namespace (manad lists every namespace's ports to an admin in its own namespace).
func (c *cache) portOf(m []byte) (uint32, bool) {
	p := genlAttr(m, wire.AttrPort)
	idx, ok := u32Of(nestedAttr(m, p, wire.PortAttrDevIndex))
	if !ok || idx == 0 {
		return 0, false
	}
	dev := nestedAttr(m, p, wire.PortAttrNetNSDev)
	ino := nestedAttr(m, p, wire.PortAttrNetNSIno)
	if len(dev.Data) >= 8 && len(ino.Data) >= 8 && c.s.ns != (nsID{}) &&
		(dev.U64() != c.s.ns.dev || ino.U64() != c.s.ns.ino) {
		return 0, false
	}
	return idx, true
}

// markDirty makes the next lookup refresh the port set.
func (c *cache) markDirty() {
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
}

// isPort reports whether ifindex is a manad port in the program's namespace.
func (c *cache) isPort(ifindex uint32) bool {
	if ifindex == 0 {
		return false
	}
	c.mu.Lock()
	hit, dirty, age := c.ports[ifindex], c.dirty, time.Since(c.last)
	c.mu.Unlock()
	if (hit && !dirty) || (!dirty && age < refreshEvery) || c.s.manadDead.Load() {
		return hit
	}
	if err := c.load(func() ([][]byte, error) {
		return c.s.manadCall(c.s.mManad, wire.CmdPortGet, nlattr.FlagDump, nil)
	}); err != nil {
		c.s.log.Debug("nlbridge: port cache refresh failed", "err", err)
		return hit
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ports[ifindex]
}

// hasPort is isPort without a refresh: for filtering the kernel's dumps and notifications.
func (c *cache) hasPort(ifindex uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ports[ifindex]
}

// fresh refreshes the port set when it is dirty or older than refreshEvery: before a merged
// dump, whose kernel half is filtered with hasPort.
func (c *cache) fresh() {
	c.mu.Lock()
	stale := c.dirty || time.Since(c.last) >= refreshEvery
	c.mu.Unlock()
	if stale && !c.s.manadDead.Load() {
		_ = c.load(func() ([][]byte, error) {
			return c.s.manadCall(c.s.mManad, wire.CmdPortGet, nlattr.FlagDump, nil)
		})
	}
}

// uintOf reads a netlink "uint" (u32 or u64 by length).
func uintOf(a nlattr.Attr) (uint64, bool) {
	switch {
	case !a.Present():
		return 0, false
	case len(a.Data) >= 8:
		return a.U64(), true
	case len(a.Data) >= 4:
		return uint64(a.U32()), true
	}
	return 0, false
}
