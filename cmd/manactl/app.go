package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
)

// app is one manactl invocation: its output streams and global options.
type app struct {
	stdout, stderr io.Writer
	json           bool     // --json
	kernel         bool     // --kernel
	socket         string   // --socket, MANAD_SOCKET, client.DefaultPath
	argv           []string // the arguments manactl was run with, for hints that repeat the command
}

// runtimeError is a failure of what was asked (exit status exitStatus), as opposed to a usage
// error (exit status 1, as ethtool's exit_bad_args): every error a command returns that is not wrapped in runtimeError is a
// usage error.
type runtimeError struct{ err error }

func (e *runtimeError) Error() string { return e.err.Error() }
func (e *runtimeError) Unwrap() error { return e.err }

// failed marks err as a runtime error; nil stays nil.
func failed(err error) error {
	if err == nil {
		return nil
	}
	return &runtimeError{err}
}

// usageErrorf is a usage error (exit status 1, as ethtool).
func usageErrorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// errorLine is the one line manactl prints on stderr for a runtime error. A netlink error reads
// as ethtool prints it ("netlink error: <extack message>", then the errno text, which ethtool
// prints on a second line with perror), e.g.
//
//	netlink error: requested ring size exceeds maximum: Invalid argument
//	netlink error: Operation not permitted
//
// An error with a hint (hintError) prints the hint; the kernel's error for a request that went
// to the kernel because manad was not running is followed by a second line, "manad is not
// running at PATH". Other errors (connecting to manad, reading a file, ioctl) print as they are.
// A *client.Error (genl/nlerr's type) found here is a server's answer: manactl's own checks
// return usage errors or an errnoError, never that type.
func errorLine(err error) string {
	var he *hintError
	if errors.As(err, &he) {
		return he.line
	}
	var ke *kernelError
	if errors.As(err, &ke) && ke.manadDown != "" {
		return errorLine(ke.err) + "\nmanad is not running at " + ke.manadDown
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		if ce.Message != "" {
			return "netlink error: " + ce.Message + ": " + strerror(ce.Errno)
		}
		return "netlink error: " + strerror(ce.Errno)
	}
	var errno unix.Errno
	if errors.As(err, &errno) && err.Error() == errno.Error() {
		return strerror(errno)
	}
	return err.Error()
}

// strerror is the C library's strerror text: Go's errno texts are glibc's with the first letter
// lowered ("no such device" for "No such device").
func strerror(e unix.Errno) string {
	s := e.Error()
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// manadNotRunning reports whether err is client.Dial failing because nothing listens on the
// socket (no socket file, or a stale one): then the ethtool-family commands go to the kernel.
// Other connect errors (EACCES on the socket, say) mean manad runs but cannot be reached, and are
// reported.
func manadNotRunning(err error) bool {
	return strings.HasPrefix(err.Error(), "cannot connect to manad at ") &&
		(errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED))
}

// dialManad connects to manad for a manad-only command. Its error reads "cannot connect to
// manad at PATH: …".
func (a *app) dialManad(cmd string) (*client.Client, error) {
	if a.kernel {
		return nil, usageErrorf("%s is a manad command: --kernel does not apply", cmd)
	}
	c, err := client.Dial(a.socket)
	if err != nil {
		return nil, failed(&connectError{err})
	}
	return c, nil
}

// ethtoolDo runs op, an ethtool-family request, against manad, or against the kernel's ethtool
// netlink when --kernel is given, when manad is not running, or when manad answers ENODEV ("no
// device matches name": manad does not own the device in the caller's network namespace). One
// udev rule and one habit thereby serve software ports and real NICs alike. op must not write
// output: it may run twice. The kernel's errors are kernelError; when manad was not running, they
// print with a second line that says so.
func (a *app) ethtoolDo(ctx context.Context, op func(c *client.Client) error) error {
	onKernel := func(manadDown string) error {
		kc, err := client.DialKernel()
		if err != nil {
			return failed(&kernelError{&connectError{err}, manadDown})
		}
		defer kc.Close()
		if err := op(kc); err != nil {
			return failed(&kernelError{err, manadDown})
		}
		return nil
	}
	if a.kernel {
		return onKernel("")
	}
	c, err := client.Dial(a.socket)
	if err != nil {
		if manadNotRunning(err) {
			return onKernel(a.socket)
		}
		return failed(&connectError{err})
	}
	err = op(c)
	c.Close()
	if errors.Is(err, unix.ENODEV) && ctx.Err() == nil {
		return onKernel("")
	}
	return failed(err)
}
