package tap

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// SetCarrier sets the TAP's carrier (TUNSETCARRIER): off makes the kernel see the link as down
// (NO-CARRIER, operstate DOWN, ethtool "Link detected: no") while IFF_UP stays as the
// administrator left it, the way a NIC driver calls netif_carrier_off while its queues are
// gone. The kernel turns a TAP's carrier on when a queue attaches to it while it has none
// (Open, also of a persistent TAP), so callers set it after Open. Errors: ENODEV after Close; the kernel's errno otherwise.
func (d *Device) SetCarrier(on bool) error {
	if err := d.rlock(); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if len(d.queues) == 0 {
		return nlerr.New(unix.ENODEV, "TAP %s has no queues", d.cfg.Name)
	}
	v := 0
	if on {
		v = 1
	}
	// The argument is a pointer to an int, unlike TUNSETPERSIST's value.
	if ierr := d.queues[0].ioctlPtr(unix.TUNSETCARRIER, v); ierr != nil {
		return nlerr.Wrap(ierr, unix.EIO, "set carrier of %s", d.cfg.Name)
	}
	return nil
}
