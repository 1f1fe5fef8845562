// Command taprelay is the baseline of bench/udppps and bench/fabric: the least a userspace
// program can do to connect a TAP device to another TAP, or to a kernel netdev. It copies every
// frame from one side to the other, one read and one write per frame, and looks at none of them:
// by default one goroutine per direction, parked until a frame comes; with -poll one busy-polling
// thread for both.
//
//	taprelay [-poll] TAP_A TAP_B
//	taprelay [-poll] -uplink TAP DEV
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
// By default each direction's goroutine parks in its read (os.File, Go's netpoller) until a frame
// comes: a frame wakes a parked thread. -poll is instead a MODEL of the floor of a busy-polling
// forwarder (issue 29), the least a busy-polling user-space forwarder does: a system call per
// frame and per empty look. One goroutine, locked to its thread, serves both directions: each
// pass reads each side once without waiting (raw read(2) on a TAP, recvfrom(2) with MSG_DONTWAIT
// on the AF_PACKET socket: the descriptors stay out of Go's netpoller) and writes a frame it got
// to the other side at once (write(2), or sendto(2) with MSG_DONTWAIT), one frame per look, so
// that a reply the kernel makes inside that write is read in the same pass; after 20 µs without a
// frame it yields its CPU (sched_yield), as manad's poller does (datapath.YieldAfter),
// so that a round trip's other end waiting for that CPU runs. It does what manad's poller must do
// per frame and nothing else (no epoll, no ring, no segment), so manad's polling measured against
// it shows what manad costs above that floor. It has no polling window: it spins whether frames
// come or not, so a benchmark that runs it beside other paths stops it (SIGSTOP) outside its
// turns (daemon/datapath's BenchmarkRoundTripBinary, bench/fabric).
//
// -smoke (bench-smoke's convention for bench/ programs; needs root) checks the relay end to end
// in a private network namespace, in both forms and both modes (parking and -poll): fresh TAPs
// (and for -uplink a veth pair whose one end is DEV), frames sent into one side with an AF_PACKET
// socket and counted as they arrive on the other, in each direction; it prints how many went
// through and how fast.
//
// bench: helper (of bench/udppps: bench/report runs it only with -smoke)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
)

// attachFD attaches to the existing TAP name and returns its non-blocking descriptor; with vnet,
// with virtio-net headers (the default 10 bytes) and the checksum and TSO offloads on.
func attachFD(name string, vnet bool) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, err
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
		return -1, fmt.Errorf("TUNSETIFF %s: %w", name, e)
	}
	if vnet {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETOFFLOAD, unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6); e != 0 {
			unix.Close(fd)
			return -1, fmt.Errorf("TUNSETOFFLOAD %s: %w", name, e)
		}
	}
	return fd, nil
}

// openPacketFD opens an AF_PACKET socket on the netdev dev of the current namespace, set up as
// manad's AF_PACKET uplink sets its own (daemon/uplink), without the RX ring: frames are read
// and written with virtio-net headers, bypass the qdisc, are not looped back, and every frame
// the device receives is taken. It returns the non-blocking descriptor.
func openPacketFD(dev string) (int, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
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
		return -1, fmt.Errorf("packet socket on %s: %w", dev, err)
	}
	return fd, nil
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

// end is one side of the busy-polling relay: a raw non-blocking descriptor, a TAP's or (sock)
// an AF_PACKET socket's, which Go's netpoller does not know.
type end struct {
	name string // the device's
	fd   int
	sock bool
}

// read takes one frame into buf without waiting and returns its length, or the errno (EAGAIN:
// none queued): read(2) on a TAP, recvfrom(2) with MSG_DONTWAIT on a socket. It is a raw system
// call, as manad's rawRead and its uplink's recvTrunc: the descriptor never blocks, so the
// scheduler need not be told.
func (e end) read(buf []byte) (int, unix.Errno) {
	if e.sock {
		n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(e.fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)),
			unix.MSG_DONTWAIT, 0, 0)
		return int(n), errno
	}
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(e.fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)))
	return int(n), errno
}

