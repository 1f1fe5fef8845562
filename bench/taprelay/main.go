// Command taprelay is the baseline of bench/udppps and bench/fabric: the least a userspace
// program can do to connect a TAP device to another TAP, or to a kernel netdev. It copies every
// frame from one side to the other, one goroutine per direction, one read and one write per
// frame, and looks at none of them.
//
//	taprelay TAP_A TAP_B
//	taprelay -uplink TAP DEV
//	taprelay -smoke
//
// TAP_A TAP_B (bench/udppps) attaches to two existing TAPs.
//
// -uplink TAP DEV (bench/fabric) attaches to the existing TAP with virtio-net headers and TSO
// and CSUM offloads on, as manad's ports have them, and to the netdev DEV of the current network
// namespace with an AF_PACKET socket (PACKET_VNET_HDR, PACKET_QDISC_BYPASS,
// PACKET_IGNORE_OUTGOING, promiscuous), as manad's AF_PACKET uplinks: a GSO superframe the TAP
// hands over goes out whole with its header, and one the device's GRO built comes back whole.
// Both ends take the same 10-byte virtio_net_hdr, so no frame is touched on the way.
//
// -smoke (bench-smoke's convention for bench/ programs; needs root) checks the relay end to end
// in a private network namespace: two fresh TAPs, frames sent out of one with an AF_PACKET
// socket, counted as they arrive on the other; it prints how many went through and how fast.
//
// bench: helper (of bench/udppps: bench/report runs it only with -smoke)
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// attach attaches to the existing TAP name; with vnet, with virtio-net headers (the default
// 10 bytes) and the checksum and TSO offloads on.
func attach(name string, vnet bool) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	var ifr [unix.IFNAMSIZ + 64]byte
	copy(ifr[:], name)
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if vnet {
		flags |= unix.IFF_VNET_HDR
	}
	*(*uint16)(unsafe.Pointer(&ifr[unix.IFNAMSIZ])) = flags
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, e)
	}
	if vnet {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETOFFLOAD, unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6); e != 0 {
			unix.Close(fd)
			return nil, fmt.Errorf("TUNSETOFFLOAD %s: %w", name, e)
		}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openPacket opens an AF_PACKET socket on the netdev dev of the current namespace, set up as
// manad's AF_PACKET uplink sets its own (daemon/uplink), without the RX ring: frames are read
// and written with virtio-net headers, bypass the qdisc, are not looped back, and every frame
// the device receives is taken.
func openPacket(dev string) (*os.File, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	err = errors.Join(
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1),
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1),
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1),
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20), // manad's rxQueueBytes
		unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}),
		unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP,
			&unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}))
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("packet socket on %s: %w", dev, err)
	}
	return os.NewFile(uintptr(fd), dev), nil
}

// relay copies every frame src hands over to dst, with a buffer of size bytes.
func relay(dst, src *os.File, size int) {
	buf := make([]byte, size)
	for {
		n, err := src.Read(buf)
		if err != nil {
			if err == io.EOF || errors.Is(err, os.ErrClosed) {
				return
			}
			fmt.Fprintln(os.Stderr, "taprelay:", err)
			os.Exit(1)
		}
		dst.Write(buf[:n]) // a full TAP queue drops the frame, as a wire would
	}
}

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "-smoke" || os.Args[1] == "--smoke") {
		if err := smoke(1000); err != nil {
			fmt.Fprintln(os.Stderr, "taprelay -smoke:", err)
			os.Exit(1)
		}
		return
	}
	uplink := len(os.Args) == 4 && (os.Args[1] == "-uplink" || os.Args[1] == "--uplink")
	if len(os.Args) != 3 && !uplink {
		fmt.Fprintln(os.Stderr, "usage: taprelay TAP_A TAP_B | taprelay -uplink TAP DEV | taprelay -smoke")
		os.Exit(2)
	}
	args, size := os.Args[1:], 65536
	if uplink {
		// A 64 KiB GSO packet, its Ethernet header, two VLAN tags and the virtio_net_hdr.
		args, size = os.Args[2:], 1<<16+256
	}
	a, err := attach(args[0], uplink)
	if err == nil {
		var b *os.File
		if uplink {
			b, err = openPacket(args[1])
		} else {
			b, err = attach(args[1], false)
		}
		if err == nil {
			go relay(a, b, size)
			go relay(b, a, size)
			fmt.Println("ready")
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			<-sig
			return
		}
	}
	fmt.Fprintln(os.Stderr, "taprelay:", err)
	os.Exit(1)
}

// smokeEtherType is the IEEE local experimental EtherType: no stack in the namespace answers it.
const smokeEtherType = 0x88b5

// smoke relays n frames between two TAPs it creates in a new network namespace (which goes away
// with the process) and prints the count and rate.
func smoke(n int) error {
	runtime.LockOSThread() // the namespace belongs to this thread; never unlocked, so it dies with it
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare network namespace: %w", err)
	}
	a, err := attach("relaya", false)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := attach("relayb", false)
	if err != nil {
		return err
	}
	defer b.Close()
	var idx [2]int
	for i, name := range []string{"relaya", "relayb"} {
		if idx[i], err = up(name); err != nil {
			return err
		}
	}
	proto := int(htons(smokeEtherType))
	rx, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return err
	}
	defer unix.Close(rx)
	if err := unix.Bind(rx, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: idx[1]}); err != nil {
		return err
	}
	if err := unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000}); err != nil {
		return err
	}
	tx, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(tx)
	go relay(a, b, 65536)
	go relay(b, a, 65536)

	frame := make([]byte, 64)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, smokeEtherType >> 8, smokeEtherType & 0xff})
	to := &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: idx[0]}
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 2048)
		k := 0
		for k < n {
			if _, _, err := unix.Recvfrom(rx, buf, 0); err != nil {
				break // the timeout: nothing more is coming
			}
			k++
		}
		got <- k
	}()
	start := time.Now()
	for i := range n {
		// Pace the burst a little: the TAP's queue (500 frames) must not overflow before the
		// relay is scheduled on a busy machine.
		if i%100 == 99 {
			time.Sleep(time.Millisecond)
		}
		if err := unix.Sendto(tx, frame, 0, to); err != nil {
			return fmt.Errorf("send on relaya: %w", err)
		}
	}
	k := <-got
	el := time.Since(start)
	fmt.Printf("taprelay: %d of %d frames relayed relaya → relayb in %v (%.0f frames/s)\n", k, n, el.Round(time.Millisecond), float64(k)/el.Seconds())
	if k == 0 {
		return errors.New("no frame went through the relay")
	}
	return nil
}

// up sets name up and returns its interface index.
func up(name string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return 0, fmt.Errorf("SIOCGIFFLAGS %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return 0, fmt.Errorf("SIOCSIFFLAGS %s: %w", name, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("SIOCGIFINDEX %s: %w", name, err)
	}
	return int(ifr.Uint32()), nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
