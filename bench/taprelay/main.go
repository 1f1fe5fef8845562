// Command taprelay is the baseline of bench/udppps: the least a userspace program can do to
// connect two TAP devices. It attaches to two existing TAPs and copies every frame from one to
// the other, one goroutine per direction, one read and one write per frame.
//
//	taprelay TAP_A TAP_B
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func attach(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	var ifr [unix.IFNAMSIZ + 64]byte
	copy(ifr[:], name)
	*(*uint16)(unsafe.Pointer(&ifr[unix.IFNAMSIZ])) = unix.IFF_TAP | unix.IFF_NO_PI
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, e)
	}
	return os.NewFile(uintptr(fd), name), nil
}

func relay(dst, src *os.File) {
	buf := make([]byte, 65536)
	for {
		n, err := src.Read(buf)
		if err != nil {
			if err == io.EOF {
				return
			}
			fmt.Fprintln(os.Stderr, "taprelay:", err)
			os.Exit(1)
		}
		dst.Write(buf[:n]) // a full TAP queue drops the frame, as a wire would
	}
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: taprelay TAP_A TAP_B")
		os.Exit(2)
	}
	a, err := attach(os.Args[1])
	if err == nil {
		var b *os.File
		if b, err = attach(os.Args[2]); err == nil {
			go relay(a, b)
			go relay(b, a)
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
