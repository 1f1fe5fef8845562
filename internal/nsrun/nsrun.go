// Package nsrun runs code, commands and sockets inside a named network namespace (one under
// /run/netns, as `ip netns add` makes): the plumbing the integration tests (tests/harness) and
// the benchmark programs (bench/seeds) share. It lives outside tests/ so that a program can use
// it; it links nothing of manad.
package nsrun

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/vishvananda/netns"
)

// Name returns a name unique to this process, short enough for an interface or a namespace
// (≤ 15 bytes): prefix + the PID's last digits + suffix, cut from the left when longer.
func Name(prefix, suffix string) string {
	n := fmt.Sprintf("%s%d%s", prefix, os.Getpid()%100000, suffix)
	if len(n) > 15 {
		n = n[len(n)-15:]
	}
	return n
}

// In runs f on an OS thread that has entered network namespace ns (a name under /run/netns;
// "" runs f as is) and returns f's error, or the error of entering ns. Sockets f creates stay in
// ns after it returns. The thread goes back to its own namespace afterwards (InHandle).
func In(ns string, f func() error) error {
	if ns == "" {
		return f()
	}
	h, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("netns %s: %w", ns, err)
	}
	defer h.Close()
	return InHandle(h, f)
}

// InHandle runs f on an OS thread that has entered network namespace ns and returns f's
// error, or the error of entering ns. The thread goes back to its own namespace before it is
// handed back to the scheduler, so no other goroutine ever runs in ns by accident; sockets f
// creates stay in ns.
//
// Throwing the thread away instead (exiting the goroutine while locked) is not enough: the
// runtime never ends the process's main thread, it parks it for good, and a main thread parked
// in ns holds the namespace alive after `ip netns del`, so that the devices in it never go.
// Only when the way back fails does the thread stay locked and go with the goroutine.
func InHandle(ns netns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("the thread's own network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread() // still in its own namespace
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		err = f()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Output runs a command (through `ip netns exec ns` when ns is not "") and returns its combined
// output, and the error of a command that failed or could not start.
func Output(ns string, args ...string) (string, error) {
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Listen opens a listener on addr ("tcp", "10.0.0.2:5201") inside namespace ns.
func Listen(ns, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := In(ns, func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// ListenPacket opens a UDP socket on addr inside namespace ns.
func ListenPacket(ns, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := In(ns, func() (err error) {
		c, err = net.ListenPacket("udp", addr)
		return err
	})
	return c, err
}

// Dial connects from inside namespace ns, giving up after 5 seconds.
func Dial(ns, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := In(ns, func() (err error) {
		c, err = net.DialTimeout(network, addr, 5*time.Second)
		return err
	})
	return c, err
}