// write hands frame b to the side without waiting: write(2) on a TAP, sendto(2) with
// MSG_DONTWAIT on a socket (to the device it is bound to). Errors: the errno.
func (e end) write(b []byte) unix.Errno {
	if e.sock {
		_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(e.fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
			unix.MSG_DONTWAIT, 0, 0)
		return errno
	}
	_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(e.fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return errno
}

// pollRelay is the busy-polling relay (-poll) between the two sides, with a buffer of size
// bytes, until stop is set: one goroutine locked to its thread (its CPU time is the polling's),
// each pass one read of each side and, for a frame, one write to the other (a full queue drops
// it, as a wire would); a sched_yield after datapath.YieldAfter without a frame (manad's poller's
// bound, so that the model pays what manad pays for it). It returns a read's error other than
// EAGAIN and EINTR (a TAP whose device went away).
func pollRelay(ends [2]end, size int, stop *atomic.Bool) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, size)
	last := time.Now()
	for !stop.Load() {
		found := false
		for s := range ends {
			n, errno := ends[s].read(buf)
			switch errno {
			case 0:
			case unix.EAGAIN, unix.EINTR:
				continue
			default:
				return fmt.Errorf("read %s: %w", ends[s].name, errno)
			}
			found = true
			if n > 0 {
				_ = ends[1-s].write(buf[:n]) // ENOBUFS, EAGAIN: dropped
			}
		}
		if now := time.Now(); found {
			last = now
		} else if now.Sub(last) >= datapath.YieldAfter {
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			last = now
		}
	}
	return nil
}

// frameSize is the relay's buffer: 64 KiB frames between two TAPs; with uplink, a 64 KiB GSO
// packet, its Ethernet header, two VLAN tags and the virtio_net_hdr.
func frameSize(uplink bool) int {
	if uplink {
		return 1<<16 + 256
	}
	return 65536
}

// open opens the relay's two sides, side A the TAP tapA and side B the TAP or (uplink) the netdev
// b, as raw descriptors; on error it closes what it opened.
func open(tapA, b string, uplink bool) ([2]end, error) {
	a, err := attachFD(tapA, uplink)
	if err != nil {
		return [2]end{}, err
	}
	var fd int
	if uplink {
		fd, err = openPacketFD(b)
	} else {
		fd, err = attachFD(b, false)
	}
	if err != nil {
		unix.Close(a)
		return [2]end{}, err
	}
	return [2]end{{name: tapA, fd: a}, {name: b, fd: fd, sock: uplink}}, nil
}

// start starts the relay between the two sides (consumed: closed by the returned stop, which
// returns once the relay's goroutines are done): the parking relay or, with poll, the
// busy-polling one. errc reports the busy-polling relay's failure.
func start(ends [2]end, uplink, poll bool) (stop func(), errc <-chan error) {
	size := frameSize(uplink)
	ec := make(chan error, 1)
	if poll {
		var halt atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := pollRelay(ends, size, &halt); err != nil {
				ec <- err
			}
		}()
		return func() {
			halt.Store(true)
			<-done
			unix.Close(ends[0].fd)
			unix.Close(ends[1].fd)
		}, ec
	}
	a, b := os.NewFile(uintptr(ends[0].fd), ends[0].name), os.NewFile(uintptr(ends[1].fd), ends[1].name)
	done := make(chan struct{}, 2)
	go func() { relay(a, b, size); done <- struct{}{} }()
	go func() { relay(b, a, size); done <- struct{}{} }()
	return func() {
		a.Close() // a read parked on it returns os.ErrClosed
		b.Close()
		<-done
		<-done
	}, ec
}

