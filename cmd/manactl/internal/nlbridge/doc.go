// Package nlbridge is the generic netlink half of `manactl exec`: it stands behind the program's
// end of a socketpair that the supervisor installed in place of a NETLINK_GENERIC socket, and
// makes one generic netlink world of the kernel and manad, as if the mana driver were loaded in
// the kernel (issue 26, item 2).
//
// Each bridged socket (Open) has a real kernel NETLINK_GENERIC socket and a connection to manad,
// both made in the program's network namespace, and three goroutines: Serve reads the program's
// messages that come through the pair, one reader each for the kernel socket and the manad
// connection.
//
// # Routing
//
//   - nlctrl: the kernel answers for its families, ethtool and netdev included (the program sees
//     the kernel's ids, ops and groups). manad's own family, which the kernel lacks, is answered
//     by manad's nlctrl under an id the kernel does not use (the largest free one up to
//     GENL_MAX_ID, as the kernel allocates upwards) and its groups under the largest free group
//     ids; a family dump is the kernel's plus manad's family.
//   - The kernel's ethtool family: the device the request header names (ETHTOOL_A_HEADER_DEV_INDEX,
//     or DEV_NAME resolved with SIOCGIFINDEX in the program's namespace) decides: manad's ports to
//     manad with the family id translated, anything else (or no device) to the kernel, bytes
//     untouched. netdev is routed by ifindex, or by page-pool or NAPI id (manad's are
//     shown from 2^31 up).
//   - Dumps of ethtool, netdev and the nlctrl family list go to the kernel first; once its first
//     answer shows the dump runs, to manad too. Entries are passed on as they come; the kernel's
//     entries for manad's ports (it knows them as tun devices) are dropped; one NLMSG_DONE ends
//     the stream. Errors: a kernel that refuses the dump answers alone (its validation is the
//     reference); a kernel lacking the op (EOPNOTSUPP) leaves the dump to manad, and manad failing
//     too gives the kernel's error. manad's half failing ends the stream with manad's error in
//     NLMSG_DONE after the kernel's entries, as a kernel dump ends when one driver fails; manad
//     lacking the op (EOPNOTSUPP) is skipped, as ethnl_default_dumpit skips such a device.
//   - manad's family (under its translated id) goes to manad; every other family (nl80211,
//     devlink, …) to the kernel untouched.
//
// # Knowing manad's ports
//
// A per-socket cache holds the ifindexes of manad's ports in the program's namespace (a port is
// its TAP's ifindex, so a rename changes nothing: a name is resolved to its ifindex by the kernel
// at each request). It is filled at Open from a PORT_GET dump, updated by manad's
// PORT_NEW_NTF/PORT_DEL_NTF (the bridge keeps its manad connection in the "events" group), marked
// stale when manad answers ENODEV, and refreshed when a lookup misses, at most every 100 ms: a
// program asking about kernel devices in a loop costs manad at most ten dumps a second, and a
// kernel request costs no manad round trip. Page-pool and NAPI ids need no cache: manad's reach
// the program from 2^31 up (manad numbers them as the kernel does, so the same number can name a
// kernel page pool or NAPI too), and a by-id request goes to manad when its id is in that range,
// with the id taken back down.
//
// # Messages, ACKs, order
//
// The program's messages are served one at a time, as the kernel answers each message within
// sendmsg: the next goes out only when the previous one is answered (answers never interleave).
// Most are answered inside the program's send, as the kernel's are: the supervisor traps
// sendmsg and sendto and offers the datagram to Request, which serves a single non-dump message
// on an idle socket then and there, reading manad's answer itself (the manad reader and Request
// read under one lock, so manad's datagrams are handled in order) and returning once the answer
// is on the program's end of the pair. What Request does not take (dumps, batches, a socket
// with a request in flight, a write(2)) goes through the pair to Serve.
// A request to the kernel is followed, in the same datagram, by an NLMSG_NOOP with NLM_F_ACK
// whose ACK (swallowed) marks the end of the answers; the kernel queues them within sendmsg, so
// the goroutine that sent the request passes them on at once, without waking the kernel reader
// (which passes on notifications and the rest of dumps). A request to manad carries NLM_F_ACK
// (the success ACK is swallowed unless the program asked for it; a GET goes without: its one
// reply, or error, ends it) and the kernel socket's port id; manad's answers get the program's
// family ids, that port id, and in NLMSG_ERROR the program's request as it sent it. NETLINK_EXT_ACK, NETLINK_CAP_ACK and
// NETLINK_GET_STRICT_CHK are set on both sides, so manad shapes its ACKs and extack as the kernel
// does. Sequence numbers are the program's, untouched on both sides.
//
// # Multicast
//
// Group ids are the kernel's. A join (setsockopt or bind's nl_groups) is applied to the kernel
// socket, which validates it, and mirrored on manad for the groups manad also has (ethtool
// "monitor", netdev "mgmt" and "page-pool" by name; manad's own under their translated ids).
// manad's notifications reach the program only for groups it joined, translated; the kernel's
// ethtool and netdev notifications about manad's ports are dropped (manad's replace them).
// Notifications are written without waiting: when the program's socket is full they are dropped
// and the next receive fails with ENOBUFS (PendingError), unless NETLINK_NO_ENOBUFS. Answers wait
// for the program to read, as a kernel dump does.
//
// # Failures
//
// manad unreachable at Open: Open fails with the dial error. manad gone later: requests routed to
// it are answered with ECONNREFUSED and the extack "manad is not running at PATH" (a merged dump
// ends with that error in NLMSG_DONE after the kernel's entries); kernel requests keep working.
// When a request needs manad again, at least a second after the last try, the bridge reconnects
// (from the program's namespace, with the program's socket options and groups, and a fresh port
// cache), so that a long-running program survives a restart of manad; a manad whose family or
// group ids changed meanwhile is not used. Every length of the program's messages is checked before use; what does not parse
// goes to the kernel, whose answer (or silence, for a truncated datagram) is the answer.
//
// Each notification reaches the program as a datagram of its own, as the kernel multicasts it,
// and the bridge records where each datagram it writes came from (Origin): the supervisor, which
// builds the program's recvmsg, puts the group in msg_name's nl_groups and, when the program set
// NETLINK_PKTINFO, in that control message, as netlink_recvmsg does.
//
// A program that connect(2)s to another port id, or to groups, sends there through the kernel
// socket, untouched, as long as it stays connected; what comes back is passed on.
//
// A unicast from another socket reaches the program with that socket's port id in msg_name
// (Origin), as netlink_recvmsg gives it.
//
// Not bridged: the kernel socket's dump datagrams are sized by the longest datagram the bridge
// read, not by the program's buffer; NETLINK_LISTEN_ALL_NSID's control message.
package nlbridge
