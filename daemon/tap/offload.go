package tap

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// VnetHdrLen is the virtio header a TAP with Config.Offload puts before every frame
// (virtio_net_hdr_v1, TUNSETVNETHDRSZ).
const VnetHdrLen = 12

// The offloads of a TAP (TUN_F_* in linux/if_tun.h): what the kernel may hand manad unfinished.
const (
	OffloadCsum   = 0x01 // partial checksums (NEEDS_CSUM)
	OffloadTSO4   = 0x02 // TCP superframes over IPv4
	OffloadTSO6   = 0x04 // TCP superframes over IPv6
	OffloadTSOECN = 0x08 // TSO with CWR set
	OffloadUSO4   = 0x20 // UDP segmentation over IPv4 (Linux 6.2)
	OffloadUSO6   = 0x40 // UDP segmentation over IPv6 (Linux 6.2)
)

// offloadNames name the offloads in logs, in probing order: the later ones are given up first
// when the kernel refuses the set.
var offloadNames = []struct {
	bit  uint
	name string
}{{OffloadCsum, "csum"}, {OffloadTSO4, "tso4"}, {OffloadTSO6, "tso6"}, {OffloadTSOECN, "tso-ecn"},
	{OffloadUSO4, "uso4"}, {OffloadUSO6, "uso6"}}

// OffloadString names the offloads set in f ("csum,tso4,…", or "none").
func OffloadString(f uint) string {
	var b []string
	for _, o := range offloadNames {
		if f&o.bit != 0 {
			b = append(b, o.name)
		}
	}
	if len(b) == 0 {
		return "none"
	}
	return strings.Join(b, ",")
}

// tunFlags are the TUNSETIFF flags of the device's queues.
func (d *Device) tunFlags() uint16 {
	if d.cfg.Offload {
		return tunFlags | unix.IFF_VNET_HDR
	}
	return tunFlags
}

// setOffload sets the virtio header size and the largest set of offloads the kernel accepts,
// dropping one offload at a time, last first (a kernel older than 6.2 refuses the USO bits as
// unknown). Both settings belong to the device, not the queue, so queues attached later share
// them, and a re-attached persistent TAP gets them again here. Without Config.Offload it turns
// every offload off: a persistent TAP keeps them across a re-attach, and superframes handed to a
// reader that expects no virtio header would be read as oversized frames. Caller owns d.
func (d *Device) setOffload() error {
	if len(d.queues) == 0 {
		return nlerr.New(unix.ENODEV, "TAP %s has no queues", d.cfg.Name)
	}
	q := d.queues[0]
	if !d.cfg.Offload {
		if err := q.ioctl(unix.TUNSETOFFLOAD, 0); err != nil {
			return nlerr.Wrap(err, unix.EIO, "clear the offloads of %s", d.cfg.Name)
		}
		return nil
	}
	if err := q.ioctlPtr(unix.TUNSETVNETHDRSZ, VnetHdrLen); err != nil {
		return nlerr.Wrap(err, unix.EIO, "set the virtio header size of %s", d.cfg.Name)
	}
	want := uint(0)
	for _, o := range offloadNames {
		want |= o.bit
	}
	var err error
	for i := len(offloadNames); i > 0; i-- {
		if err = q.ioctl(unix.TUNSETOFFLOAD, int(want)); err == nil {
			d.offloads = want
			d.log.Info("TAP offloads", "on", OffloadString(want))
			return nil
		}
		if !errors.Is(err, unix.EINVAL) {
			break
		}
		want &^= offloadNames[i-1].bit
	}
	return nlerr.Wrap(err, unix.EIO, "set the offloads of %s", d.cfg.Name)
}

// VnetHdr reports whether frames read from and written to the queues carry a virtio header of
// VnetHdrLen bytes (Config.Offload).
func (d *Device) VnetHdr() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.cfg.Offload
}

// Offloads returns the TUN_F_* offloads in force: 0 without Config.Offload.
func (d *Device) Offloads() uint {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.offloads
}

// SetOffload turns the virtio header and the offloads on or off (Config.Offload) on a TAP that
// is open, keeping the netdev (its index, addresses and routes): the kernel fixes IFF_VNET_HDR
// when the first queue attaches, so every queue is detached and attached again, the TAP held
// with IFF_PERSIST meanwhile so that it is not deleted. The old queue files are closed; callers
// stop using them first and take the new ones from Queues. As after Open, the kernel turns the
// carrier on: callers set it again. Errors: ENODEV after Close; the kernel's errno when a step
// fails, the TAP then possibly left with fewer queues (as SetQueues leaves it) and its previous
// setting.
func (d *Device) SetOffload(on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nlerr.New(unix.ENODEV, "TAP %s is closed", d.Name())
	}
	if d.cfg.Offload == on {
		return nil
	}
	n := len(d.queues)
	if n == 0 {
		return nlerr.New(unix.ENODEV, "TAP %s has no queues", d.cfg.Name)
	}
	if !d.cfg.Persistent {
		if err := setPersist(d.queues[0], true); err != nil {
			return nlerr.Wrap(err, unix.EIO, "hold %s with IFF_PERSIST", d.cfg.Name)
		}
	}
	closeFiles(d.queues)
	d.queues = nil
	prev := d.cfg.Offload
	d.cfg.Offload = on
	files, err := d.attachQueues(n)
	if err != nil {
		// Back with the previous setting, so the caller can restart on it.
		d.cfg.Offload = prev
		if files, err2 := d.attachQueues(n); err2 == nil {
			d.queues = files
			_ = d.setOffload()
		}
		d.restorePersist()
		return d.wrapAttach(err)
	}
	d.queues = files
	d.offloads = 0
	err = d.setOffload()
	d.restorePersist()
	if err != nil {
		return err
	}
	d.logger().Info("TAP offloads changed", "vnet_hdr", on, "on", OffloadString(d.offloads))
	return nil
}

// restorePersist clears the IFF_PERSIST SetOffload held a non-persistent TAP with. Caller holds
// d.mu.
func (d *Device) restorePersist() {
	if d.cfg.Persistent || len(d.queues) == 0 {
		return
	}
	if err := setPersist(d.queues[0], false); err != nil {
		d.logger().Error("clearing IFF_PERSIST after an offload change", "err", err)
	}
}
