// Package genl is manad's control protocol: a generic netlink server that
// answers like the kernel, carried over a Unix SOCK_SEQPACKET socket.
//
// # Transport
//
// Package genl/transport carries the protocol: Listen (or ActivationListener,
// for systemd socket activation) gives a listener; Server.Serve serves it
// through its transport.Server, which reads each peer's credentials, admits
// or refuses connections (MaxConns, MaxConnsPerUID: uid 0 is never refused,
// other uids have a cap each, users outside the admin group leave an eighth
// of MaxConns to root and the group; a refused connection gets EUSERS on its
// first request and is closed), closes idle connections, busy-polls, writes
// replies within WriteTimeout and fans notifications out through bounded
// queues (SendQueue; a client that stops reading is dropped and logged).
// Server is its Handler: each admitted connection gets a conn, the
// protocol's side of it (socket options, capture), whose datagrams the
// transport hands over one at a time. A request's context is cancelled when
// its client disconnects.
//
// One datagram carries one or more netlink messages; each is answered as
// netlink_rcv_skb does: seq and pid echoed, a reply in its own datagram,
// NLMSG_ERROR with -errno when the request failed or asked for NLM_F_ACK,
// the request echoed unless the client set NETLINK_CAP_ACK, extack TLVs
// (MSG, OFFS, POLICY, MISS_TYPE, MISS_NEST). Dumps are NLM_F_MULTI messages
// packed into datagrams of about 16 KiB, ended by NLMSG_DONE, which is
// always last in its datagram. Where the kernel silently drops a malformed
// datagram (shorter than a header, nlmsg_len past its end) manad answers
// EINVAL "truncated netlink message…", with an echoed header whose
// nlmsg_len is 16, so that the client does not hang; a datagram over
// ServerConfig.MaxMessage gets EMSGSIZE.
//
// No datagram is longer than the connection can send (MaxReply: SO_SNDBUF less
// the kernel's reserve): dumps are split to fit, a do reply that cannot fit is
// EMSGSIZE with an extack message (LAYOUT_PLAN instead answers multi-part:
// NLM_F_MULTI messages, then NLMSG_DONE in place of the ACK), and an error
// whose echo would not fit echoes only the header (NLM_F_CAPPED).
//
// Rights come from the peer's credentials at connect time (SO_PEERCRED,
// SO_PEERGROUPS): every SET, NEW, DEL, XDP and fault request needs uid 0 or
// the configured admin group (GENL_UNS_ADMIN_PERM), else EPERM with no
// extack and no side effect. The network namespace the peer's socket was
// created in (SIOCGSKNS, else /proc/<pid>/ns/net) is passed to the Backend
// as Caller.NetNS and scopes device lookups, dumps and notifications.
//
// # Families
//
//   - nlctrl (id 0x10, version 2): CTRL_CMD_GETFAMILY by id or name and its
//     dump, with the kernel's attribute order, op flags and groups, so that
//     genetlink.Conn.GetFamily and the ethtool CLI's probe work unmodified;
//     CTRL_CMD_GETPOLICY for every family, whole or by op, in the kernel's
//     policy dump format (net/netlink/policy.c), so YNL can introspect.
//   - "ethtool" (version 1, group "monitor"): the kernel's whole op list
//     (6.18: STRSET_GET to RSS_DELETE_ACT, with the kernel's op flags and
//     policies), with the kernel's message and attribute numbers, strict
//     policies, extack texts, bitset forms and notifications
//     (net/ethtool/*.c). The messages mana has no callback for (WoL, debug,
//     pause, EEE, FEC, module, PHY, PSE, PLCA, MAC merge, cable tests,
//     timestamping configuration, RSS contexts) answer as the kernel does
//     for mana: EOPNOTSUPP after the request, header and device checks, an
//     empty dump. A command the kernel does not know is EOPNOTSUPP.
//     Kernel-wide string sets (ETH_SS_FEATURES,
//     ETH_SS_LINK_MODES, …) are read once from the running kernel's own
//     ethtool family, so they match it exactly.
//   - "manad" (version 1, group "events"), described below.
//
// Family and group ids are dynamic as in the kernel: resolve them with
// CTRL_CMD_GETFAMILY.
//
// # The manad family
//
// Conventions (the same as the kernel's ethtool family):
//   - All integers are host byte order; strings are NUL-terminated; booleans
//     are u8 0/1 and always present in replies; nests carry NLA_F_NESTED.
//   - Requests are validated strictly (NL_VALIDATE_STRICT): unknown
//     attributes, attributes of another command, wrong lengths, missing
//     NLA_F_NESTED, and reserved bits in the genl header or in nlmsg_flags
//     are EINVAL with the kernel's extack.
//   - A missing required attribute is EINVAL with NLMSGERR_ATTR_MISS_TYPE
//     (and MISS_NEST when it is missing inside a nest) and a message.
//   - Device selection uses the ethtool header nest (DEV_INDEX and/or
//     DEV_NAME) and resolves in the caller's network namespace, with the
//     kernel's ENODEV messages.
//   - Commands marked "admin" need an admin peer, else EPERM.
//   - Lists that can outgrow one attribute (64 KiB) are repeated top-level
//     attributes, in order: STAT, LAYOUT, XDP_OBJECT.
//
// Commands (request → reply; attribute constants are wire.Attr*,
// wire.PortAttr*, LayoutAttr*, FaultAttr*, XDPAttr*, StatAttr*):
//
//	cmd  name             do/dump  rights  request attributes                 reply
//	1    PORT_GET         do+dump  open    HEADER (do)                        PORT_GET: PORT
//	2    PORT_NEW         do       admin   PORT (spec subset)                 PORT_NEW: PORT
//	3    PORT_DEL         do       admin   HEADER                             ACK
//	4    PORT_SET_MTU     do       admin   HEADER, MTU                        ACK
//	5    XDP_ATTACH       do       admin   HEADER, XDP, XDP_OBJECT…           ACK
//	6    XDP_DETACH       do       admin   HEADER                             ACK
//	7    STATS_GET        do+dump  open    HEADER (do)                        STATS_GET: HEADER, STAT…
//	8    LAYOUT_PLAN      do       open    LAYOUT_REQUEST                     LAYOUT_PLAN: LAYOUT…
//	9    FAULT_SET        do       admin   HEADER, FAULT (mode "off" clears)  ACK
//	10   GROUP_JOIN       do       open    GROUP                              ACK
//	11   GROUP_LEAVE      do       open    GROUP                              ACK
//	12   SET_OPTION       do       open    OPTION, OPTION_VALUE               ACK
//	13   PORT_NEW_NTF     notification to "events": PORT
//	14   PORT_DEL_NTF     notification to "events": PORT
//	15   PORT_CHANGE_NTF  notification to "events": PORT
//	20   SEGMENT_GET      do+dump  open    SEGMENT{NAME} (do)                 SEGMENT_GET: SEGMENT
//	21   SEGMENT_NEW      do       admin   SEGMENT{NAME, MTU, STORM_PPS, AGEING_MS}  SEGMENT_NEW: SEGMENT
//	22   SEGMENT_DEL      do       admin   SEGMENT{NAME}                      ACK (EBUSY while ports are on it)
//	23   UPLINK_ADD       do       admin   SEGMENT{NAME}, UPLINK{DEV, NETNS}  UPLINK_ADD: SEGMENT
//	24   UPLINK_DEL       do       admin   SEGMENT{NAME}, UPLINK{DEV, NETNS}  ACK
//	25-27 SEGMENT_{NEW,DEL,CHANGE}_NTF  notification to "events" in manad's namespace: SEGMENT
//	30   CAPTURE_START    do       admin   CAPTURE_TARGET, _DIRECTION, _SNAPLEN  CAPTURE_START: TARGET, KIND, SNAPLEN
//	31   CAPTURE_STOP     do       admin   -                                  CAPTURE_STOP: CAPTURE_STATS
//	32   CAPTURE_FRAME    unsolicited on the capturing connection: CAPTURE_FRAME
//
// Each command is one op value (struct op, dispatch.go) in its message file, naming the Backend
// op it calls; a command whose Backend op is nil answers EOPNOTSUPP saying so (the segment
// commands, manad_segment.go, with a Backend without the segment ops).
//
// # Adding a message
//
// A GET answered from one backend value is: its struct and wire.Table in genl/wire (the reply,
// and for a SET the request: the client writes it and the server reads it with the same table);
// its message file here, holding the policy and the op, a method of its family's message type
// (func (ethtoolMsgs) RingsGet() op, ethGetOp over tableGet, which names the Backend op); the
// family is built from those methods (opsOf, in command order, as ethtool_genl_ops[]), so no
// list names the message; the Backend op (a field of Backend, which the daemon fills in
// backend.ops(); nil in any other backend answers EOPNOTSUPP); and its manactl command, which
// can read it with client.Get and the wire table, declares its ethtool options itself and is a
// method of manactl's topLevel in its own file, so no list names it either. The
// op's name is the request metrics' label and nlctrl lists it with its policy; no other table
// names it.
//
// A connection that sent CAPTURE_START receives its capture's frames, seq 0,
// several per datagram, until CAPTURE_STOP (whose reply follows the last one)
// or its end; see genl/wire/capture.go and manad_capture.go.
//
// GROUP_JOIN/GROUP_LEAVE replace NETLINK_ADD/DROP_MEMBERSHIP, which a Unix
// socket does not have; GROUP is a multicast group id as nlctrl reports it
// (ethtool "monitor", manad "events", nlctrl "notify"; others EINVAL).
// SET_OPTION replaces the SOL_NETLINK socket options: OPTION is
// NETLINK_CAP_ACK (10), NETLINK_EXT_ACK (11) or NETLINK_GET_STRICT_CHK (12,
// accepted, requests are always strict); others are ENOPROTOOPT. Unlike a
// kernel socket, a manad connection starts with NETLINK_EXT_ACK on.
//
// Notifications (ethtool *_NTF and manad PORT_*_NTF) have pid 0, flags 0
// and a sequence number from a per-family counter; they reach the members
// of the group whose network namespace is the device's. Ethtool
// notifications carry compact bitsets. An ethtool SET applies only the
// attributes it carries, under the backend's configuration lock, and its
// *_NTF is queued under that same lock from the state the change produced
// (Update): one notification per change, in the order of the changes, none
// for a no-op or a refused request.
//
// Package genl/wire holds the numbers, structs and one Table per attribute
// set that both this server and the client (genl/client, which does not
// import this package) encode and decode with; genl/nlattr and genl/ethtool
// hold the kernel-compatible attribute validation and the ethtool bitset and
// string-set codecs. Errors are genl/nlerr's one errno + message + offset
// type (Error is an alias of it).
package genl
