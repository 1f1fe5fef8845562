package tap

import "golang.org/x/sys/unix"

// tunFlags are the flags every manad TAP queue is attached with: an Ethernet TAP, no packet
// information header, one file descriptor per queue. sysfs shows them (plus IFF_PERSIST,
// 0x0800) as /sys/class/net/NAME/tun_flags: 0x1102, or 0x1902 for a persistent TAP.
const tunFlags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_MULTI_QUEUE

// MaxQueues is the most queues a TAP can have (MAX_TAP_QUEUES in drivers/net/tun.c): the
// kernel's rule, checked here before any queue is opened. The port model's limit on a port's
// queues, which every other layer checks, is vnic.MaxQueues; a test holds the two equal.
const MaxQueues = 256

// attachQueue opens /dev/net/tun and attaches the descriptor as one more queue of the TAP name
// with flags (tunFlags, plus IFF_VNET_HDR for a TAP with offloads),
// creating the TAP when no device has that name (TUNSETIFF). It must run on a thread inside
// the namespace the TAP lives in: tun_set_iff looks the name up in the namespace of the socket
// open() created. The descriptor is non-blocking, and not registered with the netpoller (Queue).
// Errors are the kernel's: EINVAL when the name belongs to a device that is not a TAP or to a
// single-queue TAP, EBUSY when it is a single-queue TAP in use, E2BIG past MaxQueues.
func attachQueue(name string, flags uint16) (*Queue, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return NewQueue(fd, "tap:"+name), nil
}

// setPersist sets or clears IFF_PERSIST (TUNSETPERSIST) through one of the TAP's queues.
func setPersist(q *Queue, on bool) error {
	v := 0
	if on {
		v = 1
	}
	return q.ioctl(unix.TUNSETPERSIST, v)
}
