// Package tap gives a manad port its netdev: a multi-queue TAP (IFF_TAP|IFF_NO_PI|IFF_MULTI_QUEUE)
// with one non-blocking descriptor per queue (Queue, not registered with Go's netpoller: the data
// path waits for it on its own epoll), living in the daemon's network namespace or in a named one
// (/run/netns/NAME).
//
// # Namespaces
//
// A TAP is created, and its queues attached, by a thread that has entered the TAP's namespace:
// tun_set_iff resolves the name in the namespace of the socket that open("/dev/net/tun") created.
// So the TAP is born inside its namespace rather than moved there, which keeps names per-namespace
// (every namespace may have its "eth0") and is the only way to re-attach later, since a queue can
// only be attached from inside. The threads used for that are locked and then discarded, so no
// goroutine ever runs in a namespace it did not ask for. Configuration (MTU, up/down, MAC, alias)
// goes through an rtnetlink socket opened inside the namespace. MoveTo moves a TAP to another
// namespace later (ip link set … netns), its queues staying attached.
//
// # Persistence and re-attachment
//
// A persistent TAP (IFF_PERSIST) survives the daemon, with its addresses and routes. Open finds
// such a TAP by name and attaches new queues to it (TUNSETIFF with the same flags) instead of
// creating one, which is how a daemon restarted after kill -9 picks its ports up again. Open
// refuses names that belong to something else: a non-TAP device or a TUN (EEXIST), a single-queue
// TAP (EINVAL), or a TAP another process has queues on (EBUSY).
//
// # Marking
//
// Every TAP manad opens gets the ifalias "manad:<name>" (Config.Alias overrides it) and has
// tun_flags 0x1102 (0x1902 when persistent; with Config.Offload IFF_VNET_HDR adds 0x4000:
// 0x5102, 0x5902) in sysfs, so scripts and udev rules can match
// ATTR{ifalias}=="manad:*" and ATTR{tun_flags}. udev only sees devices in its own (the initial)
// namespace: TAPs created in other namespaces produce no uevents there.
//
// A non-persistent TAP can also carry a netdev group (Config.Group, `ip link show group N`):
// DeleteGroup then unregisters all of a namespace's with one RTM_DELLINK, one batch for the
// kernel instead of one unregistration (and its RCU waits) per TAP. Persistent TAPs never carry
// it, so a group deletion cannot take them.
//
// # Link state
//
// Watch reports the TAP's administrative state, MTU, address and name as rtnetlink notifications
// arrive, so the daemon can open or close the port when someone runs `ip link set … up|down`, and
// apply (or undo) `ip link set … mtu N`. A Watcher serves every TAP of one namespace from a single
// notification socket (one parse per notification, however many TAPs), and re-reads every link
// after the socket overruns, so a lost notification never leaves a state wrong.
//
// # Renames
//
// A TAP is its ifindex: `ip link set NAME name NEW` (possible while the TAP is down) keeps the
// device, and Name, queue attachment and log lines follow the new name once Watch has reported
// it.
package tap
