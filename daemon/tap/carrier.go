package tap

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic/extack"
)

// SetCarrier sets the TAP's carrier (TUNSETCARRIER): off makes the kernel see the link as down
// (NO-CARRIER, operstate DOWN, ethtool "Link detected: no") while IFF_UP stays as the
// administrator left it, the way a NIC driver calls netif_carrier_off while its queues are
// gone. The kernel turns a TAP's carrier on whenever a queue attaches, so callers set it after
// opening or growing the TAP. Errors: ENODEV after Close; the kernel's errno otherwise.
func (d *Device) SetCarrier(on bool) error {
	if err := d.rlock(); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if len(d.queues) == 0 {
		return extack.New(unix.ENODEV, "TAP %s has no queues", d.cfg.Name)
	}
	v := 0
	if on {
		v = 1
	}
	rc, err := d.queues[0].SyscallConn()
	if err != nil {
		return extack.Wrap(err, unix.EBADF, "TAP %s", d.cfg.Name)
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		// The argument is a pointer to an int, unlike TUNSETPERSIST's value.
		ierr = unix.IoctlSetPointerInt(int(fd), unix.TUNSETCARRIER, v)
	}); err != nil {
		return extack.Wrap(err, unix.EBADF, "TAP %s", d.cfg.Name)
	}
	if ierr != nil {
		return extack.Wrap(ierr, unix.EIO, "set carrier of %s", d.cfg.Name)
	}
	return nil
}
