// Package extack is the name the port model has long used for manad's one "errno plus message"
// error type, which lives in genl/nlerr (a leaf package every layer and the client share).
// Error, New and Wrap are that type and its constructors under their old names, so existing call
// sites compile unchanged; new code imports genl/nlerr.
package extack

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// Error is nlerr.Error: an errno, the extack message (NLMSGERR_ATTR_MSG) and the offset of the
// attribute to blame (NLMSGERR_ATTR_OFFS). errors.Is(err, unix.EINVAL) and friends match its
// Errno.
type Error = nlerr.Error

// New is nlerr.New: an *Error with errno and a formatted message.
func New(errno unix.Errno, format string, args ...any) error {
	return nlerr.New(errno, format, args...)
}

// Wrap is nlerr.Wrap: err as an *Error with the formatted text before err's own message, and
// err's errno (def if it has none); nil for a nil err.
func Wrap(err error, def unix.Errno, format string, args ...any) error {
	return nlerr.Wrap(err, def, format, args...)
}