func main() {
	poll := flag.Bool("poll", false, "busy-poll both sides from one locked thread (a model of the busy-polling floor) instead of parking")
	uplink := flag.Bool("uplink", false, "TAP DEV: a TAP with virtio-net headers and the netdev DEV over AF_PACKET")
	smokeRun := flag.Bool("smoke", false, "check the relay end to end in a private network namespace (needs root)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: taprelay [-poll] TAP_A TAP_B | taprelay [-poll] -uplink TAP DEV | taprelay -smoke")
	}
	flag.Parse()
	if *smokeRun {
		if err := smoke(1000); err != nil {
			fmt.Fprintln(os.Stderr, "taprelay -smoke:", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	ends, err := open(flag.Arg(0), flag.Arg(1), *uplink)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taprelay:", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	_, errc := start(ends, *uplink, *poll)
	fmt.Println("ready")
	select {
	case <-sig:
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "taprelay:", err)
		os.Exit(1)
	}
}

// smokeEtherType is the IEEE local experimental EtherType: no stack in the namespace answers it.
const smokeEtherType = 0x88b5

// smoke checks the relay in a new network namespace (which goes away with the process): both
// forms, parking and busy-polling, n frames each way, and prints the counts and rates.
func smoke(n int) error {
	runtime.LockOSThread() // the namespace belongs to this thread; never unlocked, so it dies with it
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare network namespace: %w", err)
	}
	i := 0
	for _, uplink := range []bool{false, true} {
		for _, poll := range []bool{false, true} {
			mode := "TAP_A TAP_B"
			if uplink {
				mode = "-uplink TAP DEV"
			}
			if poll {
				mode = "-poll " + mode
			}
			if err := smokeOne(fmt.Sprint("relay", i), mode, n, uplink, poll); err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			i++
		}
	}
	return nil
}

// smokeOne relays n frames each way through a relay of the given form and mode, between
// devices named prefix+"a" and prefix+"b" it makes: two TAPs, or with uplink a TAP (with
// virtio-net headers) and a veth whose peer (prefix+"p") is the wire. Frames go into one side
// with an AF_PACKET socket and are counted as they arrive on the other.
func smokeOne(prefix, mode string, n int, uplink, poll bool) error {
	devA, devB := prefix+"a", prefix+"b"
	sides := [2]string{devA, devB} // where frames are sent and counted
	if uplink {
		peer := prefix + "p"
		if out, err := exec.Command("ip", "link", "add", devB, "type", "veth", "peer", "name", peer).CombinedOutput(); err != nil {
			return fmt.Errorf("ip link add %s type veth: %w: %s", devB, err, strings.TrimSpace(string(out)))
		}
		defer exec.Command("ip", "link", "del", devB).Run()
		sides[1] = peer
		// DEV is up before the relay binds to it, as vx0 is in bench/fabric: a packet socket
		// bound to a device that is down reports ENETDOWN to its first read.
		for _, name := range []string{devB, sides[1]} {
			if _, err := up(name); err != nil {
				return err
			}
		}
	}
	ends, err := open(devA, devB, uplink) // makes the TAPs
	if err != nil {
		return err
	}
	var idx [2]int
	for i, name := range sides {
		if idx[i], err = up(name); err != nil {
			unix.Close(ends[0].fd)
			unix.Close(ends[1].fd)
			return err
		}
	}
	stop, errc := start(ends, uplink, poll)
	defer stop()
	for d := range 2 {
		k, el, err := smokeDirection(idx[d], idx[1-d], n)
		if err != nil {
			return err
		}
		select {
		case err := <-errc:
			return fmt.Errorf("relay: %w", err)
		default:
		}
		fmt.Printf("taprelay %s: %d of %d frames relayed %s → %s in %v (%.0f frames/s)\n", mode, k, n, sides[d], sides[1-d],
			el.Round(time.Millisecond), float64(k)/el.Seconds())
		if k == 0 {
			return fmt.Errorf("no frame went through the relay %s → %s", sides[d], sides[1-d])
		}
	}
	return nil
}

// smokeDirection sends n frames out of interface from and counts those that arrive on
// interface to within 200 ms of the one before.
func smokeDirection(from, to, n int) (int, time.Duration, error) {
	proto := int(htons(smokeEtherType))
	rx, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(rx)
	if err := unix.Bind(rx, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: to}); err != nil {
		return 0, 0, err
	}
	if err := unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000}); err != nil {
		return 0, 0, err
	}
	tx, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(tx)

	frame := make([]byte, 64)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, smokeEtherType >> 8, smokeEtherType & 0xff})
	dst := &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: from}
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
		if err := unix.Sendto(tx, frame, 0, dst); err != nil {
			<-got
			return 0, 0, fmt.Errorf("send: %w", err)
		}
	}
	k := <-got
	return k, time.Since(start), nil
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
