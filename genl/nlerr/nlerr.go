// Package nlerr is manad's one error type: an errno with the extended ACK that explains it, as the
// kernel's netlink_ack() sends them (NLMSG_ERROR with NLMSGERR_ATTR_MSG, OFFS, POLICY, MISS_TYPE
// and MISS_NEST) and as mdlayher/netlink's OpError carries them to a client.
//
// Every layer uses it: vnic and the daemon report a broken rule with an errno and a message, the
// generic netlink server sends them on the wire (adding the offset and policy of the attribute to
// blame), and the client returns the server's answer as the same type. It depends on nothing of
// manad, so manactl and any client can use it without linking the server.
package nlerr

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Error is an errno with its extended ACK. It unwraps to Errno, so errors.Is(err, unix.EINVAL)
// and errors.As(err, &errno) see through it; errors.As(err, &e) with e an *Error finds the
// message.
//
// A zero Offset, MissType, MissNest and a nil Policy mean "not given", as on the wire.
type Error struct {
	// Errno is the error number NLMSG_ERROR carries (positive).
	Errno unix.Errno
	// Message is the extack message, NLMSGERR_ATTR_MSG: what is wrong and how to fix it.
	Message string
	// Offset is the offset of the attribute to blame in the request, NLMSGERR_ATTR_OFFS
	// (NL_SET_ERR_MSG_ATTR).
	Offset int
	// Policy is the NLMSGERR_ATTR_POLICY payload: the policy the attribute at Offset failed,
	// as NL_POLICY_TYPE_ATTR_* attributes (netlink_policy_dump_write_attr).
	Policy []byte
	// MissType is the type of a missing required attribute, NLMSGERR_ATTR_MISS_TYPE
	// (NL_REQ_ATTR_CHECK).
	MissType uint16
	// MissNest is the offset of the nest lacking it, NLMSGERR_ATTR_MISS_NEST (0: the top level).
	MissNest int
}

// New returns an *Error with errno and a formatted message. The result satisfies
// errors.Is(err, errno).
func New(errno unix.Errno, format string, args ...any) error {
	return Errorf(errno, format, args...)
}

// Errorf is New returning the *Error itself, for callers that add an offset or a missing
// attribute.
func Errorf(errno unix.Errno, format string, args ...any) *Error {
	return &Error{Errno: errno, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns err as an *Error whose message is the formatted text, followed by ": " and the
// message err carries (an *Error's, or any error's ExtackMessage()), if any. The errno is the
// one err wraps, else def. A nil err gives nil.
//
// Wrap is for a step that failed because of another: "Insufficient memory for new MTU" over a
// bare ENOMEM keeps ENOMEM; "mana_attach failed" over "injected attach fault" (EPROTO) reads
// "mana_attach failed: injected attach fault".
func Wrap(err error, def unix.Errno, format string, args ...any) error {
	if err == nil {
		return nil
	}
	errno := def
	var en unix.Errno
	if errors.As(err, &en) && en != 0 {
		errno = en
	}
	msg := fmt.Sprintf(format, args...)
	var m interface{ ExtackMessage() string }
	if errors.As(err, &m) && m.ExtackMessage() != "" {
		msg += ": " + m.ExtackMessage()
	}
	return &Error{Errno: errno, Message: msg}
}

// Error returns the message, what it blames, then the errno's text, as ethtool prints a netlink
// error ("netlink error: MESSAGE (offset N)", then perror's errno text):
//
//	requested channel count exceeds maximum (offset 32): invalid argument
//	(missing attribute 1): invalid argument
//	operation not supported
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Offset != 0 {
		fmt.Fprintf(&b, " (offset %d)", e.Offset)
	}
	if e.MissType != 0 {
		fmt.Fprintf(&b, " (missing attribute %d)", e.MissType)
	}
	if b.Len() == 0 {
		return e.Errno.Error()
	}
	return strings.TrimPrefix(b.String(), " ") + ": " + e.Errno.Error()
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// ExtackMessage returns the NLMSGERR_ATTR_MSG text.
func (e *Error) ExtackMessage() string { return e.Message }
