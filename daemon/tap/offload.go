package tap

import (
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/vnic/extack"
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
		return extack.New(unix.ENODEV, "TAP %s has no queues", d.cfg.Name)
	}
	q := d.queues[0]
	if !d.cfg.Offload {
		if err := fileIoctl(q, unix.TUNSETOFFLOAD, 0); err != nil {
			return extack.Wrap(err, unix.EIO, "clear the offloads of %s", d.cfg.Name)
		}
		return nil
	}
	if err := queueIoctl(q, unix.TUNSETVNETHDRSZ, VnetHdrLen); err != nil {
		return extack.Wrap(err, unix.EIO, "set the virtio header size of %s", d.cfg.Name)
	}
	want := uint(0)
	for _, o := range offloadNames {
		want |= o.bit
	}
	var err error
	for i := len(offloadNames); i > 0; i-- {
		if err = fileIoctl(q, unix.TUNSETOFFLOAD, int(want)); err == nil {
			d.offloads = want
			d.log.Info("TAP offloads", "on", OffloadString(want))
			return nil
		}
		if !errors.Is(err, unix.EINVAL) {
			break
		}
		want &^= offloadNames[i-1].bit
	}
	return extack.Wrap(err, unix.EIO, "set the offloads of %s", d.cfg.Name)
}

// queueIoctl is fileIoctl for a request whose argument is a pointer to an int.
func queueIoctl(f *os.File, req uint, v int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = unix.IoctlSetPointerInt(int(fd), req, v) }); err != nil {
		return err
	}
	return ierr
}

// VnetHdr reports whether frames read from and written to the queues carry a virtio header of
// VnetHdrLen bytes (Config.Offload).
func (d *Device) VnetHdr() bool { return d.cfg.Offload }

// Offloads returns the TUN_F_* offloads in force: 0 without Config.Offload.
func (d *Device) Offloads() uint {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.offloads
}
