// Package extack is manad's one error type for "errno plus message": an errno, the one-line,
// human-readable message the kernel would put in a netlink extended ACK (NLMSGERR_ATTR_MSG) and,
// for an error in a netlink request, the offset of the offending attribute (NLMSGERR_ATTR_OFFS).
// The port model (vnic), the XDP loader, the netlink server (genl, genl/nlattr) and the backend
// all return it; errors.Is matches its errno.
//
// The daemon hands these errors to the netlink server unchanged; the server sends the errno in
// NLMSG_ERROR, the message and the offset as extack attributes.
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
	// Offset is the offending attribute's offset from the start of the request's nlmsghdr
	// (NLMSGERR_ATTR_OFFS); 0 = none, the message is about the request as a whole.
	Offset int
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

// Error returns "message: errno text", as ethtool prints a failed request, and the offset
// when there is one.
func (e *Error) Error() string {
	s := e.Errno.Error()
	if e.Message != "" {
		s = e.Message + ": " + s
	}
	if e.Offset != 0 {
		s += fmt.Sprintf(" (offset %d)", e.Offset)
	}
	return s
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// ExtackMessage returns the message for NLMSGERR_ATTR_MSG.
func (e *Error) ExtackMessage() string { return e.Message }
