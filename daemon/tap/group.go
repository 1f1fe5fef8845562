package tap

import (
	mdnl "github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// DeleteGroup unregisters the netdevs of devs — non-persistent TAPs of one namespace, all opened
// with Config.Group group — with one RTM_DELLINK naming the group (`ip link delete group N`).
// The kernel then unregisters them in one unregister_netdevice_many, sharing its RCU grace
// periods and barriers among all of them, where closing TAPs one by one pays them once per TAP
// (about 2 ms each: 2 s for 1,000 TAPs). Whoever reads or writes the queues must have stopped:
// the queues stay open but detached (reads fail) until each device's Close, which then only
// closes them.
//
// The group must hold exactly devs' TAPs: before deleting, DeleteGroup lists the namespace's
// links and refuses when the group has a member that is not one of devs (the administrator put a
// device of their own into it), or when one of devs is no longer in it. It then deletes nothing,
// and the devices' Close deletes them one by one as usual.
//
// Errors: EINVAL for group 0, an empty devs, a persistent device, one of another group or of
// another namespace; ENODEV for a closed device; EEXIST for a foreign member of the group;
// ENOENT for a device missing from it; the kernel's errno when listing or deleting fails (the
// kernel deletes all of the group or nothing).
func DeleteGroup(group uint32, devs []*Device) error {
	if group == 0 || len(devs) == 0 {
		return nlerr.New(unix.EINVAL, "delete by netdev group: need a group other than 0 and at least one TAP")
	}
	// Lock every device for the whole deletion, so none closes, moves or changes its queues
	// meanwhile. Devices are only ever locked one at a time elsewhere, so no order can deadlock.
	seen := make(map[*Device]bool, len(devs))
	for _, d := range devs {
		if seen[d] {
			return nlerr.New(unix.EINVAL, "delete by netdev group: TAP %s listed twice", d.Name())
		}
		seen[d] = true
	}
	for _, d := range devs {
		d.mu.Lock()
		defer d.mu.Unlock()
		if err := d.checkGroupMember(group, devs[0]); err != nil {
			return err
		}
	}
	first := devs[0]
	ours := make(map[int]*Device, len(devs))
	for _, d := range devs {
		ours[d.index] = d
	}
	links, err := first.nl.LinkList()
	if err != nil {
		return nlerr.Wrap(err, unix.EIO, "list links of network namespace %q", first.cfg.NetNS)
	}
	found := 0
	for _, l := range links {
		a := l.Attrs()
		if a.Group != group {
			continue
		}
		if d := ours[a.Index]; d == nil || a.Name != d.Name() {
			return nlerr.New(unix.EEXIST, "netdev group %d of network namespace %q also holds %s, which is not a manad TAP being deleted", group, first.cfg.NetNS, a.Name)
		}
		found++
	}
	if found != len(devs) {
		return nlerr.New(unix.ENOENT, "netdev group %d of network namespace %q holds %d of the %d TAPs to delete", group, first.cfg.NetNS, found, len(devs))
	}
	if err := deleteLinkGroup(first.ns, group); err != nil {
		return err
	}
	for _, d := range devs {
		d.unregistered = true
	}
	return nil
}

// checkGroupMember refuses d (locked) for DeleteGroup unless it is an open, non-persistent TAP of
// group in the namespace of first.
func (d *Device) checkGroupMember(group uint32, first *Device) error {
	switch {
	case d.closed:
		return nlerr.New(unix.ENODEV, "TAP %s is closed", d.Name())
	case d.cfg.Persistent:
		return nlerr.New(unix.EINVAL, "TAP %s is persistent: it is not deleted by group", d.Name())
	case d.cfg.Group != group:
		return nlerr.New(unix.EINVAL, "TAP %s is in netdev group %d, not %d", d.Name(), d.cfg.Group, group)
	case d.ns.dev != first.ns.dev || d.ns.ino != first.ns.ino:
		return nlerr.New(unix.EINVAL, "TAP %s is in another network namespace than %s", d.Name(), first.Name())
	}
	return nil
}

// deleteLinkGroup sends RTM_DELLINK with ifindex 0 and IFLA_GROUP inside ns: rtnl_dellink then
// deletes every device of the group (rtnl_group_dellink), or none when one of them cannot be.
// vishvananda's LinkDel always names one device, hence the request of our own.
func deleteLinkGroup(ns *netNS, group uint32) error {
	conn, err := mdnl.Dial(unix.NETLINK_ROUTE, &mdnl.Config{NetNS: ns.fd()})
	if err != nil {
		return nlerr.Wrap(err, unix.EIO, "rtnetlink socket in network namespace %q", ns.name)
	}
	defer conn.Close()
	ae := mdnl.NewAttributeEncoder()
	ae.Uint32(unix.IFLA_GROUP, group)
	attrs, err := ae.Encode()
	if err != nil {
		return nlerr.Wrap(err, unix.EINVAL, "encode IFLA_GROUP")
	}
	ifi := make([]byte, unix.SizeofIfInfomsg) // AF_UNSPEC, ifindex 0: select by group
	req := mdnl.Message{
		Header: mdnl.Header{Type: unix.RTM_DELLINK, Flags: mdnl.Request | mdnl.Acknowledge},
		Data:   append(ifi, attrs...),
	}
	if _, err := conn.Execute(req); err != nil {
		return nlerr.Wrap(err, unix.EIO, "delete netdev group %d in network namespace %q", group, ns.name)
	}
	return nil
}
