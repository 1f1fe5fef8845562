// Package extack is the error type the port model returns: an errno plus the one-line,
// human-readable message the kernel would put in a netlink extended ACK (NLMSGERR_ATTR_MSG).
//
// The daemon hands these errors to the netlink server unchanged; the server takes the errno with
// errors.As(err, &unix.Errno) and the message through the ExtackMessage method, so the two layers
// agree without importing each other.
package extack

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Error is an errno-backed error with an extack message. errors.Is(err, unix.EINVAL) and friends
// match its Errno.
type Error struct {
	Errno   unix.Errno
	Message string
}

// New returns an *Error with the formatted message.
func New(errno unix.Errno, format string, args ...any) error {
	return &Error{Errno: errno, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error that says which operation failed and why: the formatted message,
// followed by the cause's own extack message when it has one. The errno is the cause's (or def
// when the cause carries none), so an ENOMEM from the page allocator stays ENOMEM.
func Wrap(err error, def unix.Errno, format string, args ...any) error {
	if err == nil {
		return nil
	}
	errno := def
	var en unix.Errno
	if errors.As(err, &en) {
		errno = en
	}
	msg := fmt.Sprintf(format, args...)
	var m interface{ ExtackMessage() string }
	if errors.As(err, &m) && m.ExtackMessage() != "" {
		msg += ": " + m.ExtackMessage()
	}
	return &Error{Errno: errno, Message: msg}
}

// Error returns "message: errno text", as ethtool prints a failed request.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Errno.Error()
	}
	return e.Message + ": " + e.Errno.Error()
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// ExtackMessage returns the message for NLMSGERR_ATTR_MSG.
func (e *Error) ExtackMessage() string { return e.Message }
