// Package vnic models one port of a Microsoft MANA NIC together with the parts of its Linux driver
// that decide how RX memory is laid out and how the port is reconfigured.
//
// A Port owns, per queue, an RX ring of posted buffers backed by a page pool (package pagepool)
// whose geometry comes from the RX buffer layout (package rxbuf), and a TX queue. Frames enter the
// model through Port.Receive (the wire side: the "DMA" into the posted buffer, refill-before-deliver,
// XDP, delivery to the host) and Port.Transmit (the host side). Neither knows about TAP devices or
// netlink: the data path talks to the world through the small Host and Wire interfaces, so tests
// can drive it directly and the daemon plugs in TAP queues and wire segments.
//
// Reconfiguration (SetPrivFlags, SetMTU, SetXDP, SetRings, SetChannels) follows one state machine
// that mirrors mana_set_priv_flags, mana_change_mtu, mana_xdp_set, mana_set_ringparam and
// mana_set_channels: validate → no-change / port-down shortcuts → pre-allocate the new rings →
// detach → attach → revert on failure, with a per-port reset worker that re-attaches the last good
// configuration after a failed attach (with backoff, respecting an administrative down). Every step
// can be made to fail through fault injection (SetFault) and a real per-port memory budget.
//
// The kernel's netdev family reads a port through PagePools, Queues, NAPIs and QStats: every
// RX queue has a NAPI id and its page pool an id (both from Config.IDs, never reused, new with
// every rebuild of the queues); a pool whose queue was destroyed stays listed, detached, until
// its last buffer is back; per-queue qstats count since the queue was created and a base holds
// the rest, so device totals never go backwards. These views take only the per-queue locks.
//
// Locking: every method that reads or changes configuration must be called with the configuration
// lock held (Config.Lock, the daemon's analogue of rtnl); they say so in their doc comment and
// panic if the lock is free, as ASSERT_RTNL warns. The data-path methods (Receive, Transmit,
// SteerRx, DropRx) take only per-queue locks and may be called concurrently from any goroutine,
// typically one goroutine per queue and direction.
package vnic
