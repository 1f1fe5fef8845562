package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// Error is one problem in a configuration file (a syntax error found by the TOML parser, or a
// semantic one: a value out of range, an unknown key, a duplicate port) or in the state file: a
// position (File, Line) wrapped around manad's one "errno plus message" type, genl/nlerr.Error,
// which Unwrap returns. It is not a second error type: errors.As(err, &xe) with xe an
// *nlerr.Error finds the errno and Msg (the text without the file and line), so a problem that
// reaches a netlink reply reads as the file would say it. It matches errors.Is(err, unix.EINVAL)
// for the configuration, unix.EBADMSG for a corrupt state file. Errors is a list of them.
type Error struct {
	File string // the file name as given to Load or Parse, or the state file's path
	Line int    // 1-based; 0 when the problem has no line
	Msg  string // what is wrong, without the file and line
	Err  error  // the errno Unwrap returns; nil means unix.EINVAL
}

// Error returns "file:line: message", the form editors and compilers use; for a problem
// outside any file (File "": a rule broken by a netlink request), the extack form,
// "message: errno text".
func (e *Error) Error() string {
	if e.File == "" {
		return e.Unwrap()[0].Error()
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// Unwrap returns the problem as an *nlerr.Error (its errno: unix.EINVAL for a bad
// configuration, which is invalid input, unless Err says otherwise; its message: Msg), and Err
// itself when that is more than an errno (ErrStateNewer), so errors.Is finds it too.
func (e *Error) Unwrap() []error {
	xe := &nlerr.Error{Errno: unix.EINVAL, Message: e.Msg}
	if e.Err == nil {
		return []error{xe}
	}
	if !errors.As(e.Err, &xe.Errno) {
		xe.Errno = unix.EIO // an Err without errno: an I/O problem, not the input's
	}
	if _, bare := e.Err.(unix.Errno); bare {
		return []error{xe}
	}
	return []error{xe, e.Err}
}

// ExtackMessage returns Msg, the problem without the file and line, for NLMSGERR_ATTR_MSG.
func (e *Error) ExtackMessage() string { return e.Msg }

// invalid returns the *Error of a configuration rule broken outside a file (a value a request
// gives, a spec built at runtime): EINVAL, with the message the file would give after its
// "FILE:LINE: ".
func invalid(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

// Errors is every problem found in one configuration file, ordered by line. Parse returns it when
// a file has more than one problem, so the user can fix them all at once. It matches
// errors.Is(err, unix.EINVAL), and errors.As(err, &e) with e an *Error finds the first problem.
type Errors []*Error

// maxErrors bounds how many problems one Parse reports; a wrong file can have many.
const maxErrors = 20

// Error returns one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// result turns a list of problems into the error Parse returns: nil, the single *Error, or Errors
// sorted by line (stable, so problems on one line keep the order they were found in).
func result(es []*Error) error {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	if len(es) > maxErrors {
		es = append(es[:maxErrors:maxErrors], &Error{File: es[0].File, Msg: fmt.Sprintf("%d more problems not shown", len(es)-maxErrors)})
	}
	return Errors(es)
}
